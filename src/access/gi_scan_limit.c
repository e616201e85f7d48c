/*
 * gi_scan_limit.c
 *		The LIMIT above an ordered index scan, handed to the scan: an
 *		index AM never sees the statement's LIMIT, so without it a scan's
 *		first search asks for the AM's batch of rows (gpuivf.scan_batch),
 *		whatever the statement will fetch.
 *
 * After the executor has started a plan, each Limit node whose child is an
 * index scan of a gpuindex AM (or an Append or Merge Append of such scans:
 * a partitioned table's), without a filter of its own, with a count
 * (and offset) known before the first row (a constant or a statement
 * parameter), notes offset + count for the scan's index.  The executor
 * begins an index scan only when it first reads it, so the note is kept
 * by index until the plan's memory goes, and the scan takes it in
 * gi_scan_begin (GiScanHead.limit); an index that two scans of the plan
 * read with different LIMITs, or one without, gets none.  The AM decides
 * what its first search asks for; when the executor wants more rows after
 * all, the scan goes on as it always does, so the hint changes the rounds
 * a scan takes and never its rows.  docs/query-path.md says why.
 */
#include "postgres.h"

#include "access/relscan.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gi_access.h"

bool		gi_limit_hint = true;

/* the LIMIT noted for one index of a plan; 0: none */
typedef struct LimitNote
{
	Relation	index;
	uint64		limit;
	struct LimitNote *next;
} LimitNote;

/* one running plan's notes, innermost plan first */
typedef struct PlanNotes
{
	LimitNote  *notes;
	List	   *claimed;		/* the index scans a Limit bounds */
	MemoryContext cxt;
	MemoryContextCallback gone;
	struct PlanNotes *outer;
} PlanNotes;

static PlanNotes *plans = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * A LIMIT or OFFSET known before the first row: a constant or a statement
 * parameter, bare or under the cast to bigint the parser adds
 */
static bool
static_bound(Node *expr)
{
	if (expr != NULL && IsA(expr, FuncExpr) &&
		((FuncExpr *) expr)->funcformat == COERCE_IMPLICIT_CAST &&
		list_length(((FuncExpr *) expr)->args) == 1)
		expr = linitial(((FuncExpr *) expr)->args);
	return expr != NULL &&
		(IsA(expr, Const) ||
		 (IsA(expr, Param) && ((Param *) expr)->paramkind == PARAM_EXTERN));
}

static bool
bound_value(ExprState *state, Node *expr, ExprContext *econtext, int64 *value)
{
	Datum		d;
	bool		isnull;

	if (state == NULL || !static_bound(expr))
		return false;
	d = ExecEvalExprSwitchContext(state, econtext, &isnull);
	if (isnull)
		return false;
	*value = DatumGetInt64(d);
	return true;
}

/* rows a Limit fetches from its child at most, 0 when not known */
static uint64
limit_rows(LimitState *ls)
{
	Limit	   *plan = (Limit *) ls->ps.plan;
	int64		count;
	int64		offset = 0;

	if (plan->limitOption != LIMIT_OPTION_COUNT ||
		!bound_value(ls->limitCount, plan->limitCount, ls->ps.ps_ExprContext, &count) ||
		count <= 0)
		return 0;
	if (plan->limitOffset != NULL &&
		(!bound_value(ls->limitOffset, plan->limitOffset, ls->ps.ps_ExprContext, &offset) ||
		 offset < 0))
		return 0;
	return (uint64) count > PG_UINT64_MAX - (uint64) offset ? PG_UINT64_MAX :
		(uint64) count + (uint64) offset;
}

static bool
is_our_scan(PlanState *ps)
{
	IndexScanState *iss = (IndexScanState *) ps;

	return ps != NULL && IsA(ps, IndexScanState) && iss->iss_RelationDesc != NULL &&
		gi_am_is_ours(iss->iss_RelationDesc->rd_indam);
}

/* a scan of index with this LIMIT (0: none): the plan's note for index */
static void
note(PlanNotes *pn, Relation index, uint64 limit)
{
	LimitNote  *n;

	for (n = pn->notes; n != NULL; n = n->next)
		if (n->index == index)
		{
			if (n->limit != limit)
				n->limit = 0;
			return;
		}
	n = MemoryContextAlloc(pn->cxt, sizeof(LimitNote));
	n->index = index;
	n->limit = limit;
	n->next = pn->notes;
	pn->notes = n;
}

/*
 * The scans under a Limit that it bounds: its child, or each child of an
 * Append or Merge Append there (a partitioned table's partitions), which
 * gives the Limit at most what the Limit fetches.
 */
static void
note_bounded(PlanNotes *pn, PlanState *ps, LimitState *ls)
{
	if (ps == NULL)
		return;
	if (is_our_scan(ps))
	{
		MemoryContext old = MemoryContextSwitchTo(pn->cxt);

		/* a filter above the scan may drop rows: the scan's own batch then */
		note(pn, ((IndexScanState *) ps)->iss_RelationDesc,
			 ps->qual == NULL ? limit_rows(ls) : 0);
		pn->claimed = lappend(pn->claimed, ps);
		MemoryContextSwitchTo(old);
	}
	else if (IsA(ps, MergeAppendState) && ps->qual == NULL)
	{
		for (int i = 0; i < ((MergeAppendState *) ps)->ms_nplans; i++)
			note_bounded(pn, ((MergeAppendState *) ps)->mergeplans[i], ls);
	}
	else if (IsA(ps, AppendState) && ps->qual == NULL)
	{
		for (int i = 0; i < ((AppendState *) ps)->as_nplans; i++)
			note_bounded(pn, ((AppendState *) ps)->appendplans[i], ls);
	}
}

static bool
note_walker(PlanState *ps, void *context)
{
	PlanNotes  *pn = (PlanNotes *) context;

	if (ps == NULL)
		return false;
	if (IsA(ps, LimitState))
		note_bounded(pn, outerPlanState(ps), (LimitState *) ps);
	else if (is_our_scan(ps) && !list_member_ptr(pn->claimed, ps))
		note(pn, ((IndexScanState *) ps)->iss_RelationDesc, 0);
	return planstate_tree_walker(ps, note_walker, context);
}

/* the plan's memory goes: its notes with it */
static void
plan_gone(void *arg)
{
	PlanNotes **p;

	for (p = &plans; *p != NULL; p = &(*p)->outer)
		if (*p == (PlanNotes *) arg)
		{
			*p = (*p)->outer;
			return;
		}
}

static void
gi_executor_start(QueryDesc *queryDesc, int eflags)
{
	PlanNotes  *pn;
	MemoryContext cxt;

	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (!gi_limit_hint || (eflags & EXEC_FLAG_EXPLAIN_ONLY) || queryDesc->planstate == NULL)
		return;
	cxt = queryDesc->estate->es_query_cxt;
	pn = MemoryContextAllocZero(cxt, sizeof(PlanNotes));
	pn->cxt = cxt;
	note_walker(queryDesc->planstate, pn);
	if (pn->notes == NULL)
		return;
	pn->gone.func = plan_gone;
	pn->gone.arg = pn;
	MemoryContextRegisterResetCallback(cxt, &pn->gone);
	pn->outer = plans;
	plans = pn;
}

/* the LIMIT the innermost running plan noted for index, 0 when none */
uint64
gi_scan_limit_of(Relation index)
{
	for (PlanNotes *pn = plans; pn != NULL; pn = pn->outer)
		for (LimitNote *n = pn->notes; n != NULL; n = n->next)
			if (n->index == index)
				return n->limit;
	return 0;
}

/*
 * The first search of a scan: `batch` rows (the AM's setting) when no
 * LIMIT is known, else the LIMIT's rows, at least `batch` unless
 * may_shrink, and at most GI_LIMIT_BATCHES batches (a larger LIMIT, which
 * may be far more than the index holds, goes on growing as before) and
 * max_k.
 */
#define GI_LIMIT_BATCHES 10

uint32
gi_scan_first_k(IndexScanDesc scan, uint32 batch, uint32 max_k, bool may_shrink)
{
	uint64		limit = ((GiScanHead *) scan->opaque)->limit;
	uint64		k = batch;

	if (limit > 0 && (may_shrink || limit > k))
		k = Min(limit, (uint64) batch * GI_LIMIT_BATCHES);
	return (uint32) Max(Min(k, (uint64) max_k), 1);
}

void
gi_scan_limit_init(void)
{
	DefineCustomBoolVariable("gpuindex.limit_hint",
							 "Ordered scans of gpuindex indexes size their first search by the LIMIT above them.",
							 "When off, a scan's first search asks for the access method's scan batch "
							 "(gpuivf.scan_batch, gpusparse.scan_batch) whatever the LIMIT. The rows "
							 "returned are the same either way.",
							 &gi_limit_hint,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = gi_executor_start;
}
