/*
 * genie_seq.c
 *		genie_seq_search: the rows nearest to many query strings by edit
 *		distance, through an n-gram genie index (GENIE's shotgun and
 *		assembly).
 *
 * Per query, the `candidates` visible rows with the most shared n-grams
 * (one batch of all queries to the device service), each verified with
 * the edit distance; the k nearest are returned, ties by ctid, with a flag
 * that says whether the answer is guaranteed: a row within edit distance d
 * of a query of Q grams shares at least Q - n d of them, and a row that was
 * no candidate shares at most the index count c of the last candidate (0
 * when the index had no more), so when Q - n d_k > c no row outside the
 * candidates is nearer than the k-th answer.  docs/genie.md explains it.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "genie.h"
#include "genie_edit.h"
#include "gpusparse.h"

PG_FUNCTION_INFO_V1(genie_seq_search);

typedef struct SeqAnswer
{
	ItemPointerData tid;
	int			distance;
} SeqAnswer;

static int
answer_cmp(const void *a, const void *b)
{
	const SeqAnswer *x = a;
	const SeqAnswer *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return ItemPointerCompare((ItemPointer) &x->tid, (ItemPointer) &y->tid);
}

/* the k-th smallest distance so far: a max-heap of the k smallest */
typedef struct KthHeap
{
	int		   *d;
	int			n;
	int			k;
} KthHeap;

static void
heap_push(KthHeap *h, int d)
{
	int			i;

	if (h->n == h->k)
	{
		if (d >= h->d[0])
			return;
		/* replace the largest and sift it down */
		i = 0;
		for (;;)
		{
			int			c = 2 * i + 1;

			if (c >= h->n)
				break;
			if (c + 1 < h->n && h->d[c + 1] > h->d[c])
				c++;
			if (h->d[c] <= d)
				break;
			h->d[i] = h->d[c];
			i = c;
		}
		h->d[i] = d;
		return;
	}
	for (i = h->n++; i > 0 && h->d[(i - 1) / 2] < d; i = (i - 1) / 2)
		h->d[i] = h->d[(i - 1) / 2];
	h->d[i] = d;
}

/*
 * Verify one query's candidates: their edit distances, the k nearest
 * sorted into ans[], and whether that answer is guaranteed.  Once k
 * candidates are verified, the next is computed only up to the k-th
 * distance so far: a farther one is recorded as that plus one, which
 * still sorts it after every row of the answer.
 */
static int
verify(const text *q, int qgrams, int n, const GiBatchQuery *cand, int ncand,
	   int k, SeqAnswer *ans, bool *exact)
{
	const char *qs = VARDATA_ANY(q);
	size_t		qlen = VARSIZE_ANY_EXHDR(q);
	int			m = 0;
	int			bound;
	KthHeap		heap = {palloc(sizeof(int) * k), 0, k};
	int		   *work = NULL;
	size_t		worklen = 0;

	for (int r = 0; r < cand->nrows; r++)
	{
		const GiBatchRow *row = &cand->rows[r];
		text	   *t;
		size_t		tlen;
		size_t		need;

		if (row->keynull)
			continue;
		t = DatumGetTextPP(row->key);
		tlen = VARSIZE_ANY_EXHDR(t);
		need = genie_levenshtein_work_size(qlen, tlen);
		if (need > worklen)
		{
			if (work)
				pfree(work);
			worklen = Max(need, 2 * worklen);
			work = palloc(sizeof(int) * worklen);
		}
		ans[m].tid = row->tid;
		if (heap.n < k)
			ans[m].distance = genie_levenshtein(qs, qlen, VARDATA_ANY(t), tlen, work);
		else
			ans[m].distance = genie_levenshtein_max(qs, qlen, VARDATA_ANY(t), tlen,
													heap.d[0], work);
		heap_push(&heap, ans[m].distance);
		m++;
		CHECK_FOR_INTERRUPTS();
	}
	qsort(ans, m, sizeof(SeqAnswer), answer_cmp);
	m = Min(m, k);

	/* the most grams a row that is no candidate can share with the query */
	if (cand->nrows < ncand && !cand->more)
		bound = 0;
	else
		bound = cand->cursor.have_last ? (int) -cand->cursor.last_dist : 0;
	*exact = (m == k &&
			  genie_ngram_count_lower_bound(qgrams, n, ans[m - 1].distance) > bound);
	return m;
}

Datum
genie_seq_search(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		k = PG_GETARG_INT32(2);
	int32		ncand = PG_GETARG_INT32(3);
	GiBatch		b;
	GpusparseBatchArg a;
	Datum	   *elems;
	text	  **queries;
	int		   *qgrams;
	int			nq;
	int			n;
	AttrNumber	col;
	GiBatchQuery *cand;
	SeqAnswer  *ans;

	if (k < 1 || k > GENIE_SEQ_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", GENIE_SEQ_MAX_K)));
	if (ncand < k || ncand > GENIE_SEQ_MAX_CANDIDATES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("candidates must be between k (%d) and %d", k,
						GENIE_SEQ_MAX_CANDIDATES)));

	memset(&b, 0, sizeof(b));
	memset(&a, 0, sizeof(a));
	b.fname = "genie_seq_search";
	b.index = gi_open_index_for_sql(PG_GETARG_OID(0), "genie n-gram", "<%>",
									genie_is_ngram_index, &b.heap);
	col = b.index->rd_index->indkey.values[0];
	if (col == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genie_seq_search needs an index on a column, not on an expression")));
	b.keyatt = col;
	b.keylen = -1;
	b.keybyval = false;
	n = genie_ngram_index_n(b.index);
	a.index = b.index;
	a.dim = gpusparse_get_dim(b.index);

	InitMaterializedSRF(fcinfo, 0);
	/* nothing indexed yet: no rows */
	if (a.dim == 0)
	{
		index_close(b.index, NoLock);
		table_close(b.heap, NoLock);
		return (Datum) 0;
	}

	elems = gi_batch_query_elems(PG_GETARG_ARRAYTYPE_P(1), "text",
								 GENIE_SEQ_MAX_QUERIES, &nq);
	queries = palloc(sizeof(text *) * nq);
	qgrams = palloc(sizeof(int) * nq);
	a.queries = palloc(sizeof(SpVec *) * nq);
	a.qbuf = palloc(sizeof(SpVec *) * nq);
	for (int i = 0; i < nq; i++)
	{
		uint32		nkeys;
		uint64	   *keys;

		queries[i] = DatumGetTextPP(elems[i]);
		keys = genie_text_ngram_keywords(VARDATA_ANY(queries[i]),
										 VARSIZE_ANY_EXHDR(queries[i]), n, &nkeys);
		qgrams[i] = (int) nkeys;
		a.queries[i] = genie_query_spvec(genie_items_of_keys(keys, nkeys), nkeys, a.dim);
		pfree(keys);
	}
	/* this session's own new rows must be searchable */
	gi_flush_inserts(b.index);

	b.nq = nq;
	b.k = ncand;
	b.max_k = GPUSPARSE_MAX_K;
	b.search = gpusparse_batch_search;
	b.arg = &a;
	cand = gi_batch_collect(&b);

	ans = palloc(sizeof(SeqAnswer) * ncand);
	for (int q = 0; q < nq; q++)
	{
		bool		exact;
		int			m = verify(queries[q], qgrams[q], n, &cand[q], ncand, k,
								ans, &exact);

		for (int r = 0; r < m; r++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			values[0] = Int32GetDatum(q + 1);
			values[1] = PointerGetDatum(&ans[r].tid);
			values[2] = Int32GetDatum(ans[r].distance);
			values[3] = BoolGetDatum(exact);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}

	index_close(b.index, NoLock);
	table_close(b.heap, NoLock);
	return (Datum) 0;
}
