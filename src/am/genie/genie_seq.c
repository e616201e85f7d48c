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
 * candidates is nearer than the k-th answer.  The queries are verified in
 * parallel on the host backend's thread pool.  docs/genie.md explains it.
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
#include "host_pool.h"
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
 * One query's verification, detoasted beforehand so that it runs on the
 * host pool's threads (plain C, no PostgreSQL call): the candidates'
 * strings, and where their distances go.
 */
typedef struct SeqTask
{
	const char *q;
	size_t		qlen;
	int			n;				/* candidates with a string */
	const char **s;
	size_t	   *len;
	SeqAnswer  *ans;			/* tids set; distances written by the task */
} SeqTask;

typedef struct SeqPool
{
	SeqTask    *tasks;
	int			k;
	int		   *work;			/* per worker: work_ints, then k for the heap */
	size_t		work_ints;
} SeqPool;

/*
 * The distances of one query's candidates, sorted with their tids.  Once
 * k candidates are verified, the next is computed only up to the k-th
 * distance so far: a farther one is recorded as that plus one, which
 * still sorts it after every row of the answer.
 */
static gi_status
verify_task(void *arg, uint32_t task, uint32_t worker)
{
	SeqPool    *p = arg;
	SeqTask    *t = &p->tasks[task];
	int		   *work = p->work + (size_t) worker * (p->work_ints + p->k);
	KthHeap		heap = {work + p->work_ints, 0, p->k};

	for (int r = 0; r < t->n; r++)
	{
		int			d;

		if (heap.n < p->k)
			d = genie_levenshtein(t->q, t->qlen, t->s[r], t->len[r], work);
		else
			d = genie_levenshtein_max(t->q, t->qlen, t->s[r], t->len[r], heap.d[0], work);
		t->ans[r].distance = d;
		heap_push(&heap, d);
	}
	qsort(t->ans, t->n, sizeof(SeqAnswer), answer_cmp);
	return GI_OK;
}

/* the most grams a row that was no candidate of query cand can share with it */
static int
outside_bound(const GiBatchQuery *cand, int ncand)
{
	if (cand->nrows < ncand && !cand->more)
		return 0;
	return cand->cursor.have_last ? (int) -cand->cursor.last_dist : 0;
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
	b.search_ahead = gpusparse_batch_search_ahead;
	b.search_ahead_end = gpusparse_batch_search_ahead_end;
	b.arg = &a;
	cand = gi_batch_collect(&b);

	/* every candidate's string, detoasted here; the distances on the pool's threads */
	{
		SeqPool		pool;
		size_t		maxlen = 0;
		uint32		workers = gi_host_pool_threads();
		gi_status	st;

		pool.tasks = palloc(sizeof(SeqTask) * nq);
		pool.k = k;
		for (int q = 0; q < nq; q++)
		{
			SeqTask    *t = &pool.tasks[q];

			t->q = VARDATA_ANY(queries[q]);
			t->qlen = VARSIZE_ANY_EXHDR(queries[q]);
			t->s = palloc(sizeof(char *) * Max(cand[q].nrows, 1));
			t->len = palloc(sizeof(size_t) * Max(cand[q].nrows, 1));
			t->ans = palloc(sizeof(SeqAnswer) * Max(cand[q].nrows, 1));
			t->n = 0;
			for (int r = 0; r < cand[q].nrows; r++)
			{
				const GiBatchRow *row = &cand[q].rows[r];
				text	   *str;

				if (row->keynull)
					continue;
				str = DatumGetTextPP(row->key);
				t->s[t->n] = VARDATA_ANY(str);
				t->len[t->n] = VARSIZE_ANY_EXHDR(str);
				t->ans[t->n].tid = row->tid;
				maxlen = Max(maxlen, Min(t->len[t->n], t->qlen));
				t->n++;
			}
			CHECK_FOR_INTERRUPTS();
		}
		pool.work_ints = genie_levenshtein_work_size(maxlen, maxlen);
		if ((pool.work_ints + k) * workers > MaxAllocHugeSize / sizeof(int))
			workers = 1;
		pool.work = palloc_extended(sizeof(int) * (pool.work_ints + k) * workers,
									MCXT_ALLOC_HUGE);
		st = gi_host_pool_run((uint32) nq, workers, verify_task, &pool);
		if (st != GI_OK)
			elog(ERROR, "genie_seq_search: verification failed (%d)", (int) st);
		CHECK_FOR_INTERRUPTS();

		for (int q = 0; q < nq; q++)
		{
			SeqTask    *t = &pool.tasks[q];
			int			m = Min(t->n, k);
			bool		exact;

			exact = (m == k &&
					 genie_ngram_count_lower_bound(qgrams[q], n, t->ans[m - 1].distance) >
					 outside_bound(&cand[q], ncand));
			for (int r = 0; r < m; r++)
			{
				Datum		values[4];
				bool		nulls[4] = {false, false, false, false};

				values[0] = Int32GetDatum(q + 1);
				values[1] = PointerGetDatum(&t->ans[r].tid);
				values[2] = Int32GetDatum(t->ans[r].distance);
				values[3] = BoolGetDatum(exact);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
		}
	}

	index_close(b.index, NoLock);
	table_close(b.heap, NoLock);
	return (Datum) 0;
}
