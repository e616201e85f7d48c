/*
 * gpuivf_pages.c
 *		Page layout: metapage, list-info pages, list chains; appending a row
 *		to a list; the cached metapage and centroids.
 *
 * Lock order, to stay clear of deadlocks: a list-info page may be locked
 * before a data page (creating a list's first page), never after one; the
 * metapage before a new list-info page (the first insert into an empty
 * index).  Appends release the data page before they update the list's
 * insert page.  Several data pages are locked only in chain order (a
 * page, then the one it links to: linking a new page, VACUUM unlinking an
 * empty one); a page from the free space map is in no chain.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/snapmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

StaticAssertDecl(offsetof(GpuivfListInfoData, centroid) == offsetof(GpuivfTupleData, vec),
				 "list-info items and tuples share their header size");

void
gpuivf_init_page(Page page, uint16 flags)
{
	GpuivfPageOpaque opaque;

	PageInit(page, BLCKSZ, sizeof(GpuivfPageOpaqueData));
	opaque = GpuivfPageGetOpaque(page);
	opaque->nextblkno = InvalidBlockNumber;
	opaque->flags = flags;
	opaque->page_id = GPUIVF_PAGE_ID;
}

/*
 * Whether a page can be taken for a new use: deleted so long ago that no
 * running transaction can still hold a pointer to it (gpuivf.h), or never
 * initialised.
 */
bool
gpuivf_page_recyclable(Page page)
{
	if (PageIsNew(page))
		return true;
	return (GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_DELETED) != 0 &&
		GlobalVisCheckRemovableXid(NULL, ((PageHeader) page)->pd_prune_xid);
}

/*
 * A new page, exclusively locked, not yet initialised: outside a build a
 * recyclable page from the free space map when there is one, else a page
 * at the end of the relation (other backends may extend concurrently).
 */
Buffer
gpuivf_new_buffer(Relation index, ForkNumber forknum, bool building)
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
			if (gpuivf_page_recyclable(BufferGetPage(buf)))
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

uint32
gpuivf_lists_per_page(uint32 dim)
{
	Size		avail = BLCKSZ - MAXALIGN(SizeOfPageHeaderData) -
		MAXALIGN(sizeof(GpuivfPageOpaqueData));

	return (uint32) (avail / (MAXALIGN(GPUIVF_ITEM_SIZE(dim)) + sizeof(ItemIdData)));
}

void
gpuivf_init_metapage(Page page, uint32 dim, uint32 lists, uint32 requested_lists,
					 uint32 metric, BlockNumber listinfo_start)
{
	GpuivfMetaPage metap;

	gpuivf_init_page(page, GPUIVF_PAGE_META);
	metap = GpuivfPageGetMeta(page);
	memset(metap, 0, sizeof(*metap));
	metap->magic = GPUIVF_MAGIC;
	metap->version = GPUIVF_VERSION;
	metap->dim = dim;
	metap->lists = lists;
	metap->requested_lists = requested_lists;
	metap->metric = metric;
	metap->lists_per_page = dim > 0 ? gpuivf_lists_per_page(dim) : 0;
	metap->listinfo_start = listinfo_start;

	/* pd_lower past the struct, so that full-page images skip the hole */
	((PageHeader) page)->pd_lower =
		((char *) metap + sizeof(GpuivfMetaPageData)) - (char *) page;
}

static void
check_metapage(Relation index, GpuivfMetaPage metap)
{
	if (metap->magic != GPUIVF_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a gpuivf index",
						RelationGetRelationName(index))));
	if (metap->version != GPUIVF_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("gpuivf index \"%s\" has version %u, expected %u",
						RelationGetRelationName(index), metap->version,
						GPUIVF_VERSION),
				 errhint("REINDEX the index.")));
}

/*
 * The index's metadata and centroids.  Cached once the index has lists;
 * an index with nothing indexed yet gets a fresh palloc'd copy each time,
 * since its first insert changes it.
 */
GpuivfMeta *
gpuivf_get_meta(Relation index)
{
	GpuivfMeta *cached = (GpuivfMeta *) index->rd_amcache;
	GpuivfMeta	m;
	GpuivfMeta *res;
	Buffer		buf;
	GpuivfMetaPage metap;
	Size		csize;
	uint32		list;
	BlockNumber blkno;

	if (cached && cached->relfilenode == index->rd_node.relNode)
		return cached;

	buf = ReadBuffer(index, GPUIVF_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	metap = GpuivfPageGetMeta(BufferGetPage(buf));
	check_metapage(index, metap);
	memset(&m, 0, sizeof(m));
	m.relfilenode = index->rd_node.relNode;
	m.dim = metap->dim;
	m.lists = metap->lists;
	m.metric = metap->metric;
	m.lists_per_page = metap->lists_per_page;
	m.listinfo_start = metap->listinfo_start;
	UnlockReleaseBuffer(buf);

	if (m.lists == 0)
	{
		res = palloc(sizeof(GpuivfMeta));
		*res = m;
		return res;
	}

	if (m.dim == 0 || m.dim > GPUIVF_MAX_DIM || m.lists_per_page == 0 ||
		m.lists > GPUIVF_MAX_LISTS)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("gpuivf index \"%s\" has a corrupt metapage",
						RelationGetRelationName(index))));

	csize = (Size) m.lists * m.dim * sizeof(float4);
	res = MemoryContextAllocHuge(index->rd_indexcxt,
								 MAXALIGN(sizeof(GpuivfMeta)) + csize +
								 (Size) m.lists * sizeof(float4));
	*res = m;
	res->centroids = (float4 *) ((char *) res + MAXALIGN(sizeof(GpuivfMeta)));
	res->cnorms = res->centroids + (Size) m.lists * m.dim;

	for (list = 0, blkno = m.listinfo_start; list < m.lists; blkno++)
	{
		Page		page;
		uint32		nitems = Min(m.lists_per_page, m.lists - list);

		buf = ReadBuffer(index, blkno);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (PageGetMaxOffsetNumber(page) < nitems ||
			!(GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_LISTINFO))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("gpuivf index \"%s\" has a corrupt list-info page %u",
							RelationGetRelationName(index), blkno)));
		for (OffsetNumber off = FirstOffsetNumber; off <= nitems; off++)
		{
			GpuivfListInfo info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, off));

			memcpy(res->centroids + (Size) list * m.dim, info->centroid,
				   m.dim * sizeof(float4));
			list++;
		}
		UnlockReleaseBuffer(buf);
	}
	gpuivf_centroid_norms(res->centroids, m.lists, m.dim, res->cnorms);

	if (index->rd_amcache)
		pfree(index->rd_amcache);
	index->rd_amcache = res;
	return res;
}

void
gpuivf_listinfo_location(const GpuivfMeta *meta, uint32 list,
						 BlockNumber *blkno, OffsetNumber *offnum)
{
	Assert(list < meta->lists);
	*blkno = meta->listinfo_start + list / meta->lists_per_page;
	*offnum = FirstOffsetNumber + list % meta->lists_per_page;
}

void
gpuivf_read_list(Relation index, BlockNumber listblk, OffsetNumber listoff,
				 BlockNumber *start, BlockNumber *insert)
{
	Buffer		buf = ReadBuffer(index, listblk);
	Page		page;
	GpuivfListInfo info;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, listoff));
	*start = info->startPage;
	if (insert)
		*insert = info->insertPage;
	UnlockReleaseBuffer(buf);
}

/* insertPage is a hint: any page of the chain will do */
void
gpuivf_set_insert_page(Relation index, BlockNumber listblk, OffsetNumber listoff,
					   BlockNumber insertPage)
{
	Buffer		buf = ReadBuffer(index, listblk);
	GenericXLogState *state;
	Page		page;
	GpuivfListInfo info;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, listoff));
	if (info->insertPage != insertPage)
	{
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, listoff));
		info->insertPage = insertPage;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
}

/*
 * First insert into an index that has no lists (built on a table with no
 * indexable rows): the row fixes the dimension, and the index gets one list
 * with a zero centroid.  Every row then lands in that list, so searches are
 * exact; REINDEX once the table has data to get real lists.
 */
void
gpuivf_initialize_lists(Relation index, uint32 dim)
{
	Buffer		metabuf;
	Buffer		newbuf;
	GpuivfMetaPage metap;
	GenericXLogState *state;
	Page		mpage;
	Page		lpage;
	GpuivfListInfo info;
	Size		itemsz = GPUIVF_ITEM_SIZE(dim);

	metabuf = ReadBuffer(index, GPUIVF_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	metap = GpuivfPageGetMeta(BufferGetPage(metabuf));
	check_metapage(index, metap);
	if (metap->lists > 0)
	{
		/* someone else got here first */
		UnlockReleaseBuffer(metabuf);
		return;
	}
	if (metap->dim != 0 && metap->dim != dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %u dimensions, not %u", metap->dim, dim)));

	newbuf = gpuivf_new_buffer(index, MAIN_FORKNUM, false);

	state = GenericXLogStart(index);
	mpage = GenericXLogRegisterBuffer(state, metabuf, 0);
	lpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
	gpuivf_init_page(lpage, GPUIVF_PAGE_LISTINFO);
	info = palloc0(itemsz);
	info->startPage = InvalidBlockNumber;
	info->insertPage = InvalidBlockNumber;
	if (PageAddItem(lpage, (Item) info, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add list-info item to gpuivf index \"%s\"",
			 RelationGetRelationName(index));
	metap = GpuivfPageGetMeta(mpage);
	metap->dim = dim;
	metap->lists = 1;
	metap->lists_per_page = gpuivf_lists_per_page(dim);
	metap->listinfo_start = BufferGetBlockNumber(newbuf);
	GenericXLogFinish(state);

	UnlockReleaseBuffer(newbuf);
	UnlockReleaseBuffer(metabuf);
	pfree(info);
}

/* the list has no page yet: give it one holding the tuple */
static bool
append_first_page(Relation index, BlockNumber listblk, OffsetNumber listoff,
				  GpuivfTuple tup, Size itemsz)
{
	Buffer		buf = ReadBuffer(index, listblk);
	Buffer		newbuf;
	GenericXLogState *state;
	Page		page;
	Page		newpage;
	GpuivfListInfo info;
	BlockNumber newblk;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, listoff));
	if (BlockNumberIsValid(info->startPage))
	{
		UnlockReleaseBuffer(buf);
		return false;
	}

	newbuf = gpuivf_new_buffer(index, MAIN_FORKNUM, false);
	newblk = BufferGetBlockNumber(newbuf);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
	gpuivf_init_page(newpage, GPUIVF_PAGE_DATA);
	if (PageAddItem(newpage, (Item) tup, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add tuple to gpuivf index \"%s\"",
			 RelationGetRelationName(index));
	info = (GpuivfListInfo) PageGetItem(page, PageGetItemId(page, listoff));
	info->startPage = newblk;
	info->insertPage = newblk;
	GenericXLogFinish(state);

	UnlockReleaseBuffer(newbuf);
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Append one row to the list whose list-info item is at (listblk,
 * listoff): on the first page from the list's insert page on that has
 * room, or on a new page linked at the end of the chain.
 */
void
gpuivf_append(Relation index, uint32 dim, BlockNumber listblk, OffsetNumber listoff,
			  ItemPointer heaptid, const float4 *vec)
{
	Size		itemsz = GPUIVF_ITEM_SIZE(dim);
	GpuivfTuple tup = palloc0(itemsz);
	BlockNumber start;
	BlockNumber blkno;

	tup->heaptid = *heaptid;
	memcpy(tup->vec, vec, dim * sizeof(float4));

	gpuivf_read_list(index, listblk, listoff, &start, &blkno);
	if (!BlockNumberIsValid(start))
	{
		if (append_first_page(index, listblk, listoff, tup, itemsz))
		{
			pfree(tup);
			return;
		}
		gpuivf_read_list(index, listblk, listoff, &start, &blkno);
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
		if (GpuivfPageGetOpaque(page)->flags & GPUIVF_PAGE_DELETED)
		{
			UnlockReleaseBuffer(buf);
			blkno = start;
			continue;
		}

		if (PageGetFreeSpace(page) >= MAXALIGN(itemsz))
		{
			state = GenericXLogStart(index);
			page = GenericXLogRegisterBuffer(state, buf, 0);
			if (PageAddItem(page, (Item) tup, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
				elog(ERROR, "failed to add tuple to gpuivf index \"%s\"",
					 RelationGetRelationName(index));
			/* its list needs it again: VACUUM keeps it in the chain */
			GpuivfPageGetOpaque(page)->flags &= ~GPUIVF_PAGE_IDLE;
			GenericXLogFinish(state);
			UnlockReleaseBuffer(buf);
			break;
		}

		next = GpuivfPageGetOpaque(page)->nextblkno;
		if (BlockNumberIsValid(next))
		{
			UnlockReleaseBuffer(buf);
			blkno = next;
			continue;
		}

		/* end of the chain and full: link a new page */
		newbuf = gpuivf_new_buffer(index, MAIN_FORKNUM, false);
		newblk = BufferGetBlockNumber(newbuf);
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
		gpuivf_init_page(newpage, GPUIVF_PAGE_DATA);
		if (PageAddItem(newpage, (Item) tup, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
			elog(ERROR, "failed to add tuple to gpuivf index \"%s\"",
				 RelationGetRelationName(index));
		GpuivfPageGetOpaque(page)->nextblkno = newblk;
		GenericXLogFinish(state);
		UnlockReleaseBuffer(newbuf);
		UnlockReleaseBuffer(buf);

		gpuivf_set_insert_page(index, listblk, listoff, newblk);
		break;
	}
	pfree(tup);
}
