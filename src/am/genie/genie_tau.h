/*
 * genie_tau.h
 *		How many LSH functions a genie index needs for GENIE's tau-ANN
 *		guarantee: a row's match count c over m functions estimates its
 *		collision probability s with the query, and the ranking by count is
 *		trustworthy when |c / m - s| <= epsilon for the rows that matter.
 *
 * Plain C with no PostgreSQL header, unit-testable standalone.
 */
#ifndef GENIE_TAU_H
#define GENIE_TAU_H

#include <stdint.h>

/* the grid of collision probabilities genie_tau_binomial maximizes over */
#define GENIE_TAU_GRID 200

/* GENIE's concentration bound: ceil(2 ln(3 / delta) / epsilon^2) */
extern uint32_t genie_tau_bound(double epsilon, double delta);

/*
 * P(|X / m - s| > epsilon) for X ~ Binomial(m, s), summed exactly from the
 * two tails (each from its edge outwards until the terms vanish).
 */
extern double genie_tau_miss(uint32_t m, double s, double epsilon);

/* the largest genie_tau_miss over s = j / GENIE_TAU_GRID, j = 0..GENIE_TAU_GRID */
extern double genie_tau_worst_miss(uint32_t m, double epsilon);

/*
 * The smallest m in [1, hi] at which genie_tau_worst_miss is at most delta,
 * found by bisection (hi must satisfy it; the bound does), so that each
 * row's count is within epsilon * m of its mean with probability 1 - delta
 * whatever its collision probability.
 */
extern uint32_t genie_tau_binomial(double epsilon, double delta, uint32_t hi);

#endif							/* GENIE_TAU_H */
