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
 * VACUUM is reused by later inserts and a sliding window does not grow the
 * index; pages are never unlinked from their chain.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "commands/vacuum.h"
#include "storage/bufmgr.h"
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
		BlockNumber insertPage;
		BlockNumber firstFree = InvalidBlockNumber;

		gpuivf_listinfo_location(&meta, list, &listblk, &listoff);
		gpuivf_read_list(index, listblk, listoff, &blkno, &insertPage);

		while (BlockNumberIsValid(blkno))
		{
			Buffer		buf;
			Page		page;
			OffsetNumber maxoff;
			OffsetNumber deletable[MaxOffsetNumber];
			int			ndeletable = 0;

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

			if (!BlockNumberIsValid(firstFree) && PageGetFreeSpace(page) >= itemsz)
				firstFree = blkno;

			blkno = GpuivfPageGetOpaque(page)->nextblkno;
			UnlockReleaseBuffer(buf);
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
	if (info->analyze_only)
		return stats;

	/* no ambulkdelete this time: nothing changed, keep the old figures */
	if (stats == NULL)
		return NULL;

	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	stats->estimated_count = false;
	return stats;
}
