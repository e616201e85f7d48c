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
 *	codebook pages		quantizer = 'pq' only: contiguous from
 *						meta->codebook_start, the m * ksub * dsub codebook
 *						floats (gi_kind_ivfpq.h order), one item a page
 *	data pages			per-list chains (gi_access.h), one item per indexed
 *						row (GpuivfTupleData: heap TID, then the vector, or
 *						with quantizer = 'pq' the row's code, padded to a
 *						multiple of 4 bytes)
 *
 * Every page carries a GiPageOpaqueData with GPUIVF_PAGE_ID.  Pages are
 * WAL-logged with GenericXLog (the bulk build logs full pages with
 * log_newpage_range at the end instead).  Chains, appends, VACUUM and page
 * recycling are the shared ones of src/access.
 *
 * The device service holds one store per index of kind GI_KIND_IVF
 * (GI_KIND_IVFPQ with quantizer = 'pq'); records are (key = heap TID,
 * list, vector or code).  Backends never search
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
#include "gi_kind_ivfpq.h"

#define GPUIVF_MAGIC		0x47495646	/* "GIVF" */
#define GPUIVF_VERSION		1
#define GPUIVF_METAPAGE_BLKNO	GI_METAPAGE_BLKNO
#define GPUIVF_PAGE_ID		0xFF8B

/* support functions of a gpuivf operator class */
#define GPUIVF_FLOATS_PROC	1	/* (coltype) -> real[]: the vector as floats */
#define GPUIVF_METRIC_PROC	2	/* () -> int4: a gi_metric code */
#define GPUIVF_NPROCS		2

/* gpuivf's own page kinds (GiPageOpaqueData.flags, beside GI_PAGE_*) */
#define GPUIVF_PAGE_LISTINFO	(1 << 1)
#define GPUIVF_PAGE_CODEBOOK	(1 << 2)

/* codebook floats per codebook page */
#define GPUIVF_CODEBOOK_PAGE_FLOATS ((uint32) (GI_MAX_ITEM_SIZE / sizeof(float4)))

/* the quantizer reloption: how a list stores its rows */
#define GPUIVF_QUANTIZER_FLAT	0	/* the vectors */
#define GPUIVF_QUANTIZER_PQ		1	/* product-quantizer codes of residuals */

/* pq_bits: codebook entries 2^pq_bits; codes of 4 bits or less two a byte */
#define GPUIVF_DEFAULT_PQ_BITS	8
#define GPUIVF_MIN_PQ_BITS		4
#define GPUIVF_MAX_PQ_BITS		8

/* PQ training: samples per codebook entry at most */
#define GPUIVF_PQ_SAMPLES_PER_ENTRY	100

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
	/* quantizer = 'pq' (zero for flat, as in indexes built before it) */
	uint32		quantizer;		/* GPUIVF_QUANTIZER_* */
	uint32		pq_m;			/* sub-spaces */
	uint32		pq_ksub;		/* entries per codebook */
	BlockNumber codebook_start; /* first codebook page; invalid: no
								 * codebooks yet (all entries zero) */
	uint32		pq_code_bits;	/* bits of a code in a record, 4 or 8; 0 in
								 * indexes built before codes were packed:
								 * 8 */
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

/* a data item: the header, then record_bytes of vector or code */
#define GPUIVF_RECORD_ITEM_SIZE(record_bytes) \
	(offsetof(GpuivfTupleData, vec) + (record_bytes))

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
	uint32		quantizer;		/* GPUIVF_QUANTIZER_* */
	uint32		pq_m;			/* PQ only: sub-spaces */
	uint32		pq_ksub;		/* PQ only: entries per codebook */
	uint32		pq_code_bits;	/* PQ only: bits of a code in a record */
	BlockNumber codebook_start;
	float4	   *centroids;		/* lists * dim */
	float4	   *cnorms;			/* lists: centroid norms (for cosine) */
	float4	   *codebooks;		/* PQ only: pq_ksub * dim (gi_kind_ivfpq.h) */
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
	int			quantizer;		/* offset of the string */
	int			pq_m;			/* 0: not given */
	int			pq_bits;		/* 0: not given */
} GpuivfOptions;

/* the quantizer options of an index, checked against its dimension */
typedef struct GpuivfQuantizer
{
	uint32		quantizer;		/* GPUIVF_QUANTIZER_* */
	uint32		pq_m;
	uint32		pq_ksub;
	uint32		pq_code_bits;	/* 4 when pq_ksub <= 16, else 8 */
} GpuivfQuantizer;

/* GUCs */
extern int	gpuivf_probes;
extern int	gpuivf_scan_batch;
extern int	gpuivf_iterative_scan;
extern int	gpuivf_max_probes;
extern int	gpuivf_pq_rerank;
extern int	gpuivf_pq_search;
extern int	gpuivf_pq_select;
extern double gpuivf_pq_threshold_scale;

/* gpuivf.iterative_scan */
#define GPUIVF_ITERATIVE_OFF		0
#define GPUIVF_ITERATIVE_RELAXED	1

/* gpuivf_options.c */
extern void gpuivf_init(void);
extern bytea *gpuivf_options(Datum reloptions, bool validate);
extern int	gpuivf_lists_option(Relation index);
extern GpuivfQuantizer gpuivf_quantizer_option(Relation index, uint32 dim);

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
								 BlockNumber listinfo_start,
								 const GpuivfQuantizer *quantizer,
								 BlockNumber codebook_start);
extern uint32 gpuivf_record_bytes(const GpuivfMeta *meta);
extern GpuivfMeta *gpuivf_get_meta(Relation index);
extern GiListRef gpuivf_list_ref(const GpuivfMeta *meta, uint32 list);
extern void gpuivf_list_dir(const GpuivfMeta *meta, GiListDir *dir);
extern void gpuivf_initialize_lists(Relation index, uint32 dim);
extern void gpuivf_append(Relation index, uint32 record_bytes, GiListRef ref,
						  ItemPointer heaptid, const void *record);

/* gpuivf_kmeans.c */
extern void gpuivf_kmeans_params(gi_kmeans_params *p, uint32 dim, uint32 lists,
								 uint32 metric);
extern uint32 gpuivf_kmeans(float4 *samples, int nsamples, int dim, int lists,
							uint32 metric, float4 *centroids);
extern void gpuivf_centroid_norms(const float4 *centroids, uint32 lists,
								  uint32 dim, float4 *norms);
extern uint32 gpuivf_nearest_list(const float4 *centroids, const float4 *cnorms,
								  uint32 lists, uint32 dim, uint32 metric,
								  const float4 *vec);

/* gpuivf_service_kmeans.c */
extern uint32 gpuivf_vectors_per_request(uint32 dim);
extern bool gpuivf_service_kmeans(Relation index, const char *what,
								  const float4 *samples, uint32 n, uint32 dim,
								  uint32 lists, uint32 metric, bool keep,
								  float4 *centroids, uint32 *k, uint64 *job);
extern void gpuivf_service_kmeans_failed(Relation index, uint64 *job,
										 const GiCall *call, const char *what);
extern void gpuivf_service_kmeans_end(uint64 *job);

/* gpuivf_pq.c */
extern void gpuivf_pq_train(Relation index, bool service, const float4 *samples,
							uint32 nsamples, uint32 dim, uint32 metric,
							const float4 *centroids, const float4 *cnorms,
							uint32 lists, const GpuivfQuantizer *qz,
							float4 *codebooks);
extern void gpuivf_pq_encode(const GpuivfMeta *meta, uint32 list,
							 const float4 *vec, uint8 *record);
extern void gpuivf_pq_encode_batch(const GpuivfMeta *meta, uint32 n,
								   const uint32 *lists, const float4 *vecs,
								   uint8 *records);
extern double gpuivf_exact_distance(uint32 metric, const float4 *a,
									const float4 *b, uint32 dim);

/* gpuivf_rerank.c */
typedef struct GpuivfRerank GpuivfRerank;
extern GpuivfRerank *gpuivf_rerank_begin(Relation index, Relation heap);
extern uint32 gpuivf_rerank(GpuivfRerank *rr, Snapshot snapshot, const float4 *query,
							uint32 dim, uint32 metric, gi_hit *hits, uint32 n);
extern void gpuivf_rerank_end(GpuivfRerank *rr);

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
extern void gpuivf_search_request(Relation index, uint32 dim, const float4 *queries,
								  uint32 nq, uint32 k, uint32 probes, GiCall *call);
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
