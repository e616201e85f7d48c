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
 *
 * An index of more dimensions than a store has lists (state.terms set)
 * names terms, not lists, in its records and queries: the store's term
 * dictionary gives each term a list when its first record comes, and a
 * query's terms are replaced by their lists (a term no record has is
 * dropped: it scores nothing) and sorted again before a backend sees
 * them.  The dictionary is a cache like the store: a reload builds it anew.
 */
#include "postgres.h"

#include "utils/hsearch.h"

#include "gi_kind.h"
#include "gi_kind_sparse.h"

/* a store's term dictionary (state.terms set) */
typedef struct SparseTerms
{
	HTAB	   *map;			/* term -> list */
	uint32		nlists;			/* lists given out */
} SparseTerms;

typedef struct SparseTerm
{
	uint32		term;			/* hash key */
	uint32		list;
} SparseTerm;

static SparseTerms *
sparse_terms(GiKindData *kd)
{
	if (kd->data == NULL)
	{
		MemoryContext cxt = gi_kind_data_cxt(kd);
		SparseTerms *t = MemoryContextAllocZero(cxt, sizeof(SparseTerms));
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(SparseTerm);
		ctl.hcxt = cxt;
		t->map = hash_create("gpuindex sparse terms", 1024, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		kd->data = t;
	}
	return kd->data;
}

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
	if (st->dim < 1 || st->dim > GI_SPARSE_MAX_LISTS)
	{
		snprintf(err, errlen, "gpuindex sparse store of %u dimensions (1 to %u allowed)",
				 st->dim, GI_SPARSE_MAX_LISTS);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	if (st->terms != 0 && (st->terms <= GI_SPARSE_MAX_LISTS || st->dim != GI_SPARSE_MAX_LISTS))
	{
		snprintf(err, errlen, "gpuindex sparse store of %u lists for %u dimensions (a dictionary needs more than %u dimensions and %u lists)",
				 st->dim, st->terms, GI_SPARSE_MAX_LISTS, GI_SPARSE_MAX_LISTS);
		return ERRCODE_INVALID_PARAMETER_VALUE;
	}
	store->nlists = st->dim;
	store->record_bytes = sizeof(float);
	store->key_mode = GI_KEYS_PER_LIST;
	store->summary_bytes = sizeof(gi_sparse_state);
	return 0;
}

/* the records' terms into lists, new terms given the next list */
static int
sparse_map_lists(const void *summary, GiKindData *kd, uint32 n, uint32 *lists,
				 char *err, Size errlen)
{
	const gi_sparse_state *st = summary;
	SparseTerms *t;

	if (st->terms == 0)
		return 0;
	t = sparse_terms(kd);
	for (uint32 i = 0; i < n; i++)
	{
		SparseTerm *ent;

		if (lists[i] >= st->terms)
		{
			snprintf(err, errlen, "gpuindex sparse insert names term %u of %u",
					 lists[i], st->terms);
			return ERRCODE_INVALID_PARAMETER_VALUE;
		}
		ent = hash_search(t->map, &lists[i], HASH_FIND, NULL);
		if (ent == NULL)
		{
			if (t->nlists >= st->dim)
			{
				snprintf(err, errlen,
						 "gpuindex sparse store has no list left for another dimension: an index uses at most %u distinct dimensions",
						 st->dim);
				return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
			}
			ent = hash_search(t->map, &lists[i], HASH_ENTER, NULL);
			ent->list = t->nlists++;
		}
		lists[i] = ent->list;
	}
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
		if (nnz > (st->terms ? st->terms : st->dim) ||
			req->query_bytes - at < gi_sparse_query_bytes(nnz))
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

typedef struct SparsePair
{
	uint32		list;
	float		weight;
} SparsePair;

static int
cmp_pair(const void *a, const void *b)
{
	uint32		x = ((const SparsePair *) a)->list;
	uint32		y = ((const SparsePair *) b)->list;

	return x < y ? -1 : x > y;
}

/* n queries of terms as the backends take them: lists, ascending */
static void *
sparse_map_queries(const gi_sparse_state *st, GiKindData *kd, const char *in,
				   uint32 n, Size *bytes)
{
	SparseTerms *t = sparse_terms(kd);
	char	   *out = palloc_extended(Max(*bytes, 1), MCXT_ALLOC_HUGE);
	SparsePair *pairs = NULL;
	uint32		room = 0;
	Size		at = 0;
	Size		to = 0;

	for (uint32 q = 0; q < n; q++)
	{
		uint32		nnz;
		uint32		kept = 0;
		const char *terms;
		const char *weights;

		memcpy(&nnz, in + at, sizeof(uint32));
		terms = in + at + sizeof(uint32);
		weights = terms + (Size) nnz * sizeof(uint32);
		if (nnz > room)
		{
			room = Max(nnz, 2 * room);
			pairs = pairs ? repalloc_huge(pairs, (Size) room * sizeof(SparsePair))
				: palloc_extended((Size) room * sizeof(SparsePair), MCXT_ALLOC_HUGE);
		}
		for (uint32 i = 0; i < nnz; i++)
		{
			uint32		term;
			SparseTerm *ent;

			memcpy(&term, terms + (Size) i * sizeof(uint32), sizeof(uint32));
			ent = hash_search(t->map, &term, HASH_FIND, NULL);
			if (ent == NULL)
				continue;		/* no record has it: it scores nothing */
			pairs[kept].list = ent->list;
			memcpy(&pairs[kept].weight, weights + (Size) i * sizeof(float), sizeof(float));
			kept++;
		}
		if (kept > 1)
			qsort(pairs, kept, sizeof(SparsePair), cmp_pair);
		memcpy(out + to, &kept, sizeof(uint32));
		for (uint32 i = 0; i < kept; i++)
		{
			memcpy(out + to + sizeof(uint32) + (Size) i * sizeof(uint32),
				   &pairs[i].list, sizeof(uint32));
			memcpy(out + to + sizeof(uint32) + (Size) kept * sizeof(uint32) +
				   (Size) i * sizeof(float), &pairs[i].weight, sizeof(float));
		}
		at += gi_sparse_query_bytes(nnz);
		to += gi_sparse_query_bytes(kept);
	}
	if (pairs)
		pfree(pairs);
	*bytes = to;
	return out;
}

static const void *
sparse_merge_search(const void *summary, GiKindData *kd, const GiKindSearch *reqs,
					int n, void *params, Size *query_bytes)
{
	const gi_sparse_state *st = summary;
	const void *queries;
	uint32		nq = 0;

	*(gi_sparse_search_params *) params =
		*GI_KARGS(reqs[0].args, gi_sparse_search_params);
	queries = gi_kind_concat_queries(reqs, n, query_bytes);
	if (st->terms == 0)
		return queries;
	for (int i = 0; i < n; i++)
		nq += reqs[i].args->n;
	return sparse_map_queries(st, kd, queries, nq, query_bytes);
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

	*dim = st->terms ? st->terms : st->dim;
	strlcpy(metric, "ip", metric_len);
}

const GiServiceKind gi_kind_sparse = {
	.kind = GI_KIND_SPARSE,
	.name = "sparse",
	.check_state = sparse_check_state,
	.check_search = sparse_check_search,
	.merge_search = sparse_merge_search,
	.map_lists = sparse_map_lists,
	.queries_size = sparse_queries_size,
	.route = sparse_route,
	.describe = sparse_describe,
};
