/*
 * cuda_sparse_doc.cu
 *		Document-parallel scoring of the sparse kind: the postings of the
 *		union of a sub-batch's query terms, regrouped by document (key
 *		ordinal), then each document scored for 32 queries at once with no
 *		atomics.
 *
 * Forward index of one range of ordinals: a counting sort of the union
 * lists' postings by ordinal (count per ordinal with integer atomics, an
 * exclusive scan, a fill at per-ordinal cursors) into (union term,
 * weight) entries; when it would exceed its budget, the range is cut
 * into sub-ranges at entry boundaries and filled one sub-range at a time.
 * Scoring: a warp takes 32 consecutive documents and one group of 32
 * queries, a lane per query.  The warp reads a document's entries 32 at a
 * time (one coalesced load) and broadcasts them by shuffle; each entry
 * costs one broadcast load of the union term's presence mask and, for the
 * lanes whose query has the term, a coalesced load of the weights and a
 * fused multiply-add in double (exact product, so it equals the host's
 * sum).  The 32 x 32 scores go through shared memory so that each query's
 * row is written with coalesced stores; documents no query of the group
 * touched are written as -0.0.  Work grows with the union's postings
 * times the query groups, not with the queries' list lengths: the better
 * kernel when a batch's queries share their terms.
 */
#include <cub/device/device_scan.cuh>

#include "cuda_sparse_chunk.cuh"

/*
 * Walk the union lists' chunks; for each live posting with an ordinal in
 * [lo + r0, lo + r1): count it (fill == false) or write it at its
 * ordinal's cursor (fill == true).
 */
template <bool FILL>
__global__ void __launch_bounds__(256)
gi_k_sp_fwd(const gi_sp_unit *__restrict__ units, const uint32_t *__restrict__ prefix,
			uint32_t nu, uint32_t nchunks, const uint32_t *__restrict__ dir,
			const gi_dslab *slabs, uint32_t W, uint32_t lo, uint32_t r0, uint32_t r1,
			uint32_t *cnt, const uint32_t *__restrict__ off, uint2 *fwd)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
	uint32_t	c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	for (; c < nchunks; c += nwarps)
	{
		uint32_t	u = gi_sp_find_unit(prefix, nu, c);
		gi_sp_unit	un = units[u];
		uint32_t	first = (c - __ldg(&prefix[u])) * GI_SP_CHUNK;
		uint32_t	m = un.n - first < GI_SP_CHUNK ? un.n - first : GI_SP_CHUNK;
		uint32_t	wv[GI_SP_CHUNK];
		uint32_t	kv[GI_SP_CHUNK];
		int			j;

		gi_sp_load_chunk<FILL>(dir, un.beg + first, m, slabs, W, lo, lane, kv, wv);
#pragma unroll
		for (j = 0; j < GI_SP_CHUNK; j++)
		{
			uint32_t	r = kv[j];

			if (r >= r0 && r < r1)
			{
				if (FILL)
				{
					uint32_t	pos = off[r] - off[r0] + atomicAdd(&cnt[r], 1u);

					fwd[pos] = make_uint2(un.q, wv[j]);
				}
				else
					atomicAdd(&cnt[r], 1u);
			}
		}
	}
}

#define GI_SP_DOC_WARPS 4

/*
 * Scores of documents [r0, r1) of the range for query group blockIdx.y:
 * a warp per 32 documents, a lane per query.
 */
__global__ void __launch_bounds__(GI_SP_DOC_WARPS * 32)
gi_k_sp_doc(const uint32_t *__restrict__ off, const uint2 *__restrict__ fwd, uint32_t r0,
			uint32_t r1, const float *__restrict__ qw, const uint32_t *__restrict__ pm,
			uint32_t npad, uint32_t groups, uint32_t nsub, uint32_t span, double *acc)
{
	__shared__ double tile[GI_SP_DOC_WARPS][32][33];
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t w = threadIdx.x >> 5;
	const uint32_t g = blockIdx.y;
	const uint32_t base = off[r0];
	const uint32_t ntiles = (r1 - r0 + 31) / 32;
	uint32_t	t = blockIdx.x * GI_SP_DOC_WARPS + w;
	const float *gqw = qw + (size_t) g * 32 + lane;

	for (; t < ntiles; t += gridDim.x * GI_SP_DOC_WARPS)
	{
		uint32_t	d0 = r0 + t * 32;
		uint32_t	nd = r1 - d0 < 32 ? r1 - d0 : 32;
		uint32_t	d;
		uint32_t	q;

		for (d = 0; d < nd; d++)
		{
			uint32_t	e = off[d0 + d] - base;
			uint32_t	end = off[d0 + d + 1] - base;
			double		sum = 0.0;
			bool		touched = false;

			for (; e < end; e += 32)
			{
				uint32_t	n = end - e < 32 ? end - e : 32;
				uint2		mine = e + lane < end ? fwd[e + lane] : make_uint2(0, 0);
				uint32_t	j;

#pragma unroll 4
				for (j = 0; j < n; j++)
				{
					uint32_t	u = __shfl_sync(GI_CU_FULL_MASK, mine.x, j);
					float		wd = __uint_as_float(__shfl_sync(GI_CU_FULL_MASK, mine.y, j));
					uint32_t	mask = __ldg(&pm[(size_t) u * groups + g]);

					if ((mask >> lane) & 1u)
					{
						float		wq = __ldg(&gqw[(size_t) u * npad]);

						sum = fma((double) wq, (double) wd, sum);
						touched = true;
					}
				}
			}
			tile[w][d][lane] = touched ? sum : __longlong_as_double((long long) GI_SP_UNTOUCHED);
		}
		__syncwarp();
		/* row q of the group: 32 documents, one coalesced store */
		for (q = 0; q < 32 && g * 32 + q < nsub; q++)
			if (lane < nd)
				acc[(size_t) (g * 32 + q) * span + d0 + lane] = tile[w][lane][q];
		__syncwarp();
	}
}

gi_status
gi_cu_sp_doc_score(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
				   const uint32_t *prefix, uint32_t nu, uint32_t nchunks, const float *qw,
				   const uint32_t *pm, uint32_t npad, uint32_t nsub, uint32_t lo,
				   uint32_t rlen, uint32_t span, size_t fwd_bytes, double *acc)
{
	const uint32_t *dir = (const uint32_t *) sp->dir.d_dir.p;
	uint32_t	groups = npad / 32;
	uint32_t	most = (uint32_t) s->dev->sms * 16;
	uint32_t	blocks = gi_cu_div_up(nchunks, 8);
	uint32_t   *cnt;
	uint32_t   *off;
	uint32_t	total = 0;
	uint64_t	cap_entries = fwd_bytes / sizeof(uint2);
	size_t		tmp = 0;
	uint32_t	r0;
	gi_status	st;

	if (blocks > most)
		blocks = most;
	if (blocks == 0)
		blocks = 1;
	st = gi_cu_buf_reserve(&sp->s_fcnt, ((size_t) rlen + 1) * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_foff, ((size_t) rlen + 1) * sizeof(uint32_t));
	if (st != GI_OK)
		return st;
	cnt = (uint32_t *) sp->s_fcnt.p;
	off = (uint32_t *) sp->s_foff.p;
	GI_CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, tmp, cnt, off, (int) (rlen + 1), s->ss));
	st = gi_cu_buf_reserve(&sp->s_tmp, tmp);
	if (st != GI_OK)
		return st;

	/* entries per ordinal, their offsets, and how many in all */
	GI_CU_TRY(cudaMemsetAsync(cnt, 0, ((size_t) rlen + 1) * sizeof(uint32_t), s->ss));
	if (nchunks > 0)
		gi_k_sp_fwd<false><<<blocks, 256, 0, s->ss>>>(units, prefix, nu, nchunks, dir,
													  s->d_slabs, s->words, lo, 0, rlen,
													  cnt, NULL, NULL);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cub::DeviceScan::ExclusiveSum(sp->s_tmp.p, tmp, cnt, off, (int) (rlen + 1),
											s->ss));
	GI_CU_TRY(cudaMemcpyAsync(&total, off + rlen, sizeof(uint32_t), cudaMemcpyDeviceToHost,
							  s->ss));
	GI_CU_TRY(cudaStreamSynchronize(s->ss));

	/* sub-ranges of at most cap_entries entries (a larger document alone) */
	if (total > cap_entries)
	{
		if (!gi_cu_hbuf_reserve(&sp->h_foff, ((size_t) rlen + 1) * sizeof(uint32_t)))
		{
			gi_cu_set_error("sparse search: out of memory for %u document offsets", rlen);
			return GI_ERR_NOMEM;
		}
		GI_CU_TRY(cudaMemcpyAsync(sp->h_foff.p, off, ((size_t) rlen + 1) * sizeof(uint32_t),
								  cudaMemcpyDeviceToHost, s->ss));
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
	}
	for (r0 = 0; r0 < rlen;)
	{
		uint32_t	r1 = rlen;
		uint64_t	entries = total;
		dim3		grid;

		if (total > cap_entries)
		{
			const uint32_t *h = (const uint32_t *) sp->h_foff.p;
			uint32_t	a = r0 + 1;
			uint32_t	b = rlen;

			/* the last r1 > r0 with h[r1] - h[r0] <= cap (at least r0 + 1) */
			while (a < b)
			{
				uint32_t	mid = a + (b - a + 1) / 2;

				if ((uint64_t) h[mid] - h[r0] <= cap_entries)
					a = mid;
				else
					b = mid - 1;
			}
			r1 = a;
			entries = (uint64_t) h[r1] - h[r0];
		}
		st = gi_cu_buf_reserve(&sp->s_fwd, (size_t) (entries + 1) * sizeof(uint2));
		if (st != GI_OK)
			return st;
		GI_CU_TRY(cudaMemsetAsync(cnt, 0, ((size_t) rlen + 1) * sizeof(uint32_t), s->ss));
		if (nchunks > 0 && entries > 0)
			gi_k_sp_fwd<true><<<blocks, 256, 0, s->ss>>>(units, prefix, nu, nchunks, dir,
														 s->d_slabs, s->words, lo, r0, r1,
														 cnt, off, (uint2 *) sp->s_fwd.p);
		GI_CU_TRY(cudaGetLastError());
		grid.x = gi_cu_div_up(gi_cu_div_up(r1 - r0, 32), GI_SP_DOC_WARPS);
		if (grid.x > most)
			grid.x = most;
		grid.y = groups;
		grid.z = 1;
		gi_k_sp_doc<<<grid, GI_SP_DOC_WARPS * 32, 0, s->ss>>>(
			off, (const uint2 *) sp->s_fwd.p, r0, r1, qw, pm, npad, groups, nsub, span, acc);
		GI_CU_TRY(cudaGetLastError());
		r0 = r1;
	}
	return GI_OK;
}
