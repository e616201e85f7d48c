/*
 * gi_hits.c
 *		Continuing a search: when a scan or a batch search needs more rows
 *		than the service's first answer held, it asks again with a larger k
 *		and keeps only the hits after the last one it returned.
 */
#include "postgres.h"

#include "gi_access.h"

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
