/*
 * gi_stores.h
 *		The device service's registry of index stores.
 *
 * An entry is the same for every store kind: the store's generic
 * parameters, its shards (one backend store per device, gi_shards.h), the
 * kind's summary (an opaque prefix of the state it was loaded with), the
 * loading state and the counters of gpuindex_stats.
 */
#ifndef GI_STORES_H
#define GI_STORES_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/hsearch.h"

#include "gi_protocol.h"
#include "gi_shards.h"

typedef struct GiStoreEntry
{
	GiStoreKey	key;			/* hash key: must be first */
	Oid			relfilenode;
	Oid			tablespace;		/* of the pages, for gi_stores_sweep_dropped */
	uint32		kind;			/* gi_kind */
	Oid			owner;			/* the index's owner when it was loaded */
	uint32		nlists;
	uint32		record_bytes;
	void	   *summary;		/* the kind's, see GiKindStore */
	GiKindData	kdata;			/* the kind's own data, see GiKindData */
	GiShards	shards;			/* the store: one per device, or one */
	uint64		synced_lsn;		/* loaded on a hot standby: the WAL replay
								 * position the store covers; 0 elsewhere */

	/* loading: see gi_loading.c */
	bool		ready;
	uint64		load_token;
	int			loader_pid;
	TimestampTz load_activity;
	HTAB	   *touched;		/* keys inserted or deleted while loading */

	/* counters for gpuindex_stats: from here to the end, kept by reloads */
	uint64		searches;
	uint64		search_batches;
	double		us_per_query;	/* recent search cost, for slicing; 0: unknown */
	uint64		insert_requests;
	uint64		insert_batches;
	uint64		delete_requests;
	uint64		delete_batches;
	uint64		loads;
} GiStoreEntry;

extern void gi_stores_init(void);
extern GiStoreEntry *gi_store_lookup(const GiStoreKey *key);

/* the store a request may use: present and loaded from relfilenode */
extern GiStoreEntry *gi_store_of(const GiStoreKey *key, Oid relfilenode);
extern GiStoreEntry *gi_store_enter(const GiStoreKey *key, bool *found);
extern void gi_store_remove(GiStoreEntry *entry);
extern void gi_stores_end_recovery(void);
extern bool gi_stores_sweep_dropped(void);
extern long gi_store_count(void);
extern void gi_stores_seq_init(HASH_SEQ_STATUS *status);

#define GI_STORE_COUNTERS_OFFSET	offsetof(GiStoreEntry, searches)

/* how often a hot standby's service looks for stores of dropped indexes */
#define GI_STORE_SWEEP_MS			1000

/* bytes held by all stores */
extern uint64 gi_stores_bytes(void);

/* the device (index in gi_devices) whose stores' shards hold the fewest bytes */
extern int	gi_stores_emptiest_device(void);

/*
 * Bytes a store may still take under gpuindex.memory_limit and, with the
 * other stores of its owner, gpuindex.role_memory_limit (0 = no limit);
 * gi_budget_by_role says whether the role's limit was the smaller.
 */
extern uint64 gi_store_budget(GiStoreEntry *entry);
extern bool gi_budget_by_role;

#endif							/* GI_STORES_H */
