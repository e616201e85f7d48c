/*
 * cuda_slabdir.cu
 *		Build of the per-list slab directory (cuda_slabdir.h): a counting
 *		sort of the pool's slabs by the list their device header names.
 *
 * Two passes over the headers of the slabs in use (count per list, then
 * place each slab at its list's cursor) around an exclusive scan, and one
 * download of the list offsets.  Unlinked slabs (free, pending, never
 * used) are counted in an extra bucket and left out.
 */
#include <cstdlib>

#include <cub/device/device_scan.cuh>

#include "cuda_slabdir.h"
#include "cuda_util.cuh"

/* the bucket of slab i: its list, or nlists when it is in no list */
__device__ __forceinline__ uint32_t
gi_dir_bucket(const gi_dslab *slabs, uint32_t i, uint32_t nlists, uint32_t *flags)
{
	uint32_t	l = slabs[i].list;

	if (l < nlists)
		return l;
	if (l != GI_NIL)
		atomicOr(flags, GI_CU_FLAG_DIR);
	return nlists;
}

__global__ void
gi_k_dir_count(const gi_dslab *slabs, uint32_t n, uint32_t nlists, uint32_t *cnt,
			   uint32_t *flags)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		atomicAdd(&cnt[gi_dir_bucket(slabs, i, nlists, flags)], 1u);
}

__global__ void
gi_k_dir_fill(const gi_dslab *slabs, uint32_t n, uint32_t nlists, const uint32_t *off,
			  uint32_t *cur, uint32_t *dir, uint32_t *flags)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t	l;

	if (i >= n)
		return;
	l = gi_dir_bucket(slabs, i, nlists, flags);
	if (l < nlists)
		dir[off[l] + atomicAdd(&cur[l], 1u)] = i;
}

gi_status
gi_cu_slabdir_update(gi_store *s, gi_cu_slabdir *d, cudaStream_t st)
{
	uint32_t	L = s->params.nlists;
	uint32_t	n = s->slab_hwm;
	size_t		tmp = 0;
	gi_status	rc;

	if (d->valid && d->gen == s->gen && d->nlists == L)
		return GI_OK;
	d->valid = false;
	rc = gi_cu_buf_reserve(&d->d_off, ((size_t) L + 1) * sizeof(uint32_t));
	if (rc == GI_OK)
		rc = gi_cu_buf_reserve(&d->d_cnt, ((size_t) L + 1) * sizeof(uint32_t));
	if (rc == GI_OK)
		rc = gi_cu_buf_reserve(&d->d_dir, ((size_t) n + 1) * sizeof(uint32_t));
	if (rc != GI_OK)
		return rc;
	if (!gi_cu_hbuf_reserve(&d->h_off, ((size_t) L + 1) * sizeof(uint32_t)))
	{
		gi_cu_set_error("sparse search: out of memory for the offsets of %u lists", L);
		return GI_ERR_NOMEM;
	}
	GI_CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, tmp, (const uint32_t *) d->d_cnt.p,
											(uint32_t *) d->d_off.p, (int) (L + 1), st));
	rc = gi_cu_buf_reserve(&d->d_tmp, tmp);
	if (rc != GI_OK)
		return rc;

	GI_CU_TRY(cudaMemsetAsync(d->d_cnt.p, 0, ((size_t) L + 1) * sizeof(uint32_t), st));
	if (n > 0)
		gi_k_dir_count<<<gi_cu_div_up(n, 256), 256, 0, st>>>(s->d_slabs, n, L,
															 (uint32_t *) d->d_cnt.p,
															 s->d_flags + 1);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cub::DeviceScan::ExclusiveSum(d->d_tmp.p, tmp, (const uint32_t *) d->d_cnt.p,
											(uint32_t *) d->d_off.p, (int) (L + 1), st));
	GI_CU_TRY(cudaMemsetAsync(d->d_cnt.p, 0, ((size_t) L + 1) * sizeof(uint32_t), st));
	if (n > 0)
		gi_k_dir_fill<<<gi_cu_div_up(n, 256), 256, 0, st>>>(s->d_slabs, n, L,
															(const uint32_t *) d->d_off.p,
															(uint32_t *) d->d_cnt.p,
															(uint32_t *) d->d_dir.p,
															s->d_flags + 1);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cudaMemcpyAsync(d->h_off.p, d->d_off.p, ((size_t) L + 1) * sizeof(uint32_t),
							  cudaMemcpyDeviceToHost, st));
	GI_CU_TRY(cudaStreamSynchronize(st));
	d->nslabs = ((const uint32_t *) d->h_off.p)[L];
	d->maxcount = 0;
	for (uint32_t l = 0; l < L; l++)
		if (gi_cu_slabdir_count(d, l) > d->maxcount)
			d->maxcount = gi_cu_slabdir_count(d, l);
	d->nlists = L;
	d->gen = s->gen;
	d->valid = true;
	return GI_OK;
}

void
gi_cu_slabdir_free(gi_cu_slabdir *d)
{
	gi_cu_buf_free(&d->d_dir);
	gi_cu_buf_free(&d->d_off);
	gi_cu_buf_free(&d->d_cnt);
	gi_cu_buf_free(&d->d_tmp);
	free(d->h_off.p);
	d->h_off.p = NULL;
	d->h_off.cap = 0;
	d->valid = false;
}
