/*
 * gpuivf_vacuum.c
 *		VACUUM: remove dead rows from the list pages and from the device
 *		store.
 *
 * Each page is cleaned under an exclusive lock (GenericXLog,
 * PageIndexMultiDelete); the dead keys are then sent to the service
 * (GI_REQ_DELETE, O(1) per row through the store's address translation
 * table) in batches, always after the pages changed and before
 * ambulkdelete returns, i.e. before the heap can reuse the TIDs.  A list's
 * insert page moves back to its first page with room, so space freed by
 * VACUUM is reused by later inserts of that list; a page its list left
 * empty from one VACUUM to the next is unlinked from its chain and, once no
 * transaction can still reach it, given to the free space map (gpuivf.h),
 * so that space freed in one list serves the others and a sliding window
 * does not grow the index.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/transam.h"
#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "gi_shmem.h"
#include "gpuivf.h"

#define GPUIVF_DELETE_BATCH 65536

static void
send_deletes(Relation index, uint64 *keys, uint32 *nkeys)
{
	GiCall		call;

	if (*nkeys == 0)
		return;
	if (gi_shared != NULL)
	{
		memset(&call, 0, sizeof(call));
		call.type = GI_REQ_DELETE;
		call.key = gpuivf_store_key(index);
		call.args.relfilenode = index->rd_node.relNode;
		call.args.n = *nkeys;
		call.in = keys;
		call.in_size = (Size) *nkeys * sizeof(uint64);
		gi_call(&call);
	}
	*nkeys = 0;
}

/*
 * Unlink the empty data page blkno from its list's chain, where prevblk
 * links to it, in one WAL record with the list's insert page hint moved off
 * it: after this, nothing on disk points to the page, and only a
 * transaction that read a pointer before can reach it (gpuivf.h).  False
 * when an append used the page since the caller saw it empty.  *next gets
 * the page's successor either way.  Lock order: list-info page, then the
 * chain's pages in chain order.
 */
static bool
unlink_empty_page(Relation index, BlockNumber listblk, OffsetNumber listoff,
				  BlockNumber prevblk, BlockNumber blkno, BlockNumber *next)
{
	Buffer		lbuf = ReadBuffer(index, listblk);
	Buffer		pbuf;
	Buffer		buf;
	Page		page;
	Page		ppage;
	GpuivfListInfo linfo;
	bool		done = false;

	LockBuffer(lbuf, BUFFER_LOCK_EXCLUSIVE);
	pbuf = ReadBuffer(index, prevblk);
	LockBuffer(pbuf, BUFFER_LOCK_EXCLUSIVE);
	buf = ReadBuffer(index, blkno);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	ppage = BufferGetPage(pbuf);

	if (GpuivfPageGetOpaque(ppage)->nextblkno == blkno &&
		PageGetMaxOffsetNumber(page) == 0 &&
		!(GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_DELETED))
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		lpage = GenericXLogRegisterBuffer(state, lbuf, 0);

		ppage = GenericXLogRegisterBuffer(state, pbuf, 0);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		linfo = (GpuivfListInfo) PageGetItem(lpage, PageGetItemId(lpage, listoff));
		if (linfo->insertPage == blkno)
			linfo->insertPage = prevblk;
		GpuivfPageGetOpaque(ppage)->nextblkno = GpuivfPageGetOpaque(page)->nextblkno;
		GpuivfPageGetOpaque(page)->flags |= GPUIVF_PAGE_DELETED;
		((PageHeader) page)->pd_prune_xid = ReadNextTransactionId();
		GenericXLogFinish(state);
		done = true;
	}
	*next = GpuivfPageGetOpaque(BufferGetPage(buf))->nextblkno;
	UnlockReleaseBuffer(buf);
	UnlockReleaseBuffer(pbuf);
	UnlockReleaseBuffer(lbuf);
	return done;
}

IndexBulkDeleteResult *
gpuivf_bulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				  IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	GpuivfMeta	meta = *gpuivf_get_meta(index);
	uint64	   *keys;
	uint32		nkeys = 0;
	Size		itemsz;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	if (meta.lists == 0)
		return stats;
	meta.centroids = meta.cnorms = NULL;
	itemsz = MAXALIGN(GPUIVF_ITEM_SIZE(meta.dim));
	keys = palloc(sizeof(uint64) * GPUIVF_DELETE_BATCH);

	for (uint32 list = 0; list < meta.lists; list++)
	{
		BlockNumber listblk;
		OffsetNumber listoff;
		BlockNumber blkno;
		BlockNumber start;
		BlockNumber prevblk = InvalidBlockNumber;
		BlockNumber insertPage;
		BlockNumber firstFree = InvalidBlockNumber;

		gpuivf_listinfo_location(&meta, list, &listblk, &listoff);
		gpuivf_read_list(index, listblk, listoff, &blkno, &insertPage);
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

			vacuum_delay_point();
			buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
									 info->strategy);
			LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
			page = BufferGetPage(buf);
			maxoff = PageGetMaxOffsetNumber(page);

			/* a full batch must not overflow in the middle of a page */
			if (nkeys + maxoff > GPUIVF_DELETE_BATCH)
			{
				LockBuffer(buf, BUFFER_LOCK_UNLOCK);
				send_deletes(index, keys, &nkeys);
				LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
				page = BufferGetPage(buf);
				maxoff = PageGetMaxOffsetNumber(page);
			}

			for (OffsetNumber off = FirstOffsetNumber; off <= maxoff; off++)
			{
				GpuivfTuple tup = (GpuivfTuple) PageGetItem(page, PageGetItemId(page, off));

				if (callback(&tup->heaptid, callback_state))
				{
					deletable[ndeletable++] = off;
					keys[nkeys++] = gi_tid_to_key(ItemPointerGetBlockNumber(&tup->heaptid),
												  ItemPointerGetOffsetNumber(&tup->heaptid));
				}
				else
					stats->num_index_tuples += 1;
			}

			if (ndeletable > 0)
			{
				GenericXLogState *state = GenericXLogStart(index);

				page = GenericXLogRegisterBuffer(state, buf, 0);
				PageIndexMultiDelete(page, deletable, ndeletable);
				GenericXLogFinish(state);
				page = BufferGetPage(buf);	/* the copy above is gone */
				stats->tuples_removed += ndeletable;
			}

			roomy = PageGetFreeSpace(page) >= itemsz;
			empty = blkno != start && PageGetMaxOffsetNumber(page) == 0;
			idle = (GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_IDLE) != 0;
			if (empty && !idle)
			{
				/* unlinked at the next VACUUM unless its list refills it */
				GenericXLogState *state = GenericXLogStart(index);

				page = GenericXLogRegisterBuffer(state, buf, 0);
				GpuivfPageGetOpaque(page)->flags |= GPUIVF_PAGE_IDLE;
				GenericXLogFinish(state);
				page = BufferGetPage(buf);
			}
			next = GpuivfPageGetOpaque(page)->nextblkno;
			UnlockReleaseBuffer(buf);

			/*
			 * Rows are deleted from the pages before their keys reach the
			 * store (send_deletes); unlinking an empty page changes no row,
			 * so it need not wait for that.
			 */
			if (empty && idle && BlockNumberIsValid(prevblk) &&
				unlink_empty_page(index, listblk, listoff, prevblk, blkno, &next))
			{
				stats->pages_newly_deleted++;
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

		/* pages first, then the store: see the file header */
		send_deletes(index, keys, &nkeys);

		if (BlockNumberIsValid(firstFree) && firstFree != insertPage)
			gpuivf_set_insert_page(index, listblk, listoff, firstFree);
	}

	pfree(keys);
	return stats;
}

IndexBulkDeleteResult *
gpuivf_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	Relation	index = info->index;
	BlockNumber nblocks;

	if (info->analyze_only)
		return stats;

	/* no ambulkdelete this time: nothing changed, keep the old figures */
	if (stats == NULL)
		return NULL;

	/*
	 * Pages deleted by earlier VACUUMs (this one's are not recyclable yet:
	 * our own snapshot is older) go to the free space map.  Deleted pages
	 * are in no chain, so this looks at every page.
	 */
	/*
	 * Under the extension lock: an extender locks its new page before it
	 * lets go of that lock (gpuivf_new_buffer), so no page below nblocks is
	 * new and unlocked unless a crash left it so, and a page that is new
	 * here is free for good.
	 */
	LockRelationForExtension(index, ExclusiveLock);
	nblocks = RelationGetNumberOfBlocks(index);
	UnlockRelationForExtension(index, ExclusiveLock);
	for (BlockNumber blkno = GPUIVF_METAPAGE_BLKNO + 1; blkno < nblocks; blkno++)
	{
		Buffer		buf;
		Page		page;

		vacuum_delay_point();
		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
								 info->strategy);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (!PageIsNew(page) &&
			(GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_DELETED))
			stats->pages_deleted++;
		if (gpuivf_page_recyclable(page))
		{
			RecordFreeIndexPage(index, blkno);
			stats->pages_free++;
		}
		UnlockReleaseBuffer(buf);
	}
	IndexFreeSpaceMapVacuum(index);

	stats->num_pages = nblocks;
	stats->estimated_count = false;
	return stats;
}
