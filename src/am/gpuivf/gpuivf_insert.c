/*
 * gpuivf_insert.c
 *		INSERT: the row's list, its record (the vector, or its PQ code),
 *		the append to the pages, then the device insert queued
 *		(gi_pending.c says when it is sent).
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

bool
gpuivf_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			  Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
			  IndexInfo *indexInfo)
{
	MemoryContext tmp;
	MemoryContext old;
	const float4 *vec;
	int			dim;
	GpuivfMeta *meta;
	uint32		list;
	uint32		metric;
	GiListRef	ref;
	uint32		record_bytes;
	const void *record;

	/* like pgvector: NULL vectors are not indexed */
	if (isnull[0])
		return false;

	tmp = AllocSetContextCreate(CurrentMemoryContext, "gpuivf insert",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmp);

	vec = gpuivf_datum_floats(index, values[0], &dim, "vector");
	meta = gpuivf_get_meta(index);
	gpuivf_check_dim(meta, dim);
	if (dim > GPUIVF_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gpuivf indexes support at most %d dimensions", GPUIVF_MAX_DIM),
				 errdetail("The row has %d dimensions.", dim)));
	metric = meta->metric;
	if (!gpuivf_vector_indexable(metric, vec, dim))
		goto done;

	if (meta->lists == 0)
	{
		gpuivf_initialize_lists(index, (uint32) dim);
		meta = gpuivf_get_meta(index);
		gpuivf_check_dim(meta, dim);
	}

	list = gpuivf_nearest_list(meta->centroids, meta->cnorms, meta->lists,
							   dim, metric, vec);
	ref = gpuivf_list_ref(meta, list);
	record_bytes = gpuivf_record_bytes(meta);
	if (meta->quantizer == GPUIVF_QUANTIZER_PQ)
	{
		uint8	   *code = palloc(record_bytes);

		gpuivf_pq_encode(meta, list, vec, code);
		record = code;
	}
	else
		record = vec;
	meta = NULL;				/* the cache may go away from here on */

	gpuivf_append(index, record_bytes, ref, heap_tid, record);
	gi_queue_insert(index, record_bytes, gi_tid_key(heap_tid), list, record);

done:
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmp);
	return false;
}
