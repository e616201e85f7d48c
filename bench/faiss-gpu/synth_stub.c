/*
 * synth_stub.c
 *		A stand-in for gpuindex_cuda.so that does no work: it lets
 *		bench/store/bench_store.run run on a machine without a GPU and prints
 *		FNV-1a hashes of the data that bench_store hands to the backend (IVF
 *		centroids, the 1M vectors and keys of the first ingestion, the first
 *		1,000 queries, the 7 delete sets).  `faiss_gpu_bench synth-check`
 *		prints the same lines from synth.h; check-synth.sh compares them, so
 *		the Faiss peer is known to run on bench_store's exact data.
 *		Test-only; never used for a measurement.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gi_backend.h"
#include "gi_kind_ivf.h"
#include "gi_cuda_test.h"

struct gi_store
{
	uint32_t	nlists;
};

static uint64_t N;
static uint64_t seen;			/* records of the first multi-list ingestion */
static uint64_t hx = 14695981039346656037ull;
static uint64_t hk = 14695981039346656037ull;
static int	centroids_done;
static int	queries_done;
static int	deletes;

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * 1099511628211ull;
	return h;
}

static const char *
s_last_error(void)
{
	return "stub";
}

static int
s_device_count(void)
{
	return 1;
}

static gi_status
s_device_open(int ordinal, gi_device **out)
{
	(void) ordinal;
	*out = NULL;
	return GI_OK;
}

static void
s_device_close(gi_device *device)
{
	(void) device;
}

static const char *
s_device_name(gi_device *device)
{
	(void) device;
	return "synth stub (no device)";
}

static gi_status
s_create(const gi_store_params *p, gi_store **out)
{
	*out = calloc(1, sizeof(gi_store));
	(*out)->nlists = p->nlists;
	return GI_OK;
}

static void
s_destroy(gi_store *s)
{
	free(s);
}

static gi_status
s_insert(gi_store *s, uint32_t n, const uint32_t *lists, const uint64_t *keys,
		 const void *payloads, uint64_t *ninserted)
{
	uint32_t	dim = getenv("BENCH_DIM") ? (uint32_t) atol(getenv("BENCH_DIM")) : 128;

	(void) lists;
	if (s->nlists == 1 && !centroids_done)
	{
		printf("synth: centroids %u fnv %016llx\n", n,
			   (unsigned long long) fnv(14695981039346656037ull, payloads, (size_t) n * dim * 4));
		centroids_done = 1;
	}
	else if (s->nlists > 1 && seen < N)
	{
		hx = fnv(hx, payloads, (size_t) n * dim * 4);
		hk = fnv(hk, keys, (size_t) n * 8);
		seen += n;
		if (seen >= N)
			printf("synth: vectors %llu fnv %016llx keys fnv %016llx\n",
				   (unsigned long long) seen, (unsigned long long) hx, (unsigned long long) hk);
	}
	if (ninserted)
		*ninserted = n;
	return GI_OK;
}

static gi_status
s_delete(gi_store *s, uint32_t n, const uint64_t *keys, uint64_t *ndeleted)
{
	(void) s;
	if (n == N / 100 && deletes < 7)
	{
		printf("synth: delete set %d of %u fnv %016llx\n", deletes, n,
			   (unsigned long long) fnv(14695981039346656037ull, keys, (size_t) n * 8));
		if (++deletes == 7)
		{
			fflush(stdout);
			exit(0);
		}
	}
	if (ndeleted)
		*ndeleted = n;
	return GI_OK;
}

static gi_status
s_stats(gi_store *s, gi_store_stats *out)
{
	(void) s;
	memset(out, 0, sizeof(*out));
	return GI_OK;
}

static gi_status
s_set_state(gi_store *s, const void *state, size_t bytes)
{
	(void) s;
	(void) state;
	(void) bytes;
	return GI_OK;
}

static gi_status
s_search(gi_store *s, const void *params, uint32_t nq, const void *queries,
		 size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	const gi_ivf_search_params *p = params;
	uint32_t	dim = p->dim;

	(void) query_bytes;
	if (s->nlists > 1 && p->probes == s->nlists && !queries_done)
	{
		printf("synth: queries %u fnv %016llx\n", nq,
			   (unsigned long long) fnv(14695981039346656037ull, queries, (size_t) nq * dim * 4));
		queries_done = 1;
	}
	memset(hits, 0, (size_t) nq * k * sizeof(gi_hit));
	memset(found, 0, nq * sizeof(uint32_t));
	return GI_OK;
}

static const gi_kind_ops ivf = {.set_state = s_set_state, .search = s_search};

static const gi_backend_ops ops = {
	.name = "stub", .last_error = s_last_error, .device_count = s_device_count,
	.device_open = s_device_open, .device_close = s_device_close,
	.device_name = s_device_name, .store_create = s_create, .store_destroy = s_destroy,
	.store_insert = s_insert, .store_delete = s_delete, .store_stats = s_stats,
	.kinds = {[GI_KIND_IVF] = &ivf},
};

const gi_backend_ops *gi_cuda_backend(void);
gi_status	gi_cuda_bandwidth(size_t bytes, double *d2d, double *h2d_pg, double *h2d_pin);
double		gi_cuda_store_last_device_ms(gi_store *s);

const gi_backend_ops *
gi_cuda_backend(void)
{
	N = getenv("BENCH_N") ? (uint64_t) atol(getenv("BENCH_N")) : 1000000;
	return &ops;
}

gi_status
gi_cuda_bandwidth(size_t bytes, double *d2d, double *h2d_pg, double *h2d_pin)
{
	(void) bytes;
	*d2d = *h2d_pg = *h2d_pin = 1;
	return GI_OK;
}

double
gi_cuda_store_last_device_ms(gi_store *s)
{
	(void) s;
	return 0;
}
