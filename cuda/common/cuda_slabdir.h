/*
 * cuda_slabdir.h
 *		A per-list directory of a store's slabs on the device: the slabs of
 *		list l are dir[off[l] .. off[l+1]), in no particular order, so that a
 *		kernel can spread one list over many warps instead of following its
 *		chain one hop at a time.  Built from the device's slab headers when
 *		the store has changed since the last build (its mutation counter);
 *		owned by the kind that uses it.
 */
#ifndef GI_CUDA_SLABDIR_H
#define GI_CUDA_SLABDIR_H

#include "cuda_store.h"

struct gi_cu_slabdir
{
	bool		valid;
	uint64_t	gen;			/* the store's mutation counter at the build */
	uint32_t	nlists;
	uint32_t	nslabs;			/* linked slabs in the directory */
	uint32_t	maxcount;		/* slabs of the longest list */
	gi_cu_buf	d_dir;			/* [nslabs] slab numbers grouped by list */
	gi_cu_buf	d_off;			/* [nlists + 1] first entry of each list */
	gi_cu_buf	d_cnt;			/* [nlists + 1] counts, then fill cursors */
	gi_cu_buf	d_tmp;			/* CUB scan scratch */
	gi_cu_hbuf	h_off;			/* [nlists + 1] host copy of d_off */
};

/*
 * Bring the directory up to date with the store (rebuilt only when a
 * mutation came since the last build), on stream st; on return h_off is
 * valid.  A slab naming a list out of range raises GI_CU_FLAG_DIR in
 * d_flags[1].  The caller holds the store's mutex.
 */
extern gi_status gi_cu_slabdir_update(gi_store *s, gi_cu_slabdir *d, cudaStream_t st);
extern void gi_cu_slabdir_free(gi_cu_slabdir *d);

/* slabs of list l and where they start in the directory (after an update) */
static inline uint32_t
gi_cu_slabdir_count(const gi_cu_slabdir *d, uint32_t l)
{
	const uint32_t *off = (const uint32_t *) d->h_off.p;

	return off[l + 1] - off[l];
}

static inline uint32_t
gi_cu_slabdir_begin(const gi_cu_slabdir *d, uint32_t l)
{
	return ((const uint32_t *) d->h_off.p)[l];
}

#endif							/* GI_CUDA_SLABDIR_H */
