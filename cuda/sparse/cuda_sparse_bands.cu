/*
 * cuda_sparse_bands.cu
 *		The counting path's bands (cuda_sparse.h): each list's slabs sorted
 *		by their smallest live key ordinal, so that a block counting one
 *		range of ordinals finds the slabs that may hold one by binary search.
 *
 * Slabs are filled as rows arrive, so in a store loaded in order a slab
 * holds ordinals close together and a list's slabs follow the ordinals;
 * deletes and reuse widen them, which b_reads measures (the counting path
 * then keeps its plain scatter).
 */
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda_sparse.h"
#include "cuda_util.cuh"
#include "cuda_walk.cuh"

/* a warp per directory entry: its slab's smallest live ordinal, the list's widest slab */
__global__ void
gi_k_band_minmax(const uint32_t *__restrict__ dir, uint32_t n, const gi_dslab *slabs,
				 uint32_t W, uint32_t *key, uint32_t *lspan)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;

	for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += nwarps)
	{
		uint32_t	slab = __ldg(&dir[i]);
		uint32_t	bm = gi_slab_bitmap(slabs, slab);
		uint32_t	lo = UINT32_MAX;
		uint32_t	hi = 0;

		if (gi_slot_live(bm, lane))
		{
			lo = hi = __ldcg(gi_slab_kids(gi_slab_data(slabs, slab), W) + lane);
		}
		lo = __reduce_min_sync(GI_CU_FULL_MASK, lo);
		hi = __reduce_max_sync(GI_CU_FULL_MASK, hi);
		if (lane == 0)
		{
			key[i] = lo;
			if (bm != 0)
				atomicMax(&lspan[slabs[slab].list], hi - lo);
		}
	}
}

/* every sorted entry gets its list's widest slab */
__global__ void
gi_k_band_span(const uint32_t *__restrict__ bdir, uint32_t n, const gi_dslab *slabs,
			   const uint32_t *__restrict__ lspan, uint32_t *span)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		span[i] = lspan[slabs[bdir[i]].list];
}

gi_status
gi_cu_sp_bands_update(gi_store *s, gi_cu_sparse *sp)
{
	const gi_cu_slabdir *d = &sp->dir;
	uint32_t	L = d->nlists;
	uint32_t	n = d->nslabs;
	const uint32_t *off = (const uint32_t *) d->h_off.p;
	size_t		tmp = 0;
	size_t		head;
	uint32_t   *keys;
	uint32_t   *lspan;
	uint32_t   *hspan;
	double		reads[2] = {0, 0};
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	gi_status	rc;

	if (sp->b_valid && sp->b_gen == d->gen)
		return GI_OK;
	sp->b_valid = false;
	rc = gi_cu_buf_reserve(&sp->b_dir, ((size_t) n + 1) * sizeof(uint32_t));
	if (rc == GI_OK)
		rc = gi_cu_buf_reserve(&sp->b_min, ((size_t) n + 1) * sizeof(uint32_t));
	if (rc == GI_OK)
		rc = gi_cu_buf_reserve(&sp->b_span, ((size_t) n + 1) * sizeof(uint32_t));
	if (rc != GI_OK)
		return rc;
	if (!gi_cu_hbuf_reserve(&sp->h_span, ((size_t) L + 1) * sizeof(uint32_t)))
	{
		gi_cu_set_error("sparse search: out of memory for the widths of %u lists", L);
		return GI_ERR_NOMEM;
	}
	GI_CU_TRY(cub::DeviceSegmentedRadixSort::SortPairs(
		NULL, tmp, (const uint32_t *) NULL, (uint32_t *) NULL, (const uint32_t *) NULL,
		(uint32_t *) NULL, (int) n, (int) L, (const uint32_t *) d->d_off.p,
		(const uint32_t *) d->d_off.p + 1, 0, 32, s->ss));
	head = gi_cu_div_up(((size_t) n + L + 2) * sizeof(uint32_t), 256) * 256;
	rc = gi_cu_buf_reserve(&sp->b_tmp, head + tmp);
	if (rc != GI_OK)
		return rc;
	keys = (uint32_t *) sp->b_tmp.p;
	lspan = keys + n + 1;
	GI_CU_TRY(cudaMemsetAsync(lspan, 0, ((size_t) L + 1) * sizeof(uint32_t), s->ss));
	if (n > 0)
	{
		uint32_t	blocks = gi_cu_div_up(n, 8);

		gi_k_band_minmax<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
			(const uint32_t *) d->d_dir.p, n, s->d_slabs, s->words, keys, lspan);
		GI_CU_TRY(cudaGetLastError());
		GI_CU_TRY(cub::DeviceSegmentedRadixSort::SortPairs(
			(char *) sp->b_tmp.p + head,
			tmp, keys, (uint32_t *) sp->b_min.p, (const uint32_t *) d->d_dir.p,
			(uint32_t *) sp->b_dir.p, (int) n, (int) L, (const uint32_t *) d->d_off.p,
			(const uint32_t *) d->d_off.p + 1, 0, 32, s->ss));
		gi_k_band_span<<<gi_cu_div_up(n, 256), 256, 0, s->ss>>>(
			(const uint32_t *) sp->b_dir.p, n, s->d_slabs, lspan, (uint32_t *) sp->b_span.p);
		GI_CU_TRY(cudaGetLastError());
	}
	hspan = (uint32_t *) sp->h_span.p;
	GI_CU_TRY(cudaMemcpyAsync(hspan, lspan, (size_t) L * sizeof(uint32_t),
							  cudaMemcpyDeviceToHost, s->ss));
	GI_CU_TRY(cudaStreamSynchronize(s->ss));

	/* a slab is read by the bands from its smallest ordinal to that plus the widest */
	for (uint32_t l = 0; l < L; l++)
	{
		uint32_t	m = off[l + 1] - off[l];

		if (m == 0)
			continue;
		for (int b = 0; b < 2; b++)
			reads[b] += m * (1.0 + (double) hspan[l] / gi_sp_band_ords(8u << b));
	}
	for (int b = 0; b < 2; b++)
		sp->b_reads[b] = n > 0 ? reads[b] / n : 1.0;
	sp->b_gen = d->gen;
	sp->b_valid = true;
	return GI_OK;
}

void
gi_cu_sp_bands_free(gi_cu_sparse *sp)
{
	gi_cu_buf_free(&sp->b_dir);
	gi_cu_buf_free(&sp->b_min);
	gi_cu_buf_free(&sp->b_span);
	gi_cu_buf_free(&sp->b_tmp);
	free(sp->h_span.p);
	sp->h_span.p = NULL;
	sp->h_span.cap = 0;
	sp->b_valid = false;
}
