/*
 * gi_protocol.h
 *		Requests between backends and the device service.
 *
 * A backend owns one request slot in shared memory (indexed by its
 * pgprocno) and has at most one request in flight.  The fixed part of a
 * request (type, store, small arguments) lives in the slot; the variable
 * part (vectors, keys, results) lives in the slot's inline buffer when it
 * fits and otherwise in a DSM segment the backend creates for the call.
 * The answer is written in place: reply code and small results in the
 * slot, variable results over the same buffer.
 *
 * Stores are named by (database, index OID) and carry the relfilenode
 * they were loaded from: a request naming another relfilenode (after
 * REINDEX or TRUNCATE) finds the store "not loaded" and the backend
 * reloads it from the index pages, which replaces the stale one.
 */
#ifndef GI_PROTOCOL_H
#define GI_PROTOCOL_H

#include <time.h>

#include "gi_backend.h"

/* inline payload buffer of each slot; larger payloads go through DSM */
#define GI_SLOT_INLINE		(16 * 1024)

/*
 * Payload segments up to this size are a session's kept one (gi_client.c),
 * which the service keeps mapped across requests (gi_worker.c); larger ones
 * belong to one request.
 */
#define GI_KEPT_SEGMENT_MAX	((Size) 2 * 1024 * 1024)

/* length of an error message carried back to the backend */
#define GI_ERRMSG_LEN		256

typedef enum GiReqType
{
	GI_REQ_NONE = 0,
	GI_REQ_PING,				/* empty round trip */
	GI_REQ_SERVICE_INFO,		/* out: GiServiceInfo */
	GI_REQ_STATS,				/* out: GiStoreStatRow[count]; one per store,
								 * or per shard with GI_STATS_SHARDS */
	GI_REQ_LOAD_BEGIN,			/* args: kind; in: the kind's state (IVF: a
								 * gi_ivf_state); starts (re)loading a store */
	GI_REQ_LOAD_CHUNK,			/* in: records (GiRecordsLayout) */
	GI_REQ_LOAD_END,			/* store becomes ready */
	GI_REQ_INSERT,				/* in: records (GiRecordsLayout) */
	GI_REQ_DELETE,				/* in: uint64 keys[n] */
	GI_REQ_DROP,				/* forget the store (DROP INDEX); relid
								 * InvalidOid: every store of the database
								 * (DROP DATABASE) */
	GI_REQ_SEARCH,				/* args: kind, n, k, kargs: the kind's search
								 * parameters; in: the kind's queries; out:
								 * hits and found (gi_search_*) */

	/*
	 * k-means for CREATE INDEX on the service's compute backend (CUDA),
	 * as a job owned by the requesting backend (see gi_kmeans.c).
	 * KMEANS_BEGIN is the question "do you train?": UNSUPPORTED when the
	 * backend has no kmeans entries (the host backend: the build trains in
	 * its own process, in parallel with other builds).
	 */
	GI_REQ_KMEANS_BEGIN,		/* args: n samples, GiKmeansArgs dim, nlists,
								 * metric, iterations, seed; answer:
								 * rargs.token (the job) */
	GI_REQ_KMEANS_DATA,			/* args: n, job, offset; in: float[n][dim] */
	GI_REQ_KMEANS_TRAIN,		/* args: job; answer: rargs.count centroids */
	GI_REQ_KMEANS_RESULT,		/* args: n, job, offset; out: float[n][dim] */
	GI_REQ_ASSIGN,				/* args: n, job, dim; in: float[n][dim];
								 * out: uint32 lists[n] (nearest centroid) */
	GI_REQ_KMEANS_END,			/* args: job; frees it */
	GI_REQ_DEBUG_FAULT,			/* test hook: args.n = GI_FAULT_* */
	GI_REQ_SYNCED,				/* hot standby: no WAL from args.lsn_from to
								 * args.lsn touched the index's pages */
	GI_REQ_NTYPES
} GiReqType;

typedef enum GiReply
{
	GI_REPLY_OK = 0,
	GI_REPLY_NOT_LOADED,		/* store absent, loading, or of another
								 * relfilenode: load it from the pages */
	GI_REPLY_BUSY,				/* another backend is loading it: retry */
	GI_REPLY_ALREADY_LOADED,	/* LOAD_BEGIN found it ready */
	GI_REPLY_TOO_SMALL,			/* answer needs rargs.out_needed bytes */
	GI_REPLY_RESTARTED,			/* service restarted mid-request: resubmit */
	GI_REPLY_ERROR,				/* rargs.sqlstate + rargs.errmsg */
	GI_REPLY_UNSUPPORTED,		/* the compute backend does not do this, or
								 * failed to (device out of memory, device
								 * error: rargs.errmsg says why): the
								 * requester does it itself */
	GI_REPLY_NO_JOB,			/* the k-means job is gone (service
								 * restarted): the requester does it itself */
	GI_REPLY_STALE,				/* hot standby: the store covers WAL replay
								 * up to rargs.lsn only, before args.lsn */
	GI_REPLY_OVER_BUDGET		/* LOAD_BEGIN, LOAD_CHUNK: the store does not
								 * fit the memory budget (or the device):
								 * rargs.errmsg says why, rargs.count 1 when
								 * known from a recent load, not tried */
} GiReply;

typedef struct GiStoreKey
{
	Oid			dbid;
	Oid			relid;			/* index OID */
	uint32		part;			/* 0: the index's store; else a session's
								 * private store of a part of the index,
								 * loaded for one search at a time */
} GiStoreKey;

/* bytes of kind (or k-means job) arguments a request carries */
#define GI_KARGS_BYTES		64

/*
 * Fixed-size request arguments.  The generic ones are named; what a store
 * kind or the k-means job needs travels in kargs, as a struct of its own
 * (the kind's search parameters, e.g. gi_ivf_search_params of
 * gi_kind_ivf.h; GiKmeansArgs below) read and written with GI_KARGS().
 */
typedef struct GiReqArgs
{
	Oid			relfilenode;	/* the pages this request refers to */
	Oid			owner;			/* LOAD_BEGIN: the index's owner (memory per role) */
	Oid			tablespace;		/* LOAD_BEGIN: the index's (a standby's sweep) */
	uint32		kind;			/* LOAD_BEGIN, SEARCH: gi_kind */
	uint32		n;				/* records, keys or queries in the payload */
	uint32		k;				/* SEARCH */
	uint64		load_token;		/* LOAD_CHUNK, LOAD_END */

	/*
	 * On a hot standby (0 elsewhere), WAL positions: SEARCH: the replay
	 * position the store must cover; LOAD_BEGIN: the one the loaded store
	 * will cover, and lsn_from: replace a ready store that covers less;
	 * SYNCED: a store covering lsn_from now covers lsn.
	 */
	uint64		lsn;
	uint64		lsn_from;
	uint32		flags;			/* GI_REQ_* */
	union
	{
		char		bytes[GI_KARGS_BYTES];
		uint64		align;
	}			kargs;
} GiReqArgs;

/* SEARCH: the compute backend times its stages (gpuindex.trace_stages) */
#define GI_REQ_TRACE		1

/*
 * INSERT sent at commit: no backend waits for the answer, so a failure
 * drops the store (reloaded from the pages) instead of failing anything
 */
#define GI_REQ_DETACHED		4

/* STATS: a row per shard of each store instead of one per store */
#define GI_STATS_SHARDS		2

/*
 * KMEANS_BEGIN: the backend's other open jobs stay (a build training its
 * PQ codebooks beside its lists' job); without it a BEGIN replaces them
 */
#define GI_REQ_KMEANS_KEEP	8

/* the kind's (or job's) argument struct inside a GiReqArgs */
#define GI_KARGS(args, type) \
	(StaticAssertExpr(sizeof(type) <= GI_KARGS_BYTES, "kind arguments too large"), \
	 (type *) (args)->kargs.bytes)

typedef struct GiRespArgs
{
	uint64		count;			/* records inserted/deleted, rows returned */
	uint64		out_size;		/* bytes of payload written back */
	uint64		out_needed;		/* GI_REPLY_TOO_SMALL: bytes required */
	uint64		token;			/* LOAD_BEGIN: the load's token for chunks
								 * and end; KMEANS_BEGIN: the job's */
	uint64		lsn;			/* GI_REPLY_STALE: what the store covers */
	int			sqlstate;		/* GI_REPLY_ERROR (and UNSUPPORTED: why) */
	char		errmsg[GI_ERRMSG_LEN];

	/*
	 * SEARCH: when the service took the request, began and ended the
	 * compute backend's search call that answered it (the last, when
	 * sliced) and wrote the answer (CLOCK_MONOTONIC ns, one clock for all
	 * processes); with GI_REQ_TRACE the backend's own stages of that call.
	 */
	uint64		t_taken;
	uint64		t_search;
	uint64		t_searched;
	uint64		t_answered;
	uint32		nstages;
	gi_stage_time stages[GI_MAX_STAGES];
} GiRespArgs;

/* CLOCK_MONOTONIC in nanoseconds: stage times across processes */
static inline uint64
gi_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64) ts.tv_sec * 1000000000 + (uint64) ts.tv_nsec;
}

/* faults GI_REQ_DEBUG_FAULT injects into the service (test hook) */
#define GI_FAULT_DEVICE		1	/* a device error: answer, then restart */
#define GI_FAULT_SIGNAL		2	/* a crash (SIGSEGV) inside the service */
#define GI_FAULT_CUDA		3	/* an illegal write by a CUDA kernel */
#define GI_FAULT_THREAD		4	/* an invalid write by a host pool thread */
#define GI_FAULT_STALL		5	/* the service sleeps GI_FAULT_STALL_MS, then
								 * answers */
#define GI_FAULT_STALL_MS	2000

/* the kargs of the KMEANS_* and ASSIGN requests */
typedef struct GiKmeansArgs
{
	uint32		dim;
	uint32		nlists;			/* KMEANS_BEGIN */
	uint32		metric;			/* KMEANS_BEGIN: gi_metric */
	uint32		iterations;		/* KMEANS_BEGIN */
	uint64		seed;			/* KMEANS_BEGIN */
	uint64		job;			/* from KMEANS_BEGIN's rargs.token */
	uint64		offset;			/* KMEANS_DATA, KMEANS_RESULT: first vector */
} GiKmeansArgs;

/* GI_REQ_SERVICE_INFO answer */
typedef struct GiServiceInfo
{
	int			pid;
	uint64		generation;
	char		backend[16];	/* "cpu" / "cuda" */
	char		device_name[128];	/* the first device's */
	uint32		devices;		/* devices the service uses */
	uint64		requests;		/* requests answered */
	uint64		rounds;			/* wake-ups that found work */
	uint64		round_ns;		/* wall time in those rounds */
	uint64		search_ns;		/* of it, in the compute backend's searches */
	uint64		stores;
	uint64		bytes;			/* all stores */
	uint64		requests_by_type[GI_REQ_NTYPES];
} GiServiceInfo;

/*
 * GI_REQ_STATS answer row, one per store (st: its shards' summed, lists:
 * each shard's; device: its first shard's) or one per shard (st: that
 * shard's)
 */
typedef struct GiStoreStatRow
{
	GiStoreKey	key;
	Oid			relfilenode;
	char		kind[16];		/* the kind's name */
	bool		ready;			/* false while loading */
	char		backend[16];
	int32		device;			/* the backend's ordinal of the device */
	int32		service_device; /* the service's number of it (gi_devices) */
	int32		shard;			/* per shard: which; -1 in a store's row */
	uint32		shards;			/* how many the store has */
	uint32		dim;			/* the kind's dimension; 0: none */
	char		metric[16];		/* the kind's metric; "": none */
	gi_store_stats st;
	uint64		searches;		/* queries answered */
	uint64		search_batches; /* backend search calls */
	uint64		insert_requests;
	uint64		insert_batches;
	uint64		delete_requests;
	uint64		delete_batches;
	uint64		loads;			/* completed loads */
} GiStoreStatRow;

/*
 * Records travel as three arrays back to back: keys (8-byte aligned
 * first), list numbers, then packed payloads.
 */
static inline Size
gi_records_size(uint32 n, uint32 record_bytes)
{
	return (Size) n * (sizeof(uint64) + sizeof(uint32) + record_bytes);
}

static inline uint64 *
gi_records_keys(void *buf)
{
	return (uint64 *) buf;
}

static inline uint32 *
gi_records_lists(void *buf, uint32 n)
{
	return (uint32 *) ((char *) buf + (Size) n * sizeof(uint64));
}

static inline void *
gi_records_payloads(void *buf, uint32 n)
{
	return (char *) buf + (Size) n * (sizeof(uint64) + sizeof(uint32));
}

/* search answers: hits[n * k] then found[n] */
static inline Size
gi_search_out_size(uint32 n, uint32 k)
{
	return (Size) n * k * sizeof(gi_hit) + (Size) n * sizeof(uint32);
}

static inline uint32 *
gi_search_found(void *buf, uint32 n, uint32 k)
{
	return (uint32 *) ((char *) buf + (Size) n * k * sizeof(gi_hit));
}

#endif							/* GI_PROTOCOL_H */
