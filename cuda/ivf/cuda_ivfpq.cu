/*
 * cuda_ivfpq.cu
 *		The IVF-PQ kind's entries (gi_kind_ops, layouts in gi_kind_ivfpq.h):
 *		set_state puts the centroids (through the IVF kind's quantizer
 *		preparation) and the codebooks on the store's device once; search
 *		checks its arguments and runs the IVF kind's query chunks with this
 *		kind's fine scan (cuda_ivfpq_scan.cu).
 */
#include <cstdlib>
#include <cstring>
#include <new>

#include "cuda_ivfpq.h"
#include "cuda_pq_table.cuh"
#include "cuda_util.cuh"
#include "gi_pq_select.h"

static void
gi_cu_ivfpq_free(gi_store *s, void *kstate)
{
	gi_cu_ivfpq *pq = (gi_cu_ivfpq *) kstate;

	if (pq == NULL)
		return;
	/* kernels of the last search may still read them */
	if (s->ss)
		cudaStreamSynchronize(s->ss);
	if (pq->d_books)
		cudaFree(pq->d_books);
	if (pq->d_radii)
		cudaFree(pq->d_radii);
	gi_cu_buf_free(&pq->s_lut);
	gi_cu_ivf_release(&pq->ivf);
	delete pq;
}

/*
 * The state must fit the store as the host's set_state demands: nlists
 * lists, m dividing dim, 1..GI_PQ_MAX_KSUB entries, a code width that
 * fits them, records of gi_ivfpq_record_bytes(m, code_bits), a known metric, exactly gi_ivfpq_state_size()
 * bytes.  A second call replaces the first (dim may change with it).
 */
static gi_status
gi_cu_ivfpq_set_state(gi_store *s, const void *state, size_t bytes)
{
	gi_ivfpq_state hdr;
	const gi_ivfpq_state *full = (const gi_ivfpq_state *) state;
	gi_cu_ivfpq *pq;
	size_t		nbook;
	int			optin = 0;
	gi_status	st;
	cudaError_t err;

	if (s == NULL || state == NULL || bytes < sizeof(gi_ivfpq_state))
	{
		gi_cu_set_error("ivfpq set_state: no store or no state");
		return GI_ERR_INVALID;
	}
	memcpy(&hdr, state, sizeof(hdr));
	if (hdr.ivf.nlists != s->params.nlists || hdr.ivf.dim == 0 || hdr.m == 0 ||
		hdr.ivf.dim % hdr.m != 0 || hdr.ksub == 0 || hdr.ksub > GI_PQ_MAX_KSUB ||
		!gi_ivfpq_code_bits_valid(hdr.code_bits, hdr.ksub) ||
		gi_ivfpq_record_bytes(hdr.m, hdr.code_bits) != s->params.record_bytes ||
		bytes != gi_ivfpq_state_size(hdr.ivf.nlists, hdr.ivf.dim, hdr.ksub))
	{
		gi_cu_set_error("ivfpq set_state: state of %u lists x %u dimensions, %u sub-spaces of %u entries in %u-bit codes (%zu bytes) does not fit a store of %u lists and %u-byte records",
						hdr.ivf.nlists, hdr.ivf.dim, hdr.m, hdr.ksub, hdr.code_bits, bytes,
						s->params.nlists, s->params.record_bytes);
		return GI_ERR_INVALID;
	}
	if (hdr.ivf.metric != GI_METRIC_L2 && hdr.ivf.metric != GI_METRIC_IP &&
		hdr.ivf.metric != GI_METRIC_COSINE)
	{
		gi_cu_set_error("ivfpq set_state: unknown metric %u", hdr.ivf.metric);
		return GI_ERR_INVALID;
	}
	if (!gi_ivfpq_state_finite(full))
	{
		gi_cu_set_error("ivfpq set_state: a centroid or codebook value is NaN or infinite");
		return GI_ERR_INVALID;
	}
	st = gi_cu_enter(s->dev);
	if (st != GI_OK)
		return st;
	err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
								 s->dev->ordinal);
	if (err != cudaSuccess)
		return gi_cu_status(err, "ivfpq set_state");

	/* a concurrent search (tests) holds mu while it reads the state */
	std::lock_guard<std::mutex> guard(s->mu);

	/* a fresh state each time: dim, m and ksub may all change */
	pq = new(std::nothrow) gi_cu_ivfpq();
	if (pq == NULL)
	{
		gi_cu_set_error("ivfpq set_state: out of memory");
		return GI_ERR_NOMEM;
	}
	gi_cu_set_kstate(s, GI_KIND_IVFPQ, pq, gi_cu_ivfpq_free);
	pq->ivf.dim = hdr.ivf.dim;
	pq->ivf.metric = (gi_metric) hdr.ivf.metric;
	pq->m = hdr.m;
	pq->ksub = hdr.ksub;
	pq->code_bits = hdr.code_bits;
	pq->dsub = hdr.ivf.dim / hdr.m;
	pq->smem_optin = (size_t) optin;
	nbook = (size_t) hdr.ksub * hdr.ivf.dim;
	st = gi_cu_ivf_centroids(s, &pq->ivf, gi_ivfpq_state_centroids(full));
	if (st == GI_OK)
	{
		err = cudaMalloc((void **) &pq->d_books, nbook * sizeof(float));
		if (err == cudaSuccess)
			err = cudaMemcpyAsync(pq->d_books, gi_ivfpq_state_codebooks(full),
								  nbook * sizeof(float), cudaMemcpyHostToDevice, s->ss);
		if (err == cudaSuccess)
			err = cudaStreamSynchronize(s->ss);
		if (err != cudaSuccess)
			st = gi_cu_status(err, "ivfpq set_state");
	}
	if (st != GI_OK)
		gi_cu_set_kstate(s, GI_KIND_NONE, NULL, NULL);	/* no half-set state */
	return st;
}

static gi_status
gi_cu_ivfpq_search_as(gi_store *s, const void *params, uint32_t nq, const void *queries,
					  size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found,
					  bool defer)
{
	const gi_ivfpq_search_params *p = (const gi_ivfpq_search_params *) params;
	gi_cu_ivfpq *pq;
	gi_cu_pq_call call;

	if (s == NULL || p == NULL)
	{
		gi_cu_set_error("ivfpq search: no store or no parameters");
		return GI_ERR_INVALID;
	}
	pq = (gi_cu_ivfpq *) gi_cu_kstate(s, GI_KIND_IVFPQ);
	if (pq == NULL)
	{
		gi_cu_set_error("ivfpq search: the store has no codebooks (set_state was not called)");
		return GI_ERR_INVALID;
	}
	if (p->ivf.dim != pq->ivf.dim || query_bytes != (size_t) nq * pq->ivf.dim * sizeof(float))
	{
		gi_cu_set_error("ivfpq search: %zu bytes of queries of dimension %u for an index of dimension %u",
						query_bytes, p->ivf.dim, pq->ivf.dim);
		return GI_ERR_INVALID;
	}
	if (!gi_ivfpq_mode_valid(p))
	{
		gi_cu_set_error("ivfpq search: mode %u, selection %u, scale %g",
						p->mode, p->select, (double) p->scale);
		return GI_ERR_INVALID;
	}
	memset(&call, 0, sizeof(call));
	call.pq = pq;
	call.g.mode = p->mode;
	call.g.level = gi_pq_level(p->select);
	call.g.level_in = gi_pq_inner_level(call.g.level);
	call.g.scale = p->scale;
	return gi_cu_ivf_chunks(s, &pq->ivf, "ivfpq search", nq, (const float *) queries,
							p->ivf.probes, k, hits, found, gi_cu_pq_fine, &call, defer);
}

static gi_status
gi_cu_ivfpq_search(gi_store *s, const void *params, uint32_t nq, const void *queries,
				   size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	return gi_cu_ivfpq_search_as(s, params, nq, queries, query_bytes, k, hits, found, false);
}

/* the scan's arguments (call) are the kernels' by the time it returns */
static gi_status
gi_cu_ivfpq_search_start(gi_store *s, const void *params, uint32_t nq, const void *queries,
						 size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	return gi_cu_ivfpq_search_as(s, params, nq, queries, query_bytes, k, hits, found, true);
}

static bool
gi_cu_ivfpq_search_done(gi_store *s)
{
	gi_cu_ivfpq *pq = (gi_cu_ivfpq *) gi_cu_kstate(s, GI_KIND_IVFPQ);

	return pq == NULL || gi_cu_ivf_done(s, &pq->ivf);
}

static gi_status
gi_cu_ivfpq_search_finish(gi_store *s)
{
	gi_cu_ivfpq *pq = (gi_cu_ivfpq *) gi_cu_kstate(s, GI_KIND_IVFPQ);

	return pq != NULL ? gi_cu_ivf_finish(s, &pq->ivf) : GI_OK;
}

static void
gi_cu_ivfpq_time_stages(gi_store *s, bool on)
{
	gi_cu_ivfpq *pq = (gi_cu_ivfpq *) gi_cu_kstate(s, GI_KIND_IVFPQ);

	if (pq != NULL)
		gi_cu_ivf_time_stages(&pq->ivf, on);
}

static uint32_t
gi_cu_ivfpq_last_stages(gi_store *s, gi_stage_time *out, uint32_t max)
{
	gi_cu_ivfpq *pq = (gi_cu_ivfpq *) gi_cu_kstate(s, GI_KIND_IVFPQ);

	return pq != NULL ? gi_cu_ivf_last_stages(&pq->ivf, out, max) : 0;
}

const gi_kind_ops gi_cu_ivfpq_kind = {
	.set_state = gi_cu_ivfpq_set_state,
	.search = gi_cu_ivfpq_search,
	.time_stages = gi_cu_ivfpq_time_stages,
	.last_stages = gi_cu_ivfpq_last_stages,
	.search_start = gi_cu_ivfpq_search_start,
	.search_done = gi_cu_ivfpq_search_done,
	.search_finish = gi_cu_ivfpq_search_finish,
};
