/*
 * bench_pq.c
 *		The IVF-PQ kind of the CUDA backend alone (no SQL, no service): the
 *		search time of each mode (look-up table, juno, hits) on a store of
 *		the SQL benchmark's shape, next to the floor of the bytes it reads,
 *		so that the kernels can be measured and profiled (ncu) by themselves.
 *
 *	 bench_pq.run PATH/gpuindex_cuda.so
 *	 BENCH_N (450000 rows), BENCH_DIM (128), BENCH_M (dim / 2), BENCH_LISTS
 *	 (700), BENCH_NQ (1000 queries a search), BENCH_PROBES (8), BENCH_METRIC
 *	 (l2, ip or cosine), BENCH_BITS (8: 256 entries a codebook; 4: 16
 *	 entries, codes two a byte),
 *	 BENCH_PROFILE=1: two searches of each mode only (for ncu).
 *
 * Data: random centroids, codebooks and codes, rows spread evenly over
 * the lists (the kernels' work does not depend on the values), random
 * queries; k 10; the selective modes select ksub / 4 entries.  Each
 * figure is the median of 7 searches after a warm-up, each the whole
 * search() call (queries to the device, coarse
 * quantisation, fine scan, hits back).  The floor reads each probed list's
 * code bytes and keys once per query at the device-to-device bandwidth
 * the module measures (gi_cuda_bandwidth).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gi_backend.h"
#include "gi_cuda_test.h"
#include "gi_kind_ivfpq.h"
#include "synth.h"

static const gi_backend_ops *C;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* uniform in [-1, 1) */
static float
rndf(void)
{
	return (float) (2.0 * runif() - 1.0);
}

static uint32_t
env_u32(const char *name, uint32_t dflt)
{
	const char *v = getenv(name);

	return v ? (uint32_t) atol(v) : dflt;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static void
die(const char *what, gi_status st)
{
	fprintf(stderr, "%s: status %d: %s\n", what, st, C->last_error());
	exit(1);
}

/*
 * N rows spread evenly over the lists, in batches of 100,000: random codes
 * of m sub-spaces of cbits bits, or (m 0) random float vectors of rb bytes.
 */
static void
insert_rows(gi_store *s, uint32_t N, uint32_t nlists, uint32_t rb, uint32_t m, uint32_t cbits)
{
	gi_status	st;

	for (uint32_t at = 0; at < N; at += 100000)
	{
		uint32_t	n = N - at < 100000 ? N - at : 100000;
		uint32_t   *lists = malloc(n * sizeof(uint32_t));
		uint64_t   *keys = malloc(n * sizeof(uint64_t));
		uint8_t    *recs = calloc(n, rb);

		for (uint32_t i = 0; i < n; i++)
		{
			lists[i] = (at + i) % nlists;
			keys[i] = 1 + at + i;
			if (m == 0)
				for (uint32_t j = 0; j < rb / 4; j++)
					((float *) (recs + (size_t) i * rb))[j] = rndf();
			for (uint32_t j = 0; j < m; j++)
				gi_pq_code_put(recs + (size_t) i * rb, j, cbits,
							   (uint32_t) (rnext() >> 56) & ((1u << cbits) - 1));
		}
		if ((st = C->store_insert(s, n, lists, keys, recs, NULL)) != GI_OK)
			die("insert", st);
		free(lists);
		free(keys);
		free(recs);
	}
}

/* device bytes of a store (the module's profile hook), 0 without the hook */
static double
device_bytes(gi_store *s, gi_cuda_store_profile_fn profile)
{
	double		v[GI_CUDA_PROFILE_N];

	if (profile != NULL && profile(s, v, GI_CUDA_PROFILE_N, false) == GI_OK)
		return v[11];
	return 0.0;
}

int
main(int argc, char **argv)
{
	static const char *names[] = {"lut", "juno", "hits"};
	uint32_t	N = env_u32("BENCH_N", 450000);
	uint32_t	dim = env_u32("BENCH_DIM", 128);
	uint32_t	m = env_u32("BENCH_M", dim / 2);
	uint32_t	nlists = env_u32("BENCH_LISTS", 700);
	uint32_t	nq = env_u32("BENCH_NQ", 1000);
	uint32_t	probes = env_u32("BENCH_PROBES", 8);
	bool		prof = getenv("BENCH_PROFILE") != NULL;
	const char *mname = getenv("BENCH_METRIC") ? getenv("BENCH_METRIC") : "l2";
	gi_metric	metric = strcmp(mname, "ip") == 0 ? GI_METRIC_IP :
		strcmp(mname, "cosine") == 0 ? GI_METRIC_COSINE : GI_METRIC_L2;
	uint32_t	cbits = env_u32("BENCH_BITS", 8) <= 4 ? 4 : 8;
	uint32_t	ksub = 1u << cbits;
	uint32_t	k = 10;
	uint32_t	rb = gi_ivfpq_record_bytes(m, cbits);
	size_t		bytes = gi_ivfpq_state_size(nlists, dim, ksub);
	gi_ivfpq_state *state = calloc(1, bytes);
	float	   *f = (float *) (state + 1);
	float	   *qs = malloc((size_t) nq * dim * sizeof(float));
	gi_hit	   *hits = malloc((size_t) nq * k * sizeof(gi_hit));
	uint32_t   *found = malloc(nq * sizeof(uint32_t));
	gi_store_params sp;
	gi_store   *s = NULL;
	void	   *handle;
	gi_backend_entry_fn entry;
	gi_cuda_bandwidth_fn bandwidth;
	gi_status	st;
	double		per_list = (double) N / nlists;
	double		d2d = 0.0;
	double		h2d[2];

	if (argc < 2)
	{
		fprintf(stderr, "usage: %s PATH/gpuindex_cuda.so\n", argv[0]);
		return 2;
	}
	handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	entry = handle ? (gi_backend_entry_fn) dlsym(handle, GI_CUDA_ENTRY_SYMBOL) : NULL;
	bandwidth = handle ? (gi_cuda_bandwidth_fn) dlsym(handle, GI_CUDA_BANDWIDTH) : NULL;
	if (!entry || !bandwidth || !(C = entry()) || C->device_count() <= 0)
	{
		fprintf(stderr, "no usable CUDA backend in %s\n", argv[1]);
		return 77;
	}
	if ((st = bandwidth((size_t) 1 << 30, &d2d, &h2d[0], &h2d[1])) != GI_OK || d2d <= 0.0)
		die("bandwidth", st);
	memset(&sp, 0, sizeof(sp));
	sp.nlists = nlists;
	sp.record_bytes = rb;
	sp.key_mode = GI_KEYS_UNIQUE;
	if ((st = C->store_create(&sp, &s)) != GI_OK)
		die("store_create", st);
	state->ivf.dim = dim;
	state->ivf.metric = metric;
	state->ivf.nlists = nlists;
	state->m = m;
	state->ksub = ksub;
	state->code_bits = cbits;
	for (size_t i = 0; i < (size_t) nlists * dim + (size_t) ksub * dim; i++)
		f[i] = rndf();
	if ((st = C->kinds[GI_KIND_IVFPQ]->set_state(s, state, bytes)) != GI_OK)
		die("set_state", st);
	insert_rows(s, N, nlists, rb, m, cbits);
	for (size_t i = 0; i < (size_t) nq * dim; i++)
		qs[i] = rndf();

	/* memory a row: this store, and a flat store of the same rows and lists */
	{
		gi_cuda_store_profile_fn profile = (gi_cuda_store_profile_fn)
			dlsym(handle, GI_CUDA_STORE_PROFILE);
		gi_store_params fp = sp;
		gi_store   *flat = NULL;
		gi_store_stats ps;
		gi_store_stats fs;
		double		pdev = device_bytes(s, profile);
		double		fdev;

		fp.record_bytes = dim * sizeof(float);
		if ((st = C->store_create(&fp, &flat)) != GI_OK)
			die("store_create (flat)", st);
		insert_rows(flat, N, nlists, fp.record_bytes, 0, 0);
		fdev = device_bytes(flat, profile);
		C->store_stats(s, &ps);
		C->store_stats(flat, &fs);
		printf("memory a row: pq (%u codes of %u bits, %u-byte records) device %.1f B, "
			   "all %.1f B; flat (%u-byte vectors) device %.1f B, all %.1f B; "
			   "flat / pq: device %.2f, all %.2f\n",
			   m, cbits, rb, pdev / N, (double) ps.bytes / N, fp.record_bytes,
			   fdev / N, (double) fs.bytes / N, pdev > 0 ? fdev / pdev : 0.0,
			   (double) fs.bytes / ps.bytes);
		C->store_destroy(flat);
	}

	printf("floor at the measured device-to-device bandwidth, %.0f GB/s\n", d2d);
	printf("| mode | metric | rows | dim | m | bits | lists | queries | probes | median ms | q/s | code bytes floor ms |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (uint32_t mode = 0; mode < 3; mode++)
	{
		gi_ivfpq_search_params p = {{dim, probes}, mode, ksub / 4, 1.0f, 0};
		double		t[7];
		int			runs = prof ? 2 : 7;
		double		floor_ms = (double) nq * probes * per_list * (rb + 8) / (d2d * 1e6);

		for (int r = -1; r < runs; r++)
		{
			double		t0 = now_ms();

			st = C->kinds[GI_KIND_IVFPQ]->search(s, &p, nq, qs, (size_t) nq * dim * sizeof(float),
												 k, hits, found);
			if (st != GI_OK)
				die("search", st);
			if (r >= 0)
				t[r] = now_ms() - t0;
		}
		qsort(t, runs, sizeof(double), cmp_double);
		printf("| %s | %s | %u | %u | %u | %u | %u | %u | %u | %.3f | %.0f | %.3f |\n", names[mode],
			   mname, N, dim, m, cbits, nlists, nq, probes, t[runs / 2],
			   nq / (t[runs / 2] / 1e3), floor_ms);
		fflush(stdout);
	}
	C->store_destroy(s);
	return 0;
}
