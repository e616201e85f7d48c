/*
 * cuda_quantizer.cu
 *		The coarse quantizer: which lists each query probes.
 *
 * Three steps per chunk of queries:
 *
 *	1. cuBLAS DGEMM of the centroids against the queries, turned into
 *	   approximate distances with |q|^2 - 2 q.c + |c|^2 (L2), -q.c (inner
 *	   product) or 1 - q.c / (|q| |c|) (cosine).  Double, not float: the
 *	   expanded L2 form cancels badly when the data sit far from the
 *	   origin (|q|^2 >> distance), and in float that reorders lists; in
 *	   double the error is ~1e-16 of the norms.  H100/H200 run DGEMM on
 *	   their FP64 tensor cores, so this costs little.
 *	2. Radix select of the P + GI_CU_MARGIN best lists per query.
 *	3. Refinement: the exact distance to each of those candidates,
 *	   computed in the host's order with IEEE double operations that are
 *	   never contracted (__dadd_rn, __dmul_rn, ...), so it is bit for bit
 *	   the host reference's; then a radix select of the P best by
 *	   (distance, list number).  The probed set is therefore the host's
 *	   set, which is what lets the differential test demand equal ids.
 *
 * When P + margin covers every list the GEMM is skipped and all lists are
 * refined; when P covers every list nothing is computed at all.  The
 * centroids, their double copy and their norms are prepared once, when
 * the kind's state is set (gi_cu_ivf_centroids).
 */
#include <cublas_v2.h>

#include "cuda_ivf.h"
#include "cuda_topk.cuh"
#include "cuda_util.cuh"

/* extra candidates of the approximate step, refined exactly */
#define GI_CU_MARGIN 32

/* batches of at most this many queries skip the DGEMM (see gi_cu_coarse) */
#define GI_CU_COARSE_DIRECT 8

/* ---- centroids ----------------------------------------------------------- */

/* per centroid: double copy for the DGEMM and |c|^2 summed like the host */
__global__ void
gi_k_centprep(const float *__restrict__ c, uint32_t nl, uint32_t W,
			  double *cd, double *cn)
{
	uint32_t	l = blockIdx.x * blockDim.x + threadIdx.x;
	const float *v;
	double		s = 0.0;
	uint32_t	j;

	if (l >= nl)
		return;
	v = c + (size_t) l * W;
	for (j = 0; j < W; j++)
	{
		double		x = (double) v[j];

		s = __dadd_rn(s, __dmul_rn(x, x));
		cd[(size_t) l * W + j] = x;
	}
	cn[l] = s;
}

/*
 * set_state: the centroids go to the device once per store, with their
 * double copy and norms, on the search stream; the caller synchronises.
 */
gi_status
gi_cu_ivf_centroids(gi_store *s, gi_cu_ivf *iv, const float *centroids)
{
	size_t		n = (size_t) s->params.nlists * iv->dim;

	if (iv->d_cent == NULL)
	{
		GI_CU_TRY(cudaMalloc((void **) &iv->d_cent, n * sizeof(float)));
		GI_CU_TRY(cudaMalloc((void **) &iv->d_centd, n * sizeof(double)));
		GI_CU_TRY(cudaMalloc((void **) &iv->d_cnorm, s->params.nlists * sizeof(double)));
	}
	GI_CU_TRY(cudaMemcpyAsync(iv->d_cent, centroids, n * sizeof(float),
							  cudaMemcpyHostToDevice, s->ss));
	gi_k_centprep<<<gi_cu_div_up(s->params.nlists, 128), 128, 0, s->ss>>>(
		iv->d_cent, s->params.nlists, iv->dim, iv->d_centd, iv->d_cnorm);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/* ---- queries --------------------------------------------------------------- */

/*
 * |q|^2 of one query in float (fine scan) and in host-order double
 * (coarse), and its double copy qd (or NULL); warp-collective, every lane
 * gets both sums.  Lanes load 32 dimensions at a time (coalesced), and
 * every lane adds their squares in dimension order, so both sums are the
 * host's, operation for operation, as in gi_k_refine_all.
 */
__device__ __forceinline__ void
gi_qnorms(const float *__restrict__ v, uint32_t W, float *fn, double *dn, double *qd)
{
	const uint32_t lane = threadIdx.x & 31;
	float		f = 0.0f;
	double		d = 0.0;

	for (uint32_t j0 = 0; j0 < W; j0 += 32)
	{
		uint32_t	j = j0 + lane;
		uint32_t	n = W - j0 < 32 ? W - j0 : 32;
		float		x = j < W ? v[j] : 0.0f;
		double		t = __dmul_rn((double) x, (double) x);

		if (qd && j < W)
			qd[j] = (double) x;
		for (uint32_t e = 0; e < n; e++)
		{
			float		xe = __shfl_sync(GI_CU_FULL_MASK, x, e);

			f = fmaf(xe, xe, f);
			d = __dadd_rn(d, __shfl_sync(GI_CU_FULL_MASK, t, e));
		}
	}
	*fn = f;
	*dn = d;
}

/* the norms and qd of every query, one warp a query */
#define GI_CU_QPREP_WARPS 8

__global__ void __launch_bounds__(GI_CU_QPREP_WARPS * 32)
gi_k_qprep(const float *__restrict__ q, uint32_t qc, uint32_t W, float *qn,
		   double *qnd, double *qd)
{
	const uint32_t i = blockIdx.x * GI_CU_QPREP_WARPS + (threadIdx.x >> 5);
	float		f;
	double		d;

	if (i >= qc)
		return;					/* warp-uniform */
	gi_qnorms(q + (size_t) i * W, W, &f, &d, qd ? qd + (size_t) i * W : NULL);
	if ((threadIdx.x & 31) == 0)
	{
		qn[i] = f;
		qnd[i] = d;
	}
}

/* ---- step 1: approximate distances, in place as ordered keys --------------- */

__global__ void
gi_k_approx(double *g, uint32_t nl, uint32_t qc, int metric,
			const double *__restrict__ qnd, const double *__restrict__ cn)
{
	size_t		total = (size_t) nl * qc;
	size_t		idx;

	for (idx = (size_t) blockIdx.x * blockDim.x + threadIdx.x; idx < total;
		 idx += (size_t) gridDim.x * blockDim.x)
	{
		uint32_t	q = (uint32_t) (idx / nl);
		uint32_t	l = (uint32_t) (idx % nl);
		double		dot = g[idx];
		double		v;

		if (metric == GI_METRIC_L2)
			v = qnd[q] + cn[l] - 2.0 * dot;
		else if (metric == GI_METRIC_IP)
			v = -dot;
		else if (qnd[q] == 0.0 || cn[l] == 0.0)
			v = __longlong_as_double(0x7ff0000000000000LL);
		else
			v = 1.0 - dot / (sqrt(qnd[q]) * sqrt(cn[l]));
		((uint64_t *) g)[idx] = gi_d2ord(gi_rank_double(v));
	}
}

/* ---- step 2: the m best lists by approximate distance ---------------------- */

__global__ void __launch_bounds__(256)
gi_k_select_lists(const uint64_t *__restrict__ keys, uint32_t nl, uint32_t m,
				  uint32_t *cand)
{
	__shared__ gi_sel_smem sm;
	const uint64_t *row = keys + (size_t) blockIdx.x * nl;

	gi_block_select(nl, m,
					[&](uint32_t i) { return row[i]; },
					[](uint32_t i) { return i; },
					cand + (size_t) blockIdx.x * m, sm);
}

/* ---- step 3: exact (host-identical) distances and the final P ------------- */

__global__ void __launch_bounds__(256)
gi_k_refine(const uint32_t *__restrict__ cand, uint32_t pp, uint32_t P,
			const float *__restrict__ cent, uint32_t W,
			const float *__restrict__ queries, const double *__restrict__ qnd,
			const double *__restrict__ cn, int metric, uint64_t *rkey,
			uint32_t *probes)
{
	__shared__ gi_sel_smem sm;
	const uint32_t q = blockIdx.x;
	const float *qv = queries + (size_t) q * W;
	const uint32_t *cq = cand ? cand + (size_t) q * pp : NULL;
	uint64_t   *rk = rkey + (size_t) q * pp;
	uint32_t	i;

	for (i = threadIdx.x; i < pp; i += blockDim.x)
	{
		uint32_t	l = cq ? cq[i] : i;
		const float *c = cent + (size_t) l * W;
		double		acc = 0.0;
		double		v;
		uint32_t	j;

		/* the host's gi_host_vec_distance, operation for operation */
		if (metric == GI_METRIC_L2)
		{
			for (j = 0; j < W; j++)
			{
				double		d = __dsub_rn((double) c[j], (double) qv[j]);

				acc = __dadd_rn(acc, __dmul_rn(d, d));
			}
			v = acc;
		}
		else
		{
			for (j = 0; j < W; j++)
				acc = __dadd_rn(acc, __dmul_rn((double) c[j], (double) qv[j]));
			if (metric == GI_METRIC_IP)
				v = -acc;
			else if (qnd[q] == 0.0 || cn[l] == 0.0)
				v = __longlong_as_double(0x7ff0000000000000LL);
			else
				v = __dsub_rn(1.0, __ddiv_rn(acc, __dmul_rn(__dsqrt_rn(qnd[q]),
															 __dsqrt_rn(cn[l]))));
		}
		rk[i] = gi_d2ord(gi_rank_double(v));
	}
	__syncthreads();
	gi_block_select(pp, P,
					[&](uint32_t x) { return rk[x]; },
					[&](uint32_t x) { return cq ? cq[x] : x; },
					probes + (size_t) q * P, sm);
}

/*
 * Few queries, every list (the direct path): the exact distance of each
 * (query, list) with one warp a list.  Lanes load 32 dimensions at a time
 * (coalesced) and form their terms; every lane then adds the 32 terms in
 * dimension order, so the sum is gi_k_refine's and the host's, operation
 * for operation, while the loads of many lists are in flight at once.
 * The query's norms come from gi_qnorms, in place of gi_k_qprep: the last
 * block of the query's row does nothing else and stores them (qn, qnd) for
 * the fine scan while the others compute the list distances, and for
 * cosine every warp computes |q|^2 for itself.
 */
__global__ void __launch_bounds__(256)
gi_k_refine_all(uint32_t nl, const float *__restrict__ cent, uint32_t W,
				const float *__restrict__ queries, float *qn, double *qnd,
				const double *__restrict__ cn, int metric, uint64_t *rkey)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t q = blockIdx.y;
	const uint32_t wpb = blockDim.x >> 5;
	const uint32_t nb = gridDim.x - 1;	/* blocks of lists; the last: norms */
	const float *qv = queries + (size_t) q * W;
	const bool	cosine = metric != GI_METRIC_L2 && metric != GI_METRIC_IP;
	float		qf = 0.0f;
	double		qd = 0.0;

	/* warp-uniform */
	if (cosine || (blockIdx.x == nb && threadIdx.x < 32))
		gi_qnorms(qv, W, &qf, &qd, NULL);
	if (blockIdx.x == nb)
	{
		if (threadIdx.x == 0)
		{
			qn[q] = qf;
			qnd[q] = qd;
		}
		return;
	}

	for (uint32_t l = blockIdx.x * wpb + (threadIdx.x >> 5); l < nl; l += nb * wpb)
	{
		const float *c = cent + (size_t) l * W;
		double		acc = 0.0;
		double		v;

		for (uint32_t j0 = 0; j0 < W; j0 += 32)
		{
			uint32_t	j = j0 + lane;
			uint32_t	n = W - j0 < 32 ? W - j0 : 32;
			double		t = 0.0;

			if (j < W)
			{
				if (metric == GI_METRIC_L2)
				{
					double		d = __dsub_rn((double) c[j], (double) qv[j]);

					t = __dmul_rn(d, d);
				}
				else
					t = __dmul_rn((double) c[j], (double) qv[j]);
			}
			for (uint32_t x = 0; x < n; x++)
				acc = __dadd_rn(acc, __shfl_sync(GI_CU_FULL_MASK, t, x));
		}
		if (metric == GI_METRIC_L2)
			v = acc;
		else if (metric == GI_METRIC_IP)
			v = -acc;
		else if (qd == 0.0 || cn[l] == 0.0)
			v = __longlong_as_double(0x7ff0000000000000LL);
		else
			v = __dsub_rn(1.0, __ddiv_rn(acc, __dmul_rn(__dsqrt_rn(qd),
														 __dsqrt_rn(cn[l]))));
		if (lane == 0)
			rkey[(size_t) q * nl + l] = gi_d2ord(gi_rank_double(v));
	}
}

/* see cuda_ivf.h */
gi_status
gi_cu_coarse(gi_store *s, gi_cu_ivf *iv, uint32_t qc, uint32_t P,
			 const uint32_t **probe_lists)
{
	const gi_metric metric = iv->metric;
	const uint32_t nl = s->params.nlists;
	const uint32_t W = iv->dim;
	uint32_t	pp = P + GI_CU_MARGIN < nl ? P + GI_CU_MARGIN : nl;

	/*
	 * Few queries: every list in exact arithmetic (a warp a list), which
	 * costs less than the DGEMM's launches.
	 */
	bool		gemm = pp < nl && qc > GI_CU_COARSE_DIRECT;
	gi_status	st;

	if (!gemm)
		pp = nl;

	*probe_lists = NULL;
	st = gi_cu_buf_reserve(&iv->s_qn, (size_t) qc * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&iv->s_qnd, (size_t) qc * sizeof(double));
	if (st == GI_OK && gemm)
		st = gi_cu_buf_reserve(&iv->s_qd, (size_t) qc * W * sizeof(double));
	if (st != GI_OK)
		return st;
	/* the direct path computes the norms in its own kernel */
	if (gemm || P >= nl)
	{
		gi_k_qprep<<<gi_cu_div_up(qc, GI_CU_QPREP_WARPS), GI_CU_QPREP_WARPS * 32, 0, s->ss>>>(
			(const float *) iv->s_q.p, qc, W, (float *) iv->s_qn.p,
			(double *) iv->s_qnd.p, gemm ? (double *) iv->s_qd.p : NULL);
		GI_CU_TRY(cudaGetLastError());
	}
	if (P >= nl)
		return GI_OK;

	st = gi_cu_buf_reserve(&iv->s_rkey, (size_t) qc * pp * sizeof(uint64_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&iv->s_probe, (size_t) qc * P * sizeof(uint32_t));
	if (st == GI_OK && gemm)
		st = gi_cu_buf_reserve(&iv->s_gemm, (size_t) qc * nl * sizeof(double));
	if (st == GI_OK && gemm)
		st = gi_cu_buf_reserve(&iv->s_cand, (size_t) qc * pp * sizeof(uint32_t));
	if (st != GI_OK)
		return st;

	if (gemm)
	{
		cublasHandle_t h;
		const double one = 1.0;
		const double zero = 0.0;
		cublasStatus_t cs;
		uint32_t	blocks;

		st = gi_cu_cublas_handle(s->dev, &h);
		if (st != GI_OK)
			return st;
		cs = cublasSetStream(h, s->ss);
		/* column-major: G (nl x qc) = C^T (nl x W) * Q (W x qc) */
		if (cs == CUBLAS_STATUS_SUCCESS)
			cs = cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) nl, (int) qc, (int) W,
							 &one, iv->d_centd, (int) W, (const double *) iv->s_qd.p,
							 (int) W, &zero, (double *) iv->s_gemm.p, (int) nl);
		if (cs != CUBLAS_STATUS_SUCCESS)
		{
			gi_cu_set_error("cublasDgemm (coarse quantizer) failed: %s",
							cublasGetStatusString(cs));
			return GI_ERR_DEVICE;
		}
		blocks = gi_cu_div_up((uint64_t) nl * qc, 256);
		if (blocks > 65535)
			blocks = 65535;
		gi_k_approx<<<blocks, 256, 0, s->ss>>>((double *) iv->s_gemm.p, nl, qc,
												(int) metric,
												(const double *) iv->s_qnd.p,
												iv->d_cnorm);
		gi_k_select_lists<<<qc, 256, 0, s->ss>>>((const uint64_t *) iv->s_gemm.p, nl,
												  pp, (uint32_t *) iv->s_cand.p);
		GI_CU_TRY(cudaGetLastError());
	}
	else
	{
		/*
		 * every list of the few queries, a warp a list (and a block for the
		 * norms), then their P best
		 */
		dim3		grid(gi_cu_div_up(nl, 8) + 1, qc);

		gi_k_refine_all<<<grid, 256, 0, s->ss>>>(nl, iv->d_cent, W, (const float *) iv->s_q.p,
												 (float *) iv->s_qn.p, (double *) iv->s_qnd.p,
												 iv->d_cnorm, (int) metric,
												 (uint64_t *) iv->s_rkey.p);
		gi_k_select_lists<<<qc, 256, 0, s->ss>>>((const uint64_t *) iv->s_rkey.p, nl, P,
												  (uint32_t *) iv->s_probe.p);
		GI_CU_TRY(cudaGetLastError());
		*probe_lists = (const uint32_t *) iv->s_probe.p;
		return GI_OK;
	}
	gi_k_refine<<<qc, 256, 0, s->ss>>>(gemm ? (const uint32_t *) iv->s_cand.p : NULL,
										pp, P, iv->d_cent, W,
										(const float *) iv->s_q.p,
										(const double *) iv->s_qnd.p, iv->d_cnorm,
										(int) metric, (uint64_t *) iv->s_rkey.p,
										(uint32_t *) iv->s_probe.p);
	GI_CU_TRY(cudaGetLastError());
	*probe_lists = (const uint32_t *) iv->s_probe.p;
	return GI_OK;
}
