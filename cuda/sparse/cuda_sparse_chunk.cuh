/*
 * cuda_sparse_chunk.cuh
 *		What both sparse scoring kernels do first: find the unit (list of a
 *		query term) of a chunk of GI_SP_CHUNK slabs, and load every slot's
 *		ordinal and weight of the chunk into registers.
 */
#ifndef GI_CUDA_SPARSE_CHUNK_CUH
#define GI_CUDA_SPARSE_CHUNK_CUH

#include "cuda_sparse.h"
#include "cuda_util.cuh"
#include "cuda_walk.cuh"

/* the unit whose chunks hold chunk c: prefix[u] <= c < prefix[u + 1] */
__device__ __forceinline__ uint32_t
gi_sp_find_unit(const uint32_t *prefix, uint32_t nu, uint32_t c)
{
	uint32_t	lo = 0;
	uint32_t	hi = nu;

	while (hi - lo > 1)
	{
		uint32_t	mid = (lo + hi) >> 1;

		if (__ldg(&prefix[mid]) <= c)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Lane `lane`'s slot of the chunk's slabs (dir[at .. at + m)): kv[j] the
 * ordinal minus lo (UINT32_MAX when the slot is not live), wv[j] the
 * weight's bits (0 when not live; not loaded unless WEIGHTS).  The first lanes read the slab headers
 * and broadcast them; every load is issued before the caller's first
 * atomic.
 */
template <bool WEIGHTS>
__device__ __forceinline__ void
gi_sp_load_chunk(const uint32_t *__restrict__ dir, uint32_t at, uint32_t m,
				 const gi_dslab *slabs, uint32_t W, uint32_t lo, uint32_t lane,
				 uint32_t kv[GI_SP_CHUNK], uint32_t wv[GI_SP_CHUNK])
{
	uint32_t	bm = 0;
	unsigned long long dp = 0;

	if (lane < m)
	{
		uint32_t	slab = __ldg(&dir[at + lane]);

		bm = gi_slab_bitmap(slabs, slab);
		dp = (unsigned long long) gi_slab_data(slabs, slab);
	}
#pragma unroll
	for (int j = 0; j < GI_SP_CHUNK; j++)
	{
		uint32_t	b = __shfl_sync(GI_CU_FULL_MASK, bm, j);
		const uint32_t *data =
			(const uint32_t *) __shfl_sync(GI_CU_FULL_MASK, dp, j);

		kv[j] = UINT32_MAX;
		wv[j] = 0;
		if (gi_slot_live(b, lane))
		{
			if (WEIGHTS)
				wv[j] = __ldcg(gi_slot_payload(data, lane));
			kv[j] = __ldcg(gi_slab_kids(data, W) + lane) - lo;
		}
	}
}

#endif							/* GI_CUDA_SPARSE_CHUNK_CUH */
