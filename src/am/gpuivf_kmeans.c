/*
 * gpuivf_kmeans.c
 *		Training the centroids at build time, and choosing a row's list.
 *
 * L2: k-means++ seeding (D^2 sampling) then GPUIVF_KMEANS_ITERATIONS
 * Lloyd iterations on squared L2.  Inner product and cosine: spherical
 * k-means, as pgvector does for them: the samples are normalised,
 * similarity is the dot product, every centroid is the normalised mean of
 * its members.  Unit centroids make "nearest list" agree for every
 * metric with what the device service computes when it picks the lists to
 * probe (for a unit centroid, -<q,c> and 1 - cos(q,c) rank the same).
 *
 * Everything is seeded (GPUIVF_SEED), so a build on the same rows in the
 * same order gives the same centroids.  An empty cluster keeps its
 * previous centroid.  The loops accumulate in float with several
 * independent sums: training needs speed, not the last bit.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpuivf.h"

static inline float
dot(const float4 *a, const float4 *b, int dim)
{
	float		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0,
				s4 = 0,
				s5 = 0,
				s6 = 0,
				s7 = 0;
	int			i = 0;

	for (; i + 8 <= dim; i += 8)
	{
		s0 += a[i] * b[i];
		s1 += a[i + 1] * b[i + 1];
		s2 += a[i + 2] * b[i + 2];
		s3 += a[i + 3] * b[i + 3];
		s4 += a[i + 4] * b[i + 4];
		s5 += a[i + 5] * b[i + 5];
		s6 += a[i + 6] * b[i + 6];
		s7 += a[i + 7] * b[i + 7];
	}
	for (; i < dim; i++)
		s0 += a[i] * b[i];
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

static inline float
l2sq(const float4 *a, const float4 *b, int dim)
{
	float		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0;
	int			i = 0;

	for (; i + 4 <= dim; i += 4)
	{
		float		d0 = a[i] - b[i];
		float		d1 = a[i + 1] - b[i + 1];
		float		d2 = a[i + 2] - b[i + 2];
		float		d3 = a[i + 3] - b[i + 3];

		s0 += d0 * d0;
		s1 += d1 * d1;
		s2 += d2 * d2;
		s3 += d3 * d3;
	}
	for (; i < dim; i++)
	{
		float		d = a[i] - b[i];

		s0 += d * d;
	}
	return (s0 + s1) + (s2 + s3);
}

/* scale to unit length; false for a zero vector */
static bool
normalize(float4 *v, int dim)
{
	double		n = 0.0;

	for (int i = 0; i < dim; i++)
		n += (double) v[i] * v[i];
	if (n == 0.0)
		return false;
	n = sqrt(n);
	for (int i = 0; i < dim; i++)
		v[i] = (float4) (v[i] / n);
	return true;
}

/* the "distance" k-means minimises for a sample and a centroid */
static inline float
train_distance(bool spherical, const float4 *x, const float4 *c, int dim)
{
	if (spherical)
		return 1.0f - dot(x, c, dim);	/* both unit: in [0, 2] */
	return l2sq(x, c, dim);
}

/* nearest centroid of a sample during training; ties: lowest list */
static int
train_nearest(bool spherical, const float4 *x, const float4 *centroids,
			  int k, int dim, float *dist_out)
{
	int			best = 0;
	float		bestd = FLT_MAX;

	for (int c = 0; c < k; c++)
	{
		float		d = train_distance(spherical, x, centroids + (Size) c * dim, dim);

		if (d < bestd)
		{
			bestd = d;
			best = c;
		}
	}
	if (dist_out)
		*dist_out = bestd;
	return best;
}

/*
 * Train up to `lists` centroids on the samples (which may be modified:
 * the spherical metrics normalise them in place).  Returns the number of
 * centroids produced: min(lists, usable samples), at least 1 when there is
 * any usable sample, 0 otherwise.
 */
uint32
gpuivf_kmeans(float4 *samples, int nsamples, int dim, int lists,
			  uint32 metric, float4 *centroids)
{
	bool		spherical = (metric != GI_METRIC_L2);
	pg_prng_state prng;
	int			n = 0;
	int			k;
	float	   *mind;
	int		   *assign;
	double	   *sums;
	int		   *counts;

	/* spherical: drop zero vectors (no direction), normalise the rest */
	for (int i = 0; i < nsamples; i++)
	{
		float4	   *x = samples + (Size) i * dim;

		if (spherical && !normalize(x, dim))
			continue;
		if (n != i)
			memmove(samples + (Size) n * dim, x, dim * sizeof(float4));
		n++;
	}
	if (n == 0)
		return 0;
	k = Min(lists, n);

	pg_prng_seed(&prng, GPUIVF_SEED);
	mind = palloc_extended(sizeof(float) * n, MCXT_ALLOC_HUGE);
	assign = palloc_extended(sizeof(int) * n, MCXT_ALLOC_HUGE);

	/* k-means++: first centre uniform, then proportional to D^2 */
	memcpy(centroids, samples + (Size) pg_prng_uint64_range(&prng, 0, n - 1) * dim,
		   dim * sizeof(float4));
	for (int i = 0; i < n; i++)
		mind[i] = train_distance(spherical, samples + (Size) i * dim, centroids, dim);
	for (int c = 1; c < k; c++)
	{
		double		total = 0.0;
		int			pick = n - 1;
		float4	   *newc = centroids + (Size) c * dim;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < n; i++)
			total += Max(mind[i], 0.0f);
		if (total > 0.0)
		{
			double		r = pg_prng_double(&prng) * total;

			for (int i = 0; i < n; i++)
			{
				r -= Max(mind[i], 0.0f);
				if (r < 0.0)
				{
					pick = i;
					break;
				}
			}
		}
		else
		{
			/* every sample sits on a centre already: duplicates are fine */
			pick = (int) pg_prng_uint64_range(&prng, 0, n - 1);
		}
		memcpy(newc, samples + (Size) pick * dim, dim * sizeof(float4));
		for (int i = 0; i < n; i++)
		{
			float		d = train_distance(spherical, samples + (Size) i * dim, newc, dim);

			if (d < mind[i])
				mind[i] = d;
		}
	}

	/* Lloyd iterations */
	sums = palloc_extended(sizeof(double) * k * dim, MCXT_ALLOC_HUGE);
	counts = palloc(sizeof(int) * k);
	for (int it = 0; it < GPUIVF_KMEANS_ITERATIONS; it++)
	{
		bool		changed = false;

		for (int i = 0; i < n; i++)
		{
			int			c = train_nearest(spherical, samples + (Size) i * dim,
										  centroids, k, dim, NULL);

			if (it == 0 || assign[i] != c)
				changed = true;
			assign[i] = c;
			if ((i & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		if (!changed)
			break;

		memset(sums, 0, sizeof(double) * k * dim);
		memset(counts, 0, sizeof(int) * k);
		for (int i = 0; i < n; i++)
		{
			double	   *s = sums + (Size) assign[i] * dim;
			const float4 *x = samples + (Size) i * dim;

			for (int j = 0; j < dim; j++)
				s[j] += x[j];
			counts[assign[i]]++;
		}
		for (int c = 0; c < k; c++)
		{
			float4	   *cv = centroids + (Size) c * dim;

			if (counts[c] == 0)
				continue;		/* keep the old centre */
			for (int j = 0; j < dim; j++)
				cv[j] = (float4) (sums[(Size) c * dim + j] / counts[c]);
			if (spherical)
				(void) normalize(cv, dim);
		}
	}

	pfree(mind);
	pfree(assign);
	pfree(sums);
	pfree(counts);
	return (uint32) k;
}

void
gpuivf_centroid_norms(const float4 *centroids, uint32 lists, uint32 dim,
					  float4 *norms)
{
	for (uint32 c = 0; c < lists; c++)
	{
		double		n = 0.0;
		const float4 *cv = centroids + (Size) c * dim;

		for (uint32 j = 0; j < dim; j++)
			n += (double) cv[j] * cv[j];
		norms[c] = (float4) sqrt(n);
	}
}

/*
 * The list a row belongs to: the centroid nearest by the index's metric
 * (lowest list on ties).  For L2, |x-c|^2 = |x|^2 - 2<x,c> + |c|^2 and
 * |x|^2 is the same for all lists; for cosine, |x| is.
 */
uint32
gpuivf_nearest_list(const float4 *centroids, const float4 *cnorms, uint32 lists,
					uint32 dim, uint32 metric, const float4 *vec)
{
	uint32		best = 0;
	float		bestd = FLT_MAX;

	for (uint32 c = 0; c < lists; c++)
	{
		const float4 *cv = centroids + (Size) c * dim;
		float		d;

		switch (metric)
		{
			case GI_METRIC_L2:
				d = cnorms[c] * cnorms[c] - 2.0f * dot(vec, cv, dim);
				break;
			case GI_METRIC_IP:
				d = -dot(vec, cv, dim);
				break;
			default:
				d = cnorms[c] > 0.0f ? -dot(vec, cv, dim) / cnorms[c] : FLT_MAX;
				break;
		}
		if (d < bestd)
		{
			bestd = d;
			best = c;
		}
	}
	return best;
}
