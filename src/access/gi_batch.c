/*
 * gi_batch.c
 *		What the access methods' SQL functions share: opening an index
 *		named by a caller with the checks a SELECT would make, and the
 *		batch search driver that turns the service's hits into visible rows.
 *
 * The driver sends every query of a call to the service (split so that
 * no answer passes GI_BATCH_REPLY_BYTES, and, where the AM can send a
 * search ahead, into parts searched while the rows of the part before are
 * checked), keeps the hits whose heap tuple
 * is visible to the statement's snapshot (following HOT chains, so the
 * ctid is the visible version's; the rows of many queries fetched
 * together in TID order), and searches again, together and with k
 * doubled, the queries that found fewer than k visible rows while the
 * service had more, continuing after the last (distance, key) seen
 * exactly like an ordered scan.  The AM supplies the search and the
 * distance the SQL operator would show.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/buf_internals.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/predicate.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/spccache.h"
#include "utils/snapmgr.h"

#include "gi_access.h"

/* the answer of one request stays well under palloc's 1 GB */
#define GI_BATCH_REPLY_BYTES	((Size) 256 * 1024 * 1024)

/* rows whose visibility is checked together (in TID order) at most */
#define GI_BATCH_FETCH_ROWS		65536

/*
 * A batch that can be searched ahead goes to the service in about this many
 * parts of at least GI_BATCH_AHEAD_MIN queries: while the service searches
 * one, the backend checks the rows of the one before.
 */
#define GI_BATCH_AHEAD_PARTS	4
#define GI_BATCH_AHEAD_MIN		64

/*
 * Open an index of access method amname (ordered by opname) named by a SQL caller, with its
 * table, after checking that the caller may read the table (an index
 * reveals its rows).  Both are locked AccessShareLock until the end of
 * the transaction.
 */
Relation
gi_open_index_for_sql(Oid indexoid, const char *amname, const char *opname,
					  bool (*is_ours) (Relation index), Relation *heap_out)
{
	Oid			heapoid;
	Relation	heap;
	Relation	index;
	AclResult	aclresult;

	gi_stages_begin();
	if (get_rel_relkind(indexoid) != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a %s index",
						get_rel_name(indexoid) ? get_rel_name(indexoid) : "?",
						amname)));
	heapoid = IndexGetRelation(indexoid, false);
	heap = table_open(heapoid, AccessShareLock);
	aclresult = pg_class_aclcheck(heapoid, GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(heap->rd_rel->relkind),
					   RelationGetRelationName(heap));

	/*
	 * These functions read the index, not the table through the executor,
	 * so row-level security policies cannot be applied: refuse rather than
	 * show rows a SELECT would hide.
	 */
	if (check_enable_rls(heapoid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security is enabled for table \"%s\"",
						RelationGetRelationName(heap)),
				 errdetail("%s's batch search and inspection functions cannot apply row-level security policies.",
						   amname),
				 errhint("Use SELECT ... ORDER BY column %s query LIMIT k, which applies them.",
						 opname)));
	index = index_open(indexoid, AccessShareLock);
	if (!is_ours(index))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a %s index", RelationGetRelationName(index),
						amname)));
	*heap_out = heap;
	return index;
}

/*
 * The key column of the (..., key_column name, key_type anyelement) forms:
 * arguments keyarg and keyarg + 1 of the call.
 */
void
gi_batch_key_column(GiBatch *b, FunctionCallInfo fcinfo, int keyarg)
{
	Name		colname = PG_GETARG_NAME(keyarg);
	Oid			want = get_fn_expr_argtype(fcinfo->flinfo, keyarg + 1);
	Oid			have;
	int32		typmod;
	Oid			collid;

	b->keyatt = get_attnum(RelationGetRelid(b->heap), NameStr(*colname));
	if (b->keyatt < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key_column cannot be a system column"),
				 errhint("%s(index, queries, k) returns the ctid.", b->fname)));
	if (b->keyatt == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						NameStr(*colname), RelationGetRelationName(b->heap))));
	get_atttypetypmodcoll(RelationGetRelid(b->heap), b->keyatt, &have, &typmod, &collid);
	if (!OidIsValid(want) || want != have)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" has type %s, but key_type is %s",
						NameStr(*colname), format_type_be(have),
						OidIsValid(want) ? format_type_be(want) : "unknown"),
				 errhint("Pass a NULL of the column's type as key_type, e.g. NULL::%s.",
						 format_type_be(have))));
	get_typlenbyval(have, &b->keylen, &b->keybyval);
}

/*
 * The elements of a call's one-dimensional array of queries of type
 * elemname: not empty, at most max, none NULL.
 */
Datum *
gi_batch_query_elems(ArrayType *arr, const char *elemname, int max, int *nq_out)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nq;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a one-dimensional array of %s", elemname)));
	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign,
					  &elems, &nulls, &nq);
	if (nq == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must not be empty")));
	if (nq > max)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("at most %d queries per call", max)));
	for (int i = 0; i < nq; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queries must not contain nulls")));
	*nq_out = nq;
	return elems;
}

/* a row of a call's answer: whether it is visible, and what a result row takes from it */
typedef struct BatchFetch
{
	uint64		key;			/* the hit's key (its TID) */
	const gi_hit *hit;
	int			query;			/* the hit's query, its position in the call */
	bool		visible;
	ItemPointerData tid;		/* the visible version's */
	Datum		keyval;
	bool		keynull;
	Buffer		recent;			/* its heap page's buffer when prefetched */
} BatchFetch;

/*
 * Fetches run behind two prefetch stages: the buffer lookup (and a
 * read-ahead hint for a page not in shared buffers) this many rows ahead,
 * or effective_io_concurrency's when larger, and the tuple the line pointer
 * names half as far ahead.
 */
#define GI_FETCH_AHEAD	16
#define GI_FETCH_AHEAD_MAX	256

/*
 * First stage: look the page up, and bring into cache what the fetch reads
 * first (the page header, the line pointer, the buffer's descriptor).
 */
static void
batch_prefetch_page(GiBatch *b, BatchFetch *f, const BatchFetch *prev)
{
	ItemPointerData tid;

	gi_key_to_tid(f->key, &tid);
	/* the row before in TID order on the same page: its look-up serves */
	if (prev != NULL && gi_key_block(prev->key) == ItemPointerGetBlockNumber(&tid))
		f->recent = prev->recent;
	else
		f->recent = PrefetchBuffer(b->heap, MAIN_FORKNUM,
								   ItemPointerGetBlockNumber(&tid)).recent_buffer;
	/* a line pointer address inside the page only */
	if (ItemPointerGetOffsetNumber(&tid) < 1 ||
		ItemPointerGetOffsetNumber(&tid) > MaxHeapTuplesPerPage)
		f->recent = InvalidBuffer;
	if (BufferIsValid(f->recent))
	{
		/* the page header (pruning hint, line pointer count), the line pointer */
		__builtin_prefetch(BufferGetPage(f->recent));
		__builtin_prefetch(PageGetItemId(BufferGetPage(f->recent),
										 ItemPointerGetOffsetNumber(&tid)));
		/* the descriptor that pinning the buffer will write */
		if (!BufferIsLocal(f->recent))
			__builtin_prefetch(GetBufferDescriptor(f->recent - 1), 1);
	}
}

/*
 * Second stage: bring in the tuple's header.  The page is read without a
 * pin or lock: what is read only picks an address to prefetch (inside the
 * page, whatever it holds), never a result.
 */
static void
batch_prefetch_tuple(BatchFetch *f)
{
	ItemPointerData tid;
	Page		page;
	ItemIdData	lp;

	if (!BufferIsValid(f->recent))
		return;
	gi_key_to_tid(f->key, &tid);
	page = BufferGetPage(f->recent);
	lp = *PageGetItemId(page, ItemPointerGetOffsetNumber(&tid));
	if (lp.lp_flags == LP_NORMAL && lp.lp_off < BLCKSZ - 64)
		__builtin_prefetch((char *) page + lp.lp_off);
}

/*
 * How a batch reads its rows: a heap table directly through its buffers
 * (the page pinned by the prefetch stage's lookup, kept pinned while the
 * next rows lie on it), any other table access method through its index
 * fetch.
 */
typedef struct BatchReader
{
	Relation	heap;
	bool		direct;			/* heapam: read the buffers ourselves */
	Buffer		buf;			/* direct: the page pinned, or InvalidBuffer */
	IndexFetchTableData *fetch; /* otherwise */
	TupleTableSlot *slot;
} BatchReader;

static void
batch_reader_begin(BatchReader *r, Relation heap)
{
	r->heap = heap;
	r->direct = (heap->rd_tableam == GetHeapamTableAmRoutine());
	r->buf = InvalidBuffer;
	r->fetch = NULL;
	r->slot = NULL;
	if (!r->direct)
	{
		r->fetch = table_index_fetch_begin(heap);
		r->slot = table_slot_create(heap, NULL);
	}
}

static void
batch_reader_end(BatchReader *r)
{
	if (BufferIsValid(r->buf))
		ReleaseBuffer(r->buf);
	r->buf = InvalidBuffer;
	if (r->slot)
		ExecDropSingleTupleTableSlot(r->slot);
	if (r->fetch)
		table_index_fetch_end(r->fetch);
}

/* f's key column, copied, from a heap tuple of the table or else from slot */
static void
batch_key_value(GiBatch *b, BatchFetch *f, HeapTuple tuple, TupleTableSlot *slot)
{
	f->keynull = true;
	if (b->keyatt == InvalidAttrNumber)
		return;
	if (tuple)
		f->keyval = heap_getattr(tuple, b->keyatt, RelationGetDescr(b->heap),
								 &f->keynull);
	else
		f->keyval = slot_getattr(slot, b->keyatt, &f->keynull);
	if (!f->keynull)
		f->keyval = datumCopy(f->keyval, b->keybyval, b->keylen);
}

/*
 * The heap's own index fetch, without its buffer look-up where the
 * prefetch stage's buffer still holds the page (ReadRecentBuffer), and
 * with the page kept pinned for the next row on it: the HOT chain is
 * followed to the version visible to the snapshot, with the predicate
 * lock and the opportunistic pruning of heapam_index_fetch_tuple.
 */
static void
batch_fetch_heap(GiBatch *b, BatchReader *r, BatchFetch *f, Snapshot snapshot)
{
	ItemPointerData tid;
	BlockNumber blk;
	HeapTupleData tuple;
	bool		all_dead = false;

	gi_key_to_tid(f->key, &tid);
	blk = ItemPointerGetBlockNumber(&tid);
	if (!BufferIsValid(r->buf) || BufferGetBlockNumber(r->buf) != blk)
	{
		if (BufferIsValid(r->buf))
			ReleaseBuffer(r->buf);
		r->buf = InvalidBuffer;
		if (BufferIsValid(f->recent) &&
			ReadRecentBuffer(r->heap->rd_node, MAIN_FORKNUM, blk, f->recent))
			r->buf = f->recent;
		else
			r->buf = ReadBuffer(r->heap, blk);
		heap_page_prune_opt(r->heap, r->buf);
	}

	LockBuffer(r->buf, BUFFER_LOCK_SHARE);
	f->visible = heap_hot_search_buffer(&tid, r->heap, r->buf, snapshot, &tuple,
										&all_dead, true);
	LockBuffer(r->buf, BUFFER_LOCK_UNLOCK);
	/* the pin keeps the tuple in place */
	if (f->visible)
	{
		f->tid = tid;
		batch_key_value(b, f, &tuple, NULL);
	}
}

/* fetch f's row: visible to the snapshot, and its key column */
static void
batch_fetch(GiBatch *b, BatchReader *r, BatchFetch *f, Snapshot snapshot)
{
	ItemPointerData tid;
	bool		call_again = false;
	bool		all_dead = false;

	if (r->direct)
	{
		batch_fetch_heap(b, r, f, snapshot);
		return;
	}
	gi_key_to_tid(f->key, &tid);
	f->visible = table_index_fetch_tuple(r->fetch, &tid, snapshot, r->slot,
										 &call_again, &all_dead);
	if (f->visible)
	{
		f->tid = r->slot->tts_tid;
		batch_key_value(b, f, NULL, r->slot);
	}
	ExecClearTuple(r->slot);
}

/* append f's row to its query's answer */
static void
batch_add(GiBatch *b, GiBatchQuery *bq, const BatchFetch *f)
{
	GiBatchRow *row;

	if (bq->nrows == bq->cap)
	{
		bq->cap = Min(b->k, Max(16, bq->cap * 2));
		bq->rows = bq->rows ?
			repalloc_huge(bq->rows, sizeof(GiBatchRow) * bq->cap) :
			palloc_extended(sizeof(GiBatchRow) * bq->cap, MCXT_ALLOC_HUGE);
	}
	row = &bq->rows[bq->nrows++];
	row->tid = f->tid;
	row->distance = b->distance ? b->distance(b->arg, f->hit->distance) : f->hit->distance;
	row->key = f->keyval;
	row->keynull = f->keynull;
}

/* batch_fetch_sort: a call's rows by key (TID order), the comparison inlined */
typedef BatchFetch *BatchFetchRef;

#define ST_SORT batch_fetch_sort
#define ST_ELEMENT_TYPE BatchFetchRef
#define ST_COMPARE(a, b) (((*(a))->key > (*(b))->key) - ((*(a))->key < (*(b))->key))
#define ST_SCOPE static
#define ST_DECLARE
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Keep the visible rows of one call's answer (queries qidx[0..n), hits
 * [n * kreq]).  Each query's first hits, as many as it still needs, are
 * fetched together in TID order, each row once however many queries
 * found it (heap pages are visited in order, shared rows fetched once);
 * a query that lost some to visibility then goes on through its further
 * hits one at a time.  The rows come out in each query's hit order.
 */
static void
batch_take_call(GiBatch *b, GiBatchQuery *bq, const int *qidx, int n,
				const gi_hit *hits, const uint32 *found, uint32 kreq,
				Snapshot snapshot, BatchReader *reader)
{
	BatchFetch *f = palloc_extended(sizeof(BatchFetch) * Max(1, (Size) n * Min(kreq, (uint32) b->k)),
									MCXT_ALLOC_HUGE);
	BatchFetch **ord;
	uint32	   *next = palloc(sizeof(uint32) * n);
	Size		nf = 0;
	Size		j = 0;
	Size		ahead;

	for (int i = 0; i < n; i++)
	{
		GiBatchQuery *q = &bq[qidx[i]];
		int			need = b->k - q->nrows;
		uint32		r = 0;

		for (; r < found[i] && need > 0; r++)
		{
			const gi_hit *h = &hits[(Size) i * kreq + r];

			if (!gi_hit_cursor_next(&q->cursor, h))
				continue;		/* seen in an earlier round */
			f[nf].key = h->key;
			f[nf].hit = h;
			f[nf].query = i;
			nf++;
			need--;
		}
		next[i] = r;
	}

	ord = palloc_extended(sizeof(BatchFetch *) * Max(1, nf), MCXT_ALLOC_HUGE);
	for (Size i = 0; i < nf; i++)
		ord[i] = &f[i];
	batch_fetch_sort(ord, nf);
	ahead = Min(Max(GI_FETCH_AHEAD,
					get_tablespace_io_concurrency(b->heap->rd_rel->reltablespace)),
				GI_FETCH_AHEAD_MAX);
	for (Size i = 0; i < nf && i < ahead; i++)
		batch_prefetch_page(b, ord[i], i > 0 ? ord[i - 1] : NULL);
	for (Size i = 0; i < nf && i < GI_FETCH_AHEAD / 2; i++)
		batch_prefetch_tuple(ord[i]);
	for (Size i = 0; i < nf; i++)
	{
		if (i + ahead < nf)
			batch_prefetch_page(b, ord[i + ahead], ord[i + ahead - 1]);
		if (i + GI_FETCH_AHEAD / 2 < nf)
			batch_prefetch_tuple(ord[i + GI_FETCH_AHEAD / 2]);
		if (i > 0 && ord[i]->key == ord[i - 1]->key)
		{
			BatchFetch *same = ord[i - 1];

			ord[i]->visible = same->visible;
			ord[i]->tid = same->tid;
			ord[i]->keyval = same->keyval;
			ord[i]->keynull = same->keynull;
		}
		else
			batch_fetch(b, reader, ord[i], snapshot);
	}

	for (int i = 0; i < n; i++)
	{
		GiBatchQuery *q = &bq[qidx[i]];

		for (; j < nf && f[j].query == i; j++)
			if (f[j].visible)
				batch_add(b, q, &f[j]);
		/* rows lost to visibility: the query's further hits, one at a time */
		for (uint32 r = next[i]; r < found[i] && q->nrows < b->k; r++)
		{
			BatchFetch	one;

			one.hit = &hits[(Size) i * kreq + r];
			if (!gi_hit_cursor_next(&q->cursor, one.hit))
				continue;
			one.key = one.hit->key;
			one.recent = InvalidBuffer;
			batch_fetch(b, reader, &one, snapshot);
			if (one.visible)
				batch_add(b, q, &one);
		}
		/* fewer than k visible while the service had more: again */
		q->more = (found[i] >= kreq);
	}
	/* no pin held while the service searches the next part */
	if (BufferIsValid(reader->buf))
		ReleaseBuffer(reader->buf);
	reader->buf = InvalidBuffer;
	pfree(ord);
	pfree(next);
	pfree(f);
}

/*
 * The key_column forms are not STRICT (key_type is normally a NULL): true,
 * with an empty result set up, when one of the first nargs arguments is NULL.
 */
bool
gi_batch_null_args(FunctionCallInfo fcinfo, int nargs)
{
	for (int i = 0; i < nargs; i++)
		if (PG_ARGISNULL(i))
		{
			InitMaterializedSRF(fcinfo, 0);
			return true;
		}
	return false;
}

/* run the batch: per query, its k best visible rows (fewer if there are not) */
GiBatchQuery *
gi_batch_collect(GiBatch *b)
{
	GiBatchQuery *bq = palloc0(sizeof(GiBatchQuery) * Max(b->nq, 1));
	int		   *pend = palloc(sizeof(int) * Max(b->nq, 1));
	int			npend = b->nq;
	uint32		kreq = (uint32) b->k;
	Snapshot	snapshot = GetActiveSnapshot();
	BatchReader reader;

	for (int i = 0; i < b->nq; i++)
		pend[i] = i;

	/* what an ordered scan of an index without predicate locks takes */
	PredicateLockRelation(b->index, snapshot);
	batch_reader_begin(&reader, b->heap);

	while (npend > 0)
	{
		int			per_call = (int) Max(1, GI_BATCH_REPLY_BYTES /
										 gi_search_out_size(1, kreq));
		int			group = (int) Max(1, GI_BATCH_FETCH_ROWS / Min(kreq, (uint32) b->k));
		int			nstill = 0;

		int			chunk = per_call;
		void	   *ahead = NULL;

		/* in parts, so that the service searches one while we check another */
		if (b->search_ahead && npend > GI_BATCH_AHEAD_MIN)
			chunk = Min(per_call, Max(GI_BATCH_AHEAD_MIN,
									  (npend + GI_BATCH_AHEAD_PARTS - 1) / GI_BATCH_AHEAD_PARTS));
		for (int from = 0; from < npend; from += chunk)
		{
			int			n = Min(chunk, npend - from);
			int			next = from + n;
			uint32	   *found;
			gi_hit	   *hits;
			uint64		t0;

			if (ahead)
				hits = b->search_ahead_end(b->arg, ahead, &found);
			else
				hits = b->search(b->arg, pend + from, n, kreq, &found);
			ahead = NULL;
			if (b->search_ahead && next < npend)
				ahead = b->search_ahead(b->arg, pend + next, Min(chunk, npend - next), kreq);

			t0 = gi_now_ns();

			for (int g = 0; g < n; g += group)
				batch_take_call(b, bq, pend + from + g, Min(group, n - g),
								hits + (Size) g * kreq, found + g, kreq, snapshot,
								&reader);
			for (int i = 0; i < n; i++)
			{
				GiBatchQuery *q = &bq[pend[from + i]];

				if (q->nrows < b->k && q->more)
					pend[nstill++] = pend[from + i];
			}
			pfree(hits);
			gi_stages_add(GI_STAGE_VISIBILITY, gi_now_ns() - t0);
			CHECK_FOR_INTERRUPTS();
		}

		npend = nstill;
		if (npend > 0)
		{
			if (kreq >= b->max_k)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("%s cannot look at more than %u rows per query",
								b->fname, b->max_k)));
			kreq = (uint32) Min((uint64) kreq * 2, (uint64) b->max_k);
		}
	}

	batch_reader_end(&reader);
	return bq;
}

/* run the batch and return its rows through the call's tuplestore */
void
gi_batch_run(GiBatch *b, FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GiBatchQuery *bq = gi_batch_collect(b);
	uint64		t0 = gi_now_ns();

	for (int q = 0; q < b->nq; q++)
	{
		for (int r = 0; r < bq[q].nrows; r++)
		{
			GiBatchRow *row = &bq[q].rows[r];
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = Int32GetDatum(q + 1);
			if (b->keyatt != InvalidAttrNumber)
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
	gi_stages_add(GI_STAGE_ROWS, gi_now_ns() - t0);
	gi_stages_end();
}
