/*
 * batch_bytes.c
 *		What a batch of the store benchmark reads, on the CPU, no GPU: the
 *		same vectors, centroids and queries as bench_store.c (synth.h), each
 *		vector in its nearest list, each query's P nearest lists; for each
 *		profile the slabs its queries probe (every (query, list) pair, as the
 *		directory scan reads them), the distinct slabs (each probed list once,
 *		as a scan sharing lists would), and the multi-query tiles' blocks at
 *		a chunk of slabs a block (the tile kernel's shape: up to 8 units of
 *		one list a tile, a list's blocks at most 16, 8 slabs a round).
 *
 *	 ./batch_bytes.run [B:P ...]   (default 1:16 1:32 8:32 16:32 32:16 32:32 1000:16 1000:32)
 *	 BENCH_N (450000), BENCH_DIM (128), BENCH_LISTS (700), BENCH_BW_TBS (4.8: the
 *	 bandwidth of the floors), BENCH_NQ (1000: queries the batches are cut from)
 *
 * Prints a markdown table; the floors are the bytes at BENCH_BW_TBS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gi_backend.h"
#include "host_store.h"
#include "synth.h"

#define SLAB_ROWS 32
#define TILE_Q 8
#define TILE_SPLIT 16
#define TILE_ROUND 8

static uint32_t
env_u32(const char *name, uint32_t dflt)
{
	const char *e = getenv(name);

	return e ? (uint32_t) atol(e) : dflt;
}

/*
 * The `probes` nearest lists of n vectors: the host backend's search of a
 * one-list store of the centroids, as bench_store.c's assign_lists does on
 * the device (the CUDA backend gives the host's answers).
 */
static void
nearest_lists(gi_store *cs, uint32_t dim, uint32_t n, const float *v, uint32_t probes,
			  uint32_t *out)
{
	static float c0[4096];
	uint32_t	chunk = 10000;
	gi_hit	   *h = malloc((size_t) chunk * probes * sizeof(gi_hit));
	uint32_t   *f = malloc(chunk * sizeof(uint32_t));

	for (uint32_t i = 0; i < n; i += chunk)
	{
		uint32_t	m = n - i < chunk ? n - i : chunk;

		if (gi_host_ivf_search(cs, c0, dim, GI_METRIC_L2, m, v + (size_t) i * dim, 1, probes,
							   h, f) != GI_OK)
		{
			fprintf(stderr, "search: %s\n", gi_host_backend()->last_error());
			exit(1);
		}
		for (uint32_t j = 0; j < (size_t) m * probes; j++)
			out[(size_t) i * probes + j] = (uint32_t) h[j].key;
	}
	free(h);
	free(f);
}

/* the tile blocks of one batch at `chunk` slabs a block: blocks, block-rounds, longest */
static void
tile_blocks(const uint32_t *units, const uint32_t *slabs, uint32_t nl, uint32_t chunk,
			double *blocks, double *rounds, uint32_t *longest)
{
	for (uint32_t l = 0; l < nl; l++)
	{
		uint32_t	c = slabs[l];
		uint32_t	split;
		uint32_t	tiles;

		if (units[l] == 0 || c == 0)
			continue;
		split = (c + chunk - 1) / chunk;
		split = split > TILE_SPLIT ? TILE_SPLIT : split;
		tiles = (units[l] + TILE_Q - 1) / TILE_Q;
		for (uint32_t s = 0; s < split; s++)
		{
			uint32_t	mine = (c - s + split - 1) / split;
			uint32_t	r = (mine + TILE_ROUND - 1) / TILE_ROUND;

			*blocks += tiles;
			*rounds += (double) tiles * r;
			if (r > *longest)
				*longest = r;
		}
	}
}

int
main(int argc, char **argv)
{
	static const char *dflt[] = {"1:16", "1:32", "8:32", "16:32", "32:16", "32:32", "1000:16",
	"1000:32"};
	uint32_t	N = env_u32("BENCH_N", 450000);
	uint32_t	dim = env_u32("BENCH_DIM", 128);
	uint32_t	nl = env_u32("BENCH_LISTS", 700);
	uint32_t	nq = env_u32("BENCH_NQ", 1000);
	double		bw = getenv("BENCH_BW_TBS") ? atof(getenv("BENCH_BW_TBS")) : 4.8;
	uint32_t	ncl = 4096;
	uint32_t	NQ = 10000;
	double		slab_bytes = (double) SLAB_ROWS * dim * 4;
	const char **prof = argc > 1 ? (const char **) argv + 1 : dflt;
	int			nprof = argc > 1 ? argc - 1 : (int) (sizeof(dflt) / sizeof(dflt[0]));
	float	   *centers = malloc((size_t) ncl * dim * sizeof(float));
	float	   *x = malloc((size_t) N * dim * sizeof(float));
	float	   *qs = malloc((size_t) NQ * dim * sizeof(float));
	float	   *cent = malloc((size_t) nl * dim * sizeof(float));
	uint64_t   *keys = malloc((size_t) N * sizeof(uint64_t));
	uint32_t   *lists = malloc((size_t) N * sizeof(uint32_t));
	uint32_t   *rows = calloc(nl, sizeof(uint32_t));
	uint32_t   *slabs = calloc(nl, sizeof(uint32_t));
	uint32_t   *units = malloc(nl * sizeof(uint32_t));
	uint32_t	maxrows = 0;
	gi_store   *cs = NULL;

	if (nq > NQ)
		nq = NQ;
	synth_generate(N, dim, ncl, NQ, nl, centers, x, keys, qs, cent);
	{
		gi_store_params sp;
		uint32_t   *zero = calloc(nl, sizeof(uint32_t));
		uint64_t   *ids = malloc(nl * sizeof(uint64_t));

		memset(&sp, 0, sizeof(sp));
		sp.nlists = 1;
		sp.record_bytes = dim * 4;
		sp.chunk_slabs = 4;
		sp.key_mode = GI_KEYS_ANY;
		for (uint32_t l = 0; l < nl; l++)
			ids[l] = l;
		if (dim > 4096 || gi_host_backend()->store_create(&sp, &cs) != GI_OK ||
			gi_host_backend()->store_insert(cs, nl, zero, ids, cent, NULL) != GI_OK)
		{
			fprintf(stderr, "centroid store: %s\n", gi_host_backend()->last_error());
			return 1;
		}
		free(zero);
		free(ids);
	}
	nearest_lists(cs, dim, N, x, 1, lists);
	for (uint32_t i = 0; i < N; i++)
		rows[lists[i]]++;
	for (uint32_t l = 0; l < nl; l++)
	{
		slabs[l] = (rows[l] + SLAB_ROWS - 1) / SLAB_ROWS;
		if (rows[l] > maxrows)
			maxrows = rows[l];
	}
	printf("N %u, dim %u, lists %u: rows a list %.0f on average, %u at most; "
		   "floors at %.1f TB/s; batches cut from the first %u queries\n\n",
		   N, dim, nl, (double) N / nl, maxrows, bw, nq);
	printf("| batch, probes | slabs a batch (MB) | distinct slabs (MB) | pairs per list | "
		   "floor, every pair | floor, each list once | tiles at 64 slabs a block: blocks, rounds (longest block) | at 128 |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (int pi = 0; pi < nprof; pi++)
	{
		uint32_t	B;
		uint32_t	P;
		uint32_t	nb;
		uint32_t   *pr;
		double		all = 0;
		double		distinct = 0;
		double		blk[2] = {0, 0};
		double		rnd[2] = {0, 0};
		uint32_t	lng[2] = {0, 0};

		if (sscanf(prof[pi], "%u:%u", &B, &P) != 2 || B == 0 || P == 0 || P > nl || B > nq)
		{
			fprintf(stderr, "profile %s: B:P with B <= %u and P <= %u\n", prof[pi], nq, nl);
			return 1;
		}
		nb = nq / B;
		pr = malloc((size_t) nb * B * P * sizeof(uint32_t));
		nearest_lists(cs, dim, nb * B, qs, P, pr);
		for (uint32_t b = 0; b < nb; b++)
		{
			memset(units, 0, nl * sizeof(uint32_t));
			for (uint32_t i = 0; i < B * P; i++)
			{
				uint32_t	l = pr[(size_t) b * B * P + i];

				all += slabs[l];
				if (units[l]++ == 0)
					distinct += slabs[l];
			}
			for (int c = 0; c < 2; c++)
				tile_blocks(units, slabs, nl, c == 0 ? 64 : 128, &blk[c], &rnd[c], &lng[c]);
		}
		all /= nb;
		distinct /= nb;
		printf("| %u, %u | %.0f (%.1f) | %.0f (%.1f) | %.2f | %.1f µs | %.1f µs | "
			   "%.0f, %.0f (%u) | %.0f, %.0f (%u) |\n",
			   B, P, all, all * slab_bytes / 1e6, distinct, distinct * slab_bytes / 1e6,
			   all / distinct, all * slab_bytes / (bw * 1e6), distinct * slab_bytes / (bw * 1e6),
			   blk[0] / nb, rnd[0] / nb, lng[0], blk[1] / nb, rnd[1] / nb, lng[1]);
		free(pr);
	}
	return 0;
}
