/*
 * gpusparse_load.c
 *		gpusparse's requests about its store: loading it from the pages
 *		(every live row's pairs, through gi_load) and searching it.
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusparse.h"

typedef struct LoadArg
{
	GiLoad	   *load;
	uint32		dim;
	int32		terms[GPUSPARSE_ITEM_MAX_NNZ];
	float4		weights[GPUSPARSE_ITEM_MAX_NNZ];
} LoadArg;

static bool
load_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	LoadArg    *la = arg;
	const GpusparseTupleData *t = (const GpusparseTupleData *) item;
	uint64		key;

	if (!gpusparse_item_pairs(t, itemsz, la->dim, la->terms, la->weights))
		gpusparse_item_corrupt(la->load->index, itemsz);
	key = gi_tid_key((ItemPointer) &t->heaptid);
	for (int i = 0; i < t->nnz; i++)
		if (!gi_load_emit(la->load, key, (uint32) la->terms[i], &la->weights[i]))
			return false;
	return true;
}

static void
walk_chain(GiLoad *load, void *arg)
{
	BufferAccessStrategy bas = GetAccessStrategy(BAS_BULKREAD);
	LoadArg    *la = palloc(sizeof(LoadArg));

	la->load = load;
	la->dim = *(uint32 *) arg;
	gpusparse_walk_rows(load->index, bas, load_item, la);
	pfree(la);
	FreeAccessStrategy(bas);
}

/*
 * The store's lists for an index of dim dimensions: one per dimension, or
 * as many as a store has, which the device service gives to the terms in
 * use (the requests name terms all the same).
 */
uint32
gpusparse_store_dim(uint32 dim)
{
	return Min(dim, GI_SPARSE_MAX_LISTS);
}

/*
 * Load the index's store from its pages (the GiLoadFn of gpusparse): true
 * when it is ready or there is nothing to load, false when another backend
 * loads it.
 */
bool
gpusparse_load(Relation index)
{
	uint32		dim = gpusparse_get_dim(index);
	gi_sparse_state *state;
	GiLoadSpec	spec;

	if (dim == 0)
		return true;			/* nothing indexed: nothing to search */

	state = palloc0(sizeof(gi_sparse_state));
	state->dim = gpusparse_store_dim(dim);
	state->terms = dim > GI_SPARSE_MAX_LISTS ? dim : 0;
	memset(&spec, 0, sizeof(spec));
	spec.kind = GI_KIND_SPARSE;
	spec.state = state;
	spec.state_size = sizeof(gi_sparse_state);
	spec.record_bytes = sizeof(float4);
	spec.walk = walk_chain;
	spec.walk_arg = &dim;
	return gi_load(index, &spec);
}

typedef struct LiveArg
{
	GiDeadLog  *log;
	GiItemFn	fn;
	void	   *arg;
} LiveArg;

static bool
live_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	LiveArg    *la = arg;

	if (itemsz >= offsetof(GpusparseTupleData, data) &&
		gi_deadlog_kills(la->log, item, offsetof(GpusparseTupleData, generation)))
		return true;
	return la->fn(la->arg, heaptid, item, itemsz);
}

/*
 * Every item of the chain that the dead-row log does not kill, for those
 * who read rows from the pages; the log is read first, so that a row
 * logged before the walk began is not seen.
 */
void
gpusparse_walk_rows(Relation index, BufferAccessStrategy bas, GiItemFn fn,
					void *arg)
{
	GiDeadLogSpec spec;
	LiveArg		la;

	gpusparse_deadlog_spec(index, 0, &spec);
	la.log = gi_deadlog_read(index, spec.head);
	la.fn = fn;
	la.arg = arg;
	(void) gi_list_walk(index, gpusparse_chain_ref(), bas, live_item, &la);
	gi_deadlog_free(la.log);
}

/* nq queries in the service's layout (gi_kind_sparse.h), palloc'd */
void *
gpusparse_pack_queries(SpVec **queries, int nq, Size *bytes)
{
	Size		total = 0;
	char	   *buf;
	char	   *p;

	for (int i = 0; i < nq; i++)
		total += gi_sparse_query_bytes((uint32) queries[i]->nnz);
	buf = palloc_extended(Max(total, 1), MCXT_ALLOC_HUGE);
	p = buf;
	for (int i = 0; i < nq; i++)
	{
		uint32		nnz = (uint32) queries[i]->nnz;

		memcpy(p, &nnz, sizeof(uint32));
		memcpy(p + sizeof(uint32), queries[i]->indices, nnz * sizeof(int32));
		memcpy(p + sizeof(uint32) + nnz * sizeof(int32), SPVEC_VALUES(queries[i]),
			   nnz * sizeof(float4));
		p += gi_sparse_query_bytes(nnz);
	}
	*bytes = total;
	return buf;
}

/* the service request that searches nq packed queries (bytes) for k rows each */
void
gpusparse_search_request(uint32 dim, const void *queries, Size bytes, uint32 nq,
						 uint32 k, GiCall *call)
{
	memset(call, 0, sizeof(*call));
	call->type = GI_REQ_SEARCH;
	call->args.kind = GI_KIND_SPARSE;
	call->args.n = nq;
	call->args.k = k;
	GI_KARGS(&call->args, gi_sparse_search_params)->dim = gpusparse_store_dim(dim);
	GI_KARGS(&call->args, gi_sparse_search_params)->method = (uint32) gpusparse_method;
	call->in = queries;
	call->in_size = bytes;
	call->out_capacity = gi_search_out_size(nq, k);
}

/* the k best rows for each of nq packed queries, as gi_search_answer gives them */
gi_hit *
gpusparse_search_service(Relation index, uint32 dim, const void *queries,
						 Size bytes, uint32 nq, uint32 k, uint32 **found)
{
	GiCall		call;

	gpusparse_search_request(dim, queries, bytes, nq, k, &call);
	gi_call_store(index, &call, gpusparse_load);
	return gi_search_answer(&call, nq, k, found);
}
