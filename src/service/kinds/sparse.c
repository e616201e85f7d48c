/*
 * sparse.c
 *		The sparse kind in the device service: one list per dimension,
 *		records are the weights of documents' non-zeros (layouts in
 *		gi_kind_sparse.h).
 *
 * LOAD_BEGIN carries a gi_sparse_state, which is also the summary the
 * service keeps.  A search carries gi_sparse_search_params in kargs and
 * its queries packed back to back; this file checks that the sizes add
 * up (the backend checks the terms).  Searches of a store with the same k
 * and method are merged by concatenating their queries.  Spread over
 * several devices, a store keeps each document whole on one shard, chosen
 * by a hash of its key.
 */
#include "postgres.h"

#include "gi_kind.h"
#include "gi_kind_sparse.h"

/* one list per dimension; the access method stays below */
#define GI_SPARSE_MAX_DIM	(1 << 24)

static int
sparse_check_state(const void *state, Size bytes, GiKindStore *store,
				   char *err, Size errlen)
{
	const gi_sparse_state *st = state;

	if (bytes != sizeof(gi_sparse_state))
	{
		snprintf(err, errlen, "malformed gpuindex sparse load request: %zu bytes of state",
				 (size_t) bytes);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	if (st->dim < 1 || st->dim > GI_SPARSE_MAX_DIM)
	{
		snprintf(err, errlen, "gpuindex sparse store of %u dimensions (1 to %d allowed)",
				 st->dim, GI_SPARSE_MAX_DIM);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	store->nlists = st->dim;
	store->record_bytes = sizeof(float);
	store->key_mode = GI_KEYS_PER_LIST;
	store->summary_bytes = sizeof(gi_sparse_state);
	return 0;
}

static int
sparse_check_search(const void *summary, const GiKindSearch *req, uint64 *group,
					char *err, Size errlen)
{
	const gi_sparse_state *st = summary;
	const gi_sparse_search_params *p = GI_KARGS(req->args, gi_sparse_search_params);
	const char *q = req->queries;
	Size		at = 0;

	if (p->dim != st->dim)
	{
		snprintf(err, errlen, "gpuindex search: query has %u dimensions, index has %u",
				 p->dim, st->dim);
		return ERRCODE_DATA_EXCEPTION;
	}
	if (p->method > GI_SPARSE_DOC)
	{
		snprintf(err, errlen, "gpuindex sparse search with unknown method %u", p->method);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	for (uint32 i = 0; i < req->args->n; i++)
	{
		uint32		nnz;

		if (req->query_bytes - at < sizeof(uint32))
			break;
		memcpy(&nnz, q + at, sizeof(uint32));
		if (nnz > st->dim || req->query_bytes - at < gi_sparse_query_bytes(nnz))
		{
			at = req->query_bytes + 1;
			break;
		}
		at += gi_sparse_query_bytes(nnz);
	}
	if (at != req->query_bytes)
	{
		snprintf(err, errlen,
				 "malformed gpuindex search request: %zu bytes for %u sparse queries",
				 (size_t) req->query_bytes, req->args->n);
		return ERRCODE_PROTOCOL_VIOLATION;
	}
	*group = p->method;
	return 0;
}

static const void *
sparse_merge_search(const void *summary, const GiKindSearch *reqs, int n,
					void *params, Size *query_bytes)
{
	*(gi_sparse_search_params *) params =
		*GI_KARGS(reqs[0].args, gi_sparse_search_params);
	return gi_kind_concat_queries(reqs, n, query_bytes);
}

static Size
sparse_queries_size(const void *summary, const char *queries, uint32 n)
{
	Size		at = 0;

	for (uint32 i = 0; i < n; i++)
	{
		uint32		nnz;

		memcpy(&nnz, queries + at, sizeof(uint32));
		at += gi_sparse_query_bytes(nnz);
	}
	return at;
}

/* a document's records on one shard, so that its score is complete there */
static void
sparse_route(const void *summary, GiShardMap *map, uint32 n, const uint64 *keys,
			 const uint32 *lists, uint32 *shards)
{
	gi_route_by_key(map, n, keys, shards);
}

static void
sparse_describe(const void *summary, uint32 *dim, char *metric, Size metric_len)
{
	const gi_sparse_state *st = summary;

	*dim = st->dim;
	strlcpy(metric, "ip", metric_len);
}

const GiServiceKind gi_kind_sparse = {
	.kind = GI_KIND_SPARSE,
	.name = "sparse",
	.check_state = sparse_check_state,
	.check_search = sparse_check_search,
	.merge_search = sparse_merge_search,
	.queries_size = sparse_queries_size,
	.route = sparse_route,
	.describe = sparse_describe,
};
