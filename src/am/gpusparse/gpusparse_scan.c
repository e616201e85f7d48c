/*
 * gpusparse_scan.c
 *		Ordered index scans: ORDER BY col <#> const [LIMIT k], exact.
 *
 * Rows come in the order of the operator, -(inner product) rounded as
 * spvec_inner_product rounds it, ties by TID.  Two stages:
 *
 *	1. the device service's hits with a negative distance (a positive
 *	   score), gpusparse.scan_batch first (or the LIMIT above the scan,
 *	   gi_scan_limit.c, when the executor does not re-order), then four
 *	   times as many each time the executor wants more, continuing after
 *	   the last (distance, key) returned;
 *	2. once the service gives a hit at distance >= 0 or has no more, the
 *	   rest of the index in order: the rows that share no term with the
 *	   query (distance 0, which the service never sees as candidates) and
 *	   those whose score is 0 or negative.  This stage reads the rows from
 *	   the index pages and scores each one here, so it costs a pass over
 *	   the index; only queries that want more rows than score above zero
 *	   reach it.
 *
 * So a scan never returns fewer rows than the index holds.  Under a value
 * map with recheck (genie) the same order is that of a lower bound of the
 * operator's value, and the executor reorders by the operator.
 */
#include "postgres.h"

#include "access/relscan.h"
#include "common/hashfn.h"
#include "storage/bufmgr.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusparse.h"

/* one row in stage 2 */
typedef struct TailRow
{
	ItemPointerData tid;		/* hash key */
	double		sum;			/* score so far */
} TailRow;

typedef struct GpusparseScanOpaqueData
{
	GiScanHead	head;			/* first: the shared scan code's part */
	const GpusparseValueMap *map;
	MemoryContext cxt;			/* query and answers; reset at rescan */
	bool		have_query;		/* false: NULL query or empty index */
	SpVec	   *query;
	void	   *packed;			/* the query in the service's layout */
	Size		packed_bytes;
	uint32		dim;
	bool		recheck;		/* the executor must recompute the operator */

	bool		started;
	bool		tail;			/* in stage 2 */
	uint32		k;				/* hits asked for in the last search */
	gi_hit	   *hits;			/* stage 1: the service's; stage 2: ours */
	uint32		nhits;
	uint32		pos;
	bool		more;			/* the service may have more than it gave */
	GiHitCursor cursor;			/* after the last hit returned */
} GpusparseScanOpaqueData;

typedef GpusparseScanOpaqueData *GpusparseScanOpaque;

IndexScanDesc
gpusparse_beginscan(Relation index, int nkeys, int norderbys)
{
	return gpusparse_beginscan_mapped(index, nkeys, norderbys, &gpusparse_spvec_map);
}

IndexScanDesc
gpusparse_beginscan_mapped(Relation index, int nkeys, int norderbys,
						   const GpusparseValueMap *map)
{
	IndexScanDesc scan = gi_scan_begin(index, nkeys, norderbys,
									   sizeof(GpusparseScanOpaqueData));
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;

	so->map = map;
	so->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpusparse scan",
									ALLOCSET_DEFAULT_SIZES);
	return scan;
}

void
gpusparse_rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys,
				 int norderbys)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	MemoryContext old;
	SpVec	   *q;

	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	if (orderbys && scan->numberOfOrderBys > 0)
		memmove(scan->orderByData, orderbys, scan->numberOfOrderBys * sizeof(ScanKeyData));

	MemoryContextReset(so->cxt);
	so->have_query = false;
	so->started = false;
	so->tail = false;
	so->hits = NULL;
	so->nhits = so->pos = 0;
	so->more = false;
	gi_hit_cursor_reset(&so->cursor);

	if (scan->numberOfOrderBys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpusparse index scans need ORDER BY an inner product operator")));

	/* like pgvector: ordering by distance to NULL returns no rows */
	if (scan->orderByData[0].sk_flags & SK_ISNULL)
		return;

	so->dim = gpusparse_get_dim(index);
	so->recheck = so->map->recheck &&
		!(so->map->exact != NULL && so->map->exact(index, so->dim));
	old = MemoryContextSwitchTo(so->cxt);
	q = so->map->query(index, &scan->orderByData[0], so->dim);
	/* an index with nothing in it has no dimension yet and no rows */
	if (so->dim > 0)
	{
		gpusparse_check_dim(index, so->dim, q->dim);
		so->query = palloc(VARSIZE(q));
		memcpy(so->query, q, VARSIZE(q));
		so->packed = gpusparse_pack_queries(&so->query, 1, &so->packed_bytes);
		so->have_query = true;
	}
	MemoryContextSwitchTo(old);
}

/* stage 1: (re)search with k hits */
static void
search(IndexScanDesc scan, uint32 k)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;
	MemoryContext old = MemoryContextSwitchTo(so->cxt);
	uint32	   *found;

	if (so->hits)
		pfree(so->hits);
	elog(DEBUG1, "gpusparse scan of \"%s\": the best %u rows",
		 RelationGetRelationName(scan->indexRelation), k);
	so->hits = gpusparse_search_service(scan->indexRelation, so->dim, so->packed,
										so->packed_bytes, 1, k, &found);
	so->k = k;
	so->nhits = found[0];
	so->more = (found[0] >= k);
	so->pos = 0;
	MemoryContextSwitchTo(old);
}

/* a row's items: add the products of its pairs with the query's */
static bool
tail_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	void	  **a = arg;
	HTAB	   *rows = a[0];
	const SpVec *q = a[1];
	Relation	index = a[2];
	const GpusparseTupleData *t = (const GpusparseTupleData *) item;
	const float4 *qv = SPVEC_VALUES(q);
	int32		terms[GPUSPARSE_ITEM_MAX_NNZ];
	float4		weights[GPUSPARSE_ITEM_MAX_NNZ];
	TailRow    *row;
	bool		found;
	int			i = 0;
	int			j = 0;

	if (!gpusparse_item_pairs(t, itemsz, GPUSPARSE_MAX_DIM, terms, weights))
		gpusparse_item_corrupt(index, itemsz);
	row = hash_search(rows, &t->heaptid, HASH_ENTER, &found);
	if (!found)
		row->sum = 0.0;
	while (i < t->nnz && j < q->nnz)
	{
		int32		ti = terms[i];

		if (ti < q->indices[j])
			i++;
		else if (ti > q->indices[j])
			j++;
		else
		{
			row->sum += (double) weights[i] * (double) qv[j];
			i++;
			j++;
		}
	}
	return true;
}


/*
 * Stage 2: every row of the index that stage 1 did not return, scored
 * from the pages, in (distance, key) order: those at distance >= 0, and
 * when stage 1 stopped at its limit with more to come, the rest too.
 */
static void
start_tail(IndexScanDesc scan)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;
	MemoryContext old = MemoryContextSwitchTo(so->cxt);
	BufferAccessStrategy bas = GetAccessStrategy(BAS_BULKREAD);
	HASHCTL		ctl;
	HTAB	   *rows;
	HASH_SEQ_STATUS seq;
	TailRow    *row;
	void	   *arg[3];
	long		n;
	uint32		m = 0;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(ItemPointerData);
	ctl.entrysize = sizeof(TailRow);
	ctl.hcxt = so->cxt;
	rows = hash_create("gpusparse scan rows", 1024, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	arg[0] = rows;
	arg[1] = so->query;
	arg[2] = scan->indexRelation;
	gpusparse_walk_rows(scan->indexRelation, bas, tail_item, arg);
	FreeAccessStrategy(bas);

	n = hash_get_num_entries(rows);
	if (so->hits)
		pfree(so->hits);
	so->hits = palloc_extended(sizeof(gi_hit) * Max(n, 1), MCXT_ALLOC_HUGE);
	hash_seq_init(&seq, rows);
	while ((row = hash_seq_search(&seq)) != NULL)
	{
		float		distance = -(float) row->sum;

		/* the operator's -0 and 0 are one distance */
		if (distance == 0.0f)
			distance = 0.0f;
		/* what stage 1 returned: every hit up to its cursor */
		if (so->cursor.have_last &&
			(distance < so->cursor.last_dist ||
			 (distance == so->cursor.last_dist &&
			  gi_tid_key(&row->tid) <= so->cursor.last_key)))
			continue;
		if (distance < 0.0f && !so->more)
			continue;			/* the service had no more: all returned */
		so->hits[m].key = gi_tid_key(&row->tid);
		so->hits[m].distance = distance;
		so->hits[m].pad = 0;
		m++;
	}
	hash_destroy(rows);
	qsort(so->hits, m, sizeof(gi_hit), gi_hit_cmp);
	so->nhits = m;
	so->pos = 0;
	so->more = false;
	so->tail = true;
	MemoryContextSwitchTo(old);
}

static bool
return_hit(IndexScanDesc scan, const gi_hit *h)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;

	gi_scan_return(scan, h->key, (double) h->distance);
	scan->xs_recheckorderby = so->recheck;
	return true;
}

bool
gpusparse_gettuple(IndexScanDesc scan, ScanDirection dir)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;

	if (!ScanDirectionIsForward(dir))
		elog(ERROR, "gpusparse index scans only go forward");

	if (!so->started)
	{
		so->started = true;
		if (!so->have_query)
			return false;
		/* this session's own new rows must be searchable */
		gi_flush_inserts(scan->indexRelation);
		/* the executor's re-ordering of a recheck reads past the LIMIT */
		search(scan, gi_scan_first_k(scan, (uint32) gpusparse_scan_batch, GPUSPARSE_MAX_K,
									 !so->recheck));
	}

	for (;;)
	{
		while (so->pos < so->nhits)
		{
			gi_hit	   *h = &so->hits[so->pos++];

			if (so->tail)
				return return_hit(scan, h);
			if (h->distance >= 0.0f)
			{
				so->nhits = 0;
				so->more = false;
				break;
			}
			if (gi_hit_cursor_next(&so->cursor, h))
				return return_hit(scan, h);
		}

		if (so->tail)
			return false;
		if (!so->more)
		{
			start_tail(scan);
			continue;
		}
		if (so->k >= GPUSPARSE_MAX_K)
			start_tail(scan);
		else
			search(scan, (uint32) Min((uint64) so->k * 4, (uint64) GPUSPARSE_MAX_K));
	}
}

void
gpusparse_endscan(IndexScanDesc scan)
{
	GpusparseScanOpaque so = (GpusparseScanOpaque) scan->opaque;

	MemoryContextDelete(so->cxt);
	pfree(so);
	scan->opaque = NULL;
}
