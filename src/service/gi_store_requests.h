/*
 * gi_store_requests.h
 *		The handlers of the requests on one store that the dispatcher calls:
 *		loading (gi_loading.c), merged writes (gi_write.c) and merged searches
 *		(gi_search.c).
 */
#ifndef GI_STORE_REQUESTS_H
#define GI_STORE_REQUESTS_H

#include "gi_reply.h"
#include "gi_stores.h"

/* loading protocol */
extern void gi_load_begin(GiWork *w);

/* an index's load did not fit (w answered OVER_BUDGET): remember it a while */
extern void gi_load_note_oversize(const GiStoreEntry *e, const GiWork *w);
extern void gi_load_forget_oversize(const GiStoreKey *key);
extern void gi_load_end(GiWork *w);

/* the store a LOAD_CHUNK belongs to, or NULL after answering BUSY */
extern GiStoreEntry *gi_load_store(GiWork *w);

/* a store loading: remember keys an INSERT or DELETE touched */
extern void gi_load_touch(GiStoreEntry *e, const uint64 *keys, uint32 n);

/* a store loading: must a LOAD_CHUNK record of key be skipped? */
extern bool gi_load_skips(GiStoreEntry *e, uint64 key);

/* requests of one store merged into one backend call each */
extern void gi_insert_group(GiStoreEntry *e, GiWork **group, int n);
extern void gi_delete_group(GiStoreEntry *e, GiWork **group, int n);
extern void gi_search_group(GiStoreEntry *e, GiWork **group, int n);

/*
 * The search left in flight past its round, if any (gi_search.c): whether
 * there is one, its requests, and whether the device is done with it;
 * land it (wait for it and answer its requests), which comes before any
 * other call of the compute backend; the landed requests, for the caller
 * to publish, and forgetting them once published.
 */
extern bool gi_search_flying(void);
extern int	gi_search_flight_requests(void);
extern bool gi_search_flight_done(void);
extern void gi_search_land(void);
extern int	gi_search_landed(GiWork **works);
extern void gi_search_landed_clear(void);

/* after a round: drop the stores that an INSERT nobody waits for failed */
extern void gi_drop_stores_of_lost_inserts(GiWork *work, int nwork);

#endif							/* GI_STORE_REQUESTS_H */
