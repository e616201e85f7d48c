/*
 * gpuivf.h
 *		The gpuivf index access method: IVF-flat k-NN search on dense float
 *		vectors, with the lists held by the gpuindex device service.
 *
 * Pages are the truth, the device store is a cache (DESIGN.md section 4).
 * An index is laid out like pgvector's IVFFlat:
 *
 *	block 0				metapage (GpuivfMetaPageData)
 *	list-info pages		contiguous from meta->listinfo_start: one item per
 *						list (GpuivfListInfoData: the list's head, then
 *						its centroid)
 *	data pages			per-list chains (gi_access.h), one item per indexed
 *						row (GpuivfTupleData: heap TID, then the vector)
 *
 * Every page carries a GiPageOpaqueData with GPUIVF_PAGE_ID.  Pages are
 * WAL-logged with GenericXLog (the bulk build logs full pages with
 * log_newpage_range at the end instead).  Chains, appends, VACUUM and page
 * recycling are the shared ones of src/access.
 *
 * The device service holds one store per index of kind GI_KIND_IVF;
 * records are (key = heap TID, list, vector).  Backends never search
 * pages: scans and the batch API send GI_REQ_SEARCH, and a store the
 * service does not have is loaded from the pages on demand (gpuivf_load.c).
 */
#ifndef GPUIVF_H
#define GPUIVF_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "storage/block.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/rel.h"

#include "gi_access.h"
#include "gi_kind_ivf.h"

#define GPUIVF_MAGIC		0x47495646	/* "GIVF" */
#define GPUIVF_VERSION		1
#define GPUIVF_METAPAGE_BLKNO	GI_METAPAGE_BLKNO
#define GPUIVF_PAGE_ID		0xFF8B

/* support functions of a gpuivf operator class */
#define GPUIVF_FLOATS_PROC	1	/* (coltype) -> real[]: the vector as floats */
#define GPUIVF_METRIC_PROC	2	/* () -> int4: a gi_metric code */
#define GPUIVF_NPROCS		2

/* gpuivf's own page kind (GiPageOpaqueData.flags, beside GI_PAGE_*) */
#define GPUIVF_PAGE_LISTINFO	(1 << 1)

/* the lists reloption */
#define GPUIVF_DEFAULT_LISTS	100
#define GPUIVF_MIN_LISTS		1
#define GPUIVF_MAX_LISTS		32768

/* k-means at build time */
#define GPUIVF_KMEANS_ITERATIONS	10
#define GPUIVF_SAMPLES_PER_LIST		50
#define GPUIVF_MIN_SAMPLES			10000
#define GPUIVF_SEED					UINT64CONST(0x67707569766653)

/* hits one search may ask for: the reply must fit in one palloc */
#define GPUIVF_MAX_K		((uint32) ((MaxAllocSize / 2) / sizeof(gi_hit)))

/* the batch API's limits */
#define GPUIVF_BATCH_MAX_K			100000
#define GPUIVF_BATCH_MAX_QUERIES	1000000

typedef struct GpuivfMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		dim;			/* 0 until the first row fixes it */
	uint32		lists;			/* lists in use; 0: nothing indexed yet */
	uint32		requested_lists;	/* the lists option at build */
	uint32		metric;			/* gi_metric of the operator class */
	uint32		lists_per_page; /* list-info items per list-info page */
	BlockNumber listinfo_start; /* first list-info page */
} GpuivfMetaPageData;

typedef GpuivfMetaPageData *GpuivfMetaPage;

#define GpuivfPageGetMeta(page) ((GpuivfMetaPage) PageGetContents(page))

/* one list: its head (where its chain starts, where inserts go), its centroid */
typedef struct GpuivfListInfoData
{
	GiListHeadData head;
	float4		centroid[FLEXIBLE_ARRAY_MEMBER];
} GpuivfListInfoData;

typedef GpuivfListInfoData *GpuivfListInfo;

/* one indexed row */
typedef struct GpuivfTupleData
{
	ItemPointerData heaptid;
	uint16		unused;
	float4		vec[FLEXIBLE_ARRAY_MEMBER];
} GpuivfTupleData;

typedef GpuivfTupleData *GpuivfTuple;

/* both kinds of item are an 8-byte header followed by dim floats */
#define GPUIVF_ITEM_SIZE(dim) (offsetof(GpuivfTupleData, vec) + sizeof(float4) * (dim))

/* the dimension limit: 2036 with 8 kB pages */
#define GPUIVF_MAX_DIM \
	((int) ((GI_MAX_ITEM_SIZE - offsetof(GpuivfTupleData, vec)) / sizeof(float4)))

/*
 * What a backend knows of an index's metapage and centroids.  Once the
 * index has lists it never changes for that relfilenode, so it is cached in
 * rd_amcache (freed by relcache invalidation; the relfilenode is checked
 * anyway).  Do not keep the pointer across anything that may accept
 * invalidation messages.
 */
typedef struct GpuivfMeta
{
	Oid			relfilenode;
	uint32		dim;
	uint32		lists;			/* 0: nothing indexed yet (not cached) */
	uint32		metric;
	uint32		lists_per_page;
	BlockNumber listinfo_start;
	float4	   *centroids;		/* lists * dim */
	float4	   *cnorms;			/* lists: centroid norms (for cosine) */
} GpuivfMeta;

/* build phases shown in pg_stat_progress_create_index.subphase */
#define GPUIVF_PHASE_SAMPLE		2
#define GPUIVF_PHASE_KMEANS		3
#define GPUIVF_PHASE_ASSIGN		4
#define GPUIVF_PHASE_WRITE		5
#define GPUIVF_PHASE_LOAD		6

/* reloptions */
typedef struct GpuivfOptions
{
	int32		vl_len_;		/* varlena header (do not touch directly!) */
	int			lists;
} GpuivfOptions;

/* GUCs */
extern int	gpuivf_probes;
extern int	gpuivf_scan_batch;
extern int	gpuivf_iterative_scan;
extern int	gpuivf_max_probes;

/* gpuivf.iterative_scan */
#define GPUIVF_ITERATIVE_OFF		0
#define GPUIVF_ITERATIVE_RELAXED	1

/* gpuivf_options.c */
extern void gpuivf_init(void);
extern bytea *gpuivf_options(Datum reloptions, bool validate);
extern int	gpuivf_lists_option(Relation index);

/* gpuivf_handler.c */
extern const float4 *gpuivf_datum_floats(Relation index, Datum value, int *dim,
										 const char *what);
extern uint32 gpuivf_opclass_metric(Relation index);
extern bool gpuivf_is_gpuivf_index(Relation index);
extern double gpuivf_distance_value(uint32 metric, float distance);
extern bool gpuivf_vector_indexable(uint32 metric, const float4 *vec, int dim);
extern void gpuivf_check_magnitude(const float4 *vec, int dim, const char *what);
extern void gpuivf_check_dim(const GpuivfMeta *meta, int dim);

/* gpuivf_pages.c */
extern uint32 gpuivf_lists_per_page(uint32 dim);
extern void gpuivf_init_metapage(Page page, uint32 dim, uint32 lists,
								 uint32 requested_lists, uint32 metric,
								 BlockNumber listinfo_start);
extern GpuivfMeta *gpuivf_get_meta(Relation index);
extern GiListRef gpuivf_list_ref(const GpuivfMeta *meta, uint32 list);
extern void gpuivf_list_dir(const GpuivfMeta *meta, GiListDir *dir);
extern void gpuivf_initialize_lists(Relation index, uint32 dim);
extern void gpuivf_append(Relation index, uint32 dim, GiListRef ref,
						  ItemPointer heaptid, const float4 *vec);

/* gpuivf_kmeans.c */
extern uint32 gpuivf_kmeans(float4 *samples, int nsamples, int dim, int lists,
							uint32 metric, float4 *centroids);
extern void gpuivf_centroid_norms(const float4 *centroids, uint32 lists,
								  uint32 dim, float4 *norms);
extern uint32 gpuivf_nearest_list(const float4 *centroids, const float4 *cnorms,
								  uint32 lists, uint32 dim, uint32 metric,
								  const float4 *vec);

/* gpuivf_build.c */
extern IndexBuildResult *gpuivf_build(Relation heap, Relation index,
									  IndexInfo *indexInfo);
extern void gpuivf_buildempty(Relation index);

/* gpuivf_insert.c */
extern bool gpuivf_insert(Relation index, Datum *values, bool *isnull,
						  ItemPointer heap_tid, Relation heap,
						  IndexUniqueCheck checkUnique, bool indexUnchanged,
						  IndexInfo *indexInfo);

/* gpuivf_vacuum.c */
extern IndexBulkDeleteResult *gpuivf_bulkdelete(IndexVacuumInfo *info,
												IndexBulkDeleteResult *stats,
												IndexBulkDeleteCallback callback,
												void *callback_state);

/* gpuivf_load.c */
extern bool gpuivf_load(Relation index);
extern gi_hit *gpuivf_search_service(Relation index, uint32 dim,
									 const float4 *queries, uint32 nq,
									 uint32 k, uint32 probes, uint32 **found);

/* gpuivf_info.c */
extern Relation gpuivf_open_for_sql(Oid indexoid, Relation *heap_out);

/* gpuivf_scan.c */
extern IndexScanDesc gpuivf_beginscan(Relation index, int nkeys, int norderbys);
extern void gpuivf_rescan(IndexScanDesc scan, ScanKey keys, int nkeys,
						  ScanKey orderbys, int norderbys);
extern bool gpuivf_gettuple(IndexScanDesc scan, ScanDirection dir);
extern void gpuivf_endscan(IndexScanDesc scan);

/* gpuivf_cost.c */
extern void gpuivf_costestimate(PlannerInfo *root, IndexPath *path,
								double loop_count, Cost *indexStartupCost,
								Cost *indexTotalCost,
								Selectivity *indexSelectivity,
								double *indexCorrelation, double *indexPages);

#endif							/* GPUIVF_H */
