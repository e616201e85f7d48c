/*
 * gpuivf_info.c
 *		SQL functions that look inside a gpuivf index: its metadata, its
 *		centroids, which list holds which row.  For diagnostics and for
 *		tests that check the search against the lists independently.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "gpuivf.h"

PG_FUNCTION_INFO_V1(gpuivf_index_info);
PG_FUNCTION_INFO_V1(gpuivf_centroids);
PG_FUNCTION_INFO_V1(gpuivf_list_items);

static const char *const metric_names[] = {"l2", "ip", "cosine"};

/* a gpuivf index named by a SQL caller, with its table (gi_open_index_for_sql) */
Relation
gpuivf_open_for_sql(Oid indexoid, Relation *heap_out)
{
	return gi_open_index_for_sql(indexoid, "gpuivf", "<->", gpuivf_is_gpuivf_index,
								 heap_out);
}

Datum
gpuivf_index_info(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index = gpuivf_open_for_sql(PG_GETARG_OID(0), &heap);
	GpuivfMeta *meta = gpuivf_get_meta(index);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum((int32) meta->dim);
	values[1] = Int32GetDatum((int32) meta->lists);
	values[2] = CStringGetTextDatum(meta->metric < lengthof(metric_names) ?
									metric_names[meta->metric] : "?");
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
gpuivf_centroids(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index = gpuivf_open_for_sql(PG_GETARG_OID(0), &heap);
	GpuivfMeta *meta;

	InitMaterializedSRF(fcinfo, 0);
	meta = gpuivf_get_meta(index);
	for (uint32 l = 0; l < meta->lists; l++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};
		Datum	   *elems = palloc(sizeof(Datum) * meta->dim);

		for (uint32 j = 0; j < meta->dim; j++)
			elems[j] = Float4GetDatum(meta->centroids[(Size) l * meta->dim + j]);
		values[0] = Int32GetDatum((int32) l);
		values[1] = PointerGetDatum(construct_array(elems, meta->dim, FLOAT4OID,
													sizeof(float4), true, TYPALIGN_INT));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(elems);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

typedef struct ListItems
{
	ReturnSetInfo *rsinfo;
	uint32		list;
} ListItems;

/* one row of gpuivf_list_items, from a copy of the page */
static bool
list_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	ListItems  *li = (ListItems *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = Int32GetDatum((int32) li->list);
	values[1] = PointerGetDatum(heaptid);
	tuplestore_putvalues(li->rsinfo->setResult, li->rsinfo->setDesc, values, nulls);
	return true;
}

Datum
gpuivf_list_items(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index = gpuivf_open_for_sql(PG_GETARG_OID(0), &heap);
	GpuivfMeta	meta;
	ListItems	li;

	InitMaterializedSRF(fcinfo, 0);
	meta = *gpuivf_get_meta(index);
	li.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	for (li.list = 0; li.list < meta.lists; li.list++)
		(void) gi_list_walk(index, gpuivf_list_ref(&meta, li.list), NULL,
							list_item, &li);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}
