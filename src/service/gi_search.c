/*
 * gi_search.c
 *		Searches of one store, merged into as few backend calls as their
 *		parameters allow; large batches served a slice a round.
 *
 * The store's kind checks each request and gives it a grouping key;
 * requests with the same k and key become one call of the backend's
 * search for that kind over their concatenated queries.  That is how many
 * single-row "ORDER BY ... LIMIT k" scans from different sessions reach
 * the device as one batched kernel launch (one per shard of a store
 * spread over several devices, whose answers gi_shards.c merges).  A
 * request whose queries would take longer than gpuindex.search_slice_ms
 * (at the store's recent cost per query) is searched a slice of queries
 * per round instead, so that other sessions' requests are served in
 * between and a cancelled batch stops within a slice (docs/service.md).
 *
 * Where the compute backend searches asynchronously, a merged search is
 * left in flight past its round (docs/service.md, "Overlapping rounds"):
 * the service publishes the answers it has, takes the next requests and
 * prepares them while the device searches, and lands the flight (waits for
 * it and writes its answers) before it calls the backend again.
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_kind.h"
#include "gi_service.h"
#include "gi_store_requests.h"

/* requests a search merges to be left in flight with service_overlap = auto */
#define GI_FLY_MIN_REQUESTS	8

/* queries of a first slice, before the request's cost per query is known */
#define GI_SLICE_FIRST	16

/* a batch alone (no new request for GI_SLICE_QUIET_MS) gets slices this long */
#define GI_SLICE_ALONE_MS	20
#define GI_SLICE_QUIET_MS	100

static GiKindSearch
kind_search(GiWork *w)
{
	GiKindSearch ks;

	ks.args = &w->slot->args;
	ks.queries = w->buf;
	ks.query_bytes = w->slot->in_size;
	return ks;
}

/* generic checks, then the kind's; false after answering */
static bool
search_ok(GiStoreEntry *e, const GiServiceKind *kind, GiWork *w)
{
	GiSlot	   *slot = w->slot;
	GiKindSearch ks = kind_search(w);
	char		err[GI_ERRMSG_LEN];
	int			sqlstate;
	uint64		hits;

	if (slot->args.kind != e->kind)
	{
		const GiServiceKind *asked = gi_kind_get(slot->args.kind);

		gi_reply_error(w, ERRCODE_WRONG_OBJECT_TYPE,
					   "gpuindex search of a %s store, but the index's store is %s",
					   asked ? asked->name : "unknown", kind->name);
		return false;
	}
	hits = (uint64) slot->args.n * slot->args.k;
	if (slot->args.k < 1 || hits > MaxAllocHugeSize / sizeof(gi_hit))
	{
		gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
					   "gpuindex search of %u queries for %u rows each", slot->args.n,
					   slot->args.k);
		return false;
	}
	sqlstate = kind->check_search(e->summary, &ks, &w->group, err, sizeof(err));
	if (sqlstate != 0)
	{
		gi_reply_error(w, sqlstate, "%s", err);
		return false;
	}
	if (gi_search_out_size(slot->args.n, slot->args.k) > slot->capacity)
	{
		slot->rargs.out_needed = gi_search_out_size(slot->args.n, slot->args.k);
		gi_reply(w, GI_REPLY_TOO_SMALL);
		return false;
	}
	return true;
}

/*
 * Whether a request of n queries is to be sliced: more than a first slice
 * and, at the store's recent cost per query (any search), longer than
 * gpuindex.search_slice_ms.
 */
static bool
slice_wanted(const GiStoreEntry *e, uint32 n)
{
	if (gi_search_slice_ms <= 0 || n <= GI_SLICE_FIRST)
		return false;
	return e->us_per_query <= 0 || n * e->us_per_query > gi_search_slice_ms * 1000.0;
}

/*
 * Queries of a sliced request's next slice, from its own slices' cost:
 * gpuindex.search_slice_ms of work while other requests keep coming, up
 * to GI_SLICE_ALONE_MS when none came for a while (fewer, larger calls
 * for a batch that runs alone; still a bound on a cancel's delay).
 */
static uint32
slice_queries(const GiWork *w)
{
	double		ms;
	double		n;

	if (gi_search_slice_ms <= 0)
		return PG_UINT32_MAX;	/* slicing turned off since: the rest at once */
	if (w->sliced_us <= 0)
		return GI_SLICE_FIRST;
	ms = TimestampDifferenceExceeds(gi_last_fresh_request, GetCurrentTimestamp(),
									GI_SLICE_QUIET_MS) ?
		Max(gi_search_slice_ms, GI_SLICE_ALONE_MS) : gi_search_slice_ms;
	n = ms * 1000.0 / w->sliced_us;
	return n < 1 ? 1 : n >= PG_UINT32_MAX ? PG_UINT32_MAX : (uint32) n;
}

static double
ewma(double old, double now)
{
	return old <= 0 ? now : 0.7 * old + 0.3 * now;
}

/*
 * The search in flight (n > 0): copies of its requests, where its answers
 * go, when it started.  At most one at a time.
 */
typedef struct GiFlight
{
	GiStoreEntry *e;
	int			n;
	GiWork	   *works;
	GiWork	  **ptrs;
	uint32		nq;
	uint32		k;
	gi_hit	   *hits;
	uint32	   *found;
	uint64		t0;
} GiFlight;

static GiFlight flight;

/* requests of landed flights, answered, for the round to publish */
static GiWork *landed;
static int	nlanded;

/*
 * One backend search over the queries of reqs[0..n) (nq in all), into
 * palloc'd *hits and *found; timed, when slicing is on, into the store's
 * cost per query and *us (microseconds a query; 0 untimed).
 */
/*
 * Note in the answers of group[0..n) when the search calls that answer
 * them ran (a sliced request: from its first slice's call, unless first is
 * false, to its last's), and with GI_REQ_TRACE the compute backend's own
 * stages, summed over a sliced request's calls.
 */
static void
note_times(GiStoreEntry *e, GiWork **group, int n, uint64 t0, uint64 t1, bool traced,
		   bool first)
{
	gi_stage_time stages[GI_MAX_STAGES];
	uint32		nstages = 0;

	if (traced)
		nstages = gi_shards_last_stages(&e->shards, stages, GI_MAX_STAGES);
	for (int i = 0; i < n; i++)
	{
		GiRespArgs *r = &group[i]->slot->rargs;

		if (first)
			r->t_search = t0;
		r->t_searched = t1;
		if (!first && r->nstages == nstages)
		{
			for (uint32 j = 0; j < nstages; j++)
				r->stages[j].us += stages[j].us;
			continue;
		}
		r->nstages = Min(nstages, GI_MAX_STAGES);
		memcpy(r->stages, stages, r->nstages * sizeof(gi_stage_time));
	}
}

/* does any of group[0..n) ask for the backend's stage times? */
static bool
traced(GiStoreEntry *e, GiWork **group, int n)
{
	if (!gi_shards_can_time(&e->shards))
		return false;
	for (int i = 0; i < n; i++)
		if (group[i]->slot->args.flags & GI_REQ_TRACE)
			return true;
	return false;
}

/* the kind's parameters of a merged search, aligned for any of them */
typedef union GiSearchParams
{
	char		bytes[GI_KARGS_BYTES];
	uint64		align;
} GiSearchParams;

/* reqs[0..n)'s queries back to back and their parameters, by the kind */
static const void *
merge_queries(GiStoreEntry *e, const GiServiceKind *kind, const GiKindSearch *reqs, int n,
			  GiSearchParams *params, Size *query_bytes)
{
	memset(params, 0, sizeof(*params));
	return kind->merge_search(e->summary, &e->kdata, reqs, n, params->bytes, query_bytes);
}

static gi_status
backend_search(GiStoreEntry *e, const GiServiceKind *kind, const GiKindSearch *reqs, int n,
			   uint32 nq, uint32 k, gi_hit **hits, uint32 **found, double *us)
{
	GiSearchParams params;
	const void *queries;
	Size		query_bytes;
	TimestampTz t0 = 0;
	uint64		t_ns;
	gi_status	st;

	gi_search_land();
	queries = merge_queries(e, kind, reqs, n, &params, &query_bytes);
	*hits = palloc_extended((Size) nq * k * sizeof(gi_hit), MCXT_ALLOC_HUGE);
	*found = palloc_extended((Size) nq * sizeof(uint32), MCXT_ALLOC_HUGE);
	if (gi_search_slice_ms > 0)
		t0 = GetCurrentTimestamp();
	t_ns = gi_now_ns();
	st = gi_shards_search(&e->shards, params.bytes, nq, queries, query_bytes, k,
						  *hits, *found);
	gi_search_ns_total += gi_now_ns() - t_ns;
	*us = 0;
	if (gi_search_slice_ms > 0)
	{
		*us = Max((double) (GetCurrentTimestamp() - t0), 1.0) / Max(nq, 1);
		e->us_per_query = ewma(e->us_per_query, *us);
	}
	e->search_batches++;
	e->searches += nq;
	return st;
}

static int
cmp_search(const void *a, const void *b)
{
	const GiWork *x = *(GiWork *const *) a;
	const GiWork *y = *(GiWork *const *) b;

	if (x->slot->args.k != y->slot->args.k)
		return x->slot->args.k < y->slot->args.k ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return 0;
}

/* the answers of group[0..n) out of one search's status, hits and found */
static void
answer_merged(GiWork **group, int n, uint32 k, gi_status st, const gi_hit *hits,
			  const uint32 *found)
{
	uint64		pos = 0;

	for (int i = 0; i < n; i++)
	{
		GiWork	   *w = group[i];
		uint32		wn = w->slot->args.n;

		if (st != GI_OK)
		{
			gi_reply_status(w, st);
			continue;
		}
		memcpy(w->buf, hits + pos * k, (Size) wn * k * sizeof(gi_hit));
		memcpy(gi_search_found(w->buf, wn, k), found + pos, wn * sizeof(uint32));
		pos += wn;
		w->slot->rargs.count = wn;
		w->slot->rargs.out_size = gi_search_out_size(wn, k);
		gi_reply(w, GI_REPLY_OK);
	}
}

/*
 * May a search of n requests of this store be left in flight
 * (gpuindex.service_overlap)?  With auto, only where the backend searches
 * asynchronously and many sessions wait: a flight saves the device the
 * time it would wait while the service wakes its sessions, but the next
 * search starts sooner with fewer requests, and few-request searches cost
 * the device nearly what larger ones do.
 */
static bool
may_fly(const GiStoreEntry *e, int n)
{
	return gi_service_overlap == GI_OVERLAP_ON ||
		(gi_service_overlap == GI_OVERLAP_AUTO && n >= GI_FLY_MIN_REQUESTS &&
		 gi_shards_can_start(&e->shards));
}

/*
 * Start one backend search over the queries of group[0..n) and leave it
 * in flight; answered at once if it could not start.
 */
static void
fly(GiStoreEntry *e, const GiServiceKind *kind, const GiKindSearch *reqs, GiWork **group,
	int n, uint32 nq, uint32 k)
{
	GiSearchParams params;
	const void *queries;
	Size		query_bytes;
	gi_hit	   *hits;
	uint32	   *found;
	uint64		t0;
	gi_status	st;

	gi_search_land();
	if (flight.works == NULL)
	{
		flight.works = MemoryContextAlloc(TopMemoryContext,
										  sizeof(GiWork) * gi_shared->nslots);
		flight.ptrs = MemoryContextAlloc(TopMemoryContext,
										 sizeof(GiWork *) * gi_shared->nslots);
		landed = MemoryContextAlloc(TopMemoryContext, sizeof(GiWork) * gi_shared->nslots);
	}
	queries = merge_queries(e, kind, reqs, n, &params, &query_bytes);
	hits = MemoryContextAllocExtended(TopMemoryContext, (Size) nq * k * sizeof(gi_hit),
									  MCXT_ALLOC_HUGE);
	found = MemoryContextAllocExtended(TopMemoryContext, (Size) nq * sizeof(uint32),
									   MCXT_ALLOC_HUGE);
	t0 = gi_now_ns();
	st = gi_shards_search_start(&e->shards, params.bytes, nq, queries, query_bytes, k,
								hits, found);
	gi_search_ns_total += gi_now_ns() - t0;
	e->search_batches++;
	e->searches += nq;
	if (st != GI_OK)
	{
		note_times(e, group, n, t0, gi_now_ns(), false, true);
		answer_merged(group, n, k, st, NULL, NULL);
		pfree(hits);
		pfree(found);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		flight.works[i] = *group[i];
		flight.ptrs[i] = &flight.works[i];
		group[i]->in_flight = true;
	}
	flight.e = e;
	flight.nq = nq;
	flight.k = k;
	flight.hits = hits;
	flight.found = found;
	flight.t0 = t0;
	flight.n = n;
}

/* see gi_store_requests.h */
bool
gi_search_flying(void)
{
	return flight.n > 0;
}

/* see gi_store_requests.h */
int
gi_search_flight_requests(void)
{
	return flight.n;
}

/* see gi_store_requests.h */
bool
gi_search_flight_done(void)
{
	return flight.n == 0 || gi_shards_search_done(&flight.e->shards);
}

/* see gi_store_requests.h */
void
gi_search_land(void)
{
	GiFlight	f = flight;
	uint64		t0;
	uint64		t1;
	gi_status	st;

	if (f.n == 0)
		return;
	flight.n = 0;
	t0 = gi_now_ns();
	st = gi_shards_search_finish(&f.e->shards);
	t1 = gi_now_ns();
	gi_search_ns_total += t1 - t0;
	if (gi_search_slice_ms > 0)
		f.e->us_per_query = ewma(f.e->us_per_query,
								 Max((double) (t1 - f.t0) / 1000.0, 1.0) / f.nq);
	note_times(f.e, f.ptrs, f.n, f.t0, t1, false, true);
	answer_merged(f.ptrs, f.n, f.k, st, f.hits, f.found);
	memcpy(landed + nlanded, f.works, sizeof(GiWork) * f.n);
	nlanded += f.n;
	pfree(f.hits);
	pfree(f.found);
}

/* see gi_store_requests.h */
int
gi_search_landed(GiWork **works)
{
	*works = landed;
	return nlanded;
}

void
gi_search_landed_clear(void)
{
	nlanded = 0;
}

/* one backend search over the queries of group[0..n), all alike */
static void
search_merged(GiStoreEntry *e, const GiServiceKind *kind, GiWork **group, int n)
{
	uint32		k = group[0]->slot->args.k;
	GiKindSearch *reqs = palloc(sizeof(GiKindSearch) * n);
	uint64		nq = 0;
	gi_hit	   *hits;
	uint32	   *found;
	gi_status	st;
	double		us;
	bool		trace;
	uint64		t0;

	for (int i = 0; i < n; i++)
	{
		reqs[i] = kind_search(group[i]);
		nq += group[i]->slot->args.n;
	}
	if (nq == 0 || nq > PG_UINT32_MAX)
	{
		for (int i = 0; i < n; i++)
		{
			if (nq == 0)
			{
				group[i]->slot->rargs.out_size = 0;
				gi_reply(group[i], GI_REPLY_OK);
			}
			else
				gi_reply_error(group[i], ERRCODE_PROGRAM_LIMIT_EXCEEDED,
							   "gpuindex search round of too many queries");
		}
		return;
	}

	trace = traced(e, group, n);
	if (!trace && may_fly(e, n))
	{
		fly(e, kind, reqs, group, n, (uint32) nq, k);
		return;
	}
	if (trace)
		gi_shards_time_stages(&e->shards, true);
	t0 = gi_now_ns();
	st = backend_search(e, kind, reqs, n, (uint32) nq, k, &hits, &found, &us);
	note_times(e, group, n, t0, gi_now_ns(), trace, true);
	if (trace)
		gi_shards_time_stages(&e->shards, false);
	answer_merged(group, n, k, st, hits, found);
}

/* the request's queries out of its payload, which its answer overwrites */
static void
slice_begin(GiWork *w)
{
	w->sliced = MemoryContextAllocHuge(TopMemoryContext, Max(w->slot->in_size, 1));
	memcpy(w->sliced, w->buf, w->slot->in_size);
	w->sliced_bytes = 0;
	w->sliced_done = 0;
	w->sliced_us = 0;
}

/* the next slice of a sliced request; answered after the last */
static void
search_slice(GiStoreEntry *e, const GiServiceKind *kind, GiWork *w)
{
	GiSlot	   *slot = w->slot;
	uint32		n = slot->args.n;
	uint32		k = slot->args.k;
	uint32		cnt = Min(n - w->sliced_done, slice_queries(w));
	GiReqArgs	args = slot->args;
	GiKindSearch ks;
	gi_hit	   *hits;
	uint32	   *found;
	gi_status	st;
	double		us;
	bool		trace;
	uint64		t0;

	args.n = cnt;
	ks.args = &args;
	ks.queries = w->sliced + w->sliced_bytes;
	ks.query_bytes = kind->queries_size(e->summary, ks.queries, cnt);
	trace = traced(e, &w, 1);
	if (trace)
		gi_shards_time_stages(&e->shards, true);
	t0 = gi_now_ns();
	st = backend_search(e, kind, &ks, 1, cnt, k, &hits, &found, &us);
	note_times(e, &w, 1, t0, gi_now_ns(), trace, w->sliced_done == 0);
	if (trace)
		gi_shards_time_stages(&e->shards, false);
	if (st != GI_OK)
	{
		gi_reply_status(w, st);
		return;
	}
	w->sliced_us = ewma(w->sliced_us, us);
	memcpy(w->buf + (Size) w->sliced_done * k * sizeof(gi_hit), hits,
		   (Size) cnt * k * sizeof(gi_hit));
	memcpy(gi_search_found(w->buf, n, k) + w->sliced_done, found, (Size) cnt * sizeof(uint32));
	w->sliced_done += cnt;
	w->sliced_bytes += ks.query_bytes;
	if (w->sliced_done == n)
	{
		slot->rargs.count = n;
		slot->rargs.out_size = gi_search_out_size(n, k);
		gi_reply(w, GI_REPLY_OK);
	}
}

void
gi_search_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	const GiServiceKind *kind = gi_kind_get(e->kind);
	GiWork	  **sliced = palloc(sizeof(GiWork *) * Max(ngroup, 1));
	int			nsliced = 0;
	int			nvalid = 0;

	if (kind == NULL)
		elog(ERROR, "gpuindex store of unknown kind %u", e->kind);
	for (int i = 0; i < ngroup; i++)
	{
		GiWork	   *w = group[i];

		/* a sliced request was checked when its first slice was served */
		if (w->sliced == NULL && !search_ok(e, kind, w))
			continue;
		if (w->sliced == NULL && kind->queries_size != NULL &&
			slice_wanted(e, w->slot->args.n))
			slice_begin(w);
		if (w->sliced != NULL)
			sliced[nsliced++] = w;
		else
			group[nvalid++] = w;
	}

	qsort(group, nvalid, sizeof(GiWork *), cmp_search);
	for (int i = 0; i < nvalid;)
	{
		int			j = i + 1;

		while (j < nvalid && cmp_search(&group[i], &group[j]) == 0)
			j++;
		search_merged(e, kind, group + i, j - i);
		i = j;
	}

	/* the round's other requests first: a slice makes them wait least there */
	for (int i = 0; i < nsliced; i++)
		search_slice(e, kind, sliced[i]);
}
