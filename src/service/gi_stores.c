/*
 * gi_stores.c
 *		The device service's registry of index stores.
 *
 * Keyed by (database, index OID); the entry remembers the relfilenode it
 * was loaded from so that REINDEX and TRUNCATE, which give the index new
 * pages, are noticed on the next request.  Lives in the service's
 * TopMemoryContext; the stores themselves are allocated by the backend
 * (host memory or device memory) on their shards' devices.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/xlog.h"
#include "common/relpath.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_device.h"
#include "gi_service.h"
#include "gi_store_requests.h"
#include "gi_stores.h"

static HTAB *gi_stores = NULL;

void
gi_stores_init(void)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(GiStoreKey);
	ctl.entrysize = sizeof(GiStoreEntry);
	ctl.hcxt = TopMemoryContext;
	gi_stores = hash_create("gpuindex stores", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

GiStoreEntry *
gi_store_lookup(const GiStoreKey *key)
{
	return hash_search(gi_stores, key, HASH_FIND, NULL);
}

GiStoreEntry *
gi_store_of(const GiStoreKey *key, Oid relfilenode)
{
	GiStoreEntry *e = gi_store_lookup(key);

	if (e && e->relfilenode != relfilenode)
		return NULL;
	return e;
}

GiStoreEntry *
gi_store_enter(const GiStoreKey *key, bool *found)
{
	GiStoreEntry *entry = hash_search(gi_stores, key, HASH_ENTER, found);

	if (!*found)
	{
		GiStoreKey	k = entry->key;

		memset(entry, 0, sizeof(*entry));
		entry->key = k;
	}
	return entry;
}

/* destroy the store and forget the entry */
void
gi_store_remove(GiStoreEntry *entry)
{
	GiStoreKey	key = entry->key;

	gi_search_land();			/* it may be the flight's store */
	if (gi_ops)
		gi_shards_destroy(&entry->shards);
	if (entry->summary)
		pfree(entry->summary);
	if (entry->kdata.cxt)
		MemoryContextDelete(entry->kdata.cxt);
	if (entry->touched)
		hash_destroy(entry->touched);
	hash_search(gi_stores, &key, HASH_REMOVE, NULL);
}

/*
 * The first time the service sees recovery over (a promoted standby), it
 * drops the stores loaded during recovery: they may lack what replay did
 * after their last sync, and from now on changes reach the service as
 * requests, which such a store would miss.  Called before every round, so
 * before any request written after the promotion.
 */
void
gi_stores_end_recovery(void)
{
	static bool recovery_over = false;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;

	if (recovery_over || RecoveryInProgress())
		return;
	recovery_over = true;
	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
		if (e->synced_lsn != 0)
			gi_store_remove(e);
}

/*
 * On a hot standby, replay runs none of the hooks that drop a store with
 * its index, table or database: a store loaded there whose index file
 * replay has removed (or truncated to nothing, as an unlink leaves the
 * first segment until the next restartpoint) is dropped here.  Called
 * between rounds, at most once a second; returns whether stores loaded
 * during recovery remain, so that the service wakes to look again.
 */
bool
gi_stores_sweep_dropped(void)
{
	static TimestampTz next = 0;
	TimestampTz now;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;
	bool		remain = false;

	if (!RecoveryInProgress())
		return false;
	now = GetCurrentTimestamp();
	if (now < next)
		return true;
	next = TimestampTzPlusMilliseconds(now, GI_STORE_SWEEP_MS);
	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		RelFileNode rnode;
		char	   *path;
		struct stat st;
		bool		gone;

		if (e->synced_lsn == 0 || !e->ready)
		{
			remain |= (e->synced_lsn != 0);
			continue;
		}
		rnode.spcNode = e->tablespace;
		rnode.dbNode = e->key.dbid;
		rnode.relNode = e->relfilenode;
		path = relpathperm(rnode, MAIN_FORKNUM);
		if (stat(path, &st) == 0)
			gone = (st.st_size == 0);
		else
			gone = (errno == ENOENT);
		pfree(path);
		if (gone)
		{
			elog(LOG, "gpuindex device service: dropped the store of index %u of database %u, whose file replay removed",
				 e->key.relid, e->key.dbid);
			gi_store_remove(e);
		}
		else
			remain = true;
	}
	return remain;
}

long
gi_store_count(void)
{
	return hash_get_num_entries(gi_stores);
}

void
gi_stores_seq_init(HASH_SEQ_STATUS *status)
{
	hash_seq_init(status, gi_stores);
}

static uint64
store_bytes(GiStoreEntry *e)
{
	return gi_shards_bytes(&e->shards);
}

uint64
gi_stores_bytes(void)
{
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;
	uint64		total = 0;

	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
		total += store_bytes(e);
	return total;
}

int
gi_stores_emptiest_device(void)
{
	uint64	   *bytes;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;
	int			best = 0;

	if (gi_ndevices <= 1)
		return 0;
	bytes = palloc0(sizeof(uint64) * gi_ndevices);
	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
		for (int j = 0; j < e->shards.n; j++)
		{
			gi_store_stats st;

			if (gi_shard_stats(&e->shards.shard[j], &st))
				bytes[e->shards.shard[j].device] += st.bytes;
		}
	for (int i = 1; i < gi_ndevices; i++)
		if (bytes[i] < bytes[best])
			best = i;
	pfree(bytes);
	return best;
}

bool		gi_budget_by_role = false;

uint64
gi_store_budget(GiStoreEntry *entry)
{
	uint64		limit = (uint64) gi_memory_limit_mb * 1024 * 1024;
	uint64		role_limit = (uint64) gi_role_memory_limit_mb * 1024 * 1024;
	uint64		others = 0;
	uint64		owners = 0;
	uint64		budget = PG_UINT64_MAX;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;

	gi_budget_by_role = false;
	if (limit == 0 && role_limit == 0)
		return 0;
	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
		if (e != entry)
		{
			others += store_bytes(e);
			if (e->owner == entry->owner)
				owners += store_bytes(e);
		}
	/* never 0, which would mean "no limit" */
	if (limit != 0)
		budget = others >= limit ? 1 : limit - others;
	if (role_limit != 0 && (owners >= role_limit ? 1 : role_limit - owners) < budget)
	{
		budget = owners >= role_limit ? 1 : role_limit - owners;
		gi_budget_by_role = true;
	}
	return budget;
}
