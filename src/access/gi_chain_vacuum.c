/*
 * gi_chain_vacuum.c
 *		VACUUM of list chains: remove dead items from the pages and their
 *		keys from the store, move each list's insert page back to its first
 *		page with room, retire pages their list left empty, and give pages
 *		retired long enough ago to the free space map.
 *
 * A data page (not a list's first) found empty is flagged idle; its list
 * refills it first (appends clear the flag).  One still empty and idle at
 * the next VACUUM is unlinked from its chain and flagged deleted, stamped
 * with the next transaction ID; it keeps its link and has no items, so a
 * reader that reaches it through an older pointer walks on.  Once no
 * running transaction is that old, the cleanup pass records it in the free
 * space map, where any list takes it before the relation is extended.
 * Keys go to the store after the pages changed and before ambulkdelete
 * returns, i.e. before the heap can reuse the TIDs; the service drops
 * one batch while the pass goes on over the next pages.  The metapage's
 * GI_PAGE_SETTLED says that no deleted page waits for the free space map,
 * so that the cleanup pass need not read every page to find one.
 *
 * An AM with a dead-row log (gi_deadlog.c) has its TID directory read
 * instead of its lists: the dead rows' TIDs go to the log, their keys to
 * the store, then their entries leave the directory; the lists' pages are
 * not read.  Once the log is full, one VACUUM also removes the items the
 * log kills from the lists' pages as above, then empties the log.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/transam.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"

#include "gi_access.h"

/* a page's keys fit one request */
StaticAssertDecl(MaxOffsetNumber <= GI_DELETE_SEND_MAX,
				 "a page holds more items than a delete request takes keys");

/* set or clear the metapage's GI_PAGE_SETTLED (no other lock held) */
static void
meta_set_settled(Relation index, bool settled)
{
	Buffer		buf = ReadBuffer(index, GI_METAPAGE_BLKNO);
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	if (((GiPageGetOpaque(page)->flags & GI_PAGE_SETTLED) != 0) != settled)
	{
		GenericXLogState *state = GenericXLogStart(index);

		page = gi_xlog_register(state, buf);
		if (settled)
			GiPageGetOpaque(page)->flags |= GI_PAGE_SETTLED;
		else
			GiPageGetOpaque(page)->flags &= ~GI_PAGE_SETTLED;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
}

static bool
meta_settled(Relation index)
{
	Buffer		buf = ReadBuffer(index, GI_METAPAGE_BLKNO);
	bool		settled;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	settled = (GiPageGetOpaque(BufferGetPage(buf))->flags & GI_PAGE_SETTLED) != 0;
	UnlockReleaseBuffer(buf);
	return settled;
}

/*
 * Remove the items deletable[] from the exclusively locked page.  A page
 * changed for the first time since the last checkpoint is logged whole
 * anyway, so it is changed in place and logged as a full image, which
 * spares the generic record's copies of it.
 */
static void
delete_items(Relation index, Buffer buf, OffsetNumber *deletable, int ndeletable)
{
	if (RelationNeedsWAL(index) && XLogCheckBufferNeedsBackup(buf))
	{
		START_CRIT_SECTION();
		PageIndexMultiDelete(BufferGetPage(buf), deletable, ndeletable);
		MarkBufferDirty(buf);
		log_newpage_buffer(buf, true);
		END_CRIT_SECTION();
	}
	else
	{
		GenericXLogState *state = GenericXLogStart(index);

		PageIndexMultiDelete(GenericXLogRegisterBuffer(state, buf, 0), deletable, ndeletable);
		GenericXLogFinish(state);
	}
}

/*
 * Unlink the empty data page blkno from its list's chain, where prevblk
 * links to it, in one WAL record with the list's insert page moved off
 * it: after this, nothing on disk points to the page.  False when an
 * append used the page since the caller saw it empty.  *next gets the
 * page's successor either way.  Lock order: the head's page, then the
 * chain's pages in chain order.
 */
static bool
unlink_empty_page(Relation index, GiListRef ref, BlockNumber prevblk,
				  BlockNumber blkno, BlockNumber *next)
{
	Buffer		lbuf = ReadBuffer(index, ref.blkno);
	Buffer		pbuf;
	Buffer		buf;
	Page		page;
	Page		ppage;
	bool		done = false;

	LockBuffer(lbuf, BUFFER_LOCK_EXCLUSIVE);
	pbuf = ReadBuffer(index, prevblk);
	LockBuffer(pbuf, BUFFER_LOCK_EXCLUSIVE);
	buf = ReadBuffer(index, blkno);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	ppage = BufferGetPage(pbuf);

	if (GiPageGetOpaque(ppage)->nextblkno == blkno &&
		PageGetMaxOffsetNumber(page) == 0 &&
		!(GiPageGetOpaque(page)->flags & GI_PAGE_DELETED))
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		lpage = GenericXLogRegisterBuffer(state, lbuf, 0);
		GiListHeadData *head;

		ppage = GenericXLogRegisterBuffer(state, pbuf, 0);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		head = (GiListHeadData *) PageGetItem(lpage, PageGetItemId(lpage, ref.offnum));
		if (head->insert == blkno)
			head->insert = prevblk;
		GiPageGetOpaque(ppage)->nextblkno = GiPageGetOpaque(page)->nextblkno;
		GiPageGetOpaque(page)->flags |= GI_PAGE_DELETED;
		((PageHeader) page)->pd_prune_xid = ReadNextTransactionId();
		GenericXLogFinish(state);
		done = true;
	}
	*next = GiPageGetOpaque(BufferGetPage(buf))->nextblkno;
	UnlockReleaseBuffer(buf);
	UnlockReleaseBuffer(pbuf);
	UnlockReleaseBuffer(lbuf);
	return done;
}

/* how a pass tells a dead item from a live one */
typedef enum VacJudge
{
	JUDGE_CALLBACK,				/* the heap's callback */
	JUDGE_LOG,					/* the log alone: items it kills are dead */
	JUDGE_MARKS					/* the positions the directory's pass marked */
} VacJudge;

/* a dead entry of the TID directory: where it is, and its TID */
typedef struct VacMark
{
	ItemPointerData pos;
	ItemPointerData tid;
} VacMark;

/* one ambulkdelete's state, whichever pass it runs */
typedef struct VacPass
{
	Relation	index;
	IndexBulkDeleteResult *stats;
	IndexBulkDeleteCallback callback;
	void	   *callback_state;
	const GiDeadLogSpec *spec;	/* the AM's dead-row log, or NULL */
	const GiDeadLog *log;		/* the log's entries, or NULL */
	VacJudge	judge;
	uint32		generation;		/* this VACUUM's */
	uint64		logged;
	uint64		live;
	VacMark    *marks;			/* the dead directory entries */
	uint64		nmarks;
	uint64		maxmarks;
	uint64		nextmark;		/* JUDGE_MARKS: the next one to meet */
	GiDeleteSender ds;
} VacPass;

/* the keys gathered go to the store, through the log when there is one */
static void
send_keys(VacPass *vp)
{
	if (vp->spec)
	{
		gi_deadlog_append(vp->index, vp->spec, vp->generation,
						  vp->ds.keys[vp->ds.filling], vp->ds.n);
		vp->logged += vp->ds.n;
	}
	gi_deletes_send(&vp->ds);
}

/*
 * A chain page, locked in `mode`, with room in the batch of keys for all
 * its items (a page has at most as many as a request takes).
 */
static Buffer
read_page(IndexVacuumInfo *info, BlockNumber blkno, int mode, VacPass *vp)
{
	Buffer		buf;

	vacuum_delay_point();
	buf = ReadBufferExtended(info->index, MAIN_FORKNUM, blkno, RBM_NORMAL,
							 info->strategy);
	LockBuffer(buf, mode);
	if (vp->ds.n + PageGetMaxOffsetNumber(BufferGetPage(buf)) > GI_DELETE_SEND_MAX)
	{
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		send_keys(vp);
		LockBuffer(buf, mode);
	}

	/* the items' heap TIDs are far apart: ask for all of them at once */
	{
		Page		page = BufferGetPage(buf);

		for (OffsetNumber off = FirstOffsetNumber; off <= PageGetMaxOffsetNumber(page); off++)
			__builtin_prefetch(PageGetItem(page, PageGetItemId(page, off)));
	}
	return buf;
}

typedef enum ItemFate
{
	ITEM_LIVE,
	ITEM_DEAD,					/* dead now: its key gathered */
	ITEM_LOGGED					/* killed by the log earlier (or a directory
								 * entry already logged): its key not sent
								 * again (the store dropped it, and the TID may
								 * be a new row's) */
} ItemFate;

/* remember a dead directory entry, for the pass that removes it */
static void
mark_item(VacPass *vp, const char *item, BlockNumber blkno, OffsetNumber off)
{
	VacMark    *m;

	if (vp->nmarks == vp->maxmarks)
	{
		vp->maxmarks = Max(vp->maxmarks * 2, 1024);
		vp->marks = vp->marks
			? repalloc_huge(vp->marks, vp->maxmarks * sizeof(VacMark))
			: palloc_extended(vp->maxmarks * sizeof(VacMark), MCXT_ALLOC_HUGE);
	}
	m = &vp->marks[vp->nmarks++];
	ItemPointerSet(&m->pos, blkno, off);
	ItemPointerCopy((ItemPointer) item, &m->tid);
}

/* whether the item at (blkno, off) is the next marked dead entry */
static bool
marked_dead(VacPass *vp, const char *item, BlockNumber blkno, OffsetNumber off)
{
	VacMark    *m = &vp->marks[vp->nextmark];

	if (vp->nextmark == vp->nmarks ||
		ItemPointerGetBlockNumberNoCheck(&m->pos) != blkno ||
		ItemPointerGetOffsetNumberNoCheck(&m->pos) != off)
		return false;
	if (!ItemPointerEquals(&m->tid, (ItemPointer) item))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("TID directory of index \"%s\" changed under VACUUM at block %u, item %u",
						RelationGetRelationName(vp->index), blkno, off),
				 errhint("REINDEX the index.")));
	vp->nextmark++;
	return true;
}

/*
 * The item at (blkno, off).  With a dead-row log, the callback judges only
 * the TID directory's entries, and a dead one's position is marked.
 */
static ItemFate
judge_item(VacPass *vp, const char *item, BlockNumber blkno, OffsetNumber off)
{
	if (vp->judge == JUDGE_MARKS)
		return marked_dead(vp, item, blkno, off) ? ITEM_LOGGED : ITEM_LIVE;
	if (vp->judge == JUDGE_LOG)
		return gi_deadlog_kills(vp->log, item, vp->spec->gen_offset)
			? ITEM_LOGGED : ITEM_LIVE;
	if (vp->callback((ItemPointer) item, vp->callback_state))
	{
		vp->ds.keys[vp->ds.filling][vp->ds.n++] = gi_tid_key((ItemPointer) item);
		vp->stats->tuples_removed += 1;
		if (vp->spec)
			mark_item(vp, item, blkno, off);
		return ITEM_DEAD;
	}
	vp->stats->num_index_tuples += 1;
	vp->live += 1;
	return ITEM_LIVE;
}

/*
 * One list's chain, dead items removed from its pages; itemsz: the
 * MAXALIGN'd size an append needs.  Items the dead-row log kills go from
 * the pages too.
 */
static void
vacuum_list(IndexVacuumInfo *info, GiListRef ref, Size itemsz, VacPass *vp)
{
	Relation	index = info->index;
	BlockNumber blkno;
	BlockNumber start;
	BlockNumber prevblk = InvalidBlockNumber;
	BlockNumber insertPage;
	BlockNumber firstFree = InvalidBlockNumber;

	gi_list_read(index, ref, &blkno, &insertPage);
	start = blkno;

	while (BlockNumberIsValid(blkno))
	{
		Buffer		buf;
		Page		page;
		OffsetNumber maxoff;
		OffsetNumber deletable[MaxOffsetNumber];
		int			ndeletable = 0;
		BlockNumber next;
		bool		empty;
		bool		idle;
		bool		roomy;

		buf = read_page(info, blkno, BUFFER_LOCK_EXCLUSIVE, vp);
		page = BufferGetPage(buf);
		maxoff = PageGetMaxOffsetNumber(page);
		for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
			if (judge_item(vp, PageGetItem(page, PageGetItemId(page, off)),
						   blkno, off) != ITEM_LIVE)
				deletable[ndeletable++] = off;

		if (ndeletable > 0)
			delete_items(index, buf, deletable, ndeletable);

		roomy = gi_page_has_room(page, itemsz);
		empty = blkno != start && PageGetMaxOffsetNumber(page) == 0;
		idle = (GiPageGetOpaque(page)->flags & GI_PAGE_IDLE) != 0;
		if (empty && !idle)
		{
			/* unlinked at the next VACUUM unless its list refills it */
			GenericXLogState *state = GenericXLogStart(index);

			page = gi_xlog_register(state, buf);
			GiPageGetOpaque(page)->flags |= GI_PAGE_IDLE;
			GenericXLogFinish(state);
			page = BufferGetPage(buf);
		}
		next = GiPageGetOpaque(page)->nextblkno;
		UnlockReleaseBuffer(buf);

		/*
		 * Items are deleted from the pages before their keys reach the
		 * store; unlinking an empty page changes no item, so it need not
		 * wait for that.
		 */
		if (empty && idle && BlockNumberIsValid(prevblk) &&
			vp->stats->pages_newly_deleted == 0)
			meta_set_settled(index, false); /* before the first deletion */
		if (empty && idle && BlockNumberIsValid(prevblk) &&
			unlink_empty_page(index, ref, prevblk, blkno, &next))
		{
			vp->stats->pages_newly_deleted++;
			if (insertPage == blkno)
				insertPage = prevblk;
		}
		else
		{
			if (!BlockNumberIsValid(firstFree) && roomy)
				firstFree = blkno;
			prevblk = blkno;
		}
		blkno = next;
	}

	if (BlockNumberIsValid(firstFree) && firstFree != insertPage)
		gi_list_set_insert_page(index, ref, firstFree);
}

/*
 * The TID directory's chain, read only: the dead rows' keys go to the log
 * and the store, their entries' positions are marked.  The chain's order
 * and the marked entries' offsets stay as they are until the directory's
 * own vacuum_list (only appends happen meanwhile, at the pages' ends).
 */
static void
scan_directory(IndexVacuumInfo *info, GiListRef ref, VacPass *vp)
{
	BlockNumber blkno;

	gi_list_read(info->index, ref, &blkno, NULL);
	while (BlockNumberIsValid(blkno))
	{
		Buffer		buf = read_page(info, blkno, BUFFER_LOCK_SHARE, vp);
		Page		page = BufferGetPage(buf);

		for (OffsetNumber off = FirstOffsetNumber; off <= PageGetMaxOffsetNumber(page); off++)
			(void) judge_item(vp, PageGetItem(page, PageGetItemId(page, off)),
							  blkno, off);
		blkno = GiPageGetOpaque(page)->nextblkno;
		UnlockReleaseBuffer(buf);
	}
	if (vp->ds.n > 0)
		send_keys(vp);
}

/* whether this VACUUM removes dead items from the pages and empties the log */
static bool
log_full(const GiDeadLogSpec *spec, const GiDeadLogHeadData *head)
{
	if (spec->limit_percent == 0)
		return true;
	return head->entries > 0 &&
		(double) head->entries * 100.0 >= (double) head->items * spec->limit_percent;
}

/*
 * ambulkdelete with a dead-row log: the directory tells the dead rows,
 * which go to the log and the store, then leave the directory; when the
 * log was full, the lists' pages lose the items it kills and it is
 * emptied.
 */
static void
bulkdelete_logged(IndexVacuumInfo *info, const GiListDir *dir, Size itemsz,
				  VacPass *vp)
{
	GiDeadLogHeadData head;
	bool		compact;

	vp->generation = gi_deadlog_bump(info->index, vp->spec->head, &head);
	compact = log_full(vp->spec, &head);
	vp->judge = JUDGE_CALLBACK;
	scan_directory(info, vp->spec->tids, vp);
	vp->judge = JUDGE_MARKS;
	vacuum_list(info, vp->spec->tids, MAXALIGN(sizeof(ItemPointerData)), vp);
	if (vp->nextmark != vp->nmarks)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("TID directory of index \"%s\" lost entries under VACUUM",
						RelationGetRelationName(info->index)),
				 errhint("REINDEX the index.")));

	if (compact)
	{
		vp->judge = JUDGE_LOG;
		vp->log = gi_deadlog_read(info->index, vp->spec->head);
		for (uint32 list = 0; list < dir->nlists; list++)
			vacuum_list(info, dir->locate(dir->arg, list), MAXALIGN(itemsz), vp);
	}
	gi_deletes_finish(&vp->ds);
	if (compact)
		gi_deadlog_clear(info->index, vp->spec, vp->live);
	else
		gi_deadlog_account(info->index, vp->spec->head, vp->logged, vp->live);
}

/*
 * ambulkdelete of an AM whose rows live in the chains of dir's lists.
 * itemsz: the size of an item (a page with that much free space can take
 * an append).  Without a dead-row log (deadlog NULL), a row with items in
 * several lists has its key sent once per list that held it; with one, a
 * row's key is sent once, from its TID directory entry.
 */
IndexBulkDeleteResult *
gi_lists_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					IndexBulkDeleteCallback callback, void *callback_state,
					const GiListDir *dir, Size itemsz,
					const GiDeadLogSpec *deadlog)
{
	VacPass		vp;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	memset(&vp, 0, sizeof(vp));
	vp.index = info->index;
	vp.stats = stats;
	vp.callback = callback;
	vp.callback_state = callback_state;
	vp.spec = deadlog;
	vp.judge = JUDGE_CALLBACK;
	gi_deletes_init(&vp.ds, info->index);
	PG_TRY();
	{
		if (deadlog)
			bulkdelete_logged(info, dir, itemsz, &vp);
		else
		{
			for (uint32 list = 0; list < dir->nlists; list++)
				vacuum_list(info, dir->locate(dir->arg, list), MAXALIGN(itemsz), &vp);
			gi_deletes_finish(&vp.ds);
		}
	}
	PG_CATCH();
	{
		/*
		 * The keys of rows already gone from the pages or logged still go
		 * (a logged row is skipped by later passes, so the store would
		 * keep it); so do the others gathered: the rows are dead.
		 */
		gi_deletes_abort(&vp.ds);
		PG_RE_THROW();
	}
	PG_END_TRY();

	gi_deadlog_free((GiDeadLog *) vp.log);
	if (vp.marks)
		pfree(vp.marks);
	return stats;
}

/*
 * amvacuumcleanup: pages deleted by earlier VACUUMs (this one's are not
 * recyclable yet: our own snapshot is older) go to the free space map.
 * Deleted pages are in no chain, so this looks at every page but the
 * metapage, unless the metapage says that none waits.  A scan that leaves
 * none waiting says so on the metapage.
 */
IndexBulkDeleteResult *
gi_lists_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	Relation	index = info->index;
	BlockNumber nblocks;
	BlockNumber waiting = 0;

	if (info->analyze_only)
		return stats;

	/* no ambulkdelete this time: nothing changed, keep the old figures */
	if (stats == NULL)
		return NULL;

	/*
	 * Under the extension lock: an extender locks its new page before it
	 * lets go of that lock (gi_new_buffer), so no page below nblocks is new
	 * and unlocked unless a crash left it so, and a page that is new here
	 * is free for good.
	 */
	LockRelationForExtension(index, ExclusiveLock);
	nblocks = RelationGetNumberOfBlocks(index);
	UnlockRelationForExtension(index, ExclusiveLock);
	stats->num_pages = nblocks;
	stats->estimated_count = false;
	if (meta_settled(index))
		return stats;
	for (BlockNumber blkno = GI_METAPAGE_BLKNO + 1; blkno < nblocks; blkno++)
	{
		Buffer		buf;
		Page		page;

		vacuum_delay_point();
		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
								 info->strategy);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (gi_page_recyclable(page))
		{
			RecordFreeIndexPage(index, blkno);
			stats->pages_free++;
		}
		else if (GiPageGetOpaque(page)->flags & GI_PAGE_DELETED)
			waiting++;
		if (!PageIsNew(page) &&
			(GiPageGetOpaque(page)->flags & GI_PAGE_DELETED))
			stats->pages_deleted++;
		UnlockReleaseBuffer(buf);
	}
	IndexFreeSpaceMapVacuum(index);
	if (waiting == 0)
		meta_set_settled(index, true);
	return stats;
}
