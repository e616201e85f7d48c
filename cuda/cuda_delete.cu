/*
 * cuda_delete.cu
 *		Batched delete: key -> rows on the host, ATT look-up and atomic bit
 *		clear on the device.
 *
 * Each key is looked up in the host-side key map (O(1)); its own rows
 * (row_next chain) are removed from the mirror and their row ids sent to
 * the device, where one thread per row reads the device ATT entry, clears
 * the validity bit with atomicAnd, decrements the slab's count and marks
 * the ATT entry and the slot free.  Unknown and repeated keys are ignored,
 * so delete is idempotent.  A slab whose count drops to zero is unlinked
 * (prev/next patches, list head) and returned to the free stack in the
 * same call, exactly as the host store does, so a sliding window runs in a
 * pool of constant size.
 *
 * The unlinked slab keeps its own next link on the device: a search that
 * is standing on it when it is unlinked still finds the rest of the list.
 * When searches may overlap mutations (concurrent mode, used by the stress
 * test), deleted slots and emptied slabs are additionally held back from
 * reuse until gi_cu_quiesce(), so a reader never sees a slot rewritten
 * under it; in the service every call is synchronous, so nothing is held.
 */
#include <cstdlib>
#include <cstring>

#include "cuda_store.h"
#include "cuda_util.cuh"

__global__ void
gi_k_delete(const uint32_t *__restrict__ rows, uint32_t n, uint32_t W,
			gi_dslab *slabs, uint64_t *att, uint32_t *flags)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t	row;
	uint64_t	a;
	uint32_t	slab;
	uint32_t	slot;
	uint32_t   *slot_rows;

	if (i >= n)
		return;
	row = rows[i];
	a = att[row];
	if (a == GI_CU_ATT_NONE)
	{
		/* the mirror and the device disagree: never guess, report */
		atomicOr(flags, GI_CU_FLAG_ATT);
		return;
	}
	slab = (uint32_t) (a >> 32);
	slot = (uint32_t) (a & 0xFFFFFFFFu);
	atomicAnd(&slabs[slab].bitmap, ~(1u << slot));
	atomicSub(&slabs[slab].count, 1u);
	slot_rows = (uint32_t *) ((uint64_t *) (slabs[slab].data + (size_t) GI_SLAB_RECORDS * W)
							  + GI_SLAB_RECORDS);
	slot_rows[slot] = GI_NIL;
	att[row] = GI_CU_ATT_NONE;
}

/* unlink an emptied slab from its list in the mirror */
static void
gi_cu_release_slab(gi_store *s, uint32_t slab)
{
	gi_mslab   *h = &s->slabs[slab];
	uint32_t	list = h->list;

	if (h->prev != GI_NIL)
	{
		s->slabs[h->prev].next = h->next;
		gi_cu_mark_slab(s, h->prev);
	}
	else
	{
		s->list_head[list] = h->next;
		gi_cu_mark_list(s, list);
	}
	if (h->next != GI_NIL)
	{
		s->slabs[h->next].prev = h->prev;
		gi_cu_mark_slab(s, h->next);
	}
	/* next stays: a reader standing here still reaches the rest */
	h->list = GI_NIL;
	h->prev = GI_NIL;
	gi_cu_mark_slab(s, slab);
	s->slabs_used--;
	if (s->concurrent)
		s->pending[s->npending++] = slab;
	else
		s->free_slabs[s->nfree++] = slab;
}

static void
gi_cu_remove_row(gi_store *s, uint32_t row)
{
	uint64_t	a = s->att[row];
	uint32_t	slab = (uint32_t) (a >> 32);
	uint32_t	slot = (uint32_t) (a & 0xFFFFFFFFu);
	gi_mslab   *h = &s->slabs[slab];

	h->bitmap &= ~(1u << slot);
	h->count--;
	s->list_rows[h->list]--;
	gi_cu_mark_list(s, h->list);
	if (s->concurrent)
	{
		if (h->held == 0)
			s->held_slabs[s->nheld++] = slab;
		h->held |= 1u << slot;
	}
	s->att[row] = GI_CU_ATT_NONE;
	s->row_next[row] = GI_NIL;
	s->free_rows[s->nfree_rows++] = row;
	((uint32_t *) s->h_rows.p)[s->nrows_del++] = row;
	s->rows--;
	s->deletes++;
	if (h->count == 0)
		gi_cu_release_slab(s, slab);
}

gi_status
gi_cu_store_delete(gi_store *s, uint32_t n, const uint64_t *keys,
				   uint64_t *ndeleted)
{
	uint64_t	done = 0;
	uint32_t	nfirst;
	uint32_t	flags = 0;
	gi_status	st;
	uint32_t	i;

	if (ndeleted)
		*ndeleted = 0;
	if (s == NULL)
	{
		gi_cu_set_error("store_delete: no store");
		return GI_ERR_INVALID;
	}
	if (n == 0)
		return GI_OK;
	if (keys == NULL)
	{
		gi_cu_set_error("store_delete: keys must not be NULL");
		return GI_ERR_INVALID;
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

	s->nrows_del = 0;
	for (i = 0; i < n; i++)
	{
		uint64_t	mi;

		if (i + 8 < n)
			gi_cu_map_prefetch(s, keys[i + 8]);
		mi = gi_cu_map_find(s, keys[i]);
		uint32_t	row;
		uint32_t	c = 0;

		if (mi == GI_CU_MAP_NONE)
			continue;			/* unknown or already deleted */
		for (row = s->map_rows[mi]; row != GI_NIL; row = s->row_next[row])
			c++;
		/* room for this key's rows before the mirror changes */
		if (!gi_cu_hbuf_reserve(&s->h_rows,
								((size_t) s->nrows_del + c) * sizeof(uint32_t)))
		{
			gi_cu_set_error("out of memory deleting %u keys", n);
			st = GI_ERR_NOMEM;
			break;
		}
		row = s->map_rows[mi];
		while (row != GI_NIL)
		{
			uint32_t	next = s->row_next[row];

			gi_cu_remove_row(s, row);
			done++;
			row = next;
		}
		gi_cu_map_remove(s, mi);
	}

	/*
	 * Apply what the mirror did: bits first, then links, then heads.  Row
	 * ids and patches travel together in one asynchronous copy from a
	 * pinned arena (the insert pipeline's first one, idle between calls).
	 */
	{
		size_t		qoff = (((size_t) s->nrows_del * sizeof(uint32_t)) + 15) & ~(size_t) 15;
		uint64_t	bound = gi_cu_patch_bound(s);
		size_t		bytes = qoff + (bound + 1) * sizeof(gi_cu_patch);
		unsigned char *ha;
		unsigned char *da;
		uint32_t	npatch;
		gi_status	ast;
		cudaError_t err;

		s->dev_ms = 0.0;
		ast = gi_cu_pinned_reserve(&s->p_up[0], bytes);
		if (ast == GI_OK)
			ast = gi_cu_buf_reserve(&s->m_up[0], bytes);
		if (ast != GI_OK)
			return gi_cu_broken(s, GI_ERR_DEVICE);
		ha = (unsigned char *) s->p_up[0].p;
		da = (unsigned char *) s->m_up[0].p;
		memcpy(ha, s->h_rows.p, (size_t) s->nrows_del * sizeof(uint32_t));
		npatch = gi_cu_collect_patches_into(s, (gi_cu_patch *) (ha + qoff), &nfirst);
		if (s->nrows_del > 0 || npatch > 0)
		{
			gi_cu_time_begin(s);
			err = cudaMemcpyAsync(da, ha, qoff + (size_t) npatch * sizeof(gi_cu_patch),
								  cudaMemcpyHostToDevice, s->ms);
			if (err != cudaSuccess)
				return gi_cu_broken(s, gi_cu_status(err, "cudaMemcpyAsync"));
			if (s->nrows_del > 0)
				gi_k_delete<<<gi_cu_div_up(s->nrows_del, 256), 256, 0, s->ms>>>(
					(const uint32_t *) da, s->nrows_del, s->words,
					s->d_slabs, s->d_att, s->d_flags);
			gi_cu_launch_patches(s, (const gi_cu_patch *) (da + qoff), nfirst, npatch);
			err = cudaGetLastError();
			if (err != cudaSuccess)
				return gi_cu_broken(s, gi_cu_status(err, "delete kernel launch"));
			gi_cu_time_end(s);
			ast = gi_cu_read_flags(s, s->ms, 0, &flags);
			if (ast != GI_OK)
				return gi_cu_broken(s, GI_ERR_DEVICE);
			if (flags & GI_CU_FLAG_ATT)
			{
				gi_cu_set_error("CUDA store inconsistent: a deleted row had no device ATT entry");
				return gi_cu_broken(s, GI_ERR_DEVICE);
			}
		}
	}
	if (ndeleted)
		*ndeleted = done;
	return st;
}
