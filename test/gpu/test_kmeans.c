/*
 * test_kmeans.c
 *		k-means for CREATE INDEX (kmeans_train / kmeans_assign) against the
 *		host's: assignments equal to the host ranking's, training within 1%
 *		of the host's objective, deterministic, k-means++ centres samples;
 *		a training on a thread of its own beside searches on the same
 *		device (the device service trains so) changes neither.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gi_kmeans.h"
#include "harness.h"

/* ---- k-means for CREATE INDEX (kmeans_train / kmeans_assign) -------------------- */

/* the seed the access method trains with (GPUIVF_SEED) */
#define KM_SEED UINT64_C(0x67707569766653)

typedef gi_status (*km_train_fn) (const gi_kmeans_params *, uint32_t, const float *,
								  float *, uint32_t *);
typedef gi_status (*km_assign_fn) (gi_device *, uint32_t, uint32_t, gi_metric, const float *,
								   uint32_t, const float *, uint32_t *);
static km_train_fn KT;			/* under test (set by the first test) */
static km_assign_fn KA;

/* the host k-means with the ops signature (reference; self mode's "device") */
static gi_status
host_train(const gi_kmeans_params *p, uint32_t n, const float *samples, float *cent,
		   uint32_t *k)
{
	float	   *copy = malloc(sizeof(float) * n * p->dim + 1);
	void	   *ws = malloc(gi_host_kmeans_workspace(n, p->dim, p->nlists));

	memcpy(copy, samples, sizeof(float) * n * p->dim);
	*k = gi_host_kmeans_train(p, n, copy, cent, ws, NULL, NULL);
	free(copy);
	free(ws);
	return GI_OK;
}

/* samples as the training sees them (spherical: zero dropped, normalised) */
static uint32_t
km_prepared(const float *x, uint32_t n, uint32_t dim, gi_metric m, float *out)
{
	memcpy(out, x, sizeof(float) * n * dim);
	return gi_kmeans_prepare(out, n, dim, m != GI_METRIC_L2);
}

/*
 * Test data: kind 0 uniform in [-1, 1); kind 1 around 40 centres in
 * [-10, 10) with +-1 noise; kind 2 as 1 with every 10th row a copy of an
 * earlier one (exact ties).  All shifted by offset; zero_every > 0 makes
 * every zero_every-th row zero.
 */
static void
km_data(rng *r, int kind, float *x, uint32_t n, uint32_t dim, float offset,
		uint32_t zero_every)
{
	float	   *cen = malloc(sizeof(float) * 40 * dim);
	uint32_t	i;
	uint32_t	j;

	for (i = 0; i < 40 * dim; i++)
		cen[i] = rfloat(r) * 10.0f;
	for (i = 0; i < n; i++)
	{
		float	   *v = x + (size_t) i * dim;

		if (kind == 2 && i >= 10 && i % 10 == 0)
		{
			memcpy(v, x + (size_t) rbelow(r, i) * dim, sizeof(float) * dim);
			continue;
		}
		for (j = 0; j < dim; j++)
			v[j] = offset + (kind == 0 ? rfloat(r) : cen[(i % 40) * dim + j] + rfloat(r));
		if (zero_every && i % zero_every == 0)
			memset(v, 0, sizeof(float) * dim);
	}
	free(cen);
}

/* the host search's list distance (host_ivf.c), recomputed here */
static double
km_list_distance(gi_metric m, const float *x, const float *c, uint32_t dim)
{
	double		acc = 0.0;
	double		xn = 0.0;
	double		cn = 0.0;
	uint32_t	j;

	for (j = 0; j < dim; j++)
	{
		if (m == GI_METRIC_L2)
		{
			double		d = (double) c[j] - x[j];

			acc += d * d;
		}
		else
		{
			acc += (double) c[j] * x[j];
			xn += (double) x[j] * x[j];
			cn += (double) c[j] * c[j];
		}
	}
	if (m == GI_METRIC_L2)
		return acc;
	if (m == GI_METRIC_IP)
		return -acc;
	if (xn == 0.0 || cn == 0.0)
		return INFINITY;
	return 1.0 - acc / (sqrt(xn) * sqrt(cn));
}

static uint64_t km_assigned;
static uint64_t km_assign_ties;

/*
 * kmeans_assign on the device vs the host ranking: equal lists, except a
 * tie (the two lists' distances, recomputed in double, equal within float
 * tolerance), which is counted.
 */
static void
km_compare_assign(uint32_t k, uint32_t dim, gi_metric m, const float *cent, uint32_t n,
				  const float *x, const char *what)
{
	uint32_t   *got = malloc(sizeof(uint32_t) * (n + 1));
	uint32_t   *ref = malloc(sizeof(uint32_t) * (n + 1));
	gi_status	st;
	uint32_t	i;
	uint32_t	bad = 0;

	st = KA(NULL, k, dim, m, cent, n, x, got);
	EXPECT(st == GI_OK, "%s: kmeans_assign: %d %s", what, st, C->last_error());
	EXPECT(gi_host_kmeans_assign(NULL, k, dim, m, cent, n, x, ref) == GI_OK, "%s: host assign", what);
	if (st != GI_OK)
		goto done;
	for (i = 0; i < n; i++)
	{
		double		dg;
		double		dr;

		if (got[i] == ref[i])
			continue;
		if (got[i] >= k)
		{
			if (bad++ < 5)
				EXPECT(false, "%s: row %u assigned to list %u of %u", what, i, got[i], k);
			continue;
		}
		dg = km_list_distance(m, x + (size_t) i * dim, cent + (size_t) got[i] * dim, dim);
		dr = km_list_distance(m, x + (size_t) i * dim, cent + (size_t) ref[i] * dim, dim);
		if (fabs(dg - dr) <= 1e-6 * fmax(1.0, fmax(fabs(dg), fabs(dr))))
			km_assign_ties++;
		else if (bad++ < 5)
			EXPECT(false, "%s: row %u: device list %u (%.17g), host list %u (%.17g)",
				   what, i, got[i], dg, ref[i], dr);
	}
	EXPECT(bad == 0, "%s: %u of %u rows in another list than the host's", what, bad, n);
	km_assigned += n;
done:
	free(got);
	free(ref);
}

/* a keep_going that counts its calls and says stop after stop_after */
typedef struct km_poll
{
	uint32_t	calls;
	uint32_t	stop_after;
} km_poll;

static bool
km_keep_going(void *arg)
{
	km_poll    *poll = arg;

	return ++poll->calls <= poll->stop_after;
}

static void
test_kmeans_assign(void)
{
	static const struct
	{
		gi_metric	m;
		uint32_t	k;
		uint32_t	dim;
		uint32_t	n;
		int			kind;
		float		offset;
		uint32_t	zero_every;
	}			cfg[] = {
		{GI_METRIC_L2, 1, 8, 1000, 0, 0, 0},
		{GI_METRIC_L2, 7, 3, 5000, 2, 0, 0},
		{GI_METRIC_L2, 100, 33, 10000, 1, 0, 0},
		{GI_METRIC_L2, 1024, 128, 20000, 1, 0, 0},	/* two DGEMM blocks */
		{GI_METRIC_L2, 300, 16, 8000, 1, 1000.0f, 0},	/* far from the origin */
		{GI_METRIC_L2, 64, 16, 3000, 2, 0, 0},
		{GI_METRIC_IP, 256, 64, 8000, 1, 0, 0},
		{GI_METRIC_IP, 40, 5, 4000, 2, 0, 7},
		{GI_METRIC_COSINE, 200, 24, 8000, 1, 0, 0},
		{GI_METRIC_COSINE, 30, 4, 4000, 2, 0, 9},
	};
	rng			r = {UINT64_C(0x6b6d65616e73)};
	uint32_t	lists[4];

	for (size_t t = 0; t < sizeof(cfg) / sizeof(cfg[0]); t++)
	{
		uint32_t	k = cfg[t].k;
		uint32_t	dim = cfg[t].dim;
		uint32_t	n = (uint32_t) scaled((int) cfg[t].n);
		float	   *x = malloc(sizeof(float) * n * dim);
		float	   *cent = malloc(sizeof(float) * k * dim);
		char		what[96];
		uint32_t	l;

		snprintf(what, sizeof(what), "assign %s k=%u dim=%u n=%u",
				 cfg[t].m == GI_METRIC_L2 ? "l2" : cfg[t].m == GI_METRIC_IP ? "ip" : "cos",
				 k, dim, n);
		km_data(&r, cfg[t].kind, x, n, dim, cfg[t].offset, cfg[t].zero_every);
		/* centroids: rows (as k-means++ picks them), some moved a little */
		for (l = 0; l < k; l++)
		{
			memcpy(cent + (size_t) l * dim, x + (size_t) rbelow(&r, n) * dim, sizeof(float) * dim);
			if (l % 3 == 1)
				for (uint32_t j = 0; j < dim; j++)
					cent[(size_t) l * dim + j] += rfloat(&r) * 0.1f;
		}
		/* duplicated centroids: ties between lists go to the lower one */
		if (k >= 20)
			memcpy(cent + (size_t) 19 * dim, cent + (size_t) 5 * dim, sizeof(float) * dim);
		if (cfg[t].m == GI_METRIC_COSINE && k > 3)
			memset(cent + (size_t) 3 * dim, 0, sizeof(float) * dim);	/* no direction */
		km_compare_assign(k, dim, cfg[t].m, cent, n, x, what);
		/* the same centroids again (cached on the device), other rows */
		km_compare_assign(k, dim, cfg[t].m, cent, n / 2, x + (size_t) (n - n / 2) * dim, what);
		/* one centroid changed: the cache must notice */
		cent[(size_t) (k - 1) * dim] += 0.5f;
		km_compare_assign(k, dim, cfg[t].m, cent, n, x, what);
		free(x);
		free(cent);
	}
	if (!self_mode)
	{
		float		v[3] = {1, 2, 3};

		EXPECT(KA(NULL, 0, 3, GI_METRIC_L2, v, 1, v, lists) == GI_ERR_INVALID, "assign k = 0");
		EXPECT(KA(NULL, 1, 3, (gi_metric) 7, v, 1, v, lists) == GI_ERR_INVALID, "assign bad metric");
		EXPECT(KA(NULL, 1, 3, GI_METRIC_L2, v, 0, v, lists) == GI_OK, "assign n = 0");
	}
	printf("  %" PRIu64 " rows assigned, %" PRIu64 " ties accepted\n", km_assigned,
		   km_assign_ties);
}

static void
test_kmeans_train(void)
{
	static const struct
	{
		gi_metric	m;
		uint32_t	n;
		uint32_t	dim;
		uint32_t	lists;
		int			kind;
		float		offset;
		uint32_t	zero_every;
		bool		strict;		/* objective within 1% of the host's, same seed */
		bool		same;		/* all samples identical */
	}			cfg[] = {
		{GI_METRIC_L2, 20000, 32, 100, 1, 0, 0, true, false},
		{GI_METRIC_L2, 25600, 64, 512, 1, 0, 0, true, false},
		{GI_METRIC_L2, 20000, 32, 100, 0, 0, 0, true, false},
		{GI_METRIC_IP, 10000, 24, 50, 1, 0, 0, true, false},
		{GI_METRIC_COSINE, 10000, 16, 64, 1, 0, 33, true, false},
		{GI_METRIC_L2, 6000, 8, 40, 0, 500.0f, 0, false, false},
		{GI_METRIC_L2, 3000, 16, 500, 1, 0, 0, false, false},	/* empty clusters */
		{GI_METRIC_L2, 5, 4, 32, 0, 0, 0, false, false},
		{GI_METRIC_L2, 50, 4, 4, 0, 0, 0, false, true},
		{GI_METRIC_L2, 1000, 8, 1, 1, 0, 0, false, false},
		{GI_METRIC_L2, 1, 8, 10, 0, 0, 0, false, false},
		{GI_METRIC_COSINE, 20, 3, 4, 0, 0, 1, false, false},	/* zero vectors only */
	};
	rng			r = {UINT64_C(0x747261696e)};

	for (size_t t = 0; t < sizeof(cfg) / sizeof(cfg[0]); t++)
	{
		uint32_t	n = cfg[t].n >= 1000 ? (uint32_t) scaled((int) cfg[t].n) : cfg[t].n;
		uint32_t	dim = cfg[t].dim;
		uint32_t	lists = cfg[t].lists;
		gi_metric	m = cfg[t].m;
		float	   *x = malloc(sizeof(float) * n * dim);
		float	   *prep = malloc(sizeof(float) * n * dim);
		float	   *ch = malloc(sizeof(float) * lists * dim);
		float	   *cg = malloc(sizeof(float) * lists * dim);
		float	   *cg2 = malloc(sizeof(float) * lists * dim);
		gi_kmeans_params p;
		uint32_t	kh = 0;
		uint32_t	kg = 0;
		uint32_t	kg2 = 0;
		uint32_t	np;
		gi_status	st;
		double		t0;
		double		th;
		double		tg;
		char		what[96];

		if (cfg[t].strict && n < cfg[t].n / 2)
			lists = lists * n / cfg[t].n > 0 ? lists * n / cfg[t].n : 1;	/* scaled runs */
		snprintf(what, sizeof(what), "train %s n=%u dim=%u lists=%u",
				 m == GI_METRIC_L2 ? "l2" : m == GI_METRIC_IP ? "ip" : "cos", n, dim, lists);
		km_data(&r, cfg[t].kind, x, n, dim, cfg[t].offset, cfg[t].zero_every);
		if (cfg[t].same)
			for (uint32_t i = 0; i < n * dim; i++)
				x[i] = 1.25f;
		memset(&p, 0, sizeof(p));
		p.dim = dim;
		p.nlists = lists;
		p.iterations = 10;
		p.metric = m;
		p.seed = KM_SEED;

		t0 = now_s();
		host_train(&p, n, x, ch, &kh);
		th = now_s() - t0;
		t0 = now_s();
		st = KT(&p, n, x, cg, &kg);
		tg = now_s() - t0;
		EXPECT(st == GI_OK, "%s: kmeans_train: %d %s", what, st, C->last_error());
		if (st != GI_OK)
			goto next;
		EXPECT(kg == kh, "%s: %u centroids, host %u", what, kg, kh);
		/* deterministic */
		st = KT(&p, n, x, cg2, &kg2);
		EXPECT(st == GI_OK && kg2 == kg &&
			   memcmp(cg, cg2, sizeof(float) * (size_t) kg * dim) == 0,
			   "%s: a second training differs", what);
		/* asking whether to go on changes nothing; saying stop stops it */
		{
			km_poll		poll = {0, UINT32_MAX};

			p.keep_going = km_keep_going;
			p.keep_going_arg = &poll;
			st = KT(&p, n, x, cg2, &kg2);
			EXPECT(st == GI_OK && kg2 == kg && (poll.calls > 0 || kg == 0) &&
				   memcmp(cg, cg2, sizeof(float) * (size_t) kg * dim) == 0,
				   "%s: a training asked whether to go on (%u times) differs", what, poll.calls);
			if (!self_mode && kg > 0)
			{
				poll.calls = 0;
				poll.stop_after = 1;
				st = KT(&p, n, x, cg2, &kg2);
				EXPECT(st == GI_ERR_CANCELLED && poll.calls == 2,
					   "%s: a training told to stop at the 2nd question: status %d after %u",
					   what, st, poll.calls);
			}
			p.keep_going = NULL;
			p.keep_going_arg = NULL;
		}
		np = km_prepared(x, n, dim, m, prep);
		for (uint32_t i = 0; i < kg * dim; i++)
			if (!isfinite(cg[i]))
			{
				EXPECT(false, "%s: centroid value %u is %g", what, i, cg[i]);
				break;
			}
		if (m != GI_METRIC_L2)
			for (uint32_t c = 0; c < kg; c++)
			{
				double		nn = 0;

				for (uint32_t j = 0; j < dim; j++)
					nn += (double) cg[c * dim + j] * cg[c * dim + j];
				EXPECT(nn == 0 || fabs(sqrt(nn) - 1) < 1e-5, "%s: centroid %u has norm %g",
					   what, c, sqrt(nn));
			}
		if (cfg[t].same)
			for (uint32_t i = 0; i < kg * dim; i++)
				EXPECT(cg[i] == 1.25f, "%s: centroid value %g", what, cg[i]);
		if (kg > 0 && kg == kh)
		{
			double		oh = gi_host_kmeans_objective(m, dim, prep, np, ch, kh);
			double		og = gi_host_kmeans_objective(m, dim, prep, np, cg, kg);
			double		lo = oh;
			double		hi = oh;

			if (!cfg[t].strict)
			{
				/* small runs: the host's own seed-to-seed spread, then 1% */
				float	   *cs = malloc(sizeof(float) * lists * dim);

				for (int sd = 1; sd <= 4; sd++)
				{
					gi_kmeans_params q = p;
					uint32_t	kk;
					double		o;

					q.seed = KM_SEED + sd;
					host_train(&q, n, x, cs, &kk);
					o = gi_host_kmeans_objective(m, dim, prep, np, cs, kk);
					lo = fmin(lo, o);
					hi = fmax(hi, o);
				}
				free(cs);
			}
			EXPECT(og <= hi * 1.01 + 1e-9 * np && og >= lo * 0.99 - 1e-9 * np,
				   "%s: objective %.6g, host %.6g (seeds: %.6g .. %.6g)", what, og, oh, lo, hi);
			printf("  %-40s objective %.6g vs host %.6g (%+.2f%%), %.3f s vs host %.3f s\n",
				   what, og, oh, oh > 0 ? (og - oh) / oh * 100 : 0.0, tg, th);
		}
		/* no iterations: the k-means++ centres are samples, the first the host's */
		p.iterations = 0;
		if (KT(&p, n, x, cg, &kg) == GI_OK && kg > 0)
		{
			host_train(&p, n, x, ch, &kh);
			EXPECT(memcmp(cg, ch, sizeof(float) * dim) == 0,
				   "%s: first k-means++ centre differs from the host's", what);
			for (uint32_t c = 0; c < kg; c += (kg > 64 ? kg / 64 : 1))
			{
				bool		found = false;

				for (uint32_t i = 0; i < np && !found; i++)
					found = memcmp(cg + (size_t) c * dim, prep + (size_t) i * dim,
								   sizeof(float) * dim) == 0;
				EXPECT(found, "%s: k-means++ centre %u is not a sample", what, c);
			}
		}
next:
		free(x);
		free(prep);
		free(ch);
		free(cg);
		free(cg2);
	}
	if (!self_mode)
	{
		gi_kmeans_params p = {4, 0, 10, GI_METRIC_L2, 1, NULL, NULL, NULL};
		float		v[4] = {1, 2, 3, 4};
		float		c[4];
		uint32_t	k;

		EXPECT(KT(&p, 1, v, c, &k) == GI_ERR_INVALID, "train nlists = 0");
		p.nlists = 1;
		p.metric = 9;
		EXPECT(KT(&p, 1, v, c, &k) == GI_ERR_INVALID, "train bad metric");
		p.metric = GI_METRIC_L2;
		EXPECT(KT(&p, 0, v, c, &k) == GI_OK && k == 0, "train n = 0");
		C->kmeans_release(NULL);
		/* usable again after a release */
		EXPECT(KT(&p, 1, v, c, &k) == GI_OK && k == 1 && memcmp(c, v, sizeof(v)) == 0,
			   "train after release: %s", C->last_error());
	}
}


/* ---- a training on its own thread beside searches ---------------------------- */

typedef struct km_thread_job
{
	gi_kmeans_params p;
	uint32_t	n;
	const float *x;
	float	   *cent;
	uint32_t	k;
	gi_status	st;
	volatile int done;
} km_thread_job;

static void *
km_thread_main(void *arg)
{
	km_thread_job *j = arg;

	j->st = KT(&j->p, j->n, j->x, j->cent, &j->k);
	__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The service trains on a thread of its own while its main thread
 * searches: the centroids must equal a training alone, and the searches
 * run meanwhile (coarse quantizer on cuBLAS, fine scan) must equal the
 * host's.
 */
static void
test_kmeans_beside_searches(void)
{
	pair		p;
	rng			r = {UINT64_C(0x626573696465)};
	uint32_t	n = (uint32_t) scaled(40000);
	uint32_t	dim = 48;
	uint32_t	nrec = (uint32_t) scaled(20000);
	float	   *x = malloc(sizeof(float) * n * dim);
	float	   *alone = malloc(sizeof(float) * 1024 * dim);
	float	   *vec = malloc(sizeof(float) * nrec * 32);
	uint32_t   *lists = malloc(sizeof(uint32_t) * nrec);
	uint64_t   *keys = malloc(sizeof(uint64_t) * nrec);
	km_thread_job job;
	pthread_t	th;
	uint32_t	k_alone = 0;
	int			rounds = 0;

	if (self_mode)
	{
		printf("  (skipped in self mode)\n");
		goto done;
	}
	km_data(&r, 1, x, n, dim, 0, 0);
	memset(&job, 0, sizeof(job));
	job.p.dim = dim;
	job.p.nlists = 1024;
	job.p.iterations = 40;
	job.p.metric = GI_METRIC_L2;
	job.p.seed = KM_SEED;
	job.n = n;
	job.x = x;
	job.cent = malloc(sizeof(float) * 1024 * dim);
	EXPECT(KT(&job.p, n, x, alone, &k_alone) == GI_OK, "training alone: %s", C->last_error());

	if (!ivf_pair(&p, 64, 32, 64, &r))
		goto done;
	for (uint32_t i = 0; i < nrec * 32; i++)
		vec[i] = rfloat(&r);
	for (uint32_t i = 0; i < nrec; i++)
	{
		keys[i] = i;
		lists[i] = ivf_nearest_list(&p, vec + (size_t) i * 32);
	}
	do_insert(&p, nrec, lists, keys, vec, "beside training: fill");

	pthread_create(&th, NULL, km_thread_main, &job);
	while (!__atomic_load_n(&job.done, __ATOMIC_ACQUIRE) && checks_failed == 0)
	{
		uint32_t	nq = rounds % 2 ? 300 : 4;
		float	   *qs = ivf_random_queries(&p, &r, nq);

		ivf_compare_search(&p, GI_METRIC_L2, nq, qs, 8, 10, "search beside a training");
		free(qs);
		rounds++;
	}
	pthread_join(th, NULL);
	EXPECT(job.st == GI_OK, "training beside searches: %d %s", job.st, C->last_error());
	EXPECT(job.st != GI_OK || (job.k == k_alone &&
							   memcmp(job.cent, alone, sizeof(float) * (size_t) k_alone * dim) == 0),
		   "the training beside searches differs from the training alone");
	printf("  %d search rounds ran beside a training of %u samples\n", rounds, n);
	pair_close(&p);
	free(job.cent);
done:
	free(x);
	free(alone);
	free(vec);
	free(lists);
	free(keys);
}

/* the entries under test: the module's, or the host's in self mode */
static void
km_setup(void)
{
	KT = self_mode ? host_train : C->kmeans_train;
	KA = self_mode ? gi_host_kmeans_assign : C->kmeans_assign;
}

static void
test_assign(void)
{
	km_setup();
	test_kmeans_assign();
}

static void
test_train(void)
{
	km_setup();
	test_kmeans_train();
}

static void
test_beside(void)
{
	km_setup();
	test_kmeans_beside_searches();
}

static const test_case kmeans_tests[] = {
	{"k-means assignment", test_assign, false},
	{"k-means training", test_train, false},
	{"k-means training on a thread beside searches", test_beside, false},
};

const test_suite kmeans_suite = {kmeans_tests, sizeof(kmeans_tests) / sizeof(kmeans_tests[0]), NULL};
