/*
 * cuda_delete.cu
 *		Batched delete: key -> rows on the host, ATT look-up and atomic bit
 *		clear on the device.
 *
 * Each key is looked up in the host-side key map (O(1)); its own rows
 * (row_next chain) are removed from the mirror (gi_cu_plan_delete in
 * cuda_plan.cu) and their row ids sent to the device, where one thread per
 * row reads the device ATT entry, clears the validity bit with atomicAnd,
 * decrements the slab's count and marks the ATT entry free.  Unknown and repeated keys are ignored,
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
gi_k_delete(const uint32_t *__restrict__ rows, uint32_t n,
			gi_dslab *slabs, uint32_t *att, uint32_t *flags)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t	row;
	uint32_t	a;
	uint32_t	slab;

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
	slab = GI_CU_LOC_SLAB(a);
	atomicAnd(&slabs[slab].bitmap, ~(1u << GI_CU_LOC_SLOT(a)));
	atomicSub(&slabs[slab].count, 1u);
	att[row] = GI_CU_ATT_NONE;
}

gi_status
gi_cu_store_delete(gi_store *s, uint32_t n, const uint64_t *keys,
				   uint64_t *ndeleted)
{
	uint64_t	done = 0;
	uint32_t	nfirst;
	uint32_t	flags = 0;
	uint64_t	t0;
	uint64_t	t1;
	gi_status	st;

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
	st = gi_cu_mutation_begin(s);
	if (st != GI_OK)
		return st;
	s->gen++;

	t0 = gi_cu_now_ns();
	st = gi_cu_plan_delete(s, n, keys, &done);
	t1 = gi_cu_now_ns();
	s->prof.del_plan_ns += t1 - t0;

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
					(const uint32_t *) da, s->nrows_del, s->d_slabs, s->d_att, s->d_flags);
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
	s->prof.del_dev_ns += gi_cu_now_ns() - t1;
	if (ndeleted)
		*ndeleted = done;
	return st;
}
