/*
 * cuda_pq_select.cuh
 *		The fine scan of the selective IVF-PQ modes (JUNO's threshold search
 *		and its hit counts, gi_pq_select.h), launched by cuda_ivfpq_scan.cu
 *		like the look-up-table scan and shaped like it: a block per unit
 *		(query, group of probed lists), the list's chain walked ahead into a
 *		shared queue while the block fills the table.
 *
 * Per list the block then finds each sub-space's smallest table value (a
 * warp per sub-space, lowest entry on ties as the host's loop), its
 * thresholds from the density table, and turns the table in place into
 * 32-bit rewards; a slot's score is the sum of its codes' rewards, which
 * no order of addition changes.  Thresholds, rewards and the estimate are
 * gi_pq_select.h's functions, so the answers are the host's bit for bit.
 */
#ifndef GI_CUDA_PQ_SELECT_CUH
#define GI_CUDA_PQ_SELECT_CUH

#include "cuda_pq_table.cuh"
#include "cuda_scan.cuh"
#include "cuda_topk.cuh"
#include "cuda_walk.cuh"
#include "gi_pq_select.h"

/* floats of a (query, list)'s table and per-sub-space values */
static inline __host__ __device__ size_t
gi_pq_sel_table_floats(uint32_t m, uint32_t ksub)
{
	return (size_t) m * ksub + 3 * (size_t) m;
}

/* the rank of slot `lane` of a slab from its codes' rewards */
__device__ __forceinline__ float
gi_pq_sel_slot(int metric, const gi_pq_args &g, const uint32_t *data, uint32_t W,
			   const uint32_t *reward, double sum_tau, double unit, double qc,
			   double qn, uint32_t lane)
{
	const unsigned int *p = gi_slot_payload(data, lane);
	uint32_t	acc = 0;

	for (uint32_t w = 0; w < W; w++)
	{
		uint32_t	word = __ldcg(p + GI_SLAB_WORD(w));
		uint32_t	nb = g.m - w * 4 < 4 ? g.m - w * 4 : 4;
		const uint32_t *row = reward + (size_t) w * 4 * g.ksub;

		for (uint32_t j = 0; j < nb; j++)
		{
			uint32_t	code = (word >> (8 * j)) & 0xFFu;

			if (code < g.ksub)
				acc += row[(size_t) j * g.ksub + code];
		}
	}
	return gi_rank_float(gi_pq_estimate((uint32_t) metric, acc, sum_tau, unit, qc, qn));
}

/*
 * The thresholds of sub-spaces warp, warp + nwarps, ...: the smallest
 * value v (distance sense) and its entry by a warp reduction, then lane 0
 * writes tau, the inner tau and vmin.
 */
__device__ __forceinline__ void
gi_pq_sel_thresholds(int metric, const gi_pq_args &g, const float *qv, const float *lut,
					 float *tau, float *tau_in, float *vmin)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t warp = threadIdx.x >> 5;
	const uint32_t nwarps = blockDim.x >> 5;

	for (uint32_t s = warp; s < g.m; s += nwarps)
	{
		float		best = 0.0f;
		uint32_t	be = UINT32_MAX;

		for (uint32_t e = lane; e < g.ksub; e += 32)
		{
			float		t = lut[(size_t) s * g.ksub + e];
			float		v = metric == GI_METRIC_L2 ? t : -t;

			if (be == UINT32_MAX || v < best)
			{
				best = v;
				be = e;
			}
		}
		for (int off = 16; off > 0; off >>= 1)
		{
			float		ov = __shfl_down_sync(GI_CU_FULL_MASK, best, off);
			uint32_t	oe = __shfl_down_sync(GI_CU_FULL_MASK, be, off);

			if (oe != UINT32_MAX &&
				(be == UINT32_MAX || ov < best || (!(best < ov) && oe < be)))
			{
				best = ov;
				be = oe;
			}
		}
		if (lane == 0)
		{
			double		qn = 0.0;
			float		t;

			if (metric != GI_METRIC_L2)
			{
				for (uint32_t j = 0; j < g.dsub; j++)
				{
					double		x = (double) qv[(size_t) s * g.dsub + j];

					qn = __dadd_rn(qn, __dmul_rn(x, x));
				}
				qn = __dsqrt_rn(qn);
			}
			t = gi_pq_threshold((uint32_t) metric, best,
								g.radii[((size_t) g.level * g.m + s) * g.ksub + be], qn, g.scale);
			tau[s] = t;
			tau_in[s] = g.mode != GI_PQ_SEARCH_HITS ? t :
				gi_pq_threshold((uint32_t) metric, best,
								g.radii[((size_t) g.level_in * g.m + s) * g.ksub + be], qn,
								g.scale);
			vmin[s] = best;
		}
	}
}

/*
 * One block per unit u = g.unit0 + blockIdx.x, as gi_k_pq_scan.  Shared
 * memory: the top-k buffer, the slab queue, then unless g.glut the table
 * (m * ksub words, floats then rewards) and tau, inner tau, vmin (m each).
 */
template <bool APPEND>
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS)
gi_k_pq_sel_scan(gi_scan_args a, gi_pq_args g)
{
	extern __shared__ __align__(16) unsigned char gi_smem[];
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + a.cap);
	uint32_t   *queue = (uint32_t *) (sd + a.cap);
	float	   *lut = g.glut ? g.glut + (size_t) blockIdx.x * gi_pq_sel_table_floats(g.m, g.ksub)
		: (float *) (queue + GI_CU_SQ);
	uint32_t   *reward = (uint32_t *) lut;
	float	   *tau = lut + (size_t) g.m * g.ksub;
	float	   *tau_in = tau + g.m;
	float	   *vmin = tau_in + g.m;
	__shared__ gi_topk_state ts;
	__shared__ uint32_t qlen;
	__shared__ uint32_t next;
	__shared__ double sbase;
	__shared__ double ssum;
	__shared__ double sunit;
	__shared__ double sfactor;
	const uint32_t tid = threadIdx.x;
	const uint32_t warp = tid >> 5;
	const uint32_t nwarps = blockDim.x >> 5;
	const uint32_t u = g.unit0 + blockIdx.x;
	const uint32_t q = u / a.G;
	const uint32_t grp = u % a.G;
	const uint32_t p0 = (uint32_t) ((uint64_t) grp * a.P / a.G);
	const uint32_t p1 = (uint32_t) ((uint64_t) (grp + 1) * a.P / a.G);
	const float *qv = a.queries + (size_t) q * a.D;
	const double qn = a.qnormd[q];
	const uint32_t nlut = g.m * g.ksub;
	uint32_t	steps = 0;

	gi_topk_init(ts);
	for (uint32_t pi = p0; pi < p1; pi++)
	{
		const uint32_t l = a.probes ? a.probes[(size_t) q * a.P + pi] : pi;
		const float *c = g.cent + (size_t) l * a.D;
		double		base;
		double		sum_tau;
		double		unit;
		uint32_t	t;

		/* the previous list's slabs are scored: queue and table are free */
		__syncthreads();
		if (tid == 0)
		{
			uint32_t	cur = gi_list_head(a.lists, l);

			steps = 0;
			qlen = gi_walk_ahead(a.slabs, &cur, GI_CU_SQ, &steps, a.max_steps, a.flags,
								 queue);
			next = cur;
		}
		if (tid == 32 % blockDim.x)
		{
			double		qc = 0.0;

			if (a.metric != GI_METRIC_L2)
				for (t = 0; t < a.D; t++)
					qc = __dadd_rn(qc, __dmul_rn((double) qv[t], (double) c[t]));
			sbase = qc;
		}
		for (t = tid; t < nlut; t += blockDim.x)
			lut[t] = gi_pq_lut_entry(a.metric, g, qv, c, t);
		__syncthreads();
		gi_pq_sel_thresholds(a.metric, g, qv, lut, tau, tau_in, vmin);
		__syncthreads();
		/* the sums over sub-spaces in sub-space order, as the host */
		if (tid == 0)
		{
			double		sum = 0.0;
			double		span = 0.0;
			double		rmax = 0.0;

			for (uint32_t s = 0; s < g.m; s++)
			{
				double		d = __dsub_rn((double) tau[s], (double) vmin[s]);

				sum = __dadd_rn(sum, (double) tau[s]);
				span = __dadd_rn(span, d);
				if (d > rmax)
					rmax = d;
			}
			ssum = sum;
			sfactor = gi_pq_factor(rmax, g.rcap);
			sunit = gi_pq_unit(g.mode, sfactor, span, g.m);
		}
		__syncthreads();
		for (t = tid; t < nlut; t += blockDim.x)
		{
			const uint32_t s = t / g.ksub;
			float		v = lut[t];

			reward[t] = gi_pq_reward(g.mode, a.metric == GI_METRIC_L2 ? v : -v, tau_in[s],
									 tau[s], sfactor, g.rcap);
		}
		__syncthreads();
		base = sbase;
		sum_tau = ssum;
		unit = sunit;

		for (;;)
		{
			const uint32_t nq = qlen;
			const bool	more = next != GI_NIL;

			for (uint32_t b = 0; b < nq; b += nwarps)
			{
				uint32_t	i = b + warp;

				if (i < nq)
				{
					uint32_t	slab = queue[i];
					uint32_t	bm = gi_slab_bitmap(a.slabs, slab);

					if (bm != 0)
					{
						const uint32_t lane = tid & 31;
						const uint32_t *data = gi_slab_data(a.slabs, slab);
						float		d = gi_pq_sel_slot(a.metric, g, data, a.W, reward, sum_tau,
													   unit, base, qn, lane);
						bool		valid = gi_slot_live(bm, lane);
						uint64_t	key = valid ? gi_slot_key(data, a.W, lane) : 0;

						if (APPEND)
							gi_append(a, q, valid, d, key);
						else
							gi_topk_offer(ts, sd, sk, valid, d, key);
					}
				}
				if (!APPEND && gi_topk_need_flush(ts, a.cap))
					gi_topk_flush(ts, sd, sk, a.cap, a.k);
			}
			/* every warp is done with the queue */
			__syncthreads();
			if (!more)
				break;
			if (tid == 0)
			{
				uint32_t	cur = next;

				qlen = gi_walk_ahead(a.slabs, &cur, GI_CU_SQ, &steps, a.max_steps,
									 a.flags, queue);
				next = cur;
			}
			__syncthreads();
		}
	}

	if (!APPEND)
		gi_scan_finish(a, ts, sd, sk, q, u);
}

#endif							/* GI_CUDA_PQ_SELECT_CUH */
