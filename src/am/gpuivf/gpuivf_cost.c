/*
 * gpuivf_cost.c
 *		Planner costs of a gpuivf scan.
 *
 * Without ORDER BY <distance operator> the index can do nothing: its cost
 * is infinite.  With one, the device service computes the distance of
 * every row in the probed lists before the first row comes back, so the
 * whole index part is startup cost: rows * probes / lists distance
 * evaluations (cpu_index_tuple_cost + cpu_operator_cost each, like a
 * qual-less index scan that evaluates one operator per tuple), plus one
 * round trip.  No index page is read: the store is resident.  The heap
 * fetches come on top (cost_index charges them per returned row), which
 * is what makes a scan that returns most of the table lose against a
 * sequential scan and sort, while ORDER BY ... LIMIT k only pays for k of
 * them (and a query with no LIMIT at all is kept off the index unless
 * every list is probed, see below).  Compared with pgvector's ivfflat estimate (genericcostestimate
 * over probes/lists of the index pages) this drops the index page reads.
 */
#include "postgres.h"

#include <float.h>

#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"

#include "gpuivf.h"

/* one service round trip, in cost units (tens of microseconds) */
#define GPUIVF_ROUND_TRIP_COST	1.0

void
gpuivf_costestimate(PlannerInfo *root, IndexPath *path, double loop_count,
					Cost *indexStartupCost, Cost *indexTotalCost,
					Selectivity *indexSelectivity, double *indexCorrelation,
					double *indexPages)
{
	GenericCosts costs;
	Relation	index;
	uint32		lists;
	double		ratio;
	double		scanned;
	Cost		cost;

	/* only an ordered scan by one distance operator can use the index */
	if (path->indexorderbys == NIL || list_length(path->indexorderbys) != 1)
	{
		*indexStartupCost = DBL_MAX;
		*indexTotalCost = DBL_MAX;
		*indexSelectivity = 0;
		*indexCorrelation = 0;
		*indexPages = 0;
		return;
	}

	index = index_open(path->indexinfo->indexoid, NoLock);
	lists = gpuivf_get_meta(index)->lists;
	index_close(index, NoLock);

	ratio = lists > 0 ? Min(1.0, (double) gpuivf_probes / lists) : 1.0;
	scanned = path->indexinfo->tuples * ratio;

	/* selectivity, correlation and page count the generic way */
	MemSet(&costs, 0, sizeof(costs));
	costs.numIndexTuples = scanned;
	genericcostestimate(root, path, loop_count, &costs);

	cost = GPUIVF_ROUND_TRIP_COST + scanned * (cpu_index_tuple_cost + cpu_operator_cost);

	/*
	 * An IVF scan returns only the rows of the probed lists.  A query that
	 * wants the whole table in distance order (no LIMIT, no cursor) would
	 * silently lose the others, so unless every list is probed, keep the
	 * planner away from the index there.
	 */
	if (lists > 0 && (uint32) gpuivf_probes < lists &&
		root->limit_tuples < 0 && root->tuple_fraction <= 0)
		cost += disable_cost;

	*indexStartupCost = cost;
	*indexTotalCost = cost;
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = 0;		/* TIDs come in distance order: random */
	*indexPages = costs.numIndexPages;
}
