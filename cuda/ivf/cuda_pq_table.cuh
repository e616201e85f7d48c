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

#endif							/* GI_CUDA_PQ_TABLE_CUH */
