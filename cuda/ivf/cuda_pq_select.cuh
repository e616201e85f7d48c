/*
 * cuda_pq_select.cuh
 *		The selective IVF-PQ modes (JUNO's threshold search and its hit
 *		counts, gi_pq_select.h) inside cuda_ivfpq_scan.cu's fine scan: what
 *		the block does with a list's table before scoring its slots, and a
 *		slot's score.
 *
 * Per list the block finds each sub-space's smallest table value (a
 * warp per sub-space, lowest entry on ties as the host's loop), its
 * thresholds from the density table, and turns the table in place into
 * 32-bit rewards; a slot's score is the sum of its codes' rewards, which
 * no order of addition changes.  Thresholds, rewards and the estimate are
 * gi_pq_select.h's functions, so the answers are the host's bit for bit.
 */
#ifndef GI_CUDA_PQ_SELECT_CUH
#define GI_CUDA_PQ_SELECT_CUH

#include "cuda_pq_table.cuh"
#include "cuda_topk.cuh"
#include "cuda_walk.cuh"
#include "gi_pq_select.h"

/* floats of a (query, list)'s table and per-sub-space values */
static inline __host__ __device__ size_t
gi_pq_sel_table_floats(uint32_t m, uint32_t ksub)
{
	return (size_t) m * ksub + 3 * (size_t) m;
}

/* the rank of slot `lane` of a slab from its BITS-bit codes' rewards */
template <uint32_t BITS>
__device__ __forceinline__ float
gi_pq_sel_slot(int metric, const gi_pq_args &g, const uint32_t *data, uint32_t W,
			   const uint32_t *reward, double sum_tau, double unit, double qc,
			   double qn, uint32_t lane)
{
	uint32_t	acc = 0;

	gi_pq_slot_codes<BITS>(g, data, W, lane, [&] (uint32_t sub, uint32_t code) {
		if (code < g.ksub)
			acc += reward[(size_t) sub * g.ksub + code];
	});
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

/* what the slots of a list need from its thresholds (shared memory) */
struct gi_pq_sel_sums
{
	double		sum_tau;		/* sum of the thresholds, sub-space order */
	double		factor;			/* gi_pq_factor */
	double		unit;			/* gi_pq_unit */
};

/*
 * Block-wide, once the list's table is built and the block synchronised:
 * the thresholds, the sums over sub-spaces in sub-space order (one thread,
 * as the host), then the table turned in place into rewards.  Returns with
 * the block synchronised.
 */
__device__ __forceinline__ void
gi_pq_sel_prepare(int metric, const gi_pq_args &g, const float *qv, float *lut,
				  gi_pq_sel_sums &ss)
{
	const uint32_t nlut = g.m * g.ksub;
	uint32_t   *reward = (uint32_t *) lut;
	float	   *tau = lut + nlut;
	float	   *tau_in = tau + g.m;
	float	   *vmin = tau_in + g.m;

	gi_pq_sel_thresholds(metric, g, qv, lut, tau, tau_in, vmin);
	__syncthreads();
	if (threadIdx.x == 0)
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
		ss.sum_tau = sum;
		ss.factor = gi_pq_factor(rmax, g.rcap);
		ss.unit = gi_pq_unit(g.mode, ss.factor, span, g.m);
	}
	__syncthreads();
	for (uint32_t t = threadIdx.x; t < nlut; t += blockDim.x)
	{
		const uint32_t s = t / g.ksub;
		float		v = lut[t];

		reward[t] = gi_pq_reward(g.mode, metric == GI_METRIC_L2 ? v : -v, tau_in[s], tau[s],
								 ss.factor, g.rcap);
	}
	__syncthreads();
}

#endif							/* GI_CUDA_PQ_SELECT_CUH */
