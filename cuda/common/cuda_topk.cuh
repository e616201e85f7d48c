/*
 * cuda_topk.cuh
 *		Block-level selection primitives of the search:
 *
 *	- gi_block_select: the m smallest of n (key, id) pairs, by a radix
 *	  select on 64-bit ordered keys (up to 8 passes of 8 bits) followed by a
 *	  radix select on the ids among the keys equal to the pivot, so that
 *	  ties go to the smaller id exactly as the host ranks lists by
 *	  (distance, list number).  O(n) per pass, no sort.  It stops as soon
 *	  as the bin that holds the m-th key is needed whole: then no key of
 *	  the answer ties with one outside it.
 *
 *	- gi_topk_*: a block's running top-k of (distance, key) pairs in
 *	  shared memory for k <= GI_CU_FAST_K.  Warps append candidates that
 *	  beat the current k-th (ballot + one atomic per warp); when the
 *	  buffer is nearly full the block sorts it (bitonic, in shared memory)
 *	  and keeps the best k, which also tightens the threshold.
 */
#ifndef GI_CUDA_TOPK_CUH
#define GI_CUDA_TOPK_CUH

#include "cuda_util.cuh"

/* ---- radix select ------------------------------------------------------ */

struct gi_sel_smem
{
	uint32_t	hist[256];
	uint32_t	digit;
	uint32_t	rem;
	uint32_t	cnt;
};

/*
 * Warp 0 finds the bin where the running count reaches `remaining`: the
 * bin's digit and the rank still needed inside it go to sm.  The caller
 * guarantees that the histogram holds at least `remaining` items.
 */
__device__ __forceinline__ void
gi_pick_bin(gi_sel_smem &sm, uint32_t remaining)
{
	uint32_t	lane = threadIdx.x & 31;

	if (threadIdx.x < 32)
	{
		uint32_t	local[8];
		uint32_t	sum = 0;
		uint32_t	incl;
		uint32_t	excl;
		uint32_t	hit;
		int			b;

#pragma unroll
		for (b = 0; b < 8; b++)
		{
			local[b] = sm.hist[lane * 8 + b];
			sum += local[b];
		}
		incl = sum;
#pragma unroll
		for (b = 1; b < 32; b <<= 1)
		{
			uint32_t	o = __shfl_up_sync(GI_CU_FULL_MASK, incl, b);

			if (lane >= (uint32_t) b)
				incl += o;
		}
		excl = incl - sum;
		hit = __ballot_sync(GI_CU_FULL_MASK, incl >= remaining);
		if (hit != 0 && lane == (uint32_t) (__ffs(hit) - 1))
		{
			uint32_t	cum = excl;

#pragma unroll
			for (b = 0; b < 8; b++)
			{
				if (cum + local[b] >= remaining)
				{
					sm.digit = lane * 8 + b;
					sm.rem = remaining - cum;
					break;
				}
				cum += local[b];
			}
		}
	}
}

/*
 * Write the ids of the m smallest (key(i), id(i)), i < n, to out[0..m) in
 * no particular order.  ids must be distinct.  Every thread of the block
 * calls it; blockDim.x >= 32.
 */
template <class KeyF, class IdF>
__device__ void
gi_block_select(uint32_t n, uint32_t m, KeyF key, IdF id, uint32_t *out,
				gi_sel_smem &sm)
{
	const uint32_t tid = threadIdx.x;
	const uint32_t bs = blockDim.x;
	uint64_t	prefix = 0;
	uint64_t	mask = 0;
	uint32_t	remaining = m;
	uint32_t	iprefix = 0;
	uint32_t	imask = 0;
	uint32_t	i;
	int			shift;
	bool		whole = false;	/* the pivot's bin is taken whole */

	if (m >= n)
	{
		for (i = tid; i < n; i += bs)
			out[i] = id(i);
		__syncthreads();
		return;
	}

	/* the pivot key K: fewer than m keys below it, at least m up to it */
	for (shift = 56; shift >= 0; shift -= 8)
	{
		for (i = tid; i < 256; i += bs)
			sm.hist[i] = 0;
		__syncthreads();
		for (i = tid; i < n; i += bs)
		{
			uint64_t	k = key(i);

			if ((k & mask) == prefix)
				atomicAdd(&sm.hist[(k >> shift) & 255], 1u);
		}
		__syncthreads();
		gi_pick_bin(sm, remaining);
		__syncthreads();
		prefix |= (uint64_t) sm.digit << shift;
		mask |= (uint64_t) 0xFF << shift;
		remaining = sm.rem;
		whole = sm.hist[sm.digit] == remaining;
		__syncthreads();
		if (whole)
			break;				/* block-uniform */
	}

	/* among keys == K, the `remaining` smallest ids: pivot id I */
	for (shift = 24; !whole && shift >= 0; shift -= 8)
	{
		for (i = tid; i < 256; i += bs)
			sm.hist[i] = 0;
		__syncthreads();
		for (i = tid; i < n; i += bs)
		{
			uint32_t	d = id(i);

			if (key(i) == prefix && (d & imask) == iprefix)
				atomicAdd(&sm.hist[(d >> shift) & 255], 1u);
		}
		__syncthreads();
		gi_pick_bin(sm, remaining);
		__syncthreads();
		iprefix |= sm.digit << shift;
		imask |= 0xFFu << shift;
		remaining = sm.rem;
		__syncthreads();
	}

	if (tid == 0)
		sm.cnt = 0;
	__syncthreads();
	for (i = tid; i < n; i += bs)
	{
		uint64_t	k = key(i);

		if (whole ? (k & mask) <= prefix : k < prefix || (k == prefix && id(i) <= iprefix))
			out[atomicAdd(&sm.cnt, 1u)] = id(i);
	}
	__syncthreads();
}

/* ---- running top-k in shared memory ------------------------------------ */

/* the fast path's bound on k; larger k takes the sort-based path */
#define GI_CU_FAST_K 1024

struct gi_topk_state
{
	uint32_t	count;			/* entries in the buffer */
	uint32_t	have;			/* a full k are kept: threshold valid */
	float		td;				/* threshold: the k-th best so far */
	uint64_t	tk;
};

/* buffer size for k: a power of two >= k + 256 (room for one round) */
static inline uint32_t
gi_topk_cap(uint32_t k)
{
	uint32_t	p = 1;

	while (p < k)
		p <<= 1;
	p *= 2;
	return p < 512 ? 512 : p;
}

__device__ __forceinline__ void
gi_topk_init(gi_topk_state &ts)
{
	if (threadIdx.x == 0)
	{
		ts.count = 0;
		ts.have = 0;
		ts.td = 0.0f;
		ts.tk = 0;
	}
}

/* compare-exchange t of a bitonic stage (merge size `size`, distance `stride`) */
__device__ __forceinline__ void
gi_bitonic_pair(float *sd, uint64_t *sk, uint32_t t, uint32_t size, uint32_t stride)
{
	uint32_t	lo = 2 * t - (t & (stride - 1));
	uint32_t	hi = lo + stride;
	bool		up = (lo & size) == 0;
	float		dl = sd[lo];
	float		dh = sd[hi];
	uint64_t	kl = sk[lo];
	uint64_t	kh = sk[hi];
	bool		sw = up ? gi_hit_less(dh, kh, dl, kl) : gi_hit_less(dl, kl, dh, kh);

	if (sw)
	{
		sd[lo] = dh;
		sd[hi] = dl;
		sk[lo] = kh;
		sk[hi] = kl;
	}
}

/* ascending (distance, key) bitonic sort of cap entries (power of two) */
__device__ __forceinline__ void
gi_bitonic_sort(float *sd, uint64_t *sk, uint32_t cap)
{
	const uint32_t tid = threadIdx.x;
	const uint32_t bs = blockDim.x;
	uint32_t	size;
	uint32_t	stride;
	uint32_t	t;

	for (size = 2; size <= cap; size <<= 1)
	{
		for (stride = size >> 1; stride > 0; stride >>= 1)
		{
			for (t = tid; t < cap / 2; t += bs)
				gi_bitonic_pair(sd, sk, t, size, stride);
			__syncthreads();
		}
	}
}

/*
 * Sort the buffer and keep the best min(count, k); every thread calls it.
 * cap >= 2 is a power of two.
 * Afterwards sd/sk[0 .. ts.count) hold the best entries in order.
 */
__device__ __forceinline__ void
gi_topk_flush(gi_topk_state &ts, float *sd, uint64_t *sk, uint32_t cap,
			  uint32_t k)
{
	uint32_t	n;
	uint32_t	i;

	uint32_t	size = 2;

	__syncthreads();
	n = ts.count;
	/* only the filled part, rounded up to a power of two, is sorted */
	while (size < n)
		size <<= 1;
	/* padding sorts last: (+Inf, max key) is the largest pair there is */
	for (i = n + threadIdx.x; i < size; i += blockDim.x)
	{
		sd[i] = __int_as_float(0x7f800000);
		sk[i] = UINT64_MAX;
	}
	__syncthreads();
	gi_bitonic_sort(sd, sk, size);
	if (threadIdx.x == 0)
	{
		uint32_t	keep = n < k ? n : k;

		ts.count = keep;
		if (keep == k)
		{
			ts.have = 1;
			ts.td = sd[k - 1];
			ts.tk = sk[k - 1];
		}
	}
	__syncthreads();
}

/*
 * The same for one warp alone, so that the warps of a block can flush the
 * buffers of different queries at once (gi_k_scan_tile): a bitonic sort of
 * the filled part with __syncwarp between the stages.
 */
__device__ __forceinline__ void
gi_topk_flush_warp(gi_topk_state &ts, float *sd, uint64_t *sk, uint32_t k)
{
	const uint32_t lane = threadIdx.x & 31;
	uint32_t	n = ts.count;
	uint32_t	size = 2;
	uint32_t	i;
	uint32_t	sz;
	uint32_t	stride;

	while (size < n)
		size <<= 1;
	for (i = n + lane; i < size; i += 32)
	{
		sd[i] = __int_as_float(0x7f800000);
		sk[i] = UINT64_MAX;
	}
	__syncwarp();
	for (sz = 2; sz <= size; sz <<= 1)
	{
		for (stride = sz >> 1; stride > 0; stride >>= 1)
		{
			for (i = lane; i < size / 2; i += 32)
				gi_bitonic_pair(sd, sk, i, sz, stride);
			__syncwarp();
		}
	}
	if (lane == 0)
	{
		uint32_t	keep = n < k ? n : k;

		ts.count = keep;
		if (keep == k)
		{
			ts.have = 1;
			ts.td = sd[k - 1];
			ts.tk = sk[k - 1];
		}
	}
	__syncwarp();
}

/*
 * Warp-collective: offer one candidate per lane.  Only pairs strictly
 * better than the k-th kept so far are appended (as the host's heap does),
 * with one shared atomic per warp.  The caller keeps at least 32 free
 * entries per warp of the round.
 */
__device__ __forceinline__ void
gi_topk_offer(gi_topk_state &ts, float *sd, uint64_t *sk, bool valid,
			  float d, uint64_t key)
{
	const uint32_t lane = threadIdx.x & 31;
	bool		pass = valid && (!ts.have || gi_hit_less(d, key, ts.td, ts.tk));
	uint32_t	m = __ballot_sync(GI_CU_FULL_MASK, pass);
	uint32_t	base = 0;

	if (m == 0)
		return;
	if (lane == 0)
		base = atomicAdd(&ts.count, (uint32_t) __popc(m));
	base = __shfl_sync(GI_CU_FULL_MASK, base, 0);
	if (pass)
	{
		uint32_t	pos = base + __popc(m & gi_lanemask_lt());

		sd[pos] = d;
		sk[pos] = key;
	}
}

/*
 * End of a round of offers: must the buffer be flushed before the next
 * round (room for one more round of blockDim.x offers)?  The first barrier
 * ends the round's appends; the count is read by one thread and spread by
 * the second barrier, before any warp can start the next round, so every
 * thread takes the same decision (flush contains barriers).
 */
__device__ __forceinline__ bool
gi_topk_need_flush(gi_topk_state &ts, uint32_t cap)
{
	__syncthreads();
	return __syncthreads_or(threadIdx.x == 0 && ts.count > cap - blockDim.x) != 0;
}

/* write a query's final k hits (padding: key 0, +Inf) and its count */
__device__ __forceinline__ void
gi_write_hits(gi_hit *out, uint32_t *found, uint32_t n, uint32_t k,
			  const float *sd, const uint64_t *sk)
{
	uint32_t	r;

	for (r = threadIdx.x; r < k; r += blockDim.x)
	{
		gi_hit		h;

		if (r < n)
		{
			h.key = sk[r];
			h.distance = sd[r];
		}
		else
		{
			h.key = 0;
			h.distance = __int_as_float(0x7f800000);
		}
		h.pad = 0;
		out[r] = h;
	}
	if (threadIdx.x == 0)
		*found = n;
}

#endif							/* GI_CUDA_TOPK_CUH */
