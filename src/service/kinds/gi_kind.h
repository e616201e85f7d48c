/*
 * gi_kind.h
 *		Store kinds as the device service sees them.
 *
 * The service's store registry, dispatcher and protocol are the same for
 * every kind; what a kind adds lives in one file of src/service/kinds/
 * that fills a GiServiceKind and registers it from _PG_init: how its
 * LOAD_BEGIN state is checked and what store it asks for, how its search
 * requests are checked, grouped and merged, how its records are routed
 * when a store is spread over several devices, and what gpuindex_stats
 * shows of it.  The backend side of a kind is gi_backend_ops.kinds[kind].
 */
#ifndef GI_KIND_H
#define GI_KIND_H

#include "postgres.h"

#include "gi_protocol.h"
#include "gi_spread.h"

/* a search request as a kind sees it */
typedef struct GiKindSearch
{
	const GiReqArgs *args;		/* n queries, k, the kind's kargs */
	const void *queries;		/* the payload */
	Size		query_bytes;
} GiKindSearch;

/*
 * How a store spread over several devices routes records to its shards
 * (gi_shards.c keeps one per store).  The kinds fill it only through
 * gi_route_by_list and gi_route_by_key below.
 */
typedef struct GiShardMap
{
	uint32		nshards;
	uint32		nlists;
	uint32	   *list_owner;		/* by list: each list's shard (GI_NIL: none
								 * yet); NULL until a record is routed so */
	uint64	   *records;		/* records routed to each shard */
} GiShardMap;

/*
 * What a kind keeps of its own for one store beyond the summary (a term
 * dictionary, say): data allocated in cxt, which the service creates on
 * first use and deletes with the store.
 */
typedef struct GiKindData
{
	MemoryContext cxt;
	void	   *data;
} GiKindData;

/* the context of a store's GiKindData, created on first use */
extern MemoryContext gi_kind_data_cxt(GiKindData *kd);

/* what a kind's state asks of the store it is loaded into */
typedef struct GiKindStore
{
	uint32		nlists;
	uint32		record_bytes;
	uint32		key_mode;		/* gi_key_mode */
	Size		summary_bytes;	/* bytes at the start of the state that the
								 * service keeps for the calls below */
} GiKindStore;

typedef struct GiServiceKind
{
	gi_kind		kind;
	const char *name;			/* gpuindex_stats.kind */

	/*
	 * LOAD_BEGIN: check the kind's state (the request's payload, which then
	 * goes to the backend's set_state once) and say what store it needs.
	 * Returns 0, or an SQLSTATE with the reason in err.
	 */
	int			(*check_state) (const void *state, Size bytes, GiKindStore *store,
								char *err, Size errlen);

	/*
	 * SEARCH: check one request against the store's summary.  Requests on
	 * one store with the same k and the same *group merge into one backend
	 * search call.  Returns 0, or an SQLSTATE with the reason in err.
	 */
	int			(*check_search) (const void *summary, const GiKindSearch *req,
								 uint64 *group, char *err, Size errlen);

	/*
	 * The merged search of n checked requests of one group: the backend's
	 * search parameters into params (GI_KARGS_BYTES of room) and the
	 * queries of all requests in order, back to back (palloc'd, or a
	 * request's own payload), their size in *query_bytes.  kd is the
	 * store's data of the kind (map_lists).
	 */
	const void *(*merge_search) (const void *summary, GiKindData *kd,
								 const GiKindSearch *reqs, int n, void *params,
								 Size *query_bytes);

	/*
	 * Optional: the lists of n records of an INSERT or LOAD_CHUNK, as the
	 * request names them, rewritten in place into the store's lists before
	 * they are checked against nlists, with the store's data of the kind.
	 * Returns 0, or an SQLSTATE with the reason in err (the request fails,
	 * its records are not inserted).
	 */
	int			(*map_lists) (const void *summary, GiKindData *kd, uint32 n,
							  uint32 *lists, char *err, Size errlen);

	/*
	 * The bytes the first n queries of a checked request take at the start
	 * of its payload, so that a large batch can be searched a slice at a
	 * time; NULL: the kind's batches are served in one piece.
	 */
	Size		(*queries_size) (const void *summary, const char *queries, uint32 n);

	/*
	 * A store spread over several devices (map->nshards > 1): the shard
	 * each of n records goes to, into shards[n].  With lists, the records
	 * of an INSERT or LOAD_CHUNK; with lists NULL, the keys of a DELETE,
	 * where GI_SHARD_ALL says that the key's records may be on any shard
	 * (each shard is then asked; one that lacks the key ignores it).  The
	 * kind must route so that a search on every shard, merged by
	 * (distance, key), is the one store's search: every record a key is
	 * scored with on one shard, and a key's records always to the same
	 * shard.  Routing the same record twice must give the same shard.
	 */
	void		(*route) (const void *summary, GiShardMap *map, uint32 n,
						  const uint64 *keys, const uint32 *lists, uint32 *shards);

	/* gpuindex_stats: the store's dimension (0: none) and metric ("": none) */
	void		(*describe) (const void *summary, uint32 *dim, char *metric,
							 Size metric_len);
} GiServiceKind;

/* make a kind known to the service (from _PG_init) */
extern void gi_kind_register(const GiServiceKind *kind);

/* the registered kind, or NULL */
extern const GiServiceKind *gi_kind_get(uint32 kind);

/*
 * For merge_search: the queries of n requests back to back (the first
 * request's own payload when n is 1, else palloc'd).
 */
extern const void *gi_kind_concat_queries(const GiKindSearch *reqs, int n,
										  Size *query_bytes);

/*
 * For route: every record of a list on one shard, the lists placed as they
 * come to the shard with the fewest records so far (gi_list_shard); or
 * every record of a key on one shard, by a hash of the key (gi_key_shard).
 * Deletes (lists NULL) by list go to every shard.
 */
extern void gi_route_by_list(GiShardMap *map, uint32 n, const uint32 *lists,
							 uint32 *shards);
extern void gi_route_by_key(GiShardMap *map, uint32 n, const uint64 *keys,
							uint32 *shards);

/* the kinds the service knows */
extern const GiServiceKind gi_kind_ivf;
extern const GiServiceKind gi_kind_ivfpq;
extern const GiServiceKind gi_kind_sparse;

#endif							/* GI_KIND_H */
