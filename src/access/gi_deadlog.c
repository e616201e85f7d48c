/*
 * gi_deadlog.c
 *		The dead-row log: heap TIDs VACUUM found dead, each with the
 *		generation of that VACUUM, kept on pages of their own so that a
 *		VACUUM changes a few log pages instead of every page holding a dead
 *		row's items.  Readers of the rows (loads, scans, the compacting VACUUM)
 *		read the log first and skip the items it kills.
 *
 * An item carries the generation current when it was appended.  A heap
 * TID is reused only after the ambulkdelete that logged it returned, and
 * that ambulkdelete bumped the generation first, so a row appended at a
 * reused TID carries a generation at least the log entry's and stays
 * alive; the dead row's older items do not.  The log is a list chain
 * (gi_chain.c) whose items are GiDeadLogItems.  VACUUM finds dead rows in
 * the TID directory (a chain of bare heap TIDs, one per row), logs them
 * and only then removes them from the directory, so that every row whose
 * items are on the pages is in the directory or in the log.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "common/hashfn.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"

#include "gi_access.h"

/* one VACUUM's batch of dead TIDs: begins with a heap TID like any item */
typedef struct GiDeadLogItem
{
	ItemPointerData first;
	uint16		n;				/* TIDs, first included */
	uint32		generation;
	ItemPointerData rest[FLEXIBLE_ARRAY_MEMBER];
} GiDeadLogItem;

#define DEADLOG_ITEM_MAX_TIDS \
	((int) ((GI_MAX_ITEM_SIZE - offsetof(GiDeadLogItem, rest)) / \
			sizeof(ItemPointerData)) + 1)

typedef struct DeadEntry
{
	uint64		key;			/* gi_tid_key of the TID */
	uint32		generation;		/* the highest it was logged with */
	char		status;			/* simplehash's */
} DeadEntry;

/* a load or a compaction tests every item of the index: an open-addressing hash */
#define SH_PREFIX deadtids
#define SH_ELEMENT_TYPE DeadEntry
#define SH_KEY_TYPE uint64
#define SH_KEY key
#define SH_HASH_KEY(tb, k) murmurhash32((uint32) ((k) ^ ((k) >> 32)))
#define SH_EQUAL(tb, a, b) ((a) == (b))
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

struct GiDeadLog
{
	deadtids_hash *tids;
	MemoryContext cxt;
};

static GiDeadLogHeadData *
head_item(Page page, GiListRef ref)
{
	ItemId		iid;

	if (PageGetMaxOffsetNumber(page) < ref.offnum ||
		ItemIdGetLength(iid = PageGetItemId(page, ref.offnum)) != sizeof(GiDeadLogHeadData))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index page has no dead-row log head at item %u", ref.offnum),
				 errhint("REINDEX the index.")));
	return (GiDeadLogHeadData *) PageGetItem(page, iid);
}

void
gi_deadlog_init_head(GiDeadLogHeadData *head)
{
	memset(head, 0, sizeof(*head));
	head->chain.start = InvalidBlockNumber;
	head->chain.insert = InvalidBlockNumber;
}

/*
 * A new row: its TID goes to the TID directory, before any of its items
 * reach the pages (a directory entry without items is harmless, items
 * without an entry would never be found dead).  Returns the generation its
 * items must carry.
 */
uint32
gi_deadlog_add_row(Relation index, const GiDeadLogSpec *spec, ItemPointer heaptid)
{
	Buffer		buf;
	uint32		generation;

	gi_list_append(index, spec->page_id, spec->tids, heaptid, sizeof(ItemPointerData));
	buf = ReadBuffer(index, spec->head.blkno);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	generation = head_item(BufferGetPage(buf), spec->head)->generation;
	UnlockReleaseBuffer(buf);
	return generation;
}

static bool
read_item(void *arg, ItemPointer heaptid, const char *item, Size itemsz)
{
	GiDeadLog  *log = arg;
	const GiDeadLogItem *li = (const GiDeadLogItem *) item;

	if (itemsz < offsetof(GiDeadLogItem, rest) || li->n == 0 ||
		itemsz != offsetof(GiDeadLogItem, rest) + (li->n - 1) * sizeof(ItemPointerData))
		elog(ERROR, "dead-row log item of %zu bytes is malformed", itemsz);
	for (int i = 0; i < li->n; i++)
	{
		ItemPointerData tid = i == 0 ? li->first : li->rest[i - 1];
		bool		found;
		DeadEntry  *e = deadtids_insert(log->tids, gi_tid_key(&tid), &found);

		if (!found || e->generation < li->generation)
			e->generation = li->generation;
	}
	return true;
}

/* the log's entries, to test items with; NULL when it has none */
GiDeadLog *
gi_deadlog_read(Relation index, GiListRef head)
{
	BlockNumber start;
	GiDeadLog  *log;

	gi_list_read(index, head, &start, NULL);
	if (!BlockNumberIsValid(start))
		return NULL;
	log = palloc(sizeof(GiDeadLog));
	log->cxt = AllocSetContextCreate(CurrentMemoryContext, "gpuindex dead-row log",
									 ALLOCSET_DEFAULT_SIZES);
	log->tids = deadtids_create(log->cxt, 1024, NULL);
	(void) gi_list_walk(index, head, NULL, read_item, log);
	if (log->tids->members == 0)
	{
		gi_deadlog_free(log);
		return NULL;
	}
	return log;
}

/* whether the item (a heap TID first, its generation at gen_offset) is dead */
bool
gi_deadlog_kills(const GiDeadLog *log, const char *item, Size gen_offset)
{
	DeadEntry  *e;
	uint32		generation;

	if (log == NULL)
		return false;
	e = deadtids_lookup(log->tids, gi_tid_key((ItemPointer) item));
	if (e == NULL)
		return false;
	memcpy(&generation, item + gen_offset, sizeof(uint32));
	return e->generation > generation;
}

void
gi_deadlog_free(GiDeadLog *log)
{
	if (log == NULL)
		return;
	MemoryContextDelete(log->cxt);
	pfree(log);
}

/*
 * Start a VACUUM's generation: items appended from now on carry it.
 * *before gets the head as it was.  Returns the new generation.
 */
uint32
gi_deadlog_bump(Relation index, GiListRef head, GiDeadLogHeadData *before)
{
	Buffer		buf = ReadBuffer(index, head.blkno);
	GenericXLogState *state;
	GiDeadLogHeadData *h;
	uint32		generation;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	h = head_item(gi_xlog_register(state, buf), head);
	*before = *h;
	if (h->generation == PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("index \"%s\" ran out of VACUUM generations",
						RelationGetRelationName(index)),
				 errhint("REINDEX the index.")));
	generation = ++h->generation;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
	return generation;
}

/* log n dead rows (their keys) with the VACUUM's generation */
void
gi_deadlog_append(Relation index, const GiDeadLogSpec *spec, uint32 generation,
				  const uint64 *keys, uint32 n)
{
	GiDeadLogItem *item;
	uint32		done = 0;

	if (n == 0)
		return;
	item = palloc(offsetof(GiDeadLogItem, rest) +
				  (DEADLOG_ITEM_MAX_TIDS - 1) * sizeof(ItemPointerData));
	while (done < n)
	{
		int			m = (int) Min((uint32) DEADLOG_ITEM_MAX_TIDS, n - done);

		gi_key_to_tid(keys[done], &item->first);
		for (int i = 1; i < m; i++)
			gi_key_to_tid(keys[done + i], &item->rest[i - 1]);
		item->n = (uint16) m;
		item->generation = generation;
		gi_list_append(index, spec->page_id, spec->head, item,
					   offsetof(GiDeadLogItem, rest) + (m - 1) * sizeof(ItemPointerData));
		done += m;
	}
	pfree(item);
}

/*
 * The head's figures after a VACUUM: `added` more entries, or none when the
 * log was emptied (its insert page back to its first), and `items` live.
 */
static void
update_head(Relation index, GiListRef head, bool emptied, uint64 added,
			uint64 items)
{
	Buffer		buf = ReadBuffer(index, head.blkno);
	GenericXLogState *state;
	GiDeadLogHeadData *h;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	h = head_item(gi_xlog_register(state, buf), head);
	if (emptied)
	{
		h->entries = 0;
		h->chain.insert = h->chain.start;
	}
	else
		h->entries += added;
	h->items = items;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

void
gi_deadlog_account(Relation index, GiListRef head, uint64 added, uint64 items)
{
	update_head(index, head, false, added, items);
}

/*
 * Empty the log once no page holds an item it kills: its pages stay in
 * its chain, emptied, for the next VACUUM's entries.  A reader that saw
 * only part of the entries reads pages that no longer need them.
 */
void
gi_deadlog_clear(Relation index, const GiDeadLogSpec *spec, uint64 items)
{
	BlockNumber blkno;

	gi_list_read(index, spec->head, &blkno, NULL);
	while (BlockNumberIsValid(blkno))
	{
		Buffer		buf = ReadBuffer(index, blkno);
		Page		page;

		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(buf);
		if (PageGetMaxOffsetNumber(page) > 0)
		{
			GenericXLogState *state = GenericXLogStart(index);
			GiPageOpaqueData opaque = *GiPageGetOpaque(page);

			page = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);
			gi_init_page(page, opaque.flags, opaque.page_id);
			*GiPageGetOpaque(page) = opaque;
			GenericXLogFinish(state);
			page = BufferGetPage(buf);
		}
		blkno = GiPageGetOpaque(page)->nextblkno;
		UnlockReleaseBuffer(buf);
	}
	update_head(index, spec->head, true, 0, items);
}
