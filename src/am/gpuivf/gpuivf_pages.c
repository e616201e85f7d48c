/*
 * gpuivf_pages.c
 *		gpuivf's pages around the shared list chains: the metapage, the
 *		list-info pages (list heads and centroids), the codebook pages of
 *		PQ indexes, the cached metapage, centroids and codebooks, and
 *		appending a row to its list.
 *
 * Lock order (with gi_chain.c's): the metapage before a new list-info
 * page (the first insert into an empty index); a list-info page before a
 * data page, never after one.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpuivf.h"

StaticAssertDecl(offsetof(GpuivfListInfoData, centroid) == offsetof(GpuivfTupleData, vec),
				 "list-info items and tuples share their header size");

uint32
gpuivf_lists_per_page(uint32 dim)
{
	Size		avail = BLCKSZ - MAXALIGN(SizeOfPageHeaderData) -
		MAXALIGN(sizeof(GiPageOpaqueData));

	return (uint32) (avail / (MAXALIGN(GPUIVF_ITEM_SIZE(dim)) + sizeof(ItemIdData)));
}

void
gpuivf_init_metapage(Page page, uint32 dim, uint32 lists, uint32 requested_lists,
					 uint32 metric, BlockNumber listinfo_start,
					 const GpuivfQuantizer *quantizer, BlockNumber codebook_start)
{
	GpuivfMetaPage metap;

	/* a new index has no deleted page */
	gi_init_page(page, GI_PAGE_META | GI_PAGE_SETTLED, GPUIVF_PAGE_ID);
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
	if (quantizer && quantizer->quantizer == GPUIVF_QUANTIZER_PQ)
	{
		metap->quantizer = GPUIVF_QUANTIZER_PQ;
		metap->pq_m = quantizer->pq_m;
		metap->pq_ksub = quantizer->pq_ksub;
		metap->pq_code_bits = quantizer->pq_code_bits;
		metap->codebook_start = codebook_start;
	}

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
 * The codebooks of a PQ index into meta->codebooks: GPUIVF_CODEBOOK_PAGE_FLOATS
 * a page from meta->codebook_start.  An index whose first row came after
 * an empty build has none: all entries are zero.
 */
static void
read_codebooks(Relation index, GpuivfMeta *meta)
{
	Size		total = (Size) meta->pq_ksub * meta->dim;
	BlockNumber blkno = meta->codebook_start;

	if (meta->codebook_start == InvalidBlockNumber)
	{
		memset(meta->codebooks, 0, total * sizeof(float4));
		return;
	}
	for (Size done = 0; done < total; blkno++)
	{
		Size		n = Min(total - done, (Size) GPUIVF_CODEBOOK_PAGE_FLOATS);
		Buffer		buf = ReadBuffer(index, blkno);
		Page		page;
		ItemId		iid;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		iid = PageGetMaxOffsetNumber(page) >= FirstOffsetNumber ?
			PageGetItemId(page, FirstOffsetNumber) : NULL;
		if (!(GiPageGetOpaque(page)->flags & GPUIVF_PAGE_CODEBOOK) || iid == NULL ||
			ItemIdGetLength(iid) != n * sizeof(float4))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("gpuivf index \"%s\" has a corrupt codebook page %u",
							RelationGetRelationName(index), blkno)));
		memcpy(meta->codebooks + done, PageGetItem(page, iid), n * sizeof(float4));
		UnlockReleaseBuffer(buf);
		done += n;
	}
}

/* bytes of a row's record: its vector, or its code padded to words */
uint32
gpuivf_record_bytes(const GpuivfMeta *meta)
{
	if (meta->quantizer == GPUIVF_QUANTIZER_PQ)
		return gi_ivfpq_record_bytes(meta->pq_m, meta->pq_code_bits);
	return meta->dim * sizeof(float4);
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
	Size		bsize;
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
	m.quantizer = metap->quantizer;
	m.pq_m = metap->pq_m;
	m.pq_ksub = metap->pq_ksub;
	m.pq_code_bits = metap->pq_code_bits != 0 ? metap->pq_code_bits : 8;
	m.codebook_start = metap->codebook_start;
	UnlockReleaseBuffer(buf);

	if (m.quantizer > GPUIVF_QUANTIZER_PQ ||
		(m.quantizer == GPUIVF_QUANTIZER_PQ && m.dim > 0 &&
		 (m.pq_m == 0 || m.dim % m.pq_m != 0 || m.pq_ksub == 0 ||
		  m.pq_ksub > GI_PQ_MAX_KSUB ||
		  !gi_ivfpq_code_bits_valid(m.pq_code_bits, m.pq_ksub))))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("gpuivf index \"%s\" has a corrupt metapage",
						RelationGetRelationName(index))));

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
	bsize = m.quantizer == GPUIVF_QUANTIZER_PQ ?
		(Size) m.pq_ksub * m.dim * sizeof(float4) : 0;
	res = MemoryContextAllocHuge(index->rd_indexcxt,
								 MAXALIGN(sizeof(GpuivfMeta)) + csize +
								 (Size) m.lists * sizeof(float4) + bsize);
	*res = m;
	res->centroids = (float4 *) ((char *) res + MAXALIGN(sizeof(GpuivfMeta)));
	res->cnorms = res->centroids + (Size) m.lists * m.dim;
	res->codebooks = bsize > 0 ? res->cnorms + m.lists : NULL;
	if (bsize > 0)
		read_codebooks(index, res);

	for (list = 0, blkno = m.listinfo_start; list < m.lists; blkno++)
	{
		Page		page;
		uint32		nitems = Min(m.lists_per_page, m.lists - list);

		buf = ReadBuffer(index, blkno);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (PageGetMaxOffsetNumber(page) < nitems ||
			!(GiPageGetOpaque(page)->flags & GPUIVF_PAGE_LISTINFO))
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

/* where list's head is: its item on the list-info pages */
GiListRef
gpuivf_list_ref(const GpuivfMeta *meta, uint32 list)
{
	GiListRef	ref;

	Assert(list < meta->lists);
	ref.blkno = meta->listinfo_start + list / meta->lists_per_page;
	ref.offnum = FirstOffsetNumber + list % meta->lists_per_page;
	return ref;
}

static GiListRef
locate_list(const void *arg, uint32 list)
{
	return gpuivf_list_ref((const GpuivfMeta *) arg, list);
}

/* every list of the index; meta must outlive dir */
void
gpuivf_list_dir(const GpuivfMeta *meta, GiListDir *dir)
{
	dir->nlists = meta->lists;
	dir->locate = locate_list;
	dir->arg = meta;
}

/*
 * First insert into an index that has no lists (built on a table with no
 * indexable rows): the row fixes the dimension, and the index gets one list
 * with a zero centroid.  Every row then lands in that list, so searches are
 * exact; REINDEX once the table has data to get real lists.  A PQ index
 * gets no codebooks (all entries zero, so every row has code 0 and the
 * search cannot tell rows of the list apart): REINDEX trains them.
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
	GpuivfQuantizer qz = gpuivf_quantizer_option(index, dim);

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

	newbuf = gi_new_buffer(index, MAIN_FORKNUM, false);

	state = GenericXLogStart(index);
	mpage = GenericXLogRegisterBuffer(state, metabuf, 0);
	lpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
	gi_init_page(lpage, GPUIVF_PAGE_LISTINFO, GPUIVF_PAGE_ID);
	info = palloc0(itemsz);
	info->head.start = InvalidBlockNumber;
	info->head.insert = InvalidBlockNumber;
	if (PageAddItem(lpage, (Item) info, itemsz, InvalidOffsetNumber, false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add list-info item to gpuivf index \"%s\"",
			 RelationGetRelationName(index));
	metap = GpuivfPageGetMeta(mpage);
	metap->dim = dim;
	metap->lists = 1;
	metap->lists_per_page = gpuivf_lists_per_page(dim);
	metap->listinfo_start = BufferGetBlockNumber(newbuf);
	metap->quantizer = qz.quantizer;
	metap->pq_m = qz.pq_m;
	metap->pq_ksub = qz.pq_ksub;
	metap->pq_code_bits = qz.pq_code_bits;
	metap->codebook_start = InvalidBlockNumber;
	/* a metapage written before the struct grew: cover the new fields */
	((PageHeader) mpage)->pd_lower =
		Max(((PageHeader) mpage)->pd_lower,
			((char *) metap + sizeof(GpuivfMetaPageData)) - (char *) mpage);
	GenericXLogFinish(state);

	UnlockReleaseBuffer(newbuf);
	UnlockReleaseBuffer(metabuf);
	pfree(info);
}

/* append one row's record (vector or code) to the list whose head ref finds */
void
gpuivf_append(Relation index, uint32 record_bytes, GiListRef ref, ItemPointer heaptid,
			  const void *record)
{
	Size		itemsz = GPUIVF_RECORD_ITEM_SIZE(record_bytes);
	GpuivfTuple tup = palloc0(itemsz);

	tup->heaptid = *heaptid;
	memcpy(tup->vec, record, record_bytes);
	gi_list_append(index, GPUIVF_PAGE_ID, ref, tup, itemsz);
	pfree(tup);
}
