/*
 * gpusparse.h
 *		The gpusparse index access method: exact top-k by inner product over
 *		sparse vectors (spvec), with the posting lists held by the gpuindex
 *		device service.
 *
 * Pages are the truth, the device store is a cache (DESIGN.md section 4).
 * The pages hold documents, not postings, so that a rare term costs no
 * page of its own:
 *
 *	block 0		metapage: item 1 the GpusparseMetaData, item 2 the head of
 *				the document chain (GiListHeadData), item 3 the head of the
 *				dead-row log (GiDeadLogHeadData), item 4 the head of the
 *				TID directory (GiListHeadData)
 *	data pages	the document chain (gi_access.h), one or more items per
 *				indexed row (GpusparseTupleData: heap TID, the generation
 *				of the dead-row log it was appended in, then a run of its
 *				(term, weight) pairs; a row with more pairs than a page
 *				takes is split into several items, one with none)
 *	log pages	the dead-row log's chain (gi_deadlog.c)
 *	TID pages	the TID directory's chain: each indexed row's heap TID,
 *				the only thing VACUUM reads while the log has room
 *
 * The device service holds one store per index of kind GI_KIND_SPARSE: a
 * list per dimension and a record (key = heap TID, list = term, weight)
 * per non-zero (layouts in gi_kind_sparse.h).  Loading walks the chain and
 * sends every pair of the rows the log does not kill; VACUUM finds dead
 * rows in the TID directory, logs them (once the log is full, removes the
 * items it kills from the chain) and removes their keys from the store,
 * in time proportional to their own postings.
 */
#ifndef GPUSPARSE_H
#define GPUSPARSE_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/reloptions.h"
#include "access/relscan.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "storage/itemptr.h"
#include "utils/rel.h"

#include "gi_access.h"
#include "gi_kind_sparse.h"
#include "spvec.h"

#define GPUSPARSE_MAGIC		0x47535053	/* "GSPS" */
#define GPUSPARSE_VERSION	4
#define GPUSPARSE_PAGE_ID	0xFF8C

/* support function of a gpusparse operator class: (coltype) -> spvec */
#define GPUSPARSE_SPVEC_PROC	1
#define GPUSPARSE_NPROCS		1

/*
 * spvec's own limit.  The store has a list per dimension up to
 * GI_SPARSE_MAX_LISTS dimensions, beyond that a list per term in use.
 */
#define GPUSPARSE_MAX_DIM	SPVEC_MAX_DIM

/* the default share of rows (percent) the dead-row log may hold */
#define GPUSPARSE_DEFAULT_VACUUM_LOG_LIMIT	20

/* the metapage's items */
#define GPUSPARSE_META_OFFNUM	1
#define GPUSPARSE_HEAD_OFFNUM	2
#define GPUSPARSE_LOG_OFFNUM	3
#define GPUSPARSE_TIDS_OFFNUM	4

/* hits one search may ask for: the reply must fit in one palloc */
#define GPUSPARSE_MAX_K		((uint32) ((MaxAllocSize / 2) / sizeof(gi_hit)))

/* the batch API's limits */
#define GPUSPARSE_BATCH_MAX_K		100000
#define GPUSPARSE_BATCH_MAX_QUERIES 1000000

typedef struct GpusparseMetaData
{
	uint32		magic;
	uint32		version;
	uint32		dim;			/* 0 until the first row fixes it */
	uint32		pad;
} GpusparseMetaData;

/*
 * A run of one row's non-zeros (gpusparse_pages.c encodes and decodes it):
 * a flags byte, the ascending terms as varints (the first, then each gap),
 * then the weights as float4, left out when all are 1 (GPUSPARSE_ITEM_UNIT).
 */
typedef struct GpusparseTupleData
{
	ItemPointerData heaptid;
	uint16		nnz;
	uint32		generation;		/* the dead-row log's when appended */
	uint8		data[FLEXIBLE_ARRAY_MEMBER];
} GpusparseTupleData;

typedef GpusparseTupleData *GpusparseTuple;

#define GPUSPARSE_ITEM_UNIT		0x01	/* every weight is 1: none stored */

/*
 * Bytes of a term's varint at most: 4 below 2^28, 5 up to spvec's 10^9
 * dimensions, where a row's ascending terms leave at most 4 varints (the
 * first term and gaps of 2^28 or more) that take the fifth byte.
 */
#define GPUSPARSE_TERM_BYTES_MAX	5
#define GPUSPARSE_WIDE_TERMS_MAX	4

/* the largest item of nnz pairs */
#define GPUSPARSE_ITEM_SIZE_MAX(nnz) \
	(offsetof(GpusparseTupleData, data) + 1 + \
	 (Size) (nnz) * (4 + sizeof(float4)) + GPUSPARSE_WIDE_TERMS_MAX)

/* pairs an item may hold, and pairs a new item holds at most */
#define GPUSPARSE_ITEM_MAX_NNZ \
	((int) ((GI_MAX_ITEM_SIZE - offsetof(GpusparseTupleData, data) - 1) / \
			(4 + sizeof(float4))))
#define GPUSPARSE_ITEM_FORM_NNZ \
	((int) ((GI_MAX_ITEM_SIZE - offsetof(GpusparseTupleData, data) - 1 - \
			 GPUSPARSE_WIDE_TERMS_MAX) / (4 + sizeof(float4))))

/* build phases shown in pg_stat_progress_create_index.subphase */
#define GPUSPARSE_PHASE_WRITE	2
#define GPUSPARSE_PHASE_LOAD	3

/*
 * How an index turns a column value and an ORDER BY argument into the
 * sparse vectors its pages and store hold.  gpusparse's operator classes
 * convert with support function 1 (gpusparse_spvec_map); an access method
 * built on these pages and this store (genie) brings its own map, and sets
 * recheck when its distances are only lower bounds of the operator's;
 * exact (optional) tells a scan that this index's distances are the
 * operator's after all, so that it need not ask for the recheck.
 * dim is the index's dimension, 0 while no row has fixed it.
 */
typedef struct GpusparseValueMap
{
	SpVec	   *(*row) (Relation index, Datum value, uint32 dim);
	SpVec	   *(*query) (Relation index, ScanKey orderby, uint32 dim);
	bool		recheck;
	bool		(*exact) (Relation index, uint32 dim);
} GpusparseValueMap;

extern const GpusparseValueMap gpusparse_spvec_map;

/* GUCs */
extern int	gpusparse_scan_batch;
extern int	gpusparse_method;

/* gpusparse_options.c */
extern void gpusparse_init(void);
extern bytea *gpusparse_options(Datum reloptions, bool validate);
extern void gpusparse_add_vacuum_log_limit(relopt_kind kind);
extern int	gpusparse_vacuum_log_limit(Relation index);

/* gpusparse_handler.c */
extern SpVec *gpusparse_datum_spvec(Relation index, Datum value);
extern bool gpusparse_is_gpusparse_index(Relation index);
extern void gpusparse_check_dim(Relation index, uint32 dim, int got);
extern char *gpusparse_buildphasename(int64 phasenum);

/* gpusparse_pages.c */
extern void gpusparse_init_metapage(Page page, uint32 dim);
extern uint32 gpusparse_get_dim(Relation index);
extern uint32 gpusparse_set_dim(Relation index, uint32 dim);
extern void gpusparse_list_dir(GiListDir *dir);
extern void gpusparse_tids_dir(GiListDir *dir);
extern GiListRef gpusparse_chain_ref(void);
extern void gpusparse_deadlog_spec(Relation index, int limit_percent,
								   GiDeadLogSpec *spec);
extern void gpusparse_form_items(const SpVec *v, ItemPointer heaptid,
								 uint32 generation,
								 void (*emit) (void *arg, GpusparseTuple item, Size itemsz),
								 void *arg);
extern bool gpusparse_item_pairs(const GpusparseTupleData *t, Size itemsz, uint32 dim,
								 int32 *terms, float4 *weights);
extern void gpusparse_item_corrupt(Relation index, Size itemsz) pg_attribute_noreturn();

/* gpusparse_build.c */
extern IndexBuildResult *gpusparse_build(Relation heap, Relation index,
										 IndexInfo *indexInfo);
extern IndexBuildResult *gpusparse_build_mapped(Relation heap, Relation index,
												IndexInfo *indexInfo,
												const GpusparseValueMap *map);
extern void gpusparse_buildempty(Relation index);

/* gpusparse_insert.c */
extern bool gpusparse_insert(Relation index, Datum *values, bool *isnull,
							 ItemPointer heap_tid, Relation heap,
							 IndexUniqueCheck checkUnique, bool indexUnchanged,
							 IndexInfo *indexInfo);
extern void gpusparse_insert_mapped(Relation index, Datum value,
									ItemPointer heap_tid,
									const GpusparseValueMap *map);

/* gpusparse_vacuum.c */
extern IndexBulkDeleteResult *gpusparse_bulkdelete(IndexVacuumInfo *info,
												   IndexBulkDeleteResult *stats,
												   IndexBulkDeleteCallback callback,
												   void *callback_state);
extern IndexBulkDeleteResult *gpusparse_bulkdelete_limit(IndexVacuumInfo *info,
														 IndexBulkDeleteResult *stats,
														 IndexBulkDeleteCallback callback,
														 void *callback_state,
														 int log_limit);

/* gpusparse_load.c */
extern uint32 gpusparse_store_dim(uint32 dim);
extern bool gpusparse_load(Relation index);
extern void *gpusparse_pack_queries(SpVec **queries, int nq, Size *bytes);
extern void gpusparse_search_request(uint32 dim, const void *queries, Size bytes,
									 uint32 nq, uint32 k, GiCall *call);
extern gi_hit *gpusparse_search_service(Relation index, uint32 dim,
										const void *queries, Size bytes,
										uint32 nq, uint32 k, uint32 **found);
extern void gpusparse_walk_rows(Relation index, BufferAccessStrategy bas,
								GiItemFn fn, void *arg);

/* gpusparse_batch.c: the queries of a batch, for GiBatch.search */
typedef struct GpusparseBatchArg
{
	Relation	index;
	uint32		dim;
	SpVec	  **queries;
	SpVec	  **qbuf;			/* room for as many */
} GpusparseBatchArg;

extern gi_hit *gpusparse_batch_search(void *arg, const int *qidx, int n, uint32 kreq,
									  uint32 **found);
extern void *gpusparse_batch_search_ahead(void *arg, const int *qidx, int n, uint32 kreq);
extern gi_hit *gpusparse_batch_search_ahead_end(void *arg, void *ahead, uint32 **found);

/* gpusparse_scan.c */
extern IndexScanDesc gpusparse_beginscan(Relation index, int nkeys, int norderbys);
extern IndexScanDesc gpusparse_beginscan_mapped(Relation index, int nkeys,
												int norderbys,
												const GpusparseValueMap *map);
extern void gpusparse_rescan(IndexScanDesc scan, ScanKey keys, int nkeys,
							 ScanKey orderbys, int norderbys);
extern bool gpusparse_gettuple(IndexScanDesc scan, ScanDirection dir);
extern void gpusparse_endscan(IndexScanDesc scan);

/* gpusparse_cost.c */
extern void gpusparse_costestimate(PlannerInfo *root, IndexPath *path,
								   double loop_count, Cost *indexStartupCost,
								   Cost *indexTotalCost,
								   Selectivity *indexSelectivity,
								   double *indexCorrelation, double *indexPages);

#endif							/* GPUSPARSE_H */
