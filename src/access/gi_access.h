/*
 * gi_access.h
 *		What every gpuindex access method shares on the PostgreSQL side: its
 *		store in the device service (key, calls that reload it, loading,
 *		record and delete streaming, the pending-insert queue) and the list
 *		page chains that hold its rows (page format, appends, walks, bulk
 *		build, VACUUM with free-page recycling), plus the continuation rule
 *		of searches.
 *
 * An access method brings its page layout around the chains (metapage,
 * where its list heads live), its item format (a heap TID, then bytes of
 * its own), its store kind and the kind's state.  docs/architecture.md
 * says why each mechanism works the way it does.
 */
#ifndef GI_ACCESS_H
#define GI_ACCESS_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/generic_xlog.h"
#include "access/xlogdefs.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/block.h"
#include "storage/buf.h"
#include "storage/bufpage.h"
#include "storage/itemptr.h"
#include "utils/catcache.h"
#include "utils/array.h"
#include "utils/rel.h"

#include "gi_client.h"

/* payload bytes per request when streaming records */
#define GI_CHUNK_BYTES		(4 * 1024 * 1024)

/* ---- the index's store in the device service (gi_store.c) ---- */

static inline GiStoreKey
gi_store_key(Relation index)
{
	GiStoreKey	key;

	key.dbid = MyDatabaseId;
	key.relid = RelationGetRelid(index);
	key.part = 0;
	return key;
}

/* the pages a store is loaded from; a request naming others reloads it */
static inline Oid
gi_store_relfilenode(Relation index)
{
	return index->rd_node.relNode;
}

/*
 * An access method's loader: loads the index's store from its pages (with
 * gi_load).  True when the store is ready, false when another backend
 * loads it or took the load over: the caller waits and asks again.
 */
typedef bool (*GiLoadFn) (Relation index);

extern void gi_backoff(int *attempt);
extern void gi_call_store(Relation index, GiCall *call, GiLoadFn load);
extern gi_hit *gi_search_answer(const GiCall *call, uint32 nq, uint32 k,
								uint32 **found);
extern GiCallAhead *gi_call_store_ahead(Relation index, GiCall *call);
extern void gi_call_store_ahead_end(Relation index, GiCall *call, GiCallAhead *h,
									GiLoadFn load);
extern void gi_store_replace(Relation index, GiLoadFn load);

/*
 * The keys of rows VACUUM removed from the pages, on their way to the
 * store, which drops every record of each key.  The caller fills
 * keys[filling][n++] (at most GI_DELETE_SEND_MAX) and calls
 * gi_deletes_send, which returns while the service works, so that the
 * caller's pass over its pages goes on beside it; gi_deletes_finish sends
 * the rest and waits for all, and gi_deletes_abort (from the caller's
 * PG_CATCH, or at the backend's exit) does the same for a failing pass.
 * Keys go only after their pages changed.
 */
#define GI_DELETE_SEND_MAX	(GI_SLOT_INLINE / sizeof(uint64))

typedef struct GiDeleteSender
{
	Relation	index;
	uint64	   *keys[2];		/* one filling, one in flight */
	int			filling;
	uint32		n;				/* keys in keys[filling] */
	bool		in_flight;
	GiCall		call;
} GiDeleteSender;

extern void gi_deletes_init(GiDeleteSender *ds, Relation index);
extern void gi_deletes_send(GiDeleteSender *ds);
extern void gi_deletes_finish(GiDeleteSender *ds);
extern void gi_deletes_abort(GiDeleteSender *ds);

/* ---- hot standbys: stores that follow WAL replay (gi_standby.c) ---- */

extern XLogRecPtr gi_load_replacing;
extern XLogRecPtr gi_standby_position(void);
extern bool gi_standby_catch_up(Relation index, XLogRecPtr from, XLogRecPtr to,
								GiLoadFn load);

/* ---- records (key, list, payload) on their way to the store (gi_records.c) ---- */

typedef struct GiRecordBuf
{
	uint32		record_bytes;	/* payload bytes of every record */
	uint32		n;				/* records held */
	uint32		cap;			/* records allocated */
	uint32		limit;			/* records per request: about GI_CHUNK_BYTES */
	uint64	   *keys;
	uint32	   *lists;
	char	   *payloads;		/* n * record_bytes, packed */
} GiRecordBuf;

extern void gi_records_init(GiRecordBuf *rb, MemoryContext cxt,
							uint32 record_bytes, uint32 initial);
extern void gi_records_reserve(GiRecordBuf *rb, uint32 n);
extern bool gi_records_add(GiRecordBuf *rb, uint64 key, uint32 list,
						   const void *payload);
extern GiReply gi_records_send(GiRecordBuf *rb, GiStoreKey key, Oid relfilenode,
							   GiReqType type, uint64 load_token);
extern void gi_records_send_detached(GiRecordBuf *rb, GiStoreKey key,
									 Oid relfilenode);
extern void gi_records_free(GiRecordBuf *rb);

/* ---- loading a store from the pages (gi_load.c) ---- */

typedef struct GiLoad GiLoad;

/*
 * An AM's walk over its pages: gi_load_emit for every record, stopping
 * when that answers false.
 */
typedef void (*GiLoadWalkFn) (GiLoad *load, void *arg);

typedef struct GiLoadSpec
{
	uint32		kind;			/* gi_kind */
	void	   *state;			/* the kind's state for LOAD_BEGIN, palloc'd:
								 * gi_load frees it once sent */
	Size		state_size;
	uint32		record_bytes;	/* payload bytes of every record */
	GiLoadWalkFn walk;
	void	   *walk_arg;
} GiLoadSpec;

struct GiLoad
{
	Relation	index;
	GiStoreKey	key;
	Oid			relfilenode;
	uint64		token;			/* from LOAD_BEGIN */
	GiRecordBuf records;
	bool		taken_over;		/* a chunk was answered BUSY */
	bool		over_budget;	/* a chunk was answered OVER_BUDGET */
};

extern bool gi_load(Relation index, GiLoadSpec *spec);

/* ---- where a search statement's time went (gi_stages.c) ---- */

typedef enum GiStageKind
{
	GI_STAGE_VISIBILITY,		/* heap fetches and visibility checks */
	GI_STAGE_ROWS				/* result rows */
} GiStageKind;

extern void gi_stages_begin(void);
extern void gi_stages_add(GiStageKind kind, uint64 ns);
extern void gi_stages_end(void);

/* ---- an index searched in parts when its store does not fit (gi_parts.c) ---- */

/* the part of the rows a load fills: all of them while gi_load_nparts is 0 */
extern uint32 gi_load_nparts;
extern uint32 gi_load_part;
extern bool gi_key_in_load_part(uint64 key);

/* set when a load was answered OVER_BUDGET (the service dropped the store) */
extern bool gi_load_over_budget;
extern void gi_load_note_over_budget(const GiRespArgs *rargs);
extern void gi_over_budget_error(void) pg_attribute_noreturn();
extern const char *gi_over_budget_reason(void);

/* a search (GI_REQ_SEARCH) answered from the index's parts in turn */
extern void gi_search_in_parts(Relation index, GiCall *call, GiLoadFn load);
extern bool gi_load_emit(GiLoad *load, uint64 key, uint32 list,
						 const void *payload);

/* ---- the pending-insert queue and indexes built here (gi_pending.c) ---- */

extern void gi_queue_row(Relation index, uint32 record_bytes, uint64 key,
						 uint32 n, const uint32 *lists, const void *payloads);
extern void gi_queue_insert(Relation index, uint32 record_bytes, uint64 key,
							uint32 list, const void *payload);
extern void gi_flush_inserts(Relation index);
extern void gi_remember_built(Relation index);

/* ---- pages (gi_page.c) ---- */

#define GI_METAPAGE_BLKNO	0

/* page kinds (GiPageOpaqueData.flags); bit 1 and bits 6-15 are the AM's */
#define GI_PAGE_META		(1 << 0)
#define GI_PAGE_DATA		(1 << 2)	/* a page of a list's chain */
#define GI_PAGE_DELETED		(1 << 3)	/* unlinked from its chain by VACUUM */
#define GI_PAGE_IDLE		(1 << 4)	/* empty at the last VACUUM */
#define GI_PAGE_SETTLED		(1 << 5)	/* metapage: no deleted page waits for
										 * the free space map */

/* the special space of every page of a gpuindex index */
typedef struct GiPageOpaqueData
{
	BlockNumber nextblkno;		/* next page of this chain, or invalid */
	uint16		flags;			/* GI_PAGE_* and the AM's */
	uint16		page_id;		/* the AM's, for tools like pg_filedump */
} GiPageOpaqueData;

typedef GiPageOpaqueData *GiPageOpaque;

#define GiPageGetOpaque(page) ((GiPageOpaque) PageGetSpecialPointer(page))

/* the largest item a page with one line pointer can take */
#define GI_MAX_ITEM_SIZE \
	(BLCKSZ - MAXALIGN(SizeOfPageHeaderData + sizeof(ItemIdData)) - \
	 MAXALIGN(sizeof(GiPageOpaqueData)))

extern void gi_init_page(Page page, uint16 flags, uint16 page_id);
extern Page gi_xlog_register(GenericXLogState *state, Buffer buf);
extern bool gi_page_recyclable(Page page);
extern Buffer gi_new_buffer(Relation index, ForkNumber forknum, bool building);

/* ---- list chains (gi_chain.c, gi_chain_build.c, gi_chain_vacuum.c) ---- */

/*
 * The head of a list: the first bytes of an item the AM keeps where it
 * likes (list-info pages, a term directory), found by a GiListRef.
 */
typedef struct GiListHeadData
{
	BlockNumber start;			/* first page of the chain, or invalid */
	BlockNumber insert;			/* a page of the chain that may have room */
} GiListHeadData;

typedef struct GiListRef
{
	BlockNumber blkno;			/* the page holding the head */
	OffsetNumber offnum;		/* its item */
} GiListRef;

/* every list of an index, for passes over all of them */
typedef struct GiListDir
{
	uint32		nlists;
	GiListRef	(*locate) (const void *arg, uint32 list);
	const void *arg;
} GiListDir;

/* one item of a chain, seen from a copy of its page; false: stop */
typedef bool (*GiItemFn) (void *arg, ItemPointer heaptid, const char *item,
						  Size itemsz);

extern bool gi_page_has_room(Page page, Size itemsz);
extern void gi_list_read(Relation index, GiListRef ref, BlockNumber *start,
						 BlockNumber *insert);
extern void gi_list_set_insert_page(Relation index, GiListRef ref,
									BlockNumber insert);
extern void gi_list_append(Relation index, uint16 page_id, GiListRef ref,
						   const void *item, Size itemsz);
extern bool gi_list_walk(Relation index, GiListRef ref,
						 BufferAccessStrategy bas, GiItemFn fn, void *arg);
extern void gi_load_lists(GiLoad *load, const GiListDir *dir,
						  Size payload_offset);

/* writing every chain at once in a build, without WAL (the caller logs) */
typedef struct GiChainBuild
{
	Relation	index;
	uint16		page_id;
	uint32		nlists;
	int64		list;			/* the list being written; -1: none yet */
	Buffer		buf;			/* its last page, exclusively locked */
	BlockNumber *start;			/* per list: first page, or invalid */
	BlockNumber *last;			/* per list: last page, or invalid */
} GiChainBuild;

extern void gi_chain_build_begin(GiChainBuild *cb, Relation index,
								 uint16 page_id, uint32 nlists);
extern void gi_chain_build_add(GiChainBuild *cb, uint32 list,
							   const void *item, Size itemsz);
extern void gi_chain_build_end(GiChainBuild *cb, const GiListDir *dir);

/* ---- dead rows kept apart from the pages (gi_deadlog.c) ---- */

/*
 * The head of an index's dead-row log, an item on a page of the AM's
 * choosing (it begins with the log's own list head).  VACUUM records the
 * heap TIDs of dead rows there, each with the VACUUM's generation, instead
 * of removing their items from the pages; an item whose TID the log holds
 * with a generation above the item's own is dead.  Once the log holds
 * limit_percent of the rows, a VACUUM removes the dead items from the
 * pages and empties the log (docs/architecture.md, "Dead-row log").
 */
typedef struct GiDeadLogHeadData
{
	GiListHeadData chain;		/* the log's pages */
	uint32		generation;		/* every ambulkdelete bumps it */
	uint32		pad;
	uint64		entries;		/* TIDs logged since the log was emptied */
	uint64		items;			/* live rows the last VACUUM counted */
} GiDeadLogHeadData;

/*
 * How an AM's pages use the log.  An AM with a log keeps a TID directory
 * as well: a chain holding each indexed row's heap TID once, as a bare
 * item, which VACUUM reads instead of the rows' own items.
 */
typedef struct GiDeadLogSpec
{
	GiListRef	head;			/* the GiDeadLogHeadData */
	GiListRef	tids;			/* the TID directory's GiListHeadData */
	uint16		page_id;		/* the AM's, for the log's pages */
	Size		gen_offset;		/* where an item keeps its uint32 generation */
	int			limit_percent;	/* 0: remove dead items at every VACUUM */
} GiDeadLogSpec;

typedef struct GiDeadLog GiDeadLog;

extern void gi_deadlog_init_head(GiDeadLogHeadData *head);
extern uint32 gi_deadlog_add_row(Relation index, const GiDeadLogSpec *spec,
								 ItemPointer heaptid);
extern GiDeadLog *gi_deadlog_read(Relation index, GiListRef head);
extern bool gi_deadlog_kills(const GiDeadLog *log, const char *item,
							 Size gen_offset);
extern void gi_deadlog_free(GiDeadLog *log);
extern uint32 gi_deadlog_bump(Relation index, GiListRef head,
							  GiDeadLogHeadData *before);
extern void gi_deadlog_append(Relation index, const GiDeadLogSpec *spec,
							  uint32 generation, const uint64 *keys, uint32 n);
extern void gi_deadlog_account(Relation index, GiListRef head, uint64 added,
							   uint64 items);
extern void gi_deadlog_clear(Relation index, const GiDeadLogSpec *spec,
							 uint64 items);

extern IndexBulkDeleteResult *gi_lists_bulkdelete(IndexVacuumInfo *info,
												  IndexBulkDeleteResult *stats,
												  IndexBulkDeleteCallback callback,
												  void *callback_state,
												  const GiListDir *dir,
												  Size itemsz,
												  const GiDeadLogSpec *deadlog);
extern IndexBulkDeleteResult *gi_lists_vacuumcleanup(IndexVacuumInfo *info,
													 IndexBulkDeleteResult *stats);

/* ---- searches that continue where the last answer ended (gi_hits.c) ---- */

/*
 * The service answers hits in ascending (distance, key) order,
 * deterministically; a search asked again with a larger k continues after
 * the last hit returned.
 */
typedef struct GiHitCursor
{
	bool		have_last;
	float		last_dist;
	uint64		last_key;
} GiHitCursor;

extern bool gi_hit_cursor_next(GiHitCursor *cur, const gi_hit *hit);
extern int	gi_hit_cmp(const void *a, const void *b);

/*
 * The start of every gpuindex AM's scan state (scan->opaque): what the
 * shared scan code fills in.  limit: rows the statement fetches at most
 * before a rescan, 0 unknown (gi_scan_limit.c).
 */
typedef struct GiScanHead
{
	uint64		limit;
} GiScanHead;

extern IndexScanDesc gi_scan_begin(Relation index, int nkeys, int norderbys,
								   Size opaque_size);
extern void gi_scan_return(IndexScanDesc scan, uint64 key, double value);

/* ---- the LIMIT above a scan (gi_scan_limit.c) ---- */

extern bool gi_limit_hint;
extern void gi_scan_limit_init(void);
extern uint64 gi_scan_limit_of(Relation index);
extern uint32 gi_scan_first_k(IndexScanDesc scan, uint32 batch, uint32 max_k,
							  bool may_shrink);

static inline void
gi_hit_cursor_reset(GiHitCursor *cur)
{
	cur->have_last = false;
}

/* ---- handlers and operator-class validation (gi_handler.c) ---- */

extern IndexAmRoutine *gi_am_routine(uint16 nprocs);
extern bool gi_am_is_ours(const IndexAmRoutine *am);
extern bool gi_validate_orderby_ops(const char *amname, const char *opclassname,
									Oid opcintype, CatCList *oprlist,
									bool any_right);

/* ---- SQL functions over an index (gi_batch.c) ---- */

extern Relation gi_open_index_for_sql(Oid indexoid, const char *amname,
									  const char *opname,
									  bool (*is_ours) (Relation index),
									  Relation *heap_out);

/*
 * A batch search: nq queries, the k best visible rows of each.  The AM
 * fills the fields, gi_batch_key_column the key column of the forms that
 * return one; gi_batch_run does the rest.
 */
typedef struct GiBatch
{
	Relation	index;
	Relation	heap;
	int			nq;
	int			k;
	uint32		max_k;			/* hits one service search may ask for */
	const char *fname;			/* for messages */
	AttrNumber	keyatt;			/* InvalidAttrNumber: return the ctid */
	int16		keylen;
	bool		keybyval;

	/*
	 * Search queries qidx[0..n-1] (0-based positions in the call) with
	 * kreq hits each: returns hits[n * kreq] (palloc'd) and *found[n].
	 */
	gi_hit	   *(*search) (void *arg, const int *qidx, int n, uint32 kreq,
						   uint32 **found);

	/*
	 * Optional: the same search in two halves, so that the driver checks
	 * one call's rows while the service searches the next.  search_ahead
	 * sends the request and returns a handle, or NULL when this search
	 * cannot go ahead (the driver then calls search); search_ahead_end
	 * waits for the answer and returns what search would.
	 */
	void	   *(*search_ahead) (void *arg, const int *qidx, int n, uint32 kreq);
	gi_hit	   *(*search_ahead_end) (void *arg, void *ahead, uint32 **found);
	/* the value the SQL operator gives for a service distance (NULL: itself) */
	double		(*distance) (void *arg, float distance);
	void	   *arg;
} GiBatch;

/* a visible row of a batch's answer, with its key column when asked for */
typedef struct GiBatchRow
{
	ItemPointerData tid;
	double		distance;
	Datum		key;
	bool		keynull;
} GiBatchRow;

/* the answer to one query of a batch, in (distance, key) order */
typedef struct GiBatchQuery
{
	GiBatchRow *rows;			/* up to k, grown on demand */
	int			nrows;
	int			cap;
	bool		more;			/* the service may have more hits */
	GiHitCursor cursor;			/* after the last hit seen */
} GiBatchQuery;

extern Datum *gi_batch_query_elems(ArrayType *arr, const char *elemname, int max,
								   int *nq_out);
extern void gi_batch_key_column(GiBatch *b, FunctionCallInfo fcinfo, int keyarg);
extern GiBatchQuery *gi_batch_collect(GiBatch *b);
extern void gi_batch_run(GiBatch *b, FunctionCallInfo fcinfo);
extern bool gi_batch_null_args(FunctionCallInfo fcinfo, int nargs);

static inline void
gi_key_to_tid(uint64 key, ItemPointer tid)
{
	ItemPointerSet(tid, gi_key_block(key), gi_key_offset(key));
}

static inline uint64
gi_tid_key(ItemPointer tid)
{
	return gi_tid_to_key(ItemPointerGetBlockNumber(tid),
						 ItemPointerGetOffsetNumber(tid));
}

#endif							/* GI_ACCESS_H */
