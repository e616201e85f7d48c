/*
 * bench_sparse.c
 *		Microbenchmark of the CUDA sparse kind: queries per second of the
 *		term-parallel and the document-parallel kernel (and the chooser's
 *		pick) on synthetic MS MARCO-like collections, next to the bandwidth
 *		floor of the postings each one must read.
 *
 *	 bench_sparse.run PATH/gpuindex_cuda.so [DOCS BATCH [DOCS BATCH ...]]
 *
 * Environment: GI_BENCH_SPARSE_BUDGET_MB=A,B,... times the asked shape
 * under each scratch budget first (then the kind's default), GI_BENCH_SPARSE_KEYS=any builds the store without
 * the per-list key check (faster to build; the search is the same),
 * GI_BENCH_SPARSE_SHAPES=main times only the asked shape at k 10,
 * GI_BENCH_SPARSE_SLAB_ORDER=1|0 forces the term path's grouping (by term
 * and query block in slab order, or by (query, term)),
 * GI_BENCH_SPARSE_COUNTS=1 makes every weight 1 (GENIE's counts) and times
 * the term path (a double per document: the plain count table) against
 * the counting path (bit-packed counters, GI_SPARSE_COUNT), the latter
 * also with its plain scatter and its shared-memory tiles each forced,
 * GI_BENCH_SPARSE_DUMP=DIR writes the (last) collection, the asked
 * shape's first batch of queries and the kernel's top 10 of each there
 * (CSR arrays, see dump_csr) for a reference outside the database.
 *
 * Documents: about 120 distinct terms each, Zipf (s = 1) over a
 * 30,522-term vocabulary, positive weights; queries: 30 terms from the
 * same distribution, each query its own, or (the "shared" batches) all
 * with the same terms and their own weights.  Only the CUDA store is built (no host
 * reference: the differential test covers correctness).  Each shape is
 * timed per method over three rotating query batches (median of REPS
 * searches, after one warm-up), then once more with the phase profile on.
 * The floor is the posting bytes a method must read at least (4-byte
 * weight and 4-byte ordinal per posting: every (query, term) list for the
 * term path, the union of the batch's lists for the document path) over
 * the device-to-device copy bandwidth measured here.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gi_backend.h"
#include "gi_cuda_test.h"
#include "gi_kind_sparse.h"

#define DIM 30522
#define DOC_NNZ 120
#define QUERY_NNZ 30
#define REPS 5

static const gi_backend_ops *C;
static gi_cuda_sparse_profile_fn prof_fn;
static gi_cuda_sparse_set_count_tiles_fn tiles_fn;	/* may be NULL */
static gi_cuda_sparse_set_budget_fn set_budget;
static const char *dump_dir;
static bool counts;

/*
 * Append rows to DIR/NAME.{indptr,indices,data}: int64 row starts (the
 * first row's 0 only when first), int32 0-based columns, float32 values.
 */
static void
dump_csr(const char *name, bool first, uint64_t base, uint32_t nrows, const uint32_t *off,
		 const uint32_t *cols, const float *vals)
{
	char		path[4096];
	FILE	   *f[3];
	const char *ext[3] = {"indptr", "indices", "data"};
	int			i;

	for (i = 0; i < 3; i++)
	{
		snprintf(path, sizeof(path), "%s/%s.%s", dump_dir, name, ext[i]);
		f[i] = fopen(path, first ? "wb" : "ab");
		if (f[i] == NULL)
		{
			perror(path);
			exit(1);
		}
	}
	for (uint32_t r = first ? 0 : 1; r <= nrows; r++)
	{
		int64_t		at = (int64_t) (base + off[r]);

		fwrite(&at, sizeof(at), 1, f[0]);
	}
	fwrite(cols, sizeof(uint32_t), off[nrows], f[1]);
	fwrite(vals, sizeof(float), off[nrows], f[2]);
	for (i = 0; i < 3; i++)
		fclose(f[i]);
}

/* the queries of one packed batch as CSR, and their top 10 (keys - 1: row numbers) */
static void
dump_batch(gi_store *s, uint32_t nq, const unsigned char *qb, size_t qbytes)
{
	gi_sparse_search_params par = {DIM, GI_SPARSE_AUTO};
	gi_hit	   *hits = malloc((size_t) nq * 10 * sizeof(gi_hit));
	uint32_t   *found = malloc(nq * sizeof(uint32_t));
	uint32_t   *off = malloc((nq + 1) * sizeof(uint32_t));
	uint32_t   *cols = calloc((size_t) nq * QUERY_NNZ + 1, sizeof(uint32_t));
	float	   *vals = calloc((size_t) nq * QUERY_NNZ + 1, sizeof(float));
	char		path[4096];
	FILE	   *f;
	size_t		at = 0;

	off[0] = 0;
	for (uint32_t q = 0; q < nq; q++)
	{
		uint32_t	m;

		memcpy(&m, qb + at, 4);
		memcpy(cols + off[q], qb + at + 4, (size_t) m * 4);
		memcpy(vals + off[q], qb + at + 4 + (size_t) m * 4, (size_t) m * 4);
		off[q + 1] = off[q] + m;
		at += gi_sparse_query_bytes(m);
	}
	dump_csr("queries", true, 0, nq, off, cols, vals);
	if (C->kinds[GI_KIND_SPARSE]->search(s, &par, nq, qb, qbytes, 10, hits, found) != GI_OK)
	{
		fprintf(stderr, "search: %s\n", C->last_error());
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/topk.rows", dump_dir);
	f = fopen(path, "wb");
	for (uint32_t q = 0; q < nq; q++)
		for (uint32_t r = 0; r < 10; r++)
		{
			int64_t		row = r < found[q] ? (int64_t) hits[q * 10 + r].key - 1 : -1;

			fwrite(&row, sizeof(row), 1, f);
		}
	fclose(f);
	snprintf(path, sizeof(path), "%s/topk.scores", dump_dir);
	f = fopen(path, "wb");
	for (uint32_t q = 0; q < nq * 10; q++)
	{
		float		sc = -hits[q].distance;

		fwrite(&sc, sizeof(sc), 1, f);
	}
	fclose(f);
	printf("dumped the collection, %u queries and their top 10 to %s\n", nq, dump_dir);
	free(hits);
	free(found);
	free(off);
	free(cols);
	free(vals);
}
static double bw_gbs;

/* per thread; documents reseed it from their number, so any thread count builds the same collection */
static __thread uint64_t rs = 0x2545F4914F6CDD1Dull;

static void
reseed(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	rs = (x ^ (x >> 31)) | 1;
}

static uint64_t
rnext(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 2685821657736338717ull;
}

static double
runif(void)
{
	return (double) (rnext() >> 11) / 9007199254740992.0;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Walker's alias table for the Zipf distribution over DIM terms */
static double alias_p[DIM];
static uint32_t alias_a[DIM];

static void
zipf_init(double s)
{
	static double p[DIM];
	static uint32_t small[DIM];
	static uint32_t large[DIM];
	uint32_t	ns = 0;
	uint32_t	nl = 0;
	double		sum = 0.0;
	uint32_t	i;

	for (i = 0; i < DIM; i++)
		sum += p[i] = 1.0 / pow(i + 1.0, s);
	for (i = 0; i < DIM; i++)
	{
		p[i] = p[i] / sum * DIM;
		if (p[i] < 1.0)
			small[ns++] = i;
		else
			large[nl++] = i;
	}
	while (ns > 0 && nl > 0)
	{
		uint32_t	a = small[--ns];
		uint32_t	b = large[--nl];

		alias_p[a] = p[a];
		alias_a[a] = b;
		p[b] -= 1.0 - p[a];
		if (p[b] < 1.0)
			small[ns++] = b;
		else
			large[nl++] = b;
	}
	while (nl > 0)
		alias_p[large[--nl]] = 1.0;
	while (ns > 0)
		alias_p[small[--ns]] = 1.0;
}

static uint32_t
zipf(void)
{
	uint32_t	i = (uint32_t) (runif() * DIM);

	if (i >= DIM)
		i = DIM - 1;
	return runif() < alias_p[i] ? i : alias_a[i];
}

static int
u32cmp(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return x < y ? -1 : x > y;
}

/* m distinct Zipf terms, ascending */
static __thread uint32_t stamp[DIM];
static __thread uint32_t epoch;

static void
draw(uint32_t m, uint32_t *t)
{
	uint32_t	n = 0;

	epoch++;
	while (n < m)
	{
		uint32_t	x = zipf();

		if (stamp[x] == epoch)
			continue;
		stamp[x] = epoch;
		t[n++] = x;
	}
	qsort(t, m, sizeof(uint32_t), u32cmp);
}

/*
 * A batch of nq queries (packed as gi_kind_sparse.h says): each its own
 * Zipf terms, or (shared) all the same terms with their own weights.
 */
static unsigned char *
make_queries(uint32_t nq, bool shared, size_t *bytes)
{
	size_t		per = gi_sparse_query_bytes(QUERY_NNZ);
	unsigned char *b = malloc(per * nq);
	uint32_t	q;
	uint32_t	j;

	for (q = 0; q < nq; q++)
	{
		unsigned char *p = b + per * q;
		uint32_t	m = QUERY_NNZ;
		float	   *w = (float *) (p + 4 + 4 * m);

		memcpy(p, &m, 4);
		if (shared && q > 0)
			memcpy(p + 4, b + 4, 4 * m);
		else
			draw(m, (uint32_t *) (p + 4));
		for (j = 0; j < m; j++)
			w[j] = counts ? 1.0f : (float) (0.1 + 2.0 * runif());
	}
	*bytes = per * nq;
	return b;
}

/* docs documents into a fresh store (keys 1 .. docs) */
static gi_store *
build(uint32_t docs)
{
	gi_store_params par;
	gi_sparse_state st = {DIM, 0};
	gi_store   *s = NULL;
	uint32_t	per_call = 50000;
	size_t		room = (size_t) per_call * (DOC_NNZ + 20);
	uint32_t   *lists = malloc(room * sizeof(uint32_t));
	uint64_t   *keys = malloc(room * sizeof(uint64_t));
	float	   *w = malloc(room * sizeof(float));
	uint32_t   *off = malloc((per_call + 1) * sizeof(uint32_t));
	const char *km = getenv("GI_BENCH_SPARSE_KEYS");
	uint64_t	dumped = 0;
	double		t0 = now_s();
	double		tins = 0.0;
	uint32_t	d0;

	memset(&par, 0, sizeof(par));
	par.nlists = DIM;
	par.record_bytes = 4;
	par.key_mode = km && strcmp(km, "any") == 0 ? GI_KEYS_ANY : GI_KEYS_PER_LIST;
	if (C->store_create(&par, &s) != GI_OK ||
		C->kinds[GI_KIND_SPARSE]->set_state(s, &st, sizeof(st)) != GI_OK)
	{
		fprintf(stderr, "store: %s\n", C->last_error());
		exit(1);
	}
	for (d0 = 0; d0 < docs; d0 += per_call)
	{
		uint32_t	nd = docs - d0 < per_call ? docs - d0 : per_call;
		uint32_t	n;
		int64_t		i;
		uint64_t	done = 0;
		double		t1;

		/* each document from its own seed: its size, then (same draws again) its terms */
		off[0] = 0;
		for (i = 0; i < nd; i++)
		{
			reseed(d0 + i);
			off[i + 1] = off[i] + DOC_NNZ - 20 + (uint32_t) (runif() * 41);
		}
		n = off[nd];
#pragma omp parallel for schedule(static, 256)
		for (i = 0; i < nd; i++)
		{
			uint32_t	m;
			uint32_t	j;

			reseed(d0 + i);
			m = DOC_NNZ - 20 + (uint32_t) (runif() * 41);
			draw(m, lists + off[i]);
			for (j = 0; j < m; j++)
			{
				keys[off[i] + j] = d0 + i + 1;
				w[off[i] + j] = counts ? 1.0f : (float) (0.05 + 3.0 * runif());
			}
		}
		if (dump_dir)
			dump_csr("docs", d0 == 0, dumped, nd, off, lists, w);
		dumped += n;
		t1 = now_s();
		if (C->store_insert(s, n, lists, keys, w, &done) != GI_OK || done != n)
		{
			fprintf(stderr, "insert: %s\n", C->last_error());
			exit(1);
		}
		tins += now_s() - t1;
	}
	{
		gi_store_stats ss;

		C->store_stats(s, &ss);
		printf("built %u documents, %" PRIu64 " postings in %.1f s (inserts %.1f s), %.2f GB\n",
			   docs, ss.rows, now_s() - t0, tins, ss.bytes / 1e9);
	}
	free(lists);
	free(keys);
	free(w);
	free(off);
	return s;
}

static int
dblcmp(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static const char *
mname(uint32_t m)
{
	return m == GI_SPARSE_TERM ? "term" : m == GI_SPARSE_DOC ? "doc" :
		m == GI_SPARSE_COUNT ? "count" : "auto";
}

/* one shape, one method: median seconds per batch and the last profile */
static double
time_method(gi_store *s, uint32_t method, uint32_t nq, uint32_t k, unsigned char **qb,
			size_t *qbytes, double *prof)
{
	gi_sparse_search_params par = {DIM, method};
	gi_hit	   *hits = malloc((size_t) nq * k * sizeof(gi_hit));
	uint32_t   *found = malloc(nq * sizeof(uint32_t));
	double		t[REPS];
	int			r;

	for (r = -1; r < REPS; r++)
	{
		double		t0 = now_s();

		if (C->kinds[GI_KIND_SPARSE]->search(s, &par, nq, qb[(r + 3) % 3], qbytes[(r + 3) % 3], k,
											 hits, found) != GI_OK)
		{
			fprintf(stderr, "search: %s\n", C->last_error());
			exit(1);
		}
		if (r >= 0)
			t[r] = now_s() - t0;
	}
	qsort(t, REPS, sizeof(double), dblcmp);
	/* once more with the phases timed */
	prof_fn(s, 1, NULL, 0);
	C->kinds[GI_KIND_SPARSE]->search(s, &par, nq, qb[0], qbytes[0], k, hits, found);
	prof_fn(s, 0, prof, GI_CUDA_SPARSE_PROFILE_N);
	free(hits);
	free(found);
	return t[REPS / 2];
}

static void
shape(gi_store *s, uint32_t docs, uint32_t nq, uint32_t k, bool shared)
{
	unsigned char *qb[3];
	size_t		qbytes[3];
	const uint32_t methods[] = {GI_SPARSE_TERM, counts ? GI_SPARSE_COUNT : GI_SPARSE_DOC,
	GI_SPARSE_AUTO};
	double		prof[GI_CUDA_SPARSE_PROFILE_N];
	int			i;

	for (i = 0; i < 3; i++)
		qb[i] = make_queries(nq, shared, &qbytes[i]);
	if (dump_dir && !shared && k == 10)
		dump_batch(s, nq, qb[0], qbytes[0]);
	for (i = 0; i < 3; i++)
	{
		double		t = time_method(s, methods[i], nq, k, qb, qbytes, prof);
		double		floor_term = prof[3] * 8.0 / (bw_gbs * 1e9);
		double		floor_doc = prof[4] * 8.0 / (bw_gbs * 1e9);
		double		fl = methods[i] == GI_SPARSE_DOC || (methods[i] == GI_SPARSE_AUTO && prof[0] == 2)
			? floor_doc : floor_term;

		/* the counting path reads ordinals only: 4 bytes a posting */
		if (prof[0] == GI_SPARSE_COUNT)
			fl = floor_term / 2;

		printf("docs %7u batch %4u%s k %4u %-5s -> %-5s: %8.3f ms/batch %9.0f q/s | floor %7.3f ms (%.1f%%) | "
			   "postings term %.3g union %.3g | dir %.2f score %.2f select %.2f total %.2f ms, %g sub-batches, %g ranges | %.3f ns/posting%s\n",
			   docs, nq, shared ? " shared" : "", k, mname(methods[i]), mname((uint32_t) prof[0]), t * 1e3, nq / t, fl * 1e3,
			   100.0 * fl / t, prof[3], prof[4], prof[5], prof[6], prof[7], prof[8], prof[1], prof[2],
			   prof[6] * 1e6 / (prof[0] == 2 ? prof[4] : prof[3]),
			   prof[0] == GI_SPARSE_COUNT ? (prof[10] > 0 ? " | tiles" : " | scatter") : "");
		fflush(stdout);
	}
	/* the counting path both ways: the plain scatter, then tiles */
	for (i = 0; counts && tiles_fn && i < 2; i++)
	{
		double		t;

		tiles_fn(i, 0);
		t = time_method(s, GI_SPARSE_COUNT, nq, k, qb, qbytes, prof);
		printf("docs %7u batch %4u%s k %4u count by %-7s: %8.3f ms/batch %9.0f q/s | score %.2f select %.2f total %.2f ms, %g sub-batches, band %g ordinals\n",
			   docs, nq, shared ? " shared" : "", k, i ? "tiles" : "scatter", t * 1e3, nq / t,
			   prof[6], prof[7], prof[8], prof[1], prof[10]);
		fflush(stdout);
	}
	if (tiles_fn)
		tiles_fn(-1, 0);
	for (i = 0; i < 3; i++)
		free(qb[i]);
}

int
main(int argc, char **argv)
{
	void	   *h;
	gi_backend_entry_fn entry;
	gi_cuda_bandwidth_fn bw;
	double		h2d = 0;
	double		h2dp = 0;
	int			a;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
	{
		fprintf(stderr, "usage: bench_sparse.run PATH/gpuindex_cuda.so [DOCS BATCH ...]\n");
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
	{
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	entry = (gi_backend_entry_fn) dlsym(h, GI_CUDA_ENTRY_SYMBOL);
	prof_fn = (gi_cuda_sparse_profile_fn) dlsym(h, GI_CUDA_SPARSE_PROFILE);
	tiles_fn = (gi_cuda_sparse_set_count_tiles_fn) dlsym(h, GI_CUDA_SPARSE_SET_COUNT_TILES);
	bw = (gi_cuda_bandwidth_fn) dlsym(h, GI_CUDA_BANDWIDTH);
	if (!entry || !prof_fn || !bw || !(C = entry()) || C->device_count() <= 0)
	{
		fprintf(stderr, "no CUDA backend or device\n");
		return 77;
	}
	if (bw((size_t) 1 << 30, &bw_gbs, &h2d, &h2dp) != GI_OK)
	{
		fprintf(stderr, "bandwidth: %s\n", C->last_error());
		return 1;
	}
	printf("device: %s; device-to-device copy %.0f GB/s (read + write)\n", C->device_name(NULL),
		   bw_gbs);
	zipf_init(1.0);
	set_budget = (gi_cuda_sparse_set_budget_fn) dlsym(h, GI_CUDA_SPARSE_SET_BUDGET);
	if (getenv("GI_BENCH_SPARSE_SLAB_ORDER"))
	{
		gi_cuda_sparse_set_slab_order_fn so =
			(gi_cuda_sparse_set_slab_order_fn) dlsym(h, GI_CUDA_SPARSE_SET_SLAB_ORDER);

		if (so)
		{
			so(atoi(getenv("GI_BENCH_SPARSE_SLAB_ORDER")));
			printf("term path's order forced: %s\n", getenv("GI_BENCH_SPARSE_SLAB_ORDER"));
		}
	}
	dump_dir = getenv("GI_BENCH_SPARSE_DUMP");
	counts = getenv("GI_BENCH_SPARSE_COUNTS") && atoi(getenv("GI_BENCH_SPARSE_COUNTS")) == 1;
	if (counts)
		printf("every weight 1: scores are counts (the plain count table against the counting path)\n");
	for (a = 2; a + 1 < argc || a == 2; a += 2)
	{
		uint32_t	docs = argc > a ? (uint32_t) atoi(argv[a]) : 50000;
		uint32_t	nq = argc > a + 1 ? (uint32_t) atoi(argv[a + 1]) : 128;
		gi_store   *s = build(docs);
		uint32_t	sweep[] = {1, 8, 32, 128, 500};
		size_t		i;

		/* the asked shape at k 10 and 1000, then a batch sweep for the chooser */
		if (getenv("GI_BENCH_SPARSE_BUDGET_MB") && set_budget)
		{
			/* the asked shape under each budget of the list, then the default */
			char	   *list = strdup(getenv("GI_BENCH_SPARSE_BUDGET_MB"));

			for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
			{
				set_budget((size_t) atol(tok) << 20);
				printf("scratch budget %s MB\n", tok);
				shape(s, docs, nq, 10, false);
			}
			set_budget(0);
			printf("scratch budget: the default\n");
			free(list);
		}
		shape(s, docs, nq, 10, false);
		if (getenv("GI_BENCH_SPARSE_SHAPES") && strcmp(getenv("GI_BENCH_SPARSE_SHAPES"), "main") == 0)
		{
			C->store_destroy(s);
			continue;
		}
		shape(s, docs, nq, 1000, false);
		for (i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++)
			if (sweep[i] != nq)
				shape(s, docs, sweep[i], 10, false);
		/* batches whose queries share their terms: the document path's case */
		shape(s, docs, 32, 10, true);
		shape(s, docs, nq, 10, true);
		C->store_destroy(s);
		if (argc <= 2)
			break;
	}
	return 0;
}
