/*
 * host_kmeans.c
 *		k-means training for CREATE INDEX on the host: what the gpuivf
 *		access method runs in the building backend (src/am/gpuivf/gpuivf_kmeans.c
 *		wraps it), and the reference the CUDA module's training is
 *		compared with (test/gpu/).
 *
 * L2: k-means++ seeding (D^2 sampling) then at most `iterations` Lloyd
 * iterations on squared L2.  Inner product and cosine: spherical k-means,
 * as pgvector does for them: the samples are normalised (zero vectors
 * dropped), similarity is the dot product, every centroid is the
 * normalised mean of its members.  Unit centroids make "nearest list"
 * agree for every metric with what the device service computes when it
 * picks the lists to probe (for a unit centroid, -<q,c> and 1 - cos(q,c)
 * rank the same).
 *
 * Everything is seeded (gi_kmeans.h's PRNG, which is PostgreSQL's
 * pg_prng draw for draw), so a build on the same rows in the same order
 * gives the same centroids.  An empty cluster keeps its previous centroid;
 * the iterations stop early when no assignment changes.  The distance
 * loops accumulate in float with several independent sums (training needs
 * speed, not the last bit); the centroid sums are double, in sample order.
 *
 * Plain C and allocation-free: the caller passes a workspace of
 * gi_host_kmeans_workspace() bytes and a check callback that is called
 * regularly and may leave by longjmp (the server's CHECK_FOR_INTERRUPTS),
 * so nothing leaks when a build is cancelled.  The distance loops run on
 * the host backend's threads (host_pool.h, started once per process),
 * with results that do not depend on how many there are.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "gi_kmeans.h"
#include "host_pool.h"
#include "host_store.h"

/*
 * Squared L2 in float with four partial sums, in the lanes of one vector
 * where the compiler has vector types (the same sums, see gi_km_dot).
 */
#ifdef GI_KM_VECTORS
static inline float
gi_km_l2sq(const float *a, const float *b, uint32_t dim)
{
	gi_km_v4sf	s = {0, 0, 0, 0};
	uint32_t	i = 0;

	for (; i + 4 <= dim; i += 4)
	{
		gi_km_v4sf	d = gi_km_load4(a + i) - gi_km_load4(b + i);

		s += d * d;
	}
	for (; i < dim; i++)
	{
		float		d = a[i] - b[i];

		s[0] += d * d;
	}
	return (s[0] + s[1]) + (s[2] + s[3]);
}
#else
static inline float
gi_km_l2sq(const float *a, const float *b, uint32_t dim)
{
	float		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0;
	uint32_t	i = 0;

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
#endif

/* the "distance" k-means minimises for a sample and a centroid */
static inline float
gi_km_distance(bool spherical, const float *x, const float *c, uint32_t dim)
{
	if (spherical)
		return 1.0f - gi_km_dot(x, c, dim);	/* both unit: in [0, 2] */
	return gi_km_l2sq(x, c, dim);
}

#ifdef GI_KM_VECTORS
/*
 * Tiles of the two distance loops: several (sample, centroid) pairs at once,
 * each pair's lanes added in exactly the order of gi_km_l2sq / gi_km_dot,
 * so every distance has the same bits; the tile only keeps more sums in
 * flight (one pair's sums form a chain the adder waits on) and loads each
 * vector once for several pairs.
 */
static inline float
gi_km_hsum(gi_km_v4sf s)
{
	return (s[0] + s[1]) + (s[2] + s[3]);
}

/* gi_km_l2sq of x[0..3] against c0 and c1: d[2 * q + 0/1] */
static inline void
gi_km_l2sq_4x2(const float *const *x, const float *c0, const float *c1,
			   uint32_t dim, float *d)
{
	gi_km_v4sf	s[8] = {{0}};
	uint32_t	i = 0;

	for (; i + 4 <= dim; i += 4)
	{
		gi_km_v4sf	a0 = gi_km_load4(c0 + i);
		gi_km_v4sf	a1 = gi_km_load4(c1 + i);

		_Pragma("GCC unroll 4")
		for (int q = 0; q < 4; q++)
		{
			gi_km_v4sf	y = gi_km_load4(x[q] + i);
			gi_km_v4sf	e0 = y - a0;
			gi_km_v4sf	e1 = y - a1;

			s[2 * q] += e0 * e0;
			s[2 * q + 1] += e1 * e1;
		}
	}
	for (; i < dim; i++)
		_Pragma("GCC unroll 4")
		for (int q = 0; q < 4; q++)
		{
			float		e0 = x[q][i] - c0[i];
			float		e1 = x[q][i] - c1[i];

			s[2 * q][0] += e0 * e0;
			s[2 * q + 1][0] += e1 * e1;
		}
	_Pragma("GCC unroll 8")
	for (int p = 0; p < 8; p++)
		d[p] = gi_km_hsum(s[p]);
}

/* gi_km_l2sq of one row x against centroids c, c + dim, ..., c + 3 dim: d[0..3] */
static inline void
gi_km_l2sq_1x4(const float *x, const float *c, uint32_t dim, float *d)
{
	gi_km_v4sf	s[4] = {{0}};
	uint32_t	i = 0;

	for (; i + 4 <= dim; i += 4)
	{
		gi_km_v4sf	y = gi_km_load4(x + i);

		_Pragma("GCC unroll 4")
		for (int j = 0; j < 4; j++)
		{
			gi_km_v4sf	e = y - gi_km_load4(c + (size_t) j * dim + i);

			s[j] += e * e;
		}
	}
	for (; i < dim; i++)
		_Pragma("GCC unroll 4")
		for (int j = 0; j < 4; j++)
		{
			float		e = x[i] - c[(size_t) j * dim + i];

			s[j][0] += e * e;
		}
	_Pragma("GCC unroll 4")
	for (int j = 0; j < 4; j++)
		d[j] = gi_km_hsum(s[j]);
}

/* gi_km_dot of one row x against centroids c, c + dim, ..., c + 3 dim: d[0..3] */
static inline void
gi_km_dot_1x4(const float *x, const float *c, uint32_t dim, float *d)
{
	gi_km_v4sf	lo[4] = {{0}};
	gi_km_v4sf	hi[4] = {{0}};
	uint32_t	i = 0;

	for (; i + 8 <= dim; i += 8)
	{
		gi_km_v4sf	yl = gi_km_load4(x + i);
		gi_km_v4sf	yh = gi_km_load4(x + i + 4);

		_Pragma("GCC unroll 4")
		for (int j = 0; j < 4; j++)
		{
			lo[j] += yl * gi_km_load4(c + (size_t) j * dim + i);
			hi[j] += yh * gi_km_load4(c + (size_t) j * dim + i + 4);
		}
	}
	for (; i < dim; i++)
		_Pragma("GCC unroll 4")
		for (int j = 0; j < 4; j++)
			lo[j][0] += x[i] * c[(size_t) j * dim + i];
	_Pragma("GCC unroll 4")
	for (int j = 0; j < 4; j++)
		d[j] = gi_km_hsum(lo[j]) + gi_km_hsum(hi[j]);
}

/* gi_km_dot of x[0..3] against c0 and c1: d[2 * q + 0/1] */
static inline void
gi_km_dot_4x2(const float *const *x, const float *c0, const float *c1,
			  uint32_t dim, float *d)
{
	for (int h = 0; h < 4; h += 2)
	{
		gi_km_v4sf	lo[4] = {{0}};
		gi_km_v4sf	hi[4] = {{0}};
		uint32_t	i = 0;

		for (; i + 8 <= dim; i += 8)
		{
			gi_km_v4sf	a0l = gi_km_load4(c0 + i);
			gi_km_v4sf	a0h = gi_km_load4(c0 + i + 4);
			gi_km_v4sf	a1l = gi_km_load4(c1 + i);
			gi_km_v4sf	a1h = gi_km_load4(c1 + i + 4);

			_Pragma("GCC unroll 2")
			for (int q = 0; q < 2; q++)
			{
				gi_km_v4sf	yl = gi_km_load4(x[h + q] + i);
				gi_km_v4sf	yh = gi_km_load4(x[h + q] + i + 4);

				lo[2 * q] += yl * a0l;
				hi[2 * q] += yh * a0h;
				lo[2 * q + 1] += yl * a1l;
				hi[2 * q + 1] += yh * a1h;
			}
		}
		for (; i < dim; i++)
			_Pragma("GCC unroll 2")
			for (int q = 0; q < 2; q++)
			{
				lo[2 * q][0] += x[h + q][i] * c0[i];
				lo[2 * q + 1][0] += x[h + q][i] * c1[i];
			}
		_Pragma("GCC unroll 4")
		for (int p = 0; p < 4; p++)
			d[2 * h + p] = gi_km_hsum(lo[p]) + gi_km_hsum(hi[p]);
	}
}
#endif

/*
 * How centroids are ranked for a sample: training's distance (squared L2,
 * or 1 - dot for the spherical metrics), or the placement of a row by the
 * index's metric from the centroids' norms (gi_host_nearest_list).
 */
typedef struct gi_km_rule
{
	bool		place;			/* placement; else training */
	bool		spherical;		/* training: 1 - dot */
	gi_metric	metric;			/* placement */
	const float *cnorms;		/* placement */
} gi_km_rule;

/* the placement distance of a row to list c, from their dot product */
static inline float
gi_km_place_distance(gi_metric metric, const float *cnorms, uint32_t c, float dot)
{
	switch (metric)
	{
		case GI_METRIC_L2:
			return cnorms[c] * cnorms[c] - 2.0f * dot;
		case GI_METRIC_IP:
			return -dot;
		default:
			return cnorms[c] > 0.0f ? -dot / cnorms[c] : FLT_MAX;
	}
}

/* the rule's distance of sample x to centroid c (cv) */
static inline float
gi_km_rule_distance(const gi_km_rule *r, const float *x, const float *cv, uint32_t c,
					uint32_t dim)
{
	if (r->place)
		return gi_km_place_distance(r->metric, r->cnorms, c, gi_km_dot(x, cv, dim));
	return gi_km_distance(r->spherical, x, cv, dim);
}

/*
 * The nearest centroid by the rule of each of nx <= 4 samples x, x + dim,
 * ... (ties: lowest list), into out[q].  Whole groups of four, and a lone
 * row, go through the tiles, whose distances have the bits of
 * gi_km_rule_distance's.
 */
static void
gi_km_nearest4(const gi_km_rule *r, const float *x, uint32_t nx, const float *centroids,
			   uint32_t k, uint32_t dim, uint32_t *out)
{
	float		bestd[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
	uint32_t	best[4] = {0, 0, 0, 0};
	uint32_t	c = 0;
#ifdef GI_KM_VECTORS
	const float *xs[4] = {x, x + (nx > 1 ? dim : 0),
		x + (nx > 2 ? 2 * (size_t) dim : 0), x + (nx > 3 ? 3 * (size_t) dim : 0)};

	/* whole groups of four rows (a lone row has its own tile below) */
	for (; nx == 4 && c + 2 <= k; c += 2)
	{
		const float *c0 = centroids + (size_t) c * dim;
		float		d[8];

		if (!r->place && !r->spherical)
			gi_km_l2sq_4x2(xs, c0, c0 + dim, dim, d);
		else
		{
			gi_km_dot_4x2(xs, c0, c0 + dim, dim, d);
			_Pragma("GCC unroll 8")
			for (int p = 0; p < 8; p++)
				d[p] = r->place ? gi_km_place_distance(r->metric, r->cnorms, c + (p & 1), d[p])
					: 1.0f - d[p];
		}
		for (uint32_t q = 0; q < nx; q++)
			for (uint32_t j = 0; j < 2; j++)
				if (d[2 * q + j] < bestd[q])
				{
					bestd[q] = d[2 * q + j];
					best[q] = c + j;
				}
	}

	/* a lone row against four centroids at a time: four independent sums */
	for (; nx == 1 && c + 4 <= k; c += 4)
	{
		const float *c0 = centroids + (size_t) c * dim;
		float		d[4];

		if (!r->place && !r->spherical)
			gi_km_l2sq_1x4(x, c0, dim, d);
		else
		{
			gi_km_dot_1x4(x, c0, dim, d);
			_Pragma("GCC unroll 4")
			for (int j = 0; j < 4; j++)
				d[j] = r->place ? gi_km_place_distance(r->metric, r->cnorms, c + j, d[j])
					: 1.0f - d[j];
		}
		for (uint32_t j = 0; j < 4; j++)
			if (d[j] < bestd[0])
			{
				bestd[0] = d[j];
				best[0] = c + j;
			}
	}
#endif
	for (; c < k; c++)
		for (uint32_t q = 0; q < nx; q++)
		{
			float		d = gi_km_rule_distance(r, x + (size_t) q * dim,
												centroids + (size_t) c * dim, c, dim);

			if (d < bestd[q])
			{
				bestd[q] = d;
				best[q] = c;
			}
		}
	for (uint32_t q = 0; q < nx; q++)
		out[q] = best[q];
}

#define GI_KM_ALIGN(x) (((x) + 15) & ~(size_t) 15)

/* samples a task takes: the assignment, the seeding distances */
#define GI_KM_CHUNK 256

/* samples assigned between two checks, per thread, at most */
#define GI_KM_CHECK_EVERY 1024

/* multiply-adds a thread does between two checks, about */
#define GI_KM_CHECK_MACS (UINT64_C(1) << 24)

/* tasks of one block at most */
#define GI_KM_BLOCK_TASKS (GI_KM_CHECK_EVERY / GI_KM_CHUNK * GI_HOST_POOL_MAX)

/* what the tasks of one training share */
typedef struct gi_km_job
{
	bool		spherical;
	uint32_t	dim;
	uint32_t	n;
	uint32_t	k;
	const float *samples;
	const float *centroids;
	float	   *mind;
	uint32_t   *assign;
	uint32_t	first;			/* the block's first sample */
	uint32_t	end;			/* and the sample after its last */
	const float *newc;			/* seeding: the centre just picked */
	bool		fresh;			/* the first Lloyd iteration */
	bool		changed[GI_KM_BLOCK_TASKS]; /* a task's assignments changed */
} gi_km_job;

/* task: distances of a chunk of samples to the new centre, kept if nearer */
static gi_status
gi_km_seed_task(void *arg, uint32_t task, uint32_t worker)
{
	gi_km_job  *job = arg;
	uint32_t	i = task * GI_KM_CHUNK;
	uint32_t	end = job->n - i < GI_KM_CHUNK ? job->n : i + GI_KM_CHUNK;

	(void) worker;
	for (; i < end; i++)
	{
		float		d = gi_km_distance(job->spherical, job->samples + (size_t) i * job->dim,
									   job->newc, job->dim);

		if (job->fresh || d < job->mind[i])
			job->mind[i] = d;
	}
	return GI_OK;
}

/* task: the nearest centre of a chunk of the block's samples */
static gi_status
gi_km_assign_task(void *arg, uint32_t task, uint32_t worker)
{
	gi_km_job  *job = arg;
	uint32_t	i = job->first + task * GI_KM_CHUNK;
	uint32_t	end = job->end - i < GI_KM_CHUNK ? job->end : i + GI_KM_CHUNK;
	bool		changed = false;
	gi_km_rule	r = {false, job->spherical, GI_METRIC_L2, NULL};

	(void) worker;
	for (; i < end; i += 4)
	{
		uint32_t	nx = end - i < 4 ? end - i : 4;
		uint32_t	a[4];

		gi_km_nearest4(&r, job->samples + (size_t) i * job->dim, nx,
					   job->centroids, job->k, job->dim, a);
		for (uint32_t q = 0; q < nx; q++)
		{
			if (job->fresh || job->assign[i + q] != a[q])
				changed = true;
			job->assign[i + q] = a[q];
		}
	}
	job->changed[task] = changed;
	return GI_OK;
}

/*
 * Samples a thread assigns between two checks: whole tasks of about
 * GI_KM_CHECK_MACS, so that a cancel is seen soon with many lists too.
 */
static uint32_t
gi_km_check_samples(uint32_t k, uint32_t dim)
{
	uint64_t	per = GI_KM_CHECK_MACS / ((uint64_t) k * dim + 1) / GI_KM_CHUNK * GI_KM_CHUNK;

	return per < GI_KM_CHUNK ? GI_KM_CHUNK : per > GI_KM_CHECK_EVERY ? GI_KM_CHECK_EVERY : (uint32_t) per;
}

/* the seeding's distances to the centre newc, on the threads */
static void
gi_km_seed_distances(gi_km_job *job, uint32_t workers, const float *newc, bool fresh)
{
	job->newc = newc;
	job->fresh = fresh;
	(void) gi_host_pool_run((job->n + GI_KM_CHUNK - 1) / GI_KM_CHUNK, workers,
							gi_km_seed_task, job);
}

size_t
gi_host_kmeans_workspace(uint32_t n, uint32_t dim, uint32_t nlists)
{
	size_t		k = nlists < n ? nlists : n;

	return GI_KM_ALIGN(k * dim * sizeof(double)) +	/* sums */
		GI_KM_ALIGN((size_t) n * sizeof(float)) +	/* mind */
		GI_KM_ALIGN((size_t) n * sizeof(uint32_t)) +	/* assign */
		GI_KM_ALIGN(k * sizeof(uint32_t)) + 16;	/* counts */
}

/*
 * The distance loops (seeding, assignment) run on the host backend's
 * threads, a sample's result written by one task only, so the result does
 * not depend on how many there are; the sums stay on the calling thread in
 * sample order.  check and keep_going run on the calling thread between two
 * calls of the threads, never inside one, so a check that leaves by
 * longjmp leaves no thread working on the workspace.
 */
uint32_t
gi_host_kmeans_train(const gi_kmeans_params *p, uint32_t nsamples, float *samples,
					 float *centroids, void *workspace,
					 gi_host_kmeans_check_fn check, void *arg)
{
	const uint32_t dim = p->dim;
	bool		spherical = (p->metric != GI_METRIC_L2);
	gi_prng		prng;
	gi_km_job	job;
	uint32_t	workers;
	uint32_t	n;
	uint32_t	k;
	char	   *ws;
	double	   *sums;
	float	   *mind;
	uint32_t   *assign;
	uint32_t   *counts;
	uint32_t	c;
	uint32_t	i;
	uint32_t	it;

	n = gi_kmeans_prepare(samples, nsamples, dim, spherical);
	if (n == 0 || p->nlists == 0)
		return 0;
	k = p->nlists < n ? p->nlists : n;

	/* carve the workspace (sized for nsamples >= n) */
	ws = (char *) GI_KM_ALIGN((uintptr_t) workspace);
	sums = (double *) ws;
	ws += GI_KM_ALIGN((size_t) k * dim * sizeof(double));
	mind = (float *) ws;
	ws += GI_KM_ALIGN((size_t) nsamples * sizeof(float));
	assign = (uint32_t *) ws;
	ws += GI_KM_ALIGN((size_t) nsamples * sizeof(uint32_t));
	counts = (uint32_t *) ws;

	memset(&job, 0, sizeof(job));
	job.spherical = spherical;
	job.dim = dim;
	job.n = n;
	job.k = k;
	job.samples = samples;
	job.centroids = centroids;
	job.mind = mind;
	job.assign = assign;
	workers = gi_host_pool_worth((uint64_t) n * dim) ? gi_host_pool_threads() : 1;

	gi_prng_seed(&prng, p->seed);

	/* k-means++: first centre uniform, then proportional to D^2 */
	memcpy(centroids, samples + (size_t) gi_prng_u64_range(&prng, 0, n - 1) * dim,
		   dim * sizeof(float));
	gi_km_seed_distances(&job, workers, centroids, true);
	for (c = 1; c < k; c++)
	{
		double		total = 0.0;
		uint32_t	pick = n - 1;
		float	   *newc = centroids + (size_t) c * dim;

		if (check)
			check(arg);
		if (p->keep_going && !p->keep_going(p->keep_going_arg))
			return 0;
		for (i = 0; i < n; i++)
			total += mind[i] > 0.0f ? mind[i] : 0.0f;
		if (total > 0.0)
		{
			double		r = gi_prng_double(&prng) * total;

			for (i = 0; i < n; i++)
			{
				r -= mind[i] > 0.0f ? mind[i] : 0.0f;
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
			pick = (uint32_t) gi_prng_u64_range(&prng, 0, n - 1);
		}
		memcpy(newc, samples + (size_t) pick * dim, dim * sizeof(float));
		gi_km_seed_distances(&job, workers, newc, false);
	}

	/* Lloyd iterations; the assignment a block of samples at a time */
	workers = gi_host_pool_worth((uint64_t) n * k * dim) ? gi_host_pool_threads() : 1;
	for (it = 0; it < p->iterations; it++)
	{
		uint32_t	block = gi_km_check_samples(k, dim) * workers;
		bool		changed = false;

		if (p->keep_going && !p->keep_going(p->keep_going_arg))
			return 0;
		job.fresh = (it == 0);
		for (job.first = 0; job.first < n; job.first = job.end)
		{
			uint32_t	ntasks;
			uint32_t	t;

			if (check)
				check(arg);
			if (p->keep_going && !p->keep_going(p->keep_going_arg))
				return 0;
			job.end = n - job.first < block ? n : job.first + block;
			ntasks = (job.end - job.first + GI_KM_CHUNK - 1) / GI_KM_CHUNK;
			(void) gi_host_pool_run(ntasks, workers, gi_km_assign_task, &job);
			for (t = 0; t < ntasks; t++)
				changed |= job.changed[t];
		}
		if (!changed)
			break;

		memset(sums, 0, sizeof(double) * k * dim);
		memset(counts, 0, sizeof(uint32_t) * k);
		for (i = 0; i < n; i++)
		{
			double	   *s = sums + (size_t) assign[i] * dim;
			const float *x = samples + (size_t) i * dim;
			uint32_t	j;

			for (j = 0; j < dim; j++)
				s[j] += x[j];
			counts[assign[i]]++;
		}
		for (c = 0; c < k; c++)
		{
			float	   *cv = centroids + (size_t) c * dim;
			uint32_t	j;

			if (counts[c] == 0)
				continue;		/* keep the old centre */
			for (j = 0; j < dim; j++)
				cv[j] = (float) (sums[(size_t) c * dim + j] / counts[c]);
			if (spherical)
				(void) gi_kmeans_normalize(cv, dim);
		}
	}
	return k;
}

double
gi_host_kmeans_objective(gi_metric metric, uint32_t dim, const float *samples,
						 uint32_t n, const float *centroids, uint32_t k)
{
	bool		spherical = (metric != GI_METRIC_L2);
	double		total = 0.0;
	uint32_t	i;

	for (i = 0; i < n; i++)
	{
		const float *x = samples + (size_t) i * dim;
		double		best = INFINITY;
		uint32_t	c;

		for (c = 0; c < k; c++)
		{
			const float *cv = centroids + (size_t) c * dim;
			double		acc = 0.0;
			uint32_t	j;

			for (j = 0; j < dim; j++)
			{
				if (spherical)
					acc += (double) x[j] * cv[j];
				else
				{
					double		d = (double) x[j] - cv[j];

					acc += d * d;
				}
			}
			if (spherical)
				acc = 1.0 - acc;
			if (acc < best)
				best = acc;
		}
		total += best;
	}
	return total;
}

/*
 * The list a row goes to when the access method places it (INSERT, and the
 * build's rows on the host): the centroid nearest by the metric in float,
 * lowest list on ties.  For L2, |x-c|^2 = |x|^2 - 2<x,c> + |c|^2 with |x|^2
 * the same for all lists; for cosine, |x| is.
 */
uint32_t
gi_host_nearest_list(const float *centroids, const float *cnorms, uint32_t lists,
					 uint32_t dim, gi_metric metric, const float *vec)
{
	gi_km_rule	r = {true, false, metric, cnorms};
	uint32_t	list;

	gi_km_nearest4(&r, vec, 1, centroids, lists, dim, &list);
	return list;
}

/* what the tasks of one gi_host_nearest_lists call share */
typedef struct gi_km_place_job
{
	const float *centroids;
	const float *cnorms;
	uint32_t	lists;
	uint32_t	dim;
	gi_metric	metric;
	uint32_t	n;
	const float *vecs;
	uint32_t   *out;
} gi_km_place_job;

/* task: the lists of rows [task * GI_KM_CHUNK, ...) */
static gi_status
gi_km_place_task(void *arg, uint32_t task, uint32_t worker)
{
	gi_km_place_job *job = arg;
	uint32_t	i = task * GI_KM_CHUNK;
	uint32_t	end = job->n - i < GI_KM_CHUNK ? job->n : i + GI_KM_CHUNK;

	gi_km_rule	r = {true, false, job->metric, job->cnorms};

	(void) worker;
	for (; i < end; i += 4)
		gi_km_nearest4(&r, job->vecs + (size_t) i * job->dim, end - i < 4 ? end - i : 4,
					   job->centroids, job->lists, job->dim, job->out + i);
	return GI_OK;
}

void
gi_host_nearest_lists(const float *centroids, const float *cnorms, uint32_t lists,
					  uint32_t dim, gi_metric metric, uint32_t n, const float *vecs,
					  uint32_t *out)
{
	gi_km_place_job job;
	uint32_t	workers;

	job.centroids = centroids;
	job.cnorms = cnorms;
	job.lists = lists;
	job.dim = dim;
	job.metric = metric;
	job.n = n;
	job.vecs = vecs;
	job.out = out;
	workers = gi_host_pool_worth((uint64_t) n * lists * dim) ? gi_host_pool_threads() : 1;
	(void) gi_host_pool_run((n + GI_KM_CHUNK - 1) / GI_KM_CHUNK, workers,
							gi_km_place_task, &job);
}
