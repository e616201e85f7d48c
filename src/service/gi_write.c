/*
 * gi_write.c
 *		Inserts, load chunks and deletes of one store, merged into one
 *		backend call each per round.
 *
 * The records of every INSERT and LOAD_CHUNK of a store in a round go to
 * the backend in one store_insert call per shard, the keys of its DELETEs
 * in one store_delete call per shard (gi_shards.c routes them).  While the
 * store loads, both apply gi_loading.c's rule.  An INSERT sent at commit
 * (GI_REQ_DETACHED) that fails takes its store with it.
 */
#include "postgres.h"

#include "gi_store_requests.h"

/*
 * A records payload that fits the store, its lists those of the store (a
 * kind may name them otherwise in its requests); false after answering.
 */
static bool
records_ok(GiWork *w, GiStoreEntry *e)
{
	const GiServiceKind *kind = gi_kind_get(e->kind);
	uint32		n = w->slot->args.n;
	uint32	   *lists;

	if (w->slot->in_size != gi_records_size(n, e->record_bytes))
	{
		gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION,
					   "malformed gpuindex insert request: %zu bytes for %u records of %u bytes",
					   (size_t) w->slot->in_size, n, e->record_bytes);
		return false;
	}
	lists = gi_records_lists(w->buf, n);
	if (kind && kind->map_lists)
	{
		char		err[256];
		int			sqlstate = kind->map_lists(e->summary, &e->kdata, n, lists,
											   err, sizeof(err));

		if (sqlstate != 0)
		{
			gi_reply_error(w, sqlstate, "%s", err);
			return false;
		}
	}
	for (uint32 i = 0; i < n; i++)
		if (lists[i] >= e->nlists)
		{
			gi_reply_error(w, ERRCODE_INVALID_PARAMETER_VALUE,
						   "gpuindex insert names list %u of %u", lists[i], e->nlists);
			return false;
		}
	return true;
}

static bool
detached(const GiWork *w)
{
	return (w->slot->args.flags & GI_REQ_DETACHED) != 0;
}

/*
 * An INSERT nobody waits for failed: the store would lack committed rows,
 * so it goes, and the index's next search loads it again from the pages.
 * One that did not fit the memory budget marks the index as one that does
 * not fit, so that it is searched in parts for a while rather than loaded
 * whole only to be dropped again.
 */
static void
drop_for_lost_insert(GiStoreEntry *e, const GiWork *w)
{
	int			sqlstate = w->slot->rargs.sqlstate;
	bool		budget = sqlstate == ERRCODE_CONFIGURATION_LIMIT_EXCEEDED ||
		sqlstate == ERRCODE_OUT_OF_MEMORY;

	ereport(WARNING,
			(errmsg("gpuindex device service: an insert into index %u sent at commit failed: %s",
					e->key.relid, w->slot->rargs.errmsg),
			 errdetail("The index's store is dropped; its next search loads it again from the index pages%s.",
					   budget ? ", in parts while it does not fit" : "")));
	if (budget)
		gi_load_note_oversize(e, w);
	gi_store_remove(e);
}

void
gi_insert_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	uint64		total = 0;
	uint64	   *keys;
	uint32	   *lists;
	char	   *payloads;
	uint64		pos = 0;
	uint64		ninserted = 0;
	gi_status	st;
	int			nvalid = 0;
	GiWork	   *lost = NULL;

	for (int i = 0; i < ngroup; i++)
	{
		if (!records_ok(group[i], e))
		{
			if (detached(group[i]) && lost == NULL)
				lost = group[i];
			continue;
		}
		group[nvalid++] = group[i];
		total += group[i]->slot->args.n;
	}
	if (nvalid == 0)
	{
		if (lost)
			drop_for_lost_insert(e, lost);
		return;
	}

	/* a loading store remembers the inserts' keys before any chunk is read */
	for (int i = 0; i < nvalid; i++)
		if (group[i]->slot->type == GI_REQ_INSERT)
			gi_load_touch(e, gi_records_keys(group[i]->buf), group[i]->slot->args.n);

	keys = palloc_extended(Max(total, 1) * sizeof(uint64), MCXT_ALLOC_HUGE);
	lists = palloc_extended(Max(total, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	payloads = palloc_extended(Max(total * e->record_bytes, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < nvalid; i++)
	{
		GiWork	   *w = group[i];
		uint32		n = w->slot->args.n;
		bool		chunk = w->slot->type == GI_REQ_LOAD_CHUNK;
		uint64	   *wkeys = gi_records_keys(w->buf);
		uint32	   *wlists = gi_records_lists(w->buf, n);
		char	   *wpay = gi_records_payloads(w->buf, n);

		for (uint32 j = 0; j < n; j++)
		{
			if (chunk && gi_load_skips(e, wkeys[j]))
				continue;
			keys[pos] = wkeys[j];
			lists[pos] = wlists[j];
			memcpy(payloads + pos * e->record_bytes, wpay + (Size) j * e->record_bytes,
				   e->record_bytes);
			pos++;
		}
	}

	if (pos > 0)
	{
		st = gi_shards_insert(&e->shards, gi_store_budget(e), (uint32) pos, lists, keys,
							  payloads, &ninserted);
		if (st != GI_OK)
		{
			bool		over = false;

			/*
			 * A load that does not fit: its loader searches the index in
			 * parts instead, and the half-loaded store goes at once.
			 */
			for (int i = 0; i < nvalid; i++)
				if (group[i]->slot->type == GI_REQ_LOAD_CHUNK &&
					gi_reply_over_budget(group[i], st))
				{
					if (!over)
						gi_load_note_oversize(e, group[i]);
					over = true;
				}
				else
				{
					gi_reply_status(group[i], st);
					if (detached(group[i]) && lost == NULL)
						lost = group[i];
				}
			if (over)
				gi_store_remove(e);
			else if (lost)
				drop_for_lost_insert(e, lost);
			return;
		}
	}
	e->insert_batches++;
	for (int i = 0; i < nvalid; i++)
	{
		group[i]->slot->rargs.count = group[i]->slot->args.n;
		if (group[i]->slot->type == GI_REQ_INSERT)
			e->insert_requests++;
		gi_reply(group[i], GI_REPLY_OK);
	}
	if (lost)
		drop_for_lost_insert(e, lost);
}

/*
 * The round's own checks answer most failures above; this also catches a
 * round that an error inside the service failed as a whole.
 */
void
gi_drop_stores_of_lost_inserts(GiWork *work, int nwork)
{
	for (int i = 0; i < nwork; i++)
	{
		GiWork	   *w = &work[i];
		GiStoreEntry *e;

		if (!w->answered || !detached(w) || w->slot->reply == GI_REPLY_OK)
			continue;
		e = gi_store_of(&w->slot->key, w->slot->args.relfilenode);
		if (e)
			drop_for_lost_insert(e, w);
	}
}

void
gi_delete_group(GiStoreEntry *e, GiWork **group, int ngroup)
{
	uint64		total = 0;
	uint64	   *keys;
	uint64		pos = 0;
	uint64		ndeleted = 0;
	gi_status	st;
	int			nvalid = 0;

	for (int i = 0; i < ngroup; i++)
	{
		GiWork	   *w = group[i];

		if (w->slot->in_size != (Size) w->slot->args.n * sizeof(uint64))
		{
			gi_reply_error(w, ERRCODE_PROTOCOL_VIOLATION,
						   "malformed gpuindex delete request: %zu bytes for %u keys",
						   (size_t) w->slot->in_size, w->slot->args.n);
			continue;
		}
		group[nvalid++] = w;
		total += w->slot->args.n;
	}
	if (nvalid == 0)
		return;

	keys = palloc_extended(Max(total, 1) * sizeof(uint64), MCXT_ALLOC_HUGE);
	for (int i = 0; i < nvalid; i++)
	{
		GiWork	   *w = group[i];

		memcpy(keys + pos, w->buf, w->slot->in_size);
		pos += w->slot->args.n;
	}
	gi_load_touch(e, keys, (uint32) total);
	st = gi_shards_delete(&e->shards, (uint32) total, keys, &ndeleted);
	for (int i = 0; i < nvalid; i++)
	{
		if (st != GI_OK)
			gi_reply_status(group[i], st);
		else
		{
			group[i]->slot->rargs.count = group[i]->slot->args.n;
			e->delete_requests++;
			gi_reply(group[i], GI_REPLY_OK);
		}
	}
	e->delete_batches++;
}
