/*
 * gi_pq_select.h
 *		IVF-PQ arithmetic every backend must compute alike: a distance's
 *		finish in the metric's form, and the selective searches (JUNO's
 *		threshold search and its hit-count mode): the per-store density
 *		table, a sub-space's threshold, a code's integer reward and a
 *		record's estimate from its summed rewards.
 *
 * Header-only plain C (static inline), included by the host backend and
 * by the CUDA module, where the functions marked GI_PQ_HD run on the
 * device too.  Every double operation is written out with GI_PQ_ADD and
 * friends, which are the round-to-nearest intrinsics on the device, so
 * that no multiply-add is contracted there and both sides give the same
 * bits.  Definitions and reasons in docs/pq.md ("Selective search").
 */
#ifndef GI_PQ_SELECT_H
#define GI_PQ_SELECT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "gi_kind_ivfpq.h"

#ifdef __CUDACC__
#define GI_PQ_HD __host__ __device__
#else
#define GI_PQ_HD
#endif

#if defined(__CUDA_ARCH__)
#define GI_PQ_ADD(a, b)		__dadd_rn((a), (b))
#define GI_PQ_SUB(a, b)		__dsub_rn((a), (b))
#define GI_PQ_MUL(a, b)		__dmul_rn((a), (b))
#define GI_PQ_DIV(a, b)		__ddiv_rn((a), (b))
#define GI_PQ_SQRT(a)		__dsqrt_rn(a)
#else
#define GI_PQ_ADD(a, b)		((a) + (b))
#define GI_PQ_SUB(a, b)		((a) - (b))
#define GI_PQ_MUL(a, b)		((a) * (b))
#define GI_PQ_DIV(a, b)		((a) / (b))
#define GI_PQ_SQRT(a)		sqrt(a)
#endif

/* density levels: the radius of an entry's 1, 2, 4, ..., 256 nearest entries */
#define GI_PQ_LEVELS		9

/* the largest reward of one sub-space, so that m of them fit in 32 bits */
static inline GI_PQ_HD uint32_t
gi_pq_reward_max(uint32_t m)
{
	uint32_t	r = UINT32_MAX / (m > 0 ? m : 1);

	return r < 65535u ? r : 65535u;
}

/* the level of a selection of `select` entries (a power of two) */
static inline GI_PQ_HD uint32_t
gi_pq_level(uint32_t select)
{
	uint32_t	level = 0;

	while (level + 1 < GI_PQ_LEVELS && (2u << level) <= select)
		level++;
	return level;
}

/* the inner sphere of the hit-count mode: a quarter of the selection */
static inline GI_PQ_HD uint32_t
gi_pq_inner_level(uint32_t level)
{
	return level >= 2 ? level - 2 : 0;
}

static inline int
gi_pq_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/*
 * The density table of a store (host only): radii[(level * m + s) * ksub
 * + e] is the Euclidean distance from entry e of sub-space s to its
 * 2^level-th nearest entry of that codebook, itself counted first (level
 * 0: 0; levels beyond ksub: the farthest).  work holds ksub doubles.
 */
static inline void
gi_pq_radii(const float *books, uint32_t m, uint32_t ksub, uint32_t dsub,
			float *radii, double *work)
{
	for (uint32_t s = 0; s < m; s++)
	{
		const float *book = books + (size_t) s * ksub * dsub;

		for (uint32_t e = 0; e < ksub; e++)
		{
			for (uint32_t o = 0; o < ksub; o++)
			{
				double		d = 0.0;

				for (uint32_t j = 0; j < dsub; j++)
				{
					double		t = (double) book[(size_t) e * dsub + j] -
						book[(size_t) o * dsub + j];

					d += t * t;
				}
				work[o] = d;
			}
			qsort(work, ksub, sizeof(double), gi_pq_cmp_double);
			for (uint32_t level = 0; level < GI_PQ_LEVELS; level++)
			{
				uint32_t	n = 1u << level;

				radii[((size_t) level * m + s) * ksub + e] =
					(float) sqrt(work[(n < ksub ? n : ksub) - 1]);
			}
		}
	}
}

/*
 * The threshold of one sub-space: table values up to it are selected.
 * vmin is the sub-space's smallest table value (in distance sense: L2 the
 * squared distance, IP and cosine minus the inner product), r the density
 * radius of the entry giving it, qnorm the norm of the query's sub-vector
 * (IP and cosine).  The ball around the query of radius |q - e*| + r, or
 * the half-space q.e >= q.e* - |q| r, holds e*'s 2^level nearest entries.
 */
static inline GI_PQ_HD float
gi_pq_threshold(uint32_t metric, float vmin, float r, double qnorm, float scale)
{
	double		sr = GI_PQ_MUL((double) scale, (double) r);

	if (metric == GI_METRIC_L2)
	{
		double		t = GI_PQ_ADD(GI_PQ_SQRT((double) vmin), sr);

		return (float) GI_PQ_MUL(t, t);
	}
	return (float) GI_PQ_ADD((double) vmin, GI_PQ_MUL(qnorm, sr));
}

/*
 * The factor of juno's rewards: rcap / rmax, where rmax is the largest
 * tau - vmin of the table, so that the largest reward is rcap; 0 when the
 * table gives no room (no reward then).
 */
static inline GI_PQ_HD double
gi_pq_factor(double rmax, uint32_t rcap)
{
	if (!(rmax > 0.0) || isinf(rmax))
		return 0.0;
	return GI_PQ_DIV((double) rcap, rmax);
}

/*
 * The reward of a code whose table value is v: juno, the distance it is
 * below the threshold tau times factor (gi_pq_factor), truncated; hits, 2
 * inside the inner threshold, 1 inside tau.  0 when not selected.
 */
static inline GI_PQ_HD uint32_t
gi_pq_reward(uint32_t mode, float v, float tau_in, float tau, double factor, uint32_t rcap)
{
	double		w;

	if (mode == GI_PQ_SEARCH_HITS)
		return v <= tau_in ? 2u : v <= tau ? 1u : 0u;
	if (!(v < tau))
		return 0;
	w = GI_PQ_MUL(GI_PQ_SUB((double) tau, (double) v), factor);
	return w >= (double) rcap ? rcap : (uint32_t) w;
}

/*
 * The value of one reward in distance units: juno, 1 / factor; hits, the
 * mean over sub-spaces of tau - vmin per reward step (span = the sum of
 * tau - vmin), so that a record hitting every inner sphere gets the sum
 * of the vmin and one hitting nothing the sum of the tau.
 */
static inline GI_PQ_HD double
gi_pq_unit(uint32_t mode, double factor, double span, uint32_t m)
{
	if (mode == GI_PQ_SEARCH_HITS)
		return GI_PQ_DIV(span, (double) (2 * m));
	if (factor == 0.0)
		return 0.0;
	return GI_PQ_DIV(1.0, factor);
}

/*
 * The metric's form of a record's sum acc (gi_kind_ivfpq.h): L2 acc, IP
 * -acc, cosine 1 - acc / |q| (+Inf for a zero query), rounded once to
 * float; NaN becomes +Inf.
 */
static inline GI_PQ_HD float
gi_pq_finish(uint32_t metric, double acc, double qnorm2)
{
	double		d;
	float		f;

	if (metric == GI_METRIC_L2)
		d = acc;
	else if (metric == GI_METRIC_IP)
		d = -acc;
	else if (qnorm2 == 0.0)
		return INFINITY;
	else
		d = GI_PQ_SUB(1.0, GI_PQ_DIV(acc, GI_PQ_SQRT(qnorm2)));
	f = (float) d;
	return isnan(f) ? INFINITY : f;
}

/*
 * A record's distance from its summed rewards: the sum over sub-spaces
 * of min(v, tau) is estimated as d = sum_tau - rewards * unit, and the
 * record's sum is d (L2) or q.c - d (IP, cosine: qc), then
 * gi_pq_finish with qnorm2 = |q|^2 (cosine).
 */
static inline GI_PQ_HD float
gi_pq_estimate(uint32_t metric, uint32_t rewards, double sum_tau, double unit,
			   double qc, double qnorm2)
{
	double		d = GI_PQ_SUB(sum_tau, GI_PQ_MUL((double) rewards, unit));

	return gi_pq_finish(metric, metric == GI_METRIC_L2 ? d : GI_PQ_SUB(qc, d), qnorm2);
}

#endif							/* GI_PQ_SELECT_H */
