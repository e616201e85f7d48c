/*
 * gi_parts.c
 *		Searching an index whose store does not fit the memory budget
 *		(gpuindex.memory_limit, a role's share, or the device) in parts:
 *		GENIE's multiple loading.
 *
 * The rows are split into nparts parts by a hash of their key, so each row
 * lies whole in one part, and a row's distance in its part is its distance
 * in the index.  For each part in turn the session loads a private store
 * of that part's records from the pages (key part = its process number),
 * sends the search there, merges the part's top-k into the answer and
 * drops the store.  A part that does not fit either doubles nparts and
 * starts over.  The merged answer is the one store's answer: the k best
 * (distance, key) of the union.  Rows written after the part was read are
 * not visible to the search's snapshot, so a private part needs no
 * inserts.  A part store left behind by an error goes with the next parted
 * search of the session, or when the session exits.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"

#include "gi_access.h"
#include "gi_shmem.h"
#include "gi_spread.h"

/* most parts a search is split into before it gives up */
#define GI_MAX_PARTS	64

uint32		gi_load_nparts = 0;
uint32		gi_load_part = 0;

/* the reason the last load did not fit, while gi_load_over_budget is set */
bool		gi_load_over_budget = false;
static char over_budget_msg[GI_ERRMSG_LEN];
static int	over_budget_sqlstate = 0;

/* a part store this session may still hold */
static bool have_part_store = false;
static GiStoreKey part_store_key;
static bool exit_hook_set = false;

void
gi_load_note_over_budget(const GiRespArgs *rargs)
{
	gi_load_over_budget = true;
	strlcpy(over_budget_msg, rargs->errmsg, sizeof(over_budget_msg));
	over_budget_sqlstate = rargs->sqlstate;
}

bool
gi_key_in_load_part(uint64 key)
{
	return gi_load_nparts == 0 || gi_key_hash(key) % gi_load_nparts == gi_load_part;
}

const char *
gi_over_budget_reason(void)
{
	return over_budget_msg;
}

void
gi_over_budget_error(void)
{
	gi_load_over_budget = false;
	ereport(ERROR,
			(errcode(over_budget_sqlstate ? over_budget_sqlstate : ERRCODE_OUT_OF_MEMORY),
			 errmsg("%s", over_budget_msg)));
}

static void
drop_part_store(void)
{
	if (!have_part_store)
		return;
	(void) gi_call_simple(GI_REQ_DROP, &part_store_key, NULL, NULL);
	have_part_store = false;
}

static void
drop_part_store_at_exit(int code, Datum arg)
{
	if (gi_shared != NULL && MyProc != NULL)
		drop_part_store();
}

/*
 * Search one part: load it into the session's part store and send the
 * search there.  False when the part does not fit; else *answer holds the
 * reply (palloc'd).
 */
static bool
search_part(Relation index, const GiCall *call, GiLoadFn load,
			uint32 nparts, uint32 part, void **answer)
{
	int			attempt = 0;

	for (;;)
	{
		GiCall		pc;
		bool		loaded;

		drop_part_store();
		part_store_key = gi_store_key(index);
		part_store_key.part = (uint32) MyProc->pgprocno + 1;
		have_part_store = true;

		gi_load_nparts = nparts;
		gi_load_part = part;
		PG_TRY();
		{
			loaded = load(index);
		}
		PG_FINALLY();
		{
			gi_load_nparts = 0;
			gi_load_part = 0;
		}
		PG_END_TRY();
		if (!loaded)
		{
			if (gi_load_over_budget)
			{
				gi_load_over_budget = false;
				have_part_store = false;	/* the service dropped it */
				return false;
			}
			gi_backoff(&attempt);
			continue;
		}

		memset(&pc, 0, sizeof(pc));
		pc.type = call->type;
		pc.key = part_store_key;
		pc.args = call->args;
		pc.args.relfilenode = gi_store_relfilenode(index);
		pc.args.lsn = gi_standby_position();
		pc.in = call->in;
		pc.in_size = call->in_size;
		pc.out_capacity = call->out_capacity;
		gi_call(&pc);
		if (pc.reply == GI_REPLY_OK)
		{
			*answer = pc.out;
			return true;
		}
		if (pc.reply != GI_REPLY_NOT_LOADED && pc.reply != GI_REPLY_STALE &&
			pc.reply != GI_REPLY_BUSY)
			elog(ERROR, "unexpected gpuindex reply %d to a search of a part",
				 (int) pc.reply);
		/* the part store went (a service restart): load it again */
		gi_backoff(&attempt);
	}
}

void
gi_search_in_parts(Relation index, GiCall *call, GiLoadFn load)
{
	uint32		nq = call->args.n;
	uint32		k = call->args.k;
	Size		out_size = gi_search_out_size(nq, k);
	gi_hit	   *hits = palloc_extended(Max(out_size, 1), MCXT_ALLOC_HUGE);
	uint32	   *found = gi_search_found(hits, nq, k);
	gi_hit	   *tmp = palloc(Max(k, 1) * sizeof(gi_hit));
	uint32		nparts = 2;

	if (!exit_hook_set)
	{
		before_shmem_exit(drop_part_store_at_exit, (Datum) 0);
		exit_hook_set = true;
	}
	for (;;)
	{
		bool		fits = true;

		memset(found, 0, nq * sizeof(uint32));
		for (uint32 p = 0; p < nparts && fits; p++)
		{
			void	   *answer = NULL;

			CHECK_FOR_INTERRUPTS();
			fits = search_part(index, call, load, nparts, p, &answer);
			if (!fits)
				break;
			gi_hits_merge(hits, found, (gi_hit *) answer,
						  gi_search_found(answer, nq, k), nq, k, tmp);
			pfree(answer);
		}
		drop_part_store();
		if (fits)
			break;
		if (nparts >= GI_MAX_PARTS)
			ereport(ERROR,
					(errcode(over_budget_sqlstate ? over_budget_sqlstate : ERRCODE_OUT_OF_MEMORY),
					 errmsg("index \"%s\" does not fit the gpuindex memory budget even in %u parts",
							RelationGetRelationName(index), nparts),
					 errdetail("%s", over_budget_msg),
					 errhint("Raise gpuindex.memory_limit (or gpuindex.role_memory_limit).")));
		nparts *= 2;
	}
	gi_hits_pad(hits, found, nq, k);
	pfree(tmp);
	elog(DEBUG1, "gpuindex: index \"%s\" searched in %u parts (its store does not fit the memory budget)",
		 RelationGetRelationName(index), nparts);
	call->reply = GI_REPLY_OK;
	call->out = hits;
	call->rargs.out_size = out_size;
}
