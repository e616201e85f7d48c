/*
 * cuda_store.cu
 *		Life cycle of a CUDA store: create, destroy, statistics, memory
 *		accounting and limit, pool growth, and the patch mechanism that
 *		copies the host mirror's link changes to the device.
 *
 * See cuda_store.h for what lives where and why.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* pool growth step when params->chunk_slabs is 0 (the host store's) */
#define GI_CU_DEFAULT_CHUNK_SLABS 1024

/* row ids are u32 with GI_NIL reserved, one per slot */
#define GI_CU_MAX_SLABS ((uint32_t) (UINT32_MAX / GI_SLAB_RECORDS))

#define GI_CU_MAX_RECORD_BYTES (1u << 20)

/*
 * Device bytes a store holds now: list heads and counts, per slab the
 * header, the free-stack entry and the data block (payload, keys, key
 * ordinals), per slot the ATT entry, the ordinal -> key array, and the
 * error flags.  What the benchmark reports as
 * the device's memory overhead over the raw vectors; search scratch and
 * the upload arenas are transient and not counted (as in the limit).
 */
uint64_t
gi_cu_device_bytes(const gi_store *s)
{
	return (uint64_t) s->params.nlists * 2 * sizeof(uint32_t)
		+ (uint64_t) s->nslabs * (sizeof(gi_dslab) + sizeof(uint32_t) + s->slab_bytes
								  + (uint64_t) GI_SLAB_RECORDS * sizeof(uint32_t))
		+ s->d_kid_cap * sizeof(uint64_t)
		+ 4 * sizeof(uint32_t);
}

/* ---- small helpers ------------------------------------------------------ */

gi_status
gi_cu_buf_reserve(gi_cu_buf *b, size_t bytes)
{
	void	   *p = NULL;
	size_t		cap;
	cudaError_t err;

	if (bytes <= b->cap)
		return GI_OK;
	cap = b->cap + b->cap / 2;
	if (cap < bytes)
		cap = bytes;
	if (b->p)
	{
		/* kernels of this call may still read the old buffer */
		GI_CU_TRY(cudaDeviceSynchronize());
		cudaFree(b->p);
		b->p = NULL;
		b->cap = 0;
	}
	err = cudaMalloc(&p, cap);
	if (err != cudaSuccess)
	{
		cudaGetLastError();
		gi_cu_set_error("cudaMalloc of %zu bytes of search/mutation scratch failed: %s",
						cap, cudaGetErrorString(err));
		return err == cudaErrorMemoryAllocation ? GI_ERR_NOMEM : GI_ERR_DEVICE;
	}
	b->p = p;
	b->cap = cap;
	return GI_OK;
}

void
gi_cu_buf_free(gi_cu_buf *b)
{
	if (b->p)
		cudaFree(b->p);
	b->p = NULL;
	b->cap = 0;
}

gi_status
gi_cu_pinned_reserve(gi_cu_pinned *b, size_t bytes)
{
	void	   *p = NULL;
	size_t		cap;
	cudaError_t err;

	if (bytes <= b->cap)
		return GI_OK;
	cap = b->cap + b->cap / 2;
	if (cap < bytes)
		cap = bytes;
	if (b->p)
	{
		/* copies of this call may still target the old buffer */
		GI_CU_TRY(cudaDeviceSynchronize());
		cudaFreeHost(b->p);
		b->p = NULL;
		b->cap = 0;
	}
	err = cudaMallocHost(&p, cap);
	if (err != cudaSuccess)
	{
		cudaGetLastError();
		gi_cu_set_error("cudaMallocHost of %zu bytes of pinned staging failed: %s",
						cap, cudaGetErrorString(err));
		return GI_ERR_NOMEM;
	}
	b->p = p;
	b->cap = cap;
	return GI_OK;
}

void
gi_cu_pinned_free(gi_cu_pinned *b)
{
	if (b->p)
		cudaFreeHost(b->p);
	b->p = NULL;
	b->cap = 0;
}

gi_status
gi_cu_store_enter(gi_store *s)
{
	gi_status	st = gi_cu_enter(s->dev);

	if (st != GI_OK)
		return st;
	return gi_cu_check_usable(s);
}

void
gi_cu_set_kstate(gi_store *s, uint32_t kind, void *kstate,
				 void (*free_fn) (gi_store *s, void *kstate))
{
	if (s->kstate && s->kstate_free)
		s->kstate_free(s, s->kstate);
	s->kind = kstate ? kind : GI_KIND_NONE;
	s->kstate = kstate;
	s->kstate_free = kstate ? free_fn : NULL;
}

gi_status
gi_cu_check_usable(gi_store *s)
{
	if (s->broken)
	{
		gi_cu_set_error("the CUDA store is unusable after an earlier device error; reload the index");
		return GI_ERR_DEVICE;
	}
	return GI_OK;
}

/* the device fell behind the mirror: refuse everything from now on */
gi_status
gi_cu_broken(gi_store *s, gi_status st)
{
	if (st == GI_ERR_DEVICE || st == GI_ERR_NOMEM)
		s->broken = true;
	return st;
}

/* d_flags[0] is raised by mutation kernels, d_flags[1] by search kernels */
gi_status
gi_cu_read_flags(gi_store *s, cudaStream_t st, uint32_t idx, uint32_t *flags)
{
	GI_CU_TRY(cudaMemcpyAsync(flags, s->d_flags + idx, sizeof(uint32_t),
							  cudaMemcpyDeviceToHost, st));
	GI_CU_TRY(cudaStreamSynchronize(st));
	return GI_OK;
}

/* device time of a mutation's device part, accumulated into dev_ms */
void
gi_cu_time_begin(gi_store *s)
{
	if (s->timing)
		cudaEventRecord(s->ev0, s->ms);
}

void
gi_cu_time_end(gi_store *s)
{
	float		ms = 0.0f;

	if (s->timing && cudaEventRecord(s->ev1, s->ms) == cudaSuccess &&
		cudaEventSynchronize(s->ev1) == cudaSuccess &&
		cudaEventElapsedTime(&ms, s->ev0, s->ev1) == cudaSuccess)
		s->dev_ms += ms;
}

/* ---- patches: link changes of the mirror, copied to the device ---------- */

/* collect the pending patches into h_patch (gi_cu_collect_patches_into, cuda_plan.cu) */
gi_status
gi_cu_collect_patches(gi_store *s, uint32_t *nfirst)
{
	uint64_t	need = gi_cu_patch_bound(s);

	if (!gi_cu_hbuf_reserve(&s->h_patch, need * sizeof(gi_cu_patch)))
	{
		gi_cu_set_error("out of memory for %llu device patches",
						(unsigned long long) need);
		return GI_ERR_NOMEM;
	}
	s->npatch = gi_cu_collect_patches_into(s, (gi_cu_patch *) s->h_patch.p, nfirst);
	return GI_OK;
}

__global__ void
gi_k_patch(const gi_cu_patch *p, uint32_t n)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		/* release: pairs with the readers' acquire loads of links */
		asm volatile("st.release.gpu.u32 [%0], %1;"
					 :: "l"(p[i].addr), "r"(p[i].value) : "memory");
	}
}

/* run device patches d[0, nfirst) then d[nfirst, total) on the mutation stream */
void
gi_cu_launch_patches(gi_store *s, const gi_cu_patch *d, uint32_t nfirst, uint32_t total)
{
	if (nfirst > 0)
		gi_k_patch<<<gi_cu_div_up(nfirst, 256), 256, 0, s->ms>>>(d, nfirst);
	if (total > nfirst)
		gi_k_patch<<<gi_cu_div_up(total - nfirst, 256), 256, 0, s->ms>>>(d + nfirst,
																		   total - nfirst);
}

/* upload all collected patches and run [0, nfirst) then [nfirst, npatch) */
gi_status
gi_cu_apply_patches(gi_store *s, uint32_t nfirst, uint32_t total)
{
	gi_status	st;
	const gi_cu_patch *d;

	if (total == 0)
		return GI_OK;
	st = gi_cu_buf_reserve(&s->m_patch, (size_t) total * sizeof(gi_cu_patch));
	if (st != GI_OK)
		return st;
	d = (const gi_cu_patch *) s->m_patch.p;
	GI_CU_TRY(cudaMemcpyAsync(s->m_patch.p, s->h_patch.p,
							  (size_t) total * sizeof(gi_cu_patch),
							  cudaMemcpyHostToDevice, s->ms));
	gi_cu_launch_patches(s, d, nfirst, total);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/*
 * End of a concurrent phase (no search can still hold a slab pointer):
 * slots held back by deletes become reusable and freed slabs go on the
 * free stack.  Always a no-op in the service, which never overlaps.
 */
gi_status
gi_cu_quiesce(gi_store *s)
{
	uint32_t	i;
	uint32_t	nfirst;
	gi_status	st;

	/* ordinals of keys deleted meanwhile, in the order they were freed */
	for (i = 0; i < s->nheld_kids; i++)
		s->free_kids[s->nfree_kids++] = s->held_kids[i];
	s->nheld_kids = 0;
	if (s->nheld == 0 && s->npending == 0)
		return GI_OK;
	for (i = 0; i < s->nheld; i++)
		s->slabs[s->held_slabs[i]].held = 0;
	s->nheld = 0;
	for (i = 0; i < s->npending; i++)
		s->free_slabs[s->nfree++] = s->pending[i];
	s->npending = 0;
	st = gi_cu_collect_patches(s, &nfirst);
	if (st == GI_OK)
		st = gi_cu_apply_patches(s, nfirst, s->npatch);
	if (st == GI_OK)
	{
		cudaError_t err = cudaStreamSynchronize(s->ms);

		if (err != cudaSuccess)
			st = gi_cu_status(err, "cudaStreamSynchronize");
	}
	return gi_cu_broken(s, st);
}

/*
 * Before an insert or delete: the store's device is made current, the
 * store must be usable, and outside a concurrent phase no search can
 * overlap, so what earlier deletes held back is released now.
 */
gi_status
gi_cu_mutation_begin(gi_store *s)
{
	gi_status	st;

	st = gi_cu_store_enter(s);
	if (st != GI_OK)
		return st;
	if (!s->concurrent)
		return gi_cu_quiesce(s);
	return GI_OK;
}

/* ---- pool growth --------------------------------------------------------- */

/*
 * Fault injection for tests (gi_cuda_fail_alloc_after): after `after` more
 * successful device allocations of pool growth, one fails as if the
 * device were out of memory.  Thread-local, like the host store's.
 */
static thread_local int64_t gi_cu_fail_after = -1;

extern "C" void
gi_cuda_fail_alloc_after(int64_t after)
{
	gi_cu_fail_after = after;
}

/* a write to an address no allocation holds (the fault test's kernel) */
__global__ void
gi_k_illegal_write(unsigned int *p)
{
	*p = 1;
}

extern "C" gi_status
gi_cuda_debug_illegal_address(void)
{
	gi_device  *dev;
	gi_status	st = gi_cu_device_resolve(NULL, &dev);

	if (st == GI_OK)
		st = gi_cu_enter(dev);
	if (st != GI_OK)
		return st;
	gi_k_illegal_write<<<1, 1>>>((unsigned int *) (uintptr_t) 0x10);
	return gi_cu_status(cudaDeviceSynchronize(), "the injected illegal write");
}

/* stream-ordered on st (metadata arrays), plain cudaMalloc when st is NULL */
static cudaError_t
gi_cu_pool_malloc(void **p, size_t bytes, cudaStream_t st)
{
	if (gi_cu_fail_after >= 0 && gi_cu_fail_after-- == 0)
		return cudaErrorMemoryAllocation;
	return st ? cudaMallocAsync(p, bytes, st) : cudaMalloc(p, bytes);
}

static bool
gi_cu_grow_host_chunks(gi_store *s)
{
	uint32_t	cap = s->chunks_cap * 2 + 8;
	void	  **p = (void **) realloc(s->chunks, (size_t) cap * sizeof(void *));

	if (p == NULL)
	{
		gi_cu_set_error("out of host memory growing the pool");
		return false;
	}
	s->chunks = p;
	s->chunks_cap = cap;
	return true;
}

__global__ void
gi_k_init_slabs(gi_dslab *slabs, uint32_t n, char *chunk, size_t slab_bytes)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		gi_dslab	h;

		h.next = GI_NIL;
		h.prev = GI_NIL;
		h.list = GI_NIL;
		h.count = 0;
		h.bitmap = 0;
		h.pad = 0;
		h.data = (uint32_t *) (chunk + (size_t) i * slab_bytes);
		slabs[i] = h;
	}
}

/*
 * Grow the pool geometrically, at least 16 and at most chunk_slabs slabs
 * at a time (less when only less fits under the memory limit), exactly as
 * the host store does.  The new data block is one cudaMalloc that never
 * moves; headers, ATT and free stack are reallocated in stream order
 * (cudaMallocAsync, device-to-device copy, cudaFreeAsync on the mutation
 * stream: no device synchronisation, so the insert pipeline keeps
 * flowing, and the old arrays are freed only after the work already
 * queued with them has run).  Every allocation is made before anything is
 * changed, so a failure leaves the store as it was; errors of the queued
 * copies surface at the batch's final synchronisation and mark the store
 * broken.  A search stream waits for the copies (event) before it can
 * see the new arrays.
 */
gi_status
gi_cu_grow_pool(gi_store *s)
{
	uint64_t	old = s->nslabs;
	/* the host store's steps: geometric, at least 16, at most a chunk */
	uint64_t	step = old < 16 ? 16 : old;
	uint64_t	want;
	uint64_t	add;
	gi_dslab   *d_slabs = NULL;
	uint32_t   *d_att = NULL;
	uint32_t   *d_free = NULL;
	void	   *chunk = NULL;
	cudaError_t err;
	gi_status	st = GI_OK;
	uint64_t	t0;

	if (step > s->params.chunk_slabs)
		step = s->params.chunk_slabs;
	want = old + step;
	if (want > GI_CU_MAX_SLABS)
		want = GI_CU_MAX_SLABS;
	if (want <= old)
	{
		gi_cu_set_error("store is full: at most %u slabs of %u records",
						GI_CU_MAX_SLABS, GI_SLAB_RECORDS);
		return GI_ERR_LIMIT;
	}
	if (s->params.memory_limit != 0)
	{
		uint64_t	base = gi_cu_bytes_for(s, old, s->map_cap);
		uint64_t	per_slab = gi_cu_bytes_for(s, old + 1, s->map_cap) - base;

		if (gi_cu_bytes_for(s, want, s->map_cap) > s->params.memory_limit)
		{
			if (base + per_slab > s->params.memory_limit)
				return gi_cu_limit_error(s, base + per_slab);
			want = old + (s->params.memory_limit - base) / per_slab;
		}
	}
	add = want - old;

	/* host mirror arrays: extra capacity after a partial failure is harmless */
	if (!gi_cu_grow_mirror(s, want) ||
		(s->nchunks == s->chunks_cap &&
		 !gi_cu_grow_host_chunks(s)))
		return GI_ERR_NOMEM;
	if (s->ev_grow == NULL)
		GI_CU_TRY(cudaEventCreateWithFlags(&s->ev_grow, cudaEventDisableTiming));
	t0 = gi_cu_now_ns();

	/* device allocations, all before any change */
	err = gi_cu_pool_malloc((void **) &d_slabs, want * sizeof(gi_dslab), s->ms);
	if (err == cudaSuccess)
		err = gi_cu_pool_malloc((void **) &d_att, want * GI_SLAB_RECORDS * sizeof(uint32_t), s->ms);
	if (err == cudaSuccess)
		err = gi_cu_pool_malloc((void **) &d_free, want * sizeof(uint32_t), s->ms);
	if (err == cudaSuccess)
		err = gi_cu_pool_malloc(&chunk, add * s->slab_bytes, NULL);
	if (err != cudaSuccess)
	{
		cudaGetLastError();
		if (err == cudaErrorMemoryAllocation)
		{
			gi_cu_set_error("cudaMalloc failed growing the store to %llu slabs (%llu bytes of slab data): out of device memory",
							(unsigned long long) want,
							(unsigned long long) (add * s->slab_bytes));
			st = GI_ERR_NOMEM;
		}
		else
			st = gi_cu_status(err, "cudaMalloc");
		goto fail;
	}

	/* in stream order behind every queued use of the old arrays */
	err = cudaSuccess;
	if (old > 0)
	{
		err = cudaMemcpyAsync(d_slabs, s->d_slabs, old * sizeof(gi_dslab),
							  cudaMemcpyDeviceToDevice, s->ms);
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(d_att, s->d_att, old * GI_SLAB_RECORDS * sizeof(uint32_t),
								  cudaMemcpyDeviceToDevice, s->ms);
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(d_free, s->d_free, old * sizeof(uint32_t),
								  cudaMemcpyDeviceToDevice, s->ms);
	}
	if (err == cudaSuccess)
		err = cudaMemsetAsync(d_att + old * GI_SLAB_RECORDS, 0xFF,
							  add * GI_SLAB_RECORDS * sizeof(uint32_t), s->ms);
	if (err == cudaSuccess)
		err = cudaMemsetAsync(chunk, 0, add * s->slab_bytes, s->ms);
	if (err == cudaSuccess)
	{
		gi_k_init_slabs<<<gi_cu_div_up((uint32_t) add, 256), 256, 0, s->ms>>>(
			d_slabs + old, (uint32_t) add, (char *) chunk, s->slab_bytes);
		err = cudaGetLastError();
	}
	if (err == cudaSuccess)
		err = cudaEventRecord(s->ev_grow, s->ms);
	if (err != cudaSuccess)
	{
		/* queued work may use the new arrays: the store cannot go on */
		st = gi_cu_status(err, "growing the slab pool");
		cudaStreamSynchronize(s->ms);
		cudaFree(chunk);
		return gi_cu_broken(s, GI_ERR_DEVICE);
	}

	{
		/* a concurrent search holds mu for its whole duration */
		std::lock_guard<std::mutex> guard(s->mu);

		/* searches launched from now on see the new arrays filled */
		err = cudaStreamWaitEvent(s->ss, s->ev_grow, 0);
		if (s->d_slabs)
			cudaFreeAsync(s->d_slabs, s->ms);
		if (s->d_att)
			cudaFreeAsync(s->d_att, s->ms);
		if (s->d_free)
			cudaFreeAsync(s->d_free, s->ms);
		s->d_slabs = d_slabs;
		s->d_att = d_att;
		s->d_free = d_free;
		s->chunks[s->nchunks++] = chunk;
		gi_cu_init_mirror(s, old, want);
	}
	s->prof.grow_dev_ns += gi_cu_now_ns() - t0;
	if (err != cudaSuccess)
		return gi_cu_broken(s, gi_cu_status(err, "cudaStreamWaitEvent"));
	return GI_OK;

fail:
	if (d_slabs)
		cudaFreeAsync(d_slabs, s->ms);
	if (d_att)
		cudaFreeAsync(d_att, s->ms);
	if (d_free)
		cudaFreeAsync(d_free, s->ms);
	if (chunk)
		cudaFree(chunk);
	return st;
}

/*
 * The device's ordinal -> key array for a key map of map_cap entries
 * (the key map's resize calls this through s->grow_kids before it
 * rehashes): allocated, the used part copied and the old array freed in
 * stream order on the mutation stream, like the pool's metadata; searches
 * wait for the copy.  A failure leaves the old array in place.
 */
gi_status
gi_cu_grow_kids(gi_store *s, uint64_t map_cap)
{
	uint64_t	cap = gi_cu_kid_cap(map_cap);
	uint64_t   *d = NULL;
	cudaError_t err;

	if (cap <= s->d_kid_cap)
		return GI_OK;
	if (s->ev_grow == NULL)
		GI_CU_TRY(cudaEventCreateWithFlags(&s->ev_grow, cudaEventDisableTiming));
	err = cudaMallocAsync((void **) &d, cap * sizeof(uint64_t), s->ms);
	if (err != cudaSuccess)
	{
		cudaGetLastError();
		if (err == cudaErrorMemoryAllocation)
		{
			gi_cu_set_error("cudaMalloc failed growing the key ordinals to %llu entries: out of device memory",
							(unsigned long long) cap);
			return GI_ERR_NOMEM;
		}
		return gi_cu_status(err, "cudaMallocAsync");
	}
	err = cudaSuccess;
	if (s->kid_hwm > 0)
		err = cudaMemcpyAsync(d, s->d_kid_key, (size_t) s->kid_hwm * sizeof(uint64_t),
							  cudaMemcpyDeviceToDevice, s->ms);
	if (err == cudaSuccess)
		err = cudaEventRecord(s->ev_grow, s->ms);
	if (err != cudaSuccess)
	{
		gi_cu_status(err, "growing the key ordinals");
		cudaStreamSynchronize(s->ms);
		cudaFreeAsync(d, s->ms);
		return gi_cu_broken(s, GI_ERR_DEVICE);
	}
	{
		std::lock_guard<std::mutex> guard(s->mu);

		err = cudaStreamWaitEvent(s->ss, s->ev_grow, 0);
		if (s->d_kid_key)
			cudaFreeAsync(s->d_kid_key, s->ms);
		s->d_kid_key = d;
		s->d_kid_cap = cap;
	}
	if (err != cudaSuccess)
		return gi_cu_broken(s, gi_cu_status(err, "cudaStreamWaitEvent"));
	return GI_OK;
}

/* ---- create / destroy ---------------------------------------------------- */

void
gi_cu_store_destroy(gi_store *s)
{
	uint32_t	i;

	if (s == NULL)
		return;
	/* the store's device, also when it is broken: its memory goes back */
	if (s->dev)
		(void) gi_cu_enter(s->dev);
	if (s->ms)
		cudaStreamSynchronize(s->ms);
	if (s->ss)
		cudaStreamSynchronize(s->ss);
	for (i = 0; i < s->nchunks; i++)
		cudaFree(s->chunks[i]);
	if (s->d_lists)
		cudaFree(s->d_lists);
	/* stream-ordered allocations (pool growth) */
	if (s->ms && s->d_slabs)
		cudaFreeAsync(s->d_slabs, s->ms);
	if (s->ms && s->d_att)
		cudaFreeAsync(s->d_att, s->ms);
	if (s->ms && s->d_free)
		cudaFreeAsync(s->d_free, s->ms);
	if (s->ms && s->d_kid_key)
		cudaFreeAsync(s->d_kid_key, s->ms);
	if (s->ms)
		cudaStreamSynchronize(s->ms);
	if (s->ev_grow)
		cudaEventDestroy(s->ev_grow);
	if (s->d_flags)
		cudaFree(s->d_flags);
	gi_cu_set_kstate(s, GI_KIND_NONE, NULL, NULL);
	gi_cu_buf_free(&s->m_patch);
	for (i = 0; i < 2; i++)
	{
		gi_cu_pinned_free(&s->p_up[i]);
		gi_cu_buf_free(&s->m_up[i]);
		if (s->ev_up[i])
			cudaEventDestroy(s->ev_up[i]);
		if (s->ev_t0[i])
			cudaEventDestroy(s->ev_t0[i]);
	}
	if (s->ev0)
		cudaEventDestroy(s->ev0);
	if (s->ev1)
		cudaEventDestroy(s->ev1);
	if (s->ms)
		cudaStreamDestroy(s->ms);
	if (s->ss)
		cudaStreamDestroy(s->ss);
	gi_cu_free_mirror(s);
	free(s->chunks);
	delete s;
}

gi_status
gi_cu_store_create(const gi_store_params *params, gi_store **out)
{
	gi_store   *s;
	gi_device  *dev;
	uint32_t   *init = NULL;
	uint64_t	need;
	gi_status	st;
	uint32_t	i;

	if (out == NULL || params == NULL)
	{
		gi_cu_set_error("store_create: params and out must not be NULL");
		return GI_ERR_INVALID;
	}
	*out = NULL;
	if (params->nlists == 0)
	{
		gi_cu_set_error("a store needs at least one list");
		return GI_ERR_INVALID;
	}
	if (params->nlists == GI_NIL)
	{
		gi_cu_set_error("too many lists: %u", params->nlists);
		return GI_ERR_INVALID;
	}
	if (params->record_bytes == 0 || params->record_bytes % 4 != 0)
	{
		gi_cu_set_error("record size %u is not a positive multiple of 4 bytes",
						params->record_bytes);
		return GI_ERR_INVALID;
	}
	if (params->record_bytes > GI_CU_MAX_RECORD_BYTES)
	{
		gi_cu_set_error("record size %u is over the maximum of %u bytes",
						params->record_bytes, GI_CU_MAX_RECORD_BYTES);
		return GI_ERR_INVALID;
	}
	if (params->key_mode > GI_KEYS_PER_LIST)
	{
		gi_cu_set_error("unknown key mode %u", params->key_mode);
		return GI_ERR_INVALID;
	}
	st = gi_cu_device_resolve(params->device, &dev);
	if (st == GI_OK)
		st = gi_cu_enter(dev);
	if (st != GI_OK)
		return st;

	/* value-initialised: every pointer NULL, every counter 0 */
	s = new(std::nothrow) gi_store();
	if (s == NULL)
	{
		gi_cu_set_error("out of memory creating a store");
		return GI_ERR_NOMEM;
	}
	s->params = *params;
	s->params.device = dev;
	s->dev = dev;
	if (s->params.chunk_slabs == 0)
		s->params.chunk_slabs = GI_CU_DEFAULT_CHUNK_SLABS;
	s->words = params->record_bytes / 4;
	/* payload words, then the 32 keys (u64), then the 32 key ordinals */
	s->slab_bytes = (size_t) GI_SLAB_RECORDS *
		(params->record_bytes + sizeof(uint64_t) + sizeof(uint32_t));
	s->grow_kids = gi_cu_grow_kids;

	need = gi_cu_bytes_for(s, 0, GI_CU_MAP_INITIAL);
	if (s->params.memory_limit != 0 && need > s->params.memory_limit)
	{
		st = gi_cu_limit_error(s, need);
		delete s;
		return st;
	}

	s->list_head = (uint32_t *) malloc((size_t) s->params.nlists * sizeof(uint32_t));
	s->list_rows = (uint32_t *) calloc(s->params.nlists, sizeof(uint32_t));
	s->list_dirty = (uint8_t *) calloc(s->params.nlists, 1);
	s->dirty_lists = (uint32_t *) malloc((size_t) s->params.nlists * sizeof(uint32_t));
	init = (uint32_t *) malloc((size_t) s->params.nlists * 2 * sizeof(uint32_t));
	if (!s->list_head || !s->list_rows || !s->list_dirty || !s->dirty_lists || !init)
	{
		free(init);
		gi_cu_store_destroy(s);
		gi_cu_set_error("out of memory creating a store of %u lists",
						params->nlists);
		return GI_ERR_NOMEM;
	}
	for (i = 0; i < s->params.nlists; i++)
	{
		s->list_head[i] = GI_NIL;
		init[2 * (size_t) i] = GI_NIL;
		init[2 * (size_t) i + 1] = 0;
	}

#define GI_CREATE_TRY(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			st = gi_cu_status(e_, #call); \
			goto fail; \
		} \
	} while (0)

	GI_CREATE_TRY(cudaStreamCreateWithFlags(&s->ms, cudaStreamNonBlocking));
	GI_CREATE_TRY(cudaStreamCreateWithFlags(&s->ss, cudaStreamNonBlocking));
	GI_CREATE_TRY(cudaMalloc((void **) &s->d_lists,
							 (size_t) s->params.nlists * 2 * sizeof(uint32_t)));
	GI_CREATE_TRY(cudaMalloc((void **) &s->d_flags, 4 * sizeof(uint32_t)));
	GI_CREATE_TRY(cudaMemsetAsync(s->d_flags, 0, 4 * sizeof(uint32_t), s->ms));
	GI_CREATE_TRY(cudaMemcpyAsync(s->d_lists, init,
								  (size_t) s->params.nlists * 2 * sizeof(uint32_t),
								  cudaMemcpyHostToDevice, s->ms));
	GI_CREATE_TRY(cudaStreamSynchronize(s->ms));
#undef GI_CREATE_TRY

	st = gi_cu_maps_init(s);
	if (st != GI_OK)
		goto fail;

	free(init);
	*out = s;
	return GI_OK;

fail:
	free(init);
	gi_cu_store_destroy(s);
	return st;
}

/* ---- stats / limit -------------------------------------------------------- */

gi_status
gi_cu_store_stats(gi_store *s, gi_store_stats *out)
{
	if (s == NULL || out == NULL)
	{
		gi_cu_set_error("store_stats: store and out must not be NULL");
		return GI_ERR_INVALID;
	}
	memset(out, 0, sizeof(*out));
	out->lists = s->params.nlists;
	out->rows = s->rows;
	out->keys = s->map_count;
	out->slabs_used = s->slabs_used;
	out->slabs_free = (uint64_t) s->nfree + s->npending;
	out->slabs_total = s->nslabs;
	out->bytes = gi_cu_bytes_for(s, s->nslabs, s->map_cap);
	out->payload_bytes = s->rows * s->params.record_bytes;
	out->inserts = s->inserts;
	out->deletes = s->deletes;
	return GI_OK;
}

/* no device call: stats and limit come from the host side */
void
gi_cu_store_set_limit(gi_store *s, uint64_t limit)
{
	if (s)
		s->params.memory_limit = limit;
}
