/*
 * gpusparse_pages.c
 *		gpusparse's pages around the shared list chain: the metapage (the
 *		dimension, the heads of the document chain, the dead-row log and
 *		the TID directory) and a row's items.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusparse.h"

/* what a backend caches of the metapage, once the dimension is fixed */
typedef struct GpusparseCache
{
	Oid			relfilenode;
	uint32		dim;
} GpusparseCache;

void
gpusparse_init_metapage(Page page, uint32 dim)
{
	GpusparseMetaData meta;
	GiListHeadData head;
	GiDeadLogHeadData log;

	/* a new index has no deleted page */
	gi_init_page(page, GI_PAGE_META | GI_PAGE_SETTLED, GPUSPARSE_PAGE_ID);
	memset(&meta, 0, sizeof(meta));
	meta.magic = GPUSPARSE_MAGIC;
	meta.version = GPUSPARSE_VERSION;
	meta.dim = dim;
	head.start = InvalidBlockNumber;
	head.insert = InvalidBlockNumber;
	gi_deadlog_init_head(&log);
	if (PageAddItem(page, (Item) &meta, sizeof(meta), GPUSPARSE_META_OFFNUM,
					false, false) != GPUSPARSE_META_OFFNUM ||
		PageAddItem(page, (Item) &head, sizeof(head), GPUSPARSE_HEAD_OFFNUM,
					false, false) != GPUSPARSE_HEAD_OFFNUM ||
		PageAddItem(page, (Item) &log, sizeof(log), GPUSPARSE_LOG_OFFNUM,
					false, false) != GPUSPARSE_LOG_OFFNUM ||
		PageAddItem(page, (Item) &head, sizeof(head), GPUSPARSE_TIDS_OFFNUM,
					false, false) != GPUSPARSE_TIDS_OFFNUM)
		elog(ERROR, "failed to initialize a gpusparse metapage");
}

static GpusparseMetaData *
page_meta(Relation index, Page page)
{
	GpusparseMetaData *meta;

	if (!(GiPageGetOpaque(page)->flags & GI_PAGE_META) ||
		PageGetMaxOffsetNumber(page) < GPUSPARSE_HEAD_OFFNUM)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a gpusparse index",
						RelationGetRelationName(index))));
	meta = (GpusparseMetaData *) PageGetItem(page, PageGetItemId(page, GPUSPARSE_META_OFFNUM));
	if (meta->magic != GPUSPARSE_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a gpusparse index",
						RelationGetRelationName(index))));
	if (meta->version != GPUSPARSE_VERSION ||
		PageGetMaxOffsetNumber(page) < GPUSPARSE_TIDS_OFFNUM)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("gpusparse index \"%s\" has version %u, expected %u",
						RelationGetRelationName(index), meta->version,
						GPUSPARSE_VERSION),
				 errhint("REINDEX the index.")));
	if (meta->dim > GPUSPARSE_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("gpusparse index \"%s\" has a corrupt metapage",
						RelationGetRelationName(index))));
	return meta;
}

/* the index's dimension; 0 while nothing fixed it */
uint32
gpusparse_get_dim(Relation index)
{
	GpusparseCache *cache = (GpusparseCache *) index->rd_amcache;
	Buffer		buf;
	uint32		dim;

	if (cache && cache->relfilenode == index->rd_node.relNode)
		return cache->dim;

	buf = ReadBuffer(index, GI_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	dim = page_meta(index, BufferGetPage(buf))->dim;
	UnlockReleaseBuffer(buf);

	/* once fixed it never changes for these pages */
	if (dim > 0)
	{
		cache = MemoryContextAlloc(index->rd_indexcxt, sizeof(GpusparseCache));
		cache->relfilenode = index->rd_node.relNode;
		cache->dim = dim;
		if (index->rd_amcache)
			pfree(index->rd_amcache);
		index->rd_amcache = cache;
	}
	return dim;
}

/*
 * The first row of an index that has no dimension yet fixes it; returns
 * the dimension the index has afterwards (another backend may have been
 * first).
 */
uint32
gpusparse_set_dim(Relation index, uint32 dim)
{
	Buffer		buf = ReadBuffer(index, GI_METAPAGE_BLKNO);
	GenericXLogState *state;
	GpusparseMetaData *meta;
	uint32		have;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	have = page_meta(index, BufferGetPage(buf))->dim;
	if (have == 0)
	{
		state = GenericXLogStart(index);
		meta = page_meta(index, GenericXLogRegisterBuffer(state, buf, 0));
		meta->dim = dim;
		GenericXLogFinish(state);
		have = dim;
	}
	UnlockReleaseBuffer(buf);
	return have;
}

GiListRef
gpusparse_chain_ref(void)
{
	GiListRef	ref;

	ref.blkno = GI_METAPAGE_BLKNO;
	ref.offnum = GPUSPARSE_HEAD_OFFNUM;
	return ref;
}

static GiListRef
locate_chain(const void *arg, uint32 list)
{
	return gpusparse_chain_ref();
}

static GiListRef
locate_tids(const void *arg, uint32 list)
{
	GiListRef	ref;

	ref.blkno = GI_METAPAGE_BLKNO;
	ref.offnum = GPUSPARSE_TIDS_OFFNUM;
	return ref;
}

/* the TID directory's one chain, as a list directory (for the build) */
void
gpusparse_tids_dir(GiListDir *dir)
{
	dir->nlists = 1;
	dir->locate = locate_tids;
	dir->arg = NULL;
}

/* the dead-row log of the index's pages; limit_percent matters to VACUUM */
void
gpusparse_deadlog_spec(Relation index, int limit_percent, GiDeadLogSpec *spec)
{
	spec->head.blkno = GI_METAPAGE_BLKNO;
	spec->head.offnum = GPUSPARSE_LOG_OFFNUM;
	spec->tids = locate_tids(NULL, 0);
	spec->page_id = GPUSPARSE_PAGE_ID;
	spec->gen_offset = offsetof(GpusparseTupleData, generation);
	spec->limit_percent = limit_percent;
}

/* the index's one chain, as a list directory */
void
gpusparse_list_dir(GiListDir *dir)
{
	dir->nlists = 1;
	dir->locate = locate_chain;
	dir->arg = NULL;
}

/* terms of a run with every weight 1 */
static bool
all_unit(const float4 *values, int n)
{
	for (int i = 0; i < n; i++)
		if (values[i] != 1.0f)
			return false;
	return true;
}

/*
 * The items of one row: runs of at most GPUSPARSE_ITEM_FORM_NNZ pairs, one
 * empty item for a row without non-zeros, each with the dead-row log's
 * generation; emit gets each (the item is reused for the next).
 */
void
gpusparse_form_items(const SpVec *v, ItemPointer heaptid, uint32 generation,
					 void (*emit) (void *arg, GpusparseTuple item, Size itemsz),
					 void *arg)
{
	int			per = Min(v->nnz, GPUSPARSE_ITEM_FORM_NNZ);
	GpusparseTuple item = palloc0(GPUSPARSE_ITEM_SIZE_MAX(per));
	const float4 *values = SPVEC_VALUES(v);
	int			from = 0;

	do
	{
		int			n = Min(per, v->nnz - from);
		bool		unit = all_unit(values + from, n);
		uint8	   *p = item->data;
		uint32		prev = 0;

		item->heaptid = *heaptid;
		item->nnz = (uint16) n;
		item->generation = generation;
		*p++ = unit ? GPUSPARSE_ITEM_UNIT : 0;
		for (int i = 0; i < n; i++)
		{
			uint32		t = (uint32) v->indices[from + i];
			uint32		x = i == 0 ? t : t - prev;

			prev = t;
			while (x >= 0x80)
			{
				*p++ = (uint8) (x | 0x80);
				x >>= 7;
			}
			*p++ = (uint8) x;
		}
		if (!unit)
		{
			memcpy(p, values + from, n * sizeof(float4));
			p += n * sizeof(float4);
		}
		emit(arg, item, (Size) (p - (uint8 *) item));
		from += n;
	} while (from < v->nnz);
	pfree(item);
}

/*
 * Decode an item's pairs into terms[] and weights[] (room for t->nnz
 * each): false when it is not a well-formed item of exactly itemsz bytes
 * whose terms ascend below dim.
 */
bool
gpusparse_item_pairs(const GpusparseTupleData *t, Size itemsz, uint32 dim,
					 int32 *terms, float4 *weights)
{
	const uint8 *p = t->data;
	const uint8 *end = (const uint8 *) t + itemsz;
	uint8		flags;
	uint64		term = 0;

	if (itemsz < offsetof(GpusparseTupleData, data) + 1 ||
		t->nnz > GPUSPARSE_ITEM_MAX_NNZ)
		return false;
	flags = *p++;
	if ((flags & ~GPUSPARSE_ITEM_UNIT) != 0)
		return false;
	for (int i = 0; i < t->nnz; i++)
	{
		uint64		x = 0;
		int			shift = 0;

		do
		{
			if (p == end || shift >= 7 * GPUSPARSE_TERM_BYTES_MAX)
				return false;
			x |= (uint64) (*p & 0x7f) << shift;
			shift += 7;
		} while (*p++ & 0x80);
		if (i > 0 && x == 0)
			return false;		/* terms ascend strictly */
		term = i == 0 ? x : term + x;
		if (term >= dim)
			return false;
		terms[i] = (int32) term;	/* below dim: fits */
	}
	if (flags & GPUSPARSE_ITEM_UNIT)
	{
		for (int i = 0; i < t->nnz; i++)
			weights[i] = 1.0f;
	}
	else
	{
		if ((Size) (end - p) < t->nnz * sizeof(float4))
			return false;
		memcpy(weights, p, t->nnz * sizeof(float4));
		p += t->nnz * sizeof(float4);
	}
	return p == end;
}

void
gpusparse_item_corrupt(Relation index, Size itemsz)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("gpusparse index \"%s\" has a malformed item of %zu bytes",
					RelationGetRelationName(index), itemsz),
			 errhint("REINDEX the index.")));
}
