/*
 * gi_load.c
 *		Loading an index's store from its pages: LOAD_BEGIN with the kind's
 *		state, the records the AM's walk emits in LOAD_CHUNKs of about
 *		GI_CHUNK_BYTES, then LOAD_END.
 *
 * LOAD_BEGIN goes out before any page is read: every writer changes the
 * pages before it tells the service, and the service applies inserts and
 * deletes to a store being loaded, so the loaded store equals the pages
 * (docs/architecture.md, "Stores and their life cycle").
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "gi_access.h"

/*
 * Load the index's store (or, while gi_load_nparts is set, the session's
 * store of one part of it).  True when the store is ready (loaded by us,
 * or already loaded), false when another backend is loading it or took
 * our load over: the caller waits and retries its request; or when it does
 * not fit (gi_load_over_budget set, the store dropped by the service).
 */
bool
gi_load(Relation index, GiLoadSpec *spec)
{
	GiLoad		load;
	GiCall		call;
	GiReply		reply;
	GiReqArgs	args;

	memset(&load, 0, sizeof(load));
	load.index = index;
	load.key = gi_store_key(index);
	if (gi_load_nparts > 0)
		load.key.part = (uint32) MyProc->pgprocno + 1;
	load.relfilenode = gi_store_relfilenode(index);
	gi_load_over_budget = false;

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_LOAD_BEGIN;
	call.key = load.key;
	call.args.relfilenode = load.relfilenode;
	call.args.kind = spec->kind;
	call.args.owner = index->rd_rel->relowner;
	call.args.tablespace = index->rd_node.spcNode;
	call.args.lsn = gi_standby_position();
	call.args.lsn_from = gi_load_replacing;
	gi_load_replacing = InvalidXLogRecPtr;
	call.in = spec->state;
	call.in_size = spec->state_size;
	gi_call(&call);
	if (spec->state)
		pfree(spec->state);
	spec->state = NULL;
	switch (call.reply)
	{
		case GI_REPLY_ALREADY_LOADED:
			return true;
		case GI_REPLY_BUSY:
			return false;
		case GI_REPLY_OK:
			load.token = call.rargs.token;
			break;
		case GI_REPLY_OVER_BUDGET:
			if (call.rargs.count == 1)
				elog(DEBUG1, "gpuindex: the store of index \"%s\" did not fit lately: not loaded again",
					 RelationGetRelationName(index));
			gi_load_note_over_budget(&call.rargs);
			return false;
		default:
			elog(ERROR, "unexpected gpuindex reply %d to LOAD_BEGIN", (int) call.reply);
	}

	gi_records_init(&load.records, CurrentMemoryContext, spec->record_bytes,
					PG_UINT32_MAX);
	spec->walk(&load, spec->walk_arg);
	if (!load.taken_over && !load.over_budget)
	{
		reply = gi_records_send(&load.records, load.key, load.relfilenode,
								GI_REQ_LOAD_CHUNK, load.token);
		if (reply == GI_REPLY_BUSY)
			load.taken_over = true;
		else if (reply == GI_REPLY_OVER_BUDGET)
			load.over_budget = true;
	}
	gi_records_free(&load.records);
	if (load.taken_over || load.over_budget)
		return false;

	memset(&args, 0, sizeof(args));
	args.relfilenode = load.relfilenode;
	args.load_token = load.token;
	reply = gi_call_simple(GI_REQ_LOAD_END, &load.key, &args, NULL);
	return reply != GI_REPLY_BUSY;
}

/*
 * One record of the pages, sent with the next chunk.  False when another
 * backend took the load over: the walk stops.
 */
bool
gi_load_emit(GiLoad *load, uint64 key, uint32 list, const void *payload)
{
	if (load->taken_over || load->over_budget)
		return false;
	if (!gi_key_in_load_part(key))
		return true;
	if (gi_records_add(&load->records, key, list, payload))
	{
		GiReply		reply = gi_records_send(&load->records, load->key,
											load->relfilenode,
											GI_REQ_LOAD_CHUNK, load->token);

		if (reply == GI_REPLY_BUSY)
			load->taken_over = true;
		else if (reply == GI_REPLY_OVER_BUDGET)
			load->over_budget = true;
	}
	return !load->taken_over && !load->over_budget;
}

typedef struct LoadItems
{
	GiLoad	   *load;
	uint32		list;
	Size		payload_offset;
} LoadItems;

static bool
load_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	LoadItems  *li = (LoadItems *) arg;

	Assert(li->payload_offset + li->load->records.record_bytes <= itemsz);
	return gi_load_emit(li->load, gi_tid_key(heaptid), li->list,
						item + li->payload_offset);
}

/*
 * The walk of an AM whose items are a heap TID and, at payload_offset, the
 * record's payload: every item of every list's chain.
 */
void
gi_load_lists(GiLoad *load, const GiListDir *dir, Size payload_offset)
{
	BufferAccessStrategy bas = GetAccessStrategy(BAS_BULKREAD);
	LoadItems	li;
	bool		more = true;

	li.load = load;
	li.payload_offset = payload_offset;
	for (uint32 list = 0; list < dir->nlists && more; list++)
	{
		li.list = list;
		more = gi_list_walk(load->index, dir->locate(dir->arg, list), bas,
							load_item, &li);
	}
	FreeAccessStrategy(bas);
}
