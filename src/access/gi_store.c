/*
 * gi_store.c
 *		Requests about one index's store: calls that need the store (loaded
 *		from the pages on demand), replacing the store after a build, and
 *		sending the keys of deleted rows.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"

#include "gi_access.h"
#include "gi_shmem.h"

/* sleep a little before asking again: 1, 2, 4, 8, then 10 ms */
void
gi_backoff(int *attempt)
{
	long		ms = Min(1L << Min(*attempt, 4), 10L);

	(*attempt)++;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * The index's store does not fit: a search is answered from its parts in
 * turn; any other request gets the reason as its error.
 */
static void
search_over_budget(Relation index, GiCall *call, GiLoadFn load)
{
	gi_load_over_budget = false;
	if (call->type != GI_REQ_SEARCH)
		gi_over_budget_error();
	gi_search_in_parts(index, call, load);
}

/*
 * A request that needs the index's store (a search), with the store key
 * and relfilenode filled in: load the store with the AM's loader when the
 * service does not have it, wait while someone else loads it, and on a hot
 * standby bring it up to the replay position first.
 */
void
gi_call_store(Relation index, GiCall *call, GiLoadFn load)
{
	int			attempt = 0;

	call->key = gi_store_key(index);
	call->args.relfilenode = gi_store_relfilenode(index);
	/* a catch-up that failed before its LOAD_BEGIN must not leave its mark */
	gi_load_replacing = InvalidXLogRecPtr;
	for (;;)
	{
		call->args.lsn = gi_standby_position();
		gi_call(call);
		switch (call->reply)
		{
			case GI_REPLY_OK:
				return;
			case GI_REPLY_NOT_LOADED:
				if (load(index))
				{
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				if (gi_load_over_budget)
				{
					search_over_budget(index, call, load);
					return;
				}
				gi_backoff(&attempt);
				break;
			case GI_REPLY_STALE:
				if (gi_standby_catch_up(index, call->rargs.lsn, call->args.lsn,
										load))
				{
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				if (gi_load_over_budget)
				{
					search_over_budget(index, call, load);
					return;
				}
				gi_backoff(&attempt);
				break;
			case GI_REPLY_BUSY:
				gi_backoff(&attempt);
				break;
			default:
				elog(ERROR, "unexpected gpuindex reply %d", (int) call->reply);
		}
	}
}

/*
 * A search request's answer: hits[nq * k] in ascending (distance, key) order
 * per query, *found[q] real hits each; both point into one palloc'd answer.
 */
gi_hit *
gi_search_answer(const GiCall *call, uint32 nq, uint32 k, uint32 **found)
{
	if (call->rargs.out_size != gi_search_out_size(nq, k) || call->out == NULL)
		elog(ERROR, "gpuindex search answered %llu bytes, expected %llu",
			 (unsigned long long) call->rargs.out_size,
			 (unsigned long long) gi_search_out_size(nq, k));
	*found = gi_search_found(call->out, nq, k);
	return (gi_hit *) call->out;
}

/*
 * gi_call_store in two halves: the request goes out at once and is
 * answered while the caller works; a reply other than OK (the store must
 * be loaded first, say) then takes gi_call_store's whole path.
 */
GiCallAhead *
gi_call_store_ahead(Relation index, GiCall *call)
{
	call->key = gi_store_key(index);
	call->args.relfilenode = gi_store_relfilenode(index);
	call->args.lsn = gi_standby_position();
	return gi_call_ahead(call);
}

void
gi_call_store_ahead_end(Relation index, GiCall *call, GiCallAhead *h, GiLoadFn load)
{
	gi_call_ahead_end(h);
	if (call->reply != GI_REPLY_OK)
		gi_call_store(index, call, load);
}

/*
 * End of a build: the new pages replace whatever the service held for this
 * index (REINDEX and TRUNCATE give new pages; a stale store of a reused OID
 * must not survive either).  An index with nothing indexed has no store:
 * its loader loads nothing and answers true.
 */
void
gi_store_replace(Relation index, GiLoadFn load)
{
	GiStoreKey	key = gi_store_key(index);
	int			attempt = 0;

	(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
	while (!load(index))
	{
		/* too large to load: searches will load it in parts */
		if (gi_load_over_budget)
		{
			gi_load_over_budget = false;
			ereport(NOTICE,
					(errmsg("index \"%s\" does not fit the gpuindex memory budget: its searches will load it in parts",
							RelationGetRelationName(index)),
					 errdetail("%s", gi_over_budget_reason())));
			break;
		}
		gi_backoff(&attempt);
	}
}

/* the sender of this backend's VACUUM pass, for an exit in the middle of it */
static GiDeleteSender *deletes_active = NULL;
static bool deletes_hook_set = false;

/* how long a failing pass waits for the service to take its keys */
#define GI_DELETES_UNWIND_MS	30000

static void
deletes_at_exit(int code, Datum arg)
{
	if (deletes_active != NULL)
		gi_deletes_abort(deletes_active);
}

void
gi_deletes_init(GiDeleteSender *ds, Relation index)
{
	if (!deletes_hook_set)
	{
		before_shmem_exit(deletes_at_exit, (Datum) 0);
		deletes_hook_set = true;
	}
	memset(ds, 0, sizeof(*ds));
	ds->index = index;
	ds->keys[0] = palloc(sizeof(uint64) * GI_DELETE_SEND_MAX);
	ds->keys[1] = palloc(sizeof(uint64) * GI_DELETE_SEND_MAX);
	deletes_active = ds;
}

/* the request that sends the filled keys */
static void
deletes_call(const GiDeleteSender *ds, GiCall *call)
{
	memset(call, 0, sizeof(*call));
	call->type = GI_REQ_DELETE;
	call->key = gi_store_key(ds->index);
	call->args.relfilenode = gi_store_relfilenode(ds->index);
	call->args.n = ds->n;
	call->in = ds->keys[ds->filling];
	call->in_size = (Size) ds->n * sizeof(uint64);
}

/* wait for the keys in flight to be dropped */
static void
deletes_wait(GiDeleteSender *ds)
{
	if (ds->in_flight)
	{
		ds->in_flight = false;
		gi_call_end(&ds->call);
	}
}

/*
 * Send the filled keys (of rows already gone from the pages) and return
 * while the service drops them, after the previous keys were dropped.
 * With no device service in this cluster there is nothing to tell.
 */
void
gi_deletes_send(GiDeleteSender *ds)
{
	deletes_wait(ds);
	if (ds->n == 0 || gi_shared == NULL)
	{
		ds->n = 0;
		return;
	}
	deletes_call(ds, &ds->call);
	gi_call_begin(&ds->call);
	ds->in_flight = true;
	ds->filling = 1 - ds->filling;
	ds->n = 0;
}

/* send the rest and wait until the store dropped every key */
void
gi_deletes_finish(GiDeleteSender *ds)
{
	gi_deletes_send(ds);
	deletes_wait(ds);
	deletes_active = NULL;
	pfree(ds->keys[0]);
	pfree(ds->keys[1]);
}

/*
 * The pass fails (an error, a cancel, the backend's exit): the keys it took
 * from the pages must still reach the store, and before the locks go, or
 * a later VACUUM could let the heap reuse their TIDs first.  So wait for
 * the request in flight, send the filled keys and wait for them too.
 */
void
gi_deletes_abort(GiDeleteSender *ds)
{
	GiCall		call;

	deletes_active = NULL;
	if (gi_shared == NULL)
		return;
	deletes_call(ds, &call);
	if (!gi_call_unwinding(ds->n > 0 ? &call : NULL, GI_DELETES_UNWIND_MS))
		elog(LOG, "gpuindex: VACUUM of index \"%s\" failed and could not hand %u removed keys to the device service",
			 RelationGetRelationName(ds->index), ds->n);
	ds->n = 0;
	ds->in_flight = false;
}
