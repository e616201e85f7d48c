/*
 * cuda_insert.cu
 *		Batched insert: plan on the host mirror, publish on the device.
 *
 * Planning follows the host store record by record (gi_host_insert_one):
 * unique-key skip, key map growth, the list's head slab's first free slot,
 * else a slab from the free stack, else the never-used tail of the pool,
 * else pool growth by a chunk.  Anything that can fail happens before the
 * record touches a structure, so an error (memory limit, allocation)
 * leaves the records before it inserted and the store consistent, cut at
 * the same record as the host backend.
 *
 * The device applies a planned chunk with three launches on the mutation
 * stream: header links, list counts and free-stack entries; then list
 * heads (a reader that follows a new head finds its links already set);
 * then the records: payload words written into the slab's interleaved
 * layout, key, row and ATT entry, __threadfence(), and only then the
 * validity bit (atomicOr) and the count.  A search running concurrently
 * on another stream trusts only the bit, so it never sees a half-written
 * record.
 *
 * Chunks are pipelined: a chunk's payload, plan and patches go into one
 * of two pinned upload arenas and travel in one asynchronous copy, so the
 * host plans chunk c+1 while chunk c is copied and applied.
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

#define GI_CU_FULL_BITMAP 0xFFFFFFFFu

/* how far ahead the planning loop prefetches key map slots */
#define GI_CU_PREFETCH 8

__global__ void
gi_k_insert(const gi_cu_plan *__restrict__ plan, uint32_t n,
			const uint32_t *__restrict__ stage, uint32_t W,
			gi_dslab *slabs, uint64_t *att)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	gi_cu_plan	p;
	uint32_t   *data;
	const uint32_t *src;
	uint64_t   *keys;
	uint32_t   *rows;
	uint32_t	j;

	if (i >= n)
		return;
	p = plan[i];
	data = slabs[p.slab].data;
	src = stage + (size_t) p.src * W;
	/* word j of slot i at data[j * 32 + i]: a warp reads it coalesced */
	for (j = 0; j < W; j++)
		data[(size_t) j * GI_SLAB_RECORDS + p.slot] = src[j];
	keys = (uint64_t *) (data + (size_t) GI_SLAB_RECORDS * W);
	rows = (uint32_t *) (keys + GI_SLAB_RECORDS);
	keys[p.slot] = p.key;
	rows[p.slot] = p.row;
	att[p.row] = ((uint64_t) p.slab << 32) | p.slot;
	/* everything above is visible device-wide before the bit is */
	__threadfence();
	atomicOr(&slabs[p.slab].bitmap, 1u << p.slot);
	atomicAdd(&slabs[p.slab].count, 1u);
}

/* plan one record on the mirror; the host store's gi_host_insert_one */
static gi_status
gi_cu_plan_one(gi_store *s, uint32_t list, uint64_t key, uint32_t src,
			   bool *inserted)
{
	uint64_t	mi = gi_cu_map_find(s, key);
	uint32_t	head;
	uint32_t	slab;
	uint32_t	slot;
	uint32_t	row;
	gi_mslab   *h;
	gi_cu_plan *pl;
	gi_status	st;

	*inserted = false;
	if (mi != GI_CU_MAP_NONE && s->params.unique_keys)
		return GI_OK;

	/* first everything that can fail, before any structure changes */
	if (mi == GI_CU_MAP_NONE && !gi_cu_map_has_room(s))
	{
		st = gi_cu_map_resize(s, s->map_cap * 2);
		if (st != GI_OK)
			return st;
	}
	head = s->list_head[list];
	if (head == GI_NIL ||
		(s->slabs[head].bitmap | s->slabs[head].held) == GI_CU_FULL_BITMAP)
	{
		if (s->nfree > 0)
		{
			slab = s->free_slabs[--s->nfree];
			if (s->nfree < s->free_low)
				s->free_low = s->nfree;
		}
		else
		{
			if (s->slab_hwm == s->nslabs)
			{
				st = gi_cu_grow_pool(s);
				if (st != GI_OK)
					return st;
			}
			slab = s->slab_hwm++;
		}
		/* the new slab becomes the list's head */
		h = &s->slabs[slab];
		h->list = list;
		h->prev = GI_NIL;
		h->next = head;
		gi_cu_mark_slab(s, slab);
		if (head != GI_NIL)
		{
			s->slabs[head].prev = slab;
			gi_cu_mark_slab(s, head);
		}
		s->list_head[list] = slab;
		s->slabs_used++;
		head = slab;
	}
	h = &s->slabs[head];
	slot = (uint32_t) __builtin_ctz(~(h->bitmap | h->held));

	/* live rows < slots in the pool, so a row id is always available */
	if (s->nfree_rows > 0)
		row = s->free_rows[--s->nfree_rows];
	else
		row = s->row_hwm++;

	h->bitmap |= 1u << slot;
	h->count++;
	s->att[row] = ((uint64_t) head << 32) | slot;
	s->list_rows[list]++;
	gi_cu_mark_list(s, list);

	if (mi == GI_CU_MAP_NONE)
	{
		s->row_next[row] = GI_NIL;
		gi_cu_map_put(s->map_keys, s->map_rows, s->map_cap, key, row);
		s->map_count++;
	}
	else
	{
		s->row_next[row] = s->map_rows[mi];
		s->map_rows[mi] = row;
	}
	s->rows++;
	s->inserts++;

	pl = s->plan_dst + s->nplan++;
	pl->key = key;
	pl->src = src;
	pl->slab = head;
	pl->slot = slot;
	pl->row = row;
	*inserted = true;
	return GI_OK;
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
 * Ship the planned chunk in arena b: payload records [0, nsrc) at offset
 * 0, the plan at poff, the patches at qoff; one asynchronous copy, the two
 * patch phases, the record kernel, and an event that frees the arena.
 */
static gi_status
gi_cu_insert_ship(gi_store *s, int b, const unsigned char *payloads,
				  size_t poff, size_t qoff, size_t patch_cap)
{
	unsigned char *ha = (unsigned char *) s->p_up[b].p;
	unsigned char *da = (unsigned char *) s->m_up[b].p;
	const gi_cu_plan *plan = (const gi_cu_plan *) (ha + poff);
	uint32_t	nsrc = s->nplan ? plan[s->nplan - 1].src + 1 : 0;
	uint32_t	nfirst;
	uint32_t	npatch;

	if (gi_cu_patch_bound(s) > patch_cap)
	{
		gi_cu_set_error("CUDA store: %llu patches exceed the chunk's arena",
						(unsigned long long) gi_cu_patch_bound(s));
		return GI_ERR_DEVICE;
	}
	memcpy(ha, payloads, (size_t) nsrc * s->params.record_bytes);
	npatch = gi_cu_collect_patches_into(s, (gi_cu_patch *) (ha + qoff), &nfirst);
	if (s->nplan == 0 && npatch == 0)
		return GI_OK;
	if (s->timing)
		GI_CU_TRY(cudaEventRecord(s->ev_t0[b], s->ms));
	if (nsrc > 0)
		GI_CU_TRY(cudaMemcpyAsync(da, ha, (size_t) nsrc * s->params.record_bytes,
								  cudaMemcpyHostToDevice, s->ms));
	GI_CU_TRY(cudaMemcpyAsync(da + poff, ha + poff,
							  (qoff - poff) + (size_t) npatch * sizeof(gi_cu_patch),
							  cudaMemcpyHostToDevice, s->ms));
	gi_cu_launch_patches(s, (const gi_cu_patch *) (da + qoff), nfirst, npatch);
	if (s->nplan > 0)
		gi_k_insert<<<gi_cu_div_up(s->nplan, 256), 256, 0, s->ms>>>(
			(const gi_cu_plan *) (da + poff), s->nplan, (const uint32_t *) da,
			s->words, s->d_slabs, s->d_att);
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
	size_t		poff;
	size_t		qoff;
	size_t		patch_cap;
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
	for (i = 0; i < n; i++)
	{
		if (lists[i] >= s->params.nlists)
		{
			gi_cu_set_error("list %u out of range: the store has %u lists",
							lists[i], s->params.nlists);
			return GI_ERR_INVALID;
		}
	}
	st = gi_cu_check_usable(s);
	if (st != GI_OK)
		return st;
	if (!s->concurrent)
	{
		st = gi_cu_quiesce(s);
		if (st != GI_OK)
			return st;
	}

	s->dev_ms = 0.0;
	chunk = s->insert_chunk;
	if (chunk == 0)
	{
		chunk = (uint32_t) (GI_CU_INSERT_CHUNK_BYTES / s->params.record_bytes);
		if (chunk < 1)
			chunk = 1;
		if (chunk > GI_CU_INSERT_CHUNK_MAX)
			chunk = GI_CU_INSERT_CHUNK_MAX;
	}
	if (chunk > n)
		chunk = n;
	poff = GI_CU_ALIGN16((size_t) chunk * s->params.record_bytes);
	qoff = poff + GI_CU_ALIGN16((size_t) chunk * sizeof(gi_cu_plan));
	patch_cap = GI_CU_CHUNK_PATCHES(chunk);
	/* everything the pipeline needs, before any structure changes */
	for (b = 0; b < 2; b++)
	{
		st = gi_cu_pinned_reserve(&s->p_up[b], qoff + patch_cap * sizeof(gi_cu_patch));
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&s->m_up[b], qoff + patch_cap * sizeof(gi_cu_patch));
		if (st != GI_OK)
			return st;
		if (s->ev_up[b] == NULL)
		{
			GI_CU_TRY(cudaEventCreate(&s->ev_up[b]));
			GI_CU_TRY(cudaEventCreate(&s->ev_t0[b]));
		}
	}

	for (i = 0, b = 0; i < n; i = end, b ^= 1)
	{
		gi_status	ast;
		uint32_t	r;

		end = n - i > chunk ? i + chunk : n;
		ast = gi_cu_arena_wait(s, b);
		if (ast != GI_OK)
			return gi_cu_broken(s, GI_ERR_DEVICE);
		s->plan_dst = (gi_cu_plan *) ((unsigned char *) s->p_up[b].p + poff);
		s->nplan = 0;
		st = GI_OK;
		for (r = i; r < end; r++)
		{
			bool		inserted;

			if (r + GI_CU_PREFETCH < end)
				gi_cu_map_prefetch(s, keys[r + GI_CU_PREFETCH]);
			st = gi_cu_plan_one(s, lists[r], keys[r], r - i, &inserted);
			if (st != GI_OK)
				break;
			if (inserted)
				done++;
		}
		ast = gi_cu_insert_ship(s, b, p + (size_t) i * s->params.record_bytes, poff, qoff,
								patch_cap);
		s->nplan = 0;
		if (ast != GI_OK)
		{
			if (ninserted)
				*ninserted = done;
			return gi_cu_broken(s, GI_ERR_DEVICE);
		}
		if (st != GI_OK)
			break;
	}
	{
		gi_status	ast = gi_cu_arena_wait(s, 0);

		if (ast == GI_OK)
			ast = gi_cu_arena_wait(s, 1);
		if (ast == GI_OK)
		{
			cudaError_t err = cudaStreamSynchronize(s->ms);

			if (err != cudaSuccess)
				ast = gi_cu_status(err, "insert");
		}
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
