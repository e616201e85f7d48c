/*
 * gpusparse_build.c
 *		CREATE INDEX: one pass over the table writing every row's items to
 *		the document chain and its TID to the TID directory (no WAL until
 *		the end, then whole pages), then the store loaded from the pages.
 *
 * The dimension comes from the column's type modifier when it has one,
 * else from the first row; a row of another dimension is an error.
 */
#include "postgres.h"

#include "access/tableam.h"
#include "access/xloginsert.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpusparse.h"

typedef struct GpusparseBuildState
{
	Relation	index;
	const GpusparseValueMap *map;
	uint32		dim;
	double		indtuples;
	GiChainBuild cb;
	GiChainBuild tids;			/* the TID directory, written beside */
	MemoryContext tmpcxt;
} GpusparseBuildState;

static void
build_item(void *arg, GpusparseTuple item, Size itemsz)
{
	GpusparseBuildState *bs = arg;

	gi_chain_build_add(&bs->cb, 0, item, itemsz);
}

static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	GpusparseBuildState *bs = state;
	MemoryContext old;
	SpVec	   *v;

	if (isnull[0])
		return;
	old = MemoryContextSwitchTo(bs->tmpcxt);
	v = bs->map->row(index, values[0], bs->dim);
	gpusparse_check_dim(index, bs->dim, v->dim);
	bs->dim = (uint32) v->dim;
	gpusparse_form_items(v, tid, 0, build_item, bs);
	gi_chain_build_add(&bs->tids, 0, tid, sizeof(ItemPointerData));
	MemoryContextSwitchTo(old);
	MemoryContextReset(bs->tmpcxt);

	bs->indtuples += 1;
	if (((int64) bs->indtuples & 1023) == 0)
	{
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) bs->indtuples);
		CHECK_FOR_INTERRUPTS();
	}
}

/* the dimension into the metapage written at the start */
static void
write_dim(Relation index, uint32 dim)
{
	Buffer		buf = ReadBuffer(index, GI_METAPAGE_BLKNO);
	Page		page;
	GpusparseMetaData *meta;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	meta = (GpusparseMetaData *) PageGetItem(page, PageGetItemId(page, GPUSPARSE_META_OFFNUM));
	meta->dim = dim;
	MarkBufferDirty(buf);
	UnlockReleaseBuffer(buf);
}

IndexBuildResult *
gpusparse_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	return gpusparse_build_mapped(heap, index, indexInfo, &gpusparse_spvec_map);
}

IndexBuildResult *
gpusparse_build_mapped(Relation heap, Relation index, IndexInfo *indexInfo,
					   const GpusparseValueMap *map)
{
	IndexBuildResult *result;
	GpusparseBuildState bs;
	GiListDir	dir;
	Buffer		metabuf;
	double		reltuples;
	int32		typmod = TupleDescAttr(RelationGetDescr(index), 0)->atttypmod;

	/* without the device service the index could never be searched */
	gi_require_service();

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data",
			 RelationGetRelationName(index));

	memset(&bs, 0, sizeof(bs));
	bs.index = index;
	bs.map = map;
	bs.dim = typmod > 0 ? (uint32) typmod : 0;
	gpusparse_check_dim(index, 0, (int) bs.dim);
	bs.tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "gpusparse build row",
									  ALLOCSET_DEFAULT_SIZES);

	metabuf = gi_new_buffer(index, MAIN_FORKNUM, true);
	Assert(BufferGetBlockNumber(metabuf) == GI_METAPAGE_BLKNO);
	gpusparse_init_metapage(BufferGetPage(metabuf), 0);
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUSPARSE_PHASE_WRITE);
	gi_chain_build_begin(&bs.cb, index, GPUSPARSE_PAGE_ID, 1);
	gi_chain_build_begin(&bs.tids, index, GPUSPARSE_PAGE_ID, 1);
	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   build_callback, &bs, NULL);
	gpusparse_list_dir(&dir);
	gi_chain_build_end(&bs.cb, &dir);
	gpusparse_tids_dir(&dir);
	gi_chain_build_end(&bs.tids, &dir);
	write_dim(index, bs.dim);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, (int64) bs.indtuples);

	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0, RelationGetNumberOfBlocks(index), true);

	/* resident at once; replaces the store of the old pages (REINDEX) */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GPUSPARSE_PHASE_LOAD);
	gi_remember_built(index);
	gi_store_replace(index, gpusparse_load);

	MemoryContextDelete(bs.tmpcxt);
	result = palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = bs.indtuples;
	return result;
}

/* the init fork of an unlogged index: an empty metapage */
void
gpusparse_buildempty(Relation index)
{
	Buffer		metabuf;

	metabuf = gi_new_buffer(index, INIT_FORKNUM, true);
	Assert(BufferGetBlockNumber(metabuf) == GI_METAPAGE_BLKNO);
	START_CRIT_SECTION();
	gpusparse_init_metapage(BufferGetPage(metabuf), 0);
	MarkBufferDirty(metabuf);
	log_newpage_buffer(metabuf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(metabuf);
}
