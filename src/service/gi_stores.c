/*
 * gi_stores.c
 *		The device service's registry of index stores.
 *
 * Keyed by (database, index OID); the entry remembers the relfilenode it
 * was loaded from so that REINDEX and TRUNCATE, which give the index new
 * pages, are noticed on the next request.  Lives in the service's
 * TopMemoryContext; the stores themselves are allocated by the backend
 * (host memory or device memory).
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "gi_service.h"

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

	if (entry->store && gi_ops)
		gi_ops->store_destroy(entry->store);
	entry->store = NULL;
	if (entry->centroids)
		pfree(entry->centroids);
	if (entry->tombstones)
		hash_destroy(entry->tombstones);
	hash_search(gi_stores, &key, HASH_REMOVE, NULL);
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

uint64
gi_stores_bytes(void)
{
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;
	uint64		total = 0;

	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		gi_store_stats st;

		if (e->store && gi_ops->store_stats(e->store, &st) == GI_OK)
			total += st.bytes;
	}
	return total;
}

uint64
gi_store_budget(GiStoreEntry *entry)
{
	uint64		limit = (uint64) gi_memory_limit_mb * 1024 * 1024;
	uint64		others = 0;
	HASH_SEQ_STATUS status;
	GiStoreEntry *e;

	if (limit == 0)
		return 0;
	hash_seq_init(&status, gi_stores);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		gi_store_stats st;

		if (e != entry && e->store && gi_ops->store_stats(e->store, &st) == GI_OK)
			others += st.bytes;
	}
	/* never 0, which would mean "no limit" */
	return others >= limit ? 1 : limit - others;
}

void
gi_tombstone_add(GiStoreEntry *entry, uint64 key)
{
	if (entry->tombstones == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(uint64);
		ctl.hcxt = TopMemoryContext;
		entry->tombstones = hash_create("gpuindex load tombstones", 1024, &ctl,
										HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	(void) hash_search(entry->tombstones, &key, HASH_ENTER, NULL);
}

void
gi_tombstone_remove(GiStoreEntry *entry, uint64 key)
{
	if (entry->tombstones)
		(void) hash_search(entry->tombstones, &key, HASH_REMOVE, NULL);
}

bool
gi_tombstone_has(GiStoreEntry *entry, uint64 key)
{
	return entry->tombstones &&
		hash_search(entry->tombstones, &key, HASH_FIND, NULL) != NULL;
}
