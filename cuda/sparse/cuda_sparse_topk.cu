/*
 * cuda_sparse_topk.cu
 *		The sparse kind's exact top-k: the touched documents of the dense
 *		score rows become candidates, a radix select over (distance, key)
 *		keeps exactly min(k, candidates) of each query, and these are
 *		ordered and written as hits.
 *
 * Candidates: a first pass histograms the top 11 bits of every touched
 * entry's ordered distance and finds the bin of the min(k, touched)-th;
 * the compaction keeps only the entries at or below that bin, so rows of a
 * million touched documents leave about k plus one bin's worth.
 * A candidate is (ordered distance bits, key): the distance is
 * -(float) score with -0.0 made +0.0 (the host compares them equal), its
 * bits mapped so that unsigned order is numeric order; the key breaks
 * ties.  The select treats the pair as one 96-bit number and resolves it
 * 11 bits at a time from the top (3 digits of the distance, then 6 of the
 * key), every query of the sub-batch at once: a histogram kernel over the
 * candidates that match the query's prefix so far (shared-memory counts,
 * then one global atomic per non-empty bin), and a kernel that picks the
 * bin holding the k-th and extends the prefix.  A query is finished as
 * soon as its chosen bin is taken whole, which after the first digits is
 * the common case; the key digits only run for ties at the boundary.
 * The selected are those at or below the final prefix: exactly
 * min(k, n), whatever the ties.  Ordering: a block bitonic sort in shared
 * memory up to GI_SP_BLOCK_SORT per query, else two stable segmented CUB
 * sorts (by key, then by distance).  Any k works; memory is the
 * candidates' and k's.  When no query of a sub-batch has more than
 * GI_SP_BLOCK_SORT candidates (their counts read back by the host), the
 * block sort takes the candidates themselves and keeps the first
 * min(k, n) (for k up to GI_SP_FEW_K): one kernel instead of the select's
 * two dozen small ones.
 */
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_sparse_cand.cuh"

/* the largest selection ordered in shared memory (12 bytes each: 48 KB) */
#define GI_SP_BLOCK_SORT 4096

/*
 * The largest k whose candidates the block sort takes directly: for larger
 * k the select's passes plus a sort of k beat a sort of up to
 * GI_SP_BLOCK_SORT candidates (measured in cuda/README.md).
 */
#define GI_SP_FEW_K 256

/* the digits: (bit shift, width) of the distance's, then the key's */
#define GI_SP_PASSES 9
__constant__ uint8_t gi_sp_shift[GI_SP_PASSES] = {21, 10, 0, 53, 42, 31, 20, 9, 0};
__constant__ uint8_t gi_sp_width[GI_SP_PASSES] = {11, 11, 10, 11, 11, 11, 11, 11, 9};

/* the first digit of the select (top 11 bits of the ordered distance) */
#define GI_SP_DIGIT0(d) ((d) >> 21)

/*
 * Prefilter: a histogram of the first digit of every touched entry of a
 * row (no writes but the counts), so that the compaction keeps only the
 * entries whose first digit can still hold one of the k best.
 */
__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_prehist(const double *__restrict__ acc, uint32_t rlen, uint32_t span, uint32_t *hist)
{
	__shared__ uint32_t h[GI_SP_BINS];
	const uint32_t q = blockIdx.y;
	const double *row = acc + (size_t) q * span;
	uint32_t	start = blockIdx.x * GI_SP_TILE + threadIdx.x;
	uint32_t	i;

	for (i = threadIdx.x; i < GI_SP_BINS; i += GI_SP_BLOCK)
		h[i] = 0;
	__syncthreads();
#pragma unroll 4
	for (i = 0; i < GI_SP_PER_THREAD; i++)
	{
		uint32_t	r = start + i * GI_SP_BLOCK;
		uint32_t	bin = UINT32_MAX;
		uint32_t	peers;

		if (r < rlen)
		{
			unsigned long long v = (unsigned long long) __double_as_longlong(__ldcs(&row[r]));

			if (v != GI_SP_UNTOUCHED)
				bin = GI_SP_DIGIT0(gi_sp_dist_ord(__longlong_as_double((long long) v)));
		}
		peers = __match_any_sync(GI_CU_FULL_MASK, bin);
		if (bin != UINT32_MAX && (uint32_t) (__ffs(peers) - 1) == (threadIdx.x & 31))
			atomicAdd(&h[bin], (uint32_t) __popc(peers));
	}
	__syncthreads();
	for (i = threadIdx.x; i < GI_SP_BINS; i += GI_SP_BLOCK)
		if (h[i])
			atomicAdd(&hist[(size_t) q * GI_SP_BINS + i], h[i]);
}

/*
 * One block per query: the first-digit bin that holds the min(k,
 * touched)-th best; every entry at or below it is kept (all of them when
 * every touched entry is needed).  The histogram is cleared.
 */
__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_prepick(uint32_t *hist, uint32_t k, uint32_t *thr)
{
	__shared__ gi_sp_scan::TempStorage ts;
	const uint32_t per = GI_SP_BINS / GI_SP_BLOCK;
	uint32_t   *h = hist + (size_t) blockIdx.x * GI_SP_BINS + threadIdx.x * per;
	uint32_t	v[GI_SP_BINS / GI_SP_BLOCK];
	uint32_t	sum = 0;
	uint32_t	excl;
	uint32_t	total;
	uint32_t	need;
	uint32_t	i;

#pragma unroll
	for (i = 0; i < per; i++)
	{
		v[i] = h[i];
		sum += v[i];
		h[i] = 0;
	}
	gi_sp_scan(ts).ExclusiveSum(sum, excl, total);
	need = total < k ? total : k;
	if (need == total)
	{
		if (threadIdx.x == 0)
			thr[blockIdx.x] = GI_SP_BINS - 1;
		return;
	}
	if (excl < need && need <= excl + sum)
	{
		uint32_t	c = excl;

		for (i = 0; i < per; i++)
		{
			if (c + v[i] >= need)
			{
				thr[blockIdx.x] = threadIdx.x * per + i;
				break;
			}
			c += v[i];
		}
	}
}

__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_compact(const double *__restrict__ acc, uint32_t lo, uint32_t rlen, uint32_t span,
				const uint64_t *__restrict__ kid_key, const uint32_t *__restrict__ thr,
				uint32_t *cd, uint64_t *ck, uint32_t *cnt)
{
	__shared__ gi_sp_scan::TempStorage ts;
	__shared__ uint32_t sbase;
	const uint32_t q = blockIdx.y;
	const double *row = acc + (size_t) q * span;
	const uint32_t t = thr[q];
	uint32_t	start = blockIdx.x * GI_SP_TILE + threadIdx.x;
	uint32_t	d[GI_SP_PER_THREAD];
	uint32_t	mine = 0;
	uint32_t	pos;
	int			i;

#pragma unroll
	for (i = 0; i < GI_SP_PER_THREAD; i++)
	{
		uint32_t	r = start + i * GI_SP_BLOCK;

		d[i] = UINT32_MAX;
		if (r < rlen)
		{
			unsigned long long v = (unsigned long long) __double_as_longlong(__ldcs(&row[r]));

			if (v != GI_SP_UNTOUCHED)
			{
				uint32_t	o = gi_sp_dist_ord(__longlong_as_double((long long) v));

				if (GI_SP_DIGIT0(o) <= t)
					d[i] = o;
			}
		}
		mine += d[i] != UINT32_MAX;
	}
	pos = gi_sp_block_reserve(mine, &cnt[q], ts, sbase);
	if (mine == 0)
		return;
#pragma unroll
	for (i = 0; i < GI_SP_PER_THREAD; i++)
	{
		if (d[i] != UINT32_MAX)
		{
			cd[(size_t) q * span + pos] = d[i];
			ck[(size_t) q * span + pos] = kid_key[lo + start + i * GI_SP_BLOCK];
			pos++;
		}
	}
}

__global__ void
gi_k_sp_sel_init(const uint32_t *cnt, uint32_t nsub, uint32_t k, gi_sp_sel *sel)
{
	uint32_t	q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q < nsub)
	{
		gi_sp_sel	s;

		s.need = cnt[q] < k ? cnt[q] : k;
		s.done = s.need == cnt[q];
		s.dmask = 0;
		s.pd = 0;
		s.kmask = 0;
		s.pk = 0;
		sel[q] = s;
	}
}

__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_hist(const gi_sp_sel *sel, const uint32_t *__restrict__ sd,
			 const uint64_t *__restrict__ sk, size_t sstride, const uint32_t *scnt,
			 uint32_t pass, uint32_t *hist)
{
	__shared__ uint32_t h[GI_SP_BINS];
	const uint32_t q = blockIdx.y;
	const gi_sp_sel s = sel[q];
	const uint32_t n = scnt[q];
	const uint32_t shift = gi_sp_shift[pass];
	const uint32_t dig = (1u << gi_sp_width[pass]) - 1;
	uint32_t	start = blockIdx.x * GI_SP_TILE;
	uint32_t	i;

	if (s.done || start >= n)
		return;
	for (i = threadIdx.x; i < GI_SP_BINS; i += GI_SP_BLOCK)
		h[i] = 0;
	__syncthreads();
	for (i = start + threadIdx.x; i < n && i < start + GI_SP_TILE; i += GI_SP_BLOCK)
	{
		uint32_t	d = sd[(size_t) q * sstride + i];
		uint32_t	bin = UINT32_MAX;
		uint32_t	peers;

		if (pass < 3)
		{
			if ((d & s.dmask) == s.pd)
				bin = (d >> shift) & dig;
		}
		else if (d == s.pd)
		{
			uint64_t	key = sk[(size_t) q * sstride + i];

			if ((key & s.kmask) == s.pk)
				bin = (uint32_t) (key >> shift) & dig;
		}
		/* lanes of one bin add once: the first digits crowd into few bins */
		peers = __match_any_sync(__activemask(), bin);
		if (bin != UINT32_MAX && (uint32_t) (__ffs(peers) - 1) == (threadIdx.x & 31))
			atomicAdd(&h[bin], (uint32_t) __popc(peers));
	}
	__syncthreads();
	for (i = threadIdx.x; i < GI_SP_BINS; i += GI_SP_BLOCK)
		if (h[i])
			atomicAdd(&hist[(size_t) q * GI_SP_BINS + i], h[i]);
}

/*
 * One block per query: the bin holding the need-th of the candidates that
 * match the prefix, the prefix extended by it, the histogram cleared for
 * the next pass.  The query is done when that bin is taken whole.
 */
__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_pick(gi_sp_sel *sel, uint32_t pass, uint32_t *hist)
{
	__shared__ gi_sp_scan::TempStorage ts;
	__shared__ uint32_t bin;
	__shared__ uint32_t before;
	__shared__ uint32_t bcount;
	const uint32_t per = GI_SP_BINS / GI_SP_BLOCK;
	uint32_t   *h = hist + (size_t) blockIdx.x * GI_SP_BINS + threadIdx.x * per;
	gi_sp_sel	s = sel[blockIdx.x];
	uint32_t	v[GI_SP_BINS / GI_SP_BLOCK];
	uint32_t	sum = 0;
	uint32_t	excl;
	uint32_t	i;

	if (s.done)
		return;
#pragma unroll
	for (i = 0; i < per; i++)
	{
		v[i] = h[i];
		sum += v[i];
	}
	gi_sp_scan(ts).ExclusiveSum(sum, excl);
	/* exactly one thread has excl < need <= excl + sum */
	if (excl < s.need && s.need <= excl + sum)
	{
		uint32_t	c = excl;

		for (i = 0; i < per; i++)
		{
			if (c + v[i] >= s.need)
			{
				bin = threadIdx.x * per + i;
				before = c;
				bcount = v[i];
				break;
			}
			c += v[i];
		}
	}
#pragma unroll
	for (i = 0; i < per; i++)
		h[i] = 0;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		uint32_t	shift = gi_sp_shift[pass];
		uint32_t	width = gi_sp_width[pass];

		s.need -= before;
		if (pass < 3)
		{
			s.dmask |= ((1u << width) - 1) << shift;
			s.pd |= bin << shift;
		}
		else
		{
			s.kmask |= (((uint64_t) 1 << width) - 1) << shift;
			s.pk |= (uint64_t) bin << shift;
		}
		s.done = bcount == s.need || pass == GI_SP_PASSES - 1;
		sel[blockIdx.x] = s;
	}
}

__global__ void __launch_bounds__(GI_SP_BLOCK)
gi_k_sp_gather(const gi_sp_sel *sel, const uint32_t *__restrict__ sd,
			   const uint64_t *__restrict__ sk, size_t sstride, const uint32_t *scnt,
			   uint32_t *dd, uint64_t *dk, size_t dstride, uint32_t *dcnt)
{
	__shared__ gi_sp_scan::TempStorage ts;
	__shared__ uint32_t sbase;
	const uint32_t q = blockIdx.y;
	const gi_sp_sel s = sel[q];
	const uint32_t n = scnt[q];
	uint32_t	start = blockIdx.x * GI_SP_TILE + threadIdx.x;
	uint32_t	take[GI_SP_PER_THREAD];
	uint32_t	mine = 0;
	uint32_t	pos;
	int			i;

	if (blockIdx.x * GI_SP_TILE >= n)
		return;
#pragma unroll
	for (i = 0; i < GI_SP_PER_THREAD; i++)
	{
		uint32_t	r = start + i * GI_SP_BLOCK;
		bool		t = false;

		if (r < n)
		{
			uint32_t	d = sd[(size_t) q * sstride + r] & s.dmask;

			t = d < s.pd;
			if (d == s.pd)
				t = s.kmask == 0 || (sk[(size_t) q * sstride + r] & s.kmask) <= s.pk;
		}
		take[i] = t;
		mine += t;
	}
	pos = gi_sp_block_reserve(mine, &dcnt[q], ts, sbase);
#pragma unroll
	for (i = 0; i < GI_SP_PER_THREAD; i++)
	{
		uint32_t	r = start + i * GI_SP_BLOCK;

		if (take[i])
		{
			dd[(size_t) q * dstride + pos] = sd[(size_t) q * sstride + r];
			dk[(size_t) q * dstride + pos] = sk[(size_t) q * sstride + r];
			pos++;
		}
	}
}

/* the hit of a candidate: key, distance (a zero score is the host's -0.0) */
__device__ __forceinline__ gi_hit
gi_sp_hit(uint32_t d, uint64_t key)
{
	gi_hit		h;
	float		f = gi_ord2f(d);

	h.key = key;
	h.distance = f == 0.0f ? -0.0f : f;
	h.pad = 0;
	return h;
}

/*
 * One block per query: bitonic sort of its dcnt[q] (at most
 * GI_SP_BLOCK_SORT) entries at dd/dk[q * dstride ...] in shared memory;
 * the first min(kf, dcnt[q]) become its hits.
 */
__global__ void __launch_bounds__(512)
gi_k_sp_order(const uint32_t *dd, const uint64_t *dk, size_t dstride, const uint32_t *dcnt,
			  uint32_t kf, gi_hit *hits, uint32_t *found)
{
	extern __shared__ uint64_t sm[];
	const uint32_t q = blockIdx.x;
	const uint32_t n = dcnt[q];
	const uint32_t nout = n < kf ? n : kf;
	uint64_t   *sk = sm;
	uint32_t   *sd;
	uint32_t	cap = 1;
	uint32_t	i;
	uint32_t	size;
	uint32_t	stride;

	while (cap < n)
		cap <<= 1;
	sd = (uint32_t *) (sk + cap);
	for (i = threadIdx.x; i < cap; i += blockDim.x)
	{
		if (i < n)
		{
			sd[i] = dd[(size_t) q * dstride + i];
			sk[i] = dk[(size_t) q * dstride + i];
		}
		else
		{
			sd[i] = UINT32_MAX;
			sk[i] = UINT64_MAX;
		}
	}
	__syncthreads();
	for (size = 2; size <= cap; size <<= 1)
	{
		for (stride = size >> 1; stride > 0; stride >>= 1)
		{
			for (i = threadIdx.x; i < cap / 2; i += blockDim.x)
			{
				uint32_t	a = 2 * i - (i & (stride - 1));
				uint32_t	b = a + stride;
				bool		up = (a & size) == 0;
				bool		gt = sd[a] > sd[b] || (sd[a] == sd[b] && sk[a] > sk[b]);

				if (gt == up)
				{
					uint32_t	td = sd[a];
					uint64_t	tk = sk[a];

					sd[a] = sd[b];
					sk[a] = sk[b];
					sd[b] = td;
					sk[b] = tk;
				}
			}
			__syncthreads();
		}
	}
	for (i = threadIdx.x; i < nout; i += blockDim.x)
		hits[(size_t) q * kf + i] = gi_sp_hit(sd[i], sk[i]);
	if (threadIdx.x == 0)
		found[q] = nout;
}

/* segments of the CUB sorts: [q * kf, q * kf + dcnt[q]) */
__global__ void
gi_k_sp_segments(const uint32_t *dcnt, uint32_t nsub, uint32_t kf, unsigned long long *beg,
				 unsigned long long *end)
{
	uint32_t	q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q < nsub)
	{
		beg[q] = (unsigned long long) q * kf;
		end[q] = (unsigned long long) q * kf + dcnt[q];
	}
}

__global__ void
gi_k_sp_write(const uint32_t *dd, const uint64_t *dk, const uint32_t *dcnt, uint32_t kf,
			  gi_hit *hits, uint32_t *found)
{
	const uint32_t q = blockIdx.y;
	const uint32_t n = dcnt[q];
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		hits[(size_t) q * kf + i] = gi_sp_hit(dd[(size_t) q * kf + i], dk[(size_t) q * kf + i]);
	if (blockIdx.x == 0 && threadIdx.x == 0)
		found[q] = n;
}

/* ---- host side -------------------------------------------------------------- */

gi_status
gi_cu_sp_compact(gi_store *s, gi_cu_sparse *sp, const double *acc, uint32_t nsub,
				 uint32_t lo, uint32_t rlen, uint32_t span, uint32_t k, uint32_t *cd,
				 uint64_t *ck, uint32_t *cnt)
{
	dim3		grid(gi_cu_div_up(rlen, GI_SP_TILE), nsub, 1);
	uint32_t   *hist;
	uint32_t   *thr;
	gi_status	st;

	GI_CU_TRY(cudaMemsetAsync(cnt, 0, (size_t) nsub * sizeof(uint32_t), s->ss));
	if (rlen == 0)
		return GI_OK;
	st = gi_cu_buf_reserve(&sp->s_hist, (size_t) nsub * GI_SP_BINS * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_thr, (size_t) nsub * sizeof(uint32_t));
	if (st != GI_OK)
		return st;
	hist = (uint32_t *) sp->s_hist.p;
	thr = (uint32_t *) sp->s_thr.p;
	GI_CU_TRY(cudaMemsetAsync(hist, 0, (size_t) nsub * GI_SP_BINS * sizeof(uint32_t), s->ss));
	gi_k_sp_prehist<<<grid, GI_SP_BLOCK, 0, s->ss>>>(acc, rlen, span, hist);
	gi_k_sp_prepick<<<nsub, GI_SP_BLOCK, 0, s->ss>>>(hist, k, thr);
	gi_k_sp_compact<<<grid, GI_SP_BLOCK, 0, s->ss>>>(acc, lo, rlen, span, s->d_kid_key, thr, cd,
													 ck, cnt);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

gi_status
gi_cu_sp_select(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t k,
				const uint32_t *sd, const uint64_t *sk, size_t sstride,
				const uint32_t *scnt, uint32_t cap, uint32_t *dd, uint64_t *dk,
				size_t dstride, uint32_t *dcnt)
{
	gi_sp_sel  *sel;
	uint32_t   *hist;
	dim3		grid(gi_cu_div_up(cap, GI_SP_TILE), nsub, 1);
	uint32_t	pass;
	gi_status	st;

	if (cap == 0)
		return GI_OK;
	st = gi_cu_buf_reserve(&sp->s_sel, (size_t) nsub * sizeof(gi_sp_sel));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_hist, (size_t) nsub * GI_SP_BINS * sizeof(uint32_t));
	if (st != GI_OK)
		return st;
	sel = (gi_sp_sel *) sp->s_sel.p;
	hist = (uint32_t *) sp->s_hist.p;
	GI_CU_TRY(cudaMemsetAsync(hist, 0, (size_t) nsub * GI_SP_BINS * sizeof(uint32_t), s->ss));
	gi_k_sp_sel_init<<<gi_cu_div_up(nsub, 256), 256, 0, s->ss>>>(scnt, nsub, k, sel);
	for (pass = 0; pass < GI_SP_PASSES; pass++)
	{
		gi_k_sp_hist<<<grid, GI_SP_BLOCK, 0, s->ss>>>(sel, sd, sk, sstride, scnt, pass, hist);
		gi_k_sp_pick<<<nsub, GI_SP_BLOCK, 0, s->ss>>>(sel, pass, hist);
	}
	gi_k_sp_gather<<<grid, GI_SP_BLOCK, 0, s->ss>>>(sel, sd, sk, sstride, scnt, dd, dk, dstride,
													dcnt);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/* gi_k_sp_order with shared memory for up to most entries a query */
static gi_status
gi_sp_block_sort(gi_store *s, uint32_t nsub, uint32_t most, const uint32_t *dd,
				 const uint64_t *dk, size_t dstride, const uint32_t *dcnt, uint32_t kf,
				 gi_hit *hits, uint32_t *found)
{
	uint32_t	cap = 1;

	while (cap < most)
		cap <<= 1;
	gi_k_sp_order<<<nsub, 512, (size_t) cap * (sizeof(uint64_t) + sizeof(uint32_t)),
		s->ss>>>(dd, dk, dstride, dcnt, kf, hits, found);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

gi_status
gi_cu_sp_order_few(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t kf,
				   const uint32_t *cd, const uint64_t *ck, size_t cstride,
				   const uint32_t *ccnt, gi_hit *hits, uint32_t *found, bool *done)
{
	uint32_t   *h = (uint32_t *) sp->p_res.p;
	uint32_t	most = 0;

	*done = false;
	if (kf > GI_SP_FEW_K || sp->p_res.cap < (size_t) nsub * sizeof(uint32_t))
		return GI_OK;
	GI_CU_TRY(cudaMemcpyAsync(h, ccnt, (size_t) nsub * sizeof(uint32_t), cudaMemcpyDeviceToHost,
							  s->ss));
	GI_CU_TRY(cudaStreamSynchronize(s->ss));
	for (uint32_t q = 0; q < nsub; q++)
		if (h[q] > most)
			most = h[q];
	if (most > GI_SP_BLOCK_SORT)
		return GI_OK;
	*done = true;
	return gi_sp_block_sort(s, nsub, most, cd, ck, cstride, ccnt, kf, hits, found);
}

gi_status
gi_cu_sp_order(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t kf, uint32_t *dd,
			   uint64_t *dk, const uint32_t *dcnt, gi_hit *hits, uint32_t *found)
{
	unsigned long long *beg;
	unsigned long long *end;
	size_t		total = (size_t) nsub * kf;
	size_t		tmp = 0;
	size_t		tmp2 = 0;
	uint32_t   *gd;
	uint64_t   *gk;
	gi_status	st;

	if (kf <= GI_SP_BLOCK_SORT)
		return gi_sp_block_sort(s, nsub, kf, dd, dk, kf, dcnt, kf, hits, found);
	/* stable by key, then stable by distance: (distance, key) order */
	st = gi_cu_buf_reserve(&sp->s_gd, total * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_gk, total * sizeof(uint64_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&sp->s_beg, 2 * (size_t) nsub * sizeof(unsigned long long));
	if (st != GI_OK)
		return st;
	gd = (uint32_t *) sp->s_gd.p;
	gk = (uint64_t *) sp->s_gk.p;
	beg = (unsigned long long *) sp->s_beg.p;
	end = beg + nsub;
	gi_k_sp_segments<<<gi_cu_div_up(nsub, 256), 256, 0, s->ss>>>(dcnt, nsub, kf, beg, end);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(NULL, tmp, (const uint64_t *) dk, gk,
														(const uint32_t *) dd, gd,
														(int64_t) total, (int64_t) nsub,
														beg, end, s->ss));
	GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(NULL, tmp2, (const uint32_t *) gd, dd,
														(const uint64_t *) gk, dk,
														(int64_t) total, (int64_t) nsub,
														beg, end, s->ss));
	if (tmp2 > tmp)
		tmp = tmp2;
	st = gi_cu_buf_reserve(&sp->s_tmp, tmp);
	if (st != GI_OK)
		return st;
	GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(sp->s_tmp.p, tmp, (const uint64_t *) dk,
														gk, (const uint32_t *) dd, gd,
														(int64_t) total, (int64_t) nsub,
														beg, end, s->ss));
	GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(sp->s_tmp.p, tmp, (const uint32_t *) gd,
														dd, (const uint64_t *) gk, dk,
														(int64_t) total, (int64_t) nsub,
														beg, end, s->ss));
	{
		dim3		grid(gi_cu_div_up(kf, 256), nsub, 1);

		gi_k_sp_write<<<grid, 256, 0, s->ss>>>(dd, dk, dcnt, kf, hits, found);
	}
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}
