/*
 * cuda_walk.cuh
 *		Reading the slab lists on the device, for every kind's scan
 *		kernels: list heads and row counts, a slab's next link, validity
 *		bitmap, data block, a slot's key, key ordinal and word-interleaved
 *		payload;
 *		and the walks of slab chains into a shared-memory queue (block-wide,
 *		one chain per thread, or one thread ahead on one chain).
 *
 * The publish protocol (cuda/README.md) is kept here: heads, links and
 * bitmaps are acquire loads, and a reader trusts a slot only when its
 * validity bit is set.  Header-only, __forceinline__: the helpers cost
 * nothing in the kernels' inner loops.
 */
#ifndef GI_CUDA_WALK_CUH
#define GI_CUDA_WALK_CUH

#include <cstdint>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* ---- lists and slabs ------------------------------------------------------ */

/* first slab of list l (d_lists: head, rows per list), GI_NIL when empty */
__device__ __forceinline__ uint32_t
gi_list_head(const uint32_t *lists, uint32_t l)
{
	return gi_ld_acquire(&lists[2 * (size_t) l]);
}

/* live records of list l */
__device__ __forceinline__ uint32_t
gi_list_rows(const uint32_t *lists, uint32_t l)
{
	return gi_ld_acquire(&lists[2 * (size_t) l + 1]);
}

__device__ __forceinline__ uint32_t
gi_slab_next(const gi_dslab *slabs, uint32_t slab)
{
	return gi_ld_acquire(&slabs[slab].next);
}

/* validity bitmap: bit i set = slot i holds a published record */
__device__ __forceinline__ uint32_t
gi_slab_bitmap(const gi_dslab *slabs, uint32_t slab)
{
	return gi_ld_acquire(&slabs[slab].bitmap);
}

/* the slab's data block: payload[32 * W] | keys[32] (u64) | kids[32]; read after the bitmap */
__device__ __forceinline__ const uint32_t *
gi_slab_data(const gi_dslab *slabs, uint32_t slab)
{
	return slabs[slab].data;
}

__device__ __forceinline__ bool
gi_slot_live(uint32_t bitmap, uint32_t slot)
{
	return (bitmap >> slot) & 1u;
}

/*
 * Word 0 of a slot's payload.  Word j of the slot lies GI_SLAB_WORD(j)
 * words further: word j of the 32 slots is 128 contiguous bytes, so a warp
 * whose lane i reads slot i loads it coalesced.
 */
__device__ __forceinline__ const unsigned int *
gi_slot_payload(const uint32_t *data, uint32_t slot)
{
	return (const unsigned int *) data + slot;
}

#define GI_SLAB_WORD(j) ((size_t) (j) * GI_SLAB_RECORDS)

/* the key of a live slot of a slab whose records have W words */
__device__ __forceinline__ uint64_t
gi_slot_key(const uint32_t *data, uint32_t W, uint32_t slot)
{
	return __ldcg((const unsigned long long *) (data + (size_t) GI_SLAB_RECORDS * W) + slot);
}

/* the 32 key ordinals of a slab whose records have W words (after the keys) */
__device__ __forceinline__ const uint32_t *
gi_slab_kids(const uint32_t *data, uint32_t W)
{
	return data + (size_t) GI_SLAB_RECORDS * W + 2 * GI_SLAB_RECORDS;
}

/* ---- chain walks ----------------------------------------------------------- */

/*
 * Block-wide walk of up to blockDim.x chains, one per thread (cur: this
 * thread's chain head, GI_NIL for none).  Every chain advances one hop per
 * step, so the latency is the longest chain's; the slabs reached are
 * queued in shared memory (queue, QCAP entries, counter qlen).  When the
 * queue is full or every chain has ended, the whole block calls
 * visit(queue, n), then the walk goes on.  A chain longer than max_steps
 * hops (the pool's size: a corrupt chain) raises GI_CU_FLAG_CHAIN in
 * *flags and ends.  Every thread of the block must call it; it ends on a
 * barrier.
 */
template <uint32_t QCAP, typename Visit>
__device__ __forceinline__ void
gi_walk_chains(const gi_dslab *slabs, uint32_t cur, uint32_t max_steps, uint32_t *flags,
			   uint32_t *queue, uint32_t &qlen, Visit visit)
{
	const uint32_t tid = threadIdx.x;
	uint32_t	steps = 0;

	for (;;)
	{
		uint32_t	ql;
		int			more;

		if (tid == 0)
			qlen = 0;
		__syncthreads();
		/* walk: every live chain advances one hop per step */
		for (;;)
		{
			if (cur != GI_NIL)
			{
				uint32_t	pos = atomicAdd(&qlen, 1u);

				if (pos < QCAP)
				{
					queue[pos] = cur;
					if (++steps > max_steps)
					{
						atomicOr(flags, GI_CU_FLAG_CHAIN);
						cur = GI_NIL;
					}
					else
						cur = gi_slab_next(slabs, cur);
				}
			}
			__syncthreads();
			ql = qlen;
			more = __syncthreads_or(cur != GI_NIL);
			if (!more || ql >= QCAP)
				break;
		}
		visit(queue, ql < QCAP ? ql : QCAP);
		__syncthreads();
		if (!more)
			break;
	}
}

/*
 * One thread walks ahead on one chain: up to qcap slabs from *cur into
 * queue; *cur is left at the next slab (GI_NIL at the end).  *steps counts
 * the hops of the whole walk against max_steps, as in gi_walk_chains.
 * Returns the number queued.
 */
__device__ __forceinline__ uint32_t
gi_walk_ahead(const gi_dslab *slabs, uint32_t *cur, uint32_t qcap, uint32_t *steps,
			  uint32_t max_steps, uint32_t *flags, uint32_t *queue)
{
	uint32_t	n = 0;
	uint32_t	c = *cur;

	while (c != GI_NIL && n < qcap)
	{
		queue[n++] = c;
		if (++*steps > max_steps)
		{
			atomicOr(flags, GI_CU_FLAG_CHAIN);
			c = GI_NIL;
			break;
		}
		c = gi_slab_next(slabs, c);
	}
	*cur = c;
	return n;
}

#endif							/* GI_CUDA_WALK_CUH */
