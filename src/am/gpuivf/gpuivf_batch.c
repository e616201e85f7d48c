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
 * `query` is the 1-based position of the query in the array.  The shared
 * driver (gi_batch.c) sends the queries, checks visibility and continues
 * where too few rows were visible; this file reads the queries and says
 * how to search them.
 *
 * On a pq index with gpuivf.pq_rerank = N, each search asks for N times
 * the hits, re-ranks them by exact distance (gpuivf_rerank.c) and keeps
 * the best: a query gets the k nearest visible rows among the N * k
 * nearest by code (more candidates when fewer than k of those are
 * visible), with exact distances.
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "gpuivf.h"
#include "vecarray.h"

PG_FUNCTION_INFO_V1(gpuivf_search);
PG_FUNCTION_INFO_V1(gpuivf_search_key);
PG_FUNCTION_INFO_V1(gpuivf_search_bytea);
PG_FUNCTION_INFO_V1(gpuivf_search_bytea_key);

/* what the search callback needs */
typedef struct GpuivfBatchArg
{
	Relation	index;
	Relation	heap;
	const float4 *queries;
	float4	   *qbuf;
	uint32		dim;
	uint32		metric;
	uint32		probes;
	uint32		rerank;			/* pq: candidates per hit re-ranked; 0: none */
	GpuivfRerank *rr;
} GpuivfBatchArg;

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

/*
 * The re-ranked search of a pq index: for each query the candidates by
 * code, re-ranked by exact distance, rows the snapshot does not see
 * dropped; a query with fewer than kreq visible candidates while the
 * service has more asks again for twice as many.  So found[i] < kreq only
 * when the candidates ran out, and the driver never needs another round.
 */
static gi_hit *
batch_search_reranked(GpuivfBatchArg *a, int n, uint32 kreq, uint32 **found)
{
	gi_hit	   *hits = palloc_extended(gi_search_out_size((uint32) n, kreq),
									   MCXT_ALLOC_HUGE);
	int		   *pend = palloc(sizeof(int) * n);
	float4	   *sub = palloc_extended((Size) n * a->dim * sizeof(float4), MCXT_ALLOC_HUGE);
	int			npend = n;
	uint32		kc = (uint32) Min((uint64) kreq * a->rerank, (uint64) GPUIVF_MAX_K);
	Snapshot	snapshot = GetActiveSnapshot();

	*found = gi_search_found(hits, (uint32) n, kreq);
	for (int i = 0; i < n; i++)
		pend[i] = i;
	if (a->rr == NULL)
		a->rr = gpuivf_rerank_begin(a->index, a->heap);
	while (npend > 0)
	{
		uint32	   *cfound;
		gi_hit	   *cand;
		int			nstill = 0;

		for (int j = 0; j < npend; j++)
			memcpy(sub + (Size) j * a->dim, a->qbuf + (Size) pend[j] * a->dim,
				   a->dim * sizeof(float4));
		cand = gpuivf_search_service(a->index, a->dim, sub, (uint32) npend, kc,
									 a->probes, &cfound);
		for (int j = 0; j < npend; j++)
		{
			int			i = pend[j];
			gi_hit	   *c = cand + (Size) j * kc;
			gi_hit	   *out = hits + (Size) i * kreq;
			uint32		nr = gpuivf_rerank(a->rr, snapshot, sub + (Size) j * a->dim,
										   a->dim, a->metric, c, cfound[j]);
			uint32		keep = Min(nr, kreq);

			if (keep < kreq && cfound[j] >= kc && kc < GPUIVF_MAX_K)
			{
				pend[nstill++] = i;
				continue;
			}
			memcpy(out, c, keep * sizeof(gi_hit));
			for (uint32 r = keep; r < kreq; r++)
			{
				out[r].key = 0;
				out[r].distance = get_float4_infinity();
				out[r].pad = 0;
			}
			(*found)[i] = keep;
		}
		pfree(cand);
		npend = nstill;
		kc = (uint32) Min((uint64) kc * 2, (uint64) GPUIVF_MAX_K);
		CHECK_FOR_INTERRUPTS();
	}
	pfree(sub);
	pfree(pend);
	return hits;
}

static gi_hit *
batch_search_some(void *arg, const int *qidx, int n, uint32 kreq, uint32 **found)
{
	GpuivfBatchArg *a = arg;

	for (int i = 0; i < n; i++)
		memcpy(a->qbuf + (Size) i * a->dim, a->queries + (Size) qidx[i] * a->dim,
			   a->dim * sizeof(float4));
	if (a->rerank > 0)
		return batch_search_reranked(a, n, kreq, found);
	return gpuivf_search_service(a->index, a->dim, a->qbuf, (uint32) n, kreq,
								 a->probes, found);
}

/* a search sent ahead: its request and what its answer will hold */
typedef struct GpuivfAhead
{
	GiCall		call;
	GiCallAhead *h;
	uint32		nq;
	uint32		k;
} GpuivfAhead;

static void *
batch_search_ahead(void *arg, const int *qidx, int n, uint32 kreq)
{
	GpuivfBatchArg *a = arg;
	GpuivfAhead *x;

	if (a->rerank > 0)
		return NULL;
	for (int i = 0; i < n; i++)
		memcpy(a->qbuf + (Size) i * a->dim, a->queries + (Size) qidx[i] * a->dim,
			   a->dim * sizeof(float4));
	x = palloc(sizeof(GpuivfAhead));
	x->nq = (uint32) n;
	x->k = kreq;
	gpuivf_search_request(a->index, a->dim, a->qbuf, x->nq, kreq, a->probes, &x->call);
	x->h = gi_call_store_ahead(a->index, &x->call);
	return x;
}

static gi_hit *
batch_search_ahead_end(void *arg, void *ahead, uint32 **found)
{
	GpuivfBatchArg *a = arg;
	GpuivfAhead *x = ahead;
	gi_hit	   *hits;

	/* a reply other than OK searches again from these queries: keep them */
	x->call.in = a->qbuf;
	gi_call_store_ahead_end(a->index, &x->call, x->h, gpuivf_load);
	hits = gi_search_answer(&x->call, x->nq, x->k, found);
	pfree(x);
	return hits;
}

static double
batch_distance(void *arg, float distance)
{
	return gpuivf_distance_value(((GpuivfBatchArg *) arg)->metric, distance);
}

/* both forms: binary says queries is the bytea of float4 rather than real[] */
static Datum
batch_search(FunctionCallInfo fcinfo, bool with_key, bool binary)
{
	Oid			indexoid = PG_GETARG_OID(0);
	int32		k = PG_GETARG_INT32(2);
	GpuivfMeta *meta;
	GpuivfBatchArg a;
	GiBatch		b;
	uint32		lists;
	float4	   *queries = NULL;
	int			nq = 0;
	int			qdim = 0;

	if (k < 1 || k > GPUIVF_BATCH_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", GPUIVF_BATCH_MAX_K)));

	memset(&b, 0, sizeof(b));
	b.fname = "gpuivf_search";
	b.index = gpuivf_open_for_sql(indexoid, &b.heap);
	if (with_key)
		gi_batch_key_column(&b, fcinfo, 3);

	if (!binary)
		queries = batch_queries(PG_GETARG_ARRAYTYPE_P(1), &nq, &qdim);

	meta = gpuivf_get_meta(b.index);
	memset(&a, 0, sizeof(a));
	a.dim = meta->dim;
	a.metric = meta->metric;
	a.probes = (uint32) gpuivf_probes;
	a.rerank = meta->quantizer == GPUIVF_QUANTIZER_PQ ? (uint32) gpuivf_pq_rerank : 0;
	lists = meta->lists;
	meta = NULL;

	/* the bytea holds no shape of its own: the index's dimension is it */
	if (binary)
	{
		queries = batch_queries_bytea(PG_GETARG_BYTEA_PP(1), a.dim, &nq);
		qdim = (int) a.dim;
	}

	InitMaterializedSRF(fcinfo, 0);

	/* nothing indexed yet: no dimension to check, no rows */
	if (lists > 0)
	{
		gi_check_same_dim((int) a.dim, qdim);
		for (int i = 0; i < nq; i++)
			gpuivf_check_magnitude(queries + (Size) i * a.dim, (int) a.dim,
								   "query vector");

		/* this session's own new rows must be searchable */
		gi_flush_inserts(b.index);

		a.index = b.index;
		a.heap = b.heap;
		a.queries = queries;
		a.qbuf = palloc_extended((Size) nq * a.dim * sizeof(float4), MCXT_ALLOC_HUGE);
		b.nq = nq;
		b.k = k;
		b.max_k = GPUIVF_MAX_K;
		b.search = batch_search_some;
		b.search_ahead = batch_search_ahead;
		b.search_ahead_end = batch_search_ahead_end;
		b.distance = batch_distance;
		b.arg = &a;
		gi_batch_run(&b, fcinfo);
		if (a.rr)
			gpuivf_rerank_end(a.rr);
	}

	index_close(b.index, NoLock);
	table_close(b.heap, NoLock);
	return (Datum) 0;
}

Datum
gpuivf_search(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, false);
}

Datum
gpuivf_search_key(PG_FUNCTION_ARGS)
{
	return gi_batch_null_args(fcinfo, 4) ? (Datum) 0 : batch_search(fcinfo, true, false);
}

Datum
gpuivf_search_bytea(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, true);
}

Datum
gpuivf_search_bytea_key(PG_FUNCTION_ARGS)
{
	return gi_batch_null_args(fcinfo, 4) ? (Datum) 0 : batch_search(fcinfo, true, true);
}
