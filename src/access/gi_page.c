/*
 * gi_page.c
 *		Pages of a gpuindex index: initialising one, whether a deleted page
 *		may be reused, where a new page comes from (the free space map
 *		first, then the end of the relation), and registering a changed page
 *		with a generic WAL record.
 */
#include "postgres.h"

#include "access/xloginsert.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/snapmgr.h"

#include "gi_access.h"

/*
 * Register an existing page in a generic WAL record.  When the record will
 * carry the page's full image anyway (its first change since the last
 * checkpoint), say so, and GenericXLog skips computing a delta that would
 * be thrown away.
 */
Page
gi_xlog_register(GenericXLogState *state, Buffer buf)
{
	return GenericXLogRegisterBuffer(state, buf,
									 XLogCheckBufferNeedsBackup(buf) ?
									 GENERIC_XLOG_FULL_IMAGE : 0);
}

void
gi_init_page(Page page, uint16 flags, uint16 page_id)
{
	GiPageOpaque opaque;

	PageInit(page, BLCKSZ, sizeof(GiPageOpaqueData));
	opaque = GiPageGetOpaque(page);
	opaque->nextblkno = InvalidBlockNumber;
	opaque->flags = flags;
	opaque->page_id = page_id;
}

/*
 * Whether a page can be taken for a new use: deleted so long ago that no
 * running transaction can still hold a pointer to it, or never
 * initialised.
 */
bool
gi_page_recyclable(Page page)
{
	if (PageIsNew(page))
		return true;
	return (GiPageGetOpaque(page)->flags & GI_PAGE_DELETED) != 0 &&
		GlobalVisCheckRemovableXid(NULL, ((PageHeader) page)->pd_prune_xid);
}

/*
 * A new page, exclusively locked, not yet initialised: outside a build a
 * recyclable page from the free space map when there is one, else a page
 * at the end of the relation (other backends may extend concurrently).
 */
Buffer
gi_new_buffer(Relation index, ForkNumber forknum, bool building)
{
	Buffer		buf;

	while (!building && forknum == MAIN_FORKNUM)
	{
		BlockNumber blkno = GetFreeIndexPage(index);

		if (!BlockNumberIsValid(blkno))
			break;
		buf = ReadBuffer(index, blkno);
		/* a page someone else just took is busy: try the next one */
		if (ConditionalLockBuffer(buf))
		{
			if (gi_page_recyclable(BufferGetPage(buf)))
				return buf;
			LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		}
		ReleaseBuffer(buf);
	}

	if (!building)
		LockRelationForExtension(index, ExclusiveLock);
	buf = ReadBufferExtended(index, forknum, P_NEW, RBM_NORMAL, NULL);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (!building)
		UnlockRelationForExtension(index, ExclusiveLock);
	return buf;
}
