/*
 * test_cuda_backend.c
 *		Differential tests of the CUDA backend against the host backend.
 *
 * The same operation sequences run on the host store (the reference,
 * src/backend/host/host_*.c compiled in) and on the CUDA store (gpuindex_cuda.so,
 * dlopen'ed as the device service does).  After every operation the two
 * must agree: statuses, counts, statistics (except `bytes`, which each
 * backend measures for itself); every few operations the CUDA store's
 * device state is checked against its own invariants (a hook in the
 * module) and read back list by list from the device and compared, record
 * for record, with the host store.  Searches must return the same ids up
 * to distance ties and distances within 1e-4 relative; each GPU hit is
 * also re-computed here, in double, from the host store's copy of the
 * record, so a wrong payload can never pass by agreeing with itself.
 *
 * Plain C, no test framework: prints "N passed, M failed" and exits 1 on
 * any failure, 77 when no CUDA device is present.
 *
 *	 test_cuda_backend.run PATH/gpuindex_cuda.so
 *	 GI_TEST_SCALE=0.1   shorter runs (compute-sanitizer)
 *	 GI_TEST_NO_OOM=1    skip the (injected) device out-of-memory test
 *	 GI_TEST_SELF=1      run the harness with the host backend on both
 *	                     sides (checks the test itself on a machine with
 *	                     no GPU)
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gi_kmeans.h"
#include "host_store.h"
#include "gi_cuda_test.h"

static const gi_backend_ops *H;		/* host reference */
static const gi_backend_ops *C;		/* CUDA under test */
static gi_cuda_store_check_fn cu_check;
static gi_cuda_store_dump_fn cu_dump;
static gi_cuda_store_set_concurrent_fn cu_set_concurrent;
static gi_cuda_store_set_insert_chunk_fn cu_set_chunk;
static gi_cuda_fail_alloc_after_fn cu_fail;
static gi_cuda_set_copy_threads_fn cu_copy_threads;	/* may be NULL */
static bool self_mode;
static double scale = 1.0;

static int	checks_failed;		/* failures in the current test */
static int	tests_passed;
static int	tests_failed;
static int	printed;
static double max_rel_err;		/* over |d| >= 1e-2 */
static uint64_t hits_compared;
static uint64_t ties_accepted;

static void
failf(const char *file, int line, const char *fmt,...)
{
	va_list		ap;

	checks_failed++;
	if (printed++ > 60)
		return;
	fprintf(stderr, "  FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define EXPECT(cond, ...) \
	do { if (!(cond)) failf(__FILE__, __LINE__, __VA_ARGS__); } while (0)

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
scaled(int n)
{
	int			v = (int) (n * scale);

	return v < 1 ? 1 : v;
}

/* ---- random numbers (xorshift64*, per thread state) ---------------------- */

typedef struct rng
{
	uint64_t	s;
} rng;

static uint64_t
rnext(rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * UINT64_C(2685821657736338717);
}

static uint32_t
rbelow(rng *r, uint32_t n)
{
	return n ? (uint32_t) ((rnext(r) >> 32) % n) : 0;
}

static float
rfloat(rng *r)
{
	return (float) ((double) (rnext(r) >> 40) / (double) (1 << 23) - 1.0);
}

static bool
rchance(rng *r, double p)
{
	return (double) (rnext(r) >> 11) / 9007199254740992.0 < p;
}

/* ---- reference distance (the host's numerics) --------------------------- */

static float
ref_distance(gi_metric m, const float *q, const float *x, uint32_t dim)
{
	double		acc = 0.0;
	double		qn = 0.0;
	double		xn = 0.0;
	double		d;
	float		f;
	uint32_t	j;

	for (j = 0; j < dim; j++)
	{
		if (m == GI_METRIC_L2)
		{
			double		t = (double) x[j] - q[j];

			acc += t * t;
		}
		else
		{
			acc += (double) x[j] * q[j];
			qn += (double) q[j] * q[j];
			xn += (double) x[j] * x[j];
		}
	}
	if (m == GI_METRIC_L2)
		d = acc;
	else if (m == GI_METRIC_IP)
		d = -acc;
	else if (qn == 0.0 || xn == 0.0)
		d = INFINITY;
	else
		d = 1.0 - acc / (sqrt(qn) * sqrt(xn));
	f = (float) d;
	return isnan(f) ? INFINITY : f;
}

/* within 1e-4 relative (absolute 1e-4 under magnitude 1) */
static bool
dist_near(float a, float b)
{
	if (isinf(a) || isinf(b))
		return a == b;
	return fabs((double) a - b) <= 1e-4 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* the same, and record the relative error of a matched pair */
static bool
dist_close(float a, float b)
{
	double		m;

	if (isinf(a) || isinf(b))
		return a == b;
	m = fmax(fabs(a), fabs(b));
	if (dist_near(a, b) && m >= 1e-2 && fabs((double) a - b) / m > max_rel_err)
		max_rel_err = fabs((double) a - b) / m;
	return dist_near(a, b);
}

/* ---- a pair of stores ----------------------------------------------------- */

typedef struct pair
{
	gi_store   *h;
	gi_store   *c;
	uint32_t	nlists;
	uint32_t	dim;
	bool		unique;
	float	   *cent;			/* nlists x dim */
} pair;

static bool
pair_open(pair *p, uint32_t nlists, uint32_t dim, uint32_t chunk, bool unique,
		  uint64_t limit, rng *r)
{
	gi_store_params par;
	gi_status	sh;
	gi_status	sc;
	uint32_t	i;

	memset(p, 0, sizeof(*p));
	memset(&par, 0, sizeof(par));
	par.nlists = nlists;
	par.record_bytes = dim * 4;
	par.chunk_slabs = chunk;
	par.unique_keys = unique;
	par.memory_limit = limit;
	sh = H->store_create(&par, &p->h);
	sc = C->store_create(&par, &p->c);
	EXPECT(sh == GI_OK && sc == GI_OK, "store_create: host %d (%s), cuda %d (%s)",
		   sh, H->last_error(), sc, C->last_error());
	if (sh != GI_OK || sc != GI_OK)
	{
		if (sh == GI_OK)
			H->store_destroy(p->h);
		if (sc == GI_OK)
			C->store_destroy(p->c);
		p->h = p->c = NULL;
		return false;
	}
	p->nlists = nlists;
	p->dim = dim;
	p->unique = unique;
	p->cent = malloc(sizeof(float) * nlists * dim);
	for (i = 0; i < nlists * dim; i++)
		p->cent[i] = rfloat(r);
	return true;
}

static void
pair_close(pair *p)
{
	if (p->h)
		H->store_destroy(p->h);
	if (p->c)
		C->store_destroy(p->c);
	free(p->cent);
	memset(p, 0, sizeof(*p));
}

static void
compare_stats(pair *p, bool slabs, const char *when)
{
	gi_store_stats a;
	gi_store_stats b;

	EXPECT(H->store_stats(p->h, &a) == GI_OK, "host stats");
	EXPECT(C->store_stats(p->c, &b) == GI_OK, "cuda stats: %s", C->last_error());
	EXPECT(a.lists == b.lists && a.rows == b.rows && a.keys == b.keys &&
		   a.payload_bytes == b.payload_bytes && a.inserts == b.inserts &&
		   a.deletes == b.deletes,
		   "%s: stats differ: rows %" PRIu64 "/%" PRIu64 " keys %" PRIu64 "/%" PRIu64
		   " inserts %" PRIu64 "/%" PRIu64 " deletes %" PRIu64 "/%" PRIu64, when,
		   a.rows, b.rows, a.keys, b.keys, a.inserts, b.inserts, a.deletes, b.deletes);
	if (slabs)
		EXPECT(a.slabs_used == b.slabs_used && a.slabs_free == b.slabs_free &&
			   a.slabs_total == b.slabs_total,
			   "%s: slab stats differ: used %" PRIu64 "/%" PRIu64 " free %" PRIu64 "/%" PRIu64
			   " total %" PRIu64 "/%" PRIu64, when, a.slabs_used, b.slabs_used,
			   a.slabs_free, b.slabs_free, a.slabs_total, b.slabs_total);
	EXPECT(b.bytes >= b.payload_bytes, "%s: cuda bytes %" PRIu64 " < payload %" PRIu64,
		   when, b.bytes, b.payload_bytes);
}

/* records of one list, (key, payload) sorted */
typedef struct recs
{
	uint64_t   *keys;
	uint32_t   *pay;
	uint64_t	n;
	uint64_t	cap;
	uint32_t	words;
} recs;

static bool
recs_cb(uint64_t key, uint32_t row, const void *payload, void *arg)
{
	recs	   *rv = arg;

	(void) row;
	if (rv->n == rv->cap)
	{
		rv->cap = rv->cap ? rv->cap * 2 : 64;
		rv->keys = realloc(rv->keys, rv->cap * sizeof(uint64_t));
		rv->pay = realloc(rv->pay, rv->cap * rv->words * sizeof(uint32_t));
	}
	rv->keys[rv->n] = key;
	memcpy(rv->pay + rv->n * rv->words, payload, rv->words * sizeof(uint32_t));
	rv->n++;
	return true;
}

static const recs *sort_ctx;

static int
rec_idx_cmp(const void *a, const void *b)
{
	uint64_t	i = *(const uint64_t *) a;
	uint64_t	j = *(const uint64_t *) b;

	if (sort_ctx->keys[i] != sort_ctx->keys[j])
		return sort_ctx->keys[i] < sort_ctx->keys[j] ? -1 : 1;
	return memcmp(sort_ctx->pay + i * sort_ctx->words, sort_ctx->pay + j * sort_ctx->words,
				  sort_ctx->words * sizeof(uint32_t));
}

static uint64_t *
recs_order(const recs *rv)
{
	uint64_t   *idx = malloc((rv->n + 1) * sizeof(uint64_t));
	uint64_t	i;

	for (i = 0; i < rv->n; i++)
		idx[i] = i;
	sort_ctx = rv;
	qsort(idx, rv->n, sizeof(uint64_t), rec_idx_cmp);
	return idx;
}

/* every list, record for record, read back from the device */
static void
compare_contents(pair *p, const char *when)
{
	uint32_t	l;
	char		err[512];

	if (self_mode)
		return;
	if (!cu_check(p->c, err, sizeof(err)))
	{
		EXPECT(false, "%s: device check: %s", when, err);
		return;
	}
	for (l = 0; l < p->nlists; l++)
	{
		recs		a;
		recs		b;
		void	   *pay = NULL;
		uint64_t   *ia;
		uint64_t   *ib;
		uint64_t	i;
		gi_status	st;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.words = b.words = p->dim;
		EXPECT(gi_host_store_foreach(p->h, l, recs_cb, &a) >= 0, "host foreach");
		st = cu_dump(p->c, l, &b.keys, &pay, &b.n);
		b.pay = pay;
		EXPECT(st == GI_OK, "%s: dump list %u: %s", when, l, C->last_error());
		if (st == GI_OK && a.n != b.n)
			EXPECT(false, "%s: list %u holds %" PRIu64 " records on host, %" PRIu64 " on device",
				   when, l, a.n, b.n);
		else if (st == GI_OK)
		{
			ia = recs_order(&a);
			ib = recs_order(&b);
			for (i = 0; i < a.n; i++)
			{
				if (a.keys[ia[i]] != b.keys[ib[i]] ||
					memcmp(a.pay + ia[i] * p->dim, b.pay + ib[i] * p->dim, p->dim * 4) != 0)
				{
					EXPECT(false, "%s: list %u record %" PRIu64 ": host key %" PRIu64
						   ", device key %" PRIu64 " (or payloads differ)", when, l, i,
						   a.keys[ia[i]], b.keys[ib[i]]);
					break;
				}
			}
			free(ia);
			free(ib);
		}
		free(a.keys);
		free(a.pay);
		free(b.keys);
		free(b.pay);
	}
}

/* ---- search comparison ----------------------------------------------------- */

static int
u64cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* does some live row of key lie at distance d (within tolerance)? */
static bool
hit_is_real(pair *p, gi_metric m, const float *q, uint64_t key, float d)
{
	uint32_t	rows[64];
	uint32_t	n = gi_host_store_lookup(p->h, key, NULL, rows, 64);
	float	   *x = malloc(p->dim * sizeof(float));
	bool		ok = false;
	uint32_t	i;

	for (i = 0; i < n && i < 64 && !ok; i++)
	{
		if (gi_host_store_row(p->h, rows[i], NULL, NULL, x))
			ok = dist_near(ref_distance(m, q, x, p->dim), d);
	}
	free(x);
	return ok;
}

/* one query's hits: host ha (reference) vs device hb */
static void
compare_query(pair *p, gi_metric m, const float *q, uint32_t k, const gi_hit *ha,
			  uint32_t fa, const gi_hit *hb, uint32_t fb, const char *what)
{
	uint64_t   *ka;
	uint64_t   *kb;
	uint32_t	r;
	uint32_t	i;
	uint32_t	j;
	float		boundary;

	EXPECT(fa == fb, "%s: found host %u, cuda %u", what, fa, fb);
	if (fa != fb)
		return;
	for (r = fa; r < k; r++)
		EXPECT(hb[r].key == 0 && isinf(hb[r].distance) && hb[r].distance > 0,
			   "%s: padding slot %u holds key %" PRIu64 " distance %g", what, r, hb[r].key,
			   (double) hb[r].distance);
	for (r = 0; r < fa; r++)
	{
		EXPECT(dist_close(ha[r].distance, hb[r].distance),
			   "%s: rank %u distance host %.9g, cuda %.9g (keys %" PRIu64 "/%" PRIu64 ")",
			   what, r, (double) ha[r].distance, (double) hb[r].distance, ha[r].key, hb[r].key);
		if (r > 0)
			EXPECT(hb[r - 1].distance <= hb[r].distance,
				   "%s: cuda hits out of order at rank %u", what, r);
	}
	hits_compared += fa;
	if (fa == 0)
		return;
	/* every device hit is a live record at the distance it reports */
	for (r = 0; r < fb; r++)
	{
		if (!hit_is_real(p, m, q, hb[r].key, hb[r].distance))
		{
			EXPECT(false, "%s: cuda hit %u (key %" PRIu64 ", distance %.9g) is no live record at that distance",
				   what, r, hb[r].key, (double) hb[r].distance);
			break;
		}
	}
	/* same multiset of keys, except ties at the boundary */
	ka = malloc(fa * sizeof(uint64_t));
	kb = malloc(fa * sizeof(uint64_t));
	for (r = 0; r < fa; r++)
	{
		ka[r] = ha[r].key;
		kb[r] = hb[r].key;
	}
	qsort(ka, fa, sizeof(uint64_t), u64cmp);
	qsort(kb, fa, sizeof(uint64_t), u64cmp);
	boundary = ha[fa - 1].distance;
	i = j = 0;
	while (i < fa || j < fa)
	{
		if (i < fa && j < fa && ka[i] == kb[j])
		{
			i++;
			j++;
			continue;
		}
		/* a key in one list only: fine only when it ties with the boundary */
		{
			bool		host_only = j >= fa || (i < fa && ka[i] < kb[j]);
			uint64_t	key = host_only ? ka[i] : kb[j];
			const gi_hit *h = host_only ? ha : hb;
			float		d = INFINITY;

			for (r = 0; r < fa; r++)
				if (h[r].key == key)
					d = h[r].distance;
			if (fa == k && dist_close(d, boundary))
				ties_accepted++;
			else
			{
				EXPECT(false, "%s: key %" PRIu64 " (distance %.9g) only in the %s result; boundary %.9g, found %u of k %u",
					   what, key, (double) d, host_only ? "host" : "cuda", (double) boundary, fa, k);
				break;
			}
			if (host_only)
				i++;
			else
				j++;
		}
	}
	free(ka);
	free(kb);
}

static void
compare_search(pair *p, gi_metric m, uint32_t nq, const float *queries,
			   uint32_t probes, uint32_t k, const char *when)
{
	gi_hit	   *ha = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	gi_hit	   *hb = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	uint32_t   *fa = malloc((nq + 1) * sizeof(uint32_t));
	uint32_t   *fb = malloc((nq + 1) * sizeof(uint32_t));
	gi_status	sa;
	gi_status	sb;
	uint32_t	q;
	char		what[160];

	/* poison: every slot must be written */
	memset(hb, 0xA5, ((size_t) nq * k + 1) * sizeof(gi_hit));
	memset(fb, 0xA5, (nq + 1) * sizeof(uint32_t));
	sa = H->ivf_search(p->h, p->cent, p->dim, m, nq, queries, probes, k, ha, fa);
	sb = C->ivf_search(p->c, p->cent, p->dim, m, nq, queries, probes, k, hb, fb);
	EXPECT(sa == sb, "%s: search status host %d, cuda %d (%s)", when, sa, sb,
		   sb != GI_OK ? C->last_error() : "");
	if (sa == GI_OK && sb == GI_OK)
	{
		int			before = checks_failed;

		for (q = 0; q < nq && checks_failed - before < 3; q++)
		{
			snprintf(what, sizeof(what), "%s: metric %d nq %u probes %u k %u query %u",
					 when, (int) m, nq, probes, k, q);
			compare_query(p, m, queries + (size_t) q * p->dim, k, ha + (size_t) q * k, fa[q],
						  hb + (size_t) q * k, fb[q], what);
		}
	}
	free(ha);
	free(hb);
	free(fa);
	free(fb);
}

/* ---- operations on both stores ---------------------------------------------- */

static uint32_t
nearest_list(const pair *p, const float *v)
{
	uint32_t	best = 0;
	double		bd = INFINITY;
	uint32_t	l;

	for (l = 0; l < p->nlists; l++)
	{
		double		d = 0.0;
		uint32_t	j;

		for (j = 0; j < p->dim; j++)
		{
			double		t = (double) v[j] - p->cent[(size_t) l * p->dim + j];

			d += t * t;
		}
		if (d < bd)
		{
			bd = d;
			best = l;
		}
	}
	return best;
}

static void
random_vector(rng *r, float *v, uint32_t dim, bool specials)
{
	uint32_t	j;

	for (j = 0; j < dim; j++)
		v[j] = rfloat(r);
	if (!specials)
		return;
	if (rchance(r, 0.03))
		memset(v, 0, dim * sizeof(float));		/* zero norm: cosine +Inf */
	else if (rchance(r, 0.005))
		v[rbelow(r, dim)] = NAN;	/* ranks as +Inf */
	else if (rchance(r, 0.05))
	{
		/* a coarse grid: many exact distance ties */
		for (j = 0; j < dim; j++)
			v[j] = (float) ((int) (v[j] * 2)) / 2.0f;
	}
}

static void
do_insert(pair *p, uint32_t n, const uint32_t *lists, const uint64_t *keys,
		  const float *pay, const char *when)
{
	uint64_t	na = 0;
	uint64_t	nb = 0;
	gi_status	sa = H->store_insert(p->h, n, lists, keys, pay, &na);
	gi_status	sb = C->store_insert(p->c, n, lists, keys, pay, &nb);

	EXPECT(sa == sb && na == nb, "%s: insert of %u: host %d/%" PRIu64 ", cuda %d/%" PRIu64 " (%s)",
		   when, n, sa, na, sb, nb, sb != GI_OK ? C->last_error() : "");
}

static void
do_delete(pair *p, uint32_t n, const uint64_t *keys, const char *when)
{
	uint64_t	na = 0;
	uint64_t	nb = 0;
	gi_status	sa = H->store_delete(p->h, n, keys, &na);
	gi_status	sb = C->store_delete(p->c, n, keys, &nb);

	EXPECT(sa == sb && na == nb, "%s: delete of %u: host %d/%" PRIu64 ", cuda %d/%" PRIu64 " (%s)",
		   when, n, sa, na, sb, nb, sb != GI_OK ? C->last_error() : "");
}

/* a random batch of queries: fresh vectors, stored ones, zero vectors */
static float *
random_queries(pair *p, rng *r, uint32_t nq)
{
	float	   *qs = malloc((size_t) nq * p->dim * sizeof(float));
	uint32_t	q;

	for (q = 0; q < nq; q++)
	{
		float	   *v = qs + (size_t) q * p->dim;

		random_vector(r, v, p->dim, false);
		if (rchance(r, 0.02))
			memset(v, 0, p->dim * sizeof(float));
		else if (rchance(r, 0.1))
		{
			uint32_t	j;

			for (j = 0; j < p->dim; j++)
				v[j] = (float) ((int) (v[j] * 2)) / 2.0f;
		}
	}
	return qs;
}

static void
random_search(pair *p, rng *r, const char *when)
{
	uint32_t	nq;
	uint32_t	probes;
	uint32_t	k;
	uint32_t	x = rbelow(r, 100);
	gi_metric	m = (gi_metric) rbelow(r, 3);
	float	   *qs;

	nq = x < 30 ? 1 : x < 70 ? 1 + rbelow(r, 16) : x < 95 ? 1 + rbelow(r, 200) : 600 + rbelow(r, 600);
	x = rbelow(r, 100);
	probes = x < 20 ? 1 : x < 70 ? 1 + rbelow(r, p->nlists) : x < 90 ? p->nlists : p->nlists + 1 + rbelow(r, 5);
	x = rbelow(r, 100);
	k = x < 15 ? 1 : x < 45 ? 10 : x < 75 ? 1 + rbelow(r, 100) : x < 88 ? 1 + rbelow(r, 1024)
		: x < 92 ? 1024 : 1025 + rbelow(r, 3000);
	if (k > 1024 && nq > 40)
		nq = 1 + rbelow(r, 40);
	qs = random_queries(p, r, nq);
	compare_search(p, m, nq, qs, probes, k, when);
	free(qs);
}

/* ---- tests --------------------------------------------------------------------- */

static void
test_invalid(void)
{
	gi_store_params par;
	gi_store   *s = NULL;
	gi_hit		hit;
	uint32_t	found = 7;
	float		q[4] = {0};
	float		cent[8] = {0};
	pair		p;
	rng			r = {42};

	memset(&par, 0, sizeof(par));
	par.nlists = 0;
	par.record_bytes = 16;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID && s == NULL, "nlists 0 accepted");
	par.nlists = 2;
	par.record_bytes = 6;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "record_bytes 6 accepted");
	par.record_bytes = 0;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "record_bytes 0 accepted");
	par.record_bytes = (1u << 20) + 4;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "huge record accepted");
	par.record_bytes = 16;
	par.memory_limit = 100;
	EXPECT(C->store_create(&par, &s) == GI_ERR_LIMIT &&
		   strstr(C->last_error(), "gpuindex.memory_limit") != NULL,
		   "tiny limit at create: %s", C->last_error());

	if (!pair_open(&p, 2, 4, 0, true, 0, &r))
		return;
	memcpy(cent, p.cent, sizeof(cent));
	{
		uint32_t	bad = 2;
		uint64_t	key = 1;
		uint64_t	n = 9;

		EXPECT(C->store_insert(p.c, 1, &bad, &key, q, &n) == GI_ERR_INVALID && n == 0,
			   "list out of range accepted");
		EXPECT(C->store_insert(p.c, 0, NULL, NULL, NULL, &n) == GI_OK && n == 0,
			   "empty insert");
		EXPECT(C->store_delete(p.c, 0, NULL, &n) == GI_OK && n == 0, "empty delete");
	}
	EXPECT(C->ivf_search(p.c, cent, 4, GI_METRIC_L2, 1, q, 0, 1, &hit, &found) == GI_ERR_INVALID,
		   "probes 0 accepted");
	EXPECT(C->ivf_search(p.c, cent, 3, GI_METRIC_L2, 1, q, 1, 1, &hit, &found) == GI_ERR_INVALID,
		   "dimension mismatch accepted");
	EXPECT(C->ivf_search(p.c, cent, 4, (gi_metric) 7, 1, q, 1, 1, &hit, &found) == GI_ERR_INVALID,
		   "bad metric accepted");
	EXPECT(C->ivf_search(p.c, cent, 4, GI_METRIC_L2, 0, q, 1, 1, &hit, &found) == GI_OK,
		   "nq 0 refused");
	found = 7;
	EXPECT(C->ivf_search(p.c, cent, 4, GI_METRIC_L2, 1, q, 1, 0, NULL, &found) == GI_OK && found == 0,
		   "k 0: status or found %u", found);
	/* empty store: padding only */
	{
		float	   *qs = random_queries(&p, &r, 3);

		compare_search(&p, GI_METRIC_L2, 3, qs, 1, 5, "empty store");
		compare_search(&p, GI_METRIC_COSINE, 2, qs, 9, 2000, "empty store, large k");
		free(qs);
	}
	pair_close(&p);
}

/* a long random sequence of mutations and searches on both backends */
static void
random_differential(uint32_t nlists, uint32_t dim, uint32_t chunk, bool unique,
					uint32_t keyspace, int ops, uint64_t seed, uint32_t insert_chunk)
{
	pair		p;
	rng			r = {seed};
	uint32_t	maxn = 4000;
	uint32_t   *lists = malloc(maxn * sizeof(uint32_t));
	uint64_t   *keys = malloc(maxn * sizeof(uint64_t));
	float	   *pay = malloc((size_t) maxn * dim * sizeof(float));
	char		when[96];
	int			op;

	if (!pair_open(&p, nlists, dim, chunk, unique, 0, &r))
		goto out;
	/* small pipelined chunks: every larger insert crosses several */
	if (!self_mode && insert_chunk)
		cu_set_chunk(p.c, insert_chunk);
	for (op = 0; op < ops && checks_failed < 20; op++)
	{
		uint32_t	x = rbelow(&r, 100);
		uint32_t	n;
		uint32_t	i;

		snprintf(when, sizeof(when), "lists %u dim %u op %d", nlists, dim, op);
		if (x < 40)
		{
			uint32_t	y = rbelow(&r, 100);

			n = y < 30 ? 1 : y < 80 ? 1 + rbelow(&r, 64) : y < 97 ? 1 + rbelow(&r, 600) : maxn;
			for (i = 0; i < n; i++)
			{
				float	   *v = pay + (size_t) i * dim;

				random_vector(&r, v, dim, true);
				if (i > 0 && rchance(&r, 0.03))
					memcpy(v, pay + (size_t) rbelow(&r, i) * dim, dim * sizeof(float));
				lists[i] = rchance(&r, 0.7) ? nearest_list(&p, v) : rbelow(&r, nlists);
				keys[i] = rchance(&r, 0.01) ? UINT64_MAX - rbelow(&r, 3) : rbelow(&r, keyspace);
			}
			do_insert(&p, n, lists, keys, pay, when);
		}
		else if (x < 65)
		{
			uint32_t	y = rbelow(&r, 100);

			n = y < 30 ? 1 : y < 85 ? 1 + rbelow(&r, 64) : 1 + rbelow(&r, 1000);
			for (i = 0; i < n; i++)
				keys[i] = (i > 0 && rchance(&r, 0.1)) ? keys[rbelow(&r, i)]
					: rchance(&r, 0.01) ? UINT64_MAX - rbelow(&r, 3) : rbelow(&r, keyspace + keyspace / 10);
			do_delete(&p, n, keys, when);
		}
		else if (x < 67)
		{
			/* empty everything, lists and pool stay for reuse */
			n = keyspace < maxn ? keyspace : maxn;
			for (i = 0; i < n; i++)
				keys[i] = i;
			do_delete(&p, n, keys, when);
			keys[0] = UINT64_MAX;
			keys[1] = UINT64_MAX - 1;
			keys[2] = UINT64_MAX - 2;
			do_delete(&p, 3, keys, when);
		}
		else
			random_search(&p, &r, when);
		compare_stats(&p, true, when);
		if (op % 10 == 9)
			compare_contents(&p, when);
	}
	compare_contents(&p, "end");
	/* a last big batch of queries on whatever is there */
	{
		float	   *qs = random_queries(&p, &r, 1000);

		compare_search(&p, GI_METRIC_L2, 1000, qs, nlists > 4 ? nlists / 4 : 1, 10, "final batch");
		compare_search(&p, GI_METRIC_IP, 1000, qs, nlists, 64, "final batch");
		compare_search(&p, GI_METRIC_COSINE, 7, qs, 3, 3000, "final batch, large k");
		free(qs);
	}
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

static void
test_diff_small_chunks(void)
{
	random_differential(16, 8, 1, true, 3000, scaled(400), 1, 7);
}

static void
test_diff_multi_posting(void)
{
	random_differential(64, 33, 4, false, 800, scaled(400), 2, 50);
}

static void
test_diff_single_list(void)
{
	random_differential(1, 4, 2, true, 2000, scaled(250), 3, 1);
}

static void
test_diff_many_lists(void)
{
	random_differential(300, 16, 0, true, 20000, scaled(250), 4, 0);
}

static void
test_diff_wide(void)
{
	random_differential(32, 128, 8, true, 6000, scaled(200), 5, 333);
}

/* big k and big candidate sets: the sort-based path against the host */
static void
test_large_k(void)
{
	pair		p;
	rng			r = {77};
	uint32_t	n = 20000;
	uint32_t	dim = 24;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	float	   *qs;
	uint32_t	i;

	if (!pair_open(&p, 40, dim, 0, true, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, true);
		lists[i] = nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = (uint64_t) i * 7919;
	}
	do_insert(&p, n, lists, keys, pay, "large k fill");
	qs = random_queries(&p, &r, 50);
	compare_search(&p, GI_METRIC_L2, 50, qs, 40, 1025, "large k");
	compare_search(&p, GI_METRIC_L2, 5, qs, 40, 25000, "k over the store");
	compare_search(&p, GI_METRIC_IP, 20, qs, 7, 4096, "large k, some probes");
	compare_search(&p, GI_METRIC_COSINE, 50, qs, 40, 1024, "k at the fast bound");
	compare_search(&p, GI_METRIC_L2, 1, qs, 1, 1, "k 1");
	free(qs);
	/* the SQL scan's doubling: same query, k = 10, 20, ... 5120 */
	qs = random_queries(&p, &r, 1);
	for (i = 10; i <= 5120; i *= 2)
		compare_search(&p, GI_METRIC_L2, 1, qs, 3, i, "doubling k");
	free(qs);
	compare_contents(&p, "large k");
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * Large batches: lists probed by many queries of a batch are scored in
 * multi-query tiles (cuda_search.cu).  Against the host for each metric, k
 * on both sides of the tile path's bounds, a dimension that is not a
 * multiple of 16 (word tail and padded query rows), deleted records
 * (partly valid and empty slabs) and grid vectors (exact ties); and every
 * query's hits in the batch bitwise equal to its hits searched alone.
 */
static void
test_batch_tiles(void)
{
	pair		p;
	rng			r = {4242};
	uint32_t	n = 2000 + (uint32_t) scaled(10000);
	uint32_t	dim = 37;
	uint32_t	nq = 900;
	uint32_t	nlists = 24;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	static const uint32_t ks[] = {1, 10, 64, 256, 300, 600};
	float	   *qs = NULL;
	uint32_t	i;
	int			m;

	if (!pair_open(&p, nlists, dim, 0, true, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, true);
		lists[i] = nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = (uint64_t) i * 104729 + 3;
	}
	do_insert(&p, n, lists, keys, pay, "tiles fill");
	/* every third record gone: partly valid slabs, some empty */
	for (i = 0; i < n / 3; i++)
		keys[i] = (uint64_t) (3 * i) * 104729 + 3;
	do_delete(&p, n / 3, keys, "tiles delete");
	qs = random_queries(&p, &r, nq);
	/* shortened under the sanitizers (scale < 1): L2, one k per path */
	for (m = 0; m < (scale < 1.0 ? 1 : 3); m++)
	{
		uint32_t	t;

		for (t = 0; t < sizeof(ks) / sizeof(ks[0]); t++)
			if (scale >= 1.0 || ks[t] == 10 || ks[t] == 300)
				compare_search(&p, (gi_metric) m, nq, qs, 1 + (t * 5 + (uint32_t) m) % nlists, ks[t],
						   "multi-query tiles");
	}

	/* batch vs alone: the same arithmetic, so the same bits */
	{
		uint32_t	k = 10;
		uint32_t	probes = 6;
		gi_hit	   *hb = malloc((size_t) nq * k * sizeof(gi_hit));
		uint32_t   *fb = malloc(nq * sizeof(uint32_t));
		gi_hit		h1[10];
		uint32_t	f1;
		uint32_t	bad = 0;

		EXPECT(C->ivf_search(p.c, p.cent, dim, GI_METRIC_L2, nq, qs, probes, k, hb, fb) == GI_OK,
			   "tiles batch: %s", C->last_error());
		for (i = 0; i < nq && bad < 3; i += 37)
		{
			uint32_t	j;

			EXPECT(C->ivf_search(p.c, p.cent, dim, GI_METRIC_L2, 1, qs + (size_t) i * dim, probes,
								 k, h1, &f1) == GI_OK, "tiles alone: %s", C->last_error());
			if (f1 != fb[i])
			{
				bad++;
				EXPECT(false, "query %u: found %u alone, %u in the batch", i, f1, fb[i]);
				continue;
			}
			for (j = 0; j < f1; j++)
				if (h1[j].key != hb[(size_t) i * k + j].key ||
					memcmp(&h1[j].distance, &hb[(size_t) i * k + j].distance, sizeof(float)) != 0)
				{
					bad++;
					EXPECT(false, "query %u rank %u: alone %" PRIu64 " %.9g, batch %" PRIu64 " %.9g",
						   i, j, h1[j].key, (double) h1[j].distance,
						   hb[(size_t) i * k + j].key, (double) hb[(size_t) i * k + j].distance);
					break;
				}
		}
		free(hb);
		free(fb);
	}
	compare_contents(&p, "tiles");
out:
	pair_close(&p);
	free(qs);
	free(lists);
	free(keys);
	free(pay);
}

/* exact ties: identical vectors under many keys, order by key */
static void
test_ties(void)
{
	pair		p;
	rng			r = {99};
	uint32_t	n = 3000;
	uint32_t	dim = 8;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	float	   *qs;
	uint32_t	i;

	if (!pair_open(&p, 8, dim, 2, true, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		uint32_t	j;

		for (j = 0; j < dim; j++)
			pay[(size_t) i * dim + j] = (float) (i % 5) * 0.25f;
		lists[i] = rbelow(&r, 8);
		keys[i] = (uint64_t) (n - i) * 3;
	}
	do_insert(&p, n, lists, keys, pay, "ties fill");
	qs = random_queries(&p, &r, 20);
	compare_search(&p, GI_METRIC_L2, 20, qs, 8, 10, "ties");
	compare_search(&p, GI_METRIC_L2, 20, qs, 8, 700, "ties, k 700");
	compare_search(&p, GI_METRIC_COSINE, 20, qs, 8, 2000, "ties, large k");
	compare_search(&p, GI_METRIC_IP, 20, qs, 3, 33, "ties, ip");
	free(qs);
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * Memory limit: both stores fail at the same record with GI_ERR_LIMIT;
 * the CUDA store stays consistent, holds exactly the prefix, and works
 * again once the limit is raised.
 */
static void
test_memory_limit(void)
{
	gi_store_params par;
	gi_store   *c = NULL;
	gi_store_stats st;
	uint32_t	dim = 16;
	uint32_t	n = 5000;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint64_t	limit;
	uint64_t	done = 0;
	uint32_t	i;
	gi_status	s;
	pair		p;
	rng			r = {5};

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 10);
		keys[i] = 1000 + i;
	}
	/* what 1000 records need on the CUDA store: the limit sits in between */
	memset(&par, 0, sizeof(par));
	par.nlists = 10;
	par.record_bytes = dim * 4;
	par.chunk_slabs = 8;
	par.unique_keys = true;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create");
	if (c == NULL)
		goto out;
	EXPECT(C->store_insert(c, 1000, lists, keys, pay, &done) == GI_OK && done == 1000, "probe insert");
	C->store_stats(c, &st);
	limit = st.bytes;
	C->store_destroy(c);
	c = NULL;

	par.memory_limit = limit;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create with limit");
	if (c == NULL)
		goto out;
	/* the limit strikes inside a pipelined chunk */
	if (!self_mode)
		cu_set_chunk(c, 64);
	s = C->store_insert(c, n, lists, keys, pay, &done);
	EXPECT(s == GI_ERR_LIMIT, "insert over the limit: status %d", s);
	EXPECT(strstr(C->last_error(), "gpuindex.memory_limit") != NULL, "message: %s",
		   C->last_error());
	EXPECT(done >= 900 && done < n, "inserted %" PRIu64 " before the limit", done);
	C->store_stats(c, &st);
	EXPECT(st.bytes <= limit, "bytes %" PRIu64 " over limit %" PRIu64, st.bytes, limit);
	EXPECT(st.rows == done, "rows %" PRIu64 " after %" PRIu64 " inserted", st.rows, done);

	/* the host store holding the same prefix is the reference */
	if (pair_open(&p, 10, dim, 8, true, 0, &r))
	{
		uint64_t	hn = 0;
		float	   *qs;

		C->store_destroy(p.c);
		p.c = c;
		c = NULL;
		memset(p.cent, 0, sizeof(float) * 10 * dim);
		EXPECT(H->store_insert(p.h, (uint32_t) done, lists, keys, pay, &hn) == GI_OK, "host prefix");
		compare_stats(&p, false, "after limit");
		compare_contents(&p, "after limit");
		qs = random_queries(&p, &r, 10);
		compare_search(&p, GI_METRIC_L2, 10, qs, 10, 50, "after limit");
		/* still over: a further insert fails again, changes nothing */
		EXPECT(C->store_insert(p.c, n - (uint32_t) done, lists + done, keys + done,
							   pay + done * dim, &hn) == GI_ERR_LIMIT, "second insert over limit");
		EXPECT(hn == 0 || hn < 40, "second insert added %" PRIu64, hn);
		if (hn > 0)
			H->store_insert(p.h, (uint32_t) hn, lists + done, keys + done, pay + done * dim, NULL);
		done += hn;
		/* deletes work at the limit, then raise it and finish */
		do_delete(&p, 100, keys, "delete at limit");
		C->store_set_limit(p.c, 0);
		do_insert(&p, n - (uint32_t) done, lists + done, keys + done, pay + done * dim,
				  "after raising the limit");
		compare_stats(&p, false, "after raise");
		compare_contents(&p, "after raise");
		compare_search(&p, GI_METRIC_COSINE, 10, qs, 4, 20, "after raise");
		free(qs);
		pair_close(&p);
	}
	/* same limit on both backends: same error at the same record */
	{
		gi_store   *h = NULL;
		uint64_t	hlimit;
		uint64_t	na = 0;
		uint64_t	nb = 0;
		gi_status	sa;
		gi_status	sb;

		/* each backend measures its own bytes: each gets its own 1000-record limit */
		par.memory_limit = 0;
		H->store_create(&par, &h);
		H->store_insert(h, 1000, lists, keys, pay, &na);
		H->store_stats(h, &st);
		hlimit = st.bytes;
		H->store_destroy(h);
		par.memory_limit = hlimit;
		h = NULL;
		EXPECT(H->store_create(&par, &h) == GI_OK, "host create");
		sa = H->store_insert(h, n, lists, keys, pay, &na);
		par.memory_limit = limit;
		c = NULL;
		EXPECT(C->store_create(&par, &c) == GI_OK, "cuda create");
		sb = c ? C->store_insert(c, n, lists, keys, pay, &nb) : GI_ERR_DEVICE;
		EXPECT(sa == GI_ERR_LIMIT && sb == GI_ERR_LIMIT, "both hit their limit: %d %d", sa, sb);
		if (h)
			H->store_destroy(h);
		if (c)
			C->store_destroy(c);
		c = NULL;
	}
out:
	if (c)
		C->store_destroy(c);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * The device allocator fails (injected: gi_cuda_fail_alloc_after): the
 * insert stops with GI_ERR_NOMEM at the record that needed the growth, the
 * records before it are in, the store stays consistent and works again
 * once allocations succeed.
 */
static void
test_device_oom(void)
{
	pair		p;
	rng			r = {11};
	uint32_t	dim = 16;
	uint32_t	n = 3000;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint64_t	nc = 0;
	uint64_t	nh = 0;
	gi_status	st;
	uint32_t	i;
	int			at;

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 8);
		keys[i] = 500 + i;
	}
	/* a failure in each of the growth's four allocations */
	for (at = 0; at < 4; at++)
	{
		if (!pair_open(&p, 8, dim, 4, true, 0, &r))
			break;
		cu_set_chunk(p.c, 100);
		do_insert(&p, 200, lists, keys, pay, "before the failure");
		cu_fail(at);
		st = C->store_insert(p.c, n - 200, lists + 200, keys + 200, pay + 200 * dim, &nc);
		cu_fail(-1);
		EXPECT(st == GI_ERR_NOMEM, "allocation %d failing: status %d (%s)", at, st,
			   C->last_error());
		EXPECT(strstr(C->last_error(), "out of device memory") != NULL, "message: %s",
			   C->last_error());
		EXPECT(nc < n - 200, "all %" PRIu64 " inserted despite the failure", nc);
		EXPECT(H->store_insert(p.h, (uint32_t) nc, lists + 200, keys + 200, pay + 200 * dim,
							   &nh) == GI_OK && nh == nc, "host prefix");
		compare_stats(&p, false, "after NOMEM");
		compare_contents(&p, "after NOMEM");
		do_delete(&p, 50, keys + 100, "delete after NOMEM");
		do_insert(&p, n - 200 - (uint32_t) nc, lists + 200 + nc, keys + 200 + nc,
				  pay + (200 + nc) * dim, "insert after NOMEM");
		compare_stats(&p, false, "after recovery");
		compare_contents(&p, "after recovery");
		{
			float	   *qs = random_queries(&p, &r, 5);

			compare_search(&p, GI_METRIC_L2, 5, qs, 3, 20, "after NOMEM");
			free(qs);
		}
		pair_close(&p);
	}
	free(lists);
	free(keys);
	free(pay);
}

/*
 * Large batches in default-sized pipeline chunks (4 MB of payload): the
 * payload goes through the copy helper threads and both upload arenas,
 * the key map is pre-sized for the batch, the pool grows many times while
 * chunks are in flight.  With 3 helpers, then with none; duplicates
 * inside the batch; deletes in between.
 */
static void
test_bulk_insert(void)
{
	pair		p;
	rng			r = {77};
	uint32_t	dim = 128;
	uint32_t	n = (uint32_t) (60000 * scale) < 3000 ? 3000 : (uint32_t) (60000 * scale);
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint32_t	half = n / 2;
	uint32_t	i;
	float	   *qs;

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 64);
		/* TID-like keys, 5% repeated inside the batch */
		keys[i] = i > 0 && rchance(&r, 0.05) ? keys[rbelow(&r, i)]
			: ((uint64_t) (i / 100) << 16) | (i % 100 + 1);
	}
	if (!pair_open(&p, 64, dim, 0, true, 0, &r))
		goto out;
	if (cu_copy_threads)
		cu_copy_threads(3);
	do_insert(&p, half, lists, keys, pay, "bulk insert, 3 copy helpers");
	compare_stats(&p, true, "after bulk insert");
	compare_contents(&p, "after bulk insert");
	do_delete(&p, n / 10, keys + n / 4, "bulk delete");
	if (cu_copy_threads)
		cu_copy_threads(0);
	do_insert(&p, n - half, lists + half, keys + half, pay + (size_t) half * dim,
			  "bulk insert, no copy helpers");
	if (cu_copy_threads)
		cu_copy_threads(-1);
	compare_stats(&p, true, "after second bulk insert");
	compare_contents(&p, "after second bulk insert");
	qs = random_queries(&p, &r, 50);
	compare_search(&p, GI_METRIC_L2, 50, qs, 8, 10, "after bulk inserts");
	compare_search(&p, GI_METRIC_IP, 50, qs, 64, 100, "after bulk inserts, all lists");
	free(qs);
	pair_close(&p);
out:
	free(lists);
	free(keys);
	free(pay);
}

/* the SIVF sliding window: pool size stays constant, contents agree */
static void
test_sliding_window(void)
{
	pair		p;
	rng			r = {123};
	uint32_t	dim = 16;
	uint32_t	W = 4000;
	uint32_t	B = 500;
	int			steps = scaled(20);
	uint32_t   *lists = malloc(B * sizeof(uint32_t));
	uint64_t   *keys = malloc(B * sizeof(uint64_t));
	float	   *pay = malloc((size_t) B * dim * sizeof(float));
	uint64_t	next = 0;
	int			step;
	gi_store_stats st0;
	gi_store_stats st;

	if (!pair_open(&p, 20, dim, 16, true, 0, &r))
		goto out;
	for (step = 0; step < steps + (int) (W / B) && checks_failed < 10; step++)
	{
		uint32_t	i;

		for (i = 0; i < B; i++)
		{
			random_vector(&r, pay + (size_t) i * dim, dim, false);
			lists[i] = nearest_list(&p, pay + (size_t) i * dim);
			keys[i] = next + i;
		}
		do_insert(&p, B, lists, keys, pay, "window insert");
		next += B;
		if (next > W)
		{
			for (i = 0; i < B; i++)
				keys[i] = next - W - B + i;
			do_delete(&p, B, keys, "window delete");
		}
		compare_stats(&p, true, "window");
		if (step == (int) (W / B) + 1)
			C->store_stats(p.c, &st0);
		if (step % 5 == 4)
		{
			float	   *qs = random_queries(&p, &r, 8);

			compare_search(&p, GI_METRIC_L2, 8, qs, 5, 10, "window search");
			free(qs);
		}
	}
	C->store_stats(p.c, &st);
	EXPECT(st.slabs_total <= st0.slabs_total + 16, "pool kept growing: %" PRIu64 " -> %" PRIu64,
		   st0.slabs_total, st.slabs_total);
	compare_contents(&p, "window end");
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

/* ---- concurrency stress ---------------------------------------------------- */

typedef struct stress_shared
{
	pair	   *p;
	volatile int stop;
	uint32_t	nq;
	uint32_t	k;
	uint32_t	probes;
	const float *qs;
	/* reference over the records live throughout the epoch */
	const gi_hit *ref;
	const uint32_t *ref_found;
	/* key -> vector for everything that may be visible (unique keys) */
	const float *vec_of_key;
	const uint8_t *maybe_live;
	uint64_t	nkeys;
	/* results */
	uint64_t	searches;
	uint64_t	bad;
	char		msg[256];
} stress_shared;

static void *
stress_searcher(void *arg)
{
	stress_shared *sh = arg;
	pair	   *p = sh->p;
	gi_hit	   *h = malloc((size_t) sh->nq * sh->k * sizeof(gi_hit));
	uint32_t   *f = malloc(sh->nq * sizeof(uint32_t));

	while (!sh->stop)
	{
		gi_status	s = C->ivf_search(p->c, p->cent, p->dim, GI_METRIC_L2, sh->nq, sh->qs,
									  sh->probes, sh->k, h, f);
		uint32_t	q;

		sh->searches++;
		if (s != GI_OK)
		{
			if (sh->bad++ == 0)
				snprintf(sh->msg, sizeof(sh->msg), "search failed: %s", C->last_error());
			continue;
		}
		for (q = 0; q < sh->nq; q++)
		{
			const gi_hit *hq = h + (size_t) q * sh->k;
			const gi_hit *rq = sh->ref + (size_t) q * sh->k;
			uint32_t	r;

			if (f[q] < sh->ref_found[q])
			{
				if (sh->bad++ == 0)
					snprintf(sh->msg, sizeof(sh->msg), "query %u found %u < %u always-live records",
							 q, f[q], sh->ref_found[q]);
			}
			for (r = 0; r < f[q] && r < sh->k; r++)
			{
				uint64_t	key = hq[r].key;
				float		d;

				if (key >= sh->nkeys || !sh->maybe_live[key])
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg), "hit key %" PRIu64 " was never live", key);
					break;
				}
				/* a torn (half-written) record would not match its vector */
				d = ref_distance(GI_METRIC_L2, sh->qs + (size_t) q * p->dim,
								 sh->vec_of_key + key * p->dim, p->dim);
				if (!dist_close(d, hq[r].distance))
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg),
								 "hit key %" PRIu64 " distance %.9g, its vector gives %.9g",
								 key, (double) hq[r].distance, (double) d);
					break;
				}
				/* never worse than the always-live records alone */
				if (r < sh->ref_found[q] && hq[r].distance > rq[r].distance &&
					!dist_close(hq[r].distance, rq[r].distance))
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg),
								 "rank %u distance %.9g worse than always-live %.9g", r,
								 (double) hq[r].distance, (double) rq[r].distance);
					break;
				}
			}
		}
	}
	free(h);
	free(f);
	return NULL;
}

static void
test_concurrent_stress(void)
{
	pair		p;
	rng			r = {31337};
	uint32_t	dim = 32;
	uint32_t	nlists = 64;
	uint64_t	nkeys = 200000;
	uint32_t	initial = (uint32_t) scaled(40000);
	uint32_t	batch = 200;
	int			epochs = scaled(6);
	int			batches = scaled(30);
	float	   *vec = malloc((size_t) nkeys * dim * sizeof(float));
	uint8_t    *live = calloc(nkeys, 1);
	uint8_t    *maybe = calloc(nkeys, 1);
	uint32_t   *lists = malloc(initial * sizeof(uint32_t) + batch * sizeof(uint32_t));
	uint64_t   *keys = malloc((initial + batch) * sizeof(uint64_t));
	uint64_t	next_key = 0;
	uint64_t	total_searches = 0;
	uint64_t	i;
	int			e;

	if (self_mode)
	{
		printf("  (skipped in self mode)\n");
		goto done;
	}
	if (!pair_open(&p, nlists, dim, 64, true, 0, &r))
		goto done;
	cu_set_chunk(p.c, 37);
	for (i = 0; i < nkeys * dim; i++)
		vec[i] = rfloat(&r);
	for (i = 0; i < initial; i++)
	{
		keys[i] = next_key++;
		lists[i] = nearest_list(&p, vec + keys[i] * dim);
		live[keys[i]] = 1;
	}
	/* payloads: rows of vec in key order */
	do_insert(&p, initial, lists, keys, vec, "stress fill");

	for (e = 0; e < epochs && checks_failed == 0; e++)
	{
		stress_shared sh;
		pthread_t	th;
		uint64_t   *dels = malloc((size_t) batches * batch * sizeof(uint64_t));
		uint32_t	ndel = 0;
		/* odd epochs: a batch large enough for the multi-query tiles */
		uint32_t	nq = e % 2 ? 700 : 16;
		uint32_t	k = 20;
		float	   *qs = random_queries(&p, &r, nq);
		gi_hit	   *ref = malloc((size_t) nq * k * sizeof(gi_hit));
		uint32_t   *ref_found = malloc(nq * sizeof(uint32_t));
		int			b;

		/* this epoch deletes dels[] and inserts fresh keys */
		for (b = 0; b < batches * (int) batch / 2; b++)
		{
			uint64_t	key = rbelow(&r, (uint32_t) next_key);

			if (live[key])
			{
				live[key] = 0;
				dels[ndel++] = key;
			}
		}
		for (i = 0; i < next_key; i++)
			maybe[i] = live[i];
		/* reference: the host store without the deleted records */
		H->store_delete(p.h, ndel, dels, NULL);
		for (i = 0; i < ndel; i++)
			maybe[dels[i]] = 1;
		EXPECT(H->ivf_search(p.h, p.cent, dim, GI_METRIC_L2, nq, qs, 8, k, ref, ref_found) == GI_OK,
			   "reference search");
		for (i = next_key; i < next_key + (uint64_t) batches * batch && i < nkeys; i++)
			maybe[i] = 1;

		memset(&sh, 0, sizeof(sh));
		sh.p = &p;
		sh.nq = nq;
		sh.k = k;
		sh.probes = 8;
		sh.qs = qs;
		sh.ref = ref;
		sh.ref_found = ref_found;
		sh.vec_of_key = vec;
		sh.maybe_live = maybe;
		sh.nkeys = nkeys;
		EXPECT(cu_set_concurrent(p.c, true) == GI_OK, "concurrent on");
		pthread_create(&th, NULL, stress_searcher, &sh);
		/* mutations interleaved: insert a batch, delete a batch, ... */
		{
			uint32_t	dpos = 0;

			for (b = 0; b < batches; b++)
			{
				uint64_t	n = 0;

				if (b % 2 == 0 && next_key + batch <= nkeys)
				{
					for (i = 0; i < batch; i++)
					{
						keys[i] = next_key + i;
						lists[i] = nearest_list(&p, vec + keys[i] * dim);
					}
					EXPECT(C->store_insert(p.c, batch, lists, keys, vec + next_key * dim, &n) == GI_OK &&
						   n == batch, "concurrent insert: %s", C->last_error());
					H->store_insert(p.h, batch, lists, keys, vec + next_key * dim, NULL);
					for (i = 0; i < batch; i++)
						live[next_key + i] = 1;
					next_key += batch;
				}
				else if (dpos < ndel)
				{
					uint32_t	m = ndel - dpos < batch ? ndel - dpos : batch;

					EXPECT(C->store_delete(p.c, m, dels + dpos, &n) == GI_OK && n == m,
						   "concurrent delete: %s", C->last_error());
					dpos += m;
				}
			}
			if (dpos < ndel)
			{
				uint64_t	n = 0;

				EXPECT(C->store_delete(p.c, ndel - dpos, dels + dpos, &n) == GI_OK,
					   "concurrent delete rest");
			}
		}
		sh.stop = 1;
		pthread_join(th, NULL);
		EXPECT(cu_set_concurrent(p.c, false) == GI_OK, "concurrent off: %s", C->last_error());
		EXPECT(sh.bad == 0, "epoch %d: %" PRIu64 " bad results of %" PRIu64 " searches; first: %s",
			   e, sh.bad, sh.searches, sh.msg);
		total_searches += sh.searches;
		compare_stats(&p, false, "after epoch");
		compare_contents(&p, "after epoch");
		compare_search(&p, GI_METRIC_L2, nq, qs, 8, k, "after epoch");
		free(dels);
		free(qs);
		free(ref);
		free(ref_found);
	}
	printf("  %" PRIu64 " searches ran concurrently with mutations\n", total_searches);
	EXPECT(total_searches >= (uint64_t) epochs, "searches did not run");
	pair_close(&p);
done:
	free(vec);
	free(live);
	free(maybe);
	free(lists);
	free(keys);
}


/* ---- k-means for CREATE INDEX (kmeans_train / kmeans_assign) -------------------- */

/* the seed the access method trains with (GPUIVF_SEED) */
#define KM_SEED UINT64_C(0x67707569766653)

typedef gi_status (*km_train_fn) (const gi_kmeans_params *, uint32_t, const float *,
								  float *, uint32_t *);
typedef gi_status (*km_assign_fn) (uint32_t, uint32_t, gi_metric, const float *, uint32_t,
								   const float *, uint32_t *);
static km_train_fn KT;			/* under test */
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

	st = KA(k, dim, m, cent, n, x, got);
	EXPECT(st == GI_OK, "%s: kmeans_assign: %d %s", what, st, C->last_error());
	EXPECT(gi_host_kmeans_assign(k, dim, m, cent, n, x, ref) == GI_OK, "%s: host assign", what);
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

		EXPECT(KA(0, 3, GI_METRIC_L2, v, 1, v, lists) == GI_ERR_INVALID, "assign k = 0");
		EXPECT(KA(1, 3, (gi_metric) 7, v, 1, v, lists) == GI_ERR_INVALID, "assign bad metric");
		EXPECT(KA(1, 3, GI_METRIC_L2, v, 0, v, lists) == GI_OK, "assign n = 0");
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
		gi_kmeans_params p = {4, 0, 10, GI_METRIC_L2, 1};
		float		v[4] = {1, 2, 3, 4};
		float		c[4];
		uint32_t	k;

		EXPECT(KT(&p, 1, v, c, &k) == GI_ERR_INVALID, "train nlists = 0");
		p.nlists = 1;
		p.metric = 9;
		EXPECT(KT(&p, 1, v, c, &k) == GI_ERR_INVALID, "train bad metric");
		p.metric = GI_METRIC_L2;
		EXPECT(KT(&p, 0, v, c, &k) == GI_OK && k == 0, "train n = 0");
		C->kmeans_release();
		/* usable again after a release */
		EXPECT(KT(&p, 1, v, c, &k) == GI_OK && k == 1 && memcmp(c, v, sizeof(v)) == 0,
			   "train after release: %s", C->last_error());
	}
}

/* ---- driver ---------------------------------------------------------------------- */

typedef struct test_case
{
	const char *name;
	void		(*fn) (void);
	bool		oom;
} test_case;

static const test_case tests[] = {
	{"invalid arguments and empty stores", test_invalid, false},
	{"random differential, 1-slab chunks", test_diff_small_chunks, false},
	{"random differential, multi-posting keys", test_diff_multi_posting, false},
	{"random differential, one list", test_diff_single_list, false},
	{"random differential, 300 lists", test_diff_many_lists, false},
	{"random differential, d=128", test_diff_wide, false},
	{"large k (sort path)", test_large_k, false},
	{"large batches (multi-query tiles)", test_batch_tiles, false},
	{"exact distance ties", test_ties, false},
	{"memory limit", test_memory_limit, false},
	{"device out of memory (injected)", test_device_oom, true},
	{"bulk insert through the copy helpers", test_bulk_insert, false},
	{"sliding window", test_sliding_window, false},
	{"concurrent search during insert/delete", test_concurrent_stress, false},
	{"k-means assignment", test_kmeans_assign, false},
	{"k-means training", test_kmeans_train, false},
};

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : getenv("GI_CUDA_SO");
	const char *only = argc > 2 ? argv[2] : NULL;
	const char *sc = getenv("GI_TEST_SCALE");
	bool		no_oom = getenv("GI_TEST_NO_OOM") != NULL;
	size_t		t;

	if (sc)
		scale = atof(sc);
	self_mode = getenv("GI_TEST_SELF") != NULL;
	H = gi_host_backend();
	if (self_mode)
	{
		C = gi_host_backend();
		KT = host_train;
		KA = gi_host_kmeans_assign;
	}
	else
	{
		void	   *handle;
		gi_backend_entry_fn entry;

		if (path == NULL)
		{
			fprintf(stderr, "usage: %s PATH/gpuindex_cuda.so [test-name-substring]\n", argv[0]);
			return 2;
		}
		handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (handle == NULL)
		{
			fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
			return 2;
		}
		entry = (gi_backend_entry_fn) dlsym(handle, GI_CUDA_ENTRY_SYMBOL);
		cu_check = (gi_cuda_store_check_fn) dlsym(handle, GI_CUDA_STORE_CHECK);
		cu_dump = (gi_cuda_store_dump_fn) dlsym(handle, GI_CUDA_STORE_DUMP);
		cu_set_concurrent = (gi_cuda_store_set_concurrent_fn) dlsym(handle, GI_CUDA_STORE_SET_CONCURRENT);
		cu_set_chunk = (gi_cuda_store_set_insert_chunk_fn) dlsym(handle, GI_CUDA_STORE_SET_INSERT_CHUNK);
		cu_fail = (gi_cuda_fail_alloc_after_fn) dlsym(handle, GI_CUDA_FAIL_ALLOC_AFTER);
		cu_copy_threads = (gi_cuda_set_copy_threads_fn) dlsym(handle, GI_CUDA_SET_COPY_THREADS);
		if (!entry || !cu_check || !cu_dump || !cu_set_concurrent || !cu_set_chunk || !cu_fail ||
			!(C = entry()))
		{
			fprintf(stderr, "%s lacks the backend entry or the test hooks\n", path);
			return 2;
		}
		if (C->device_count() <= 0)
		{
			printf("no CUDA device (%s): skipped\n", C->last_error());
			return 77;
		}
		if (C->store_create == NULL || C->ivf_search == NULL)
		{
			fprintf(stderr, "the CUDA backend has no store\n");
			return 1;
		}
		if (C->kmeans_train == NULL || C->kmeans_assign == NULL || C->kmeans_release == NULL)
		{
			fprintf(stderr, "the CUDA backend has no k-means\n");
			return 1;
		}
		KT = C->kmeans_train;
		KA = C->kmeans_assign;
		printf("device: %s\n", C->device_name());
	}
	printf("scale %.2f%s\n", scale, self_mode ? " (self mode: host vs host)" : "");

	for (t = 0; t < sizeof(tests) / sizeof(tests[0]); t++)
	{
		double		t0 = now_s();

		if (only && strstr(tests[t].name, only) == NULL)
			continue;
		if (tests[t].oom && (no_oom || self_mode))
		{
			printf("[ SKIP ] %s\n", tests[t].name);
			continue;
		}
		checks_failed = 0;
		printed = 0;
		printf("[ RUN  ] %s\n", tests[t].name);
		fflush(stdout);
		tests[t].fn();
		if (checks_failed == 0)
		{
			tests_passed++;
			printf("[  OK  ] %s (%.2f s)\n", tests[t].name, now_s() - t0);
		}
		else
		{
			tests_failed++;
			printf("[ FAIL ] %s (%d failed checks, %.2f s)\n", tests[t].name, checks_failed,
				   now_s() - t0);
		}
		fflush(stdout);
	}
	printf("hits compared: %" PRIu64 ", boundary ties accepted: %" PRIu64
		   ", max relative distance error (|d| >= 1e-2): %.3g\n",
		   hits_compared, ties_accepted, max_rel_err);
	printf("%d passed, %d failed\n", tests_passed, tests_failed);
	return tests_failed ? 1 : 0;
}
