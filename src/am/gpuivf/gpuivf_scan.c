/*
 * gpuivf_scan.c
 *		Ordered index scans: ORDER BY col <op> const [LIMIT k].
 *
 * The scan asks the device service for the gpuivf.scan_batch nearest rows
 * of the gpuivf.probes nearest lists, or as many as the LIMIT above the
 * scan will fetch (gi_scan_limit.c).  The service answers in ascending
 * (distance, key) order, deterministically, so when the executor wants
 * more (large LIMIT, filters, invisible rows) the scan asks again for
 * twice as many and returns only hits strictly after the last (distance,
 * key) it returned.  It stops when the service found fewer than asked: at
 * that point every row of the probed lists has been returned.  With
 * gpuivf.iterative_scan = relaxed_order it then probes twice as many lists
 * (up to gpuivf.max_probes) and returns the rows it has not returned yet,
 * remembered by key: their order restarts, as pgvector's relaxed order.
 *
 * Distances are exact (not estimates), so xs_recheckorderby is false; the
 * values handed to the executor are what the ORDER BY operator returns, to
 * float precision (see gpuivf_distance_value).
 *
 * A pq index (quantizer = 'pq') answers with distances between the query
 * and the rows' codes: estimates, neither above nor below the exact ones.
 * Without re-ranking the scan returns rows in that order with those
 * values; the executor does not re-sort (PostgreSQL's re-check of ORDER BY
 * values needs a lower bound, which these are not).  With gpuivf.pq_rerank
 * = N the scan asks for N times as many hits as it would, reads their
 * vectors from the table (gpuivf_rerank.c) and returns that group in exact
 * (distance, key) order with exact values; a query that needs more rows
 * gets the next group, exact in itself and after the first: so the first
 * N * gpuivf.scan_batch candidates by code are exactly ordered, and a
 * LIMIT up to gpuivf.scan_batch returns the exact nearest rows among them.
 */
#include "postgres.h"

#include "access/relscan.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"
#include "vecarray.h"

typedef struct GpuivfScanOpaqueData
{
	GiScanHead	head;			/* first: the shared scan code's part */
	MemoryContext cxt;			/* query and answers; reset at rescan */
	bool		have_query;		/* false: NULL query or empty index */
	float4	   *query;
	uint32		dim;
	uint32		metric;
	uint32		probes;

	bool		started;
	uint32		k;				/* hits asked for in the last search */
	gi_hit	   *hits;
	uint32		nhits;
	uint32		pos;
	bool		more;			/* the service may have more than it gave */
	GiHitCursor cursor;			/* after the last hit returned */

	/* iterative scans: how far probes may grow, and every key returned */
	uint32		max_probes;
	HTAB	   *returned;

	/* pq indexes: candidates per row re-ranked (0: none), and how */
	uint32		rerank;
	GpuivfRerank *rr;
	bool		reranked;		/* hits hold a re-ranked group */
} GpuivfScanOpaqueData;

typedef GpuivfScanOpaqueData *GpuivfScanOpaque;

/*
 * A pgvector habit: an ivfflat.* setting made in this session does nothing
 * here.  Said once per setting and session, when its value differs from
 * its reset value (a setting pgvector defines) or it exists at all (a
 * placeholder).
 */
static void
hint_ivfflat_setting(const char *name, bool *hinted, const char *ours, const char *now)
{
	const char *value;
	const char *reset;

	if (*hinted)
		return;
	value = GetConfigOption(name, true, false);
	if (value == NULL)
		return;
	reset = GetConfigOptionResetString(name);
	if (reset != NULL && strcmp(value, reset) == 0)
		return;
	*hinted = true;
	ereport(NOTICE,
			(errmsg("%s does not apply to gpuivf indexes", name),
			 errhint("Set %s (now %s) instead.", ours, now)));
}

static void
hint_ivfflat_settings(void)
{
	static bool probes_hinted = false;
	static bool iterative_hinted = false;
	static bool max_probes_hinted = false;

	hint_ivfflat_setting("ivfflat.probes", &probes_hinted, "gpuivf.probes",
						 GetConfigOption("gpuivf.probes", false, false));
	hint_ivfflat_setting("ivfflat.iterative_scan", &iterative_hinted, "gpuivf.iterative_scan",
						 GetConfigOption("gpuivf.iterative_scan", false, false));
	hint_ivfflat_setting("ivfflat.max_probes", &max_probes_hinted, "gpuivf.max_probes",
						 GetConfigOption("gpuivf.max_probes", false, false));
}

IndexScanDesc
gpuivf_beginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = gi_scan_begin(index, nkeys, norderbys,
									   sizeof(GpuivfScanOpaqueData));
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;

	so->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuivf scan",
									ALLOCSET_DEFAULT_SIZES);
	return scan;
}

void
gpuivf_rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys,
			  int norderbys)
{
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	GpuivfMeta *meta;
	MemoryContext old;
	uint32		lists;
	const float4 *q;
	int			dim;

	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	if (orderbys && scan->numberOfOrderBys > 0)
		memmove(scan->orderByData, orderbys, scan->numberOfOrderBys * sizeof(ScanKeyData));

	/* the re-ranker holds buffer pins and lives in so->cxt */
	if (so->rr)
		gpuivf_rerank_end(so->rr);
	so->rr = NULL;
	MemoryContextReset(so->cxt);
	so->have_query = false;
	so->query = NULL;
	so->started = false;
	so->hits = NULL;
	so->nhits = so->pos = 0;
	so->more = false;
	gi_hit_cursor_reset(&so->cursor);

	if (scan->numberOfOrderBys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gpuivf index scans need ORDER BY a distance operator")));

	/* like pgvector: ordering by distance to NULL returns no rows */
	if (scan->orderByData[0].sk_flags & SK_ISNULL)
		return;

	meta = gpuivf_get_meta(index);
	so->dim = meta->dim;
	so->metric = meta->metric;
	so->rerank = meta->quantizer == GPUIVF_QUANTIZER_PQ ? (uint32) gpuivf_pq_rerank : 0;
	lists = meta->lists;
	meta = NULL;				/* support functions may invalidate the cache */
	so->probes = (uint32) Min(gpuivf_probes, Max(lists, 1));
	so->max_probes = gpuivf_iterative_scan == GPUIVF_ITERATIVE_OFF ? so->probes :
		(uint32) Max(Min(gpuivf_max_probes, (int) Max(lists, 1)), (int) so->probes);
	so->returned = NULL;
	hint_ivfflat_settings();

	old = MemoryContextSwitchTo(so->cxt);
	q = gpuivf_datum_floats(index, scan->orderByData[0].sk_argument, &dim,
							"query vector");
	/* an index with nothing in it has no dimension yet and no rows */
	if (lists > 0)
	{
		gi_check_same_dim((int) so->dim, dim);
		so->query = palloc(sizeof(float4) * dim);
		memcpy(so->query, q, sizeof(float4) * dim);
		so->have_query = true;
	}
	MemoryContextSwitchTo(old);
}

/* the set of keys an iterative scan has returned */
static HTAB *
new_returned(GpuivfScanOpaque so)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(uint64);
	ctl.hcxt = so->cxt;
	return hash_create("gpuivf iterative scan", 256, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * The hits not returned by an earlier group (after the cursor, in the
 * service's order) become this group, re-ranked by exact distance.
 */
static void
rerank_group(IndexScanDesc scan)
{
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;
	uint32		n = 0;

	for (uint32 i = 0; i < so->nhits; i++)
		if (gi_hit_cursor_next(&so->cursor, &so->hits[i]))
			so->hits[n++] = so->hits[i];
	if (so->rr == NULL)
		so->rr = gpuivf_rerank_begin(scan->indexRelation, scan->heapRelation);
	so->nhits = gpuivf_rerank(so->rr, scan->xs_snapshot, so->query, so->dim, so->metric,
							  so->hits, n);
	so->reranked = true;
}

/* (re)search with k hits (k times gpuivf.pq_rerank when re-ranking) */
static void
search(IndexScanDesc scan, uint32 k)
{
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;
	MemoryContext old = MemoryContextSwitchTo(so->cxt);
	uint32	   *found;

	if (so->hits)
		pfree(so->hits);
	elog(DEBUG1, "gpuivf scan of \"%s\": the nearest %u rows of %u lists",
		 RelationGetRelationName(scan->indexRelation), k, so->probes);
	so->hits = gpuivf_search_service(scan->indexRelation, so->dim, so->query, 1,
									 so->rerank ? (uint32) Min((uint64) k * so->rerank,
															   (uint64) GPUIVF_MAX_K) : k,
									 so->probes, &found);
	so->k = k;
	so->more = so->rerank ? found[0] >= Min((uint64) k * so->rerank, (uint64) GPUIVF_MAX_K) :
		found[0] >= k;
	so->nhits = found[0];
	so->pos = 0;
	so->reranked = false;
	if (so->rerank)
		rerank_group(scan);
	MemoryContextSwitchTo(old);
}

bool
gpuivf_gettuple(IndexScanDesc scan, ScanDirection dir)
{
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;

	if (!ScanDirectionIsForward(dir))
		elog(ERROR, "gpuivf index scans only go forward");

	if (!so->started)
	{
		so->started = true;
		if (!so->have_query)
			return false;
		/* this session's own new rows must be searchable */
		gi_flush_inserts(scan->indexRelation);
		/* re-ranking keeps its candidates: the group a LIMIT is exact in */
		search(scan, gi_scan_first_k(scan, (uint32) gpuivf_scan_batch, GPUIVF_MAX_K,
									 so->rerank == 0));
	}

	for (;;)
	{
		while (so->pos < so->nhits)
		{
			gi_hit	   *h = &so->hits[so->pos++];

			if (!so->reranked && !gi_hit_cursor_next(&so->cursor, h))
				continue;		/* returned by an earlier batch */
			if (so->max_probes > so->probes || so->returned)
			{
				bool		found;

				if (so->returned == NULL)
					so->returned = new_returned(so);
				hash_search(so->returned, &h->key, HASH_ENTER, &found);
				if (found)
					continue;	/* returned before the probes grew */
			}

			gi_scan_return(scan, h->key, gpuivf_distance_value(so->metric, h->distance));
			return true;
		}

		if (!so->more && so->probes < so->max_probes)
		{
			/* the probed lists are spent: probe more, from the nearest again */
			so->probes = (uint32) Min((uint64) so->probes * 2, (uint64) so->max_probes);
			gi_hit_cursor_reset(&so->cursor);
			search(scan, gi_scan_first_k(scan, (uint32) gpuivf_scan_batch, GPUIVF_MAX_K,
										 false));
			continue;
		}
		if (!so->more)
			return false;
		if (so->k >= GPUIVF_MAX_K)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("gpuivf index scan cannot return more than %u rows", GPUIVF_MAX_K),
					 errhint("Use a smaller LIMIT or fewer probes.")));
		search(scan, (uint32) Min((uint64) so->k * 2, (uint64) GPUIVF_MAX_K));
	}
}

void
gpuivf_endscan(IndexScanDesc scan)
{
	GpuivfScanOpaque so = (GpuivfScanOpaque) scan->opaque;

	if (so->rr)
		gpuivf_rerank_end(so->rr);
	MemoryContextDelete(so->cxt);
	pfree(so);
	scan->opaque = NULL;
}
