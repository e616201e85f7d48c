/*
 * cuda_ivf.cu
 *		The IVF kind's entries (gi_kind_ops, layouts in gi_kind_ivf.h):
 *		set_state puts the centroids on the store's device once; search
 *		checks its arguments and runs chunks of queries through the coarse
 *		quantizer (cuda_quantizer.cu) and the fine scan (cuda_search.cu).
 *		The chunk loop (gi_cu_ivf_chunks) serves the IVF-PQ kind too.
 */
#include <cstdlib>
#include <cstring>
#include <new>

#include "cuda_ivf.h"
#include "cuda_util.cuh"

/* device scratch for one chunk of queries */
#define GI_CU_QUERY_BUDGET	((size_t) 256 << 20)

/* see cuda_ivf.h */
void
gi_cu_ivf_release(gi_cu_ivf *iv)
{
	gi_cu_buf  *bufs[] = {
		&iv->s_q, &iv->s_qd, &iv->s_qn, &iv->s_qnd, &iv->s_gemm, &iv->s_cand,
		&iv->s_rkey, &iv->s_probe, &iv->s_hits, &iv->s_cd,
		&iv->s_ck, &iv->s_cn, &iv->s_cnt, &iv->s_beg, &iv->s_cur, &iv->s_gd0,
		&iv->s_gk0, &iv->s_gd1, &iv->s_gk1, &iv->s_tmp, &iv->s_okey, &iv->s_okey2,
		&iv->s_oval, &iv->s_order, &iv->s_seg, &iv->s_tflag, &iv->s_tile
	};

	if (iv->have_ev)
		for (int i = 0; i < 5; i++)
			cudaEventDestroy(iv->ev[i]);
	iv->have_ev = false;
	if (iv->d_cent)
		cudaFree(iv->d_cent);
	if (iv->d_centd)
		cudaFree(iv->d_centd);
	if (iv->d_cnorm)
		cudaFree(iv->d_cnorm);
	iv->d_cent = NULL;
	iv->d_centd = NULL;
	iv->d_cnorm = NULL;
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		gi_cu_buf_free(bufs[i]);
	gi_cu_slabdir_free(&iv->dir);
	gi_cu_pinned_free(&iv->p_q);
	gi_cu_pinned_free(&iv->p_res);
	free(iv->h_cnt.p);
	free(iv->h_beg.p);
	iv->h_cnt.p = NULL;
	iv->h_beg.p = NULL;
}

void
gi_cu_ivf_free(gi_store *s, void *kstate)
{
	gi_cu_ivf  *iv = (gi_cu_ivf *) kstate;

	if (iv == NULL)
		return;
	/* kernels of the last search may still read them */
	if (s->ss)
		cudaStreamSynchronize(s->ss);
	gi_cu_ivf_release(iv);
	delete iv;
}

/*
 * The state must fit the store: nlists lists, records of dim floats, a
 * known metric, exactly gi_ivf_state_size() bytes.  A second call
 * replaces the first.
 */
static gi_status
gi_cu_ivf_set_state(gi_store *s, const void *state, size_t bytes)
{
	gi_ivf_state hdr;
	gi_cu_ivf  *iv;
	gi_status	st;
	cudaError_t err;
	size_t		bad;

	if (s == NULL || state == NULL || bytes < sizeof(gi_ivf_state))
	{
		gi_cu_set_error("ivf set_state: no store or no state");
		return GI_ERR_INVALID;
	}
	memcpy(&hdr, state, sizeof(hdr));
	if (hdr.nlists != s->params.nlists || hdr.dim == 0 ||
		(uint64_t) hdr.dim * 4 != s->params.record_bytes ||
		bytes != gi_ivf_state_size(hdr.nlists, hdr.dim))
	{
		gi_cu_set_error("ivf set_state: state of %u lists x %u dimensions (%zu bytes) does not fit a store of %u lists and %u-byte records",
						hdr.nlists, hdr.dim, bytes, s->params.nlists,
						s->params.record_bytes);
		return GI_ERR_INVALID;
	}
	if (hdr.metric != GI_METRIC_L2 && hdr.metric != GI_METRIC_IP &&
		hdr.metric != GI_METRIC_COSINE)
	{
		gi_cu_set_error("ivf set_state: unknown metric %u", hdr.metric);
		return GI_ERR_INVALID;
	}
	bad = gi_first_nonfinite(gi_ivf_state_centroids((const gi_ivf_state *) state),
							 (size_t) hdr.nlists * hdr.dim);
	if (bad < (size_t) hdr.nlists * hdr.dim)
	{
		gi_cu_set_error("ivf set_state: centroid value %zu is NaN or infinite", bad);
		return GI_ERR_INVALID;
	}
	st = gi_cu_enter(s->dev);
	if (st != GI_OK)
		return st;

	/* a concurrent search (tests) holds mu while it reads the centroids */
	std::lock_guard<std::mutex> guard(s->mu);

	iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);
	if (iv == NULL)
	{
		iv = new(std::nothrow) gi_cu_ivf();
		if (iv == NULL)
		{
			gi_cu_set_error("ivf set_state: out of memory");
			return GI_ERR_NOMEM;
		}
		gi_cu_set_kstate(s, GI_KIND_IVF, iv, gi_cu_ivf_free);
	}
	iv->dim = hdr.dim;
	iv->metric = (gi_metric) hdr.metric;
	st = gi_cu_ivf_centroids(s, iv, gi_ivf_state_centroids((const gi_ivf_state *) state));
	if (st == GI_OK)
	{
		err = cudaStreamSynchronize(s->ss);
		if (err != cudaSuccess)
			st = gi_cu_status(err, "ivf set_state");
	}
	if (st != GI_OK)
		gi_cu_set_kstate(s, GI_KIND_NONE, NULL, NULL);	/* no half-set state */
	return st;
}

/* see cuda_ivf.h */
void
gi_cu_ivf_time_stages(gi_cu_ivf *iv, bool on)
{
	iv->timing = on;
}

uint32_t
gi_cu_ivf_last_stages(const gi_cu_ivf *iv, gi_stage_time *out, uint32_t max)
{
	uint32_t	n = iv->nstages < max ? iv->nstages : max;

	memcpy(out, iv->stages, n * sizeof(gi_stage_time));
	return n;
}

/* stage times of one search, summed over its chunks (milliseconds) */
struct gi_ivf_times
{
	bool		on;
	uint64_t	t0;				/* the search began (host clock, ns) */
	double		pin_in;			/* queries into pinned memory (host) */
	double		h2d;
	double		coarse;
	double		fine;
	double		d2h;
	double		pin_out;		/* answers out of pinned memory (host) */
};

static uint64_t
gi_ivf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void
gi_ivf_stage(gi_cu_ivf *iv, const char *name, double ms)
{
	gi_stage_time *st;

	if (iv->nstages >= GI_MAX_STAGES)
		return;
	st = &iv->stages[iv->nstages++];
	memset(st->name, 0, sizeof(st->name));
	strncpy(st->name, name, sizeof(st->name) - 1);
	st->us = (float) (ms * 1000.0);
}

/* the stages of a timed search into iv->stages; "other": setup, launches, syncs */
static void
gi_ivf_times_done(gi_cu_ivf *iv, const gi_ivf_times *t)
{
	double		wall = (double) (gi_ivf_now_ns() - t->t0) / 1e6;
	double		sum = t->pin_in + t->h2d + t->coarse + t->fine + t->d2h + t->pin_out;

	iv->nstages = 0;
	gi_ivf_stage(iv, "pin in", t->pin_in);
	gi_ivf_stage(iv, "h2d", t->h2d);
	gi_ivf_stage(iv, "coarse", t->coarse);
	gi_ivf_stage(iv, "fine+topk", t->fine);
	gi_ivf_stage(iv, "d2h", t->d2h);
	gi_ivf_stage(iv, "pin out", t->pin_out);
	gi_ivf_stage(iv, "other", wall > sum ? wall - sum : 0.0);
}

static float
gi_ivf_elapsed(const gi_cu_ivf *iv, int a, int b)
{
	float		ms = 0;

	if (cudaEventElapsedTime(&ms, iv->ev[a], iv->ev[b]) != cudaSuccess)
		ms = 0;
	return ms;
}

/*
 * A chunk's qc answers of k hits out of the pinned staging (laid out for
 * chunks of qc_max), once its copies are done, after the search kernels'
 * consistency flags.
 */
static gi_status
gi_cu_ivf_take(gi_cu_ivf *iv, uint32_t qc, uint32_t qc_max, uint32_t k, gi_hit *hits,
			   uint32_t *found)
{
	const char *res = (const char *) iv->p_res.p;
	size_t		res_found = (size_t) qc * k * sizeof(gi_hit);
	uint32_t	flags;

	memcpy(&flags, res + (size_t) qc_max * (k * sizeof(gi_hit) + sizeof(uint32_t)),
		   sizeof(uint32_t));
	if (flags & GI_CU_FLAG_CHAIN)
	{
		gi_cu_set_error("CUDA store inconsistent: a slab chain is longer than the pool");
		return GI_ERR_DEVICE;
	}
	if (flags & GI_CU_FLAG_DIR)
	{
		gi_cu_set_error("CUDA store inconsistent: a linked slab names a list out of range");
		return GI_ERR_DEVICE;
	}
	memcpy(hits, res, res_found);
	memcpy(found, res + res_found, (size_t) qc * sizeof(uint32_t));
	return GI_OK;
}

gi_status
gi_cu_ivf_chunks(gi_store *s, gi_cu_ivf *iv, const char *what, uint32_t nq,
				 const float *queries, uint32_t probes, uint32_t k, gi_hit *hits,
				 uint32_t *found, gi_cu_fine_fn fine, void *arg, bool defer)
{
	const uint32_t nl = s->params.nlists;
	const uint32_t dim = iv->dim;
	uint32_t	pp;
	size_t		per_query;
	uint32_t	qc_max;
	uint32_t	qa;
	size_t		res_flag;
	gi_status	st;
	gi_ivf_times tm;

	memset(&tm, 0, sizeof(tm));
	tm.t0 = gi_ivf_now_ns();
	iv->nstages = 0;
	if (probes == 0)
	{
		gi_cu_set_error("%s: probes must be at least 1", what);
		return GI_ERR_INVALID;
	}
	if (nq == 0)
		return GI_OK;
	if (queries == NULL || found == NULL || (k > 0 && hits == NULL))
	{
		gi_cu_set_error("%s: queries, hits and found must not be NULL", what);
		return GI_ERR_INVALID;
	}
	if (k == 0)
	{
		memset(found, 0, (size_t) nq * sizeof(uint32_t));
		return GI_OK;
	}
	st = gi_cu_store_enter(s);
	if (st != GI_OK)
		return st;
	if (probes > nl)
		probes = nl;

	/* a concurrent pool growth waits until this search is over */
	std::unique_lock<std::mutex> guard(s->mu);

	pp = probes + 32 < nl ? probes + 32 : nl;
	per_query = (size_t) dim * (sizeof(float) + sizeof(double)) + 64
		+ (size_t) nl * sizeof(double) + (size_t) pp * 12 + (size_t) probes * 4
		+ (size_t) k * sizeof(gi_hit);
	qc_max = (uint32_t) (GI_CU_QUERY_BUDGET / per_query);
	if (qc_max < 1)
		qc_max = 1;
	if (qc_max > nq)
		qc_max = nq;

	/* a chunk's hits and then its counts, so that one copy brings both */
	st = gi_cu_buf_reserve(&iv->s_q, (size_t) qc_max * dim * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&iv->s_hits, (size_t) qc_max * (k * sizeof(gi_hit) +
																 sizeof(uint32_t)));
	/* pinned staging: truly asynchronous copies, one sync per chunk */
	res_flag = (size_t) qc_max * (k * sizeof(gi_hit) + sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_pinned_reserve(&iv->p_q, (size_t) qc_max * dim * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_pinned_reserve(&iv->p_res, res_flag + sizeof(uint32_t));
	if (st != GI_OK)
		return st;

	if (iv->timing && !iv->have_ev)
	{
		int			made = 0;

		while (made < 5 && cudaEventCreate(&iv->ev[made]) == cudaSuccess)
			made++;
		if (made == 5)
			iv->have_ev = true;
		else
			while (made > 0)
				cudaEventDestroy(iv->ev[--made]);
	}
	tm.on = iv->timing && iv->have_ev;

	/* search kernels raise their flags in d_flags[1] */
	GI_CU_TRY(cudaMemsetAsync(s->d_flags + 1, 0, sizeof(uint32_t), s->ss));

	for (qa = 0; qa < nq; qa += qc_max)
	{
		uint32_t	qc = nq - qa < qc_max ? nq - qa : qc_max;
		const uint32_t *probe_lists;
		char	   *res = (char *) iv->p_res.p;
		size_t		res_found = (size_t) qc * k * sizeof(gi_hit);
		uint32_t   *d_found = (uint32_t *) ((char *) iv->s_hits.p + res_found);

		uint64_t	th = tm.on ? gi_ivf_now_ns() : 0;

		memcpy(iv->p_q.p, queries + (size_t) qa * dim, (size_t) qc * dim * sizeof(float));
		if (tm.on)
		{
			tm.pin_in += (double) (gi_ivf_now_ns() - th) / 1e6;
			GI_CU_TRY(cudaEventRecord(iv->ev[0], s->ss));
		}
		GI_CU_TRY(cudaMemcpyAsync(iv->s_q.p, iv->p_q.p, (size_t) qc * dim * sizeof(float),
								  cudaMemcpyHostToDevice, s->ss));
		if (tm.on)
			GI_CU_TRY(cudaEventRecord(iv->ev[1], s->ss));
		st = gi_cu_coarse(s, iv, qc, probes, &probe_lists);
		if (st == GI_OK && tm.on)
			GI_CU_TRY(cudaEventRecord(iv->ev[2], s->ss));
		if (st == GI_OK)
			st = fine(s, iv, qc, probe_lists, probes, k, (gi_hit *) iv->s_hits.p, d_found,
					  arg);
		if (st != GI_OK)
			return st;
		if (tm.on)
			GI_CU_TRY(cudaEventRecord(iv->ev[3], s->ss));
		GI_CU_TRY(cudaMemcpyAsync(res, iv->s_hits.p, res_found + (size_t) qc * sizeof(uint32_t),
								  cudaMemcpyDeviceToHost, s->ss));
		GI_CU_TRY(cudaMemcpyAsync(res + res_flag, s->d_flags + 1, sizeof(uint32_t),
								  cudaMemcpyDeviceToHost, s->ss));
		if (tm.on)
			GI_CU_TRY(cudaEventRecord(iv->ev[4], s->ss));
		if (defer && qc == nq && !tm.on)
		{
			/* the caller's work overlaps the device's; the lock goes with it */
			iv->pend = true;
			iv->pend_hits = hits;
			iv->pend_found = found;
			iv->pend_qc = qc;
			iv->pend_k = k;
			guard.release();
			return GI_OK;
		}
		GI_CU_TRY(cudaStreamSynchronize(s->ss));
		if (tm.on)
		{
			tm.h2d += gi_ivf_elapsed(iv, 0, 1);
			tm.coarse += gi_ivf_elapsed(iv, 1, 2);
			tm.fine += gi_ivf_elapsed(iv, 2, 3);
			tm.d2h += gi_ivf_elapsed(iv, 3, 4);
			th = gi_ivf_now_ns();
		}
		st = gi_cu_ivf_take(iv, qc, qc_max, k, hits + (size_t) qa * k, found + qa);
		if (st != GI_OK)
			return st;
		if (tm.on)
			tm.pin_out += (double) (gi_ivf_now_ns() - th) / 1e6;
	}
	if (tm.on)
		gi_ivf_times_done(iv, &tm);
	return GI_OK;
}

/* see cuda_ivf.h; an error counts as done: the finish reports it */
bool
gi_cu_ivf_done(gi_store *s, const gi_cu_ivf *iv)
{
	return !iv->pend || cudaStreamQuery(s->ss) != cudaErrorNotReady;
}

/* see cuda_ivf.h */
gi_status
gi_cu_ivf_finish(gi_store *s, gi_cu_ivf *iv)
{
	gi_status	st;

	if (!iv->pend)
		return GI_OK;
	iv->pend = false;
	st = gi_cu_enter(s->dev);
	if (st == GI_OK)
	{
		cudaError_t err = cudaStreamSynchronize(s->ss);

		st = err == cudaSuccess ? gi_cu_ivf_take(iv, iv->pend_qc, iv->pend_qc, iv->pend_k,
												  iv->pend_hits, iv->pend_found)
			: gi_cu_status(err, "cudaStreamSynchronize(s->ss)");
	}
	s->mu.unlock();
	return st;
}

static gi_status
gi_cu_ivf_search_as(gi_store *s, const void *params, uint32_t nq, const void *queries,
					size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found, bool defer)
{
	const gi_ivf_search_params *p = (const gi_ivf_search_params *) params;
	gi_cu_ivf  *iv;

	if (s == NULL || p == NULL)
	{
		gi_cu_set_error("ivf search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);
	if (iv == NULL)
	{
		gi_cu_set_error("ivf search: the store has no centroids (set_state was not called)");
		return GI_ERR_INVALID;
	}
	if (p->dim != iv->dim || query_bytes != (size_t) nq * iv->dim * sizeof(float))
	{
		gi_cu_set_error("ivf search: %zu bytes of queries of dimension %u for an index of dimension %u",
						query_bytes, p->dim, iv->dim);
		return GI_ERR_INVALID;
	}
	return gi_cu_ivf_chunks(s, iv, "ivf search", nq, (const float *) queries, p->probes, k,
							hits, found, gi_cu_fine, NULL, defer);
}

static gi_status
gi_cu_ivf_search(gi_store *s, const void *params, uint32_t nq, const void *queries,
				 size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	return gi_cu_ivf_search_as(s, params, nq, queries, query_bytes, k, hits, found, false);
}

static gi_status
gi_cu_ivf_search_start(gi_store *s, const void *params, uint32_t nq, const void *queries,
					   size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	return gi_cu_ivf_search_as(s, params, nq, queries, query_bytes, k, hits, found, true);
}

static bool
gi_cu_ivf_search_done(gi_store *s)
{
	gi_cu_ivf  *iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);

	return iv == NULL || gi_cu_ivf_done(s, iv);
}

static gi_status
gi_cu_ivf_search_finish(gi_store *s)
{
	gi_cu_ivf  *iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);

	return iv != NULL ? gi_cu_ivf_finish(s, iv) : GI_OK;
}

static void
gi_cu_ivf_kind_time_stages(gi_store *s, bool on)
{
	gi_cu_ivf  *iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);

	if (iv != NULL)
		gi_cu_ivf_time_stages(iv, on);
}

static uint32_t
gi_cu_ivf_kind_last_stages(gi_store *s, gi_stage_time *out, uint32_t max)
{
	gi_cu_ivf  *iv = (gi_cu_ivf *) gi_cu_kstate(s, GI_KIND_IVF);

	return iv != NULL ? gi_cu_ivf_last_stages(iv, out, max) : 0;
}

const gi_kind_ops gi_cu_ivf_kind = {
	.set_state = gi_cu_ivf_set_state,
	.search = gi_cu_ivf_search,
	.time_stages = gi_cu_ivf_kind_time_stages,
	.last_stages = gi_cu_ivf_kind_last_stages,
	.search_start = gi_cu_ivf_search_start,
	.search_done = gi_cu_ivf_search_done,
	.search_finish = gi_cu_ivf_search_finish,
};
