/*
 * gpusparse_batch.c
 *		The batch search API of gpusparse: many sparse queries, one service
 *		round trip.
 *
 *	gpusparse_search(index regclass, queries spvec[], k integer
 *					 [, key_column name, key_type anyelement])
 *		RETURNS TABLE(query integer, ctid tid | key anyelement, distance float8)
 *
 *	gpusparse_search_packed(index regclass, queries bytea, k integer
 *							[, key_column name, key_type anyelement])
 *		the same with the queries packed for drivers: per query an int32
 *		count n, n int32 0-based indices (strictly ascending), n float4
 *		values, all little-endian.
 *
 * For each query the k best visible rows by inner product come back, best
 * first, among the rows sharing at least one term with it (a row sharing
 * none scores 0 and is never a candidate); `query` is the query's 1-based
 * position.  The shared driver (gi_batch.c) checks visibility and
 * continues where too few rows were visible.
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "gpusparse.h"

PG_FUNCTION_INFO_V1(gpusparse_search);
PG_FUNCTION_INFO_V1(gpusparse_search_key);
PG_FUNCTION_INFO_V1(gpusparse_search_packed);
PG_FUNCTION_INFO_V1(gpusparse_search_packed_key);

static void
batch_check_count(Size nq)
{
	if (nq > GPUSPARSE_BATCH_MAX_QUERIES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("at most %d queries per call", GPUSPARSE_BATCH_MAX_QUERIES)));
}

/* the queries of the spvec[] form */
static SpVec **
batch_queries(Relation index, ArrayType *arr, int *nq_out)
{
	Datum	   *elems = gi_batch_query_elems(arr, "spvec", GPUSPARSE_BATCH_MAX_QUERIES, nq_out);
	SpVec	  **q = palloc(sizeof(SpVec *) * *nq_out);

	for (int i = 0; i < *nq_out; i++)
		q[i] = gpusparse_datum_spvec(index, elems[i]);
	return q;
}

static int32
read_le32(const char *p)
{
	uint32		u;

	memcpy(&u, p, sizeof(u));
#ifdef WORDS_BIGENDIAN
	u = pg_bswap32(u);
#endif
	return (int32) u;
}

/* the queries of the packed form, each checked as spvec input checks */
static SpVec **
batch_queries_packed(bytea *raw, uint32 dim, int *nq_out)
{
	const char *p = VARDATA_ANY(raw);
	Size		len = VARSIZE_ANY_EXHDR(raw);
	Size		at = 0;
	int			nq = 0;
	int			cap = 16;
	SpVec	  **q = palloc(sizeof(SpVec *) * cap);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must not be empty")));
	while (at < len)
	{
		int32		n;
		SpVec	   *v;
		float4	   *values;

		if (len - at < sizeof(int32) ||
			(n = read_le32(p + at)) < 0 ||
			(Size) n > (len - at - sizeof(int32)) / 8)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("packed query %d is truncated", nq + 1),
					 errhint("Each query is an int32 count n, n int32 indices and n float4 values, little-endian.")));
		if ((uint32) n > dim)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("packed query %d has %d non-zeros, more than the index's %u dimensions",
							nq + 1, n, dim)));
		at += sizeof(int32);
		v = spvec_alloc((int) dim, n);
		values = SPVEC_VALUES(v);
		for (int i = 0; i < n; i++)
		{
			int32		idx = read_le32(p + at + (Size) i * 4);
			int32		bits = read_le32(p + at + (Size) n * 4 + (Size) i * 4);

			memcpy(&values[i], &bits, sizeof(float4));
			if (idx < 0 || (uint32) idx >= dim || (i > 0 && idx <= v->indices[i - 1]))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("packed query %d has index %d out of order or outside 0..%u",
								nq + 1, idx, dim - 1)));
			if (isnan(values[i]) || isinf(values[i]))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("packed query %d has a value that is not finite", nq + 1)));
			v->indices[i] = idx;
		}
		at += (Size) n * 8;
		if (nq == cap)
		{
			cap *= 2;
			q = repalloc(q, sizeof(SpVec *) * cap);
		}
		q[nq++] = v;
		batch_check_count(nq);
	}
	*nq_out = nq;
	return q;
}

/* GiBatch.search over GpusparseBatchArg's queries */
gi_hit *
gpusparse_batch_search(void *arg, const int *qidx, int n, uint32 kreq, uint32 **found)
{
	GpusparseBatchArg *a = arg;
	void	   *packed;
	Size		bytes;
	gi_hit	   *hits;

	for (int i = 0; i < n; i++)
		a->qbuf[i] = a->queries[qidx[i]];
	packed = gpusparse_pack_queries(a->qbuf, n, &bytes);
	hits = gpusparse_search_service(a->index, a->dim, packed, bytes, (uint32) n,
									kreq, found);
	pfree(packed);
	return hits;
}

/* a search sent ahead: its request, its packed queries, what its answer will hold */
typedef struct GpusparseAhead
{
	GiCall		call;
	GiCallAhead *h;
	void	   *packed;
	uint32		nq;
	uint32		k;
} GpusparseAhead;

/* GiBatch.search_ahead over GpusparseBatchArg's queries */
void *
gpusparse_batch_search_ahead(void *arg, const int *qidx, int n, uint32 kreq)
{
	GpusparseBatchArg *a = arg;
	GpusparseAhead *x = palloc(sizeof(GpusparseAhead));
	Size		bytes;

	for (int i = 0; i < n; i++)
		a->qbuf[i] = a->queries[qidx[i]];
	x->packed = gpusparse_pack_queries(a->qbuf, n, &bytes);
	x->nq = (uint32) n;
	x->k = kreq;
	gpusparse_search_request(a->dim, x->packed, bytes, x->nq, kreq, &x->call);
	x->h = gi_call_store_ahead(a->index, &x->call);
	return x;
}

gi_hit *
gpusparse_batch_search_ahead_end(void *arg, void *ahead, uint32 **found)
{
	GpusparseBatchArg *a = arg;
	GpusparseAhead *x = ahead;
	gi_hit	   *hits;

	/* a reply other than OK searches again from x->packed */
	gi_call_store_ahead_end(a->index, &x->call, x->h, gpusparse_load);
	hits = gi_search_answer(&x->call, x->nq, x->k, found);
	pfree(x->packed);
	pfree(x);
	return hits;
}

static Datum
batch_search(FunctionCallInfo fcinfo, bool with_key, bool packed)
{
	int32		k = PG_GETARG_INT32(2);
	GpusparseBatchArg a;
	GiBatch		b;
	int			nq = 0;

	if (k < 1 || k > GPUSPARSE_BATCH_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", GPUSPARSE_BATCH_MAX_K)));

	memset(&b, 0, sizeof(b));
	memset(&a, 0, sizeof(a));
	b.fname = "gpusparse_search";
	b.index = gi_open_index_for_sql(PG_GETARG_OID(0), "gpusparse", "<#>",
									gpusparse_is_gpusparse_index, &b.heap);
	if (with_key)
		gi_batch_key_column(&b, fcinfo, 3);
	a.index = b.index;
	a.dim = gpusparse_get_dim(b.index);

	InitMaterializedSRF(fcinfo, 0);
	/* nothing indexed yet: no dimension to check, no rows */
	if (a.dim > 0)
	{
		if (packed)
			a.queries = batch_queries_packed(PG_GETARG_BYTEA_PP(1), a.dim, &nq);
		else
		{
			a.queries = batch_queries(b.index, PG_GETARG_ARRAYTYPE_P(1), &nq);
			for (int i = 0; i < nq; i++)
				gpusparse_check_dim(b.index, a.dim, a.queries[i]->dim);
		}
		/* this session's own new rows must be searchable */
		gi_flush_inserts(b.index);

		a.qbuf = palloc(sizeof(SpVec *) * nq);
		b.nq = nq;
		b.k = k;
		b.max_k = GPUSPARSE_MAX_K;
		b.search = gpusparse_batch_search;
		b.search_ahead = gpusparse_batch_search_ahead;
		b.search_ahead_end = gpusparse_batch_search_ahead_end;
		b.arg = &a;
		gi_batch_run(&b, fcinfo);
	}

	index_close(b.index, NoLock);
	table_close(b.heap, NoLock);
	return (Datum) 0;
}

Datum
gpusparse_search(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, false);
}

Datum
gpusparse_search_key(PG_FUNCTION_ARGS)
{
	return gi_batch_null_args(fcinfo, 4) ? (Datum) 0 : batch_search(fcinfo, true, false);
}

Datum
gpusparse_search_packed(PG_FUNCTION_ARGS)
{
	return batch_search(fcinfo, false, true);
}

Datum
gpusparse_search_packed_key(PG_FUNCTION_ARGS)
{
	return gi_batch_null_args(fcinfo, 4) ? (Datum) 0 : batch_search(fcinfo, true, true);
}
