/*
 * gpusparse_cost.c
 *		Planner costs of a gpusparse scan.
 *
 * Without ORDER BY <inner product operator> the index can do nothing: its
 * cost is infinite.  With one, the device service scores the postings of
 * the query's terms before the first row comes back, so the index part is
 * startup cost: a round trip plus a small charge per row (a posting costs
 * far less than a row's operator call in a sequential scan, which reads
 * and scores every row).  The heap fetches come on top, per returned row,
 * so ORDER BY ... LIMIT k wins and a scan of the whole table in order
 * loses against a sequential scan and sort.
 */
#include "postgres.h"

#include <float.h>

#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/selfuncs.h"

#include "gpusparse.h"

/* one service round trip, in cost units */
#define GPUSPARSE_ROUND_TRIP_COST	1.0
/* scoring, per row of the index, relative to one operator call */
#define GPUSPARSE_ROW_FRACTION		0.1

void
gpusparse_costestimate(PlannerInfo *root, IndexPath *path, double loop_count,
					   Cost *indexStartupCost, Cost *indexTotalCost,
					   Selectivity *indexSelectivity, double *indexCorrelation,
					   double *indexPages)
{
	GenericCosts costs;
	Cost		cost;

	if (path->indexorderbys == NIL || list_length(path->indexorderbys) != 1)
	{
		*indexStartupCost = DBL_MAX;
		*indexTotalCost = DBL_MAX;
		*indexSelectivity = 0;
		*indexCorrelation = 0;
		*indexPages = 0;
		return;
	}

	MemSet(&costs, 0, sizeof(costs));
	costs.numIndexTuples = path->indexinfo->tuples;
	genericcostestimate(root, path, loop_count, &costs);

	cost = GPUSPARSE_ROUND_TRIP_COST +
		path->indexinfo->tuples * cpu_operator_cost * GPUSPARSE_ROW_FRACTION;
	*indexStartupCost = cost;
	*indexTotalCost = cost;
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = 0;
	*indexPages = 0;
}
