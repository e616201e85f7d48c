/*
 * gpusparse_insert.c
 *		INSERT: the row's TID appended to the TID directory and its items
 *		to the document chain, then its postings queued for the store in
 *		one request (gi_pending.c says when it is sent).
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusparse.h"

typedef struct AppendArg
{
	Relation	index;
	GiListRef	ref;
} AppendArg;

static void
append_item(void *arg, GpusparseTuple item, Size itemsz)
{
	AppendArg  *a = arg;

	gi_list_append(a->index, GPUSPARSE_PAGE_ID, a->ref, item, itemsz);
}

bool
gpusparse_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
				 Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
				 IndexInfo *indexInfo)
{
	/* like pgvector: NULL vectors are not indexed */
	if (!isnull[0])
		gpusparse_insert_mapped(index, values[0], heap_tid, &gpusparse_spvec_map);
	return false;
}

void
gpusparse_insert_mapped(Relation index, Datum value, ItemPointer heap_tid,
						const GpusparseValueMap *map)
{
	MemoryContext tmp;
	MemoryContext old;
	SpVec	   *v;
	uint32		dim;
	AppendArg	a;
	GiDeadLogSpec log;

	tmp = AllocSetContextCreate(CurrentMemoryContext, "gpusparse insert",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmp);

	dim = gpusparse_get_dim(index);
	v = map->row(index, value, dim);
	gpusparse_check_dim(index, dim, v->dim);
	if (dim == 0)
		gpusparse_check_dim(index, gpusparse_set_dim(index, (uint32) v->dim), v->dim);

	a.index = index;
	a.ref = gpusparse_chain_ref();
	gpusparse_deadlog_spec(index, 0, &log);
	gpusparse_form_items(v, heap_tid, gi_deadlog_add_row(index, &log, heap_tid),
						 append_item, &a);
	gi_queue_row(index, sizeof(float4), gi_tid_key(heap_tid), (uint32) v->nnz,
				 (const uint32 *) v->indices, SPVEC_VALUES(v));

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmp);
}
