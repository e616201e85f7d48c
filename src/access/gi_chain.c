/*
 * gi_chain.c
 *		A list's chain of data pages: reading and moving its head, appending
 *		an item, walking it.
 *
 * Lock order, to stay clear of deadlocks: the page holding a list's head
 * may be locked before a data page (giving a list its first page, VACUUM
 * unlinking one), never after one.  Appends release the data page before
 * they update the head's insert page.  Several data pages are locked only
 * in chain order (a page, then the one it links to); a page from the free
 * space map is in no chain.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/itup.h"
#include "storage/bufmgr.h"

#include "gi_access.h"

static GiListHeadData *
head_item(Page page, GiListRef ref)
{
	return (GiListHeadData *) PageGetItem(page, PageGetItemId(page, ref.offnum));
}

/*
 * Whether a chain page can take an item of itemsz bytes.  A page holds at
 * most MaxIndexTuplesPerPage items, however small, so that VACUUM can
 * remove them with PageIndexMultiDelete.
 */
bool
gi_page_has_room(Page page, Size itemsz)
{
	return PageGetFreeSpace(page) >= MAXALIGN(itemsz) &&
		PageGetMaxOffsetNumber(page) < MaxIndexTuplesPerPage;
}

void
gi_list_read(Relation index, GiListRef ref, BlockNumber *start,
			 BlockNumber *insert)
{
	Buffer		buf = ReadBuffer(index, ref.blkno);
	GiListHeadData *head;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	head = head_item(BufferGetPage(buf), ref);
	*start = head->start;
	if (insert)
		*insert = head->insert;
	UnlockReleaseBuffer(buf);
}

/* the insert page is a hint: any page of the chain will do */
void
gi_list_set_insert_page(Relation index, GiListRef ref, BlockNumber insert)
{
	Buffer		buf = ReadBuffer(index, ref.blkno);

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (head_item(BufferGetPage(buf), ref)->insert != insert)
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		page = gi_xlog_register(state, buf);

		head_item(page, ref)->insert = insert;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
}

static void
add_item(Relation index, Page page, const void *item, Size itemsz)
{
	if (PageAddItem(page, (Item) item, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add item to a list page of index \"%s\"",
			 RelationGetRelationName(index));
}

/* the list has no page yet: give it one holding the item */
static bool
append_first_page(Relation index, uint16 page_id, GiListRef ref,
				  const void *item, Size itemsz)
{
	Buffer		buf = ReadBuffer(index, ref.blkno);
	Buffer		newbuf;
	GenericXLogState *state;
	Page		page;
	Page		newpage;
	GiListHeadData *head;
	BlockNumber newblk;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (BlockNumberIsValid(head_item(BufferGetPage(buf), ref)->start))
	{
		UnlockReleaseBuffer(buf);
		return false;
	}

	newbuf = gi_new_buffer(index, MAIN_FORKNUM, false);
	newblk = BufferGetBlockNumber(newbuf);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
	gi_init_page(newpage, GI_PAGE_DATA, page_id);
	add_item(index, newpage, item, itemsz);
	head = head_item(page, ref);
	head->start = newblk;
	head->insert = newblk;
	GenericXLogFinish(state);

	UnlockReleaseBuffer(newbuf);
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Append an item (a heap TID, then the AM's bytes) to the list whose head
 * ref finds: on the first page from the list's insert page on that has
 * room, or on a new page (page_id: the AM's) linked at the end of the
 * chain.
 */
void
gi_list_append(Relation index, uint16 page_id, GiListRef ref, const void *item,
			   Size itemsz)
{
	BlockNumber start;
	BlockNumber blkno;

	gi_list_read(index, ref, &start, &blkno);
	if (!BlockNumberIsValid(start))
	{
		if (append_first_page(index, page_id, ref, item, itemsz))
			return;
		gi_list_read(index, ref, &start, &blkno);
	}
	if (!BlockNumberIsValid(blkno))
		blkno = start;

	for (;;)
	{
		Buffer		buf = ReadBuffer(index, blkno);
		Page		page;
		BlockNumber next;
		Buffer		newbuf;
		BlockNumber newblk;
		Page		newpage;
		GenericXLogState *state;

		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(buf);

		/*
		 * VACUUM unlinked it after we read the pointer to it (it cannot have
		 * been reused meanwhile: our transaction holds the horizon back).
		 * The list's first page is never unlinked: walk from there.
		 */
		if (GiPageGetOpaque(page)->flags & GI_PAGE_DELETED)
		{
			UnlockReleaseBuffer(buf);
			blkno = start;
			continue;
		}

		if (gi_page_has_room(page, itemsz))
		{
			state = GenericXLogStart(index);
			page = gi_xlog_register(state, buf);
			add_item(index, page, item, itemsz);
			/* its list needs it again: VACUUM keeps it in the chain */
			GiPageGetOpaque(page)->flags &= ~GI_PAGE_IDLE;
			GenericXLogFinish(state);
			UnlockReleaseBuffer(buf);
			return;
		}

		next = GiPageGetOpaque(page)->nextblkno;
		if (BlockNumberIsValid(next))
		{
			UnlockReleaseBuffer(buf);
			blkno = next;
			continue;
		}

		/* end of the chain and full: link a new page */
		newbuf = gi_new_buffer(index, MAIN_FORKNUM, false);
		newblk = BufferGetBlockNumber(newbuf);
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
		gi_init_page(newpage, GI_PAGE_DATA, page_id);
		add_item(index, newpage, item, itemsz);
		GiPageGetOpaque(page)->nextblkno = newblk;
		GenericXLogFinish(state);
		UnlockReleaseBuffer(newbuf);
		UnlockReleaseBuffer(buf);

		gi_list_set_insert_page(index, ref, newblk);
		return;
	}
}

/*
 * Call fn for every item of the list's chain, page by page: each page is
 * copied under a share lock and the lock dropped before fn sees it, so fn
 * may send requests or write a tuplestore.  A page VACUUM unlinked after
 * we read the pointer to it has no items and keeps its link: the walk goes
 * on.  False when fn stopped the walk.
 */
bool
gi_list_walk(Relation index, GiListRef ref, BufferAccessStrategy bas,
			 GiItemFn fn, void *arg)
{
	char	   *pagecopy = palloc(BLCKSZ);
	BlockNumber blkno;
	bool		more = true;

	gi_list_read(index, ref, &blkno, NULL);
	while (more && BlockNumberIsValid(blkno))
	{
		Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno,
											 RBM_NORMAL, bas);
		OffsetNumber maxoff;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		memcpy(pagecopy, BufferGetPage(buf), BLCKSZ);
		UnlockReleaseBuffer(buf);

		maxoff = PageGetMaxOffsetNumber(pagecopy);
		for (OffsetNumber off = FirstOffsetNumber; more && off <= maxoff; off++)
		{
			ItemId		iid = PageGetItemId(pagecopy, off);
			char	   *item = PageGetItem(pagecopy, iid);

			more = fn(arg, (ItemPointer) item, item, ItemIdGetLength(iid));
		}
		blkno = GiPageGetOpaque(pagecopy)->nextblkno;
		CHECK_FOR_INTERRUPTS();
	}
	pfree(pagecopy);
	return more;
}
