/*
 * cuda_scan.cuh
 *		What the fine-scan kernels of the IVF kinds share (cuda_search.cu
 *		for IVF, cuda_ivfpq_scan.cu for IVF-PQ): the block shape, the slab
 *		queue, the bound on groups per query, the append of a warp's
 *		candidates on the large-k path, and the end of a unit's scan.
 */
#ifndef GI_CUDA_SCAN_CUH
#define GI_CUDA_SCAN_CUH

#include "cuda_ivf.h"
#include "cuda_topk.cuh"
#include "cuda_util.cuh"

#define GI_CU_SQ			512		/* slab queue entries per block */
#define GI_CU_SCAN_THREADS	256
#define GI_CU_MAX_GROUPS	1024	/* blocks per query, at most */

/* append a warp's valid candidates to query q's segment (large k) */
__device__ __forceinline__ void
gi_append(const gi_scan_args &a, uint32_t q, bool valid, float d, uint64_t key)
{
	const uint32_t lane = threadIdx.x & 31;
	uint32_t	m = __ballot_sync(GI_CU_FULL_MASK, valid);
	unsigned long long base = 0;

	if (m == 0)
		return;
	if (lane == 0)
		base = atomicAdd(&a.cur[q], (unsigned long long) __popc(m));
	base = __shfl_sync(GI_CU_FULL_MASK, base, 0);
	if (valid)
	{
		unsigned long long pos = base + __popc(m & gi_lanemask_lt());

		if (pos < a.end[q])
		{
			a.gd[pos] = gi_f2ord(d);
			a.gk[pos] = key;
		}
		else
			atomicOr(a.flags, GI_CU_FLAG_OVERFLOW);
	}
}

/*
 * The end of unit u's scan (query q): the block's final top-k straight into
 * the answer when the query is one unit, else into the unit's partial list
 * for the merge kernel.
 */
__device__ __forceinline__ void
gi_scan_finish(const gi_scan_args &a, gi_topk_state &ts, float *sd, uint64_t *sk,
			   uint32_t q, uint32_t u)
{
	uint32_t	n;

	gi_topk_flush(ts, sd, sk, a.cap, a.k);
	n = ts.count;
	if (a.G == 1)
		gi_write_hits(a.hits + (size_t) q * a.k, a.found + q, n, a.k, sd, sk);
	else
	{
		for (uint32_t r = threadIdx.x; r < n; r += blockDim.x)
		{
			a.cd[(size_t) u * a.k + r] = sd[r];
			a.ck[(size_t) u * a.k + r] = sk[r];
		}
		if (threadIdx.x == 0)
			a.cn[u] = n;
	}
}

#endif							/* GI_CUDA_SCAN_CUH */
