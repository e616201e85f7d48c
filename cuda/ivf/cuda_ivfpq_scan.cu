/*
 * cuda_ivfpq_scan.cu
 *		IVF-PQ search after the coarse quantizer: per (query, probed list)
 *		a look-up table of the query's distances to every codebook entry,
 *		then a fine scan in which a record's distance is the sum of its m
 *		table values, then the IVF kind's top-k (running top-k and merge for
 *		k <= GI_CU_FAST_K, the sort path above).
 *
 * A block of 8 warps handles a unit (query, group of its probed lists)
 * and takes the group's lists one at a time: the list's slabs go into a
 * shared queue (copied by the block from the store's slab directory when
 * the store is read-mostly, else walked ahead along the chain by one
 * thread) while the block fills the table (in shared memory when it fits,
 * else in a global slice per block); then
 * each warp scores a queued slab, lane i slot i, bitmap first (empty slabs
 * skipped), one coalesced load per code word (4 or 8 codes), keys read only for valid
 * slots.  The selective modes (cuda_pq_select.cuh) are the same kernel
 * with the table turned into rewards before the slabs are scored.
 *
 * The arithmetic is host_ivfpq.c's, operation for operation in IEEE
 * double (never contracted): table entries summed in dimension order and
 * rounded once to float, a record's sum starting from the list's constant
 * and adding its table values in sub-space order, the metric's finish,
 * one rounding to float.  So the distances are the host's, bit for bit.
 */
#include <cstring>

#include "cuda_ivfpq.h"
#include "cuda_pq_select.cuh"
#include "cuda_pq_table.cuh"
#include "cuda_scan.cuh"
#include "cuda_topk.cuh"
#include "cuda_util.cuh"
#include "cuda_walk.cuh"

/*
 * Distance of slot `lane` of a slab (host_ivfpq.c's gi_host_pq_scan, then
 * gi_pq_select.h's gi_pq_finish): the list's constant plus the slot's
 * table values in sub-space order; a code outside the codebook makes the
 * host's sum NaN, so +Inf here.
 */
template <uint32_t BITS>
__device__ __forceinline__ float
gi_pq_slot_distance(int metric, const gi_pq_args &g, const uint32_t *data, uint32_t W,
					const float *lut, double base, double qn, uint32_t lane)
{
	double		acc = base;
	bool		bad = false;

	gi_pq_slot_codes<BITS>(g, data, W, lane, [&] (uint32_t sub, uint32_t code) {
		if (code < g.ksub)
			acc = __dadd_rn(acc, (double) lut[(size_t) sub * g.ksub + code]);
		else
			bad = true;
	});
	if (bad)
		return __int_as_float(0x7f800000);
	return gi_rank_float(gi_pq_finish((uint32_t) metric, acc, qn));
}

/*
 * The block fills the queue with list l's slabs from the directory,
 * entries from .. from + GI_CU_SQ of the list's; thread 0 sets the queue's
 * length and where the next part starts (GI_NIL: none).  The caller
 * synchronises before the queue is read.
 */
__device__ __forceinline__ void
gi_pq_dir_queue(const gi_pq_args &g, uint32_t l, uint32_t from, uint32_t *queue,
				uint32_t *qlen, uint32_t *next)
{
	const uint32_t b0 = g.dir_off[l];
	const uint32_t n = g.dir_off[l + 1] - b0 - from;
	const uint32_t len = n < GI_CU_SQ ? n : GI_CU_SQ;

	for (uint32_t i = threadIdx.x; i < len; i += blockDim.x)
		queue[i] = g.dir[b0 + from + i];
	if (threadIdx.x == 0)
	{
		*qlen = len;
		*next = n > GI_CU_SQ ? from + GI_CU_SQ : GI_NIL;
	}
}

/* one warp scores one slab of the current list (SEL: from the list's rewards) */
template <bool APPEND, bool SEL, uint32_t BITS>
__device__ __forceinline__ void
gi_pq_scan_slab(const gi_scan_args &a, const gi_pq_args &g, uint32_t slab, uint32_t q,
				const float *lut, double base, double qn, const gi_pq_sel_sums &ss,
				gi_topk_state &ts, float *sd, uint64_t *sk)
{
	const uint32_t lane = threadIdx.x & 31;
	uint32_t	bm = gi_slab_bitmap(a.slabs, slab);
	const uint32_t *data;
	float		d;
	bool		valid;
	uint64_t	key = 0;

	if (bm == 0)
		return;					/* warp-uniform */
	data = gi_slab_data(a.slabs, slab);
	if (SEL)
		d = gi_pq_sel_slot<BITS>(a.metric, g, data, a.W, (const uint32_t *) lut, ss.sum_tau, ss.unit,
						   base, qn, lane);
	else
		d = gi_pq_slot_distance<BITS>(a.metric, g, data, a.W, lut, base, qn, lane);
	valid = gi_slot_live(bm, lane);
	if (valid)
		key = gi_slot_key(data, a.W, lane);
	if (APPEND)
		gi_append(a, q, valid, d, key);
	else
		gi_topk_offer(ts, sd, sk, valid, d, key);
}

/*
 * Blocks an SM the registers are budgeted for.  8-bit codes: 3, which their
 * tables in shared memory allow anyway (left to itself the compiler keeps
 * the kernel at 48 registers and spills in the slot loop).  4-bit codes: 0,
 * no minimum, the compiler's choice (a minimum of 3 or 4 was slower).
 */
#define GI_PQ_MIN_BLOCKS(BITS)	((BITS) == 8 ? 3 : 0)

/*
 * One block per unit u = g.unit0 + blockIdx.x: query u / G, its group of
 * probed lists u % G.  Shared memory: the top-k buffer (cap entries; none
 * when appending), the slab queue, then the table unless g.glut (SEL: with
 * the per-sub-space values after it, cuda_pq_select.cuh).
 */
template <bool APPEND, bool SEL, uint32_t BITS>
__global__ void __launch_bounds__(GI_CU_SCAN_THREADS, GI_PQ_MIN_BLOCKS(BITS))
gi_k_pq_scan(gi_scan_args a, gi_pq_args g)
{
	extern __shared__ __align__(16) unsigned char gi_smem[];
	uint64_t   *sk = (uint64_t *) gi_smem;
	float	   *sd = (float *) (sk + a.cap);
	uint32_t   *queue = (uint32_t *) (sd + a.cap);
	size_t		table = SEL ? gi_pq_sel_table_floats(g.m, g.ksub) : (size_t) g.m * g.ksub;
	double	   *rd = (double *) (queue + GI_CU_SQ);
	float	   *lut = g.glut ? g.glut + (size_t) blockIdx.x * table
		: (float *) (rd + (g.resid ? a.D : 0));
	__shared__ gi_topk_state ts;
	__shared__ gi_pq_sel_sums ss;
	__shared__ uint32_t qlen;
	__shared__ uint32_t next;
	__shared__ double sbase;
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
	uint32_t	pi;

	gi_topk_init(ts);
	for (pi = p0; pi < p1; pi++)
	{
		const uint32_t l = a.probes ? a.probes[(size_t) q * a.P + pi] : pi;
		const float *c = g.cent + (size_t) l * a.D;
		/* IP and cosine: the table (selective: the rewards) is the query's alone */
		const bool	fresh = a.metric == GI_METRIC_L2 || pi == p0;
		double		base;
		uint32_t	t;

		/* the previous list's slabs are scored: queue and table are free */
		__syncthreads();
		if (g.resid && fresh)
		{
			for (t = tid; t < a.D; t += blockDim.x)
				rd[t] = a.metric == GI_METRIC_L2 ?
					__dsub_rn((double) qv[t], (double) c[t]) : (double) qv[t];
			__syncthreads();
		}
		if (g.dir)
			gi_pq_dir_queue(g, l, 0, queue, &qlen, &next);
		else if (tid == 0)
		{
			uint32_t	cur = gi_list_head(a.lists, l);

			steps = 0;
			qlen = gi_walk_ahead(a.slabs, &cur, GI_CU_SQ, &steps, a.max_steps, a.flags,
								 queue);
			next = cur;
		}
		/* the list's constant: q.c in dimension order (L2: none) */
		if (tid == 32 % blockDim.x)
		{
			double		qc = 0.0;

			if (a.metric != GI_METRIC_L2)
				for (t = 0; t < a.D; t++)
					qc = __dadd_rn(qc, __dmul_rn((double) qv[t], (double) c[t]));
			sbase = qc;
		}
		if (fresh && g.resid)
			gi_pq_fill_staged(a.metric, g, rd, lut);
		else if (fresh)
			for (t = tid; t < nlut; t += blockDim.x)
				lut[t] = gi_pq_lut_entry(a.metric, g, qv, c, t);
		__syncthreads();
		if (SEL && fresh)
			gi_pq_sel_prepare(a.metric, g, qv, lut, ss);
		base = sbase;

		for (;;)
		{
			const uint32_t nq = qlen;
			const bool	more = next != GI_NIL;
			uint32_t	b;

			for (b = 0; b < nq; b += nwarps)
			{
				uint32_t	i = b + warp;

				if (i < nq)
					gi_pq_scan_slab<APPEND, SEL, BITS>(a, g, queue[i], q, lut, base, qn, ss, ts, sd, sk);
				if (!APPEND && gi_topk_need_flush(ts, a.cap))
					gi_topk_flush(ts, sd, sk, a.cap, a.k);
			}
			/* every warp is done with the queue */
			__syncthreads();
			if (!more)
				break;
			if (g.dir)
			{
				const uint32_t from = next;

				/* every thread read next above: change it only after a barrier */
				__syncthreads();
				gi_pq_dir_queue(g, l, from, queue, &qlen, &next);
			}
			else if (tid == 0)
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

/*
 * Launch the scan over `units` units, the look-up-table kernel or the
 * selective one by g's mode: the table in shared memory when it fits the
 * device's opt-in limit next to the top-k buffer and the queue, else in
 * global slices of at most GI_CU_PQ_LUT_BUDGET, as many blocks a launch as
 * slices.
 */
template <bool APPEND>
static gi_status
gi_pq_launch(gi_store *s, gi_cu_ivfpq *pq, const gi_scan_args &a, uint32_t units,
			 const gi_pq_args &mode)
{
	gi_pq_args	g = mode;
	const bool	sel = mode.mode != GI_PQ_SEARCH_LUT;
	size_t		lut = (sel ? gi_pq_sel_table_floats(pq->m, pq->ksub)
					   : (size_t) pq->m * pq->ksub) * sizeof(float);
	size_t		smem = (size_t) a.cap * (sizeof(uint64_t) + sizeof(float))
		+ GI_CU_SQ * sizeof(uint32_t);
	uint32_t	per_launch = units;
	uint32_t	u0;
	void		(*kernel) (gi_scan_args, gi_pq_args) =
		pq->code_bits == 4 ?
		(sel ? gi_k_pq_scan<APPEND, true, 4> : gi_k_pq_scan<APPEND, false, 4>) :
		(sel ? gi_k_pq_scan<APPEND, true, 8> : gi_k_pq_scan<APPEND, false, 8>);

	g.cent = pq->ivf.d_cent;
	g.books = pq->d_books;
	g.glut = NULL;
	g.m = pq->m;
	g.ksub = pq->ksub;
	g.dsub = pq->dsub;
	/* the kernel's static shared memory counts against the limit too */
	g.resid = 0;
	if (smem + (size_t) pq->ivf.dim * sizeof(double) + lut + 1024 <= pq->smem_optin)
	{
		g.resid = 1;
		smem += (size_t) pq->ivf.dim * sizeof(double) + lut;
	}
	else if (smem + lut + 1024 <= pq->smem_optin)
		smem += lut;
	else
	{
		size_t		fit = GI_CU_PQ_LUT_BUDGET / lut;
		gi_status	st;

		if (fit < 1)
			fit = 1;
		if (fit < per_launch)
			per_launch = (uint32_t) fit;
		st = gi_cu_buf_reserve(&pq->s_lut, (size_t) per_launch * lut);
		if (st != GI_OK)
			return st;
		g.glut = (float *) pq->s_lut.p;
	}
	if (smem > GI_CU_SMEM_DEFAULT)
		GI_CU_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									   (int) smem));
	for (u0 = 0; u0 < units; u0 += per_launch)
	{
		uint32_t	n = units - u0 < per_launch ? units - u0 : per_launch;

		g.unit0 = u0;
		kernel<<<n, GI_CU_SCAN_THREADS, smem, s->ss>>>(a, g);
		GI_CU_TRY(cudaGetLastError());
	}
	return GI_OK;
}

/* the large-k path's appending scan (a gi_cu_append_fn) */
static gi_status
gi_pq_append(gi_store *s, const gi_scan_args &b, uint32_t nsub, void *arg)
{
	gi_cu_pq_call *call = (gi_cu_pq_call *) arg;

	return gi_pq_launch<true>(s, call->pq, b, nsub * b.G, call->g);
}

/*
 * The density table on the device, made on the host from the codebooks
 * (gi_pq_radii) by the first selective search of the store.
 */
static gi_status
gi_pq_radii_ready(gi_store *s, gi_cu_ivfpq *pq)
{
	size_t		n = (size_t) GI_PQ_LEVELS * pq->m * pq->ksub;
	float	   *h;
	double	   *work;
	cudaError_t err;

	if (pq->d_radii != NULL)
		return GI_OK;
	h = (float *) malloc(n * sizeof(float) + (size_t) pq->m * pq->ksub * pq->dsub * sizeof(float));
	work = (double *) malloc((size_t) pq->ksub * sizeof(double));
	if (h == NULL || work == NULL)
	{
		free(h);
		free(work);
		gi_cu_set_error("ivfpq search: out of host memory for the density table");
		return GI_ERR_NOMEM;
	}
	/* the codebooks back from the device, then the table as the host makes it */
	err = cudaMemcpyAsync(h + n, pq->d_books, (size_t) pq->m * pq->ksub * pq->dsub * sizeof(float),
						  cudaMemcpyDeviceToHost, s->ss);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(s->ss);
	if (err == cudaSuccess)
	{
		gi_pq_radii(h + n, pq->m, pq->ksub, pq->dsub, h, work);
		err = cudaMalloc((void **) &pq->d_radii, n * sizeof(float));
	}
	if (err == cudaSuccess)
		err = cudaMemcpyAsync(pq->d_radii, h, n * sizeof(float), cudaMemcpyHostToDevice, s->ss);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(s->ss);
	free(h);
	free(work);
	if (err != cudaSuccess)
	{
		if (pq->d_radii != NULL)
			cudaFree(pq->d_radii);
		pq->d_radii = NULL;
		return gi_cu_status(err, "ivfpq density table");
	}
	return GI_OK;
}

/* see cuda_ivfpq.h */
gi_status
gi_cu_pq_fine(gi_store *s, gi_cu_ivf *iv, uint32_t qc, const uint32_t *probe_lists,
			  uint32_t P, uint32_t k, gi_hit *d_hits, uint32_t *d_found, void *arg)
{
	gi_cu_pq_call *call = (gi_cu_pq_call *) arg;
	gi_scan_args a;
	gi_status	st;

	if (call->g.mode != GI_PQ_SEARCH_LUT)
	{
		st = gi_pq_radii_ready(s, call->pq);
		if (st != GI_OK)
			return st;
		call->g.radii = call->pq->d_radii;
		call->g.rcap = gi_pq_reward_max(call->pq->m);
	}
	/* the chain walk of one thread per list, or the directory when the store is read-mostly */
	call->g.dir = NULL;
	call->g.dir_off = NULL;
	if (gi_cu_ivf_dir_ready(s, iv))
	{
		call->g.dir = (const uint32_t *) iv->dir.d_dir.p;
		call->g.dir_off = (const uint32_t *) iv->dir.d_off.p;
	}
	memset(&a, 0, sizeof(a));
	a.lists = s->d_lists;
	a.slabs = s->d_slabs;
	a.queries = (const float *) iv->s_q.p;
	a.qnorm = (const float *) iv->s_qn.p;
	a.qnormd = (const double *) iv->s_qnd.p;
	a.probes = probe_lists;
	a.P = P;
	a.W = s->words;
	a.D = iv->dim;
	a.k = k;
	a.max_steps = s->nslabs;
	a.metric = (int) iv->metric;
	a.flags = s->d_flags + 1;
	if (k > GI_CU_FAST_K)
		return gi_cu_general(s, iv, a, qc, d_hits, d_found, gi_pq_append, call);

	a.cap = gi_topk_cap(k);
	a.G = gi_cu_groups(s, qc, P);
	a.hits = d_hits;
	a.found = d_found;
	if (a.G > 1)
	{
		st = gi_cu_partials(iv, &a, (size_t) qc * a.G);
		if (st != GI_OK)
			return st;
	}
	st = gi_pq_launch<false>(s, call->pq, a, qc * a.G, call->g);
	if (st != GI_OK)
		return st;
	if (a.G > 1)
		return gi_cu_merge(s, a, qc, d_hits, d_found);
	return GI_OK;
}
