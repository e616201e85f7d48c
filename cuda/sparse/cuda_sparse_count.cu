/*
 * cuda_sparse_count.cu
 *		The counting path of the sparse kind (GI_SPARSE_COUNT): when every
 *		record of the query terms' lists weighs 1 and the query weights are
 *		whole numbers, a document's score is a count.  It is kept in a
 *		counter of 8 or 16 bits packed into 32-bit words (GENIE's bitmap
 *		counter) instead of a double; a histogram of the counters (GENIE's
 *		ZipperArray: how many documents reached each count) gives the
 *		lowest count that can still be among the k best (its
 *		AuditThreshold), and one pass keeps the documents at or above it
 *		as the candidates of the exact selection (cuda_sparse_topk.cu).
 *		cuda/README.md, "The counting path", says why there is no hash
 *		table of candidates.
 */
#include "cuda_sparse_cand.cuh"
#include "cuda_sparse_chunk.cuh"

/* words of counters a compaction thread takes */
#define GI_SP_CNT_WPT 4

/* term-parallel increments: each live slot of a chunk adds its query weight */
template <int BITS>
__global__ void __launch_bounds__(256)
gi_k_cnt_scatter(const gi_sp_unit *__restrict__ units, const uint32_t *__restrict__ prefix,
				 uint32_t nu, uint32_t nchunks, const gi_sp_qw *__restrict__ pairs,
				 const uint32_t *__restrict__ dir, const gi_dslab *slabs, uint32_t W,
				 uint32_t H, size_t wpq, uint32_t *ctr)
{
	const uint32_t per = 32 / BITS;
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;

	for (uint32_t c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nchunks; c += nwarps)
	{
		uint32_t	u = gi_sp_find_unit(prefix, nu, c);
		gi_sp_unit	un = units[u];
		uint32_t	first = (c - __ldg(&prefix[u])) * GI_SP_CHUNK;
		uint32_t	m = un.n - first < GI_SP_CHUNK ? un.n - first : GI_SP_CHUNK;
		uint32_t	kv[GI_SP_CHUNK];
		uint32_t	wv[GI_SP_CHUNK];

		gi_sp_load_chunk<false>(dir, un.beg + first, m, slabs, W, 0, lane, kv, wv);
		for (uint32_t p = 0; p < un.nq; p++)
		{
			gi_sp_qw	pr = pairs[un.q + p];
			uint32_t   *row = ctr + (size_t) pr.q * wpq;
			uint32_t	w = (uint32_t) pr.w;

#pragma unroll
			for (int j = 0; j < GI_SP_CHUNK; j++)
				if (kv[j] < H)
					atomicAdd(&row[kv[j] / per], w << ((kv[j] % per) * BITS));
		}
	}
}

/* the ZipperArray: hist[q * nb + c] = documents of query q with count c (c >= 1) */
template <int BITS>
__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_cnt_hist(const uint32_t *__restrict__ ctr, size_t wpq, uint32_t nwords, uint32_t nb,
			  uint32_t *hist)
{
	extern __shared__ uint32_t sh[];
	const uint32_t per = 32 / BITS;
	const uint32_t mask = BITS == 32 ? 0xffffffffu : (1u << BITS) - 1;
	const uint32_t q = blockIdx.y;
	const uint32_t *row = ctr + (size_t) q * wpq;

	for (uint32_t b = threadIdx.x; b < nb; b += blockDim.x)
		sh[b] = 0;
	__syncthreads();
	for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < nwords;
		 w += gridDim.x * blockDim.x)
	{
		uint32_t	v = __ldcg(&row[w]);

		if (v == 0)
			continue;
		for (uint32_t i = 0; i < per; i++)
		{
			uint32_t	c = (v >> (i * BITS)) & mask;

			if (c)
				atomicAdd(&sh[c < nb ? c : nb - 1], 1u);
		}
	}
	__syncthreads();
	for (uint32_t b = threadIdx.x; b < nb; b += blockDim.x)
		if (sh[b])
			atomicAdd(&hist[(size_t) q * nb + b], sh[b]);
}

/*
 * The AuditThreshold of each query: the largest count c that at least k
 * documents reach (1 when fewer than k are touched), and whether the
 * documents at or above it overflow the candidates' room.
 */
__global__ void
gi_k_cnt_thresh(const uint32_t *__restrict__ hist, uint32_t nb, uint32_t nsub, uint32_t k,
				uint32_t cap, uint32_t *thr, uint32_t *over)
{
	uint32_t	q = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t	acc = 0;
	uint32_t	t = 1;

	if (q >= nsub)
		return;
	for (uint32_t c = nb - 1; c >= 1; c--)
	{
		acc += hist[(size_t) q * nb + c];
		if (acc >= k)
		{
			t = c;
			break;
		}
	}
	thr[q] = t;
	over[q] = acc > cap;
}

/* the documents at or above the threshold as candidates (ordered distance, key) */
template <int BITS>
__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_cnt_compact(const uint32_t *__restrict__ ctr, size_t wpq, uint32_t nwords, uint32_t H,
				 const uint32_t *__restrict__ thr, const uint32_t *__restrict__ over,
				 const uint64_t *__restrict__ kid_key, uint32_t cap, uint32_t *cd,
				 uint64_t *ck, uint32_t *cnt)
{
	__shared__ gi_sp_scan::TempStorage ts;
	__shared__ uint32_t sbase;
	const uint32_t per = 32 / BITS;
	const uint32_t mask = BITS == 32 ? 0xffffffffu : (1u << BITS) - 1;
	const uint32_t q = blockIdx.y;
	const uint32_t *row = ctr + (size_t) q * wpq;
	const uint32_t w0 = blockIdx.x * GI_SP_BLOCK * GI_SP_CNT_WPT + threadIdx.x;
	uint32_t	t;
	uint32_t	v[GI_SP_CNT_WPT];
	uint32_t	mine = 0;
	uint32_t	pos;

	if (over[q])
		return;					/* the whole block: q is the block's */
	t = thr[q];
#pragma unroll
	for (int i = 0; i < GI_SP_CNT_WPT; i++)
	{
		uint32_t	w = w0 + i * GI_SP_BLOCK;

		v[i] = w < nwords ? __ldcg(&row[w]) : 0;
		for (uint32_t j = 0; j < per; j++)
			mine += ((v[i] >> (j * BITS)) & mask) >= t;
	}
	pos = gi_sp_block_reserve(mine, &cnt[q], ts, sbase);
	if (mine == 0)
		return;
#pragma unroll
	for (int i = 0; i < GI_SP_CNT_WPT; i++)
		for (uint32_t j = 0; j < per; j++)
		{
			uint32_t	c = (v[i] >> (j * BITS)) & mask;
			uint32_t	d = (w0 + i * GI_SP_BLOCK) * per + j;

			if (c >= t && d < H)
			{
				cd[(size_t) q * cap + pos] = gi_sp_dist_ord((double) c);
				ck[(size_t) q * cap + pos] = kid_key[d];
				pos++;
			}
		}
}

template <int BITS>
static gi_status
gi_sp_count_launch(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
				   const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
				   const gi_sp_qw *pairs, uint32_t nsub, uint32_t H, size_t wpq,
				   uint32_t nb, uint32_t k, uint32_t cap, uint32_t *ctr, uint32_t *hist,
				   uint32_t *thr, uint32_t *over, uint32_t *cd, uint64_t *ck, uint32_t *cnt)
{
	uint32_t	nwords = (uint32_t) ((H + 32 / BITS - 1) / (32 / BITS));
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	uint32_t	blocks;
	dim3		hgrid(gi_cu_div_up(nwords, GI_SP_BLOCK * 16), nsub, 1);
	dim3		cgrid(gi_cu_div_up(nwords, GI_SP_BLOCK * GI_SP_CNT_WPT), nsub, 1);

	GI_CU_TRY(cudaMemsetAsync(ctr, 0, (size_t) nsub * wpq * sizeof(uint32_t), s->ss));
	GI_CU_TRY(cudaMemsetAsync(hist, 0, (size_t) nsub * nb * sizeof(uint32_t), s->ss));
	GI_CU_TRY(cudaMemsetAsync(cnt, 0, (size_t) nsub * sizeof(uint32_t), s->ss));
	if (nchunks > 0)
	{
		blocks = gi_cu_div_up(nchunks, 8);
		gi_k_cnt_scatter<BITS><<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
			units, prefix, nu, nchunks, pairs, (const uint32_t *) sp->dir.d_dir.p,
			s->d_slabs, s->words, H, wpq, ctr);
		GI_CU_TRY(cudaGetLastError());
	}
	if (hgrid.x > 64)
		hgrid.x = 64;
	gi_k_cnt_hist<BITS><<<hgrid, GI_SP_BLOCK, nb * sizeof(uint32_t), s->ss>>>(ctr, wpq, nwords,
																			  nb, hist);
	gi_k_cnt_thresh<<<gi_cu_div_up(nsub, 128), 128, 0, s->ss>>>(hist, nb, nsub, k, cap, thr,
																 over);
	gi_k_cnt_compact<BITS><<<cgrid, GI_SP_BLOCK, 0, s->ss>>>(ctr, wpq, nwords, H, thr, over,
															 s->d_kid_key, cap, cd, ck, cnt);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

gi_status
gi_cu_sp_count(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units, const uint32_t *prefix,
			   uint32_t nu, uint32_t nchunks, const gi_sp_qw *pairs, uint32_t nsub,
			   uint32_t H, uint32_t maxc, uint32_t k, uint32_t cap, uint32_t *cd,
			   uint64_t *ck, uint32_t *cnt, uint32_t **over_out)
{
	uint32_t   *over;
	uint32_t	bits = gi_sp_count_bits(maxc);
	size_t		wpq = gi_sp_count_words(H, maxc);
	uint32_t	nb = maxc + 1;
	uint32_t   *thr;
	gi_status	st;

	st = gi_cu_buf_reserve(&sp->s_acc, (size_t) nsub * wpq * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_hist, (size_t) nsub * nb * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_thr, 2 * (size_t) nsub * sizeof(uint32_t));
	if (st != GI_OK)
		return st;
	thr = (uint32_t *) sp->s_thr.p;
	over = thr + nsub;
	*over_out = over;
	if (bits == 8)
		return gi_sp_count_launch<8>(s, sp, units, prefix, nu, nchunks, pairs, nsub, H, wpq,
									 nb, k, cap, (uint32_t *) sp->s_acc.p,
									 (uint32_t *) sp->s_hist.p, thr, over, cd, ck, cnt);
	return gi_sp_count_launch<16>(s, sp, units, prefix, nu, nchunks, pairs, nsub, H, wpq, nb,
								  k, cap, (uint32_t *) sp->s_acc.p, (uint32_t *) sp->s_hist.p,
								  thr, over, cd, ck, cnt);
}
