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
 *
 * The counters are counted either by a scatter into global memory (an
 * atomic in the L2 per record) or, tiled, a block per query and band of
 * ordinals in shared memory, which finds the slabs of the band through
 * the lists' bands (cuda_sparse_bands.cu), writes the band's words out
 * and adds the band to the ZipperArray itself.
 */
#include <cub/block/block_scan.cuh>

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

/* threads of a tiled block, and units it plans at once (one a thread) */
#define GI_SP_TILE_THREADS 512

/* the first i in [0, n) with a[i] >= v, else n */
__device__ __forceinline__ uint32_t
gi_sp_lower(const uint32_t *a, uint32_t n, uint32_t v)
{
	uint32_t	lo = 0;

	while (n > 0)
	{
		uint32_t	h = n >> 1;

		if (__ldg(&a[lo + h]) < v)
		{
			lo += h + 1;
			n -= h + 1;
		}
		else
			n = h;
	}
	return lo;
}

/*
 * Block (band b, query q): the counters of the ordinals [b * band, ...)
 * in shared memory.  For each of q's units (query order: pairs[u].q
 * ascending) the slabs whose smallest ordinal lies within the list's
 * widest slab below the band or in it; each warp takes GI_SP_CHUNK such
 * slabs at a time (all their loads in flight at once), a lane a slot, and
 * adds the weight of the slots in the band.
 */
template <int BITS>
__global__ void __launch_bounds__(GI_SP_TILE_THREADS)
gi_k_cnt_tile(const gi_sp_unit *__restrict__ units, const gi_sp_qw *__restrict__ pairs,
			  uint32_t nu, const uint32_t *__restrict__ bdir, const uint32_t *__restrict__ bmin,
			  const uint32_t *__restrict__ bspan, const gi_dslab *slabs, uint32_t W,
			  uint32_t H, uint32_t band, size_t wpq, uint32_t nb, uint32_t *ctr,
			  uint32_t *hist)
{
	typedef cub::BlockScan<uint32_t, GI_SP_TILE_THREADS> scan_t;
	extern __shared__ uint32_t sm[];
	__shared__ typename scan_t::TempStorage ts;
	__shared__ uint32_t s_beg[GI_SP_TILE_THREADS];
	__shared__ uint32_t s_pre[GI_SP_TILE_THREADS];
	__shared__ uint32_t s_w[GI_SP_TILE_THREADS];
	const uint32_t per = 32 / BITS;
	const uint32_t mask = (1u << BITS) - 1;
	const uint32_t q = blockIdx.y;
	const uint32_t lo = blockIdx.x * band;
	const uint32_t hi = H - lo < band ? H : lo + band;
	const uint32_t nw = (hi - lo + per - 1) / per;
	const uint32_t tid = threadIdx.x;
	const uint32_t lane = tid & 31;
	const uint32_t nwarps = GI_SP_TILE_THREADS / 32;
	uint32_t   *cw = sm;
	uint32_t   *sh = sm + band / per;
	uint32_t	ua = 0;
	uint32_t	ub = nu;

	/* q's units */
	{
		uint32_t	n = nu;

		while (n > 0)
		{
			uint32_t	h = n >> 1;

			if (pairs[ua + h].q < q)
			{
				ua += h + 1;
				n -= h + 1;
			}
			else
				n = h;
		}
		ub = ua;
		n = nu - ua;
		while (n > 0)
		{
			uint32_t	h = n >> 1;

			if (pairs[ub + h].q <= q)
			{
				ub += h + 1;
				n -= h + 1;
			}
			else
				n = h;
		}
	}
	for (uint32_t i = tid; i < nw; i += GI_SP_TILE_THREADS)
		cw[i] = 0;
	for (uint32_t i = tid; i < nb; i += GI_SP_TILE_THREADS)
		sh[i] = 0;
	__syncthreads();

	for (uint32_t u0 = ua; u0 < ub; u0 += GI_SP_TILE_THREADS)
	{
		uint32_t	m = ub - u0 < GI_SP_TILE_THREADS ? ub - u0 : GI_SP_TILE_THREADS;
		uint32_t	c = 0;
		uint32_t	pre;
		uint32_t	total;

		if (tid < m)
		{
			gi_sp_unit	un = units[u0 + tid];
			uint32_t	wide = __ldg(&bspan[un.beg]);
			uint32_t	a = gi_sp_lower(bmin + un.beg, un.n, lo > wide ? lo - wide : 0);
			uint32_t	b = gi_sp_lower(bmin + un.beg, un.n, hi);

			s_beg[tid] = un.beg + a;
			s_w[tid] = (uint32_t) pairs[u0 + tid].w;
			c = b > a ? b - a : 0;
		}
		scan_t(ts).ExclusiveSum(c, pre, total);
		s_pre[tid] = pre;
		__syncthreads();
		for (uint32_t x0 = (tid >> 5) * GI_SP_CHUNK; x0 < total; x0 += nwarps * GI_SP_CHUNK)
		{
			uint32_t	bm = 0;
			unsigned long long dp = 0;
			uint32_t	w = 0;
			uint32_t	kv[GI_SP_CHUNK];
			uint32_t	wv[GI_SP_CHUNK];

			/* lanes 0..7 find the chunk's slabs, then every lane loads its slot of each */
			if (lane < GI_SP_CHUNK && x0 + lane < total)
			{
				uint32_t	x = x0 + lane;
				uint32_t	j = 0;
				uint32_t	n = m;
				uint32_t	slab;

				/* the last unit whose slabs begin at or before x */
				while (n > 1)
				{
					uint32_t	h = n >> 1;

					if (s_pre[j + h] <= x)
					{
						j += h;
						n -= h;
					}
					else
						n = h;
				}
				slab = __ldg(&bdir[s_beg[j] + (x - s_pre[j])]);
				bm = gi_slab_bitmap(slabs, slab);
				dp = (unsigned long long) gi_slab_data(slabs, slab);
				w = s_w[j];
			}
#pragma unroll
			for (int c = 0; c < GI_SP_CHUNK; c++)
			{
				uint32_t	b = __shfl_sync(GI_CU_FULL_MASK, bm, c);
				const uint32_t *data =
					(const uint32_t *) __shfl_sync(GI_CU_FULL_MASK, dp, c);

				wv[c] = __shfl_sync(GI_CU_FULL_MASK, w, c);
				kv[c] = gi_slot_live(b, lane) ? __ldcg(gi_slab_kids(data, W) + lane) : UINT32_MAX;
			}
#pragma unroll
			for (int c = 0; c < GI_SP_CHUNK; c++)
				if (kv[c] >= lo && kv[c] < hi)
					atomicAdd(&cw[(kv[c] - lo) / per], wv[c] << ((kv[c] % per) * BITS));
		}
		__syncthreads();
	}

	/* the band's words, and its counts into the ZipperArray */
	{
		uint32_t   *row = ctr + (size_t) q * wpq + lo / per;

		for (uint32_t i = tid; i < nw; i += GI_SP_TILE_THREADS)
		{
			uint32_t	v = cw[i];

			row[i] = v;
			for (uint32_t j = 0; v != 0 && j < per; j++)
			{
				uint32_t	cnt = (v >> (j * BITS)) & mask;

				if (cnt)
					atomicAdd(&sh[cnt < nb ? cnt : nb - 1], 1u);
			}
		}
		__syncthreads();
		for (uint32_t i = tid; i < nb; i += GI_SP_TILE_THREADS)
			if (sh[i])
				atomicAdd(&hist[(size_t) q * nb + i], sh[i]);
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
				   uint32_t nb, uint32_t k, uint32_t cap, uint32_t band, uint32_t *ctr,
				   uint32_t *hist, uint32_t *thr, uint32_t *over, uint32_t *cd, uint64_t *ck,
				   uint32_t *cnt)
{
	uint32_t	nwords = (uint32_t) ((H + 32 / BITS - 1) / (32 / BITS));
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	uint32_t	blocks;
	dim3		hgrid(gi_cu_div_up(nwords, GI_SP_BLOCK * 16), nsub, 1);
	dim3		cgrid(gi_cu_div_up(nwords, GI_SP_BLOCK * GI_SP_CNT_WPT), nsub, 1);

	GI_CU_TRY(cudaMemsetAsync(hist, 0, (size_t) nsub * nb * sizeof(uint32_t), s->ss));
	GI_CU_TRY(cudaMemsetAsync(cnt, 0, (size_t) nsub * sizeof(uint32_t), s->ss));
	if (band > 0)
	{
		/* every word of every row is the store of one band: no clearing */
		size_t		smem = ((size_t) band / (32 / BITS) + nb) * sizeof(uint32_t);

		GI_CU_TRY(cudaFuncSetAttribute(gi_k_cnt_tile<BITS>,
									   cudaFuncAttributeMaxDynamicSharedMemorySize, (int) smem));
		gi_k_cnt_tile<BITS><<<dim3(gi_cu_div_up(H, band), nsub, 1), GI_SP_TILE_THREADS, smem,
			s->ss>>>(units, pairs, nu, (const uint32_t *) sp->b_dir.p,
					 (const uint32_t *) sp->b_min.p, (const uint32_t *) sp->b_span.p,
					 s->d_slabs, s->words, H, band, wpq, nb, ctr, hist);
		GI_CU_TRY(cudaGetLastError());
	}
	else
	{
		GI_CU_TRY(cudaMemsetAsync(ctr, 0, (size_t) nsub * wpq * sizeof(uint32_t), s->ss));
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
		gi_k_cnt_hist<BITS><<<hgrid, GI_SP_BLOCK, nb * sizeof(uint32_t), s->ss>>>(
			ctr, wpq, nwords, nb, hist);
	}
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
			   uint32_t H, uint32_t maxc, uint32_t k, uint32_t cap, uint32_t band,
			   uint32_t *cd, uint64_t *ck, uint32_t *cnt, uint32_t **over_out)
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
									 nb, k, cap, band, (uint32_t *) sp->s_acc.p,
									 (uint32_t *) sp->s_hist.p, thr, over, cd, ck, cnt);
	return gi_sp_count_launch<16>(s, sp, units, prefix, nu, nchunks, pairs, nsub, H, wpq, nb,
								  k, cap, band, (uint32_t *) sp->s_acc.p, (uint32_t *) sp->s_hist.p,
								  thr, over, cd, ck, cnt);
}
