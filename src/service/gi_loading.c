/*
 * gi_loading.c
 *		Loading a store from its index pages, while other sessions keep
 *		inserting and deleting.
 *
 * A backend that finds a store missing sends LOAD_BEGIN with the kind's
 * state before it reads any list page, streams what it reads from the
 * pages in LOAD_CHUNKs, then sends LOAD_END.  Inserts and deletes from
 * other backends keep flowing meanwhile and are applied to the half-loaded
 * store.  The rule that keeps the loaded store equal to the pages, for
 * every key mode (one record per key, or one per list):
 *
 *	while a store loads, every key an INSERT or DELETE touched since
 *	LOAD_BEGIN is remembered, and a LOAD_CHUNK record of a remembered key
 *	is skipped.
 *
 * Backends write pages before they tell the service, and an INSERT brings
 * every record of its key.  So for a touched key the requests alone are
 * the truth: a chunk read from a page before a delete cannot bring the row
 * back, and a chunk read before a deleted TID was reused cannot add the
 * old row's records beside the new row's.  An untouched key did not change
 * since LOAD_BEGIN, so the pages, read after it, hold exactly its records.
 * A second loader gets BUSY; a load whose backend died or fell silent for
 * GI_LOAD_STALE_MS is taken over, which starts the store afresh.
 *
 * On a hot standby nobody inserts or deletes: WAL replay changes the
 * pages.  A store loaded there covers replay up to the position read
 * before its LOAD_BEGIN (synced_lsn); gi_standby.c keeps it following.
 */
#include "postgres.h"

#include <signal.h>

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "gi_device.h"
#include "gi_kind.h"
#include "gi_store_requests.h"

/* a load whose loader has been silent this long may be taken over */
#define GI_LOAD_STALE_MS	5000

/* an index's load that did not fit is tried again after this long at most */
#define GI_OVERSIZE_RETRY_MS	60000

static uint64 gi_next_load_token = 1;

/*
 * Indexes whose last load did not fit: the budget it passed, so that a
 * LOAD_BEGIN under no larger budget (within GI_OVERSIZE_RETRY_MS) is
 * answered OVER_BUDGET at once instead of loading up to the budget again
 * before every search in parts.  Only whole-index stores (part 0).
 */
typedef struct GiOversize
{
	GiStoreKey	key;			/* hash key: must be first */
	Oid			relfilenode;
	uint64		budget;			/* 0: no limit (the device was full) */
	TimestampTz when;
	int			sqlstate;
	char		errmsg[GI_ERRMSG_LEN];
} GiOversize;

static HTAB *gi_oversize = NULL;

void
gi_load_note_oversize(const GiStoreEntry *e, const GiWork *w)
{
	GiOversize *o;

	if (e->key.part != 0)
		return;
	if (gi_oversize == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(GiStoreKey);
		ctl.entrysize = sizeof(GiOversize);
		ctl.hcxt = TopMemoryContext;
		gi_oversize = hash_create("gpuindex stores that did not fit", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	o = hash_search(gi_oversize, &e->key, HASH_ENTER, NULL);
	o->relfilenode = e->relfilenode;
	o->budget = gi_store_budget((GiStoreEntry *) e);
	o->when = GetCurrentTimestamp();
	o->sqlstate = w->slot->rargs.sqlstate;
	strlcpy(o->errmsg, w->slot->rargs.errmsg, sizeof(o->errmsg));
}

void
gi_load_forget_oversize(const GiStoreKey *key)
{
	if (gi_oversize != NULL)
		(void) hash_search(gi_oversize, key, HASH_REMOVE, NULL);
}

/* answer OVER_BUDGET now when the index did not fit this budget lately */
static bool
known_oversize(GiWork *w, GiStoreEntry *e, uint64 budget)
{
	GiOversize *o;

	if (gi_oversize == NULL || e->key.part != 0)
		return false;
	o = hash_search(gi_oversize, &e->key, HASH_FIND, NULL);
	if (o == NULL)
		return false;
	if (o->relfilenode != w->slot->args.relfilenode ||
		TimestampDifferenceExceeds(o->when, GetCurrentTimestamp(), GI_OVERSIZE_RETRY_MS) ||
		(budget == 0 ? o->budget != 0 : budget > o->budget && o->budget != 0))
	{
		gi_load_forget_oversize(&e->key);
		return false;
	}
	w->slot->rargs.sqlstate = o->sqlstate;
	strlcpy(w->slot->rargs.errmsg, o->errmsg, sizeof(w->slot->rargs.errmsg));
	w->slot->rargs.count = 1;	/* known, not tried */
	gi_reply(w, GI_REPLY_OVER_BUDGET);
	return true;
}

static bool
loader_alive(GiStoreEntry *e)
{
	if (e->loader_pid == 0 || kill(e->loader_pid, 0) != 0)
		return false;
	return !TimestampDifferenceExceeds(e->load_activity, GetCurrentTimestamp(),
									   GI_LOAD_STALE_MS);
}

/* the kind's state, checked; false after answering */
static bool
check_state(GiWork *w, const GiServiceKind *kind, GiKindStore *ks)
{
	char		err[GI_ERRMSG_LEN];
	int			sqlstate;

	memset(ks, 0, sizeof(*ks));
	sqlstate = kind->check_state(w->buf, w->slot->in_size, ks, err, sizeof(err));
	if (sqlstate != 0)
	{
		gi_reply_error(w, sqlstate, "%s", err);
		return false;
	}
	if (ks->nlists == 0 || ks->summary_bytes > w->slot->in_size)
		elog(ERROR, "gpuindex store kind \"%s\" asks for %u lists and keeps %zu of %zu bytes",
			 kind->name, ks->nlists, (size_t) ks->summary_bytes,
			 (size_t) w->slot->in_size);
	return true;
}

void
gi_load_begin(GiWork *w)
{
	GiSlot	   *slot = w->slot;
	GiReqArgs  *a = &slot->args;
	const GiServiceKind *kind = gi_kind_get(a->kind);
	const gi_kind_ops *kops;
	GiKindStore ks;
	GiStoreEntry *e;
	GiStoreEntry old;
	bool		reload = false;
	bool		found;
	gi_store_params params;
	void	   *summary;
	gi_status	st;

	if (kind == NULL)
	{
		gi_reply_error(w, ERRCODE_FEATURE_NOT_SUPPORTED,
					   "gpuindex has no store kind %u", a->kind);
		return;
	}
	kops = gi_ops->kinds[a->kind];
	if (kops == NULL || kops->search == NULL)
	{
		gi_reply_error(w, ERRCODE_FEATURE_NOT_SUPPORTED,
					   "the gpuindex %s backend does not search %s stores",
					   gi_ops->name, kind->name);
		return;
	}
	if (!check_state(w, kind, &ks))
		return;

	e = gi_store_lookup(&slot->key);
	if (e && e->relfilenode == a->relfilenode)
	{
		/* a hot standby's store that missed changes of the pages is replaced */
		if (e->ready && e->synced_lsn >= a->lsn_from)
		{
			gi_reply(w, GI_REPLY_ALREADY_LOADED);
			return;
		}
		if (e->loader_pid != slot->pid && loader_alive(e))
		{
			gi_reply(w, GI_REPLY_BUSY);
			return;
		}
	}

	/* allocate first, so that an entry never lacks its summary */
	summary = MemoryContextAlloc(TopMemoryContext, Max(ks.summary_bytes, 1));
	memcpy(summary, w->buf, ks.summary_bytes);
	if (e)
	{
		/* stale pages (REINDEX, TRUNCATE), an abandoned load, or a reload */
		old = *e;
		reload = true;
		gi_store_remove(e);
	}
	e = gi_store_enter(&slot->key, &found);
	if (reload)
		memcpy((char *) e + GI_STORE_COUNTERS_OFFSET,
			   (char *) &old + GI_STORE_COUNTERS_OFFSET,
			   sizeof(GiStoreEntry) - GI_STORE_COUNTERS_OFFSET);
	e->kind = a->kind;
	e->owner = a->owner;
	e->summary = summary;

	memset(&params, 0, sizeof(params));
	params.nlists = ks.nlists;
	params.record_bytes = ks.record_bytes;
	params.key_mode = ks.key_mode;
	params.memory_limit = gi_store_budget(e);
	if (known_oversize(w, e, params.memory_limit))
	{
		gi_store_remove(e);
		return;
	}
	/*
	 * A part store exists to fit a budget: spread, it would need each
	 * list's least (a slab a list) on every device.
	 */
	st = gi_shards_create(&e->shards, a->kind, e->summary, &params, e->key.part == 0,
						  gi_stores_emptiest_device(), w->buf, slot->in_size);
	if (st != GI_OK)
	{
		e->relfilenode = a->relfilenode;
		if (gi_reply_over_budget(w, st))
			gi_load_note_oversize(e, w);
		else
			gi_reply_status(w, st);
		gi_store_remove(e);
		return;
	}
	e->relfilenode = a->relfilenode;
	e->tablespace = a->tablespace;
	e->synced_lsn = a->lsn;
	e->nlists = ks.nlists;
	e->record_bytes = ks.record_bytes;
	e->ready = false;
	e->load_token = gi_next_load_token++;
	e->loader_pid = slot->pid;
	e->load_activity = GetCurrentTimestamp();

	slot->rargs.token = e->load_token;
	gi_reply(w, GI_REPLY_OK);
}

GiStoreEntry *
gi_load_store(GiWork *w)
{
	GiStoreEntry *e = gi_store_of(&w->slot->key, w->slot->args.relfilenode);

	if (e == NULL || e->ready || e->load_token != w->slot->args.load_token)
	{
		/* taken over or dropped: the loader starts again */
		gi_reply(w, GI_REPLY_BUSY);
		return NULL;
	}
	e->load_activity = GetCurrentTimestamp();
	return e;
}

void
gi_load_end(GiWork *w)
{
	GiStoreEntry *e = gi_load_store(w);

	if (e == NULL)
		return;
	e->ready = true;
	e->loader_pid = 0;
	e->loads++;
	gi_load_forget_oversize(&e->key);
	if (e->touched)
	{
		hash_destroy(e->touched);
		e->touched = NULL;
	}
	gi_reply(w, GI_REPLY_OK);
}

void
gi_load_touch(GiStoreEntry *e, const uint64 *keys, uint32 n)
{
	if (e->ready || n == 0)
		return;
	if (e->touched == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(uint64);
		ctl.hcxt = TopMemoryContext;
		e->touched = hash_create("gpuindex keys touched while loading", 1024, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	for (uint32 i = 0; i < n; i++)
		(void) hash_search(e->touched, &keys[i], HASH_ENTER, NULL);
}

bool
gi_load_skips(GiStoreEntry *e, uint64 key)
{
	return !e->ready && e->touched &&
		hash_search(e->touched, &key, HASH_FIND, NULL) != NULL;
}
