/*
 * gi_hits.c
 *		Continuing a search: when a scan or a batch search needs more rows
 *		than the service's first answer held, it asks again with a larger k
 *		and keeps only the hits after the last one it returned.
 */
#include "postgres.h"

#include "access/relscan.h"

#include "gi_access.h"

/* qsort comparator of the service's answer order (gi_hit_order) */
int
gi_hit_cmp(const void *a, const void *b)
{
	return gi_hit_order(a, b);
}

/*
 * Whether hit comes after the last hit this cursor let through in the
 * (distance, key) order of the service's answers; if so it becomes the
 * last one.  Hits at or before it were returned by an earlier answer.
 */
bool
gi_hit_cursor_next(GiHitCursor *cur, const gi_hit *hit)
{
	if (cur->have_last &&
		!(hit->distance > cur->last_dist ||
		  (hit->distance == cur->last_dist && hit->key > cur->last_key)))
		return false;
	cur->have_last = true;
	cur->last_dist = hit->distance;
	cur->last_key = hit->key;
	return true;
}

/*
 * An ordered scan's descriptor with room for its ORDER BY values, and the
 * AM's opaque state (zeroed, opaque_size bytes, a GiScanHead first) in
 * scan->opaque.
 */
IndexScanDesc
gi_scan_begin(Relation index, int nkeys, int norderbys, Size opaque_size)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);

	Assert(opaque_size >= sizeof(GiScanHead));
	gi_stages_begin();
	scan->opaque = palloc0(opaque_size);
	((GiScanHead *) scan->opaque)->limit = gi_scan_limit_of(index);
	if (norderbys > 0)
	{
		scan->xs_orderbyvals = palloc0(sizeof(Datum) * norderbys);
		scan->xs_orderbynulls = palloc(sizeof(bool) * norderbys);
		memset(scan->xs_orderbynulls, true, sizeof(bool) * norderbys);
	}
	return scan;
}

/*
 * Hand the executor the row of key with the exact value of the first
 * ORDER BY operator (no recheck: the order is final).
 */
void
gi_scan_return(IndexScanDesc scan, uint64 key, double value)
{
	gi_key_to_tid(key, &scan->xs_heaptid);
	scan->xs_recheck = false;
	scan->xs_recheckorderby = false;
	scan->xs_orderbyvals[0] = Float8GetDatum(value);
	scan->xs_orderbynulls[0] = false;
	for (int i = 1; i < scan->numberOfOrderBys; i++)
		scan->xs_orderbynulls[i] = true;
}
