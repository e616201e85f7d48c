/*
 * host_store.c
 *		The host backend's slab list store (DESIGN.md section 2).
 *
 * Plain C99 (gnu99), no PostgreSQL headers: this file is linked both into
 * gpuindex.so and into the cmocka unit tests.  It mirrors what the CUDA
 * store does so that the two can be compared record for record:
 *
 *	- a pool of slabs of GI_SLAB_RECORDS slots, grown chunk_slabs at a time
 *	  by realloc'ing flat arrays; every link is an index, never a pointer,
 *	  so growth may move the arrays freely;
 *	- each slab has next/prev links (doubly linked so that an emptied slab
 *	  leaves its list in O(1)), its list id, a live count and a 32-bit
 *	  validity bitmap; per slot a row id and a key; the payload of a slab
 *	  is word-interleaved (word j of slot i at payload[j * 32 + i]);
 *	- insert fills the list's head slab, else takes a slab from the free
 *	  stack (else from the never-used tail of the pool, else grows the
 *	  pool) and makes it the new head;
 *	- rows are dense ids reused through a free-row stack; the ATT maps a
 *	  row to slab << 32 | slot; rows of one key are chained through
 *	  row_next so that a key owning many rows is deleted in time
 *	  proportional to its own rows;
 *	- a key -> first row hash map (open addressing, linear probing and
 *	  backward-shift deletion, so no tombstones ever accumulate); with
 *	  GI_KEYS_PER_LIST the pair sets of gi_pairset.h make the "one record
 *	  per list" check O(1) however many records the key owns;
 *	- a slab whose count drops to zero is unlinked and pushed on the free
 *	  stack at once;
 *	- every live key has a dense ordinal (reused through a free stack once
 *	  the key's last row is gone), kept per slot, so that a kind can score
 *	  a key owning many records in one array cell (gi_host_store_kid_key).
 *
 * Every operation that can fail (growth of the pool or of a map) is done
 * before the record being inserted touches any structure, so an error
 * mid-batch leaves the records before it inserted and the store consistent.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gi_pairset.h"
#include "host_pool.h"
#include "host_store.h"

/* slab header; five words, kept apart from the slot arrays */
typedef struct gi_host_slab
{
	uint32_t	next;
	uint32_t	prev;
	uint32_t	list;			/* GI_NIL when free or never used */
	uint32_t	count;
	uint32_t	bitmap;
} gi_host_slab;

/* ATT value of a row that is not live */
#define GI_HOST_ATT_NONE	UINT64_MAX

#define GI_HOST_FULL_BITMAP 0xFFFFFFFFu

/*
 * Row ids are uint32 with GI_NIL reserved, and there is at most one row per
 * slot, so the pool may hold at most this many slabs.
 */
#define GI_HOST_MAX_SLABS	((uint32_t) (UINT32_MAX / GI_SLAB_RECORDS))

/* sanity bound on record size, keeps every size computation in range */
#define GI_HOST_MAX_RECORD_BYTES (1u << 20)

/* initial capacity of a hash map (power of two) */
#define GI_HOST_MAP_INITIAL 64

/*
 * An open-addressing hash map from a key to a row.  A slot is empty when
 * its row is GI_NIL, so every key value is legal.  An entry fills 16
 * bytes, so a probe touches one cache line.
 */
typedef struct gi_host_mapent
{
	uint64_t	key;
	uint32_t	row;
	uint32_t	unused;
} gi_host_mapent;

typedef struct gi_host_map
{
	uint64_t	cap;			/* power of two */
	uint64_t	count;
	gi_host_mapent *ents;		/* [cap] */
} gi_host_map;

struct gi_store
{
	gi_store_params params;
	uint32_t	words;			/* record_bytes / 4 */

	uint32_t   *list_head;		/* [nlists] */

	/* slab pool: capacity nslabs; slabs >= slab_hwm have never been used */
	uint32_t	nslabs;
	uint32_t	slab_hwm;
	gi_host_slab *slabs;		/* [nslabs] */
	uint32_t   *slot_row;		/* [nslabs * 32] */
	uint64_t   *slot_key;		/* [nslabs * 32] */
	uint32_t   *payload;		/* [nslabs * 32 * words], interleaved */
	uint32_t   *free_slabs;		/* stack, [nslabs] */
	uint32_t	nfree_slabs;

	/*
	 * Rows: at most one per slot, so the row arrays share the pool's
	 * capacity (nslabs * 32) and grow with it.
	 */
	uint32_t	row_hwm;		/* rows >= row_hwm have never been used */
	uint64_t   *att;			/* [nslabs * 32] row -> slab << 32 | slot */
	uint32_t   *row_next;		/* [nslabs * 32] next row of the same key */
	uint32_t   *free_rows;		/* stack, [nslabs * 32] */
	uint32_t	nfree_rows;

	/*
	 * Key ordinals: at most one live key per row, so these share the row
	 * capacity too.
	 */
	uint32_t   *slot_kid;		/* [nslabs * 32] ordinal of the slot's key */
	uint64_t   *kid_key;		/* [nslabs * 32] ordinal -> key */
	uint32_t   *free_kids;		/* stack, [nslabs * 32] */
	uint32_t	kid_hwm;		/* ordinals >= kid_hwm have never been used */
	uint32_t	nfree_kids;

	/* key -> first row of the key's chain */
	gi_host_map keymap;

	/* the pairs of GI_KEYS_PER_LIST's check (unused otherwise) */
	gi_pairs	pairs;

	/* map slots examined and chain rows visited by inserts and deletes */
	uint64_t	steps;

	uint64_t	rows;
	uint64_t	slabs_used;
	uint64_t	inserts;
	uint64_t	deletes;

	/* what the store's kind keeps (set_state), freed with the store */
	void	   *kind_state;
	void		(*kind_state_free) (void *state);
};

/* the host is one device */
struct gi_device
{
	int			ordinal;
};

static gi_device gi_host_the_device = {0};

/* ---- errors ------------------------------------------------------------ */

static __thread char gi_host_errbuf[512];

void
gi_host_set_error(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(gi_host_errbuf, sizeof(gi_host_errbuf), fmt, ap);
	va_end(ap);
}

const char *
gi_host_last_error(void)
{
	return gi_host_errbuf;
}

/* ---- allocation (with fault injection for the tests) ------------------- */

static __thread int64_t gi_host_fail_after = -1;

void
gi_host_store_fail_alloc_after(int64_t after)
{
	gi_host_fail_after = after;
}

static void *
gi_host_realloc(void *ptr, size_t size)
{
	if (gi_host_fail_after >= 0 && gi_host_fail_after-- == 0)
		return NULL;
	return realloc(ptr, size);
}

static void *
gi_host_malloc(size_t size)
{
	return gi_host_realloc(NULL, size);
}

/* ---- sizes -------------------------------------------------------------- */

/*
 * Bytes the store holds with a pool of nslabs slabs, a key map of keys_cap
 * entries and a kept pair set of pairs_cap slots: the single source of
 * truth for both the stats and the memory limit, so that the two can
 * never disagree.  An insert call's own pair set is transient and not
 * counted.
 */
static uint64_t
gi_host_bytes_for(const gi_store *s, uint64_t nslabs, uint64_t keys_cap,
				  uint64_t pairs_cap)
{
	uint64_t	per_slab;

	per_slab = sizeof(gi_host_slab) + sizeof(uint32_t)	/* header, free stack */
		+ (uint64_t) GI_SLAB_RECORDS *
		(sizeof(uint32_t) + sizeof(uint64_t)	/* slot row, slot key */
		 + (uint64_t) s->words * sizeof(uint32_t)	/* payload */
		 + sizeof(uint64_t) + 2 * sizeof(uint32_t)	/* att, next, free */
		 + 2 * sizeof(uint32_t) + sizeof(uint64_t));	/* key ordinals */

	return sizeof(gi_store)
		+ (uint64_t) s->params.nlists * sizeof(uint32_t)
		+ nslabs * per_slab
		+ keys_cap * sizeof(gi_host_mapent)
		+ pairs_cap * sizeof(gi_pairset_ent);
}

/* bytes held now, with a pool of nslabs slabs */
static inline uint64_t
gi_host_bytes_with_slabs(const gi_store *s, uint64_t nslabs)
{
	return gi_host_bytes_for(s, nslabs, s->keymap.cap, s->pairs.kept.cap);
}

static gi_status
gi_host_limit_error(const gi_store *s, uint64_t need)
{
	gi_host_set_error("store would need %llu bytes, over the limit of %llu bytes (gpuindex.memory_limit)",
					  (unsigned long long) need,
					  (unsigned long long) s->params.memory_limit);
	return GI_ERR_LIMIT;
}

/* ---- hash maps ----------------------------------------------------------- */

/* the murmur3 finalizer: TIDs differ in few low bits, so mix them all */
static inline uint64_t
gi_host_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k;
}

/* home slot of a key */
static inline uint64_t
gi_host_map_home(const gi_host_map *m, uint64_t key)
{
	return gi_host_hash(key) & (m->cap - 1);
}

#define GI_HOST_MAP_NONE UINT64_MAX

/*
 * Slot of key, or GI_HOST_MAP_NONE.  Adds the slots examined to *steps
 * when steps is not NULL.
 */
static uint64_t
gi_host_map_find(const gi_host_map *m, uint64_t key, uint64_t *steps)
{
	uint64_t	mask = m->cap - 1;
	uint64_t	i = gi_host_map_home(m, key);
	uint64_t	n = 1;
	uint64_t	found = GI_HOST_MAP_NONE;

	/* the load factor bound guarantees an empty slot, so this terminates */
	while (m->ents[i].row != GI_NIL)
	{
		if (m->ents[i].key == key)
		{
			found = i;
			break;
		}
		i = (i + 1) & mask;
		n++;
	}
	if (steps)
		*steps += n;
	return found;
}

/* add an entry known to be absent; capacity already ensured */
static void
gi_host_map_put(gi_host_map *m, uint64_t key, uint32_t row)
{
	uint64_t	mask = m->cap - 1;
	uint64_t	i = gi_host_map_home(m, key);

	while (m->ents[i].row != GI_NIL)
		i = (i + 1) & mask;
	m->ents[i].key = key;
	m->ents[i].unused = 0;
	m->ents[i].row = row;
	m->count++;
}

/*
 * Remove entry i, shifting later entries of the probe run back so that no
 * tombstone is needed: an entry at j may move into the hole at i unless
 * its home position lies cyclically in (i, j].
 */
static void
gi_host_map_remove(gi_host_map *m, uint64_t i, uint64_t *steps)
{
	uint64_t	mask = m->cap - 1;
	uint64_t	j = i;

	for (;;)
	{
		uint64_t	home;

		j = (j + 1) & mask;
		(*steps)++;
		if (m->ents[j].row == GI_NIL)
			break;
		home = gi_host_map_home(m, m->ents[j].key);
		if (((j - home) & mask) >= ((j - i) & mask))
		{
			m->ents[i] = m->ents[j];
			i = j;
		}
	}
	m->ents[i].row = GI_NIL;
	m->count--;
}

/* does adding one more entry keep the load factor at or under 2/3? */
static inline bool
gi_host_map_has_room(const gi_host_map *m)
{
	return (m->count + 1) * 3 <= m->cap * 2;
}

static void
gi_host_map_free(gi_host_map *m)
{
	free(m->ents);
	m->ents = NULL;
}

/*
 * Rebuild the key map of store s with newcap entries, checked against the
 * memory limit first; on failure the map is unchanged.
 */
static gi_status
gi_host_map_resize(gi_store *s, uint64_t newcap)
{
	gi_host_map *m = &s->keymap;
	gi_host_map n;
	uint64_t	need;
	uint64_t	i;

	need = gi_host_bytes_for(s, s->nslabs, newcap, s->pairs.kept.cap);
	if (s->params.memory_limit != 0 && need > s->params.memory_limit)
		return gi_host_limit_error(s, need);
	if (newcap > SIZE_MAX / sizeof(gi_host_mapent))
	{
		gi_host_set_error("key map of %llu entries is too large",
						  (unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}

	memset(&n, 0, sizeof(n));
	n.cap = newcap;
	n.ents = gi_host_malloc(newcap * sizeof(gi_host_mapent));
	if (n.ents == NULL)
	{
		gi_host_set_error("out of memory growing the key map to %llu entries",
						  (unsigned long long) newcap);
		return GI_ERR_NOMEM;
	}
	/* every field, so that no byte of the map is ever undefined */
	for (i = 0; i < newcap; i++)
	{
		n.ents[i].key = 0;
		n.ents[i].unused = 0;
		n.ents[i].row = GI_NIL;
	}

	for (i = 0; i < m->cap; i++)
		if (m->ents[i].row != GI_NIL)
			gi_host_map_put(&n, m->ents[i].key, m->ents[i].row);

	gi_host_map_free(m);
	*m = n;
	return GI_OK;
}

/* make room for one more key */
static inline gi_status
gi_host_map_reserve(gi_store *s)
{
	if (gi_host_map_has_room(&s->keymap))
		return GI_OK;
	return gi_host_map_resize(s, s->keymap.cap * 2);
}

/* ---- slab pool ---------------------------------------------------------- */

/* realloc one pool array; on failure *ptr is unchanged */
static bool
gi_host_grow_array(void **ptr, uint64_t elems, size_t elem_size)
{
	void	   *p;

	if (elems > SIZE_MAX / elem_size)
		return false;
	p = gi_host_realloc(*ptr, (size_t) elems * elem_size);
	if (p == NULL)
		return false;
	*ptr = p;
	return true;
}

/*
 * Grow the pool by chunk_slabs (less when only less fits under the memory
 * limit, so that the whole limit is usable).  All pool arrays are resized
 * together; if one realloc fails the ones already grown are shrunk back,
 * so that the byte count stays exact.
 */
static gi_status
gi_host_grow_pool(gi_store *s)
{
	uint64_t	old = s->nslabs;
	/*
	 * Grow geometrically up to one chunk at a time: a small index should
	 * not pay for a whole chunk, a large one should not realloc often.
	 */
	uint64_t	step = old < 16 ? 16 : old;
	uint64_t	want;
	uint64_t	slots;
	uint64_t	oldslots = old * GI_SLAB_RECORDS;
	uint64_t	i;

	if (step > s->params.chunk_slabs)
		step = s->params.chunk_slabs;
	want = old + step;

	if (want > GI_HOST_MAX_SLABS)
		want = GI_HOST_MAX_SLABS;
	if (want <= old)
	{
		gi_host_set_error("store is full: at most %u slabs of %u records",
						  GI_HOST_MAX_SLABS, GI_SLAB_RECORDS);
		return GI_ERR_LIMIT;
	}
	if (s->params.memory_limit != 0)
	{
		uint64_t	base = gi_host_bytes_with_slabs(s, old);
		uint64_t	per_slab = gi_host_bytes_with_slabs(s, old + 1) - base;

		if (gi_host_bytes_with_slabs(s, want) > s->params.memory_limit)
		{
			if (base + per_slab > s->params.memory_limit)
				return gi_host_limit_error(s, base + per_slab);
			want = old + (s->params.memory_limit - base) / per_slab;
		}
	}
	slots = want * GI_SLAB_RECORDS;

	{
		/* every pool array with its element size and per-slab multiplier */
		void	  **arrays[] = {
			(void **) &s->slabs, (void **) &s->free_slabs,
			(void **) &s->slot_row, (void **) &s->slot_key,
			(void **) &s->payload,
			(void **) &s->att, (void **) &s->row_next, (void **) &s->free_rows,
			(void **) &s->slot_kid, (void **) &s->kid_key, (void **) &s->free_kids
		};
		size_t		sizes[] = {
			sizeof(gi_host_slab), sizeof(uint32_t),
			sizeof(uint32_t), sizeof(uint64_t),
			(size_t) s->words * sizeof(uint32_t),
			sizeof(uint64_t), sizeof(uint32_t), sizeof(uint32_t),
			sizeof(uint32_t), sizeof(uint64_t), sizeof(uint32_t)
		};
		uint64_t	per[] = {1, 1, GI_SLAB_RECORDS, GI_SLAB_RECORDS,
			GI_SLAB_RECORDS, GI_SLAB_RECORDS, GI_SLAB_RECORDS, GI_SLAB_RECORDS,
		GI_SLAB_RECORDS, GI_SLAB_RECORDS, GI_SLAB_RECORDS};
		int			n = (int) (sizeof(sizes) / sizeof(sizes[0]));
		int			a;

		for (a = 0; a < n; a++)
		{
			if (!gi_host_grow_array(arrays[a], want * per[a], sizes[a]))
			{
				int			b;

				for (b = 0; b < a; b++)
				{
					if (old == 0)
					{
						free(*arrays[b]);
						*arrays[b] = NULL;
					}
					else
						(void) gi_host_grow_array(arrays[b], old * per[b], sizes[b]);
				}
				gi_host_set_error("out of memory growing the store to %llu slabs",
								  (unsigned long long) want);
				return GI_ERR_NOMEM;
			}
		}
	}

	/*
	 * Define every new byte: searches compute over whole slabs, valid bit
	 * or not, and only the bitmap decides what counts.
	 */
	for (i = old; i < want; i++)
	{
		s->slabs[i].next = GI_NIL;
		s->slabs[i].prev = GI_NIL;
		s->slabs[i].list = GI_NIL;
		s->slabs[i].count = 0;
		s->slabs[i].bitmap = 0;
	}
	memset(s->slot_row + oldslots, 0xFF, (slots - oldslots) * sizeof(uint32_t));
	memset(s->slot_key + oldslots, 0, (slots - oldslots) * sizeof(uint64_t));
	memset(s->payload + oldslots * s->words, 0,
		   (slots - oldslots) * s->words * sizeof(uint32_t));
	memset(s->att + oldslots, 0xFF, (slots - oldslots) * sizeof(uint64_t));
	memset(s->row_next + oldslots, 0xFF, (slots - oldslots) * sizeof(uint32_t));
	memset(s->slot_kid + oldslots, 0xFF, (slots - oldslots) * sizeof(uint32_t));
	memset(s->kid_key + oldslots, 0, (slots - oldslots) * sizeof(uint64_t));

	s->nslabs = (uint32_t) want;
	return GI_OK;
}

/* unlink an emptied slab from its list and push it on the free stack */
static void
gi_host_release_slab(gi_store *s, uint32_t slab)
{
	gi_host_slab *h = &s->slabs[slab];

	if (h->prev != GI_NIL)
		s->slabs[h->prev].next = h->next;
	else
		s->list_head[h->list] = h->next;
	if (h->next != GI_NIL)
		s->slabs[h->next].prev = h->prev;
	h->next = GI_NIL;
	h->prev = GI_NIL;
	h->list = GI_NIL;
	s->free_slabs[s->nfree_slabs++] = slab;
	s->slabs_used--;
}

/* ---- create / destroy ---------------------------------------------------- */

static void
gi_host_store_destroy(gi_store *s)
{
	if (s == NULL)
		return;
	if (s->kind_state && s->kind_state_free)
		s->kind_state_free(s->kind_state);
	free(s->list_head);
	free(s->slabs);
	free(s->slot_row);
	free(s->slot_key);
	free(s->payload);
	free(s->free_slabs);
	free(s->att);
	free(s->row_next);
	free(s->free_rows);
	free(s->slot_kid);
	free(s->kid_key);
	free(s->free_kids);
	gi_host_map_free(&s->keymap);
	gi_pairs_free(&s->pairs);
	free(s);
}

static gi_status
gi_host_store_create(const gi_store_params *params, gi_store **out)
{
	gi_store   *s;
	gi_status	st;
	uint64_t	need;
	uint32_t	i;

	if (out == NULL || params == NULL)
	{
		gi_host_set_error("store_create: params and out must not be NULL");
		return GI_ERR_INVALID;
	}
	*out = NULL;
	if (params->nlists == 0)
	{
		gi_host_set_error("a store needs at least one list");
		return GI_ERR_INVALID;
	}
	if (params->nlists == GI_NIL)
	{
		gi_host_set_error("too many lists: %u", params->nlists);
		return GI_ERR_INVALID;
	}
	if (params->record_bytes == 0 || params->record_bytes % 4 != 0)
	{
		gi_host_set_error("record size %u is not a positive multiple of 4 bytes",
						  params->record_bytes);
		return GI_ERR_INVALID;
	}
	if (params->key_mode > GI_KEYS_PER_LIST)
	{
		gi_host_set_error("unknown key mode %u", params->key_mode);
		return GI_ERR_INVALID;
	}
	if (params->device != NULL && params->device != &gi_host_the_device)
	{
		gi_host_set_error("store_create: the device is not the host's");
		return GI_ERR_INVALID;
	}
	if (params->record_bytes > GI_HOST_MAX_RECORD_BYTES)
	{
		gi_host_set_error("record size %u is over the maximum of %u bytes",
						  params->record_bytes, GI_HOST_MAX_RECORD_BYTES);
		return GI_ERR_INVALID;
	}

	s = gi_host_malloc(sizeof(gi_store));
	if (s == NULL)
	{
		gi_host_set_error("out of memory creating a store");
		return GI_ERR_NOMEM;
	}
	memset(s, 0, sizeof(gi_store));
	s->params = *params;
	if (s->params.chunk_slabs == 0)
		s->params.chunk_slabs = GI_HOST_DEFAULT_CHUNK_SLABS;
	s->words = params->record_bytes / 4;

	gi_pairs_init(&s->pairs, gi_host_malloc);
	need = gi_host_bytes_for(s, 0, GI_HOST_MAP_INITIAL, 0);
	if (s->params.memory_limit != 0 && need > s->params.memory_limit)
	{
		st = gi_host_limit_error(s, need);
		free(s);
		return st;
	}

	s->list_head = gi_host_malloc((size_t) s->params.nlists * sizeof(uint32_t));
	if (s->list_head == NULL)
	{
		free(s);
		gi_host_set_error("out of memory creating a store of %u lists",
						  params->nlists);
		return GI_ERR_NOMEM;
	}
	for (i = 0; i < s->params.nlists; i++)
		s->list_head[i] = GI_NIL;

	st = gi_host_map_resize(s, GI_HOST_MAP_INITIAL);
	if (st != GI_OK)
	{
		gi_host_store_destroy(s);
		return st;
	}

	*out = s;
	return GI_OK;
}

/* ---- insert -------------------------------------------------------------- */

/* write a packed record into slot `slot` of slab `slab`, interleaved */
static void
gi_host_scatter(gi_store *s, uint32_t slab, uint32_t slot, const void *src)
{
	uint32_t   *base = s->payload + (uint64_t) slab * GI_SLAB_RECORDS * s->words;
	const unsigned char *p = src;
	uint32_t	j;

	for (j = 0; j < s->words; j++)
		memcpy(&base[(uint64_t) j * GI_SLAB_RECORDS + slot], p + 4 * (size_t) j, 4);
}

static void
gi_host_gather(const gi_store *s, uint32_t slab, uint32_t slot, void *dst)
{
	const uint32_t *base = s->payload + (uint64_t) slab * GI_SLAB_RECORDS * s->words;
	unsigned char *p = dst;
	uint32_t	j;

	for (j = 0; j < s->words; j++)
		memcpy(p + 4 * (size_t) j, &base[(uint64_t) j * GI_SLAB_RECORDS + slot], 4);
}

/* the key ordinal of a live row */
static inline uint32_t
gi_host_row_kid(const gi_store *s, uint32_t row)
{
	uint64_t	a = s->att[row];

	return s->slot_kid[(a >> 32) * GI_SLAB_RECORDS + (a & 0xFFFFFFFFu)];
}

/* the list of a live row (gi_pairs_list_fn) */
static uint32_t
gi_host_row_list(const void *store, uint32_t row)
{
	const gi_store *s = store;

	return s->slabs[s->att[row] >> 32].list;
}

/* the most slots the kept pair set may have under the memory limit */
static uint64_t
gi_host_kept_cap_max(const gi_store *s)
{
	return gi_pairs_kept_cap_max(s->params.memory_limit,
								 gi_host_bytes_for(s, s->nslabs, s->keymap.cap, 0));
}

/* the status of a gi_pairs call that answered rc < 0 */
static gi_status
gi_host_pairs_error(const gi_store *s, int rc)
{
	if (rc == -2)
		return gi_host_limit_error(s, gi_host_bytes_for(s, s->nslabs, s->keymap.cap,
														gi_pairset_cap_for(&s->pairs.kept, 2)));
	gi_host_set_error("out of memory growing the (key, list) pair set");
	return GI_ERR_NOMEM;
}

/*
 * Insert one record unless the key mode forbids it.  The check sees the
 * records inserted before, this batch's included, so the second of a
 * repeated key (UNIQUE) or (key, list) pair (PER_LIST) is skipped too.
 */
static gi_status
gi_host_insert_one(gi_store *s, uint32_t list, uint64_t key,
				   const void *payload, bool *inserted)
{
	bool		per_list = s->params.key_mode == GI_KEYS_PER_LIST;
	uint64_t	mi = gi_host_map_find(&s->keymap, key, &s->steps);
	uint32_t	head;
	uint32_t	slab;
	uint32_t	slot;
	uint32_t	row;
	uint32_t	kid;
	gi_host_slab *h;
	gi_status	st;
	int			rc;

	*inserted = false;
	if (mi != GI_HOST_MAP_NONE && s->params.key_mode == GI_KEYS_UNIQUE)
		return GI_OK;
	if (per_list)
	{
		rc = gi_pairs_present(&s->pairs, key, list,
							  mi == GI_HOST_MAP_NONE ? GI_NIL : s->keymap.ents[mi].row,
							  s->row_next, gi_host_row_list, s,
							  gi_host_kept_cap_max(s), &s->steps);
		if (rc < 0)
			return gi_host_pairs_error(s, rc);
		if (rc == 1)
			return GI_OK;
	}

	/* first everything that can fail, before any structure changes */
	if (mi == GI_HOST_MAP_NONE)
	{
		st = gi_host_map_reserve(s);
		if (st != GI_OK)
			return st;
	}
	if (per_list)
	{
		rc = gi_pairs_reserve(&s->pairs, gi_host_kept_cap_max(s));
		if (rc < 0)
			return gi_host_pairs_error(s, rc);
	}
	head = s->list_head[list];
	if (head == GI_NIL || s->slabs[head].bitmap == GI_HOST_FULL_BITMAP)
	{
		if (s->nfree_slabs > 0)
			slab = s->free_slabs[--s->nfree_slabs];
		else
		{
			if (s->slab_hwm == s->nslabs)
			{
				st = gi_host_grow_pool(s);
				if (st != GI_OK)
					return st;
			}
			slab = s->slab_hwm++;
		}
		/* the new slab becomes the list's head */
		h = &s->slabs[slab];
		h->list = list;
		h->prev = GI_NIL;
		h->next = head;
		if (head != GI_NIL)
			s->slabs[head].prev = slab;
		s->list_head[list] = slab;
		s->slabs_used++;
		head = slab;
	}
	h = &s->slabs[head];
	slot = (uint32_t) __builtin_ctz(~h->bitmap);

	/* live rows < slots in the pool, so a row id is always available */
	if (s->nfree_rows > 0)
		row = s->free_rows[--s->nfree_rows];
	else
		row = s->row_hwm++;

	/* a new key takes an ordinal; live keys <= live rows, so one is free */
	if (mi == GI_HOST_MAP_NONE)
	{
		kid = s->nfree_kids > 0 ? s->free_kids[--s->nfree_kids] : s->kid_hwm++;
		s->kid_key[kid] = key;
	}
	else
		kid = gi_host_row_kid(s, s->keymap.ents[mi].row);

	gi_host_scatter(s, head, slot, payload);
	s->slot_row[(uint64_t) head * GI_SLAB_RECORDS + slot] = row;
	s->slot_kid[(uint64_t) head * GI_SLAB_RECORDS + slot] = kid;
	s->slot_key[(uint64_t) head * GI_SLAB_RECORDS + slot] = key;
	/* publish last, as the device does: the bit is what readers trust */
	h->bitmap |= (uint32_t) 1 << slot;
	h->count++;
	s->att[row] = ((uint64_t) head << 32) | slot;

	if (mi == GI_HOST_MAP_NONE)
	{
		s->row_next[row] = GI_NIL;
		gi_host_map_put(&s->keymap, key, row);
	}
	else
	{
		s->row_next[row] = s->keymap.ents[mi].row;
		s->keymap.ents[mi].row = row;
	}
	if (per_list)
		gi_pairs_added(&s->pairs, key, list, &s->steps);
	s->rows++;
	s->inserts++;
	*inserted = true;
	return GI_OK;
}

static gi_status
gi_host_store_insert(gi_store *s, uint32_t n, const uint32_t *lists,
					 const uint64_t *keys, const void *payloads,
					 uint64_t *ninserted)
{
	const unsigned char *p = payloads;
	uint64_t	done = 0;
	gi_status	st = GI_OK;
	uint32_t	i;

	if (ninserted)
		*ninserted = 0;
	if (s == NULL)
	{
		gi_host_set_error("store_insert: no store");
		return GI_ERR_INVALID;
	}
	if (n == 0)
		return GI_OK;
	if (lists == NULL || keys == NULL || payloads == NULL)
	{
		gi_host_set_error("store_insert: lists, keys and payloads must not be NULL");
		return GI_ERR_INVALID;
	}
	/* validate the whole batch first: a bad list inserts nothing */
	for (i = 0; i < n; i++)
	{
		if (lists[i] >= s->params.nlists)
		{
			gi_host_set_error("list %u out of range: the store has %u lists",
							  lists[i], s->params.nlists);
			return GI_ERR_INVALID;
		}
	}

	for (i = 0; i < n; i++)
	{
		bool		inserted;

		st = gi_host_insert_one(s, lists[i], keys[i],
								p + (size_t) i * s->params.record_bytes,
								&inserted);
		if (st != GI_OK)
			break;
		if (inserted)
			done++;
	}
	gi_pairs_reset_call(&s->pairs);
	if (ninserted)
		*ninserted = done;
	return st;
}

/* ---- delete -------------------------------------------------------------- */

/*
 * Remove a live row; its key map entry is the caller's business.  Only the
 * slab's bitmap says which slots are live, so the slot arrays keep the
 * dead row's values (an insert overwrites them): one line of memory, the
 * slab's header, is all a removal touches at random.
 */
static void
gi_host_remove_row(gi_store *s, uint32_t row)
{
	uint64_t	a = s->att[row];
	uint32_t	slab = (uint32_t) (a >> 32);
	uint32_t	slot = (uint32_t) (a & 0xFFFFFFFFu);
	gi_host_slab *h = &s->slabs[slab];

	h->bitmap &= ~((uint32_t) 1 << slot);
	h->count--;
	s->att[row] = GI_HOST_ATT_NONE;
	s->row_next[row] = GI_NIL;
	s->free_rows[s->nfree_rows++] = row;
	s->rows--;
	s->deletes++;
	if (h->count == 0)
		gi_host_release_slab(s, slab);
}

/* rows a delete removes in one group, their cache lines fetched ahead */
#define GI_HOST_DELETE_GROUP 64

/*
 * Remove rows[0..n) of one key.  Each row's slab lies at random in memory:
 * ask for all of the group's slab headers first, so that their cache
 * misses overlap instead of following each other.  The hints never change
 * what is removed.
 */
static void
gi_host_remove_group(gi_store *s, const uint32_t *rows, uint32_t n)
{
	uint32_t	j;

	for (j = 0; j < n; j++)
		__builtin_prefetch(&s->slabs[s->att[rows[j]] >> 32], 1);
	for (j = 0; j < n; j++)
	{
		gi_host_remove_row(s, rows[j]);
		s->steps++;
	}
}

static gi_status
gi_host_store_delete(gi_store *s, uint32_t n, const uint64_t *keys,
					 uint64_t *ndeleted)
{
	uint64_t	done = 0;
	uint32_t	i;
	uint32_t	group[GI_HOST_DELETE_GROUP];

	if (ndeleted)
		*ndeleted = 0;
	if (s == NULL)
	{
		gi_host_set_error("store_delete: no store");
		return GI_ERR_INVALID;
	}
	if (n == 0)
		return GI_OK;
	if (keys == NULL)
	{
		gi_host_set_error("store_delete: keys must not be NULL");
		return GI_ERR_INVALID;
	}
	for (i = 0; i < n; i++)
	{
		uint64_t	mi;
		uint32_t	row;
		uint32_t	ng = 0;

		if (i + 4 < n)
			__builtin_prefetch(&s->keymap.ents[gi_host_map_home(&s->keymap, keys[i + 4])]);
		mi = gi_host_map_find(&s->keymap, keys[i], &s->steps);
		if (mi == GI_HOST_MAP_NONE)
			continue;			/* unknown or already deleted */
		row = s->keymap.ents[mi].row;
		if (s->params.key_mode == GI_KEYS_PER_LIST)
			gi_pairs_forget(&s->pairs, keys[i], row, s->row_next,
							gi_host_row_list, s, &s->steps);
		s->free_kids[s->nfree_kids++] = gi_host_row_kid(s, row);
		while (row != GI_NIL)
		{
			group[ng++] = row;
			row = s->row_next[row];
			if (ng == GI_HOST_DELETE_GROUP || row == GI_NIL)
			{
				gi_host_remove_group(s, group, ng);
				done += ng;
				ng = 0;
			}
		}
		gi_host_map_remove(&s->keymap, mi, &s->steps);
	}
	if (ndeleted)
		*ndeleted = done;
	return GI_OK;
}

/* ---- stats and backend identity ----------------------------------------- */

static gi_status
gi_host_store_stats(gi_store *s, gi_store_stats *out)
{
	if (s == NULL || out == NULL)
	{
		gi_host_set_error("store_stats: store and out must not be NULL");
		return GI_ERR_INVALID;
	}
	memset(out, 0, sizeof(*out));
	out->lists = s->params.nlists;
	out->rows = s->rows;
	out->keys = s->keymap.count;
	out->slabs_used = s->slabs_used;
	out->slabs_free = s->nfree_slabs;
	out->slabs_total = s->nslabs;
	out->bytes = gi_host_bytes_with_slabs(s, s->nslabs);
	out->payload_bytes = s->rows * s->params.record_bytes;
	out->inserts = s->inserts;
	out->deletes = s->deletes;
	return GI_OK;
}

static int
gi_host_device_count(void)
{
	return 1;
}

static gi_status
gi_host_device_open(int ordinal, gi_device **out)
{
	if (out == NULL || ordinal != 0)
	{
		gi_host_set_error("device_open: the host backend has one device, ordinal 0");
		return GI_ERR_INVALID;
	}
	*out = &gi_host_the_device;
	return GI_OK;
}

static void
gi_host_device_close(gi_device *device)
{
	(void) device;
}

static const char *
gi_host_device_name(gi_device *device)
{
	(void) device;
	return "host CPU";
}

/* the service shares gpuindex.memory_limit among stores, batch by batch */
static void
gi_host_store_set_limit(gi_store *s, uint64_t memory_limit)
{
	s->params.memory_limit = memory_limit;
}

static const gi_backend_ops gi_host_ops = {
	.name = "cpu",
	.last_error = gi_host_last_error,
	.device_count = gi_host_device_count,
	.device_open = gi_host_device_open,
	.device_close = gi_host_device_close,
	.device_name = gi_host_device_name,
	.store_create = gi_host_store_create,
	.store_destroy = gi_host_store_destroy,
	.store_insert = gi_host_store_insert,
	.store_delete = gi_host_store_delete,
	.store_stats = gi_host_store_stats,
	.store_set_limit = gi_host_store_set_limit,
	.kinds = {
		[GI_KIND_IVF] = &gi_host_ivf_kind,
		[GI_KIND_IVFPQ] = &gi_host_ivfpq_kind,
		[GI_KIND_SPARSE] = &gi_host_sparse_kind,
	},
	/*
	 * No kmeans_* entries: with the host backend every CREATE INDEX trains
	 * and assigns in its own backend process (gi_host_kmeans_train, called
	 * by the access method), in parallel with other builds, instead of
	 * queueing in the one service process.
	 */
	.set_host_threads = gi_host_pool_set_threads,
};

const gi_backend_ops *
gi_host_backend(void)
{
	return &gi_host_ops;
}

/* ---- host-only introspection -------------------------------------------- */

const gi_store_params *
gi_host_store_params(const gi_store *s)
{
	return &s->params;
}

void *
gi_host_store_kind_state(const gi_store *s)
{
	return s->kind_state;
}

void
gi_host_store_set_kind_state(gi_store *s, void *state, void (*free_fn) (void *))
{
	if (s->kind_state && s->kind_state_free)
		s->kind_state_free(s->kind_state);
	s->kind_state = state;
	s->kind_state_free = free_fn;
}

uint32_t
gi_host_store_key_ids(const gi_store *s)
{
	return s->kid_hwm;
}

uint64_t
gi_host_store_kid_key(const gi_store *s, uint32_t kid)
{
	return s->kid_key[kid];
}

uint64_t
gi_host_store_steps(const gi_store *s)
{
	return s->steps;
}

uint32_t
gi_host_store_list_head(const gi_store *s, uint32_t list)
{
	if (s == NULL || list >= s->params.nlists)
		return GI_NIL;
	return s->list_head[list];
}

bool
gi_host_store_slab(const gi_store *s, uint32_t slab, gi_host_slab_view *view)
{
	const gi_host_slab *h;

	if (s == NULL || slab >= s->nslabs)
		return false;
	h = &s->slabs[slab];
	view->slab = slab;
	view->next = h->next;
	view->list = h->list;
	view->count = h->count;
	view->bitmap = h->bitmap;
	view->rows = s->slot_row + (uint64_t) slab * GI_SLAB_RECORDS;
	view->keys = s->slot_key + (uint64_t) slab * GI_SLAB_RECORDS;
	view->kids = s->slot_kid + (uint64_t) slab * GI_SLAB_RECORDS;
	view->payload = s->payload + (uint64_t) slab * GI_SLAB_RECORDS * s->words;
	return true;
}

int64_t
gi_host_store_foreach(const gi_store *s, uint32_t list,
					  gi_host_record_cb cb, void *arg)
{
	uint32_t   *buf;
	uint32_t	slab;
	int64_t		visited = 0;

	if (s == NULL || list >= s->params.nlists)
	{
		gi_host_set_error("foreach: list %u out of range", list);
		return -1;
	}
	buf = malloc((size_t) s->words * sizeof(uint32_t));
	if (buf == NULL)
	{
		gi_host_set_error("out of memory");
		return -1;
	}
	for (slab = s->list_head[list]; slab != GI_NIL; slab = s->slabs[slab].next)
	{
		uint32_t	bits = s->slabs[slab].bitmap;

		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);
			uint64_t	at = (uint64_t) slab * GI_SLAB_RECORDS + slot;

			bits &= bits - 1;
			gi_host_gather(s, slab, slot, buf);
			visited++;
			if (cb && !cb(s->slot_key[at], s->slot_row[at], buf, arg))
				goto done;
		}
	}
done:
	free(buf);
	return visited;
}

uint32_t
gi_host_store_lookup(const gi_store *s, uint64_t key, uint32_t *lists,
					 uint32_t *rows, uint32_t max)
{
	uint64_t	mi;
	uint32_t	row;
	uint32_t	n = 0;

	if (s == NULL)
		return 0;
	mi = gi_host_map_find(&s->keymap, key, NULL);
	if (mi == GI_HOST_MAP_NONE)
		return 0;
	for (row = s->keymap.ents[mi].row; row != GI_NIL; row = s->row_next[row])
	{
		if (n < max)
		{
			if (lists)
				lists[n] = s->slabs[s->att[row] >> 32].list;
			if (rows)
				rows[n] = row;
		}
		n++;
	}
	return n;
}

bool
gi_host_store_row(const gi_store *s, uint32_t row, uint32_t *list,
				  uint64_t *key, void *payload)
{
	uint64_t	a;
	uint32_t	slab;
	uint32_t	slot;

	if (s == NULL || row >= s->row_hwm || s->att[row] == GI_HOST_ATT_NONE)
		return false;
	a = s->att[row];
	slab = (uint32_t) (a >> 32);
	slot = (uint32_t) (a & 0xFFFFFFFFu);
	if (list)
		*list = s->slabs[slab].list;
	if (key)
		*key = s->slot_key[(uint64_t) slab * GI_SLAB_RECORDS + slot];
	if (payload)
		gi_host_gather(s, slab, slot, payload);
	return true;
}

/* ---- invariant check ----------------------------------------------------- */

#define GI_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			if (err && errlen) \
				snprintf(err, errlen, __VA_ARGS__); \
			ok = false; \
			goto out; \
		} \
	} while (0)

/*
 * Walks every structure once, with one mark byte per slab and per row, so
 * it is O(size of the store): meant for tests and for debugging, not for
 * hot paths.
 */
bool
gi_host_store_check(const gi_store *s, char *err, size_t errlen)
{
	unsigned char *slab_seen = NULL;
	unsigned char *row_seen = NULL;
	uint64_t	linked = 0;
	uint64_t	count_sum = 0;
	uint64_t	live_rows = 0;
	uint64_t	chained_rows = 0;
	uint64_t	map_used = 0;
	gi_pairs_check pc;
	bool		pairs_checked = false;
	bool		ok = true;
	uint64_t	i;
	uint32_t	l;

	if (err && errlen)
		err[0] = '\0';
	GI_CHECK(s != NULL, "no store");
	GI_CHECK(s->slab_hwm <= s->nslabs, "slab_hwm %u > nslabs %u",
			 s->slab_hwm, s->nslabs);
	GI_CHECK(s->row_hwm <= (uint64_t) s->nslabs * GI_SLAB_RECORDS,
			 "row_hwm %u over slot capacity", s->row_hwm);
	GI_CHECK(s->nfree_slabs <= s->slab_hwm, "free stack too deep");
	GI_CHECK(s->nfree_rows <= s->row_hwm, "free row stack too deep");

	slab_seen = calloc((size_t) s->nslabs + 1, 1);
	row_seen = calloc((size_t) s->row_hwm + 1, 1);
	GI_CHECK(slab_seen != NULL && row_seen != NULL, "check: out of memory");

	/* lists: well-formed chains, back links, ownership, counts vs bitmaps */
	for (l = 0; l < s->params.nlists; l++)
	{
		uint32_t	prev = GI_NIL;
		uint32_t	slab;

		for (slab = s->list_head[l]; slab != GI_NIL; slab = s->slabs[slab].next)
		{
			const gi_host_slab *h;

			GI_CHECK(slab < s->slab_hwm, "list %u links slab %u beyond hwm %u",
					 l, slab, s->slab_hwm);
			GI_CHECK(!slab_seen[slab], "slab %u reached twice (list %u)", slab, l);
			slab_seen[slab] = 1;
			h = &s->slabs[slab];
			GI_CHECK(h->list == l, "slab %u in list %u says list %u",
					 slab, l, h->list);
			GI_CHECK(h->prev == prev, "slab %u prev %u, expected %u",
					 slab, h->prev, prev);
			GI_CHECK(h->count > 0, "empty slab %u still linked in list %u",
					 slab, l);
			GI_CHECK((uint32_t) __builtin_popcount(h->bitmap) == h->count,
					 "slab %u count %u but bitmap %08x",
					 slab, h->count, h->bitmap);
			linked++;
			count_sum += h->count;
			prev = slab;
		}
	}
	GI_CHECK(linked == s->slabs_used, "slabs_used %llu but %llu linked",
			 (unsigned long long) s->slabs_used, (unsigned long long) linked);
	GI_CHECK(count_sum == s->rows, "counts sum to %llu, rows %llu",
			 (unsigned long long) count_sum, (unsigned long long) s->rows);

	/* free stack: exactly the used-before, now empty, unlinked slabs */
	for (i = 0; i < s->nfree_slabs; i++)
	{
		uint32_t	slab = s->free_slabs[i];
		const gi_host_slab *h;

		GI_CHECK(slab < s->slab_hwm, "free stack holds slab %u beyond hwm", slab);
		GI_CHECK(!slab_seen[slab], "free slab %u also linked or pushed twice",
				 slab);
		slab_seen[slab] = 2;
		h = &s->slabs[slab];
		GI_CHECK(h->count == 0 && h->bitmap == 0,
				 "free slab %u not empty (count %u)", slab, h->count);
		GI_CHECK(h->list == GI_NIL && h->next == GI_NIL && h->prev == GI_NIL,
				 "free slab %u still has links", slab);
	}
	for (i = 0; i < s->nslabs; i++)
	{
		const gi_host_slab *h = &s->slabs[i];

		if (i < s->slab_hwm)
			GI_CHECK(slab_seen[i], "slab %llu is lost (neither linked nor free)",
					 (unsigned long long) i);
		else
			GI_CHECK(h->count == 0 && h->bitmap == 0 && h->list == GI_NIL,
					 "never-used slab %llu is not blank", (unsigned long long) i);
	}

	/* slots: every set bit names a live row whose ATT points back here */
	for (i = 0; i < s->slab_hwm; i++)
	{
		uint32_t	bits = s->slabs[i].bitmap;

		while (bits)
		{
			uint32_t	slot = (uint32_t) __builtin_ctz(bits);
			uint64_t	at = i * GI_SLAB_RECORDS + slot;
			uint32_t	row = s->slot_row[at];

			bits &= bits - 1;
			GI_CHECK(row < s->row_hwm, "slab %llu slot %u holds row %u beyond hwm",
					 (unsigned long long) i, slot, row);
			GI_CHECK(s->att[row] == ((i << 32) | slot),
					 "row %u: ATT %llx but lives at slab %llu slot %u", row,
					 (unsigned long long) s->att[row], (unsigned long long) i,
					 slot);
			GI_CHECK(!row_seen[row], "row %u in two slots", row);
			row_seen[row] = 1;
			live_rows++;
		}
	}
	GI_CHECK(live_rows == s->rows, "%llu live slots, rows %llu",
			 (unsigned long long) live_rows, (unsigned long long) s->rows);

	/* rows: live ones were all reached above; the rest are on the stack */
	for (i = 0; i < s->nfree_rows; i++)
	{
		uint32_t	row = s->free_rows[i];

		GI_CHECK(row < s->row_hwm, "free row %u beyond hwm", row);
		GI_CHECK(!row_seen[row], "free row %u is live or pushed twice", row);
		GI_CHECK(s->att[row] == GI_HOST_ATT_NONE, "free row %u has an ATT entry",
				 row);
		row_seen[row] = 2;
	}
	for (i = 0; i < s->row_hwm; i++)
	{
		GI_CHECK(row_seen[i], "row %llu is lost (neither live nor free)",
				 (unsigned long long) i);
		if (row_seen[i] == 1)
		{
			/* ATT of a live row points at a set bit holding this row */
			uint64_t	a = s->att[i];
			uint32_t	slab = (uint32_t) (a >> 32);
			uint32_t	slot = (uint32_t) (a & 0xFFFFFFFFu);

			GI_CHECK(slab < s->slab_hwm && slot < GI_SLAB_RECORDS &&
					 (s->slabs[slab].bitmap >> slot & 1) &&
					 s->slot_row[(uint64_t) slab * GI_SLAB_RECORDS + slot] == i,
					 "live row %llu: bad ATT %llx", (unsigned long long) i,
					 (unsigned long long) a);
		}
	}

	/* key map: findable entries, chains of live rows with matching keys */
	for (i = 0; i < s->keymap.cap; i++)
	{
		uint64_t	key;
		uint32_t	row;

		if (s->keymap.ents[i].row == GI_NIL)
			continue;
		map_used++;
		key = s->keymap.ents[i].key;
		GI_CHECK(gi_host_map_find(&s->keymap, key, NULL) == i,
				 "key %llu at map slot %llu is not found there (probe run broken or duplicate)",
				 (unsigned long long) key, (unsigned long long) i);
		for (row = s->keymap.ents[i].row; row != GI_NIL; row = s->row_next[row])
		{
			uint64_t	a;

			GI_CHECK(row < s->row_hwm && row_seen[row] == 1,
					 "key %llu chains to row %u that is not live",
					 (unsigned long long) key, row);
			row_seen[row] = 3;	/* visited by a chain; also breaks cycles */
			a = s->att[row];
			GI_CHECK(s->slot_key[(a >> 32) * GI_SLAB_RECORDS + (a & 0xFFFFFFFFu)] == key,
					 "row %u chained under key %llu holds another key", row,
					 (unsigned long long) key);
			chained_rows++;
		}
	}
	GI_CHECK(map_used == s->keymap.count, "map holds %llu keys, count says %llu",
			 (unsigned long long) map_used, (unsigned long long) s->keymap.count);
	GI_CHECK(s->keymap.count * 3 <= s->keymap.cap * 2 &&
			 s->keymap.count < s->keymap.cap, "map over its load factor");
	GI_CHECK(chained_rows == s->rows, "key chains reach %llu rows of %llu",
			 (unsigned long long) chained_rows, (unsigned long long) s->rows);
	/*
	 * Key ordinals: all rows of a key share one, which maps back to the
	 * key; live keys and the free stack hold each ordinal below the
	 * high-water mark exactly once.
	 */
	{
		unsigned char *kid_seen = calloc((size_t) s->kid_hwm + 1, 1);

		GI_CHECK(kid_seen != NULL, "check: out of memory");
		for (i = 0; i < s->keymap.cap && ok; i++)
		{
			uint32_t	row = s->keymap.ents[i].row;
			uint32_t	kid;

			if (row == GI_NIL)
				continue;
			kid = gi_host_row_kid(s, row);
			if (kid >= s->kid_hwm || kid_seen[kid] ||
				s->kid_key[kid] != s->keymap.ents[i].key)
			{
				if (err && errlen)
					snprintf(err, errlen, "key %llu has a bad ordinal %u",
						 (unsigned long long) s->keymap.ents[i].key, kid);
				ok = false;
				break;
			}
			kid_seen[kid] = 1;
			for (; row != GI_NIL && ok; row = s->row_next[row])
				if (gi_host_row_kid(s, row) != kid)
				{
					if (err && errlen)
					snprintf(err, errlen, "rows of key %llu have different ordinals",
							 (unsigned long long) s->keymap.ents[i].key);
					ok = false;
				}
		}
		for (i = 0; i < s->nfree_kids && ok; i++)
		{
			uint32_t	kid = s->free_kids[i];

			if (kid >= s->kid_hwm || kid_seen[kid])
			{
				if (err && errlen)
					snprintf(err, errlen, "free ordinal %u is live or pushed twice", kid);
				ok = false;
			}
			else
				kid_seen[kid] = 1;
		}
		if (ok && s->nfree_kids + s->keymap.count != s->kid_hwm)
		{
			if (err && errlen)
					snprintf(err, errlen, "%llu live keys and %u free ordinals, high-water mark %u",
					 (unsigned long long) s->keymap.count, s->nfree_kids, s->kid_hwm);
			ok = false;
		}
		free(kid_seen);
		if (!ok)
			goto out;
	}
	GI_CHECK(s->params.key_mode != GI_KEYS_UNIQUE || s->keymap.count == s->rows,
			 "unique keys, but %llu rows of %llu keys",
			 (unsigned long long) s->rows, (unsigned long long) s->keymap.count);

	/* GI_KEYS_PER_LIST's pairs (gi_pairset.h); every other mode keeps none */
	if (s->params.key_mode != GI_KEYS_PER_LIST)
		GI_CHECK(s->pairs.run.count == 0 && s->pairs.kept.count == 0 &&
				 s->pairs.kept.cap == 0, "pairs kept without GI_KEYS_PER_LIST");
	else
	{
		char		msg[256];

		pairs_checked = true;
		GI_CHECK(gi_pairs_check_begin(&pc, &s->pairs, s->rows, msg, sizeof(msg)), "%s", msg);
		for (i = 0; i < s->keymap.cap; i++)
			if (s->keymap.ents[i].row != GI_NIL)
				GI_CHECK(gi_pairs_check_key(&pc, &s->pairs, s->keymap.ents[i].key,
											s->keymap.ents[i].row, s->row_next,
											gi_host_row_list, s, msg, sizeof(msg)),
						 "%s", msg);
		GI_CHECK(gi_pairs_check_end(&pc, &s->pairs, msg, sizeof(msg)), "%s", msg);
	}

out:
	if (pairs_checked)
		gi_pairs_check_free(&pc);
	free(slab_seen);
	free(row_seen);
	return ok;
}
