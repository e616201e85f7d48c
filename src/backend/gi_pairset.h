/*
 * gi_pairset.h
 *		A set of (key, list) pairs: what the stores use to skip a record
 *		whose pair is present under GI_KEYS_PER_LIST.
 *
 * Header-only plain C (static inline), shared by the host store and the
 * CUDA store's host-side planner.  Open addressing, linear probing,
 * backward-shift removal, load factor at most 1/2.  Each entry carries the
 * generation it was added in, and only entries of the set's current
 * generation are live: gi_pairset_clear empties the set in O(1) by
 * starting a new generation, which is what a per-run set needs.  How the
 * stores use two of these (one for the run of records of a key new to the
 * store, one for the keys brought again later) is in docs/architecture.md
 * ("Key modes").
 */
#ifndef GI_PAIRSET_H
#define GI_PAIRSET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gi_backend.h"

/* a list id no store uses: the lists of a store are < nlists <= UINT32_MAX */
#define GI_PAIRSET_MARK UINT32_MAX

typedef struct gi_pairset_ent
{
	uint64_t	key;
	uint32_t	list;
	uint32_t	gen;			/* live when equal to the set's gen */
} gi_pairset_ent;

typedef struct gi_pairset
{
	gi_pairset_ent *ents;		/* [cap], cap a power of two, or NULL */
	uint64_t	cap;
	uint64_t	count;
	uint32_t	gen;			/* >= 1; 0 marks a slot never used */
	void	   *(*alloc) (size_t size);	/* NULL: malloc */
} gi_pairset;

static inline void
gi_pairset_init(gi_pairset *ps, void *(*alloc) (size_t size))
{
	memset(ps, 0, sizeof(*ps));
	ps->gen = 1;
	ps->alloc = alloc;
}

static inline void
gi_pairset_free(gi_pairset *ps)
{
	free(ps->ents);
	ps->ents = NULL;
	ps->cap = 0;
	ps->count = 0;
}

static inline uint64_t
gi_pairset_bytes(const gi_pairset *ps)
{
	return ps->cap * sizeof(gi_pairset_ent);
}

static inline uint64_t
gi_pairset_home(const gi_pairset *ps, uint64_t key, uint32_t list)
{
	/* the murmur3 finalizer over the key and the list */
	uint64_t	k = key ^ ((uint64_t) list * UINT64_C(0x9E3779B97F4A7C15));

	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k & (ps->cap - 1);
}

static inline bool
gi_pairset_live(const gi_pairset *ps, uint64_t i)
{
	return ps->ents[i].gen == ps->gen;
}

/* empty the set in O(1); its memory stays for the next use */
static inline void
gi_pairset_clear(gi_pairset *ps)
{
	ps->count = 0;
	if (++ps->gen == 0)
	{
		/* the generations wrapped: forget every old one for good */
		if (ps->ents)
			memset(ps->ents, 0, ps->cap * sizeof(gi_pairset_ent));
		ps->gen = 1;
	}
}

/* slot of the pair, or UINT64_MAX; adds the slots examined to *steps */
static inline uint64_t
gi_pairset_find(const gi_pairset *ps, uint64_t key, uint32_t list,
				uint64_t *steps)
{
	uint64_t	i;

	if (ps->count == 0)
		return UINT64_MAX;
	for (i = gi_pairset_home(ps, key, list);; i = (i + 1) & (ps->cap - 1))
	{
		if (steps)
			(*steps)++;
		if (!gi_pairset_live(ps, i))
			return UINT64_MAX;
		if (ps->ents[i].key == key && ps->ents[i].list == list)
			return i;
	}
}

static inline bool
gi_pairset_has(const gi_pairset *ps, uint64_t key, uint32_t list,
			   uint64_t *steps)
{
	return gi_pairset_find(ps, key, list, steps) != UINT64_MAX;
}

/* capacity that keeps count + more pairs at a load of at most 1/2 */
static inline uint64_t
gi_pairset_cap_for(const gi_pairset *ps, uint64_t more)
{
	uint64_t	cap = ps->cap ? ps->cap : 64;

	while ((ps->count + more) * 2 > cap)
		cap *= 2;
	return cap;
}

/* rebuild with newcap slots; false (set unchanged) when out of memory */
static inline bool
gi_pairset_resize(gi_pairset *ps, uint64_t newcap)
{
	gi_pairset	n = *ps;
	uint64_t	i;

	if (newcap > SIZE_MAX / sizeof(gi_pairset_ent))
		return false;
	n.ents = (gi_pairset_ent *) (ps->alloc ? ps->alloc(newcap * sizeof(gi_pairset_ent))
								 : malloc(newcap * sizeof(gi_pairset_ent)));
	if (n.ents == NULL)
		return false;
	memset(n.ents, 0, newcap * sizeof(gi_pairset_ent));
	n.cap = newcap;
	n.gen = 1;
	for (i = 0; i < ps->cap; i++)
		if (gi_pairset_live(ps, i))
		{
			uint64_t	j = gi_pairset_home(&n, ps->ents[i].key, ps->ents[i].list);

			while (n.ents[j].gen != 0)
				j = (j + 1) & (newcap - 1);
			n.ents[j] = ps->ents[i];
			n.ents[j].gen = 1;
		}
	free(ps->ents);
	*ps = n;
	return true;
}

/* room for more pairs without a resize; false when out of memory */
static inline bool
gi_pairset_reserve(gi_pairset *ps, uint64_t more)
{
	uint64_t	cap = gi_pairset_cap_for(ps, more);

	return cap == ps->cap || gi_pairset_resize(ps, cap);
}

/*
 * Add a pair known to be absent; room must have been reserved.  Adds the
 * slots examined to *steps.
 */
static inline void
gi_pairset_put(gi_pairset *ps, uint64_t key, uint32_t list, uint64_t *steps)
{
	uint64_t	i = gi_pairset_home(ps, key, list);

	for (;; i = (i + 1) & (ps->cap - 1))
	{
		if (steps)
			(*steps)++;
		if (!gi_pairset_live(ps, i))
			break;
	}
	ps->ents[i].key = key;
	ps->ents[i].list = list;
	ps->ents[i].gen = ps->gen;
	ps->count++;
}

/*
 * Remove the pair if present: the later entries of its probe run move back
 * so that no tombstone is needed (an entry at j may fill the hole at i
 * unless its home lies cyclically in (i, j]).
 */
static inline void
gi_pairset_remove(gi_pairset *ps, uint64_t key, uint32_t list, uint64_t *steps)
{
	uint64_t	mask = ps->cap - 1;
	uint64_t	i = gi_pairset_find(ps, key, list, steps);
	uint64_t	j;

	if (i == UINT64_MAX)
		return;
	for (j = (i + 1) & mask; gi_pairset_live(ps, j); j = (j + 1) & mask)
	{
		uint64_t	home = gi_pairset_home(ps, ps->ents[j].key, ps->ents[j].list);

		if (steps)
			(*steps)++;
		if (((j - home) & mask) >= ((j - i) & mask))
		{
			ps->ents[i] = ps->ents[j];
			i = j;
		}
	}
	ps->ents[i].gen = 0;
	ps->count--;
}

/* ---- the GI_KEYS_PER_LIST rule over two sets ------------------------------ */

/* the list of a store's live row */
typedef uint32_t (*gi_pairs_list_fn) (const void *store, uint32_t row);

/*
 * The pairs a store consults to skip a present (key, list) pair.  The
 * records of a key absent from the store when its first record comes make
 * a run: its pairs go to `run`, which is small (one key's records) and so
 * stays in cache; the run lasts until a record of another absent key
 * starts the next one or the insert call ends.  Any other key is present
 * in the store: it gets its pairs into `kept` from its row chain the first
 * time it comes again, and keeps them there until it is deleted.  So a key
 * is walked once in its life however often it comes back, and a store
 * that is only loaded (each row's records together) and deleted from
 * holds no pair at all.
 */
typedef struct gi_pairs
{
	gi_pairset	run;
	gi_pairset	kept;
	uint64_t	run_key;
	bool		have_run;
	bool		in_run;			/* where gi_pairs_present found the key */
} gi_pairs;

/* run sets above this many slots are given back at the end of a call */
#define GI_PAIRS_RUN_KEEP 65536

static inline void
gi_pairs_init(gi_pairs *p, void *(*alloc) (size_t size))
{
	gi_pairset_init(&p->run, alloc);
	gi_pairset_init(&p->kept, alloc);
	p->have_run = false;
}

static inline void
gi_pairs_free(gi_pairs *p)
{
	gi_pairset_free(&p->run);
	gi_pairset_free(&p->kept);
	p->have_run = false;
}

/*
 * The most slots the kept set may have under a memory limit (0: none),
 * given the bytes the rest of the store holds.
 */
static inline uint64_t
gi_pairs_kept_cap_max(uint64_t limit, uint64_t rest)
{
	if (limit == 0)
		return UINT64_MAX;
	if (rest >= limit)
		return 0;
	return (limit - rest) / sizeof(gi_pairset_ent);
}

/* end the run (an insert call ends); a large run set is freed */
static inline void
gi_pairs_reset_call(gi_pairs *p)
{
	if (p->run.cap > GI_PAIRS_RUN_KEEP)
		gi_pairset_free(&p->run);
	gi_pairset_clear(&p->run);
	p->have_run = false;
}

/*
 * Is the pair (key, list) present?  first: the key's first row, GI_NIL
 * when the key is absent; its rows are chained through row_next.  A key
 * present before this call is walked into `kept` here once, with room
 * for one more pair; kept_cap_max bounds kept's slots (the memory limit).
 * Without that room the walk answers alone: a present pair is still
 * found, an absent one is over the limit.  1: present, 0: absent, -1: out
 * of memory, -2: over kept_cap_max.
 */
static inline int
gi_pairs_present(gi_pairs *p, uint64_t key, uint32_t list, uint32_t first,
				 const uint32_t *row_next, gi_pairs_list_fn list_of,
				 const void *store, uint64_t kept_cap_max, uint64_t *steps)
{
	uint64_t	n = 0;
	uint64_t	cap;
	uint32_t	row;

	p->in_run = true;
	/* every row of the run's key came in this run: its pairs are all in run */
	if (p->have_run && key == p->run_key)
		return gi_pairset_has(&p->run, key, list, steps);
	if (first == GI_NIL)
	{
		/* an absent key owns no pair: its records start a run */
		gi_pairset_clear(&p->run);
		p->run_key = key;
		p->have_run = true;
		return 0;
	}
	p->in_run = false;
	if (!gi_pairset_has(&p->kept, key, GI_PAIRSET_MARK, steps))
	{
		for (row = first; row != GI_NIL; row = row_next[row])
			n++;
		cap = gi_pairset_cap_for(&p->kept, n + 2);
		if (cap > kept_cap_max)
		{
			for (row = first; row != GI_NIL; row = row_next[row])
			{
				if (steps)
					(*steps)++;
				if (list_of(store, row) == list)
					return 1;
			}
			return -2;
		}
		if (!gi_pairset_reserve(&p->kept, n + 2))
			return -1;
		gi_pairset_put(&p->kept, key, GI_PAIRSET_MARK, steps);
		for (row = first; row != GI_NIL; row = row_next[row])
			gi_pairset_put(&p->kept, key, list_of(store, row), steps);
	}
	return gi_pairset_has(&p->kept, key, list, steps);
}

/*
 * Room for the pairs gi_pairs_added will put for the record gi_pairs_present
 * just found absent, before the record changes anything.  0, -1 (out of
 * memory) or -2 (over kept_cap_max).
 */
static inline int
gi_pairs_reserve(gi_pairs *p, uint64_t kept_cap_max)
{
	if (p->in_run)
		return gi_pairset_reserve(&p->run, 1) ? 0 : -1;
	if (gi_pairset_cap_for(&p->kept, 1) > kept_cap_max)
		return -2;
	return gi_pairset_reserve(&p->kept, 1) ? 0 : -1;
}

/* the record (key, list) that gi_pairs_present just found absent went in */
static inline void
gi_pairs_added(gi_pairs *p, uint64_t key, uint32_t list, uint64_t *steps)
{
	gi_pairset_put(p->in_run ? &p->run : &p->kept, key, list, steps);
}

/* the key (first row first, rows still in place) is being deleted */
static inline void
gi_pairs_forget(gi_pairs *p, uint64_t key, uint32_t first,
				const uint32_t *row_next, gi_pairs_list_fn list_of,
				const void *store, uint64_t *steps)
{
	uint32_t	row;

	if (p->kept.count == 0 || !gi_pairset_has(&p->kept, key, GI_PAIRSET_MARK, steps))
		return;
	for (row = first; row != GI_NIL; row = row_next[row])
		gi_pairset_remove(&p->kept, key, list_of(store, row), steps);
	gi_pairset_remove(&p->kept, key, GI_PAIRSET_MARK, steps);
}

/* ---- the stores' invariant checks ----------------------------------------- */

/*
 * A check of the pairs against a store: gi_pairs_check_key for each live
 * key, then gi_pairs_check_end.  It proves that no two live rows of a key
 * share a list, that no insert call left pairs behind, and that the kept
 * set holds exactly the pairs of the keys it marks.
 */
typedef struct gi_pairs_check
{
	gi_pairset	all;			/* every live row's pair */
	uint64_t	expect;			/* kept pairs the marked keys account for */
} gi_pairs_check;

static inline bool
gi_pairs_check_begin(gi_pairs_check *c, const gi_pairs *p, uint64_t rows,
					 char *err, size_t errlen)
{
	gi_pairset_init(&c->all, NULL);
	c->expect = 0;
	if (p->run.count != 0 || p->have_run)
	{
		snprintf(err, errlen, "%llu pairs left from an insert call's run",
				 (unsigned long long) p->run.count);
		return false;
	}
	if (!gi_pairset_reserve(&c->all, rows + 1))
	{
		snprintf(err, errlen, "out of memory checking the pairs");
		return false;
	}
	return true;
}

static inline bool
gi_pairs_check_key(gi_pairs_check *c, const gi_pairs *p, uint64_t key,
				   uint32_t first, const uint32_t *row_next,
				   gi_pairs_list_fn list_of, const void *store,
				   char *err, size_t errlen)
{
	bool		marked = gi_pairset_has(&p->kept, key, GI_PAIRSET_MARK, NULL);
	uint32_t	row;

	c->expect += marked;
	for (row = first; row != GI_NIL; row = row_next[row])
	{
		uint32_t	list = list_of(store, row);

		if (gi_pairset_has(&c->all, key, list, NULL))
		{
			snprintf(err, errlen, "key %llu has two rows in list %u",
					 (unsigned long long) key, list);
			return false;
		}
		gi_pairset_put(&c->all, key, list, NULL);
		if (marked && !gi_pairset_has(&p->kept, key, list, NULL))
		{
			snprintf(err, errlen, "kept pairs of key %llu miss list %u",
					 (unsigned long long) key, list);
			return false;
		}
		c->expect += marked;
	}
	return true;
}

static inline bool
gi_pairs_check_end(gi_pairs_check *c, const gi_pairs *p, char *err, size_t errlen)
{
	const gi_pairset *k = &p->kept;
	uint64_t	i;

	for (i = 0; i < k->cap; i++)
	{
		const gi_pairset_ent *e = &k->ents[i];

		if (!gi_pairset_live(k, i))
			continue;
		if (gi_pairset_find(k, e->key, e->list, NULL) != i)
		{
			snprintf(err, errlen, "kept pair (%llu, %u) is not found at its slot (probe run broken or duplicate)",
					 (unsigned long long) e->key, e->list);
			return false;
		}
		if (e->list != GI_PAIRSET_MARK &&
			!(gi_pairset_has(&c->all, e->key, e->list, NULL) &&
			  gi_pairset_has(k, e->key, GI_PAIRSET_MARK, NULL)))
		{
			snprintf(err, errlen, "kept pair (%llu, %u) is no live row's",
					 (unsigned long long) e->key, e->list);
			return false;
		}
	}
	/* with the above, a mark of a key that is gone shows here */
	if (c->expect != k->count)
	{
		snprintf(err, errlen, "kept pair set holds %llu pairs, its live keys %llu",
				 (unsigned long long) k->count, (unsigned long long) c->expect);
		return false;
	}
	return true;
}

static inline void
gi_pairs_check_free(gi_pairs_check *c)
{
	gi_pairset_free(&c->all);
}

#endif							/* GI_PAIRSET_H */
