/*
 * cuda_insert.cu
 *		Batched insert: plan on the host mirror (cuda_plan.cu), publish on
 *		the device.
 *
 * The device applies a planned chunk with three launches on the mutation
 * stream: header links, list counts and free-stack entries; then list
 * heads (a reader that follows a new head finds its links already set);
 * then the records, one warp per record: the payload read coalesced from
 * the upload arena and written into the slab's interleaved layout, key,
 * key ordinal (and the ordinal's key) and ATT entry, __threadfence(), and
 * only then the validity bit (atomicOr) and the count.  A search running concurrently on another stream trusts
 * only the bit, so it never sees a half-written record.
 *
 * Chunks are pipelined over two pinned upload arenas (payload, plan and
 * patches of one chunk; one asynchronous copy for the payload, one for
 * plan and patches): while the device copies and applies chunk c, the
 * host plans chunk c+1, and helper threads copy chunk c+1's payload into
 * its arena at the same time (gi_cu_copy_begin / gi_cu_copy_end).  The
 * key map is sized for the whole batch before the first chunk when that
 * fits under the memory limit.
 */
#include <cstdlib>
#include <cstring>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* payload bytes per pipelined chunk: two pinned arenas of about this */
#define GI_CU_INSERT_CHUNK_BYTES ((size_t) 4 << 20)
#define GI_CU_INSERT_CHUNK_MAX	(1u << 20)

#define GI_CU_ALIGN16(x) (((x) + 15) & ~(size_t) 15)

/* patches a chunk of n records can need: 2 slabs x 3 links + 2 per list */
#define GI_CU_CHUNK_PATCHES(n) (8 * (size_t) (n) + 16)

/*
 * One warp per record (grid-stride): lane l reads words l, l+32, ... of the
 * record (128-byte coalesced loads) and writes word j to data[j * 32 +
 * slot].  Every lane fences its own stores, the warp synchronises, and
 * lane 0 publishes: validity bit, then count.
 */
__global__ void
gi_k_insert(const gi_cu_plan *__restrict__ plan, uint32_t n,
			const uint32_t *__restrict__ stage, uint32_t W,
			gi_dslab *slabs, uint32_t *att, uint64_t *kid_key)
{
	const uint32_t lane = threadIdx.x & 31;
	uint32_t	w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	const uint32_t nw = (gridDim.x * blockDim.x) >> 5;

	for (; w < n; w += nw)
	{
		const gi_cu_plan p = plan[w];
		const uint32_t slab = GI_CU_LOC_SLAB(p.loc);
		const uint32_t slot = GI_CU_LOC_SLOT(p.loc);
		uint32_t   *data = slabs[slab].data;
		const uint32_t *src = stage + (size_t) p.src * W;
		uint32_t	j = lane;

		/* word j of slot i at data[j * 32 + i]: a warp reads it coalesced */
		for (; j + 96 < W; j += 128)
		{
			uint32_t	v0 = src[j];
			uint32_t	v1 = src[j + 32];
			uint32_t	v2 = src[j + 64];
			uint32_t	v3 = src[j + 96];

			data[(size_t) j * GI_SLAB_RECORDS + slot] = v0;
			data[(size_t) (j + 32) * GI_SLAB_RECORDS + slot] = v1;
			data[(size_t) (j + 64) * GI_SLAB_RECORDS + slot] = v2;
			data[(size_t) (j + 96) * GI_SLAB_RECORDS + slot] = v3;
		}
		for (; j < W; j += 32)
			data[(size_t) j * GI_SLAB_RECORDS + slot] = src[j];
		if (lane == 0)
		{
			uint64_t   *keys = (uint64_t *) (data + (size_t) GI_SLAB_RECORDS * W);

			keys[slot] = p.key;
			((uint32_t *) (keys + GI_SLAB_RECORDS))[slot] = p.kid;
			kid_key[p.kid] = p.key;
			att[p.row] = p.loc;
		}
		/* everything above is visible device-wide before the bit is */
		__threadfence();
		__syncwarp();
		if (lane == 0)
		{
			__threadfence();
			atomicOr(&slabs[slab].bitmap, 1u << slot);
			atomicAdd(&slabs[slab].count, 1u);
		}
		__syncwarp();
	}
}

/*
 * Wait until arena b's last chunk is done; with timing on, add its device
 * time.  Events fire in stream order, so a chunk's start event cannot fire
 * before the previous chunk is done: the sum is device busy time.
 */
static gi_status
gi_cu_arena_wait(gi_store *s, int b)
{
	float		ms = 0.0f;

	if (!s->up_busy[b])
		return GI_OK;
	GI_CU_TRY(cudaEventSynchronize(s->ev_up[b]));
	if (s->timing && cudaEventElapsedTime(&ms, s->ev_t0[b], s->ev_up[b]) == cudaSuccess)
		s->dev_ms += ms;
	s->up_busy[b] = false;
	return GI_OK;
}

/*
 * Ship the planned chunk in arena b: the payload (already copied to offset
 * 0 by the helpers, records [0, nsrc)), the plan at poff with the patches
 * right behind it; two asynchronous copies, the two patch phases, the
 * record kernel, and an event that frees the arena.
 */
static gi_status
gi_cu_insert_ship(gi_store *s, int b, uint32_t nsrc, size_t poff, size_t room)
{
	unsigned char *ha = (unsigned char *) s->p_up[b].p;
	unsigned char *da = (unsigned char *) s->m_up[b].p;
	size_t		qoff = poff + GI_CU_ALIGN16((size_t) s->nplan * sizeof(gi_cu_plan));
	uint32_t	nfirst;
	uint32_t	npatch;

	if (qoff + gi_cu_patch_bound(s) * sizeof(gi_cu_patch) > room)
	{
		gi_cu_set_error("CUDA store: %llu patches exceed the chunk's arena",
						(unsigned long long) gi_cu_patch_bound(s));
		return GI_ERR_DEVICE;
	}
	npatch = gi_cu_collect_patches_into(s, (gi_cu_patch *) (ha + qoff), &nfirst);
	if (s->nplan == 0 && npatch == 0)
		return GI_OK;
	if (s->timing)
		GI_CU_TRY(cudaEventRecord(s->ev_t0[b], s->ms));
	if (s->nplan > 0)
		GI_CU_TRY(cudaMemcpyAsync(da, ha, (size_t) nsrc * s->params.record_bytes,
								  cudaMemcpyHostToDevice, s->ms));
	GI_CU_TRY(cudaMemcpyAsync(da + poff, ha + poff,
							  (qoff - poff) + (size_t) npatch * sizeof(gi_cu_patch),
							  cudaMemcpyHostToDevice, s->ms));
	gi_cu_launch_patches(s, (const gi_cu_patch *) (da + qoff), nfirst, npatch);
	if (s->nplan > 0)
	{
		uint32_t	blocks = gi_cu_div_up(s->nplan, 8);
		uint32_t	most = (uint32_t) s->dev->sms * 16;

		gi_k_insert<<<blocks < most ? blocks : most, 256, 0, s->ms>>>(
			(const gi_cu_plan *) (da + poff), s->nplan, (const uint32_t *) da,
			s->words, s->d_slabs, s->d_att, s->d_kid_key);
	}
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cudaEventRecord(s->ev_up[b], s->ms));
	s->up_busy[b] = true;
	return GI_OK;
}

gi_status
gi_cu_store_insert(gi_store *s, uint32_t n, const uint32_t *lists,
				   const uint64_t *keys, const void *payloads,
				   uint64_t *ninserted)
{
	const unsigned char *p = (const unsigned char *) payloads;
	uint64_t	done = 0;
	uint32_t	chunk;
	size_t		rb;
	size_t		poff;
	size_t		room;
	uint32_t	i;
	uint32_t	end;
	int			b;
	gi_status	st;

	if (ninserted)
		*ninserted = 0;
	if (s == NULL)
	{
		gi_cu_set_error("store_insert: no store");
		return GI_ERR_INVALID;
	}
	if (n == 0)
		return GI_OK;
	if (lists == NULL || keys == NULL || payloads == NULL)
	{
		gi_cu_set_error("store_insert: lists, keys and payloads must not be NULL");
		return GI_ERR_INVALID;
	}
	{
		uint32_t	bad = 0;

		/* branch-free scan; the message names the first bad one */
		for (i = 0; i < n; i++)
			bad |= lists[i] >= s->params.nlists;
		for (i = 0; bad && i < n; i++)
		{
			if (lists[i] >= s->params.nlists)
			{
				gi_cu_set_error("list %u out of range: the store has %u lists",
								lists[i], s->params.nlists);
				return GI_ERR_INVALID;
			}
		}
	}
	st = gi_cu_mutation_begin(s);
	if (st != GI_OK)
		return st;
	s->gen++;

	s->dev_ms = 0.0;
	rb = s->params.record_bytes;
	chunk = s->insert_chunk;
	if (chunk == 0)
	{
		chunk = (uint32_t) (GI_CU_INSERT_CHUNK_BYTES / rb);
		if (chunk < 1)
			chunk = 1;
		if (chunk > GI_CU_INSERT_CHUNK_MAX)
			chunk = GI_CU_INSERT_CHUNK_MAX;
	}
	if (chunk > n)
		chunk = n;
	/* arena: payload | plan | patches (right behind the chunk's plan) */
	poff = GI_CU_ALIGN16((size_t) chunk * rb);
	room = poff + GI_CU_ALIGN16((size_t) chunk * sizeof(gi_cu_plan))
		+ GI_CU_CHUNK_PATCHES(chunk) * sizeof(gi_cu_patch);
	/* everything the pipeline needs, before any structure changes */
	for (b = 0; b < 2; b++)
	{
		st = gi_cu_pinned_reserve(&s->p_up[b], room);
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&s->m_up[b], room);
		if (st != GI_OK)
			return st;
		if (s->ev_up[b] == NULL)
		{
			GI_CU_TRY(cudaEventCreate(&s->ev_up[b]));
			GI_CU_TRY(cudaEventCreate(&s->ev_t0[b]));
		}
	}
	/* one rehash for the whole batch, when it fits under the limit */
	(void) gi_cu_map_reserve(s, gi_cu_batch_keys(s, keys, n));
	/* a call that failed half way left its pairs */
	gi_pairs_reset_call(&s->pairs);

	for (i = 0, b = 0; i < n; i = end, b ^= 1)
	{
		gi_status	ast;
		uint64_t	t0;
		uint64_t	t1;
		uint64_t	t2;
		uint64_t	t3;

		end = n - i > chunk ? i + chunk : n;
		t0 = gi_cu_now_ns();
		ast = gi_cu_arena_wait(s, b);
		if (ast != GI_OK)
			return gi_cu_broken(s, GI_ERR_DEVICE);
		t1 = gi_cu_now_ns();
		/* helpers copy the payload while this thread plans */
		gi_cu_copy_begin(s->p_up[b].p, p + (size_t) i * rb, (size_t) (end - i) * rb);
		s->nplan = 0;
		st = gi_cu_plan_insert(s, lists, keys, i, end,
							   (gi_cu_plan *) ((unsigned char *) s->p_up[b].p + poff),
							   &s->nplan, &done);
		t2 = gi_cu_now_ns();
		gi_cu_copy_end();
		t3 = gi_cu_now_ns();
		ast = gi_cu_insert_ship(s, b, s->nplan ? end - i : 0, poff, room);
		s->nplan = 0;
		s->prof.wait_ns += t1 - t0;
		s->prof.plan_ns += t2 - t1;
		s->prof.copy_ns += t3 - t2;
		s->prof.ship_ns += gi_cu_now_ns() - t3;
		s->prof.nchunks++;
		if (ast != GI_OK)
		{
			if (ninserted)
				*ninserted = done;
			return gi_cu_broken(s, GI_ERR_DEVICE);
		}
		if (st != GI_OK)
			break;
	}
	gi_pairs_reset_call(&s->pairs);
	{
		uint64_t	t0 = gi_cu_now_ns();
		gi_status	ast = gi_cu_arena_wait(s, 0);

		if (ast == GI_OK)
			ast = gi_cu_arena_wait(s, 1);
		if (ast == GI_OK)
		{
			cudaError_t err = cudaStreamSynchronize(s->ms);

			if (err != cudaSuccess)
				ast = gi_cu_status(err, "insert");
		}
		s->prof.wait_ns += gi_cu_now_ns() - t0;
		if (ast != GI_OK)
		{
			if (ninserted)
				*ninserted = done;
			return gi_cu_broken(s, GI_ERR_DEVICE);
		}
	}
	if (ninserted)
		*ninserted = done;
	return st;
}
