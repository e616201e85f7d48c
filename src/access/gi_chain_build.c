/*
 * gi_chain_build.c
 *		Writing the chains of a new index in one pass: items come list by
 *		list (all of a list's items together), each list's chain is written
 *		page after page, and the heads are set at the end.
 *
 * Pages go through shared buffers without WAL, like other index builds:
 * the caller logs the whole relation afterwards (log_newpage_range).
 */
#include "postgres.h"

#include "storage/bufmgr.h"

#include "gi_access.h"

void
gi_chain_build_begin(GiChainBuild *cb, Relation index, uint16 page_id,
					 uint32 nlists)
{
	cb->index = index;
	cb->page_id = page_id;
	cb->nlists = nlists;
	cb->list = -1;
	cb->buf = InvalidBuffer;
	cb->start = palloc(sizeof(BlockNumber) * Max(nlists, 1));
	cb->last = palloc(sizeof(BlockNumber) * Max(nlists, 1));
	for (uint32 l = 0; l < nlists; l++)
		cb->start[l] = cb->last[l] = InvalidBlockNumber;
}

static void
release_page(GiChainBuild *cb)
{
	if (BufferIsValid(cb->buf))
	{
		MarkBufferDirty(cb->buf);
		UnlockReleaseBuffer(cb->buf);
		cb->buf = InvalidBuffer;
	}
}

/* append an item to the list's chain; the list's items must come together */
void
gi_chain_build_add(GiChainBuild *cb, uint32 list, const void *item, Size itemsz)
{
	Assert(list < cb->nlists);
	if ((int64) list != cb->list)
	{
		Assert(!BlockNumberIsValid(cb->start[list]));
		release_page(cb);
		cb->list = list;
	}

	if (!BufferIsValid(cb->buf) ||
		!gi_page_has_room(BufferGetPage(cb->buf), itemsz))
	{
		Buffer		newbuf = gi_new_buffer(cb->index, MAIN_FORKNUM, true);
		BlockNumber newblk = BufferGetBlockNumber(newbuf);

		gi_init_page(BufferGetPage(newbuf), GI_PAGE_DATA, cb->page_id);
		if (BufferIsValid(cb->buf))
		{
			GiPageGetOpaque(BufferGetPage(cb->buf))->nextblkno = newblk;
			release_page(cb);
		}
		else
			cb->start[list] = newblk;
		cb->last[list] = newblk;
		cb->buf = newbuf;
	}
	if (PageAddItem(BufferGetPage(cb->buf), (Item) item, itemsz, InvalidOffsetNumber,
					false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add item to a list page of index \"%s\"",
			 RelationGetRelationName(cb->index));
}

/*
 * The last page written, then every list's head: its chain's first page,
 * and its last page as the insert page.  Heads on one page are set under
 * one lock.
 */
void
gi_chain_build_end(GiChainBuild *cb, const GiListDir *dir)
{
	Buffer		buf = InvalidBuffer;

	release_page(cb);
	Assert(dir->nlists == cb->nlists);
	for (uint32 l = 0; l < cb->nlists; l++)
	{
		GiListRef	ref = dir->locate(dir->arg, l);
		GiListHeadData *head;
		Page		page;

		if (!BufferIsValid(buf) || BufferGetBlockNumber(buf) != ref.blkno)
		{
			if (BufferIsValid(buf))
			{
				MarkBufferDirty(buf);
				UnlockReleaseBuffer(buf);
			}
			buf = ReadBuffer(cb->index, ref.blkno);
			LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		}
		page = BufferGetPage(buf);
		head = (GiListHeadData *) PageGetItem(page, PageGetItemId(page, ref.offnum));
		head->start = cb->start[l];
		head->insert = cb->last[l];
	}
	if (BufferIsValid(buf))
	{
		MarkBufferDirty(buf);
		UnlockReleaseBuffer(buf);
	}
	pfree(cb->start);
	pfree(cb->last);
	cb->start = cb->last = NULL;
}
