/*
 * ivf.c
 *		The IVF kind in the device service: lists are the cells of a coarse
 *		quantizer, records are float vectors (layouts in gi_kind_ivf.h).
 *
 * LOAD_BEGIN carries a gi_ivf_state (header and centroids), which the
 * backend keeps from set_state on; the service keeps only its header.
 * A search carries gi_ivf_search_params in kargs and n * dim floats;
 * searches of a store with the same k and the same number of probed lists
 * are merged.  Spread over several devices, a store keeps each list whole
 * on one shard (every shard has all centroids): a search probes the same
 * lists everywhere and each shard scans those it holds.
 *
 * The IVF-PQ kind (gi_kind_ivfpq.h) has the same lists and queries; its
 * state (centroids and codebooks), records and search parameters (IVF's
 * and a search mode, which joins the merge group) differ, so it shares
 * the rest.  Its summary starts with the gi_ivf_state the shared
 * functions read.
 */
#include "postgres.h"

#include "gi_kind.h"
#include "gi_kind_ivfpq.h"

/* bounds that keep every size in range; the access method stays below */
#define GI_IVF_MAX_DIM		65536
#define GI_IVF_MAX_LISTS	(1 << 20)

static const char *const ivf_metric_names[] = {"l2", "ip", "cosine"};

/* the header both IVF kinds' states start with */
static int
ivf_check_header(const char *kind, const gi_ivf_state *st, Size bytes, Size header,
				 char *err, Size errlen)
{
	if (bytes < header)
	{
		snprintf(err, errlen, "malformed gpuindex %s load request: %zu bytes of state",
				 kind, (size_t) bytes);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	if (st->dim < 1 || st->dim > GI_IVF_MAX_DIM)
	{
		snprintf(err, errlen, "gpuindex %s store of %u dimensions (1 to %d allowed)",
				 kind, st->dim, GI_IVF_MAX_DIM);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (st->nlists < 1 || st->nlists > GI_IVF_MAX_LISTS)
	{
		snprintf(err, errlen, "gpuindex %s store of %u lists (1 to %d allowed)",
				 kind, st->nlists, GI_IVF_MAX_LISTS);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (st->metric >= lengthof(ivf_metric_names))
	{
		snprintf(err, errlen, "gpuindex %s store with unknown metric %u", kind, st->metric);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	return 0;
}

static int
ivf_check_state(const void *state, Size bytes, GiKindStore *store,
				char *err, Size errlen)
{
	const gi_ivf_state *st = state;
	int			rc = ivf_check_header("ivf", st, bytes, sizeof(gi_ivf_state), err, errlen);

	if (rc != 0)
		return rc;
	if (bytes != gi_ivf_state_size(st->nlists, st->dim))
	{
		snprintf(err, errlen,
				 "malformed gpuindex ivf load request: %zu bytes of state for %u lists of %u dimensions",
				 (size_t) bytes, st->nlists, st->dim);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	store->nlists = st->nlists;
	store->record_bytes = st->dim * sizeof(float);
	store->key_mode = GI_KEYS_UNIQUE;
	store->summary_bytes = sizeof(gi_ivf_state);
	return 0;
}

/* IVF-PQ: the summary is the whole gi_ivfpq_state, which starts as IVF's */
static int
ivfpq_check_state(const void *state, Size bytes, GiKindStore *store,
				  char *err, Size errlen)
{
	const gi_ivfpq_state *st = state;
	int			rc = ivf_check_header("ivf_pq", &st->ivf, bytes, sizeof(gi_ivfpq_state),
									  err, errlen);

	if (rc != 0)
		return rc;
	if (st->m < 1 || st->ivf.dim % st->m != 0)
	{
		snprintf(err, errlen, "gpuindex ivf_pq store of %u dimensions in %u sub-spaces",
				 st->ivf.dim, st->m);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (st->ksub < 1 || st->ksub > GI_PQ_MAX_KSUB)
	{
		snprintf(err, errlen, "gpuindex ivf_pq store with %u codebook entries (1 to %d allowed)",
				 st->ksub, GI_PQ_MAX_KSUB);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (!gi_ivfpq_code_bits_valid(st->code_bits, st->ksub))
	{
		snprintf(err, errlen, "gpuindex ivf_pq store with %u-bit codes for %u codebook entries (8, or 4 for up to 16 entries, allowed)",
				 st->code_bits, st->ksub);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (bytes != gi_ivfpq_state_size(st->ivf.nlists, st->ivf.dim, st->ksub))
	{
		snprintf(err, errlen,
				 "malformed gpuindex ivf_pq load request: %zu bytes of state for %u lists of %u dimensions",
				 (size_t) bytes, st->ivf.nlists, st->ivf.dim);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	store->nlists = st->ivf.nlists;
	store->record_bytes = gi_ivfpq_record_bytes(st->m, st->code_bits);
	store->key_mode = GI_KEYS_UNIQUE;
	store->summary_bytes = sizeof(gi_ivfpq_state);
	return 0;
}

static int
ivf_check_search(const void *summary, const GiKindSearch *req, uint64 *group,
				 char *err, Size errlen)
{
	const gi_ivf_state *st = summary;
	const gi_ivf_search_params *p = GI_KARGS(req->args, gi_ivf_search_params);

	if (p->dim != st->dim)
	{
		snprintf(err, errlen, "gpuindex search: query has %u dimensions, index has %u",
				 p->dim, st->dim);
		return ERRCODE_DATA_EXCEPTION;
	}
	if (req->query_bytes != (Size) req->args->n * st->dim * sizeof(float))
	{
		snprintf(err, errlen,
				 "malformed gpuindex search request: %zu bytes for %u queries of %u dimensions",
				 (size_t) req->query_bytes, req->args->n, st->dim);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	if (p->probes < 1)
	{
		snprintf(err, errlen, "gpuindex search must probe at least one list");
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	*group = Min(p->probes, st->nlists);
	return 0;
}

static const void *
ivf_merge_search(const void *summary, GiKindData *kd, const GiKindSearch *reqs,
				 int n, void *params, Size *query_bytes)
{
	const gi_ivf_state *st = summary;
	gi_ivf_search_params *p = params;

	p->dim = st->dim;
	p->probes = Min(GI_KARGS(reqs[0].args, gi_ivf_search_params)->probes, st->nlists);
	return gi_kind_concat_queries(reqs, n, query_bytes);
}

/* IVF's checks, and the search mode; searches merge only with the same mode */
static int
ivfpq_check_search(const void *summary, const GiKindSearch *req, uint64 *group,
				   char *err, Size errlen)
{
	const gi_ivfpq_search_params *p = GI_KARGS(req->args, gi_ivfpq_search_params);
	int			rc = ivf_check_search(summary, req, group, err, errlen);

	if (rc != 0)
		return rc;
	if (!gi_ivfpq_mode_valid(p))
	{
		snprintf(err, errlen,
				 "gpuindex ivf_pq search of mode %u selecting %u entries at scale %g (modes 0 to %d, a power of two up to %d, a positive scale)",
				 p->mode, p->select, (double) p->scale, GI_PQ_SEARCH_HITS, GI_PQ_MAX_KSUB);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (p->mode != GI_PQ_SEARCH_LUT)
	{
		uint32		bits;

		memcpy(&bits, &p->scale, sizeof(bits));
		*group |= ((uint64) p->mode << 21) | ((uint64) p->select << 23) | ((uint64) bits << 32);
	}
	return 0;
}

static const void *
ivfpq_merge_search(const void *summary, GiKindData *kd, const GiKindSearch *reqs,
				   int n, void *params, Size *query_bytes)
{
	const gi_ivfpq_search_params *first = GI_KARGS(reqs[0].args, gi_ivfpq_search_params);
	gi_ivfpq_search_params *p = params;
	const void *queries = ivf_merge_search(summary, kd, reqs, n, &p->ivf,
												   query_bytes);

	p->mode = first->mode;
	p->select = first->select;
	p->scale = first->scale;
	p->pad = 0;
	return queries;
}

static Size
ivf_queries_size(const void *summary, const char *queries, uint32 n)
{
	const gi_ivf_state *st = summary;

	return (Size) n * st->dim * sizeof(float);
}

/* a list's records on one shard: a search scans the probed lists each owns */
static void
ivf_route(const void *summary, GiShardMap *map, uint32 n, const uint64 *keys,
		  const uint32 *lists, uint32 *shards)
{
	gi_route_by_list(map, n, lists, shards);
}

static void
ivf_describe(const void *summary, uint32 *dim, char *metric, Size metric_len)
{
	const gi_ivf_state *st = summary;

	*dim = st->dim;
	strlcpy(metric, st->metric < lengthof(ivf_metric_names) ?
			ivf_metric_names[st->metric] : "?", metric_len);
}

const GiServiceKind gi_kind_ivf = {
	.kind = GI_KIND_IVF,
	.name = "ivf_flat",
	.check_state = ivf_check_state,
	.check_search = ivf_check_search,
	.merge_search = ivf_merge_search,
	.queries_size = ivf_queries_size,
	.route = ivf_route,
	.describe = ivf_describe,
};

const GiServiceKind gi_kind_ivfpq = {
	.kind = GI_KIND_IVFPQ,
	.name = "ivf_pq",
	.check_state = ivfpq_check_state,
	.check_search = ivfpq_check_search,
	.merge_search = ivfpq_merge_search,
	.queries_size = ivf_queries_size,
	.route = ivf_route,
	.describe = ivf_describe,
};
