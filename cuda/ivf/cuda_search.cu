/*
 * cuda_search.cu
 *		IVF search: the fine scan of the probed slab chains and the top-k.
 *
 * Work unit: (query, group of its probed lists).  A block of 8 warps
 * handles a unit.  Its threads walk the probed chains in parallel, one
 * chain per thread, and queue the slab ids in shared memory (every chain
 * advances one hop per step, so the latency is the longest chain's, and
 * each walk is bounded by the pool size: a corrupt chain raises an error
 * flag instead of looping).  Then each warp takes a queued slab: it reads
 * the validity bitmap first (acquire), skips empty slabs, and lane i
 * computes slot i's distance reading word j of all 32 slots as one
 * coalesced 128-byte load (the word-interleaved layout); keys are read
 * only for valid slots.
 *
 * Few queries (at least GI_CU_DIR_MIN_GROUPS blocks a query): the slabs come
 * from the store's slab directory instead (gi_k_scan_dir), each block an
 * equal share of the slabs of all the query's probed lists, so no chain is
 * walked and one query fills the GPU; the directory is rebuilt only once
 * the store stopped changing between searches.
 *
 * Top-k, for k <= GI_CU_FAST_K: each block keeps a running top-k in shared
 * memory (cuda_topk.cuh).  When there are few queries the probed lists of
 * a query are split over several blocks to fill the GPU, and a merge
 * kernel combines their partial top-k lists.
 *
 * Large batches, where a list is probed by several queries of the batch:
 * the (query, list) units are sorted by list and cut into tiles of up to
 * GI_CU_TILE_Q units of one list; a block walks the list once and scores
 * each slab for all the tile's queries (gi_k_scan_tile), so memory traffic
 * falls by up to that factor; the merge kernel combines each query's
 * per-list top-k lists as above.
 *
 * Larger k (the SQL scan doubles k when it needs more rows): the same scan
 * appends every candidate of the probed lists, counted beforehand from
 * the per-list row counts, to a buffer; two stable CUB segmented sorts
 * (by key, then by distance) order each query's candidates by (distance,
 * key) and the first k are kept.  Correct for any k.
 *
 * Distances are accumulated in float; the host reference accumulates in
 * double, so distances agree to ~1e-6 relative and ties may differ only
 * among (nearly) equal distances.
 */
#include <cstdlib>
#include <cstring>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_select.cuh>

#include "cuda_ivf.h"
#include "cuda_scan.cuh"
#include "cuda_topk.cuh"
#include "cuda_util.cuh"
#include "cuda_walk.cuh"
#include "gi_cuda_test.h"

/* partial top-k lists of list-ordered units, at most (bytes) */
#define GI_CU_ORDER_BUDGET	((size_t) 128 << 20)
/* queries per multi-query tile, and the tile block's shared memory bound */
#define GI_CU_TILE_Q		8
#define GI_CU_TILE_SMEM_MAX	((size_t) 100 << 10)
/* a tile's blocks for a long list: slabs a block, and blocks a tile at most */
#define GI_CU_TILE_CHUNK	128
#define GI_CU_TILE_SPLIT	16
/*
 * groups per query from which the few-query scan takes the slab directory
 * (measured for one query; larger chunks keep the chain walk)
 */
#define GI_CU_DIR_MIN_GROUPS	4
/* device scratch for one chunk of queries */
#define GI_CU_QUERY_BUDGET	((size_t) 256 << 20)
/* candidates held at once on the large-k path */
#define GI_CU_GENERAL_BUDGET ((uint64_t) 16 << 20)


/*
 * Distance of the query to slot `lane` of a slab; NaN ranks as +Inf.
 * Word j of the 32 slots is one coalesced 128-byte load.  Loads are issued
 * GI_CU_ILP at a time before they are used: left to itself the compiler
 * issued each load just before its FMA (it keeps this kernel at 32
 * registers), and the warp waited out every memory latency in turn.  The
 * acquire load of the bitmap invalidated L1 (CCTL.IVALL), so plain cached
 * loads after it cannot see a stale line.
 */
#define GI_CU_ILP 16

/*
 * Words j .. j+15 of this lane's slot: 16 loads 128 bytes apart, issued
 * back to back from one base register.  volatile keeps them after the
 * acquire load of the bitmap (also volatile asm).
 */
__device__ __forceinline__ void
gi_ld16(const unsigned int *p, float *x)
{
	size_t		g = __cvta_generic_to_global(p);

	asm volatile("{\n\t"
				 "ld.global.f32 %0, [%16];\n\t"
				 "ld.global.f32 %1, [%16+128];\n\t"
				 "ld.global.f32 %2, [%16+256];\n\t"
				 "ld.global.f32 %3, [%16+384];\n\t"
				 "ld.global.f32 %4, [%16+512];\n\t"
				 "ld.global.f32 %5, [%16+640];\n\t"
				 "ld.global.f32 %6, [%16+768];\n\t"
				 "ld.global.f32 %7, [%16+896];\n\t"
				 "ld.global.f32 %8, [%16+1024];\n\t"
				 "ld.global.f32 %9, [%16+1152];\n\t"
				 "ld.global.f32 %10, [%16+1280];\n\t"
				 "ld.global.f32 %11, [%16+1408];\n\t"
				 "ld.global.f32 %12, [%16+1536];\n\t"
				 "ld.global.f32 %13, [%16+1664];\n\t"
				 "ld.global.f32 %14, [%16+1792];\n\t"
				 "ld.global.f32 %15, [%16+1920];\n\t"
				 "}"
				 : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3]),
				   "=f"(x[4]), "=f"(x[5]), "=f"(x[6]), "=f"(x[7]),
				   "=f"(x[8]), "=f"(x[9]), "=f"(x[10]), "=f"(x[11]),
				   "=f"(x[12]), "=f"(x[13]), "=f"(x[14]), "=f"(x[15])
				 : "l"(g));
}

/*
 * N words (a multiple of GI_CU_ILP) from word j of this lane's slot, all
 * loaded before their FMAs: the even words into the first sums, the odd
 * into the second, in order.
 */
template <int N, bool L2>
__device__ __forceinline__ void
gi_slab_words(const unsigned int *p, const float *__restrict__ qv, uint32_t j,
			  float &acc0, float &acc1, float &nrm0, float &nrm1)
{
	float		x[N];
	int			t;

#pragma unroll
	for (t = 0; t < N; t += GI_CU_ILP)
		gi_ld16(p + GI_SLAB_WORD(j + t), x + t);
#pragma unroll
	for (t = 0; t < N; t += 2)
	{
		if (L2)
		{
			float		d0 = x[t] - __ldg(qv + j + t);
			float		d1 = x[t + 1] - __ldg(qv + j + t + 1);

			acc0 = fmaf(d0, d0, acc0);
			acc1 = fmaf(d1, d1, acc1);
		}
		else
		{
			acc0 = fmaf(x[t], __ldg(qv + j + t), acc0);
			acc1 = fmaf(x[t + 1], __ldg(qv + j + t + 1), acc1);
			nrm0 = fmaf(x[t], x[t], nrm0);
			nrm1 = fmaf(x[t + 1], x[t + 1], nrm1);
		}
	}
}

/*
 * The sums of this lane's slot over all W words, ILP words loaded at a
 * time (GI_CU_ILP, or two or four times that where registers are to
 * spare); the same words go into the same sums in the same order for any
 * ILP, so the distances are the same bits.
 */
template <int ILP, bool L2>
__device__ __forceinline__ void
gi_slab_sums(const unsigned int *p, const float *__restrict__ qv, uint32_t W,
			 float &acc0, float &acc1, float &nrm0, float &nrm1)
{
	uint32_t	j = 0;

	for (; j + ILP <= W; j += ILP)
		gi_slab_words<ILP, L2>(p, qv, j, acc0, acc1, nrm0, nrm1);
	if (ILP > GI_CU_ILP)
		for (; j + GI_CU_ILP <= W; j += GI_CU_ILP)
			gi_slab_words<GI_CU_ILP, L2>(p, qv, j, acc0, acc1, nrm0, nrm1);
	for (; j < W; j++)
	{
		float		x = __uint_as_float(__ldcg(p + GI_SLAB_WORD(j)));

		if (L2)
		{
			float		d = x - __ldg(qv + j);

			acc0 = fmaf(d, d, acc0);
		}
		else
		{
			acc0 = fmaf(x, __ldg(qv + j), acc0);
			nrm0 = fmaf(x, x, nrm0);
		}
	}
}

template <int ILP = GI_CU_ILP>
__device__ __forceinline__ float
gi_slab_distance(int metric, const uint32_t *data, uint32_t W,
				 const float *__restrict__ qv, float qn, uint32_t lane)
{
	const unsigned int *p = gi_slot_payload(data, lane);
	float		acc0 = 0.0f;
	float		acc1 = 0.0f;
	float		nrm0 = 0.0f;
	float		nrm1 = 0.0f;

	if (metric == GI_METRIC_L2)
	{
		gi_slab_sums<ILP, true>(p, qv, W, acc0, acc1, nrm0, nrm1);
		return gi_rank_float(acc0 + acc1);
	}
	gi_slab_sums<ILP, false>(p, qv, W, acc0, acc1, nrm0, nrm1);
	acc0 += acc1;
	nrm0 += nrm1;
	if (metric == GI_METRIC_IP)
		return gi_rank_float(-acc0);
	if (qn == 0.0f || nrm0 == 0.0f)
		return __int_as_float(0x7f800000);
	return gi_rank_float(1.0f - acc0 / (sqrtf(qn) * sqrtf(nrm0)));
}

/*
 * One warp scores one slab, its bitmap and data block already read: the
 * key of the lane's slot is loaded with the payload rather than after the
 * distance, so it adds no memory latency of its own.
 */
template <bool APPEND, int ILP = GI_CU_ILP>
__device__ __forceinline__ void
gi_scan_slab_at(const gi_scan_args &a, uint32_t bm, const uint32_t *data, uint32_t q,
				const float *qv, float qn, gi_topk_state &ts, float *sd,
				uint64_t *sk)
{
	const uint32_t lane = threadIdx.x & 31;
	const bool	valid = gi_slot_live(bm, lane);
	uint64_t	key;
	float		d;

	if (bm == 0)
		return;					/* warp-uniform */
	key = valid ? gi_slot_key(data, a.W, lane) : 0;
	d = gi_slab_distance<ILP>(a.metric, data, a.W, qv, qn, lane);
	if (APPEND)
		gi_append(a, q, valid, d, key);
	else
		gi_topk_offer(ts, sd, sk, valid, d, key);
}

/* one warp scores one slab */
template <bool APPEND, int ILP = GI_CU_ILP>
__device__ __forceinline__ void
gi_scan_slab(const gi_scan_args &a, uint32_t slab, uint32_t q,
			 const float *qv, float qn, gi_topk_state &ts, float *sd,
			 uint64_t *sk)
{
	uint32_t	bm = gi_slab_bitmap(a.slabs, slab);

	if (bm == 0)
		return;					/* warp-uniform */
	gi_scan_slab_at<APPEND, ILP>(a, bm, gi_slab_data(a.slabs, slab), q, qv, qn, ts, sd, sk);
}

/*
 * The block's warps score n queued slabs, one slab per warp per round,
 * flushing the top-k between rounds (every thread of the block calls it).
 * With qbm and qdata (the slabs' bitmaps and data blocks, read for the
 * whole queue at once) a warp starts on its slab's payload at once; else
 * each warp reads its slab's header first.
 */
template <bool APPEND, int ILP = GI_CU_ILP>
__device__ __forceinline__ void
gi_scan_queue(const gi_scan_args &a, const uint32_t *qd, const uint32_t *qbm,
			  const uint32_t *const *qdata, uint32_t n, uint32_t q,
			  const float *qv, float qn, gi_topk_state &ts, float *sd, uint64_t *sk)
{
	const uint32_t warp = threadIdx.x >> 5;
	const uint32_t nwarps = blockDim.x >> 5;

	for (uint32_t b = 0; b < n; b += nwarps)
	{
		uint32_t	i = b + warp;

		if (i < n && qbm)
			gi_scan_slab_at<APPEND, ILP>(a, qbm[i], qdata[i], q, qv, qn, ts, sd, sk);
		else if (i < n)
			gi_scan_slab<APPEND, ILP>(a, qd[i], q, qv, qn, ts, sd, sk);
		if (!APPEND && gi_topk_need_flush(ts, a.cap))
			gi_topk_flush(ts, sd, sk, a.cap, a.k);
	}
}

/*
 * (256, 2): with a bound of two blocks per SM ptxas may give the kernel up
 * to 128 registers (it takes 71 and 72 with CUDA 13.0) and issues the 16
 * loads of gi_ld16 before their FMAs; with the plain bound it kept 32
 * registers and interleaved them (SASS checked).
 */
template <bool APPEND>
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS, 2)
gi_k_scan(gi_scan_args a)
{
	extern __shared__ __align__(16) unsigned char gi_smem[];
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + a.cap);
	uint32_t   *queue = (uint32_t *) (sd + a.cap);
	__shared__ gi_topk_state ts;
	__shared__ uint32_t qlen;
	const uint32_t tid = threadIdx.x;
	/* unit u: query u / G, its group u % G (a.order: units sorted by list) */
	const uint32_t u = a.order ? a.order[blockIdx.x] : blockIdx.x;
	const uint32_t q = u / a.G;
	const uint32_t g = u % a.G;
	const uint32_t p0 = (uint32_t) ((uint64_t) g * a.P / a.G);
	const uint32_t p1 = (uint32_t) ((uint64_t) (g + 1) * a.P / a.G);
	const float *qv = a.queries + (size_t) q * a.W;
	const float qn = a.qnorm[q];
	uint32_t	lb;

	gi_topk_init(ts);
	__syncthreads();

	for (lb = p0; lb < p1; lb += blockDim.x)
	{
		uint32_t	cur = GI_NIL;

		if (lb + tid < p1)
		{
			uint32_t	l = a.probes ? a.probes[(size_t) q * a.P + lb + tid] : lb + tid;

			cur = gi_list_head(a.lists, l);
		}
		gi_walk_chains<GI_CU_SQ>(a.slabs, cur, a.max_steps, a.flags, queue, qlen,
								 [&](const uint32_t *qd, uint32_t nqueued)
								 {
									 gi_scan_queue<APPEND>(a, qd, NULL, NULL, nqueued, q, qv,
														   qn, ts, sd, sk);
								 });
	}

	if (!APPEND)
		gi_scan_finish(a, ts, sd, sk, q, u);
}

/*
 * Few queries, from the slab directory: unit (query, group g) takes, of
 * each probed list p, the slabs j with j = (g - p) mod G, G + (g - p) mod G,
 * ..., so a list's slabs go to consecutive groups and every group gets
 * about the same share; no chain is walked.  The block numbers its slabs
 * by a scan of per-list counts (a window of GI_CU_SQ at a time) and its
 * warps score the window as gi_k_scan scores its queue, ILP words a load
 * batch; MINB is the launch bound's blocks an SM (two leave a block the
 * registers for 16 words in flight a lane, one for 32 or 64).
 */
template <int ILP, int MINB>
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS, MINB)
gi_k_scan_dir(gi_scan_args a, const uint32_t *dir, const uint32_t *off)
{
	typedef cub::BlockScan<uint32_t, GI_CU_SCAN_THREADS> scan_t;
	extern __shared__ __align__(16) unsigned char gi_smem[];
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + a.cap);
	uint32_t   *queue = (uint32_t *) (sd + a.cap);
	__shared__ typename scan_t::TempStorage scan_tmp;
	__shared__ gi_topk_state ts;
	__shared__ uint32_t total;
	__shared__ uint32_t qbm[GI_CU_SQ];
	__shared__ const uint32_t *qdata[GI_CU_SQ];
	const uint32_t tid = threadIdx.x;
	const uint32_t q = blockIdx.x / a.G;
	const uint32_t g = blockIdx.x % a.G;
	const float *qv = a.queries + (size_t) q * a.W;
	const float qn = a.qnorm[q];

	gi_topk_init(ts);
	__syncthreads();

	for (uint32_t p0 = 0; p0 < a.P; p0 += blockDim.x)
	{
		uint32_t	p = p0 + tid;
		uint32_t	first = 0;
		uint32_t	n = 0;
		uint32_t	base = 0;
		uint32_t	pos;

		__syncthreads();		/* total and the scan's storage are reused */

		if (p < a.P)
		{
			uint32_t	l = a.probes ? a.probes[(size_t) q * a.P + p] : p;
			uint32_t	c;

			base = off[l];
			c = off[l + 1] - base;
			first = (g + a.G - p % a.G) % a.G;
			n = first < c ? (c - first + a.G - 1) / a.G : 0;
		}
		scan_t(scan_tmp).ExclusiveSum(n, pos);
		if (tid == blockDim.x - 1)
			total = pos + n;
		__syncthreads();
		for (uint32_t w0 = 0; w0 < total; w0 += GI_CU_SQ)
		{
			uint32_t	wlen = total - w0 < GI_CU_SQ ? total - w0 : GI_CU_SQ;

			/* this thread's slabs that fall in the window [w0, w0 + wlen) */
			for (uint32_t i = pos < w0 ? w0 - pos : 0; i < n && pos + i < w0 + wlen; i++)
				queue[pos + i - w0] = dir[base + first + i * a.G];
			__syncthreads();
			/* the window's slab headers, each thread's few independent loads */
			for (uint32_t i = tid; i < wlen; i += blockDim.x)
			{
				qbm[i] = gi_slab_bitmap(a.slabs, queue[i]);
				qdata[i] = gi_slab_data(a.slabs, queue[i]);
			}
			__syncthreads();
			gi_scan_queue<false, ILP>(a, queue, qbm, qdata, wlen, q, qv, qn, ts, sd, sk);
			__syncthreads();
		}
	}
	gi_scan_finish(a, ts, sd, sk, q, blockIdx.x);
}

/*
 * Many queries per list: a tile is (one probed list, up to Q of the units
 * that probe it, consecutive in list order).  The block walks the list's
 * chain once and every warp scores its slab for all Q queries, so a slab
 * is loaded once per tile instead of once per unit: Q times less traffic,
 * and each loaded word feeds Q FMAs instead of one.  The queries sit in
 * shared memory (read as broadcast float4); each keeps its own running
 * top-k there.  Per (query, slot) the arithmetic is that of
 * gi_slab_distance, in the same order (even and odd words in two sums), so
 * a query gets bitwise the same distances alone or in a batch.
 */
#define GI_CU_TILE_SQ 256		/* slab queue of a tile */

/*
 * Score S slabs (S = 1, or 2 as an experiment: see gi_cu_tile_slabs) of
 * one warp for the tile's queries: lane i takes slot i of each.  Results
 * stay in registers: d[s][q] (ranked distance), valid[s], key[s].
 */
template <int Q, int S>
__device__ __forceinline__ void
gi_score_tile(const gi_scan_args &a, const uint32_t *slab, const uint32_t *bm,
			  const float *qs, uint32_t Wp, const float *qn, uint32_t nqt,
			  float (*d)[Q], bool *valid, uint64_t *key)
{
	const uint32_t lane = threadIdx.x & 31;
	const unsigned int *p[S];
	float		acc0[S][Q];
	float		acc1[S][Q];
	float		nrm0[S];
	float		nrm1[S];
	uint32_t	j = 0;
	int			qq;
	int			e;

#pragma unroll
	for (e = 0; e < S; e++)
	{
		p[e] = gi_slot_payload(gi_slab_data(a.slabs, slab[e]), lane);
		nrm0[e] = 0.0f;
		nrm1[e] = 0.0f;
#pragma unroll
		for (qq = 0; qq < Q; qq++)
		{
			acc0[e][qq] = 0.0f;
			acc1[e][qq] = 0.0f;
		}
	}
	for (; j + GI_CU_ILP <= a.W; j += GI_CU_ILP)
	{
		float		x[S][GI_CU_ILP];
		int			t;

#pragma unroll
		for (e = 0; e < S; e++)
			gi_ld16(p[e] + GI_SLAB_WORD(j), x[e]);
		if (a.metric != GI_METRIC_L2)
		{
#pragma unroll
			for (e = 0; e < S; e++)
#pragma unroll
				for (t = 0; t < GI_CU_ILP; t += 2)
				{
					nrm0[e] = fmaf(x[e][t], x[e][t], nrm0[e]);
					nrm1[e] = fmaf(x[e][t + 1], x[e][t + 1], nrm1[e]);
				}
		}
#pragma unroll
		for (qq = 0; qq < Q; qq++)
		{
			const float4 *qv = (const float4 *) (qs + (size_t) qq * Wp + j);

			if ((uint32_t) qq >= nqt)
				break;
#pragma unroll
			for (t = 0; t < GI_CU_ILP; t += 4)
			{
				float4		v = qv[t / 4];

#pragma unroll
				for (e = 0; e < S; e++)
				{
					if (a.metric == GI_METRIC_L2)
					{
						float		d0 = x[e][t] - v.x;
						float		d1 = x[e][t + 1] - v.y;
						float		d2 = x[e][t + 2] - v.z;
						float		d3 = x[e][t + 3] - v.w;

						acc0[e][qq] = fmaf(d0, d0, acc0[e][qq]);
						acc1[e][qq] = fmaf(d1, d1, acc1[e][qq]);
						acc0[e][qq] = fmaf(d2, d2, acc0[e][qq]);
						acc1[e][qq] = fmaf(d3, d3, acc1[e][qq]);
					}
					else
					{
						acc0[e][qq] = fmaf(x[e][t], v.x, acc0[e][qq]);
						acc1[e][qq] = fmaf(x[e][t + 1], v.y, acc1[e][qq]);
						acc0[e][qq] = fmaf(x[e][t + 2], v.z, acc0[e][qq]);
						acc1[e][qq] = fmaf(x[e][t + 3], v.w, acc1[e][qq]);
					}
				}
			}
		}
	}
	for (; j < a.W; j++)
	{
		float		x[S];

#pragma unroll
		for (e = 0; e < S; e++)
		{
			x[e] = __uint_as_float(__ldcg(p[e] + GI_SLAB_WORD(j)));
			if (a.metric != GI_METRIC_L2)
				nrm0[e] = fmaf(x[e], x[e], nrm0[e]);
		}
#pragma unroll
		for (qq = 0; qq < Q; qq++)
		{
			float		v;

			if ((uint32_t) qq >= nqt)
				break;
			v = qs[(size_t) qq * Wp + j];
#pragma unroll
			for (e = 0; e < S; e++)
			{
				if (a.metric == GI_METRIC_L2)
				{
					float		dd = x[e] - v;

					acc0[e][qq] = fmaf(dd, dd, acc0[e][qq]);
				}
				else
					acc0[e][qq] = fmaf(x[e], v, acc0[e][qq]);
			}
		}
	}
#pragma unroll
	for (e = 0; e < S; e++)
	{
		float		nrm = nrm0[e] + nrm1[e];

		valid[e] = gi_slot_live(bm[e], lane);
		key[e] = valid[e] ? gi_slot_key(gi_slab_data(a.slabs, slab[e]), a.W, lane) : 0;
#pragma unroll
		for (qq = 0; qq < Q; qq++)
		{
			float		sum = acc0[e][qq] + acc1[e][qq];

			if (a.metric == GI_METRIC_L2)
				d[e][qq] = gi_rank_float(sum);
			else if (a.metric == GI_METRIC_IP)
				d[e][qq] = gi_rank_float(-sum);
			else if (qn[qq] == 0.0f || nrm == 0.0f)
				d[e][qq] = __int_as_float(0x7f800000);
			else
				d[e][qq] = gi_rank_float(1.0f - sum / (sqrtf(qn[qq]) * sqrtf(nrm)));
		}
	}
}

/* one warp's candidates of one slab, for every query of the tile */
template <int Q>
__device__ __forceinline__ void
gi_offer_tile(const gi_scan_args &a, uint32_t nqt, gi_topk_state *ts, float *sd,
			  uint64_t *sk, const float *d, bool valid, uint64_t key)
{
	int			qq;

#pragma unroll
	for (qq = 0; qq < Q; qq++)
	{
		if ((uint32_t) qq >= nqt)
			break;
		gi_topk_offer(ts[qq], sd + (size_t) qq * a.cap, sk + (size_t) qq * a.cap,
					  valid, d[qq], key);
	}
}

/*
 * A query's buffer is flushed when it could not take another phase, and
 * also as soon as it holds k candidates while no threshold is set: the
 * first phase's (at most 256) are sorted at once instead of letting the
 * buffer fill to 512 unfiltered, and the threshold they give filters the
 * rest of the list.  The flushes' sorts cost about as much as the
 * distances did (ncu), so the smaller first sort matters.
 */
__device__ __forceinline__ bool
gi_tile_must_flush(const gi_topk_state &ts, uint32_t cap, uint32_t k)
{
	return ts.count > cap - blockDim.x || (!ts.have && ts.count >= k);
}

/*
 * End of an offer phase: flush the buffers that could not take another
 * phase (or have no threshold yet).  The first barrier ends the appends (a predicate of
 * __syncthreads_or is evaluated before its barrier, while other warps may
 * still append); then each warp flushes its queries' buffers, all at once.
 */
template <int Q>
__device__ __forceinline__ void
gi_flush_tile(const gi_scan_args &a, uint32_t nqt, gi_topk_state *ts, float *sd,
			  uint64_t *sk)
{
	const uint32_t tid = threadIdx.x;
	uint32_t	qq;

	__syncthreads();
	if (__syncthreads_or(tid < nqt && gi_tile_must_flush(ts[tid], a.cap, a.k)))
	{
		for (qq = tid >> 5; qq < nqt; qq += blockDim.x >> 5)
			if (gi_tile_must_flush(ts[qq], a.cap, a.k))
				gi_topk_flush_warp(ts[qq], sd + (size_t) qq * a.cap,
								   sk + (size_t) qq * a.cap, a.k);
		__syncthreads();
	}
}

/* shared memory of a tile block for Q queries */
static inline size_t
gi_tile_smem(int Q, uint32_t cap, uint32_t W)
{
	return (size_t) Q * cap * (sizeof(uint64_t) + sizeof(float))
		+ (size_t) Q * ((W + 3) & ~3u) * sizeof(float)
		+ GI_CU_TILE_SQ * sizeof(uint32_t);
}

/*
 * One block a tile, or with the slab directory (dir, off; NULL: the chain
 * walk) nsplit blocks a tile: block s of a tile of list l takes the slabs
 * s, s + n, s + 2n, ... of the list's directory entries, n being the
 * list's own split (enough blocks for `chunk` slabs each, at most nsplit),
 * so a long list no longer sets the kernel's time alone; a block past its
 * list's split only marks its partial lists empty.  A unit's partial list
 * s is number u * nsplit + s.  Three blocks an SM where one slab a warp
 * fits the registers that leaves (two slabs a warp would spill).
 */
template <int Q, int S>
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS, S == 1 ? 3 : 2)
gi_k_scan_tile(gi_scan_args a, const uint32_t *dir, const uint32_t *off, uint32_t nsplit,
			   uint32_t chunk)
{
	extern __shared__ __align__(16) unsigned char gi_smem[];
	const uint32_t Wp = (a.W + 3) & ~3u;
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + (size_t) Q * a.cap);
	float	   *qs = sd + (size_t) Q * a.cap;
	uint32_t   *queue = (uint32_t *) (qs + (size_t) Q * Wp);
	__shared__ gi_topk_state ts[Q];
	__shared__ uint32_t units[Q];
	__shared__ float qn[Q];
	__shared__ uint32_t qlen;
	__shared__ uint32_t next;
	const uint32_t tid = threadIdx.x;
	const uint32_t warp = tid >> 5;
	const uint32_t nwarps = blockDim.x >> 5;
	const uint32_t split = blockIdx.x % nsplit;
	uint32_t	start;
	uint32_t	list;
	uint32_t	nqt;
	uint32_t	steps = 0;
	uint32_t	lbase = 0;
	uint32_t	lsplit = 1;
	uint32_t	mine = 0;
	uint32_t	w0 = 0;
	uint32_t	i;

	if (blockIdx.x / nsplit >= *a.ntiles)
		return;					/* block-uniform */
	start = a.tiles[blockIdx.x / nsplit];
	list = a.okeys[start];
	if (dir)
	{
		uint32_t	c = off[list + 1] - off[list];

		lbase = off[list];
		lsplit = (c + chunk - 1) / chunk;
		lsplit = lsplit < 1 ? 1 : lsplit > nsplit ? nsplit : lsplit;
		mine = split < c ? (c - split + lsplit - 1) / lsplit : 0;
	}
	if (tid < Q)
	{
		uint32_t	o = start + tid;
		bool		in = o < a.nunits && a.okeys[o] == list;
		uint32_t	u = in ? a.order[o] : UINT32_MAX;

		units[tid] = u;
		qn[tid] = in ? a.qnorm[u / a.P] : 0.0f;
		ts[tid].count = 0;
		ts[tid].have = 0;
		ts[tid].td = 0.0f;
		ts[tid].tk = 0;
	}
	if (tid == 0 && !dir)
		next = gi_list_head(a.lists, list);
	/* the units of a list are consecutive, so the tile's are a prefix */
	nqt = (uint32_t) __syncthreads_count(tid < Q && units[tid] != UINT32_MAX);
	if (split >= lsplit)
	{
		if (tid < nqt)
			a.cn[(size_t) units[tid] * nsplit + split] = 0;
		return;					/* block-uniform */
	}
	for (i = tid; i < (uint32_t) Q * Wp; i += blockDim.x)
	{
		uint32_t	qq = i / Wp;
		uint32_t	j = i % Wp;

		qs[i] = (qq < nqt && j < a.W) ? a.queries[(size_t) (units[qq] / a.P) * a.W + j] : 0.0f;
	}

	for (;;)
	{
		uint32_t	nq;
		uint32_t	b;
		bool		more;

		if (dir)
		{
			/* this block's next window of the list's directory entries */
			nq = mine - w0 < GI_CU_TILE_SQ ? mine - w0 : GI_CU_TILE_SQ;
			for (i = tid; i < nq; i += blockDim.x)
				queue[i] = dir[lbase + split + (size_t) (w0 + i) * lsplit];
			w0 += nq;
			more = w0 < mine;
			__syncthreads();
		}
		else
		{
			/* one thread walks ahead; the chain is serial anyway */
			if (tid == 0)
			{
				uint32_t	cur = next;

				qlen = gi_walk_ahead(a.slabs, &cur, GI_CU_TILE_SQ, &steps, a.max_steps,
									 a.flags, queue);
				next = cur;
			}
			__syncthreads();
			nq = qlen;
			more = next != GI_NIL;
		}
		/* a round: each warp scores S slabs, then offers them in turn */
		for (b = 0; b < nq; b += S * nwarps)
		{
			uint32_t	sl[S];
			uint32_t	bm[S];
			float		d[S][Q];
			bool		valid[S];
			uint64_t	key[S];
			uint32_t	e;

#pragma unroll
			for (e = 0; e < S; e++)
			{
				uint32_t	ie = b + S * warp + e;

				sl[e] = ie < nq ? queue[ie] : GI_NIL;
				bm[e] = sl[e] != GI_NIL ? gi_slab_bitmap(a.slabs, sl[e]) : 0;
				valid[e] = false;
				key[e] = 0;
			}
			/* empty slabs are skipped (warp-uniform) */
			if (S == 2 && bm[0] != 0 && bm[S - 1] != 0)
				gi_score_tile<Q, S>(a, sl, bm, qs, Wp, qn, nqt, d, valid, key);
			else
#pragma unroll
				for (e = 0; e < S; e++)
					if (bm[e] != 0)
						gi_score_tile<Q, 1>(a, sl + e, bm + e, qs, Wp, qn, nqt, d + e,
											valid + e, key + e);
#pragma unroll
			for (e = 0; e < S; e++)
			{
				gi_offer_tile<Q>(a, nqt, ts, sd, sk, d[e], valid[e], key[e]);
				gi_flush_tile<Q>(a, nqt, ts, sd, sk);
			}
		}
		__syncthreads();
		if (!more)
			break;
	}

	/* the loop ended on a barrier: warp w finishes queries w, w + 8, ... */
	for (i = warp; i < nqt; i += nwarps)
	{
		const size_t u = (size_t) units[i] * nsplit + split;
		const float *d = sd + (size_t) i * a.cap;
		const uint64_t *kk = sk + (size_t) i * a.cap;
		uint32_t	lane = tid & 31;
		uint32_t	r;

		gi_topk_flush_warp(ts[i], sd + (size_t) i * a.cap, sk + (size_t) i * a.cap, a.k);
		for (r = lane; r < ts[i].count; r += 32)
		{
			a.cd[(size_t) u * a.k + r] = d[r];
			a.ck[(size_t) u * a.k + r] = kk[r];
		}
		if (lane == 0)
			a.cn[u] = ts[i].count;
	}
}

/* a (distance, key) pair and the smaller of two, for cub::BlockReduce */
struct gi_dk
{
	float		d;
	uint64_t	key;
};

struct gi_dk_min
{
	__device__ __forceinline__ gi_dk operator() (const gi_dk &x, const gi_dk &y) const
	{
		return gi_hit_less(y.d, y.key, x.d, x.key) ? y : x;
	}
};

/*
 * The (distance, key) bound of a query's merge: the smallest last entry of
 * its partial lists that hold k, reduced over the block (of
 * GI_CU_SCAN_THREADS threads); (+Inf, max key), which every candidate is
 * at most, when none holds k.
 */
__device__ __forceinline__ void
gi_merge_bound(const float *__restrict__ cd, const uint64_t *__restrict__ ck,
			   const uint32_t *__restrict__ cn, size_t u0, uint32_t G, uint32_t k,
			   float *td, uint64_t *tk)
{
	typedef cub::BlockReduce<gi_dk, GI_CU_SCAN_THREADS> reduce_t;
	__shared__ typename reduce_t::TempStorage tmp;
	__shared__ gi_dk bound;
	gi_dk		v = {__int_as_float(0x7f800000), UINT64_MAX};

	for (uint32_t g = threadIdx.x; g < G; g += blockDim.x)
	{
		size_t		last = (u0 + g) * k + k - 1;

		if (cn[u0 + g] == k && gi_hit_less(cd[last], ck[last], v.d, v.key))
		{
			v.d = cd[last];
			v.key = ck[last];
		}
	}
	v = reduce_t(tmp).Reduce(v, gi_dk_min());
	if (threadIdx.x == 0)
		bound = v;
	__syncthreads();
	*td = bound.d;
	*tk = bound.key;
}

/*
 * Combine the G partial top-k lists of each query.  Every partial list is
 * sorted (gi_scan_finish, gi_flush_tile), and the k best of the query are
 * at most the bound T of gi_merge_bound (the list that ends at T holds k
 * candidates up to it), so only each list's entries up to T, found by a
 * binary search, are offered: about k or a few k of the G k there are.
 */
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS)
gi_k_merge(const float *__restrict__ cd, const uint64_t *__restrict__ ck,
		   const uint32_t *__restrict__ cn, uint32_t G, uint32_t k, uint32_t cap,
		   gi_hit *hits, uint32_t *found)
{
	typedef cub::BlockScan<uint32_t, GI_CU_SCAN_THREADS> scan_t;
	extern __shared__ __align__(16) unsigned char gi_smem[];
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + cap);
	__shared__ typename scan_t::TempStorage scan_tmp;
	__shared__ gi_topk_state ts;
	__shared__ uint32_t pre[GI_CU_MAX_GROUPS + 1];
	const uint32_t q = blockIdx.x;
	const uint32_t tid = threadIdx.x;
	uint32_t	total = 0;
	uint32_t	b;
	float		td;
	uint64_t	tk;

	gi_topk_init(ts);
	gi_merge_bound(cd, ck, cn, (size_t) q * G, G, k, &td, &tk);
	/* where each group's candidates up to T start: a block-wide prefix sum */
	for (b = 0; b < G; b += blockDim.x)
	{
		uint32_t	gg = b + tid;
		uint32_t	c = 0;
		uint32_t	x;
		uint32_t	sum;

		if (gg < G)
		{
			size_t		base = ((size_t) q * G + gg) * k;
			uint32_t	hi = cn[(size_t) q * G + gg];

			/* first entry past T */
			while (c < hi)
			{
				uint32_t	mid = (c + hi) / 2;

				if (gi_hit_less(td, tk, cd[base + mid], ck[base + mid]))
					hi = mid;
				else
					c = mid + 1;
			}
		}
		scan_t(scan_tmp).ExclusiveSum(c, x, sum);
		if (gg < G)
			pre[gg] = total + x;
		total += sum;
		__syncthreads();		/* scan_tmp is reused */
	}
	if (tid == 0)
		pre[G] = total;
	__syncthreads();
	for (b = 0; b < total; b += blockDim.x)
	{
		uint32_t	i = b + tid;
		bool		valid = i < total;
		float		d = 0.0f;
		uint64_t	key = 0;

		if (valid)
		{
			uint32_t	lo = 0;
			uint32_t	hi = G;
			size_t		off;

			/* the group holding candidate i: largest lo with pre[lo] <= i */
			while (hi - lo > 1)
			{
				uint32_t	mid = (lo + hi) / 2;

				if (pre[mid] <= i)
					lo = mid;
				else
					hi = mid;
			}
			off = ((size_t) q * G + lo) * k + (i - pre[lo]);
			d = cd[off];
			key = ck[off];
		}
		gi_topk_offer(ts, sd, sk, valid, d, key);
		if (gi_topk_need_flush(ts, cap))
			gi_topk_flush(ts, sd, sk, cap, k);
	}
	gi_topk_flush(ts, sd, sk, cap, k);
	gi_write_hits(hits + (size_t) q * k, found + q, ts.count, k, sd, sk);
}

/* large k: candidates per query, from the per-list row counts */
__global__ void
gi_k_count(const uint32_t *__restrict__ lists, const uint32_t *__restrict__ probes,
		   uint32_t P, uint32_t nq, unsigned long long *cnt)
{
	uint32_t	q = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long c = 0;
	uint32_t	p;

	if (q >= nq)
		return;
	for (p = 0; p < P; p++)
	{
		uint32_t	l = probes ? probes[(size_t) q * P + p] : p;

		c += gi_list_rows(lists, l);
	}
	cnt[q] = c;
}

/* large k: the first k of each sorted segment */
__global__ void
gi_k_general_out(const unsigned long long *__restrict__ beg,
				 const unsigned long long *__restrict__ end,
				 const uint32_t *__restrict__ gd, const uint64_t *__restrict__ gk,
				 uint32_t k, gi_hit *hits, uint32_t *found)
{
	const uint32_t q = blockIdx.x;
	unsigned long long b = beg[q];
	unsigned long long n = end[q] - b;
	gi_hit	   *out = hits + (size_t) q * k;
	uint32_t	r;

	for (r = threadIdx.x; r < k; r += blockDim.x)
	{
		gi_hit		h;

		if (r < n)
		{
			h.key = gk[b + r];
			h.distance = gi_ord2f(gd[b + r]);
		}
		else
		{
			h.key = 0;
			h.distance = __int_as_float(0x7f800000);
		}
		h.pad = 0;
		out[r] = h;
	}
	if (threadIdx.x == 0)
		found[q] = (uint32_t) (n < k ? n : k);
}

/* units (query, probed list) keyed by list, for sorting */
__global__ void
gi_k_order_init(const uint32_t *__restrict__ probes, uint32_t P, uint32_t n,
				uint32_t *keys, uint32_t *vals)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		keys[i] = probes ? probes[i] : i % P;
		vals[i] = i;
	}
}

/* multi-query tiles: the first ordered unit of each list */
__global__ void
gi_k_tile_seg(const uint32_t *__restrict__ skeys, uint32_t n, uint32_t *seg)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && (i == 0 || skeys[i] != skeys[i - 1]))
		seg[skeys[i]] = i;
}

/* a tile starts at every Q-th unit of a list */
__global__ void
gi_k_tile_flag(const uint32_t *__restrict__ skeys, uint32_t n, uint32_t Q,
			   const uint32_t *__restrict__ seg, unsigned char *flag)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		flag[i] = (i - seg[skeys[i]]) % Q == 0;
}

/* ---- host side ------------------------------------------------------------ */

/*
 * Slabs a warp scores at once in a tile: 1, or 2 with GI_CUDA_TILE_SLABS=2
 * (a tuning experiment: half the shared-memory reads per FMA, but 120
 * registers instead of 78 cost a block per SM; 12 % slower on an H200 at
 * batch 10,000, probes 16 and 64).
 */
static int
gi_cu_tile_slabs(void)
{
	static int	slabs = 0;

	if (slabs == 0)
	{
		const char *e = getenv("GI_CUDA_TILE_SLABS");

		slabs = (e != NULL && atoi(e) == 2) ? 2 : 1;
	}
	return slabs;
}

/* see cuda_ivf.h */
uint32_t
gi_cu_groups(const gi_store *s, uint32_t qc, uint32_t P)
{
	uint32_t	target = 4 * (uint32_t) s->dev->sms;
	uint32_t	g;

	if (qc >= target)
		return 1;
	g = gi_cu_div_up(target, qc);
	if (g > P)
		g = P;
	if (g > GI_CU_MAX_GROUPS)
		g = GI_CU_MAX_GROUPS;
	return g < 1 ? 1 : g;
}

/*
 * Scratch for the partial top-k lists of `units` units (k entries each),
 * which the merge kernel combines: units are (query, group) on the grouped
 * path, (query, probed list) on the tile path.
 */
gi_status
gi_cu_partials(gi_cu_ivf *iv, gi_scan_args *a, size_t units)
{
	gi_status	st;

	st = gi_cu_buf_reserve(&iv->s_cd, units * a->k * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&iv->s_ck, units * a->k * sizeof(uint64_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&iv->s_cn, units * sizeof(uint32_t));
	if (st != GI_OK)
		return st;
	a->cd = (float *) iv->s_cd.p;
	a->ck = (uint64_t *) iv->s_ck.p;
	a->cn = (uint32_t *) iv->s_cn.p;
	return GI_OK;
}

/* each query's a.G partial lists into its final top-k */
gi_status
gi_cu_merge(gi_store *s, const gi_scan_args &a, uint32_t qc, gi_hit *d_hits,
			uint32_t *d_found)
{
	gi_k_merge<<<qc, GI_CU_SCAN_THREADS, (size_t) a.cap * (sizeof(uint64_t) + sizeof(float)),
		s->ss>>>(a.cd, a.ck, a.cn, a.G, a.k, a.cap, d_hits, d_found);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/*
 * The tile kernel of S slabs at a time (gi_cu_tile_slabs), nsplit blocks
 * a tile (gi_cu_tile_split).  Its shared memory may be over the 48 KiB
 * default, which has to be allowed per kernel first.
 */
template <int S>
static gi_status
gi_cu_scan_tiles(gi_store *s, const gi_scan_args &a, uint32_t grid, size_t smem,
				 const uint32_t *dir, const uint32_t *off, uint32_t nsplit, uint32_t chunk)
{
	GI_CU_TRY(cudaFuncSetAttribute(gi_k_scan_tile<GI_CU_TILE_Q, S>,
								   cudaFuncAttributeMaxDynamicSharedMemorySize,
								   (int) smem));
	/* all of L1 as shared memory: 3 blocks per SM, not 2 (ncu) */
	GI_CU_TRY(cudaFuncSetAttribute(gi_k_scan_tile<GI_CU_TILE_Q, S>,
								   cudaFuncAttributePreferredSharedMemoryCarveout,
								   cudaSharedmemCarveoutMaxShared));
	gi_k_scan_tile<GI_CU_TILE_Q, S><<<grid, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, dir, off,
																			 nsplit, chunk);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/*
 * How the few-query scan finds its slabs (gi_cuda_ivf_set_scan, a test
 * hook): GI_CU_SCAN_AUTO, GI_CU_SCAN_CHAINS (the chain walk always) or
 * GI_CU_SCAN_DIR (the directory always, rebuilt whenever stale).
 * GI_CUDA_IVF_CHAINS=1 in the environment starts it at GI_CU_SCAN_CHAINS.
 */
static int	gi_cu_scan_mode = -1;

static int
gi_cu_ivf_scan_mode(void)
{
	if (gi_cu_scan_mode < 0)
	{
		const char *e = getenv("GI_CUDA_IVF_CHAINS");

		gi_cu_scan_mode = e != NULL && e[0] == '1' ? GI_CU_SCAN_CHAINS : GI_CU_SCAN_AUTO;
	}
	return gi_cu_scan_mode;
}

extern "C" void
gi_cuda_ivf_set_scan(int mode)
{
	gi_cu_scan_mode = mode;
}

/*
 * The directory scan's shape (gi_cuda_ivf_set_dir_shape, a benchmark and
 * test hook): blocks an SM for the query's groups, and words a lane loads
 * before their FMAs (GI_CU_ILP, twice, four or eight times that).  0 is the
 * default: one block an SM for one query, two for more; when the grid is
 * one block an SM or less (the wide kernels' 168 and 255 registers leave
 * room for one block only) eight times the words for vectors of as many,
 * else four times, and twice for larger grids (docs/query-path.md has the
 * measurements).
 */
static int	gi_cu_dir_bps = 0;
static int	gi_cu_dir_ilp = 0;

extern "C" void
gi_cuda_ivf_set_dir_shape(int blocks_per_sm, int ilp)
{
	gi_cu_dir_bps = blocks_per_sm >= 1 && blocks_per_sm <= 8 ? blocks_per_sm : 0;
	gi_cu_dir_ilp = ilp == GI_CU_ILP || ilp == 2 * GI_CU_ILP || ilp == 4 * GI_CU_ILP ||
		ilp == 8 * GI_CU_ILP ? ilp : 0;
}

/* multi-query tiles forced (gi_cuda_ivf_set_tiles, a benchmark and test hook) */
static int	gi_cu_tiles_forced = 0;

extern "C" void
gi_cuda_ivf_set_tiles(int mode)
{
	gi_cu_tiles_forced = mode == 1 ? 1 : 0;
}

/*
 * Slabs of a list a tile block takes from the slab directory
 * (gi_cuda_ivf_set_tile_chunk, a benchmark and test hook): 0 is the
 * default, GI_CU_TILE_CHUNK; below 0 the tiles walk their lists' chains,
 * a block a tile.
 */
static int	gi_cu_tile_chunk = 0;

extern "C" void
gi_cuda_ivf_set_tile_chunk(int slabs)
{
	gi_cu_tile_chunk = slabs;
}

/*
 * Blocks a tile for the longest list (at most GI_CU_TILE_SPLIT, and as
 * many partial lists as the merge takes and the scratch budget holds), or
 * 1 when the tiles walk the chains; *chunk gets the slabs a block, *dir
 * whether the tiles read the slab directory (whenever it is current, also
 * for one block a tile: its slab numbers load in parallel, not a chain).
 */
static uint32_t
gi_cu_tile_split(gi_store *s, gi_cu_ivf *iv, const gi_scan_args &a, size_t units,
				 uint32_t *chunk, bool *dir)
{
	uint32_t	n;

	*chunk = gi_cu_tile_chunk > 0 ? (uint32_t) gi_cu_tile_chunk : GI_CU_TILE_CHUNK;
	*dir = gi_cu_tile_chunk >= 0 && gi_cu_ivf_dir_ready(s, iv);
	if (!*dir)
		return 1;
	n = gi_cu_div_up(iv->dir.maxcount, *chunk);
	if (n > GI_CU_TILE_SPLIT)
		n = GI_CU_TILE_SPLIT;
	while (n > 1 && ((size_t) a.P * n > GI_CU_MAX_GROUPS ||
					 units * n * a.k * (sizeof(float) + sizeof(uint64_t)) > GI_CU_ORDER_BUDGET))
		n /= 2;
	return n < 1 ? 1 : n;
}

/* the directory scan of `blocks` blocks, in the shape's kernel */
static gi_status
gi_cu_scan_dir(gi_store *s, gi_cu_ivf *iv, const gi_scan_args &a, uint32_t blocks, size_t smem)
{
	const uint32_t *dir = (const uint32_t *) iv->dir.d_dir.p;
	const uint32_t *off = (const uint32_t *) iv->dir.d_off.p;
	int			ilp = gi_cu_dir_ilp;

	if (ilp == 0 && blocks > (uint32_t) s->dev->sms)
		ilp = 2 * GI_CU_ILP;
	else if (ilp == 0)
		ilp = a.W >= 8 * GI_CU_ILP ? 8 * GI_CU_ILP : 4 * GI_CU_ILP;
	if (ilp == 8 * GI_CU_ILP)
		gi_k_scan_dir<8 * GI_CU_ILP, 1><<<blocks, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, dir, off);
	else if (ilp == 4 * GI_CU_ILP)
		gi_k_scan_dir<4 * GI_CU_ILP, 1><<<blocks, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, dir, off);
	else if (ilp == 2 * GI_CU_ILP)
		gi_k_scan_dir<2 * GI_CU_ILP, 1><<<blocks, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, dir, off);
	else
		gi_k_scan_dir<GI_CU_ILP, 2><<<blocks, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, dir, off);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/*
 * Blocks a query on the directory scan: its slabs are dealt to the blocks
 * whatever list they belong to, so unlike the chain walk (a group is a
 * set of lists) the query is not held to one block a probed list; blocks
 * on every SM spread one query's slabs over the whole GPU.
 */
static uint32_t
gi_cu_dir_groups(const gi_store *s, uint32_t qc, uint32_t G)
{
	uint32_t	bps = gi_cu_dir_bps ? (uint32_t) gi_cu_dir_bps : qc == 1 ? 1 : 2;
	uint32_t	g = gi_cu_div_up((uint32_t) s->dev->sms * bps, qc);

	if (g < G)
		g = G;
	return g > GI_CU_MAX_GROUPS ? GI_CU_MAX_GROUPS : g;
}

/* see cuda_ivf.h */
bool
gi_cu_ivf_dir_ready(gi_store *s, gi_cu_ivf *iv)
{
	if (gi_cu_ivf_scan_mode() == GI_CU_SCAN_CHAINS ||
		(gi_cu_ivf_scan_mode() == GI_CU_SCAN_AUTO && s->concurrent))
		return false;
	return gi_cu_slabdir_update(s, &iv->dir, s->ss) == GI_OK;
}

static gi_status
gi_cu_fast(gi_store *s, gi_cu_ivf *iv, gi_scan_args a, uint32_t qc, gi_hit *d_hits,
		   uint32_t *d_found)
{
	uint32_t	cap = gi_topk_cap(a.k);
	uint32_t	G = gi_cu_groups(s, qc, a.P);
	size_t		smem = (size_t) cap * (sizeof(uint64_t) + sizeof(float))
		+ GI_CU_SQ * sizeof(uint32_t);
	bool		tiles;
	bool		dir;
	gi_status	st;

	/*
	 * Many queries: one unit per (query, probed list), launched in list
	 * order, so that the blocks resident at a time read the same few lists
	 * and L2 serves most of the slab loads; the merge kernel then combines
	 * each query's P partial lists.  Within a scratch budget only.
	 */
	a.order = NULL;
	tiles = (gi_cu_tiles_forced || (size_t) qc * a.P >= 2 * (size_t) s->params.nlists) &&
		gi_tile_smem(GI_CU_TILE_Q, cap, a.W) <= GI_CU_TILE_SMEM_MAX;
	if ((G == 1 || (tiles && gi_cu_tiles_forced)) && (a.P > 1 || tiles) &&
		a.P <= GI_CU_MAX_GROUPS &&
		(size_t) qc * a.P * a.k * (sizeof(float) + sizeof(uint64_t)) <= GI_CU_ORDER_BUDGET)
	{
		size_t		n = (size_t) qc * a.P;
		int			bits = 1;
		size_t		tmp = 0;

		while (bits < 32 && (1u << bits) < s->params.nlists)
			bits++;
		st = gi_cu_buf_reserve(&iv->s_okey, n * sizeof(uint32_t));
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&iv->s_okey2, n * sizeof(uint32_t));
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&iv->s_oval, n * sizeof(uint32_t));
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&iv->s_order, n * sizeof(uint32_t));
		if (st != GI_OK)
			return st;
		gi_k_order_init<<<gi_cu_div_up(n, 256), 256, 0, s->ss>>>(a.probes, a.P, (uint32_t) n,
																  (uint32_t *) iv->s_okey.p,
																  (uint32_t *) iv->s_oval.p);
		GI_CU_TRY(cudaGetLastError());
		GI_CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp, (const uint32_t *) iv->s_okey.p,
												  (uint32_t *) iv->s_okey2.p,
												  (const uint32_t *) iv->s_oval.p,
												  (uint32_t *) iv->s_order.p, (int64_t) n, 0,
												  bits, s->ss));
		st = gi_cu_buf_reserve(&iv->s_tmp, tmp);
		if (st != GI_OK)
			return st;
		GI_CU_TRY(cub::DeviceRadixSort::SortPairs(iv->s_tmp.p, tmp, (const uint32_t *) iv->s_okey.p,
												  (uint32_t *) iv->s_okey2.p,
												  (const uint32_t *) iv->s_oval.p,
												  (uint32_t *) iv->s_order.p, (int64_t) n, 0,
												  bits, s->ss));
		a.order = (const uint32_t *) iv->s_order.p;
		G = a.P;

		/*
		 * When lists are probed by several queries of the batch on
		 * average, score them in tiles of GI_CU_TILE_Q queries: each slab
		 * is loaded once per tile.  Tiles are found on the device (no
		 * round trip): each list's first unit, a flag on every Q-th unit
		 * of a list, and a stream compaction of the flagged positions.
		 */
		if (tiles)
		{
			size_t		sel = 0;
			uint32_t   *seg;
			uint32_t	grid;
			uint32_t	nsplit;
			uint32_t	chunk;
			bool		tiledir;
			const uint32_t *tdir;
			const uint32_t *toff;

			st = gi_cu_buf_reserve(&iv->s_seg, ((size_t) s->params.nlists + 1) * sizeof(uint32_t));
			if (st == GI_OK)
				st = gi_cu_buf_reserve(&iv->s_tflag, n);
			if (st == GI_OK)
				st = gi_cu_buf_reserve(&iv->s_tile, n * sizeof(uint32_t));
			if (st != GI_OK)
				return st;
			seg = (uint32_t *) iv->s_seg.p;
			gi_k_tile_seg<<<gi_cu_div_up(n, 256), 256, 0, s->ss>>>(
				(const uint32_t *) iv->s_okey2.p, (uint32_t) n, seg);
			GI_CU_TRY(cudaGetLastError());
			gi_k_tile_flag<<<gi_cu_div_up(n, 256), 256, 0, s->ss>>>(
				(const uint32_t *) iv->s_okey2.p, (uint32_t) n, GI_CU_TILE_Q, seg,
				(unsigned char *) iv->s_tflag.p);
			GI_CU_TRY(cudaGetLastError());
			/* s_oval holds 0 .. n-1 (gi_k_order_init); the radix sort read it */
			GI_CU_TRY(cub::DeviceSelect::Flagged(NULL, sel, (const uint32_t *) iv->s_oval.p,
												 (const unsigned char *) iv->s_tflag.p,
												 (uint32_t *) iv->s_tile.p,
												 seg + s->params.nlists, (int64_t) n, s->ss));
			st = gi_cu_buf_reserve(&iv->s_tmp, sel);
			if (st != GI_OK)
				return st;
			GI_CU_TRY(cub::DeviceSelect::Flagged(iv->s_tmp.p, sel, (const uint32_t *) iv->s_oval.p,
												 (const unsigned char *) iv->s_tflag.p,
												 (uint32_t *) iv->s_tile.p,
												 seg + s->params.nlists, (int64_t) n, s->ss));
			nsplit = gi_cu_tile_split(s, iv, a, n, &chunk, &tiledir);
			st = gi_cu_partials(iv, &a, n * nsplit);
			if (st != GI_OK)
				return st;
			a.cap = cap;
			a.G = G * nsplit;
			a.okeys = (const uint32_t *) iv->s_okey2.p;
			a.tiles = (const uint32_t *) iv->s_tile.p;
			a.ntiles = seg + s->params.nlists;
			a.nunits = (uint32_t) n;
			/* at most one partial tile per list beyond n / Q full ones */
			grid = (uint32_t) (n / GI_CU_TILE_Q +
							   (n < s->params.nlists ? n : s->params.nlists));
			smem = gi_tile_smem(GI_CU_TILE_Q, cap, a.W);
			tdir = tiledir ? (const uint32_t *) iv->dir.d_dir.p : NULL;
			toff = tiledir ? (const uint32_t *) iv->dir.d_off.p : NULL;
			if (gi_cu_tile_slabs() == 1)
				st = gi_cu_scan_tiles<1>(s, a, grid * nsplit, smem, tdir, toff, nsplit, chunk);
			else
				st = gi_cu_scan_tiles<2>(s, a, grid * nsplit, smem, tdir, toff, nsplit, chunk);
			if (st != GI_OK)
				return st;
			return gi_cu_merge(s, a, qc, d_hits, d_found);
		}
	}

	dir = G >= GI_CU_DIR_MIN_GROUPS && gi_cu_ivf_dir_ready(s, iv);
	if (dir)
		G = gi_cu_dir_groups(s, qc, G);
	a.cap = cap;
	a.G = G;
	a.hits = d_hits;
	a.found = d_found;
	if (G > 1)
	{
		st = gi_cu_partials(iv, &a, (size_t) qc * G);
		if (st != GI_OK)
			return st;
	}
	if (dir)
	{
		st = gi_cu_scan_dir(s, iv, a, qc * G, smem);
		if (st != GI_OK)
			return st;
	}
	else
	{
		gi_k_scan<false><<<qc * G, GI_CU_SCAN_THREADS, smem, s->ss>>>(a);
		GI_CU_TRY(cudaGetLastError());
	}
	if (G > 1)
		return gi_cu_merge(s, a, qc, d_hits, d_found);
	return GI_OK;
}

/* the IVF kind's appending scan (a gi_cu_append_fn) */
static gi_status
gi_cu_ivf_append(gi_store *s, const gi_scan_args &b, uint32_t nsub, void *arg)
{
	(void) arg;
	gi_k_scan<true><<<nsub * b.G, GI_CU_SCAN_THREADS, GI_CU_SQ * sizeof(uint32_t), s->ss>>>(b);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/* large k on queries [0, qc) of the chunk (see cuda_ivf.h) */
gi_status
gi_cu_general(gi_store *s, gi_cu_ivf *iv, gi_scan_args a, uint32_t qc, gi_hit *d_hits,
			  uint32_t *d_found, gi_cu_append_fn append, void *arg)
{
	unsigned long long *cnt;
	unsigned long long *beg;
	uint32_t	qa;
	uint32_t	qb;
	gi_status	st;

	st = gi_cu_buf_reserve(&iv->s_cnt, (size_t) qc * sizeof(unsigned long long));
	if (st != GI_OK)
		return st;
	if (!gi_cu_hbuf_reserve(&iv->h_cnt, (size_t) qc * sizeof(unsigned long long)) ||
		!gi_cu_hbuf_reserve(&iv->h_beg, ((size_t) qc + 1) * sizeof(unsigned long long)))
	{
		gi_cu_set_error("out of memory for %u query counts", qc);
		return GI_ERR_NOMEM;
	}
	cnt = (unsigned long long *) iv->h_cnt.p;
	beg = (unsigned long long *) iv->h_beg.p;
	gi_k_count<<<gi_cu_div_up(qc, 256), 256, 0, s->ss>>>(a.lists, a.probes, a.P, qc,
														 (unsigned long long *) iv->s_cnt.p);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cudaMemcpyAsync(cnt, iv->s_cnt.p, (size_t) qc * sizeof(unsigned long long),
							  cudaMemcpyDeviceToHost, s->ss));
	GI_CU_TRY(cudaStreamSynchronize(s->ss));

	for (qa = 0; qa < qc; qa = qb)
	{
		int			attempt;
		uint64_t	total = 0;

		/* a sub-chunk whose candidates fit the budget (at least one query) */
		for (qb = qa; qb < qc; qb++)
		{
			if (qb > qa && total + cnt[qb] > GI_CU_GENERAL_BUDGET)
				break;
			total += cnt[qb];
		}

		for (attempt = 0;; attempt++)
		{
			gi_scan_args b = a;
			uint32_t	nsub = qb - qa;
			uint32_t	flags = 0;
			uint32_t	i;
			size_t		tmp_bytes = 0;
			size_t		tmp2 = 0;

			total = 0;
			for (i = 0; i < nsub; i++)
			{
				beg[i] = total;
				total += cnt[qa + i];
			}
			beg[nsub] = total;
			st = gi_cu_buf_reserve(&iv->s_beg, ((size_t) nsub + 1) * sizeof(unsigned long long));
			if (st == GI_OK)
				st = gi_cu_buf_reserve(&iv->s_cur, (size_t) nsub * sizeof(unsigned long long));
			if (st == GI_OK && total > 0)
			{
				st = gi_cu_buf_reserve(&iv->s_gd0, total * sizeof(uint32_t));
				if (st == GI_OK)
					st = gi_cu_buf_reserve(&iv->s_gk0, total * sizeof(uint64_t));
				if (st == GI_OK)
					st = gi_cu_buf_reserve(&iv->s_gd1, total * sizeof(uint32_t));
				if (st == GI_OK)
					st = gi_cu_buf_reserve(&iv->s_gk1, total * sizeof(uint64_t));
			}
			if (st != GI_OK)
				return st;
			GI_CU_TRY(cudaMemcpyAsync(iv->s_beg.p, beg, ((size_t) nsub + 1) * sizeof(unsigned long long),
									  cudaMemcpyHostToDevice, s->ss));
			GI_CU_TRY(cudaMemcpyAsync(iv->s_cur.p, iv->s_beg.p, (size_t) nsub * sizeof(unsigned long long),
									  cudaMemcpyDeviceToDevice, s->ss));
			if (total > 0)
			{
				unsigned long long *d_beg = (unsigned long long *) iv->s_beg.p;
				unsigned long long *d_cur = (unsigned long long *) iv->s_cur.p;

				b.queries = a.queries + (size_t) qa * a.D;
				b.qnorm = a.qnorm + qa;
				b.qnormd = a.qnormd ? a.qnormd + qa : NULL;
				b.probes = a.probes ? a.probes + (size_t) qa * a.P : NULL;
				b.G = gi_cu_groups(s, nsub, a.P);
				b.cap = 0;
				b.gd = (uint32_t *) iv->s_gd0.p;
				b.gk = (uint64_t *) iv->s_gk0.p;
				b.cur = d_cur;
				b.end = d_beg + 1;
				GI_CU_TRY(cudaMemsetAsync(a.flags, 0, sizeof(uint32_t), s->ss));
				st = append(s, b, nsub, arg);
				if (st != GI_OK)
					return st;
				GI_CU_TRY(cudaMemcpyAsync(&flags, a.flags, sizeof(uint32_t),
										  cudaMemcpyDeviceToHost, s->ss));
				GI_CU_TRY(cudaStreamSynchronize(s->ss));
				if (flags & GI_CU_FLAG_OVERFLOW)
				{
					/* lists grew under a concurrent insert: count again */
					if (attempt >= 4)
					{
						gi_cu_set_error("the store kept changing during a search");
						return GI_ERR_DEVICE;
					}
					gi_k_count<<<gi_cu_div_up(nsub, 256), 256, 0, s->ss>>>(
						a.lists, b.probes, a.P, nsub, (unsigned long long *) iv->s_cnt.p);
					GI_CU_TRY(cudaGetLastError());
					GI_CU_TRY(cudaMemcpyAsync(cnt + qa, iv->s_cnt.p,
											  (size_t) nsub * sizeof(unsigned long long),
											  cudaMemcpyDeviceToHost, s->ss));
					GI_CU_TRY(cudaStreamSynchronize(s->ss));
					continue;
				}
				if (flags & GI_CU_FLAG_CHAIN)
				{
					gi_cu_set_error("CUDA store inconsistent: a slab chain is longer than the pool");
					return GI_ERR_DEVICE;
				}

				/* (distance, key) order: stable sort by key, then by distance */
				GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(
					NULL, tmp_bytes, (const uint64_t *) iv->s_gk0.p, (uint64_t *) iv->s_gk1.p,
					(const uint32_t *) iv->s_gd0.p, (uint32_t *) iv->s_gd1.p,
					(int64_t) total, (int64_t) nsub, d_beg, d_cur, s->ss));
				GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(
					NULL, tmp2, (const uint32_t *) iv->s_gd1.p, (uint32_t *) iv->s_gd0.p,
					(const uint64_t *) iv->s_gk1.p, (uint64_t *) iv->s_gk0.p,
					(int64_t) total, (int64_t) nsub, d_beg, d_cur, s->ss));
				if (tmp2 > tmp_bytes)
					tmp_bytes = tmp2;
				st = gi_cu_buf_reserve(&iv->s_tmp, tmp_bytes);
				if (st != GI_OK)
					return st;
				GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(
					iv->s_tmp.p, tmp_bytes, (const uint64_t *) iv->s_gk0.p, (uint64_t *) iv->s_gk1.p,
					(const uint32_t *) iv->s_gd0.p, (uint32_t *) iv->s_gd1.p,
					(int64_t) total, (int64_t) nsub, d_beg, d_cur, s->ss));
				GI_CU_TRY(cub::DeviceSegmentedSort::StableSortPairs(
					iv->s_tmp.p, tmp_bytes, (const uint32_t *) iv->s_gd1.p, (uint32_t *) iv->s_gd0.p,
					(const uint64_t *) iv->s_gk1.p, (uint64_t *) iv->s_gk0.p,
					(int64_t) total, (int64_t) nsub, d_beg, d_cur, s->ss));
			}
			gi_k_general_out<<<nsub, 256, 0, s->ss>>>(
				(const unsigned long long *) iv->s_beg.p, (const unsigned long long *) iv->s_cur.p,
				(const uint32_t *) iv->s_gd0.p, (const uint64_t *) iv->s_gk0.p, a.k,
				d_hits + (size_t) qa * a.k, d_found + qa);
			GI_CU_TRY(cudaGetLastError());
			break;
		}
	}
	return GI_OK;
}

/* see cuda_ivf.h */
gi_status
gi_cu_fine(gi_store *s, gi_cu_ivf *iv, uint32_t qc, const uint32_t *probe_lists,
		   uint32_t P, uint32_t k, gi_hit *d_hits, uint32_t *d_found, void *arg)
{
	gi_scan_args a;

	(void) arg;

	memset(&a, 0, sizeof(a));
	a.lists = s->d_lists;
	a.slabs = s->d_slabs;
	a.queries = (const float *) iv->s_q.p;
	a.qnorm = (const float *) iv->s_qn.p;
	a.qnormd = (const double *) iv->s_qnd.p;
	a.probes = probe_lists;
	a.P = P;
	a.W = s->words;
	a.D = s->words;
	a.k = k;
	a.max_steps = s->nslabs;
	a.metric = (int) iv->metric;
	a.flags = s->d_flags + 1;
	if (k <= GI_CU_FAST_K)
		return gi_cu_fast(s, iv, a, qc, d_hits, d_found);
	return gi_cu_general(s, iv, a, qc, d_hits, d_found, gi_cu_ivf_append, NULL);
}
