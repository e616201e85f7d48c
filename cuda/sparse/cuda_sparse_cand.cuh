/*
 * cuda_sparse_cand.cuh
 *		What the sparse kind's candidate kernels share (the top-k's
 *		compaction, select and gather, the counting path's compaction):
 *		their block shape, a block-wide append into a query's candidates,
 *		and a score's ordered distance bits.
 */
#ifndef GI_CUDA_SPARSE_CAND_CUH
#define GI_CUDA_SPARSE_CAND_CUH

#include <cub/block/block_scan.cuh>

#include "cuda_sparse.h"
#include "cuda_util.cuh"

/* candidates a block of the compaction, histogram and gather kernels takes */
#define GI_SP_PER_THREAD 16
#define GI_SP_BLOCK 256
#define GI_SP_TILE (GI_SP_PER_THREAD * GI_SP_BLOCK)

typedef cub::BlockScan<uint32_t, GI_SP_BLOCK> gi_sp_scan;

/*
 * Block-wide append: each thread has m items to write; returns this
 * thread's first position in the query's output (one atomic per block).
 */
__device__ __forceinline__ uint32_t
gi_sp_block_reserve(uint32_t m, uint32_t *counter, gi_sp_scan::TempStorage &ts,
					uint32_t &sbase)
{
	uint32_t	excl;
	uint32_t	total;

	gi_sp_scan(ts).ExclusiveSum(m, excl, total);
	if (threadIdx.x == 0)
		sbase = total ? atomicAdd(counter, total) : 0;
	__syncthreads();
	return sbase + excl;
}

/* the ordered bits of the distance of a score */
__device__ __forceinline__ uint32_t
gi_sp_dist_ord(double score)
{
	return gi_f2ord(gi_rank_float(-(float) score));
}

#endif							/* GI_CUDA_SPARSE_CAND_CUH */
