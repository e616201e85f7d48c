/*
 * gpuivf_insert.c
 *		INSERT: append to the pages, queue the device insert; the per-backend
 *		queue and the transaction callbacks that flush or discard it.
 *
 * A row goes to the pages first (the truth), then into a backend-local
 * queue per index.  The queue is sent to the device service in batches
 * (GI_REQ_INSERT, up to GPUIVF_CHUNK_BYTES a request) when it fills,
 * before this backend scans the index (so a session sees its own rows),
 * and at pre-commit (so every committed row is in the store before any
 * other session can see it).  At abort the queue is dropped: the rows are
 * dead, and they are on the pages anyway, which is what a reload reads.
 * The service ignores inserts into a store it does not hold (the pages
 * will bring the rows when it is loaded) and skips keys it holds already.
 *
 * The same callbacks track indexes built in the current transaction: if
 * it aborts, the store loaded at the end of the build belongs to an index
 * that never existed.  Such orphans are dropped from the service at this
 * backend's next flush (not from the abort callback itself, which must not
 * wait on another process or fail).
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gi_shmem.h"
#include "gpuivf.h"

typedef struct PendingInserts
{
	Oid			indexoid;		/* hash key */
	Oid			relfilenode;	/* the pages the rows went to */
	uint32		dim;
	uint32		n;
	uint32		cap;
	uint64	   *keys;
	uint32	   *lists;
	float4	   *vecs;
} PendingInserts;

typedef struct BuiltIndex
{
	Oid			indexoid;
	SubTransactionId subid;
} BuiltIndex;

static MemoryContext pending_cxt = NULL;
static HTAB *pending = NULL;
static List *built = NIL;		/* BuiltIndex *, in TopMemoryContext */
static List *orphans = NIL;		/* index OIDs, in TopMemoryContext */

static void
flush_entry(PendingInserts *p)
{
	GiStoreKey	key;

	if (p->n == 0)
		return;
	key.dbid = MyDatabaseId;
	key.relid = p->indexoid;
	gpuivf_send_records(key, p->relfilenode, GI_REQ_INSERT, 0, p->n, p->dim,
						p->keys, p->lists, p->vecs, NULL);
	p->n = 0;
}

static void
drop_orphans(void)
{
	while (orphans != NIL)
	{
		GiStoreKey	key;

		key.dbid = MyDatabaseId;
		key.relid = linitial_oid(orphans);
		(void) gi_call_simple(GI_REQ_DROP, &key, NULL, NULL);
		orphans = list_delete_first(orphans);
	}
}

static void
flush_all(void)
{
	HASH_SEQ_STATUS status;
	PendingInserts *p;

	if (pending == NULL)
		return;
	hash_seq_init(&status, pending);
	while ((p = hash_seq_search(&status)) != NULL)
		flush_entry(p);
}

static void
discard_pending(void)
{
	if (pending_cxt != NULL)
		MemoryContextReset(pending_cxt);
	pending = NULL;
}

static void
queue_insert(Relation index, uint32 dim, uint64 key, uint32 list, const float4 *vec)
{
	Oid			indexoid = RelationGetRelid(index);
	PendingInserts *p;
	bool		found;
	uint32		limit = Max(1, GPUIVF_CHUNK_BYTES / (sizeof(uint64) + sizeof(uint32) +
													 dim * sizeof(float4)));

	if (pending == NULL)
	{
		HASHCTL		ctl;

		if (pending_cxt == NULL)
			pending_cxt = AllocSetContextCreate(TopMemoryContext, "gpuivf pending inserts",
												ALLOCSET_DEFAULT_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(PendingInserts);
		ctl.hcxt = pending_cxt;
		pending = hash_create("gpuivf pending inserts", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	p = hash_search(pending, &indexoid, HASH_ENTER, &found);
	if (found && (p->relfilenode != index->rd_node.relNode || p->dim != dim))
	{
		/* new pages in this transaction (TRUNCATE): send the old rows first */
		flush_entry(p);
		pfree(p->keys);
		pfree(p->lists);
		pfree(p->vecs);
		found = false;
	}
	if (!found)
	{
		p->relfilenode = index->rd_node.relNode;
		p->dim = dim;
		p->n = 0;
		p->cap = Min(64, limit);
		p->keys = MemoryContextAlloc(pending_cxt, sizeof(uint64) * p->cap);
		p->lists = MemoryContextAlloc(pending_cxt, sizeof(uint32) * p->cap);
		p->vecs = MemoryContextAllocHuge(pending_cxt, sizeof(float4) * p->cap * dim);
	}
	if (p->n == p->cap)
	{
		p->cap = Min(p->cap * 2, limit);
		p->keys = repalloc(p->keys, sizeof(uint64) * p->cap);
		p->lists = repalloc(p->lists, sizeof(uint32) * p->cap);
		p->vecs = repalloc_huge(p->vecs, sizeof(float4) * p->cap * dim);
	}
	p->keys[p->n] = key;
	p->lists[p->n] = list;
	memcpy(p->vecs + (Size) p->n * dim, vec, dim * sizeof(float4));
	p->n++;
	if (p->n >= limit)
		flush_entry(p);
}

/* before a scan or batch search of the index: its rows must be searchable */
void
gpuivf_flush_index(Relation index)
{
	Oid			indexoid = RelationGetRelid(index);
	PendingInserts *p;

	drop_orphans();
	if (pending == NULL)
		return;
	p = hash_search(pending, &indexoid, HASH_FIND, NULL);
	if (p)
		flush_entry(p);
}

bool
gpuivf_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			  Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
			  IndexInfo *indexInfo)
{
	MemoryContext tmp;
	MemoryContext old;
	const float4 *vec;
	int			dim;
	GpuivfMeta *meta;
	uint32		list;
	uint32		metric;
	BlockNumber listblk;
	OffsetNumber listoff;

	/* like pgvector: NULL vectors are not indexed */
	if (isnull[0])
		return false;

	tmp = AllocSetContextCreate(CurrentMemoryContext, "gpuivf insert",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmp);

	vec = gpuivf_datum_floats(index, values[0], &dim, "vector");
	meta = gpuivf_get_meta(index);
	gpuivf_check_dim(meta, dim);
	if (dim > GPUIVF_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("gpuivf indexes support at most %d dimensions", GPUIVF_MAX_DIM),
				 errdetail("The row has %d dimensions.", dim)));
	metric = meta->metric;
	if (!gpuivf_vector_indexable(metric, vec, dim))
		goto done;

	if (meta->lists == 0)
	{
		gpuivf_initialize_lists(index, (uint32) dim);
		meta = gpuivf_get_meta(index);
		gpuivf_check_dim(meta, dim);
	}

	list = gpuivf_nearest_list(meta->centroids, meta->cnorms, meta->lists,
							   dim, metric, vec);
	gpuivf_listinfo_location(meta, list, &listblk, &listoff);
	meta = NULL;				/* the cache may go away from here on */

	gpuivf_append(index, dim, listblk, listoff, heap_tid, vec);

	/* with no device service in this cluster there is nothing to tell */
	if (gi_shared != NULL)
		queue_insert(index, dim,
					 gi_tid_to_key(ItemPointerGetBlockNumber(heap_tid),
								   ItemPointerGetOffsetNumber(heap_tid)),
					 list, vec);

done:
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmp);
	return false;
}

/* called at the end of a build: note indexes created in this transaction */
void
gpuivf_remember_built(Relation index)
{
	MemoryContext old;
	BuiltIndex *b;

	if (index->rd_createSubid == InvalidSubTransactionId)
		return;					/* REINDEX or TRUNCATE of an existing index */
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
gpuivf_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			flush_all();
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
gpuivf_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
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

void
gpuivf_register_callbacks(void)
{
	RegisterXactCallback(gpuivf_xact_callback, NULL);
	RegisterSubXactCallback(gpuivf_subxact_callback, NULL);
}
