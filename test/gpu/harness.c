/*
 * harness.c
 *		Differential tests of the CUDA backend against the host backend:
 *		loading the module, the pairs of stores and their comparison, the
 *		random store differential, and the driver that runs every suite.
 *
 * The same operation sequences run on the host store (the reference,
 * src/backend/host/host_*.c compiled in) and on the CUDA store
 * (gpuindex_cuda.so, dlopen'ed as the device service does).  After every
 * operation the two must agree: statuses, counts, statistics (except
 * `bytes`, which each backend measures for itself); every few operations
 * the CUDA store's device state is checked against its own invariants (a
 * hook in the module) and read back list by list from the device and
 * compared, record for record, with the host store.  Each kind's searches
 * are compared by its own test file.
 *
 * Plain C, no test framework: prints "N passed, M failed" and exits 1 on
 * any failure, 77 when no CUDA device is present.
 *
 *	 test_cuda_backend.run PATH/gpuindex_cuda.so [test-name-substring]
 *	 GI_TEST_SCALE=0.1   shorter runs (compute-sanitizer)
 *	 GI_TEST_NO_OOM=1    skip the (injected) device out-of-memory test
 *	 GI_TEST_SELF=1      run the harness with the host backend on both
 *	                     sides (checks the test itself on a machine with
 *	                     no GPU)
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

const gi_backend_ops *H;
const gi_backend_ops *C;
bool		self_mode;
double		scale = 1.0;

gi_cuda_store_check_fn cu_check;
gi_cuda_store_dump_fn cu_dump;
gi_cuda_store_set_concurrent_fn cu_set_concurrent;
gi_cuda_store_set_insert_chunk_fn cu_set_chunk;
gi_cuda_fail_alloc_after_fn cu_fail;
gi_cuda_set_copy_threads_fn cu_copy_threads;
gi_cuda_sparse_set_budget_fn cu_sparse_budget;
gi_cuda_sparse_set_slab_order_fn cu_sparse_slab_order;
gi_cuda_sparse_set_count_tiles_fn cu_sparse_count_tiles;
gi_cuda_sparse_profile_fn cu_sparse_profile;
gi_cuda_ivf_set_scan_fn cu_ivf_scan;
gi_cuda_ivf_set_dir_shape_fn cu_ivf_dir_shape;
gi_cuda_ivf_set_tiles_fn cu_ivf_tiles;
gi_cuda_ivf_set_tile_chunk_fn cu_ivf_tile_chunk;

int			checks_failed;
static int	printed;
static int	tests_passed;
static int	tests_failed;

void
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

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
scaled(int n)
{
	int			v = (int) (n * scale);

	return v < 1 ? 1 : v;
}

/* ---- random numbers ---------------------------------------------------------- */

uint64_t
rnext(rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * UINT64_C(2685821657736338717);
}

uint32_t
rbelow(rng *r, uint32_t n)
{
	return n ? (uint32_t) ((rnext(r) >> 32) % n) : 0;
}

float
rfloat(rng *r)
{
	return (float) ((double) (rnext(r) >> 40) / (double) (1 << 23) - 1.0);
}

bool
rchance(rng *r, double p)
{
	return (double) (rnext(r) >> 11) / 9007199254740992.0 < p;
}

void
random_vector(rng *r, float *v, uint32_t words, bool specials)
{
	uint32_t	j;

	for (j = 0; j < words; j++)
		v[j] = rfloat(r);
	if (!specials)
		return;
	if (rchance(r, 0.03))
		memset(v, 0, words * sizeof(float));	/* zero norm: cosine +Inf */
	else if (rchance(r, 0.005))
		v[rbelow(r, words)] = NAN;	/* ranks as +Inf */
	else if (rchance(r, 0.05))
	{
		/* a coarse grid: many exact distance ties */
		for (j = 0; j < words; j++)
			v[j] = (float) ((int) (v[j] * 2)) / 2.0f;
	}
}

/* ---- pairs of stores ----------------------------------------------------------- */

bool
pair_open(pair *p, const pair_cfg *cfg, rng *r)
{
	gi_store_params par;
	gi_status	sh;
	gi_status	sc;

	memset(p, 0, sizeof(*p));
	memset(&par, 0, sizeof(par));
	par.nlists = cfg->nlists;
	par.record_bytes = cfg->words * 4;
	par.chunk_slabs = cfg->chunk_slabs;
	par.key_mode = cfg->key_mode;
	par.memory_limit = cfg->memory_limit;
	par.device = cfg->hdev;
	sh = H->store_create(&par, &p->h);
	par.device = cfg->cdev;
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
	p->nlists = cfg->nlists;
	p->words = cfg->words;
	p->key_mode = cfg->key_mode;
	p->kind = cfg->kind;
	if (p->kind && p->kind->open && !p->kind->open(p, r))
	{
		pair_close(p);
		return false;
	}
	return true;
}

void
pair_close(pair *p)
{
	if (p->kind && p->kind->close)
		p->kind->close(p);
	if (p->h)
		H->store_destroy(p->h);
	if (p->c)
		C->store_destroy(p->c);
	memset(p, 0, sizeof(*p));
}

void
do_insert(pair *p, uint32_t n, const uint32_t *lists, const uint64_t *keys,
		  const void *pay, const char *when)
{
	uint64_t	na = 0;
	uint64_t	nb = 0;
	gi_status	sa = H->store_insert(p->h, n, lists, keys, pay, &na);
	gi_status	sb = C->store_insert(p->c, n, lists, keys, pay, &nb);

	EXPECT(sa == sb && na == nb, "%s: insert of %u: host %d/%" PRIu64 ", cuda %d/%" PRIu64 " (%s)",
		   when, n, sa, na, sb, nb, sb != GI_OK ? C->last_error() : "");
}

void
do_delete(pair *p, uint32_t n, const uint64_t *keys, const char *when)
{
	uint64_t	na = 0;
	uint64_t	nb = 0;
	gi_status	sa = H->store_delete(p->h, n, keys, &na);
	gi_status	sb = C->store_delete(p->c, n, keys, &nb);

	EXPECT(sa == sb && na == nb, "%s: delete of %u: host %d/%" PRIu64 ", cuda %d/%" PRIu64 " (%s)",
		   when, n, sa, na, sb, nb, sb != GI_OK ? C->last_error() : "");
}

void
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
	if (p->key_mode == GI_KEYS_UNIQUE)
		EXPECT(b.keys == b.rows, "%s: unique keys, but %" PRIu64 " keys own %" PRIu64 " rows",
			   when, b.keys, b.rows);
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

/* the store under test's own invariants */
static bool
check_invariants(pair *p, const char *when)
{
	char		err[512];
	bool		ok = self_mode ? gi_host_store_check(p->c, err, sizeof(err))
		: cu_check(p->c, err, sizeof(err));

	EXPECT(ok, "%s: %s check: %s", when, self_mode ? "store" : "device", err);
	return ok;
}

/* one list of the store under test, read back from the device */
static gi_status
read_list(pair *p, uint32_t l, recs *b)
{
	void	   *pay = NULL;
	gi_status	st;

	if (self_mode)
		return gi_host_store_foreach(p->c, l, recs_cb, b) >= 0 ? GI_OK : GI_ERR_INVALID;
	st = cu_dump(p->c, l, &b->keys, &pay, &b->n);
	b->pay = pay;
	b->cap = b->n;
	return st;
}

void
compare_contents(pair *p, const char *when)
{
	uint32_t	l;

	if (!check_invariants(p, when))
		return;
	for (l = 0; l < p->nlists; l++)
	{
		recs		a;
		recs		b;
		uint64_t   *ia;
		uint64_t   *ib;
		uint64_t	i;
		gi_status	st;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.words = b.words = p->words;
		EXPECT(gi_host_store_foreach(p->h, l, recs_cb, &a) >= 0, "host foreach");
		st = read_list(p, l, &b);
		EXPECT(st == GI_OK, "%s: read back list %u: %s", when, l, C->last_error());
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
					memcmp(a.pay + ia[i] * p->words, b.pay + ib[i] * p->words, p->words * 4) != 0)
				{
					EXPECT(false, "%s: list %u record %" PRIu64 ": host key %" PRIu64
						   ", device key %" PRIu64 " (or payloads differ)", when, l, i,
						   a.keys[ia[i]], b.keys[ib[i]]);
					break;
				}
				if (p->key_mode == GI_KEYS_PER_LIST && i > 0 &&
					b.keys[ib[i]] == b.keys[ib[i - 1]])
				{
					EXPECT(false, "%s: list %u holds key %" PRIu64 " twice (one record per list)",
						   when, l, b.keys[ib[i]]);
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

/* ---- the random store differential ---------------------------------------------- */

/* the key of a new record: mostly below keyspace, now and then near 2^64 */
static uint64_t
random_key(rng *r, uint32_t keyspace)
{
	return rchance(r, 0.01) ? UINT64_MAX - rbelow(r, 3) : rbelow(r, keyspace);
}

/*
 * n records into lists/keys/pay.  per_row 1: each record its own random
 * key.  per_row > 1 (posting lists): rows of 1 .. per_row records in
 * distinct lists, a few repeating a list of their row (a pair repeated in
 * the call), a few rows repeating an earlier row's key.
 */
static void
random_batch(const pair *p, rng *r, uint32_t n, uint32_t keyspace, uint32_t per_row,
			 uint32_t *lists, uint64_t *keys, float *pay)
{
	uint32_t	words = p->words;
	uint32_t	i;

	if (per_row <= 1)
	{
		for (i = 0; i < n; i++)
		{
			float	   *v = pay + (size_t) i * words;

			random_vector(r, v, words, true);
			if (i > 0 && rchance(r, 0.03))
				memcpy(v, pay + (size_t) rbelow(r, i) * words, words * sizeof(float));
			lists[i] = p->kind && p->kind->pick_list && rchance(r, 0.7)
				? p->kind->pick_list(p, v, r) : rbelow(r, p->nlists);
			keys[i] = random_key(r, keyspace);
		}
		return;
	}
	for (i = 0; i < n;)
	{
		uint32_t	m = 1 + rbelow(r, per_row);
		uint64_t	key = (i > 0 && rchance(r, 0.05)) ? keys[rbelow(r, i)]
			: random_key(r, keyspace);
		uint32_t	base = rbelow(r, p->nlists);
		uint32_t	j;

		for (j = 0; j < m && i < n; j++, i++)
		{
			random_vector(r, pay + (size_t) i * words, words, true);
			lists[i] = (j > 0 && rchance(r, 0.1)) ? lists[i - 1 - rbelow(r, j)]
				: (base + j * 7919u) % p->nlists;
			keys[i] = key;
		}
	}
}

void
random_differential(const diff_cfg *cfg)
{
	pair		p;
	rng			r = {cfg->seed};
	uint32_t	maxn = 4000;
	uint32_t	nlists = cfg->store.nlists;
	uint32_t	keyspace = cfg->keyspace;
	uint32_t   *lists = malloc(maxn * sizeof(uint32_t));
	uint64_t   *keys = malloc(maxn * sizeof(uint64_t));
	float	   *pay = malloc((size_t) maxn * cfg->store.words * sizeof(float));
	bool		search;
	char		when[96];
	int			op;

	if (!pair_open(&p, &cfg->store, &r))
		goto out;
	search = p.kind && p.kind->random_search;
	/* small pipelined chunks: every larger insert crosses several */
	if (!self_mode && cfg->insert_chunk)
		cu_set_chunk(p.c, cfg->insert_chunk);
	for (op = 0; op < cfg->ops && checks_failed < 20; op++)
	{
		uint32_t	x = rbelow(&r, search ? 100 : 67);
		uint32_t	n;
		uint32_t	i;

		snprintf(when, sizeof(when), "lists %u words %u op %d", nlists, p.words, op);
		if (x < 40)
		{
			uint32_t	y = rbelow(&r, 100);

			n = y < 30 ? 1 : y < 80 ? 1 + rbelow(&r, 64) : y < 97 ? 1 + rbelow(&r, 600) : maxn;
			random_batch(&p, &r, n, keyspace, cfg->per_row, lists, keys, pay);
			do_insert(&p, n, lists, keys, pay, when);
		}
		else if (x < 65)
		{
			uint32_t	y = rbelow(&r, 100);

			n = y < 30 ? 1 : y < 85 ? 1 + rbelow(&r, 64) : 1 + rbelow(&r, 1000);
			/* a posting-list key owns many records: fewer keys a delete */
			if (cfg->per_row > 1)
				n = 1 + n / cfg->per_row;
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
			p.kind->random_search(&p, &r, when);
		compare_stats(&p, true, when);
		if (op % 10 == 9)
			compare_contents(&p, when);
	}
	compare_contents(&p, "end");
	{
		gi_store_stats st;

		if (C->store_stats(p.c, &st) == GI_OK)
			printf("  %d operations: %" PRIu64 " records inserted, %" PRIu64 " deleted, %" PRIu64
				   " live under %" PRIu64 " keys\n", op, st.inserts, st.deletes, st.rows, st.keys);
	}
	/* searches on whatever is there */
	if (p.kind && p.kind->final_search)
		p.kind->final_search(&p, &r);
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

/* ---- driver ---------------------------------------------------------------------- */

static int
load_module(const char *path)
{
	void	   *handle;
	gi_backend_entry_fn entry;

	if (path == NULL)
	{
		fprintf(stderr, "usage: test_cuda_backend.run PATH/gpuindex_cuda.so [test-name-substring]\n");
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
	cu_sparse_budget = (gi_cuda_sparse_set_budget_fn) dlsym(handle, GI_CUDA_SPARSE_SET_BUDGET);
	cu_sparse_slab_order =
		(gi_cuda_sparse_set_slab_order_fn) dlsym(handle, GI_CUDA_SPARSE_SET_SLAB_ORDER);
	cu_sparse_count_tiles =
		(gi_cuda_sparse_set_count_tiles_fn) dlsym(handle, GI_CUDA_SPARSE_SET_COUNT_TILES);
	cu_sparse_profile = (gi_cuda_sparse_profile_fn) dlsym(handle, GI_CUDA_SPARSE_PROFILE);
	cu_ivf_scan = (gi_cuda_ivf_set_scan_fn) dlsym(handle, GI_CUDA_IVF_SET_SCAN);
	cu_ivf_dir_shape = (gi_cuda_ivf_set_dir_shape_fn) dlsym(handle, GI_CUDA_IVF_SET_DIR_SHAPE);
	cu_ivf_tiles = (gi_cuda_ivf_set_tiles_fn) dlsym(handle, GI_CUDA_IVF_SET_TILES);
	cu_ivf_tile_chunk = (gi_cuda_ivf_set_tile_chunk_fn) dlsym(handle, GI_CUDA_IVF_SET_TILE_CHUNK);
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
	if (C->store_create == NULL || C->device_open == NULL || C->device_close == NULL ||
		C->kinds[GI_KIND_IVF] == NULL || C->kinds[GI_KIND_IVFPQ] == NULL)
	{
		fprintf(stderr, "the CUDA backend has no store, devices, IVF or IVF-PQ kind\n");
		return 1;
	}
	if (C->kmeans_train == NULL || C->kmeans_assign == NULL || C->kmeans_release == NULL)
	{
		fprintf(stderr, "the CUDA backend has no k-means\n");
		return 1;
	}
	printf("device: %s (%d visible)\n", C->device_name(NULL), C->device_count());
	return 0;
}

static void
run_suite(const test_suite *suite, const char *only, bool no_oom)
{
	size_t		t;

	for (t = 0; t < suite->n; t++)
	{
		const test_case *tc = &suite->tests[t];
		double		t0 = now_s();

		if (only && strstr(tc->name, only) == NULL)
			continue;
		if (tc->oom && (no_oom || self_mode))
		{
			printf("[ SKIP ] %s\n", tc->name);
			continue;
		}
		checks_failed = 0;
		printed = 0;
		printf("[ RUN  ] %s\n", tc->name);
		fflush(stdout);
		tc->fn();
		if (checks_failed == 0)
		{
			tests_passed++;
			printf("[  OK  ] %s (%.2f s)\n", tc->name, now_s() - t0);
		}
		else
		{
			tests_failed++;
			printf("[ FAIL ] %s (%d failed checks, %.2f s)\n", tc->name, checks_failed,
				   now_s() - t0);
		}
		fflush(stdout);
	}
}

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : getenv("GI_CUDA_SO");
	const char *only = argc > 2 ? argv[2] : NULL;
	const char *sc = getenv("GI_TEST_SCALE");
	bool		no_oom = getenv("GI_TEST_NO_OOM") != NULL;
	const test_suite *suites[] = {&store_suite, &ivf_suite, &postings_suite, &kmeans_suite,
		&sparse_suite, &ivfpq_suite, &spread_suite};
	size_t		i;

	if (sc)
		scale = atof(sc);
	self_mode = getenv("GI_TEST_SELF") != NULL;
	H = gi_host_backend();
	if (self_mode)
		C = gi_host_backend();
	else
	{
		int			rc = load_module(path);

		if (rc != 0)
			return rc;
	}
	printf("scale %.2f%s\n", scale, self_mode ? " (self mode: host vs host)" : "");
	for (i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
	{
		run_suite(suites[i], only, no_oom);
		if (suites[i]->summary)
			suites[i]->summary();
	}
	printf("%d passed, %d failed\n", tests_passed, tests_failed);
	return tests_failed ? 1 : 0;
}
