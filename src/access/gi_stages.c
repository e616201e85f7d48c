/*
 * gi_stages.c
 *		Where the time of this session's last search went, stage by stage:
 *		gpuindex_search_stages().
 *
 * A search statement (a batch function, or an ordered index scan) marks
 * its beginning; the client library keeps the times of the last search
 * request (gi_last_search: payload copy, queueing, the service's times,
 * the answer seen and copied out); the batch driver adds its visibility
 * checks and result rows.  All times come from CLOCK_MONOTONIC, which every
 * process of the server shares.  docs/query-path.md says what each stage
 * covers.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "gi_access.h"

static uint64 t_begin = 0;
static uint64 t_end = 0;
static uint64 visibility_ns = 0;
static uint64 rows_ns = 0;

void
gi_stages_begin(void)
{
	memset(&gi_last_search, 0, sizeof(gi_last_search));
	t_begin = gi_now_ns();
	t_end = 0;
	visibility_ns = 0;
	rows_ns = 0;
}

void
gi_stages_add(GiStageKind kind, uint64 ns)
{
	if (kind == GI_STAGE_VISIBILITY)
		visibility_ns += ns;
	else
		rows_ns += ns;
}

void
gi_stages_end(void)
{
	t_end = gi_now_ns();
}

static void
put(ReturnSetInfo *rsinfo, const char *stage, double us)
{
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(stage);
	values[1] = Float8GetDatum(us);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* microseconds from a to b, or -1 when either is unknown or b is before a */
static double
span(uint64 a, uint64 b)
{
	return (a == 0 || b == 0 || b < a) ? -1.0 : (double) (b - a) / 1000.0;
}

PG_FUNCTION_INFO_V1(gpuindex_search_stages);

Datum
gpuindex_search_stages(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const GiSearchTimes *t = &gi_last_search;
	const GiRespArgs *r = &t->rargs;

	InitMaterializedSRF(fcinfo, 0);
	if (t->requests == 0)
		PG_RETURN_VOID();
	put(rsinfo, "input", span(t_begin, t->t_first));
	put(rsinfo, "earlier requests", span(t->t_first, t->t_submit));
	put(rsinfo, "submit", span(t->t_submit, t->t_queued));
	put(rsinfo, "queue", span(t->t_queued, r->t_taken));
	put(rsinfo, "round", span(r->t_taken, r->t_search));
	put(rsinfo, "search", span(r->t_search, r->t_searched));
	for (uint32 i = 0; i < Min(r->nstages, GI_MAX_STAGES); i++)
	{
		char		name[sizeof(r->stages[i].name) + 1];

		memcpy(name, r->stages[i].name, sizeof(r->stages[i].name));
		name[sizeof(r->stages[i].name)] = '\0';
		put(rsinfo, psprintf("search: %s", name), r->stages[i].us);
	}
	put(rsinfo, "answer", span(r->t_searched, r->t_answered));
	put(rsinfo, "wake", span(r->t_answered, t->t_woke));
	put(rsinfo, "copy out", span(t->t_woke, t->t_copied));
	if (t_end != 0)
	{
		put(rsinfo, "visibility", (double) visibility_ns / 1000.0);
		put(rsinfo, "result rows", (double) rows_ns / 1000.0);
		put(rsinfo, "total", span(t_begin, t_end));
	}
	put(rsinfo, "requests", (double) t->requests);
	PG_RETURN_VOID();
}
