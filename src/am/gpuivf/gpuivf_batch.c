/*
 * gpuivf_batch.c
 *		The batch search API: many query vectors, one service round trip.
 *
 *	gpuivf_search(index regclass, queries real[], k integer)
 *		RETURNS TABLE(query integer, ctid tid, distance float8)
 *	gpuivf_search(index regclass, queries real[], k integer,
 *				  key_column name, key_type anyelement)
 *		RETURNS TABLE(query integer, key anyelement, distance float8)
 *
 *	gpuivf_search_packed(index regclass, queries bytea, k integer
 *						 [, key_column name, key_type anyelement])
 *		the same, with the queries as n * dim float4 values, little-endian,
 *		packed row after row (numpy's q.astype('<f4').tobytes()): no text
 *		parsing of the floats on the server.  Its own name, not an overload,
 *		so that an untyped literal still picks the real[] form.
 *
 * queries is a 2-D array (one query per row) or a 1-D array (one query).
 * For each query the k nearest rows of the probed lists (gpuivf.probes)
 * that are visible to the statement's snapshot come back, nearest first;
 * `query` is the 1-based position of the query in the array.  All queries
 * go to the service in one GI_REQ_SEARCH (split only when the answer would
 * pass GPUIVF_BATCH_REPLY_BYTES); queries that found fewer than k visible
 * rows while the service had more are searched again, together, with k
 * doubled, continuing after the last (distance, key) seen, exactly like
 * the ordered scan.  Visibility is checked on the heap, following HOT
 * chains: ctid is the visible version's.
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "storage/predicate.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "gpuivf.h"
#include "vecarray.h"

PG_FUNCTION_INFO_V1(gpuivf_search);
PG_FUNCTION_INFO_V1(gpuivf_search_key);
PG_FUNCTION_INFO_V1(gpuivf_search_bytea);
PG_FUNCTION_INFO_V1(gpuivf_search_bytea_key);

/* the answer of one request stays well under palloc's 1 GB */
#define GPUIVF_BATCH_REPLY_BYTES	((Size) 256 * 1024 * 1024)

typedef struct BatchRow
{
	ItemPointerData tid;
	double		distance;
	Datum		key;
	bool		keynull;
} BatchRow;

typedef struct BatchQuery
{
	BatchRow   *rows;			/* up to k, grown on demand */
	int			nrows;
	int			cap;
	bool		done;
	GiHitCursor cursor;			/* after the last hit seen */
} BatchQuery;

static void
batch_check_count(Size nq)
{
	if (nq > GPUIVF_BATCH_MAX_QUERIES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("at most %d queries per call", GPUIVF_BATCH_MAX_QUERIES)));
}

/* the same rule for both input forms: finite values only */
static void
batch_check_values(const float4 *q, int nq, int dim)
{
	for (Size i = 0; i < (Size) nq * dim; i++)
	{
		if (isnan(q[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("query vector must not contain NaN"),
					 errdetail("Query %d has NaN.", (int) (i / dim) + 1)));
		if (isinf(q[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("query vector must not contain infinite values"),
					 errdetail("Query %d has an infinite value.", (int) (i / dim) + 1)));
	}
}

/* the queries of the real[] form as nq * dim floats, validated */
static float4 *
batch_queries(ArrayType *arr, int *nq_out, int *dim_out)
{
	int			ndim = ARR_NDIM(arr);
	int			nq;
	int			dim;
	float4	   *q;

	if (ARR_ELEMTYPE(arr) != FLOAT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("queries must be an array of real")));
	if (ndim == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must not be empty")));
	if (ndim > 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a two-dimensional array, one query per row"),
				 errdetail("Array has %d dimensions.", ndim)));
	nq = ndim == 2 ? ARR_DIMS(arr)[0] : 1;
	dim = ARR_DIMS(arr)[ndim - 1];
	batch_check_count(nq);
	if (dim > GI_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("query vector cannot have more than %d dimensions", GI_MAX_DIM)));
	if (array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queries must not contain nulls")));

	q = (float4 *) ARR_DATA_PTR(arr);
	batch_check_values(q, nq, dim);
	*nq_out = nq;
	*dim_out = dim;
	return q;
}

/*
 * The queries of the bytea form as nq * dim floats, validated: the bytes
 * are float4 values, little-endian, row after row; dim is the index's (0:
 * nothing indexed yet, only the length's form is checked and nq is 0).
 */
static float4 *
batch_queries_bytea(bytea *raw, uint32 dim, int *nq_out)
{
	Size		len = VARSIZE_ANY_EXHDR(raw);
	Size		rowbytes = (Size) Max(dim, 1) * sizeof(float4);
	Size		nq;
	float4	   *q;

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must not be empty")));
	if (len % rowbytes != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("length of queries must be a multiple of %zu bytes: the index has %u dimensions, a float4 (4 bytes) each",
						rowbytes, dim),
				 len % sizeof(float4) != 0 ?
				 errdetail("%zu bytes is not a whole number of float4 values.", len) :
				 errdetail("%zu bytes are %zu float4 values, not a multiple of %u (%zu x %u + %zu).",
						   len, len / sizeof(float4), dim, len / rowbytes, dim,
						   (len % rowbytes) / sizeof(float4)),
				 errhint("Pack n x %u little-endian float4 values row after row, as numpy's q.astype('<f4').tobytes() does.",
						 dim)));
	*nq_out = 0;
	if (dim == 0)
		return NULL;
	nq = len / rowbytes;
	batch_check_count(nq);

	q = palloc(len);
	memcpy(q, VARDATA_ANY(raw), len);
#ifdef WORDS_BIGENDIAN
	for (Size i = 0; i < len / sizeof(float4); i++)
	{
		uint32		u;

		memcpy(&u, &q[i], sizeof(u));
		u = pg_bswap32(u);
		memcpy(&q[i], &u, sizeof(u));
	}
#endif
	batch_check_values(q, (int) nq, (int) dim);
	*nq_out = (int) nq;
	return q;
}

/* both forms: binary says queries is the bytea of float4 rather than real[] */
static Datum
batch_search(FunctionCallInfo fcinfo, bool with_key, bool binary)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			indexoid = PG_GETARG_OID(0);
	int32		k = PG_GETARG_INT32(2);
	Relation	heap;
	Relation	index;
	GpuivfMeta *meta;
	uint32		dim;
	uint32		lists;
	uint32		metric;
	uint32		probes = (uint32) gpuivf_probes;
	float4	   *queries = NULL;
	int			nq = 0;
	int			qdim = 0;
	AttrNumber	keyatt = InvalidAttrNumber;
	BatchQuery *bq;
	int		   *pend;
	int			npend;
	uint32		kreq;
	float4	   *qbuf;
	Snapshot	snapshot;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	int16		keylen = 0;
	bool		keybyval = true;

	if (k < 1 || k > GPUIVF_BATCH_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", GPUIVF_BATCH_MAX_K)));

	index = gpuivf_open_for_sql(indexoid, &heap);

	if (with_key)
	{
		Name		colname = PG_GETARG_NAME(3);
		Oid			want = get_fn_expr_argtype(fcinfo->flinfo, 4);
		Oid			have;
		int32		typmod;
		Oid			collid;

		keyatt = get_attnum(RelationGetRelid(heap), NameStr(*colname));
		if (keyatt < 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key_column cannot be a system column"),
					 errhint("gpuivf_search(index, queries, k) returns the ctid.")));
		if (keyatt == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							NameStr(*colname), RelationGetRelationName(heap))));
		get_atttypetypmodcoll(RelationGetRelid(heap), keyatt, &have, &typmod, &collid);
		if (!OidIsValid(want) || want != have)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" has type %s, but key_type is %s",
							NameStr(*colname), format_type_be(have),
							OidIsValid(want) ? format_type_be(want) : "unknown"),
					 errhint("Pass a NULL of the column's type as key_type, e.g. NULL::%s.",
							 format_type_be(have))));
		get_typlenbyval(have, &keylen, &keybyval);
	}

	if (!binary)
		queries = batch_queries(PG_GETARG_ARRAYTYPE_P(1), &nq, &qdim);

	meta = gpuivf_get_meta(index);
	dim = meta->dim;
	lists = meta->lists;
	metric = meta->metric;
	meta = NULL;

	/* the bytea holds no shape of its own: the index's dimension is it */
	if (binary)
	{
		queries = batch_queries_bytea(PG_GETARG_BYTEA_PP(1), dim, &nq);
		qdim = (int) dim;
	}

	InitMaterializedSRF(fcinfo, 0);

	/* nothing indexed yet: no dimension to check, no rows */
	if (lists == 0)
	{
		index_close(index, NoLock);
		table_close(heap, NoLock);
		return (Datum) 0;
	}
	gi_check_same_dim((int) dim, qdim);
	for (int i = 0; i < nq; i++)
		gpuivf_check_magnitude(queries + (Size) i * dim, (int) dim, "query vector");

	gpuivf_check_not_in_recovery();
	/* this session's own new rows must be searchable */
	gi_flush_inserts(index);

	bq = palloc0(sizeof(BatchQuery) * nq);
	pend = palloc(sizeof(int) * nq);
	for (int i = 0; i < nq; i++)
	{
		pend[i] = i;
	}
	npend = nq;
	kreq = (uint32) k;
	qbuf = palloc_extended((Size) nq * dim * sizeof(float4), MCXT_ALLOC_HUGE);

	snapshot = GetActiveSnapshot();
	/* what an ordered scan of an index without predicate locks takes */
	PredicateLockRelation(index, snapshot);
	fetch = table_index_fetch_begin(heap);
	slot = table_slot_create(heap, NULL);

	while (npend > 0)
	{
		int			per_call = (int) Max(1, GPUIVF_BATCH_REPLY_BYTES /
										 gi_search_out_size(1, kreq));
		int			nstill = 0;

		for (int from = 0; from < npend; from += per_call)
		{
			int			n = Min(per_call, npend - from);
			gi_hit	   *hits;
			uint32	   *found;

			for (int i = 0; i < n; i++)
				memcpy(qbuf + (Size) i * dim, queries + (Size) pend[from + i] * dim,
					   dim * sizeof(float4));
			hits = gpuivf_search_service(index, dim, qbuf, (uint32) n, kreq, probes,
										 &found);

			for (int i = 0; i < n; i++)
			{
				BatchQuery *b = &bq[pend[from + i]];

				for (uint32 r = 0; r < found[i] && b->nrows < k; r++)
				{
					gi_hit	   *h = &hits[(Size) i * kreq + r];
					ItemPointerData tid;
					bool		call_again = false;
					bool		all_dead = false;

					if (!gi_hit_cursor_next(&b->cursor, h))
						continue;	/* seen in an earlier round */

					gi_key_to_tid(h->key, &tid);
					if (table_index_fetch_tuple(fetch, &tid, snapshot, slot,
												&call_again, &all_dead))
					{
						BatchRow   *row;

						if (b->nrows == b->cap)
						{
							b->cap = Min(k, Max(16, b->cap * 2));
							b->rows = b->rows ?
								repalloc_huge(b->rows, sizeof(BatchRow) * b->cap) :
								palloc_extended(sizeof(BatchRow) * b->cap, MCXT_ALLOC_HUGE);
						}
						row = &b->rows[b->nrows++];

						row->tid = slot->tts_tid;
						row->distance = gpuivf_distance_value(metric, h->distance);
						if (with_key)
						{
							row->key = slot_getattr(slot, keyatt, &row->keynull);
							if (!row->keynull)
								row->key = datumCopy(row->key, keybyval, keylen);
						}
					}
					ExecClearTuple(slot);
				}
				/* fewer than k visible while the service had more: again */
				if (b->nrows < k && found[i] >= kreq)
					pend[nstill++] = pend[from + i];
				else
					b->done = true;
			}
			pfree(hits);
			CHECK_FOR_INTERRUPTS();
		}

		npend = nstill;
		if (npend > 0)
		{
			if (kreq >= GPUIVF_MAX_K)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("gpuivf_search cannot look at more than %u rows per query",
								GPUIVF_MAX_K)));
			kreq = (uint32) Min((uint64) kreq * 2, (uint64) GPUIVF_MAX_K);
		}
	}

	ExecDropSingleTupleTableSlot(slot);
	table_index_fetch_end(fetch);

	for (int q = 0; q < nq; q++)
	{
		for (int r = 0; r < bq[q].nrows; r++)
		{
			BatchRow   *row = &bq[q].rows[r];
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = Int32GetDatum(q + 1);
			if (with_key)
			{
				values[1] = row->key;
				nulls[1] = row->keynull;
			}
			else
				values[1] = PointerGetDatum(&row->tid);
			values[2] = Float8GetDatum(row->distance);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}

	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

/* not STRICT, since key_type is normally a NULL: check the others here */
static Datum
batch_search_key(FunctionCallInfo fcinfo, bool binary)
{
	for (int i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
		{
			InitMaterializedSRF(fcinfo, 0);
			return (Datum) 0;
		}
	return batch_search(fcinfo, true, binary);
}

Datum
gpuivf_search(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, false);
}

Datum
gpuivf_search_key(PG_FUNCTION_ARGS)
{
	return batch_search_key(fcinfo, false);
}

Datum
gpuivf_search_bytea(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, true);
}

Datum
gpuivf_search_bytea_key(PG_FUNCTION_ARGS)
{
	return batch_search_key(fcinfo, true);
}
