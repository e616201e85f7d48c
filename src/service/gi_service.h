/*
 * gi_service.h
 *		Inside the device service process: the chosen compute backend, the
 *		registry of stores, and the request handlers.
 *
 * Everything declared here runs only in the service's main thread.
 */
#ifndef GI_SERVICE_H
#define GI_SERVICE_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/hsearch.h"

#include "gi_protocol.h"
#include "gi_shmem.h"

/* ---- GUCs (gpuindex.c) ---- */
typedef enum GiDeviceChoice
{
	GI_DEVICE_AUTO,
	GI_DEVICE_CPU,
	GI_DEVICE_CUDA
} GiDeviceChoice;

extern int	gi_device_choice;
extern int	gi_memory_limit_mb;
extern int	gi_batch_linger_us;
extern bool gi_debug_service_kmeans;

/* ---- compute backend (gi_device.c) ---- */

/* the backend stores are created on; NULL when none is usable */
extern const gi_backend_ops *gi_ops;

/* why gi_ops is NULL (for the error every store request then gets) */
extern char gi_ops_unavailable[256];

extern void gi_device_init(void);

/* ---- store registry (gi_stores.c) ---- */
typedef struct GiStoreEntry
{
	GiStoreKey	key;			/* hash key: must be first */
	Oid			relfilenode;
	uint32		kind;
	uint32		nlists;
	uint32		dim;
	uint32		metric;
	uint32		record_bytes;
	float	   *centroids;		/* nlists * dim, service memory */
	gi_store   *store;

	/* loading: see gi_handle_load_begin() */
	bool		ready;
	uint64		load_token;
	int			loader_pid;
	TimestampTz load_activity;
	HTAB	   *tombstones;		/* keys deleted while loading */

	/* counters for gpuindex_stats */
	uint64		searches;
	uint64		search_batches;
	uint64		insert_requests;
	uint64		insert_batches;
	uint64		delete_requests;
	uint64		delete_batches;
	uint64		loads;
} GiStoreEntry;

extern void gi_stores_init(void);
extern GiStoreEntry *gi_store_lookup(const GiStoreKey *key);
extern GiStoreEntry *gi_store_enter(const GiStoreKey *key, bool *found);
extern void gi_store_remove(GiStoreEntry *entry);
extern long gi_store_count(void);
extern uint64 gi_stores_bytes(void);
extern void gi_stores_seq_init(HASH_SEQ_STATUS *status);

/* tombstones: keys deleted while a load is in flight */
extern void gi_tombstone_add(GiStoreEntry *entry, uint64 key);
extern void gi_tombstone_remove(GiStoreEntry *entry, uint64 key);
extern bool gi_tombstone_has(GiStoreEntry *entry, uint64 key);

/* bytes a store may still take under gpuindex.memory_limit (0 = no limit) */
extern uint64 gi_store_budget(GiStoreEntry *entry);

/* ---- request handling (gi_dispatch.c) ---- */

/* one request taken from a slot for this round */
typedef struct GiWork
{
	GiSlot	   *slot;
	dsm_segment *seg;			/* attached payload segment, or NULL */
	char	   *buf;			/* payload: slot->buf or the segment */
	bool		answered;
} GiWork;

extern void gi_dispatch_round(GiWork *work, int nwork);

/* k-means jobs of CREATE INDEX (gi_kmeans.c) */
extern void gi_kmeans_handle(GiWork *w);
extern void gi_kmeans_maintain(void);

/* answer helpers */
extern void gi_reply(GiWork *w, GiReply reply);
extern void gi_reply_error(GiWork *w, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);

/* service-wide counters (gi_worker.c) */
extern uint64 gi_requests_total;
extern uint64 gi_rounds_total;
extern uint64 gi_requests_by_type[GI_REQ_NTYPES];

#endif							/* GI_SERVICE_H */
