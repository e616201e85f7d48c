/*
 * cuda_pq_table.cuh
 *		What the IVF-PQ fine scan (cuda_ivfpq_scan.cu, the look-up-table
 *		search and the selective modes) and its helpers share: the kernel
 *		arguments and one entry of a (query, list)'s table, computed as
 *		host_ivfpq.c does.
 */
#ifndef GI_CUDA_PQ_TABLE_CUH
#define GI_CUDA_PQ_TABLE_CUH

#include "cuda_ivfpq.h"
#include "cuda_util.cuh"
#include "cuda_walk.cuh"

/* global-memory tables of one launch, at most (bytes) */
#define GI_CU_PQ_LUT_BUDGET	((size_t) 256 << 20)
/* dynamic shared memory without opting in */
#define GI_CU_SMEM_DEFAULT	((size_t) 48 << 10)

struct gi_pq_args
{
	const float *cent;			/* [nlists x dim] */
	const float *books;			/* [m x ksub x dsub] */
	float	   *glut;			/* a table per block of the launch; NULL: shared */
	uint32_t	m;
	uint32_t	ksub;
	uint32_t	dsub;
	uint32_t	unit0;			/* unit of the launch's block 0 */
	uint32_t	resid;			/* 1: the block stages the query (L2: q - c) in shared memory */
	/* the store's slab directory (cuda_slabdir.h), or NULL: walk the chains */
	const uint32_t *dir;
	const uint32_t *dir_off;
	/* the selective modes (gi_pq_select.h) */
	const float *radii;			/* [GI_PQ_LEVELS x m x ksub] density table */
	uint32_t	mode;			/* gi_pq_search_mode */
	uint32_t	level;			/* density level of the threshold */
	uint32_t	level_in;		/* hits: of the inner threshold */
	uint32_t	rcap;			/* gi_pq_reward_max(m) */
	float		scale;
};

/* one search's argument to the fine scan: the kind, and g's mode fields set */
struct gi_cu_pq_call
{
	gi_cu_ivfpq *pq;
	gi_pq_args	g;
};

/*
 * Entry t = s * ksub + e of the table of query qv and list centroid c
 * (host_ivfpq.c's gi_host_pq_lut): L2 sums (q - c - e)^2 over the
 * sub-space, IP and cosine q.e.
 */
__device__ __forceinline__ float
gi_pq_lut_entry(int metric, const gi_pq_args &g, const float *qv, const float *c,
				uint32_t t)
{
	const uint32_t s = t / g.ksub;
	const float *qs = qv + (size_t) s * g.dsub;
	const float *cs = c + (size_t) s * g.dsub;
	const float *ev = g.books + (size_t) t * g.dsub;
	double		acc = 0.0;
	uint32_t	j;

	if (metric == GI_METRIC_L2)
	{
		for (j = 0; j < g.dsub; j++)
		{
			double		d = __dsub_rn(__dsub_rn((double) qs[j], (double) cs[j]),
									  (double) ev[j]);

			acc = __dadd_rn(acc, __dmul_rn(d, d));
		}
	}
	else
	{
		for (j = 0; j < g.dsub; j++)
			acc = __dadd_rn(acc, __dmul_rn((double) qs[j], (double) ev[j]));
	}
	return __double2float_rn(acc);
}

/*
 * The same entry from the query staged in shared memory as doubles (L2:
 * the residual q - c, each (double) q - (double) c as above; IP and
 * cosine: the query), which saves the block two global loads an entry.
 */
__device__ __forceinline__ float
gi_pq_lut_entry_staged(int metric, const gi_pq_args &g, const double *rd, uint32_t t)
{
	const uint32_t s = t / g.ksub;
	const double *rs = rd + (size_t) s * g.dsub;
	const float *ev = g.books + (size_t) t * g.dsub;
	double		acc = 0.0;
	uint32_t	j;

	if (metric == GI_METRIC_L2)
	{
		for (j = 0; j < g.dsub; j++)
		{
			double		d = __dsub_rn(rs[j], (double) ev[j]);

			acc = __dadd_rn(acc, __dmul_rn(d, d));
		}
	}
	else
	{
		for (j = 0; j < g.dsub; j++)
			acc = __dadd_rn(acc, __dmul_rn(rs[j], (double) ev[j]));
	}
	return __double2float_rn(acc);
}

/* code words of a slot read before any is used */
#define GI_PQ_WORDS_AHEAD	16

/*
 * visit(s, code) for each code of slot `lane` of a slab, in sub-space
 * order, with BITS-bit codes: word w of the slot holds the 32 / BITS codes
 * from sub-space w * 32 / BITS on, from its low bits up.  Up to
 * GI_PQ_WORDS_AHEAD words are loaded before the first visit, so that their
 * loads overlap.  The kernels are instantiated per code width.
 */
template <uint32_t BITS, typename V>
__device__ __forceinline__ void
gi_pq_slot_codes(const gi_pq_args &g, const uint32_t *data, uint32_t W, uint32_t lane,
				 V visit)
{
	constexpr uint32_t per = 32 / BITS;
	constexpr uint32_t mask = (1u << BITS) - 1u;
	const unsigned int *p = gi_slot_payload(data, lane);

	if (W <= GI_PQ_WORDS_AHEAD)
	{
		uint32_t	ahead[GI_PQ_WORDS_AHEAD];

#pragma unroll
		for (uint32_t w = 0; w < GI_PQ_WORDS_AHEAD; w++)
			ahead[w] = w < W ? __ldcg(p + GI_SLAB_WORD(w)) : 0u;
#pragma unroll
		for (uint32_t w = 0; w < GI_PQ_WORDS_AHEAD; w++)
		{
			const uint32_t nb = w < W ? (g.m - w * per < per ? g.m - w * per : per) : 0;

#pragma unroll
			for (uint32_t j = 0; j < per; j++)
			{
				if (j >= nb)
					break;
				visit(w * per + j, (ahead[w] >> (BITS * j)) & mask);
			}
		}
		return;
	}
	for (uint32_t w = 0; w < W; w++)
	{
		const uint32_t word = __ldcg(p + GI_SLAB_WORD(w));
		const uint32_t nb = g.m - w * per < per ? g.m - w * per : per;

		for (uint32_t j = 0; j < nb; j++)
			visit(w * per + j, (word >> (BITS * j)) & mask);
	}
}

/*
 * The whole table from the staged query, the block's threads together:
 * for 2-d sub-spaces each thread loads the entries of four rounds before
 * computing them (the loads overlap), each entry computed as
 * gi_pq_lut_entry_staged does; other sub-space sizes entry by entry.
 */
__device__ __forceinline__ void
gi_pq_fill_staged(int metric, const gi_pq_args &g, const double *rd, float *lut)
{
	const uint32_t nlut = g.m * g.ksub;
	const uint32_t nt = blockDim.x;
	uint32_t	t0;

	if (g.dsub != 2)
	{
		for (t0 = threadIdx.x; t0 < nlut; t0 += nt)
			lut[t0] = gi_pq_lut_entry_staged(metric, g, rd, t0);
		return;
	}
	for (t0 = threadIdx.x; t0 < nlut; t0 += 4 * nt)
	{
		float2		e[4];

#pragma unroll
		for (uint32_t i = 0; i < 4; i++)
			if (t0 + i * nt < nlut)
				e[i] = __ldg((const float2 *) g.books + t0 + i * nt);
#pragma unroll
		for (uint32_t i = 0; i < 4; i++)
		{
			const uint32_t t = t0 + i * nt;
			const double *rs = rd + (size_t) (t / g.ksub) * 2;
			double		acc = 0.0;

			if (t >= nlut)
				break;
			if (metric == GI_METRIC_L2)
			{
				double		d0 = __dsub_rn(rs[0], (double) e[i].x);
				double		d1;

				acc = __dadd_rn(acc, __dmul_rn(d0, d0));
				d1 = __dsub_rn(rs[1], (double) e[i].y);
				acc = __dadd_rn(acc, __dmul_rn(d1, d1));
			}
			else
			{
				acc = __dadd_rn(acc, __dmul_rn(rs[0], (double) e[i].x));
				acc = __dadd_rn(acc, __dmul_rn(rs[1], (double) e[i].y));
			}
			lut[t] = __double2float_rn(acc);
		}
	}
}

#endif							/* GI_CUDA_PQ_TABLE_CUH */
