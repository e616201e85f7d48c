/*
 * genie_tau.c
 *		The number of LSH functions for a wanted epsilon and delta: GENIE's
 *		bound and the exact binomial requirement (genie_tau.h).
 */
#include <math.h>

#include "genie_tau.h"

uint32_t
genie_tau_bound(double epsilon, double delta)
{
	return (uint32_t) ceil(2.0 * log(3.0 / delta) / (epsilon * epsilon));
}

/* log of the Binomial(m, s) probability of k, 0 < s < 1 */
static double
log_pmf(uint32_t m, uint32_t k, double logs, double log1s)
{
	return lgamma((double) m + 1.0) - lgamma((double) k + 1.0) -
		lgamma((double) (m - k) + 1.0) + k * logs + (double) (m - k) * log1s;
}

double
genie_tau_miss(uint32_t m, double s, double epsilon)
{
	double		logs,
				log1s,
				sum = 0.0;
	double		lo = ((double) m) * (s - epsilon);
	double		hi = ((double) m) * (s + epsilon);
	int64_t		k;

	/* a certain count never misses */
	if (s <= 0.0 || s >= 1.0)
		return 0.0;
	logs = log(s);
	log1s = log1p(-s);
	/* the lower tail: k < m (s - epsilon), outwards from its edge */
	for (k = (int64_t) ceil(lo) - 1; k >= 0; k--)
	{
		double		t;

		if ((double) k >= lo)
			continue;
		t = exp(log_pmf(m, (uint32_t) k, logs, log1s));
		sum += t;
		if (t == 0.0 || t < sum * 1e-17)
			break;
	}
	/* the upper tail: k > m (s + epsilon) */
	for (k = (int64_t) floor(hi) + 1; k <= (int64_t) m; k++)
	{
		double		t;

		if ((double) k <= hi)
			continue;
		t = exp(log_pmf(m, (uint32_t) k, logs, log1s));
		sum += t;
		if (t == 0.0 || t < sum * 1e-17)
			break;
	}
	return sum;
}

double
genie_tau_worst_miss(uint32_t m, double epsilon)
{
	double		worst = 0.0;

	for (int j = 0; j <= GENIE_TAU_GRID; j++)
	{
		double		p = genie_tau_miss(m, (double) j / GENIE_TAU_GRID, epsilon);

		if (p > worst)
			worst = p;
	}
	return worst;
}

uint32_t
genie_tau_binomial(double epsilon, double delta, uint32_t hi)
{
	uint32_t	lo = 1;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (genie_tau_worst_miss(mid, epsilon) <= delta)
			hi = mid;
		else
			lo = mid + 1;
	}
	return hi;
}
