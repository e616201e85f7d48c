/*
 * gpuivf_info.c
 *		SQL functions that look inside a gpuivf index: its metadata, its
 *		centroids, which list holds which row, and for pq indexes the
 *		codebooks and every row's code.  For diagnostics and for tests that
 *		check the search against the lists independently.  Each needs the
 *		right to read the whole table (gi_open_index_for_sql).
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
PG_FUNCTION_INFO_V1(gpuivf_pq_codebooks);
PG_FUNCTION_INFO_V1(gpuivf_pq_codes);

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

/* a pq index named by a SQL caller (ERROR for a flat one), and its metadata */
static Relation
open_pq_for_sql(Oid indexoid, Relation *heap, GpuivfMeta **meta)
{
	Relation	index = gpuivf_open_for_sql(indexoid, heap);

	*meta = gpuivf_get_meta(index);
	if ((*meta)->quantizer != GPUIVF_QUANTIZER_PQ)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("gpuivf index \"%s\" does not use quantizer = 'pq'",
						RelationGetRelationName(index))));
	return index;
}

static ArrayType *
float_array(const float4 *v, uint32 n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	ArrayType  *arr;

	for (uint32 j = 0; j < n; j++)
		elems[j] = Float4GetDatum(v[j]);
	arr = construct_array(elems, n, FLOAT4OID, sizeof(float4), true, TYPALIGN_INT);
	pfree(elems);
	return arr;
}

/* every codebook entry: (subspace, entry, its dim / pq_m floats) */
Datum
gpuivf_pq_codebooks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	GpuivfMeta *meta;
	Relation	index = open_pq_for_sql(PG_GETARG_OID(0), &heap, &meta);
	uint32		dsub;

	InitMaterializedSRF(fcinfo, 0);
	dsub = meta->lists > 0 ? meta->dim / meta->pq_m : 0;
	for (uint32 s = 0; dsub > 0 && s < meta->pq_m; s++)
		for (uint32 e = 0; e < meta->pq_ksub; e++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = Int32GetDatum((int32) s);
			values[1] = Int32GetDatum((int32) e);
			values[2] = PointerGetDatum(float_array(meta->codebooks +
													((Size) s * meta->pq_ksub + e) * dsub,
													dsub));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

typedef struct ListCodes
{
	ReturnSetInfo *rsinfo;
	uint32		list;
	uint32		m;
	uint32		code_bits;
} ListCodes;

/* one row of gpuivf_pq_codes, from a copy of the page */
static bool
list_code(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	ListCodes  *lc = (ListCodes *) arg;
	const uint8 *code = (const uint8 *) item + offsetof(GpuivfTupleData, vec);
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	Datum	   *elems = palloc(sizeof(Datum) * lc->m);

	for (uint32 s = 0; s < lc->m; s++)
		elems[s] = Int32GetDatum((int32) gi_pq_code_get(code, s, lc->code_bits));
	values[0] = Int32GetDatum((int32) lc->list);
	values[1] = PointerGetDatum(heaptid);
	values[2] = PointerGetDatum(construct_array(elems, lc->m, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	tuplestore_putvalues(lc->rsinfo->setResult, lc->rsinfo->setDesc, values, nulls);
	pfree(elems);
	return true;
}

/* every entry of a pq index: (list, ctid, its code, one entry number a sub-space) */
Datum
gpuivf_pq_codes(PG_FUNCTION_ARGS)
{
	Relation	heap;
	GpuivfMeta *cached;
	Relation	index = open_pq_for_sql(PG_GETARG_OID(0), &heap, &cached);
	GpuivfMeta	meta = *cached;
	ListCodes	lc;

	InitMaterializedSRF(fcinfo, 0);
	meta.centroids = meta.cnorms = meta.codebooks = NULL;
	lc.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	lc.m = meta.pq_m;
	lc.code_bits = meta.pq_code_bits;
	for (lc.list = 0; lc.list < meta.lists; lc.list++)
		(void) gi_list_walk(index, gpuivf_list_ref(&meta, lc.list), NULL,
							list_code, &lc);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}
