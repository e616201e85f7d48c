/*
 * gi_pending.c
 *		Work a backend defers to its transaction's end, for every gpuindex
 *		access method: the pending-insert queue, and the indexes built in
 *		the transaction.
 *
 * A row goes to the pages first, then its records into a backend-local
 * queue per index.  The queue is sent (GI_REQ_INSERT, up to GI_CHUNK_BYTES
 * a request) when it fills, before this backend searches the index, and at
 * pre-commit, where a request that fits a slot is not waited for
 * (GI_REQ_DETACHED); at abort it is dropped (docs/architecture.md says why
 * this is enough).  An index built in a transaction that aborts leaves a store
 * loaded for an index that never existed: it is dropped from the service
 * at this backend's next flush or when the session ends, whichever comes
 * first (not from the abort callback, which must not wait on another
 * process or fail).  The transaction callbacks are
 * registered once, on first use, for all access methods.
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "gi_access.h"
#include "gi_shmem.h"

typedef struct PendingInserts
{
	Oid			indexoid;		/* hash key */
	Oid			relfilenode;	/* the pages the rows went to */
	GiRecordBuf records;
} PendingInserts;

typedef struct BuiltIndex
{
	Oid			indexoid;
	SubTransactionId subid;
} BuiltIndex;

static bool callbacks_registered = false;
static MemoryContext pending_cxt = NULL;
static HTAB *pending = NULL;
static List *built = NIL;		/* BuiltIndex *, in TopMemoryContext */
static List *orphans = NIL;		/* index OIDs, in TopMemoryContext */

static void register_callbacks(void);

/* send p's records; at commit without waiting for the service to apply them */
static void
flush_entry(PendingInserts *p, bool at_commit)
{
	GiStoreKey	key;

	key.dbid = MyDatabaseId;
	key.relid = p->indexoid;
	key.part = 0;
	if (at_commit)
		gi_records_send_detached(&p->records, key, p->relfilenode);
	else
		(void) gi_records_send(&p->records, key, p->relfilenode, GI_REQ_INSERT, 0);
}

static void
drop_orphans(void)
{
	while (orphans != NIL)
	{
		GiStoreKey	key;

		key.dbid = MyDatabaseId;
		key.relid = linitial_oid(orphans);
		key.part = 0;
		(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
		orphans = list_delete_first(orphans);
	}
}

/* a session that ends before its next flush drops its orphans on the way out */
static void
drop_orphans_at_exit(int code, Datum arg)
{
	if (orphans == NIL || gi_shared == NULL || code != 0)
		return;
	PG_TRY();
	{
		drop_orphans();
	}
	PG_CATCH();
	{
		/* the stores stay until the service restarts; exit anyway */
		FlushErrorState();
	}
	PG_END_TRY();
}

static void
flush_all(bool at_commit)
{
	HASH_SEQ_STATUS status;
	PendingInserts *p;

	if (pending == NULL)
		return;
	hash_seq_init(&status, pending);
	while ((p = hash_seq_search(&status)) != NULL)
		flush_entry(p, at_commit);
}

static void
discard_pending(void)
{
	if (pending_cxt != NULL)
		MemoryContextReset(pending_cxt);
	pending = NULL;
}

/*
 * Queue the records of a row the caller just wrote to the pages: one for
 * IVF, one per list (term, keyword) for posting lists.  A row's records
 * always travel in one INSERT request, however many there are: the device
 * service's loading rule relies on it (docs/architecture.md, "Loading").
 */
void
gi_queue_row(Relation index, uint32 record_bytes, uint64 key, uint32 n,
			 const uint32 *lists, const void *payloads)
{
	Oid			indexoid = RelationGetRelid(index);
	PendingInserts *p;
	bool		found;
	bool		full = false;

	/* with no device service in this cluster there is nothing to tell */
	if (gi_shared == NULL || n == 0)
		return;

	if (pending == NULL)
	{
		HASHCTL		ctl;

		register_callbacks();
		if (pending_cxt == NULL)
			pending_cxt = AllocSetContextCreate(TopMemoryContext, "gpuindex pending inserts",
												ALLOCSET_DEFAULT_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(PendingInserts);
		ctl.hcxt = pending_cxt;
		pending = hash_create("gpuindex pending inserts", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	p = hash_search(pending, &indexoid, HASH_ENTER, &found);
	if (found && (p->relfilenode != gi_store_relfilenode(index) ||
				  p->records.record_bytes != record_bytes))
	{
		/* new pages in this transaction (TRUNCATE): send the old rows first */
		flush_entry(p, false);
		gi_records_free(&p->records);
		found = false;
	}
	if (!found)
	{
		p->relfilenode = gi_store_relfilenode(index);
		gi_records_init(&p->records, pending_cxt, record_bytes, 64);
	}

	/* the row does not fit the request being filled: send that one first */
	if (p->records.n > 0 && (uint64) p->records.n + n > p->records.limit)
		flush_entry(p, false);
	gi_records_reserve(&p->records, n);
	for (uint32 i = 0; i < n; i++)
		full = gi_records_add(&p->records, key, lists[i],
							  (const char *) payloads + (Size) i * record_bytes);
	if (full)
		flush_entry(p, false);
}

/* queue a row that has one record */
void
gi_queue_insert(Relation index, uint32 record_bytes, uint64 key, uint32 list,
				const void *payload)
{
	gi_queue_row(index, record_bytes, key, 1, &list, payload);
}

/*
 * Before a scan or batch search of the index: this session's rows must be
 * searchable.
 */
void
gi_flush_inserts(Relation index)
{
	Oid			indexoid = RelationGetRelid(index);
	PendingInserts *p;

	drop_orphans();
	if (pending == NULL)
		return;
	p = hash_search(pending, &indexoid, HASH_FIND, NULL);
	if (p)
		flush_entry(p, false);
}

/* at the end of a build: note an index created in this transaction */
void
gi_remember_built(Relation index)
{
	MemoryContext old;
	BuiltIndex *b;

	if (index->rd_createSubid == InvalidSubTransactionId)
		return;					/* REINDEX or TRUNCATE of an existing index */
	register_callbacks();
	old = MemoryContextSwitchTo(TopMemoryContext);
	b = palloc(sizeof(BuiltIndex));
	b->indexoid = RelationGetRelid(index);
	b->subid = index->rd_createSubid;
	built = lappend(built, b);
	MemoryContextSwitchTo(old);
}

static void
orphan_built(SubTransactionId subid)
{
	ListCell   *lc;
	List	   *keep = NIL;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	foreach(lc, built)
	{
		BuiltIndex *b = (BuiltIndex *) lfirst(lc);

		if (subid == InvalidSubTransactionId || b->subid == subid)
		{
			orphans = lappend_oid(orphans, b->indexoid);
			pfree(b);
		}
		else
			keep = lappend(keep, b);
	}
	list_free(built);
	built = keep;
	MemoryContextSwitchTo(old);
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			flush_all(true);
			break;
		case XACT_EVENT_PRE_PREPARE:
			flush_all(false);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			discard_pending();
			orphan_built(InvalidSubTransactionId);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			discard_pending();
			list_free_deep(built);
			built = NIL;
			break;
	}
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			orphan_built(mySubid);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			foreach(lc, built)
			{
				BuiltIndex *b = (BuiltIndex *) lfirst(lc);

				if (b->subid == mySubid)
					b->subid = parentSubid;
			}
			break;
		default:
			break;
	}
}

static void
register_callbacks(void)
{
	if (callbacks_registered)
		return;
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	before_shmem_exit(drop_orphans_at_exit, (Datum) 0);
	callbacks_registered = true;
}
