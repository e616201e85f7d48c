/*
 * gpuivf_load.c
 *		gpuivf's requests about its store: loading it from the pages (the
 *		IVF or IVF-PQ state, then every list's rows, through gi_load) and
 *		searching.
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

static void
walk_lists(GiLoad *load, void *arg)
{
	GiListDir	dir;

	gpuivf_list_dir((const GpuivfMeta *) arg, &dir);
	gi_load_lists(load, &dir, offsetof(GpuivfTupleData, vec));
}

/*
 * Load the index's store from its pages (the GiLoadFn of gpuivf): true
 * when it is ready or there is nothing to load, false when another backend
 * loads it.
 */
bool
gpuivf_load(Relation index)
{
	GpuivfMeta *cached = gpuivf_get_meta(index);
	GpuivfMeta	meta = *cached;
	Size		csize = (Size) meta.lists * meta.dim * sizeof(float4);
	GiLoadSpec	spec;

	if (meta.lists == 0)
		return true;			/* nothing indexed: nothing to search */

	memset(&spec, 0, sizeof(spec));
	if (meta.quantizer == GPUIVF_QUANTIZER_PQ)
	{
		gi_ivfpq_state *state;

		spec.kind = GI_KIND_IVFPQ;
		spec.state_size = gi_ivfpq_state_size(meta.lists, meta.dim, meta.pq_ksub);
		state = palloc_extended(spec.state_size, MCXT_ALLOC_HUGE);
		state->ivf.dim = meta.dim;
		state->ivf.metric = meta.metric;
		state->ivf.nlists = meta.lists;
		state->ivf.pad = 0;
		state->m = meta.pq_m;
		state->ksub = meta.pq_ksub;
		state->code_bits = meta.pq_code_bits;
		state->pad = 0;
		memcpy(state + 1, cached->centroids, csize);
		memcpy((char *) (state + 1) + csize, cached->codebooks,
			   (Size) meta.pq_ksub * meta.dim * sizeof(float4));
		spec.state = state;
	}
	else
	{
		gi_ivf_state *state;

		spec.kind = GI_KIND_IVF;
		spec.state_size = gi_ivf_state_size(meta.lists, meta.dim);
		state = palloc_extended(spec.state_size, MCXT_ALLOC_HUGE);
		state->dim = meta.dim;
		state->metric = meta.metric;
		state->nlists = meta.lists;
		state->pad = 0;
		memcpy(state + 1, cached->centroids, csize);
		spec.state = state;
	}
	/* the cache may go away from here on; the walk needs no centroids */
	meta.centroids = NULL;
	meta.cnorms = NULL;
	meta.codebooks = NULL;

	spec.record_bytes = gpuivf_record_bytes(&meta);
	spec.walk = walk_lists;
	spec.walk_arg = &meta;
	return gi_load(index, &spec);
}

/* the service request that searches nq queries (nq * dim floats) for k rows each */
void
gpuivf_search_request(Relation index, uint32 dim, const float4 *queries, uint32 nq,
					  uint32 k, uint32 probes, GiCall *call)
{
	bool		pq = gpuivf_get_meta(index)->quantizer == GPUIVF_QUANTIZER_PQ;

	memset(call, 0, sizeof(*call));
	call->type = GI_REQ_SEARCH;
	call->args.kind = pq ? GI_KIND_IVFPQ : GI_KIND_IVF;
	call->args.n = nq;
	call->args.k = k;
	GI_KARGS(&call->args, gi_ivf_search_params)->dim = dim;
	GI_KARGS(&call->args, gi_ivf_search_params)->probes = probes;
	if (pq)
	{
		gi_ivfpq_search_params *p = GI_KARGS(&call->args, gi_ivfpq_search_params);

		p->mode = (uint32) gpuivf_pq_search;
		p->select = (uint32) gpuivf_pq_select;
		p->scale = (float) gpuivf_pq_threshold_scale;
	}
	call->in = queries;
	call->in_size = (Size) nq * dim * sizeof(float4);
	call->out_capacity = gi_search_out_size(nq, k);
}

/* k nearest rows for each of nq queries, as gi_search_answer gives them */
gi_hit *
gpuivf_search_service(Relation index, uint32 dim, const float4 *queries, uint32 nq, uint32 k, uint32 probes,
					  uint32 **found)
{
	GiCall		call;

	gpuivf_search_request(index, dim, queries, nq, k, probes, &call);
	gi_call_store(index, &call, gpuivf_load);
	return gi_search_answer(&call, nq, k, found);
}
