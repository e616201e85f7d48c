/*
 * bench_store.c
 *		Store-level microbenchmarks of the CUDA backend (no SQL in the loop),
 *		after the SIVF paper's evaluation: ingestion, delete 10K of 1M,
 *		sliding window, search QPS and recall@10 against probes for query
 *		batches of 1 / 32 / 1,024 / 10,000, memory overhead.  Each figure is
 *		printed with its floor: the bytes it must move over the bandwidth
 *		measured on the same device in the same run.
 *
 *	 bench_store.run PATH/gpuindex_cuda.so [OUTDIR]
 *	 BENCH_N=100000 for a quick run (default 1,000,000), BENCH_DIM (128),
 *	 BENCH_LISTS (1024), BENCH_SKIP_SEARCH=1 (mutations and memory only),
 *	 BENCH_PROFILE=B:P[:R[:K]] (build, then R (3) searches of batch B, P probes, k K (10): for
 *	 ncu or nsys),
 *	 BENCH_ONLY_INGEST=1 (ingestion and memory, then stop),
 *	 BENCH_TILES=N with BENCH_PROFILE (the multi-query tiles forced, N slabs of
 *	 a list a tile block, 0 the default, -1 the chain walk),
 *	 BENCH_DIR_SHAPES="1x16 2x16 1x32" with BENCH_PROFILE (the directory scan's
 *	 shapes in turns: see dir_shapes), BENCH_AFTER_WRITE=1 with BENCH_PROFILE
 *	 (searches right after a write, chain walk against a rebuilt directory:
 *	 see after_write).
 *	 Works with a module without the profile, copy-helper and chunk hooks
 *	 (it runs one configuration and counts device bytes with the old
 *	 layout's formula), for before/after runs on the same machine; the
 *	 module must implement this gi_backend.h (devices, kinds).
 *
 * Data: SIFT-like synthetic vectors, N(center, 0.25^2) around 4,096 random
 * centers in [-1, 1]^d; queries are fresh draws from the same mixture.
 * IVF centroids are data points drawn at random (no k-means yet); every
 * vector goes to its nearest centroid, computed on the GPU by a one-list
 * store holding the centroids (an exact 1-NN).  Recall@10 is measured
 * against exact 10-NN computed by the same backend with every list
 * probed (exhaustive scan, which test/gpu checks against the host).
 */
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>		/* header-only: ranges for ncu --nvtx */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gi_backend.h"
#include "gi_kind_ivf.h"
#include "gi_cuda_test.h"
#include "synth.h"

static const gi_backend_ops *C;
static gi_cuda_store_set_timing_fn set_timing;
static gi_cuda_store_last_device_ms_fn last_ms;
static gi_cuda_bandwidth_fn bandwidth;
static gi_cuda_store_profile_fn profile;
static gi_cuda_set_copy_threads_fn copy_threads;
static gi_cuda_store_set_insert_chunk_fn set_chunk;
static FILE *csv;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int
dcmp(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
pct(double *v, int n, double p)
{
	int			i = (int) (p * (n - 1) + 0.5);

	qsort(v, n, sizeof(double), dcmp);
	return v[i];
}

static void
die(const char *what, gi_status st)
{
	fprintf(stderr, "%s failed (%d): %s\n", what, (int) st, C->last_error());
	exit(1);
}

static void
row(const char *bench, const char *params, const char *metric, double value,
	const char *unit, double floor_v, const char *note)
{
	printf("| %-16s | %-34s | %-22s | %12.4g %-8s | %10.4g | %s\n", bench, params, metric,
		   value, unit, floor_v, note ? note : "");
	if (csv)
		fprintf(csv, "%s,\"%s\",%s,%.6g,%s,%.6g,\"%s\"\n", bench, params, metric, value, unit,
				floor_v, note ? note : "");
	fflush(stdout);
}

/* an IVF store of unique keys with the given centroids (L2) */
static gi_store *
new_store(uint32_t nlists, uint32_t dim, const float *cent)
{
	gi_store_params p;
	gi_store   *s = NULL;
	gi_ivf_state *state;
	size_t		bytes = gi_ivf_state_size(nlists, dim);
	gi_status	st;

	memset(&p, 0, sizeof(p));
	p.nlists = nlists;
	p.record_bytes = dim * 4;
	p.key_mode = GI_KEYS_UNIQUE;
	st = C->store_create(&p, &s);
	if (st != GI_OK)
		die("store_create", st);
	state = calloc(1, bytes);
	state->dim = dim;
	state->metric = GI_METRIC_L2;
	state->nlists = nlists;
	memcpy(state + 1, cent, (size_t) nlists * dim * sizeof(float));
	st = C->kinds[GI_KIND_IVF]->set_state(s, state, bytes);
	free(state);
	if (st != GI_OK)
		die("set_state", st);
	if (set_timing)
		set_timing(s, true);
	return s;
}

static gi_status
ivf_search(gi_store *s, uint32_t dim, uint32_t nq, const float *qs, uint32_t probes,
		   uint32_t k, gi_hit *hits, uint32_t *found)
{
	gi_ivf_search_params p = {dim, probes};

	return C->kinds[GI_KIND_IVF]->search(s, &p, nq, qs, (size_t) nq * dim * sizeof(float), k,
										 hits, found);
}

/* hits of B queries (k each) that differ from the reference's: key or distance bits */
static uint64_t
hits_differ(const gi_hit *h, const uint32_t *f, const gi_hit *ref, const uint32_t *fref,
			uint32_t B, uint32_t K)
{
	uint64_t	n = 0;

	for (uint32_t j = 0; j < B; j++)
	{
		if (f[j] != fref[j])
		{
			n += K;
			continue;
		}
		for (uint32_t e = 0; e < f[j]; e++)
		{
			const gi_hit *x = &h[(size_t) j * K + e];
			const gi_hit *y = &ref[(size_t) j * K + e];

			n += x->key != y->key || memcmp(&x->distance, &y->distance, sizeof(float)) != 0;
		}
	}
	return n;
}

/*
 * BENCH_DIR_SHAPES="BxI ..." with BENCH_PROFILE=B:P:R:K: the directory
 * scan's shapes (B blocks an SM, I words a lane loads at a time; "tiles":
 * the multi-query tiles instead, gi_cuda_ivf_set_tiles; "tilesN": with N
 * slabs of a list a tile block, -1 the chain walk) in turns,
 * R searches each, every search of the round on the same batch (a fresh
 * batch each round); prints each shape's p50 and p90 and how many hits
 * differ from the first shape's (the shapes must give the same bits).
 */
static int
dir_shapes(gi_store *s, void *handle, const char *spec, uint32_t dim, uint32_t NQ,
		   const float *qs, uint32_t B, uint32_t P, uint32_t R, uint32_t K)
{
	gi_cuda_ivf_set_dir_shape_fn set_shape =
		(gi_cuda_ivf_set_dir_shape_fn) dlsym(handle, GI_CUDA_IVF_SET_DIR_SHAPE);
	gi_cuda_ivf_set_tiles_fn set_tiles =
		(gi_cuda_ivf_set_tiles_fn) dlsym(handle, GI_CUDA_IVF_SET_TILES);
	gi_cuda_ivf_set_tile_chunk_fn set_chunk =
		(gi_cuda_ivf_set_tile_chunk_fn) dlsym(handle, GI_CUDA_IVF_SET_TILE_CHUNK);
	int			bps[16];
	int			ilp[16];
	int			chunk[16] = {0};
	int			ns = 0;
	const char *c = spec;
	double	   *t;
	uint64_t   *differ;
	gi_hit	   *ref = malloc((size_t) B * K * sizeof(gi_hit));
	gi_hit	   *h = malloc((size_t) B * K * sizeof(gi_hit));
	uint32_t   *fref = malloc(B * sizeof(uint32_t));
	uint32_t   *f = malloc(B * sizeof(uint32_t));
	int			n;

	if (set_shape == NULL)
	{
		fprintf(stderr, "the module has no %s\n", GI_CUDA_IVF_SET_DIR_SHAPE);
		return 77;
	}
	for (;;)
	{
		n = 0;
		if (ns < 16 && sscanf(c, " %dx%d%n", &bps[ns], &ilp[ns], &n) == 2)
			;
		else if (ns < 16 && set_tiles != NULL && sscanf(c, " tiles%n", &n) == 0 && n > 0)
		{
			int			m = 0;

			bps[ns] = ilp[ns] = -1;
			/* "tilesN": N slabs a tile block (-1: the chain walk) */
			if (set_chunk != NULL && (c[n] == '-' || (c[n] >= '0' && c[n] <= '9')) &&
				sscanf(c + n, "%d%n", &chunk[ns], &m) == 1)
				n += m;
		}
		else
			break;
		ns++;
		c += n;
	}
	if (ns == 0 || R == 0)
	{
		fprintf(stderr, "BENCH_DIR_SHAPES: blocks-per-SM x words, e.g. \"1x16 2x16 1x32\"\n");
		return 1;
	}
	t = malloc((size_t) ns * R * sizeof(double));
	differ = calloc(ns, sizeof(uint64_t));
	for (uint32_t r = 0; r < R; r++)
	{
		const float *q = qs + (size_t) (((uint64_t) r * B) % (NQ - B + 1)) * dim;

		for (int i = 0; i < ns; i++)
		{
			gi_hit	   *out = i == 0 ? ref : h;
			uint32_t   *fo = i == 0 ? fref : f;
			double		t0;
			gi_status	st;

			if (set_tiles != NULL)
				set_tiles(bps[i] < 0 ? 1 : 0);
			if (set_chunk != NULL)
				set_chunk(chunk[i]);
			set_shape(bps[i] < 0 ? 0 : bps[i], bps[i] < 0 ? 0 : ilp[i]);
			t0 = now_ms();
			st = ivf_search(s, dim, B, q, P, K, out, fo);
			t[(size_t) i * R + r] = now_ms() - t0;
			if (st != GI_OK)
				die("search", st);
			if (i > 0)
				differ[i] += hits_differ(h, f, ref, fref, B, K);
		}
	}
	set_shape(0, 0);
	if (set_tiles != NULL)
		set_tiles(0);
	if (set_chunk != NULL)
		set_chunk(0);
	for (int i = 0; i < ns; i++)
	{
		double		p50 = pct(t + (size_t) i * R, (int) R, 0.5);
		double		p90 = pct(t + (size_t) i * R, (int) R, 0.9);
		char		name[32];

		if (bps[i] < 0 && chunk[i] != 0)
			snprintf(name, sizeof(name), "tiles%d", chunk[i]);
		else if (bps[i] < 0)
			snprintf(name, sizeof(name), "tiles");
		else
			snprintf(name, sizeof(name), "%dx%d", bps[i], ilp[i]);
		printf("dir shape %s batch %u probes %u k %u: p50 %.4f ms p90 %.4f ms, %" PRIu64
			   " hits differ\n", name, B, P, K, p50, p90, differ[i]);
	}
	free(t);
	free(differ);
	free(ref);
	free(h);
	free(fref);
	free(f);
	return 0;
}

/*
 * BENCH_AFTER_WRITE=1 with BENCH_PROFILE=B:P:R:K: searches right after a
 * write, as a store being written between its searches sees them.  Each
 * round deletes one stored row and puts it back (the store's generation
 * moves), then searches a fresh batch with the chain walk, with the
 * directory rebuilt for it and in the automatic mode (GI_CU_SCAN_CHAINS,
 * GI_CU_SCAN_DIR, GI_CU_SCAN_AUTO), a write before each; prints each way's
 * p50 and p90 (the search call, rebuild included) and its hits that differ
 * from the chain walk's (key or distance bits; the ways search the same
 * rows, so none may).
 */
static int
after_write(gi_store *s, void *handle, uint32_t dim, uint32_t NQ, const float *qs,
			const float *x, const uint32_t *lists, const uint64_t *keys, uint32_t N,
			uint32_t B, uint32_t P, uint32_t R, uint32_t K)
{
	gi_cuda_ivf_set_scan_fn set_scan = (gi_cuda_ivf_set_scan_fn) dlsym(handle, GI_CUDA_IVF_SET_SCAN);
	static const int modes[3] = {GI_CU_SCAN_CHAINS, GI_CU_SCAN_DIR, GI_CU_SCAN_AUTO};
	static const char *names[3] = {"chain walk", "directory rebuilt", "automatic"};
	double	   *t = malloc((size_t) 3 * R * sizeof(double));
	gi_hit	   *h[3];
	uint32_t   *f[3];
	uint64_t	differ[3] = {0, 0, 0};

	if (set_scan == NULL || R == 0)
	{
		fprintf(stderr, "the module has no %s\n", GI_CUDA_IVF_SET_SCAN);
		return 77;
	}
	for (int m = 0; m < 3; m++)
	{
		h[m] = malloc((size_t) B * K * sizeof(gi_hit));
		f[m] = malloc(B * sizeof(uint32_t));
	}
	for (uint32_t r = 0; r < R; r++)
	{
		const float *q = qs + (size_t) (((uint64_t) r * B) % (NQ - B + 1)) * dim;

		for (int m = 0; m < 3; m++)
		{
			uint32_t	j = (uint32_t) (((uint64_t) r * 3 + m) * 7919 % N);
			double		t0;
			gi_status	st;

			st = C->store_delete(s, 1, &keys[j], NULL);
			if (st == GI_OK)
				st = C->store_insert(s, 1, &lists[j], &keys[j], x + (size_t) j * dim, NULL);
			if (st != GI_OK)
				die("write", st);
			set_scan(modes[m]);
			t0 = now_ms();
			st = ivf_search(s, dim, B, q, P, K, h[m], f[m]);
			t[(size_t) m * R + r] = now_ms() - t0;
			if (st != GI_OK)
				die("search", st);
		}
		for (int m = 1; m < 3; m++)
			differ[m] += hits_differ(h[m], f[m], h[0], f[0], B, K);
	}
	set_scan(GI_CU_SCAN_AUTO);
	for (int m = 0; m < 3; m++)
		printf("after a write, %s, batch %u probes %u k %u: p50 %.4f ms p90 %.4f ms, %" PRIu64
			   " hits differ\n", names[m], B, P, K, pct(t + (size_t) m * R, (int) R, 0.5),
			   pct(t + (size_t) m * R, (int) R, 0.9), differ[m]);
	for (int m = 0; m < 3; m++)
	{
		free(h[m]);
		free(f[m]);
	}
	free(t);
	return 0;
}

/* where a store's mutations spent their time since the last reset */
static void
print_profile(gi_store *s, const char *what, double per)
{
	double		v[GI_CUDA_PROFILE_N];

	if (profile == NULL || profile(s, v, GI_CUDA_PROFILE_N, true) != GI_OK)
		return;
	printf("  profile %s (ms%s): insert plan %.3f (pool growth %.3f in %.0f, of it device %.3f), "
		   "map resize %.3f in %.0f, copy tail %.3f, ship %.3f, device wait %.3f; "
		   "delete host %.3f, device %.3f; %.0f chunks\n",
		   what, per != 1.0 ? " per step" : "", v[0] / per, v[4] / per, v[8], v[12] / per,
		   v[5] / per, v[9], v[1] / per, v[2] / per, v[3] / per, v[6] / per, v[7] / per, v[10]);
	fflush(stdout);
}

static double
device_bytes(gi_store *s, uint32_t nlists, size_t rb)
{
	double		v[GI_CUDA_PROFILE_N];
	gi_store_stats st;

	if (profile != NULL && profile(s, v, GI_CUDA_PROFILE_N, false) == GI_OK)
		return v[11];
	/* a module without the hook: the old layout (keys, rows, 64-bit ATT) */
	C->store_stats(s, &st);
	return (double) nlists * 8 + (double) st.slabs_total * (32 + 4 + 32.0 * (rb + 12) + 256);
}

static void
reset_profile(gi_store *s)
{
	if (profile)
		profile(s, NULL, 0, true);
}

static void
set_copy_threads(int n)
{
	if (copy_threads)
		copy_threads(n);
}

/* nearest centroid of each vector: a one-list store of the centroids */
static void
assign_lists(const float *cent, uint32_t nlists, uint32_t dim, const float *x,
			 uint32_t n, uint32_t *lists)
{
	float	   *c0 = calloc(dim, sizeof(float));
	gi_store   *s = new_store(1, dim, c0);
	uint32_t   *zero = calloc(nlists, sizeof(uint32_t));
	uint64_t   *keys = malloc(nlists * sizeof(uint64_t));
	uint32_t	chunk = 100000;
	gi_hit	   *h = malloc(chunk * sizeof(gi_hit));
	uint32_t   *f = malloc(chunk * sizeof(uint32_t));
	uint32_t	i;
	gi_status	st;

	for (i = 0; i < nlists; i++)
		keys[i] = i;
	st = C->store_insert(s, nlists, zero, keys, cent, NULL);
	if (st != GI_OK)
		die("insert centroids", st);
	for (i = 0; i < n; i += chunk)
	{
		uint32_t	m = n - i < chunk ? n - i : chunk;
		uint32_t	j;

		st = ivf_search(s, dim, m, x + (size_t) i * dim, 1, 1, h, f);
		if (st != GI_OK)
			die("assign", st);
		for (j = 0; j < m; j++)
			lists[i + j] = (uint32_t) h[j].key;
	}
	C->store_destroy(s);
	free(zero);
	free(keys);
	free(h);
	free(f);
	free(c0);
}

static double
recall_at(const gi_hit *res, const gi_hit *truth, uint32_t nq, uint32_t k)
{
	uint64_t	good = 0;
	uint32_t	q;

	for (q = 0; q < nq; q++)
	{
		uint32_t	a;
		uint32_t	b;

		for (a = 0; a < k; a++)
			for (b = 0; b < k; b++)
				if (res[(size_t) q * k + a].key == truth[(size_t) q * k + b].key)
				{
					good++;
					break;
				}
	}
	return (double) good / ((double) nq * k);
}

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : NULL;
	const char *outdir = argc > 2 ? argv[2] : NULL;
	uint32_t	N = getenv("BENCH_N") ? (uint32_t) atol(getenv("BENCH_N")) : 1000000;
	uint32_t	dim = getenv("BENCH_DIM") ? (uint32_t) atol(getenv("BENCH_DIM")) : 128;
	uint32_t	nlists = getenv("BENCH_LISTS") ? (uint32_t) atol(getenv("BENCH_LISTS")) : 1024;
	uint32_t	nclusters = 4096;
	uint32_t	NQ = 10000;
	uint32_t	NT = 1000;		/* queries with exact ground truth */
	size_t		rb = (size_t) dim * 4;
	double		d2d = 0;
	double		h2d_pg = 0;
	double		h2d_pin = 0;
	float	   *x;
	float	   *qs;
	float	   *cent;
	float	   *centers;
	uint32_t   *lists;
	uint64_t   *keys;
	gi_hit	   *truth;
	gi_hit	   *hits;
	uint32_t   *found;
	gi_store   *s;
	gi_store_stats stt;
	void	   *handle;
	gi_backend_entry_fn entry;
	gi_status	st;
	uint32_t	i;
	double		t0;
	double		t1;
	char		params[128];
	char		note[160];

	if (path == NULL)
	{
		fprintf(stderr, "usage: %s PATH/gpuindex_cuda.so [OUTDIR]\n", argv[0]);
		return 2;
	}
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL)
	{
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	entry = (gi_backend_entry_fn) dlsym(handle, GI_CUDA_ENTRY_SYMBOL);
	set_timing = (gi_cuda_store_set_timing_fn) dlsym(handle, GI_CUDA_STORE_SET_TIMING);
	last_ms = (gi_cuda_store_last_device_ms_fn) dlsym(handle, GI_CUDA_STORE_LAST_DEVICE_MS);
	bandwidth = (gi_cuda_bandwidth_fn) dlsym(handle, GI_CUDA_BANDWIDTH);
	profile = (gi_cuda_store_profile_fn) dlsym(handle, GI_CUDA_STORE_PROFILE);
	copy_threads = (gi_cuda_set_copy_threads_fn) dlsym(handle, GI_CUDA_SET_COPY_THREADS);
	set_chunk = (gi_cuda_store_set_insert_chunk_fn) dlsym(handle, GI_CUDA_STORE_SET_INSERT_CHUNK);
	/* profile, copy helpers and chunk size are optional: an older module lacks them */
	if (!entry || !(C = entry()) || C->device_count() <= 0 || !bandwidth || !last_ms)
	{
		fprintf(stderr, "no usable CUDA backend in %s\n", path);
		return 77;
	}
	if (outdir)
	{
		char		fn[512];

		snprintf(fn, sizeof(fn), "%s/bench_store.csv", outdir);
		csv = fopen(fn, "w");
		if (csv)
			fprintf(csv, "bench,params,metric,value,unit,floor,note\n");
	}
	printf("device: %s\nN %u, d %u, lists %u\n", C->device_name(NULL), N, dim, nlists);
	st = bandwidth((size_t) 512 << 20, &d2d, &h2d_pg, &h2d_pin);
	if (st != GI_OK)
		die("bandwidth", st);
	printf("| bench            | params                             | metric                 |   value               |      floor | note\n");
	printf("|---|---|---|---|---|---|\n");
	row("bandwidth", "512 MiB copies, median of 7", "device to device", d2d, "GB/s", 0, "read + write");
	row("bandwidth", "512 MiB copies, median of 7", "host to device pageable", h2d_pg, "GB/s", 0, NULL);
	row("bandwidth", "512 MiB copies, median of 7", "host to device pinned", h2d_pin, "GB/s", 0, NULL);

	/* ---- data ---- */
	x = malloc((size_t) N * rb);
	qs = malloc((size_t) NQ * rb);
	centers = malloc((size_t) nclusters * rb);
	cent = malloc((size_t) nlists * rb);
	lists = malloc((size_t) N * sizeof(uint32_t));
	keys = malloc((size_t) N * sizeof(uint64_t));
	hits = malloc((size_t) NQ * 64 * sizeof(gi_hit));
	truth = malloc((size_t) NT * 10 * sizeof(gi_hit));
	found = malloc(NQ * sizeof(uint32_t));
	synth_generate(N, dim, nclusters, NQ, nlists, centers, x, keys, qs, cent);
	t0 = now_ms();
	assign_lists(cent, nlists, dim, x, N, lists);
	t1 = now_ms();
	snprintf(params, sizeof(params), "N %u, %u centroids (exact 1-NN)", N, nlists);
	row("assign", params, "vectors/s", N / ((t1 - t0) * 1e-3), "vec/s", 0, "list choice, not a store op");

	/* ---- ingestion: helper threads for the payload copy 0 / 2 / default ---- */
	{
		uint32_t	batch = 100000;
		int			cfg[3] = {0, 2, -1};
		int			c;
		int			c0 = copy_threads ? 0 : 2;

		for (c = c0; c < 3; c++)
		{
			double		dev = 0;
			int			rep;
			double		best = 1e30;
			double		bdev = 0;

			set_copy_threads(cfg[c]);
			/* twice: the first run of a process also pays first-touch costs */
			for (rep = 0; rep < 2; rep++)
			{
				s = new_store(nlists, dim, cent);
				reset_profile(s);
				dev = 0;
				t0 = now_ms();
				for (i = 0; i < N; i += batch)
				{
					uint32_t	m = N - i < batch ? N - i : batch;

					st = C->store_insert(s, m, lists + i, keys + i, x + (size_t) i * dim, NULL);
					if (st != GI_OK)
						die("insert", st);
					dev += last_ms(s);
				}
				t1 = now_ms();
				if (t1 - t0 < best)
				{
					best = t1 - t0;
					bdev = dev;
				}
				printf("  ingest run %d, copy helpers %d: %.1f ms wall, %.1f ms device\n", rep,
					   cfg[c], t1 - t0, dev);
				print_profile(s, "ingest", 1.0);
				if (c < 2 || rep == 0)
					C->store_destroy(s);
			}
			snprintf(params, sizeof(params), "N %u, d %u, %u lists, batch %u, copy helpers %d",
					 N, dim, nlists, batch, cfg[c]);
			/* floor: payload over PCIe (pageable, as the caller passes it) */
			row("ingest", params, "wall vectors/s", N / (best * 1e-3), "vec/s",
				h2d_pg * 1e9 / rb, "best of 2; floor: pageable H2D of the payload");
			row("ingest", params, "device vectors/s", N / (bdev * 1e-3), "vec/s",
				d2d * 1e9 / (2.0 * rb + 24), "floor: stage read + slab write at D2D bw");
		}
	}

	/* ---- memory ---- */
	C->store_stats(s, &stt);
	{
		double		devb = device_bytes(s, nlists, rb);

		snprintf(params, sizeof(params), "N %u, d %u, %u lists, after build", N, dim, nlists);
		snprintf(note, sizeof(note), "%.0f device bytes for %" PRIu64 " payload bytes; pool %" PRIu64 " slabs, %" PRIu64 " used",
				 devb, stt.payload_bytes, stt.slabs_total, stt.slabs_used);
		row("memory", params, "device bytes / raw - 1", devb / stt.payload_bytes - 1.0, "ratio", 0, note);
		row("memory", params, "all bytes / raw - 1", (double) stt.bytes / stt.payload_bytes - 1.0,
			"ratio", 0, "incl. host key map and mirror");
		snprintf(note, sizeof(note), "slabs used %" PRIu64 " of %" PRIu64 ", fill %.1f%%",
				 stt.slabs_used, stt.slabs_total, 100.0 * stt.rows / (32.0 * stt.slabs_used));
		row("memory", params, "slab fill", 100.0 * stt.rows / (32.0 * stt.slabs_used), "%", 0, note);
	}

	/* BENCH_ONLY_INGEST=1: ingestion and memory only (ingestion against N and lists) */
	if (getenv("BENCH_ONLY_INGEST"))
		return 0;

	/* BENCH_PROFILE=B:P[:R[:K]]: only R searches of batch B with P probes, for a profiler */
	if (getenv("BENCH_PROFILE"))
	{
		unsigned	B = 10000;
		unsigned	P = 16;
		unsigned	R = 3;
		unsigned	K = 10;
		unsigned	r;

		if (sscanf(getenv("BENCH_PROFILE"), "%u:%u:%u:%u", &B, &P, &R, &K) < 2 || B > NQ ||
			P == 0 || K == 0 || (size_t) B * K > (size_t) NQ * 64)
		{
			fprintf(stderr, "BENCH_PROFILE=B:P[:R[:K]] with B <= %u and B * K <= %u\n",
					NQ, NQ * 64);
			return 1;
		}
		if (getenv("BENCH_AFTER_WRITE"))
			return after_write(s, handle, dim, NQ, qs, x, lists, keys, N, B, P, R, K);
		if (getenv("BENCH_DIR_SHAPES"))
			return dir_shapes(s, handle, getenv("BENCH_DIR_SHAPES"), dim, NQ, qs, B, P, R, K);
		if (getenv("BENCH_TILES"))
		{
			gi_cuda_ivf_set_tiles_fn set_tiles =
				(gi_cuda_ivf_set_tiles_fn) dlsym(handle, GI_CUDA_IVF_SET_TILES);
			gi_cuda_ivf_set_tile_chunk_fn set_tchunk =
				(gi_cuda_ivf_set_tile_chunk_fn) dlsym(handle, GI_CUDA_IVF_SET_TILE_CHUNK);

			if (set_tiles == NULL || set_tchunk == NULL)
			{
				fprintf(stderr, "the module has no %s\n", GI_CUDA_IVF_SET_TILES);
				return 77;
			}
			set_tiles(1);
			set_tchunk(atoi(getenv("BENCH_TILES")));
		}
		for (r = 0; r < R; r++)
		{
			t0 = now_ms();
			/* ncu --nvtx --nvtx-include "search/" profiles these calls only */
			nvtxRangePushA("search");
			st = ivf_search(s, dim, B, qs, P, K, hits, found);
			nvtxRangePop();
			if (st != GI_OK)
				die("search", st);
			printf("profile search batch %u probes %u k %u: %.3f ms\n", B, P, K, now_ms() - t0);
		}
		return 0;
	}

	/* ---- search: ground truth, recall and QPS (BENCH_SKIP_SEARCH=1 skips) ---- */
	if (getenv("BENCH_SKIP_SEARCH") == NULL)
	{
		st = ivf_search(s, dim, NT, qs, nlists, 10, truth, found);
		if (st != GI_OK)
			die("ground truth", st);
	}
	if (getenv("BENCH_SKIP_SEARCH") == NULL)
	{
		uint32_t	probes_set[] = {1, 4, 16, 64};
		uint32_t	batches[] = {1, 32, 1024, 10000};
		size_t		pi;
		size_t		bi;
		double		list_bytes = (double) stt.payload_bytes / nlists;

		for (pi = 0; pi < 4; pi++)
		{
			uint32_t	P = probes_set[pi];
			double		rec;

			st = ivf_search(s, dim, NT, qs, P, 10, hits, found);
			if (st != GI_OK)
				die("search", st);
			rec = recall_at(hits, truth, NT, 10);
			for (bi = 0; bi < 4; bi++)
			{
				uint32_t	B = batches[bi];
				uint32_t	reps = B == 1 ? 300 : B == 32 ? 40 : B == 1024 ? 4 : 2;
				double		times[300];
				uint32_t	r;
				double		med;
				double		uniq;
				double		floor_ms;

				/* warm-up */
				ivf_search(s, dim, B, qs, P, 10, hits, found);
				for (r = 0; r < reps; r++)
				{
					uint32_t	off = (uint32_t) (((uint64_t) r * B) % (NQ - B + 1));

					t0 = now_ms();
					st = ivf_search(s, dim, B, qs + (size_t) off * dim, P, 10,
									   hits, found);
					times[r] = now_ms() - t0;
					if (st != GI_OK)
						die("search", st);
				}
				med = pct(times, reps, 0.5);
				/* floor: every probed list read once, at the measured copy bw */
				uniq = nlists * (1.0 - pow(1.0 - (double) P / nlists, B));
				floor_ms = uniq * list_bytes / (d2d * 1e9) * 1e3;
				snprintf(params, sizeof(params), "batch %u, probes %u, k 10", B, P);
				snprintf(note, sizeof(note), "recall@10 %.3f, p50 %.3f ms, p99 %.3f ms, floor %.3f ms",
						 rec, med, pct(times, reps, 0.99), floor_ms);
				row("search", params, "QPS", B / (med * 1e-3), "q/s", B / (floor_ms * 1e-3), note);
			}
		}
	}

	/* ---- delete 10K from 1M: 7 random sets, each put back afterwards ---- */
	{
		uint32_t	nd = N / 100;
		uint64_t   *dk = malloc(nd * sizeof(uint64_t));
		uint32_t   *dl = malloc(nd * sizeof(uint32_t));
		float	   *dx = malloc((size_t) nd * rb);
		uint64_t	n = 0;
		double		wall[7];
		double		devt[7];
		int			rep;

		for (rep = 0; rep < 7; rep++)
		{
			for (i = 0; i < nd; i++)
			{
				uint32_t	j = (uint32_t) (rnext() % N);

				dk[i] = keys[j];
				dl[i] = lists[j];
				memcpy(dx + (size_t) i * dim, x + (size_t) j * dim, rb);
			}
			/* warm-up: the first launch of a kernel loads its module (lazy loading) */
			if (rep == 0)
			{
				C->store_delete(s, 1, dk, NULL);
				C->store_insert(s, 1, dl, dk, dx, NULL);
			}
			reset_profile(s);
			t0 = now_ms();
			st = C->store_delete(s, nd, dk, &n);
			t1 = now_ms();
			if (st != GI_OK)
				die("delete", st);
			wall[rep] = t1 - t0;
			devt[rep] = last_ms(s);
			if (rep == 0)
				print_profile(s, "delete 10K", 1.0);
			/* put them back: the same records, same keys (duplicates skipped) */
			C->store_insert(s, nd, dl, dk, dx, NULL);
		}
		snprintf(params, sizeof(params), "%u random keys of %u, 7 sets", nd, N);
		snprintf(note, sizeof(note), "%" PRIu64 " rows removed; p50 of 7, max %.3f ms; SIVF: 0.68 ms, Faiss 202 ms",
				 n, pct(wall, 7, 1.0));
		row("delete", params, "wall ms", pct(wall, 7, 0.5), "ms", 0, note);
		row("delete", params, "device ms", pct(devt, 7, 0.5), "ms", nd * 48.0 / (d2d * 1e9) * 1e3,
			"target < 0.1 ms; floor: ATT+header sectors");
		free(dk);
		free(dl);
		free(dx);
	}
	C->store_destroy(s);

	/* ---- sliding window W = 200K, B = 10K: chunk and copy-helper variants ---- */
	{
		/* insert chunk (records, 0 = default 4 MB) and copy helpers (-1 = default) */
		uint32_t	wchunk[4] = {0, 0, 2048, 4096};
		int			whelp[4] = {-1, 0, -1, -1};
		int			v;
		int			nv = copy_threads && set_chunk ? 4 : 1;

		for (v = 0; v < nv; v++)
		{
			uint32_t	W = N < 200000 ? N / 2 : 200000;
			uint32_t	B = W / 20;
			int			steps = 50;
			double		tot[50];
			double		ins[50];
			double		del[50];
			double		srch[50];
			double		devi[50];
			double		devd[50];
			uint32_t	head = 0;
			int			k;
			char		cfgs[64];

			set_copy_threads(whelp[v]);
			s = new_store(nlists, dim, cent);
			if (set_chunk)
				set_chunk(s, wchunk[v]);
			st = C->store_insert(s, W, lists, keys, x, NULL);
			if (st != GI_OK)
				die("window fill", st);
			/* warm-up step, not counted */
			C->store_insert(s, B, lists + W, keys + W, x + (size_t) W * dim, NULL);
			C->store_delete(s, B, keys, NULL);
			head = B;
			ivf_search(s, dim, 100, qs, 16, 10, hits, found);
			reset_profile(s);
			for (k = 0; k < steps; k++)
			{
				uint32_t	in0 = (W + (uint32_t) (k + 1) * B) % (N - B);
				double		a;
				double		b;
				double		c;
				double		d;

				a = now_ms();
				st = C->store_insert(s, B, lists + in0, keys + in0, x + (size_t) in0 * dim, NULL);
				if (st != GI_OK)
					die("window insert", st);
				devi[k] = last_ms(s);
				b = now_ms();
				st = C->store_delete(s, B, keys + head, NULL);
				if (st != GI_OK)
					die("window delete", st);
				devd[k] = last_ms(s);
				head = (head + B) % (N - B);
				c = now_ms();
				st = ivf_search(s, dim, 100, qs, 16, 10, hits, found);
				if (st != GI_OK)
					die("window search", st);
				d = now_ms();
				ins[k] = b - a;
				del[k] = c - b;
				srch[k] = d - c;
				tot[k] = d - a;
			}
			print_profile(s, "window", steps);
			C->store_stats(s, &stt);
			snprintf(cfgs, sizeof(cfgs), "%s%u, helpers %d", wchunk[v] ? "chunk " : "chunk default ",
					 wchunk[v] ? wchunk[v] : 8192, whelp[v]);
			snprintf(params, sizeof(params), "W %u, B %u, %d steps, %s", W, B, steps, cfgs);
			snprintf(note, sizeof(note), "p99 %.3f ms; insert p50 %.3f, delete p50 %.3f, search(100 q, probes 16) p50 %.3f",
					 pct(tot, steps, 0.99), pct(ins, steps, 0.5), pct(del, steps, 0.5), pct(srch, steps, 0.5));
			row("window", params, "step p50 wall ms", pct(tot, steps, 0.5), "ms", 0, note);
			snprintf(note, sizeof(note), "insert p99 %.3f, delete p50 %.3f p99 %.3f; pool %" PRIu64 " slabs",
					 pct(devi, steps, 0.99), pct(devd, steps, 0.5), pct(devd, steps, 0.99), stt.slabs_total);
			row("window", params, "insert p50 device ms", pct(devi, steps, 0.5), "ms",
				B * (2.0 * rb) / (d2d * 1e9) * 1e3, note);
			if (v == 0)
			{
				double		devb = device_bytes(s, nlists, rb);

				snprintf(params, sizeof(params), "W %u, d %u, %u lists, after %d window steps",
						 W, dim, nlists, steps + 1);
				snprintf(note, sizeof(note), "%.0f device bytes for %" PRIu64 " payload bytes; pool %" PRIu64 " slabs, %" PRIu64 " used, fill %.1f%%",
						 devb, stt.payload_bytes, stt.slabs_total, stt.slabs_used,
						 100.0 * stt.rows / (32.0 * stt.slabs_used));
				row("memory", params, "device bytes / raw - 1", devb / stt.payload_bytes - 1.0,
					"ratio", 0, note);
			}
			C->store_destroy(s);
		}
		set_copy_threads(-1);
	}

	if (csv)
		fclose(csv);
	printf("done\n");
	return 0;
}
