/*
 * test_host_store.c
 *		cmocka tests of the host slab list store, its key modes, the host
 *		IVF kind and the host k-means.
 *
 * Everything is checked against references written here, never against
 * the code under test: a per-key model of the store contents, a (key,
 * list) grid for the posting-list mode (GI_KEYS_PER_LIST), and a brute
 * force k-NN computed from the test's own copy of the vectors.  After
 * mutations gi_host_store_check() verifies the internal invariants too.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "host_pool.h"
#include "host_store.h"
#include "test_util.h"

static const gi_backend_ops *ops;

/* ---- helpers ------------------------------------------------------------ */

static gi_store *
new_store(uint32_t nlists, uint32_t record_bytes, uint32_t chunk,
		  gi_key_mode key_mode, uint64_t limit)
{
	gi_store_params p;
	gi_store   *s = NULL;
	gi_status	st;

	memset(&p, 0, sizeof(p));
	p.nlists = nlists;
	p.record_bytes = record_bytes;
	p.chunk_slabs = chunk;
	p.key_mode = key_mode;
	p.memory_limit = limit;
	st = ops->store_create(&p, &s);
	if (st != GI_OK)
		fail_msg("store_create: %s", ops->last_error());
	assert_non_null(s);
	return s;
}

static void
check_store(const gi_store *s)
{
	char		err[512];

	if (!gi_host_store_check(s, err, sizeof(err)))
		fail_msg("store invariant broken: %s", err);
}

static gi_store_stats
stats_of(gi_store *s)
{
	gi_store_stats st;

	assert_int_equal(ops->store_stats(s, &st), GI_OK);
	return st;
}

static void
insert1(gi_store *s, uint32_t list, uint64_t key, const void *payload)
{
	uint64_t	n = 99;
	gi_status	st = ops->store_insert(s, 1, &list, &key, payload, &n);

	if (st != GI_OK)
		fail_msg("insert: %s", ops->last_error());
	assert_int_equal(n, 1);
}

static uint64_t
delete1(gi_store *s, uint64_t key)
{
	uint64_t	n = 99;

	assert_int_equal(ops->store_delete(s, 1, &key, &n), GI_OK);
	return n;
}

/* a record as read back: key plus up to 4 payload words */
typedef struct rec
{
	uint64_t	key;
	uint32_t	list;
	uint32_t	w[4];
} rec;

typedef struct rec_vec
{
	rec		   *v;
	size_t		n;
	size_t		cap;
	uint32_t	words;
	uint32_t	list;
} rec_vec;

static void
rec_push(rec_vec *rv, uint64_t key, uint32_t list, const uint32_t *w,
		 uint32_t words)
{
	rec			r;

	if (rv->n == rv->cap)
	{
		rv->cap = rv->cap ? rv->cap * 2 : 64;
		rv->v = realloc(rv->v, rv->cap * sizeof(rec));
		assert_non_null(rv->v);
	}
	memset(&r, 0, sizeof(r));
	r.key = key;
	r.list = list;
	memcpy(r.w, w, words * sizeof(uint32_t));
	rv->v[rv->n++] = r;
}

static bool
collect_cb(uint64_t key, uint32_t row, const void *payload, void *arg)
{
	rec_vec    *rv = arg;

	(void) row;
	rec_push(rv, key, rv->list, payload, rv->words);
	return true;
}

static int
rec_cmp(const void *a, const void *b)
{
	const rec  *x = a;
	const rec  *y = b;
	int			j;

	if (x->list != y->list)
		return x->list < y->list ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	for (j = 0; j < 4; j++)
		if (x->w[j] != y->w[j])
			return x->w[j] < y->w[j] ? -1 : 1;
	return 0;
}

/* all records of the store, every list, sorted */
static void
collect_all(gi_store *s, uint32_t nlists, uint32_t words, rec_vec *out)
{
	uint32_t	l;

	out->n = 0;
	out->words = words;
	for (l = 0; l < nlists; l++)
	{
		int64_t		before = (int64_t) out->n;
		int64_t		n;

		out->list = l;
		n = gi_host_store_foreach(s, l, collect_cb, out);
		assert_true(n >= 0);
		assert_int_equal((int64_t) out->n - before, n);
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(rec), rec_cmp);
}

/* ---- identity and parameters -------------------------------------------- */

static void
test_backend_identity(void **state)
{
	(void) state;
	assert_string_equal(ops->name, "cpu");
	assert_ptr_equal(gi_host_backend(), ops);
	assert_non_null(ops->kinds[GI_KIND_IVF]);
	assert_non_null(ops->kinds[GI_KIND_IVF]->set_state);
	assert_non_null(ops->kinds[GI_KIND_IVF]->search);
	assert_null(ops->kinds[GI_KIND_NONE]);
	assert_non_null(ops->kinds[GI_KIND_SPARSE]);
	assert_non_null(ops->kinds[GI_KIND_SPARSE]->search);
	assert_null(ops->kinds[GI_KIND_KEYWORD]);
}

/* the host is one device, ordinal 0; stores live on it */
static void
test_devices(void **state)
{
	gi_device  *d = NULL;
	gi_device  *other = (gi_device *) 0x1;
	gi_store_params p;
	gi_store   *s = NULL;

	(void) state;
	assert_int_equal(ops->device_count(), 1);
	assert_int_equal(ops->device_open(0, &d), GI_OK);
	assert_non_null(d);
	assert_string_equal(ops->device_name(d), "host CPU");
	assert_int_equal(ops->device_open(1, &other), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "ordinal"));
	assert_int_equal(ops->device_open(-1, &other), GI_ERR_INVALID);
	assert_int_equal(ops->device_open(0, NULL), GI_ERR_INVALID);

	/* a store on the opened device, and on the default one (NULL) */
	memset(&p, 0, sizeof(p));
	p.nlists = 2;
	p.record_bytes = 4;
	p.device = d;
	assert_int_equal(ops->store_create(&p, &s), GI_OK);
	check_store(s);
	ops->store_destroy(s);
	p.device = NULL;
	assert_int_equal(ops->store_create(&p, &s), GI_OK);
	ops->store_destroy(s);
	/* a device object that is not the host's */
	p.device = (gi_device *) &p;
	s = (gi_store *) 0x1;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_INVALID);
	assert_null(s);
	ops->device_close(d);
}

static void
test_create_invalid(void **state)
{
	gi_store_params p;
	gi_store   *s = (gi_store *) 0x1;

	(void) state;
	memset(&p, 0, sizeof(p));
	p.nlists = 4;
	p.record_bytes = 16;

	assert_int_equal(ops->store_create(NULL, &s), GI_ERR_INVALID);

	p.nlists = 0;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_INVALID);
	assert_null(s);
	assert_non_null(strstr(ops->last_error(), "list"));

	p.nlists = 4;
	p.record_bytes = 0;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_INVALID);
	p.record_bytes = 6;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "multiple of 4"));

	/* an unknown key mode */
	p.record_bytes = 16;
	p.key_mode = GI_KEYS_PER_LIST + 1;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_INVALID);
	assert_null(s);
	assert_non_null(strstr(ops->last_error(), "key mode"));
	p.key_mode = GI_KEYS_ANY;

	/* a limit too small for the empty store itself */
	p.record_bytes = 16;
	p.memory_limit = 100;
	assert_int_equal(ops->store_create(&p, &s), GI_ERR_LIMIT);
	assert_non_null(strstr(ops->last_error(), "gpuindex.memory_limit"));

	/* and a good one, with default chunk */
	p.memory_limit = 0;
	assert_int_equal(ops->store_create(&p, &s), GI_OK);
	assert_int_equal(gi_host_store_params(s)->chunk_slabs,
					 GI_HOST_DEFAULT_CHUNK_SLABS);
	{
		gi_store_stats st = stats_of(s);

		assert_int_equal(st.lists, 4);
		assert_int_equal(st.rows, 0);
		assert_int_equal(st.slabs_total, 0);
		assert_true(st.bytes > 0);
	}
	check_store(s);
	ops->store_destroy(s);
	ops->store_destroy(NULL);
}

/* ---- basics ------------------------------------------------------------- */

static void
test_insert_delete_basic(void **state)
{
	gi_store   *s = new_store(3, 8, 4, GI_KEYS_ANY, 0);
	uint32_t	lists[5] = {0, 1, 2, 1, 0};
	uint64_t	keys[5] = {10, 11, 12, 13, 14};
	uint32_t	pay[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	uint32_t	bad_lists[3] = {0, 3, 1};
	uint64_t	n;
	uint32_t	l[4];
	uint32_t	r[4];
	gi_store_stats st;

	(void) state;
	assert_int_equal(ops->store_insert(s, 5, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, 5);
	check_store(s);
	st = stats_of(s);
	assert_int_equal(st.rows, 5);
	assert_int_equal(st.keys, 5);
	assert_int_equal(st.slabs_used, 3);
	assert_int_equal(st.slabs_total, 4);	/* one chunk */
	assert_int_equal(st.payload_bytes, 40);
	assert_int_equal(st.inserts, 5);

	assert_int_equal(gi_host_store_lookup(s, 13, l, r, 4), 1);
	assert_int_equal(l[0], 1);
	{
		uint32_t	list;
		uint64_t	key;
		uint32_t	w[2];

		assert_true(gi_host_store_row(s, r[0], &list, &key, w));
		assert_int_equal(list, 1);
		assert_int_equal(key, 13);
		assert_int_equal(w[0], 7);
		assert_int_equal(w[1], 8);
	}
	assert_int_equal(gi_host_store_lookup(s, 99, l, r, 4), 0);

	/* a bad list anywhere in the batch inserts nothing */
	assert_int_equal(ops->store_insert(s, 3, bad_lists, keys, pay, &n),
					 GI_ERR_INVALID);
	assert_int_equal(n, 0);
	assert_non_null(strstr(ops->last_error(), "out of range"));
	assert_int_equal(stats_of(s).rows, 5);

	assert_int_equal(delete1(s, 12), 1);	/* list 2 empties */
	check_store(s);
	st = stats_of(s);
	assert_int_equal(st.rows, 4);
	assert_int_equal(st.keys, 4);
	assert_int_equal(st.slabs_used, 2);
	assert_int_equal(st.slabs_free, 1);
	assert_int_equal(st.deletes, 1);
	assert_int_equal(gi_host_store_list_head(s, 2), GI_NIL);
	assert_int_equal(gi_host_store_lookup(s, 12, NULL, NULL, 0), 0);

	/* zero-length batches are fine, NULL store is not */
	assert_int_equal(ops->store_insert(s, 0, NULL, NULL, NULL, &n), GI_OK);
	assert_int_equal(n, 0);
	assert_int_equal(ops->store_delete(s, 0, NULL, &n), GI_OK);
	assert_int_equal(ops->store_insert(NULL, 1, lists, keys, pay, &n),
					 GI_ERR_INVALID);
	assert_int_equal(ops->store_delete(NULL, 1, keys, &n), GI_ERR_INVALID);
	/* ninserted / ndeleted may be NULL */
	assert_int_equal(ops->store_insert(s, 1, lists, keys, pay, NULL), GI_OK);
	assert_int_equal(ops->store_delete(s, 1, keys, NULL), GI_OK);
	check_store(s);
	ops->store_destroy(s);
}

/* extreme key values are ordinary keys (the map uses no sentinel key) */
static void
test_extreme_keys(void **state)
{
	gi_store   *s = new_store(2, 4, 1, GI_KEYS_UNIQUE, 0);
	uint64_t	keys[4] = {0, UINT64_MAX, UINT64_MAX - 1, gi_tid_to_key(UINT32_MAX, 0xFFFF)};
	uint32_t	v = 7;
	int			i;

	(void) state;
	for (i = 0; i < 4; i++)
		insert1(s, (uint32_t) i % 2, keys[i], &v);
	check_store(s);
	for (i = 0; i < 4; i++)
		assert_int_equal(gi_host_store_lookup(s, keys[i], NULL, NULL, 0), 1);
	assert_int_equal(delete1(s, 0), 1);
	assert_int_equal(delete1(s, UINT64_MAX), 1);
	assert_int_equal(gi_host_store_lookup(s, UINT64_MAX - 1, NULL, NULL, 0), 1);
	check_store(s);
	ops->store_destroy(s);
}

static void
test_payload_roundtrip(void **state)
{
	enum
	{
		N = 100, W = 3
	};
	gi_store   *s = new_store(1, W * 4, 2, GI_KEYS_ANY, 0);
	uint32_t	lists[N];
	uint64_t	keys[N];
	uint32_t	pay[N * W];
	uint32_t	slab;
	uint64_t	n;
	int			seen = 0;
	rec_vec		rv = {0};
	int			i;
	int			j;

	(void) state;
	for (i = 0; i < N; i++)
	{
		lists[i] = 0;
		keys[i] = 1000 + i;
		for (j = 0; j < W; j++)
			pay[i * W + j] = (uint32_t) (i * 16 + j) ^ 0xA5A50000u;
	}
	assert_int_equal(ops->store_insert(s, N, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, N);
	check_store(s);

	/* the interleaved layout: word j of slot i at payload[j * 32 + i] */
	for (slab = gi_host_store_list_head(s, 0); slab != GI_NIL;)
	{
		gi_host_slab_view v;
		uint32_t	slot;

		assert_true(gi_host_store_slab(s, slab, &v));
		assert_int_equal(v.list, 0);
		assert_int_equal((uint32_t) __builtin_popcount(v.bitmap), v.count);
		for (slot = 0; slot < GI_SLAB_RECORDS; slot++)
		{
			uint64_t	rec_no;

			if (!(v.bitmap >> slot & 1))
				continue;
			rec_no = v.keys[slot] - 1000;
			assert_true(rec_no < N);
			for (j = 0; j < W; j++)
				assert_int_equal(v.payload[j * GI_SLAB_RECORDS + slot],
								 pay[rec_no * W + j]);
			seen++;
		}
		slab = v.next;
	}
	assert_int_equal(seen, N);
	/* 100 records: 3 full slabs + 1 with 4, the partial one at the head */
	assert_int_equal(stats_of(s).slabs_used, 4);
	{
		gi_host_slab_view v;

		assert_true(gi_host_store_slab(s, gi_host_store_list_head(s, 0), &v));
		assert_int_equal(v.count, 4);
	}

	/* gathered back through foreach */
	collect_all(s, 1, W, &rv);
	assert_int_equal(rv.n, N);
	for (i = 0; i < N; i++)
	{
		assert_int_equal(rv.v[i].key, 1000 + i);
		for (j = 0; j < W; j++)
			assert_int_equal(rv.v[i].w[j], pay[i * W + j]);
	}
	free(rv.v);
	ops->store_destroy(s);
}

/* ---- slab reuse ---------------------------------------------------------- */

static void
test_slab_reuse_simple(void **state)
{
	gi_store   *s = new_store(3, 4, 2, GI_KEYS_ANY, 0);
	uint32_t	v = 1;
	uint32_t	freed;
	gi_store_stats st;
	uint64_t	k;

	(void) state;
	for (k = 0; k < 32; k++)
		insert1(s, 0, k, &v);
	insert1(s, 1, 100, &v);
	freed = gi_host_store_list_head(s, 0);
	st = stats_of(s);
	assert_int_equal(st.slabs_used, 2);
	assert_int_equal(st.slabs_total, 2);

	for (k = 0; k < 32; k++)
		assert_int_equal(delete1(s, k), 1);
	check_store(s);
	st = stats_of(s);
	assert_int_equal(st.slabs_used, 1);
	assert_int_equal(st.slabs_free, 1);

	/* the next insert, into another list, takes the freed slab: no growth */
	insert1(s, 2, 200, &v);
	check_store(s);
	st = stats_of(s);
	assert_int_equal(gi_host_store_list_head(s, 2), freed);
	assert_int_equal(st.slabs_free, 0);
	assert_int_equal(st.slabs_total, 2);
	ops->store_destroy(s);
}

/*
 * Sliding window: W live records, each step inserts B new ones (round robin
 * over the lists) and deletes the B oldest.  Slabs empty out in insertion
 * order and are reused, so after a warm-up the pool never grows again.
 */
static void
test_slab_reuse_sliding_window(void **state)
{
	enum
	{
		NL = 8, W = 2000, B = 100, STEPS = 600, WARM = 20
	};
	gi_store   *s = new_store(NL, 8, 4, GI_KEYS_UNIQUE, 0);
	uint64_t	next_key = 0;
	uint64_t	oldest = 0;
	uint64_t	total_after_warmup = 0;
	uint32_t	lists[B];
	uint64_t	keys[B];
	uint32_t	pay[B * 2];
	uint64_t	n;
	int			step;
	int			i;

	(void) state;
	memset(pay, 0x5A, sizeof(pay));
	while (next_key < W)
	{
		for (i = 0; i < B; i++)
		{
			lists[i] = (uint32_t) (next_key % NL);
			keys[i] = next_key++;
		}
		assert_int_equal(ops->store_insert(s, B, lists, keys, pay, &n), GI_OK);
	}
	for (step = 0; step < STEPS; step++)
	{
		gi_store_stats st;

		for (i = 0; i < B; i++)
		{
			lists[i] = (uint32_t) (next_key % NL);
			keys[i] = next_key++;
		}
		assert_int_equal(ops->store_insert(s, B, lists, keys, pay, &n), GI_OK);
		assert_int_equal(n, B);
		for (i = 0; i < B; i++)
			keys[i] = oldest++;
		assert_int_equal(ops->store_delete(s, B, keys, &n), GI_OK);
		assert_int_equal(n, B);

		st = stats_of(s);
		assert_int_equal(st.rows, W);
		/* bounded: the live records plus at most one partial slab per list */
		assert_true(st.slabs_used <= (W + B) / GI_SLAB_RECORDS + 2 * NL);
		if (step == WARM)
			total_after_warmup = st.slabs_total;
		else if (step > WARM)
			assert_int_equal(st.slabs_total, total_after_warmup);
		if (step % 50 == 0)
			check_store(s);
	}
	check_store(s);
	ops->store_destroy(s);
}

/* ---- delete semantics ---------------------------------------------------- */

static void
test_idempotent_delete(void **state)
{
	gi_store   *s = new_store(2, 4, 1, GI_KEYS_ANY, 0);
	uint32_t	v = 3;
	uint64_t	batch[6] = {5, 5, 6, 77, 5, 6};
	uint64_t	n;

	(void) state;
	insert1(s, 0, 5, &v);
	insert1(s, 1, 5, &v);		/* key 5 owns two rows */
	insert1(s, 1, 6, &v);
	insert1(s, 1, 8, &v);
	assert_int_equal(ops->store_delete(s, 6, batch, &n), GI_OK);
	assert_int_equal(n, 3);
	check_store(s);
	assert_int_equal(ops->store_delete(s, 6, batch, &n), GI_OK);
	assert_int_equal(n, 0);
	assert_int_equal(delete1(s, 12345), 0);
	assert_int_equal(stats_of(s).rows, 1);
	assert_int_equal(stats_of(s).deletes, 3);
	assert_int_equal(gi_host_store_lookup(s, 8, NULL, NULL, 0), 1);
	check_store(s);
	ops->store_destroy(s);
}

static void
test_unique_keys(void **state)
{
	gi_store   *u = new_store(4, 4, 1, GI_KEYS_UNIQUE, 0);
	gi_store   *m = new_store(4, 4, 1, GI_KEYS_ANY, 0);
	uint32_t	lists[4] = {0, 1, 2, 0};
	uint64_t	keys[4] = {5, 5, 6, 6};
	uint32_t	pay[4] = {1, 2, 3, 4};
	uint64_t	n;

	(void) state;
	/* duplicates inside one batch: the first wins */
	assert_int_equal(ops->store_insert(u, 4, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, 2);
	/* and across batches */
	assert_int_equal(ops->store_insert(u, 4, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, 0);
	check_store(u);
	assert_int_equal(stats_of(u).rows, 2);
	assert_int_equal(stats_of(u).inserts, 2);
	{
		uint32_t	l;
		uint32_t	r;
		uint32_t	w;

		assert_int_equal(gi_host_store_lookup(u, 5, &l, &r, 1), 1);
		assert_int_equal(l, 0);
		assert_true(gi_host_store_row(u, r, NULL, NULL, &w));
		assert_int_equal(w, 1);
	}
	/* after a delete the key may come back */
	assert_int_equal(delete1(u, 5), 1);
	assert_int_equal(ops->store_insert(u, 4, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, 1);
	check_store(u);

	/* with GI_KEYS_ANY every record is kept */
	assert_int_equal(ops->store_insert(m, 4, lists, keys, pay, &n), GI_OK);
	assert_int_equal(n, 4);
	assert_int_equal(stats_of(m).rows, 4);
	assert_int_equal(stats_of(m).keys, 2);
	assert_int_equal(delete1(m, 6), 2);
	check_store(m);
	ops->store_destroy(u);
	ops->store_destroy(m);
}

static void
test_multi_posting(void **state)
{
	enum
	{
		NL = 10
	};
	gi_store   *s = new_store(NL, 4, 2, GI_KEYS_ANY, 0);
	uint32_t	l[NL];
	uint32_t	seen[NL] = {0};
	uint32_t	v;
	uint32_t	i;

	(void) state;
	/* key 42 in lists 1, 3, 5, 7, 9; other keys around it */
	for (i = 0; i < NL; i++)
	{
		v = i;
		if (i % 2 == 1)
			insert1(s, i, 42, &v);
		insert1(s, i, 1000 + i, &v);
		insert1(s, (i + 1) % NL, 2000 + i, &v);
	}
	check_store(s);
	assert_int_equal(stats_of(s).keys, 1 + 2 * NL);
	assert_int_equal(gi_host_store_lookup(s, 42, l, NULL, NL), 5);
	for (i = 0; i < 5; i++)
		seen[l[i]]++;
	for (i = 0; i < NL; i++)
		assert_int_equal(seen[i], i % 2);
	/* max smaller than the count still reports the count */
	assert_int_equal(gi_host_store_lookup(s, 42, l, NULL, 2), 5);

	assert_int_equal(delete1(s, 42), 5);
	check_store(s);
	assert_int_equal(stats_of(s).rows, 2 * NL);
	for (i = 0; i < NL; i++)
	{
		assert_int_equal(gi_host_store_lookup(s, 1000 + i, l, NULL, 1), 1);
		assert_int_equal(l[0], i);
		assert_int_equal(gi_host_store_foreach(s, i, NULL, NULL), 2);
	}
	ops->store_destroy(s);
}

/* ---- memory limit and allocation failure -------------------------------- */

static void
test_memory_limit(void **state)
{
	(void) state;

	/*
	 * Pool-limited: the limit is what an unlimited store needs for 6 slabs
	 * (and a key map for 192 keys).  With chunk 4 the pool grows to 4, then
	 * is clamped to 6 instead of 8, so exactly 192 records fit.
	 */
	{
		enum
		{
			RB = 512, FIT = 6 * GI_SLAB_RECORDS
		};
		static uint32_t pays[8 * (RB / 4)];
		gi_store   *probe = new_store(2, RB, 6, GI_KEYS_UNIQUE, 0);
		uint64_t	limit;
		gi_store   *s;
		uint64_t	key;
		uint64_t	n;
		gi_status	status = GI_OK;
		gi_store_stats st;
		rec_vec		rv = {0};

		for (key = 0; key < FIT; key++)
			insert1(probe, 0, key, pays);
		st = stats_of(probe);
		assert_int_equal(st.slabs_total, 6);
		limit = st.bytes;
		ops->store_destroy(probe);

		s = new_store(2, RB, 4, GI_KEYS_UNIQUE, limit);
		for (key = 0; status == GI_OK && key < 10 * FIT; key += 8)
		{
			uint32_t	lists[8] = {0};
			uint64_t	keys[8];
			int			i;

			for (i = 0; i < 8; i++)
				keys[i] = key + i;
			status = ops->store_insert(s, 8, lists, keys, pays, &n);
			if (status == GI_OK)
				assert_int_equal(n, 8);
		}
		assert_int_equal(status, GI_ERR_LIMIT);
		assert_non_null(strstr(ops->last_error(), "over the limit"));
		assert_non_null(strstr(ops->last_error(), "gpuindex.memory_limit"));
		/* everything that fitted is in, nothing more */
		check_store(s);
		st = stats_of(s);
		assert_int_equal(st.rows, FIT);
		assert_int_equal(st.slabs_total, 6);
		assert_int_equal(st.bytes, limit);
		collect_all(s, 2, 4, &rv);
		assert_int_equal(rv.n, FIT);
		for (n = 0; n < FIT; n++)
			assert_int_equal(gi_host_store_lookup(s, n, NULL, NULL, 0), 1);
		assert_int_equal(gi_host_store_lookup(s, FIT, NULL, NULL, 0), 0);

		/* still usable: free the last slab's worth, insert into list 1 */
		for (n = 0; n < GI_SLAB_RECORDS; n++)
			assert_int_equal(delete1(s, FIT - 1 - n), 1);
		check_store(s);
		assert_int_equal(stats_of(s).slabs_free, 1);
		for (n = 0; n < GI_SLAB_RECORDS; n++)
			insert1(s, 1, 100000 + n, pays);
		check_store(s);
		st = stats_of(s);
		assert_int_equal(st.slabs_total, 6);
		assert_int_equal(st.rows, FIT);
		/* and full again */
		key = 424242;
		assert_int_equal(ops->store_insert(s, 1, (uint32_t[]) {1}, &key, pays, &n),
						 GI_ERR_LIMIT);
		assert_int_equal(n, 0);
		check_store(s);
		free(rv.v);
		ops->store_destroy(s);
	}

	/*
	 * Map-limited: room for two slabs and a little, not for doubling the
	 * 64-entry key map, which the 43rd key needs (load factor 2/3).
	 */
	{
		gi_store   *probe = new_store(1, 4, 2, GI_KEYS_ANY, 0);
		uint64_t	base = stats_of(probe).bytes;
		uint64_t	two_slabs;
		gi_store   *s;
		uint32_t	v = 1;
		uint64_t	key;
		uint64_t	n;
		gi_status	status = GI_OK;

		insert1(probe, 0, 1, &v);
		two_slabs = stats_of(probe).bytes - base;
		ops->store_destroy(probe);

		s = new_store(1, 4, 1, GI_KEYS_ANY, base + two_slabs + 100);
		for (key = 0; status == GI_OK && key < 1000; key++)
			status = ops->store_insert(s, 1, (uint32_t[]) {0}, &key, &v, &n);
		assert_int_equal(status, GI_ERR_LIMIT);
		assert_int_equal(key, 43);	/* keys 0..41 went in, 42 failed */
		check_store(s);
		assert_int_equal(stats_of(s).rows, 42);
		assert_int_equal(stats_of(s).slabs_total, 2);
		/* another row of a present key needs no map growth */
		key = 7;
		assert_int_equal(ops->store_insert(s, 1, (uint32_t[]) {0}, &key, &v, &n),
						 GI_OK);
		assert_int_equal(n, 1);
		/* a new key after a delete fits again */
		assert_int_equal(delete1(s, 3), 1);
		key = 5000;
		assert_int_equal(ops->store_insert(s, 1, (uint32_t[]) {0}, &key, &v, &n),
						 GI_OK);
		check_store(s);
		assert_int_equal(stats_of(s).rows, 43);
		ops->store_destroy(s);
	}
}

/*
 * The service lowers and raises a store's limit as other stores grow and
 * shrink: a lowered limit stops growth, a raised one lets it resume.
 */
static void
test_set_limit(void **state)
{
	static uint32_t pay[4];
	gi_store   *s = new_store(1, sizeof(pay), 1, GI_KEYS_UNIQUE, 0);
	gi_store_stats st;
	uint64_t	key;
	uint64_t	list_key;
	uint32_t	list = 0;
	uint64_t	n = 0;

	(void) state;
	for (key = 0; key < GI_SLAB_RECORDS; key++)
		insert1(s, 0, key, pay);
	st = stats_of(s);
	ops->store_set_limit(s, st.bytes);
	list_key = key;
	/* the next record needs a second slab: over the limit */
	assert_int_equal(ops->store_insert(s, 1, &list, &list_key, pay, &n), GI_ERR_LIMIT);
	assert_non_null(strstr(ops->last_error(), "gpuindex.memory_limit"));
	check_store(s);
	assert_int_equal(stats_of(s).rows, GI_SLAB_RECORDS);
	ops->store_set_limit(s, 0);
	insert1(s, 0, list_key, pay);
	assert_int_equal(stats_of(s).rows, GI_SLAB_RECORDS + 1);
	check_store(s);
	ops->store_destroy(s);
}

/*
 * Make the allocator fail at every possible point of a batch that grows
 * both the pool and the key map: each time the status is GI_ERR_NOMEM (or
 * GI_OK when the batch needed fewer allocations), the store is consistent,
 * holds exactly the reported prefix, and works once memory is back.
 */
static void
test_alloc_failure(void **state)
{
	enum
	{
		N = 300
	};
	uint32_t	lists[N];
	uint64_t	keys[N];
	uint32_t	pay[N];
	int64_t		after;
	bool		reached_ok = false;
	int			i;

	(void) state;
	for (i = 0; i < N; i++)
	{
		lists[i] = (uint32_t) i % 5;
		keys[i] = (uint64_t) i * 7919;
		pay[i] = (uint32_t) i;
	}
	for (after = 0; after < 200 && !reached_ok; after++)
	{
		gi_store   *s = new_store(5, 4, 2, GI_KEYS_ANY, 0);
		uint64_t	n = 12345;
		gi_status	st;
		uint32_t	j;

		gi_host_store_fail_alloc_after(after);
		st = ops->store_insert(s, N, lists, keys, pay, &n);
		gi_host_store_fail_alloc_after(-1);
		if (st == GI_OK)
		{
			assert_int_equal(n, N);
			reached_ok = true;
		}
		else
		{
			assert_int_equal(st, GI_ERR_NOMEM);
			assert_true(n < N);
			assert_non_null(strstr(ops->last_error(), "out of memory"));
		}
		check_store(s);
		assert_int_equal(stats_of(s).rows, n);
		for (j = 0; j < N; j++)
			assert_int_equal(gi_host_store_lookup(s, keys[j], NULL, NULL, 0),
							 j < n ? 1 : 0);
		/* memory is back: the rest goes in */
		assert_int_equal(ops->store_insert(s, N - (uint32_t) n, lists + n,
										   keys + n, pay + n, NULL), GI_OK);
		check_store(s);
		assert_int_equal(stats_of(s).rows, N);
		ops->store_destroy(s);
	}
	assert_true(reached_ok);

	/* failure while creating */
	for (after = 0; after < 4; after++)
	{
		gi_store_params p;
		gi_store   *s = NULL;
		gi_status	st;

		memset(&p, 0, sizeof(p));
		p.nlists = 3;
		p.record_bytes = 4;
		gi_host_store_fail_alloc_after(after);
		st = ops->store_create(&p, &s);
		gi_host_store_fail_alloc_after(-1);
		if (st == GI_OK)
		{
			check_store(s);
			ops->store_destroy(s);
		}
		else
		{
			assert_int_equal(st, GI_ERR_NOMEM);
			assert_null(s);
		}
	}
}

/* ---- random differential test against a simple model --------------------- */

/*
 * The model: per key index, the list and payload of each of its records.
 * Deleting a key empties its array; that is all the semantics there is.
 */
typedef struct model_rec
{
	uint32_t	list;
	uint32_t	w[2];
} model_rec;

typedef struct model_key
{
	model_rec  *v;
	uint32_t	n;
	uint32_t	cap;
} model_key;

/* store key of model key i: TID-like, plus the extremes */
static uint64_t
model_key_value(uint32_t i)
{
	if (i == 0)
		return 0;
	if (i == 1)
		return UINT64_MAX;
	return gi_tid_to_key(i / 40, (uint16_t) (i % 40 + 1));
}

static void
model_compare(gi_store *s, model_key *mk, uint32_t nkeys, uint32_t nlists,
			  uint64_t model_rows, rec_vec *got, rec_vec *want)
{
	gi_store_stats st = stats_of(s);
	uint64_t	live_keys = 0;
	uint32_t	i;
	uint32_t	r;
	size_t		x;

	check_store(s);
	want->n = 0;
	for (i = 0; i < nkeys; i++)
	{
		if (mk[i].n > 0)
			live_keys++;
		for (r = 0; r < mk[i].n; r++)
			rec_push(want, model_key_value(i), mk[i].v[r].list, mk[i].v[r].w, 2);
	}
	if (want->n > 1)
		qsort(want->v, want->n, sizeof(rec), rec_cmp);
	collect_all(s, nlists, 2, got);

	assert_int_equal(st.rows, model_rows);
	assert_int_equal(st.keys, live_keys);
	assert_int_equal(st.payload_bytes, model_rows * 8);
	assert_int_equal(st.slabs_used + st.slabs_free <= st.slabs_total, true);
	assert_int_equal(got->n, want->n);
	for (x = 0; x < got->n; x++)
		if (rec_cmp(&got->v[x], &want->v[x]) != 0)
			fail_msg("record %zu differs: store (list %u key %llu %08x %08x) model (list %u key %llu %08x %08x)",
					 x, got->v[x].list, (unsigned long long) got->v[x].key,
					 got->v[x].w[0], got->v[x].w[1], want->v[x].list,
					 (unsigned long long) want->v[x].key, want->v[x].w[0],
					 want->v[x].w[1]);
}

/* would the key mode skip a record of model key k in list? */
static bool
model_forbids(gi_key_mode mode, const model_key *k, uint32_t list)
{
	uint32_t	r;

	if (mode == GI_KEYS_UNIQUE)
		return k->n > 0;
	if (mode == GI_KEYS_PER_LIST)
		for (r = 0; r < k->n; r++)
			if (k->v[r].list == list)
				return true;
	return false;
}

static void
run_differential(gi_key_mode mode, uint32_t nops, uint64_t seed)
{
	enum
	{
		NL = 37, NKEYS = 20000, EVERY = 1000
	};
	gi_store   *s = new_store(NL, 8, 8, mode, 0);
	model_key  *mk = calloc(NKEYS, sizeof(model_key));
	uint64_t	model_rows = 0;
	uint64_t	exp_inserts = 0;
	uint64_t	exp_deletes = 0;
	rec_vec		got = {0};
	rec_vec		want = {0};
	uint32_t	op;

	assert_non_null(mk);
	rng_seed(seed);
	for (op = 0; op < nops; op++)
	{
		uint32_t	kind = rng_below(100);
		uint32_t	lists[8];
		uint64_t	keys[200];
		uint32_t	idx[200];
		uint32_t	pay[16];
		uint64_t	n;
		uint64_t	expect = 0;
		uint32_t	cnt;
		uint32_t	i;

		if (kind < 45 || kind >= 94)
		{
			/* insert a batch; with a reinsert, delete the key first */
			bool		reinsert = kind >= 94;

			cnt = 1 + rng_below(8);
			for (i = 0; i < cnt; i++)
			{
				idx[i] = reinsert && i > 0 ? idx[0] : rng_below(NKEYS);
				keys[i] = model_key_value(idx[i]);
				lists[i] = rng_below(NL);
				pay[2 * i] = (uint32_t) rng_next();
				pay[2 * i + 1] = (uint32_t) rng_next();
			}
			if (reinsert)
			{
				assert_int_equal(ops->store_delete(s, 1, keys, &n), GI_OK);
				assert_int_equal(n, mk[idx[0]].n);
				model_rows -= mk[idx[0]].n;
				exp_deletes += mk[idx[0]].n;
				mk[idx[0]].n = 0;
			}
			assert_int_equal(ops->store_insert(s, cnt, lists, keys, pay, &n),
							 GI_OK);
			for (i = 0; i < cnt; i++)
			{
				model_key  *k = &mk[idx[i]];

				if (model_forbids(mode, k, lists[i]))
					continue;
				if (k->n == k->cap)
				{
					k->cap = k->cap ? k->cap * 2 : 2;
					k->v = realloc(k->v, k->cap * sizeof(model_rec));
					assert_non_null(k->v);
				}
				k->v[k->n].list = lists[i];
				k->v[k->n].w[0] = pay[2 * i];
				k->v[k->n].w[1] = pay[2 * i + 1];
				k->n++;
				expect++;
			}
			assert_int_equal(n, expect);
			model_rows += expect;
			exp_inserts += expect;
		}
		else
		{
			/*
			 * Delete a batch, mostly small, sometimes a large sweep that
			 * empties many slabs at once.  The mix keeps about 10k records
			 * live, so lists are chains of several slabs.
			 */
			cnt = kind < 93 ? 1 + rng_below(6) : 200;
			for (i = 0; i < cnt; i++)
			{
				idx[i] = rng_below(NKEYS);
				keys[i] = model_key_value(idx[i]);
			}
			assert_int_equal(ops->store_delete(s, cnt, keys, &n), GI_OK);
			for (i = 0; i < cnt; i++)
			{
				expect += mk[idx[i]].n;
				mk[idx[i]].n = 0;
			}
			assert_int_equal(n, expect);
			model_rows -= expect;
			exp_deletes += expect;
		}

		if (op % 97 == 0)
		{
			/* spot-check one key's rows and lists */
			uint32_t	ki = rng_below(NKEYS);
			uint32_t	l[64];
			uint32_t	cntl[NL] = {0};
			uint32_t	got_n = gi_host_store_lookup(s, model_key_value(ki), l,
													 NULL, 64);

			assert_int_equal(got_n, mk[ki].n);
			for (i = 0; i < got_n && i < 64; i++)
				cntl[l[i]]++;
			for (i = 0; i < mk[ki].n && i < 64; i++)
				cntl[mk[ki].v[i].list]--;
			if (got_n <= 64)
				for (i = 0; i < NL; i++)
					assert_int_equal(cntl[i], 0);
		}
		if (op % EVERY == EVERY - 1)
		{
			model_compare(s, mk, NKEYS, NL, model_rows, &got, &want);
			assert_int_equal(stats_of(s).inserts, exp_inserts);
			assert_int_equal(stats_of(s).deletes, exp_deletes);
		}
	}
	model_compare(s, mk, NKEYS, NL, model_rows, &got, &want);

	{
		/* delete everything: every slab goes back to the free stack */
		uint32_t	i;
		gi_store_stats st;

		for (i = 0; i < NKEYS; i++)
		{
			uint64_t	k = model_key_value(i);

			ops->store_delete(s, 1, &k, NULL);
			mk[i].n = 0;
		}
		check_store(s);
		st = stats_of(s);
		assert_int_equal(st.rows, 0);
		assert_int_equal(st.keys, 0);
		assert_int_equal(st.slabs_used, 0);
		for (i = 0; i < NL; i++)
			assert_int_equal(gi_host_store_list_head(s, i), GI_NIL);
	}

	for (op = 0; op < NKEYS; op++)
		free(mk[op].v);
	free(mk);
	free(got.v);
	free(want.v);
	ops->store_destroy(s);
}

static void
test_random_differential(void **state)
{
	(void) state;
	run_differential(GI_KEYS_ANY, 200000, UINT64_C(0x5EED0001));
}

static void
test_random_differential_unique(void **state)
{
	(void) state;
	run_differential(GI_KEYS_UNIQUE, 60000, UINT64_C(0x5EED0002));
}

static void
test_random_differential_per_list(void **state)
{
	(void) state;
	run_differential(GI_KEYS_PER_LIST, 100000, UINT64_C(0x5EED0003));
}

/* ---- posting-list store: GI_KEYS_PER_LIST -------------------------------- */

/*
 * The model of a posting-list store: a dense (key index, list) grid of
 * live flags and 4-byte payloads.  Insert applies records in order and
 * skips a live (key, list) cell; delete clears a key's row of cells.
 */
typedef struct pl_model
{
	uint32_t	nkeys;
	uint32_t	nlists;
	uint8_t    *live;			/* [nkeys * nlists] */
	uint32_t   *pay;			/* [nkeys * nlists] */
	uint64_t	rows;
	uint64_t	inserts;
	uint64_t	deletes;
} pl_model;

/* store key of model key i: TID-like, neighbours differ in the low bits */
static uint64_t
pl_key(uint32_t i)
{
	return gi_tid_to_key(i / 3, (uint16_t) (i % 3 + 1));
}

/* model key index of a store key, or UINT32_MAX when none */
static uint32_t
pl_index(const pl_model *m, uint64_t key)
{
	uint64_t	off = gi_key_offset(key);
	uint64_t	i = (uint64_t) gi_key_block(key) * 3 + off - 1;

	if (off < 1 || off > 3 || (key >> 48) != 0 || i >= m->nkeys)
		return UINT32_MAX;
	return (uint32_t) i;
}

static void
pl_model_init(pl_model *m, uint32_t nkeys, uint32_t nlists)
{
	memset(m, 0, sizeof(*m));
	m->nkeys = nkeys;
	m->nlists = nlists;
	m->live = calloc((size_t) nkeys * nlists, 1);
	m->pay = calloc((size_t) nkeys * nlists, sizeof(uint32_t));
	assert_non_null(m->live);
	assert_non_null(m->pay);
}

static void
pl_model_free(pl_model *m)
{
	free(m->live);
	free(m->pay);
}

/*
 * Apply records in order until max_accept of them are accepted; returns
 * how many were.
 */
static uint64_t
pl_model_insert(pl_model *m, uint32_t n, const uint32_t *kidx,
				const uint32_t *lists, const uint32_t *pays,
				uint64_t max_accept)
{
	uint64_t	done = 0;
	uint32_t	i;

	for (i = 0; i < n && done < max_accept; i++)
	{
		size_t		c = (size_t) kidx[i] * m->nlists + lists[i];

		if (m->live[c])
			continue;
		m->live[c] = 1;
		m->pay[c] = pays[i];
		done++;
	}
	m->rows += done;
	m->inserts += done;
	return done;
}

/* records of model key k */
static uint64_t
pl_model_key_rows(const pl_model *m, uint32_t k)
{
	uint64_t	n = 0;
	uint32_t	l;

	for (l = 0; l < m->nlists; l++)
		n += m->live[(size_t) k * m->nlists + l];
	return n;
}

static uint64_t
pl_model_delete(pl_model *m, uint32_t n, const uint32_t *kidx)
{
	uint64_t	done = 0;
	uint32_t	i;
	uint32_t	l;

	for (i = 0; i < n; i++)
		for (l = 0; l < m->nlists; l++)
		{
			size_t		c = (size_t) kidx[i] * m->nlists + l;

			done += m->live[c];
			m->live[c] = 0;
		}
	m->rows -= done;
	m->deletes += done;
	return done;
}

/* insert into store and model alike; ninserted must agree */
static void
pl_insert(gi_store *s, pl_model *m, uint32_t n, const uint32_t *kidx,
		  const uint32_t *lists, const uint32_t *pays)
{
	uint64_t   *keys = malloc(sizeof(uint64_t) * (n + 1));
	uint64_t	got = 12345;
	uint64_t	want;
	uint32_t	i;

	assert_non_null(keys);
	for (i = 0; i < n; i++)
		keys[i] = pl_key(kidx[i]);
	if (ops->store_insert(s, n, lists, keys, pays, &got) != GI_OK)
		fail_msg("insert: %s", ops->last_error());
	want = pl_model_insert(m, n, kidx, lists, pays, UINT64_MAX);
	assert_int_equal(got, want);
	free(keys);
}

static void
pl_delete(gi_store *s, pl_model *m, uint32_t n, const uint32_t *kidx)
{
	uint64_t   *keys = malloc(sizeof(uint64_t) * (n + 1));
	uint64_t	got = 12345;
	uint32_t	i;

	assert_non_null(keys);
	for (i = 0; i < n; i++)
		keys[i] = pl_key(kidx[i]);
	assert_int_equal(ops->store_delete(s, n, keys, &got), GI_OK);
	assert_int_equal(got, pl_model_delete(m, n, kidx));
	free(keys);
}

typedef struct pl_walk
{
	const pl_model *m;
	uint32_t	list;
	uint8_t    *seen;			/* [nkeys * nlists] */
	uint64_t	n;
} pl_walk;

static bool
pl_walk_cb(uint64_t key, uint32_t row, const void *payload, void *arg)
{
	pl_walk    *w = arg;
	uint32_t	k = pl_index(w->m, key);
	uint32_t	p;
	size_t		c;

	(void) row;
	memcpy(&p, payload, sizeof(p));
	if (k == UINT32_MAX)
		fail_msg("list %u holds key %llu that the model never had", w->list,
				 (unsigned long long) key);
	c = (size_t) k * w->m->nlists + w->list;
	if (!w->m->live[c])
		fail_msg("list %u holds key %u, not live in the model", w->list, k);
	if (w->seen[c])
		fail_msg("list %u holds key %u twice", w->list, k);
	if (w->m->pay[c] != p)
		fail_msg("list %u key %u: payload %08x, model %08x", w->list, k, p,
				 w->m->pay[c]);
	w->seen[c] = 1;
	w->n++;
	return true;
}

/*
 * The store against the model: invariants, stats, every list through
 * foreach and every key through lookup and row.
 */
static void
pl_compare(gi_store *s, const pl_model *m)
{
	gi_store_stats st = stats_of(s);
	uint8_t    *seen = calloc((size_t) m->nkeys * m->nlists, 1);
	uint32_t   *lists = malloc(sizeof(uint32_t) * m->nlists);
	uint32_t   *rows = malloc(sizeof(uint32_t) * m->nlists);
	uint64_t	live_keys = 0;
	pl_walk		w;
	uint32_t	k;
	uint32_t	l;

	assert_non_null(seen);
	assert_non_null(lists);
	assert_non_null(rows);
	check_store(s);

	memset(&w, 0, sizeof(w));
	w.m = m;
	w.seen = seen;
	for (l = 0; l < m->nlists; l++)
	{
		uint64_t	before = w.n;
		uint64_t	want = 0;

		int64_t		visited;

		w.list = l;
		visited = gi_host_store_foreach(s, l, pl_walk_cb, &w);
		assert_int_equal(visited, (int64_t) (w.n - before));
		for (k = 0; k < m->nkeys; k++)
			want += m->live[(size_t) k * m->nlists + l];
		assert_int_equal(w.n - before, want);
	}
	assert_int_equal(w.n, m->rows);

	for (k = 0; k < m->nkeys; k++)
	{
		uint64_t	want = pl_model_key_rows(m, k);
		uint32_t	n = gi_host_store_lookup(s, pl_key(k), lists, rows, m->nlists);
		uint32_t	j;

		assert_int_equal(n, want);
		live_keys += want > 0;
		for (j = 0; j < n; j++)
		{
			size_t		c = (size_t) k * m->nlists + lists[j];
			uint32_t	list;
			uint64_t	key;
			uint32_t	p;

			assert_true(lists[j] < m->nlists);
			assert_true(m->live[c]);
			assert_int_equal(seen[c], 1);	/* found by foreach, and once here */
			seen[c] = 2;
			assert_true(gi_host_store_row(s, rows[j], &list, &key, &p));
			assert_int_equal(list, lists[j]);
			assert_int_equal(key, pl_key(k));
			assert_int_equal(p, m->pay[c]);
		}
	}

	assert_int_equal(st.rows, m->rows);
	assert_int_equal(st.keys, live_keys);
	assert_int_equal(st.payload_bytes, m->rows * 4);
	assert_int_equal(st.inserts, m->inserts);
	assert_int_equal(st.deletes, m->deletes);
	free(seen);
	free(lists);
	free(rows);
}

/* repeated pairs in one call and across calls; the first record wins */
static void
test_per_list_skip(void **state)
{
	gi_store   *s = new_store(4, 4, 1, GI_KEYS_PER_LIST, 0);
	gi_store   *any = new_store(4, 4, 1, GI_KEYS_ANY, 0);
	gi_store   *uniq = new_store(4, 4, 1, GI_KEYS_UNIQUE, 0);
	pl_model	m;
	uint32_t	kidx[7] = {5, 5, 5, 6, 6, 5, 7};
	uint32_t	lists[7] = {0, 1, 0, 0, 0, 1, 3};
	uint32_t	pays[7] = {1, 2, 3, 4, 5, 6, 7};
	uint64_t	keys[7];
	uint64_t	n;
	uint32_t	i;

	(void) state;
	pl_model_init(&m, 16, 4);
	for (i = 0; i < 7; i++)
		keys[i] = pl_key(kidx[i]);

	/* (5,0), (5,1), (6,0), (7,3) go in; the repeats of (5,0) (6,0) (5,1) not */
	assert_int_equal(ops->store_insert(s, 7, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 4);
	assert_int_equal(pl_model_insert(&m, 7, kidx, lists, pays, UINT64_MAX), 4);
	pl_compare(s, &m);
	assert_int_equal(m.pay[5 * 4 + 0], 1);

	/* all of them again: every pair is present */
	assert_int_equal(ops->store_insert(s, 7, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 0);
	pl_compare(s, &m);

	/* present pairs among new ones: only the new go in */
	{
		uint32_t	k2[5] = {5, 5, 6, 6, 5};
		uint32_t	l2[5] = {2, 0, 3, 3, 3};
		uint32_t	p2[5] = {10, 11, 12, 13, 14};

		pl_insert(s, &m, 5, k2, l2, p2);
		assert_int_equal(stats_of(s).rows, 7);
		pl_compare(s, &m);
	}
	assert_int_equal(gi_host_store_lookup(s, pl_key(5), NULL, NULL, 0), 4);

	/* delete, then the same pairs come back, with the new payloads */
	{
		uint32_t	d[3] = {5, 5, 9};
		uint32_t	p3[7] = {21, 22, 23, 24, 25, 26, 27};

		pl_delete(s, &m, 3, d);
		pl_compare(s, &m);
		pl_insert(s, &m, 7, kidx, lists, p3);
		assert_int_equal(m.pay[5 * 4 + 0], 21);
		assert_int_equal(gi_host_store_lookup(s, pl_key(5), NULL, NULL, 0), 2);
		pl_compare(s, &m);
	}

	/* the other modes on the same first batch */
	assert_int_equal(ops->store_insert(any, 7, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 7);
	assert_int_equal(ops->store_insert(uniq, 7, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 3);
	check_store(any);
	check_store(uniq);

	pl_model_free(&m);
	ops->store_destroy(s);
	ops->store_destroy(any);
	ops->store_destroy(uniq);
}

/* Fisher-Yates with the test PRNG */
static void
shuffle_u32(uint32_t *v, uint32_t n)
{
	uint32_t	i;

	for (i = n; i > 1; i--)
	{
		uint32_t	j = rng_below(i);
		uint32_t	t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/*
 * Keys owning from 1 to 2,000 records each, across 2,000 lists, loaded in
 * shuffled batches that repeat pairs within and across calls; then half
 * the keys deleted and re-inserted.
 */
static void
test_per_list_many_records(void **state)
{
	enum
	{
		NL = 2000, NK = 40
	};
	gi_store   *s = new_store(NL, 4, 64, GI_KEYS_PER_LIST, 0);
	pl_model	m;
	uint32_t   *perm = malloc(sizeof(uint32_t) * NL);
	uint32_t   *rk;				/* every record: key index */
	uint32_t   *rl;				/* and list */
	uint32_t   *bk;				/* one batch */
	uint32_t   *bl;
	uint32_t   *bp;
	uint32_t   *order;
	uint32_t	total = 0;
	uint32_t	pos;
	uint32_t	k;
	uint32_t	i;

	(void) state;
	rng_seed(0xB0B0);
	pl_model_init(&m, NK, NL);
	rk = malloc(sizeof(uint32_t) * NK * NL);
	rl = malloc(sizeof(uint32_t) * NK * NL);
	order = malloc(sizeof(uint32_t) * NK * NL);
	bk = malloc(sizeof(uint32_t) * 2 * NL);
	bl = malloc(sizeof(uint32_t) * 2 * NL);
	bp = malloc(sizeof(uint32_t) * 2 * NL);
	assert_true(perm && rk && rl && order && bk && bl && bp);

	/* key k owns 1 + k * 1999 / 39 records: 1 for the first, 2000 for the last */
	for (i = 0; i < NL; i++)
		perm[i] = i;
	for (k = 0; k < NK; k++)
	{
		uint32_t	c = 1 + k * (NL - 1) / (NK - 1);

		shuffle_u32(perm, NL);
		for (i = 0; i < c; i++)
		{
			rk[total] = k;
			rl[total] = perm[i];
			total++;
		}
	}
	for (i = 0; i < total; i++)
		order[i] = i;
	shuffle_u32(order, total);

	/* batches of up to NL records, a tenth of them repeats */
	for (pos = 0; pos < total;)
	{
		uint32_t	want = 1 + rng_below(NL);
		uint32_t	n = 0;

		while (n < want && pos < total)
		{
			if (n > 0 && rng_below(10) == 0)
			{
				/* a pair from earlier in this batch or from before */
				uint32_t	from = rng_below(2) ? rng_below(n) : UINT32_MAX;

				if (from != UINT32_MAX)
				{
					bk[n] = bk[from];
					bl[n] = bl[from];
				}
				else
				{
					uint32_t	r = order[rng_below(pos + 1)];

					bk[n] = rk[r];
					bl[n] = rl[r];
				}
			}
			else
			{
				bk[n] = rk[order[pos]];
				bl[n] = rl[order[pos]];
				pos++;
			}
			bp[n] = (uint32_t) rng_next();
			n++;
		}
		pl_insert(s, &m, n, bk, bl, bp);
		pl_compare(s, &m);
	}
	assert_int_equal(m.rows, total);
	assert_int_equal(gi_host_store_lookup(s, pl_key(0), NULL, NULL, 0), 1);
	assert_int_equal(gi_host_store_lookup(s, pl_key(NK - 1), NULL, NULL, 0), NL);

	/* delete the odd keys (with repeats and an unknown key in the batch) */
	{
		uint32_t	d[NK];
		uint32_t	nd = 0;

		for (k = 1; k < NK; k += 2)
		{
			d[nd++] = k;
			if (k % 5 == 0)
				d[nd++] = k;
		}
		pl_delete(s, &m, nd, d);
		pl_compare(s, &m);
		/* a second time: nothing left to delete */
		pl_delete(s, &m, nd, d);
	}

	/* re-insert them with new payloads: all go in again */
	{
		uint32_t	n = 0;
		uint64_t	before = m.rows;

		for (i = 0; i < total; i++)
		{
			if (rk[i] % 2 == 0)
				continue;
			bk[n] = rk[i];
			bl[n] = rl[i];
			bp[n] = (uint32_t) rng_next();
			if (++n == 2 * NL)
			{
				pl_insert(s, &m, n, bk, bl, bp);
				n = 0;
			}
		}
		pl_insert(s, &m, n, bk, bl, bp);
		assert_int_equal(m.rows, total);
		assert_true(m.rows > before);
		pl_compare(s, &m);
	}

	/* everything goes: every slab back on the free stack */
	for (k = 0; k < NK; k++)
		pl_delete(s, &m, 1, &k);
	pl_compare(s, &m);
	assert_int_equal(stats_of(s).slabs_used, 0);

	pl_model_free(&m);
	free(perm);
	free(rk);
	free(rl);
	free(order);
	free(bk);
	free(bl);
	free(bp);
	ops->store_destroy(s);
}

/*
 * What a list of the big-key test must hold: (big, l) with payload
 * l ^ 0xB16B16 once, and other keys o (offset 1) where l == o * 31 % NL,
 * payload o.
 */
typedef struct big_walk
{
	uint64_t	big;
	uint32_t	list;
	uint8_t    *big_seen;		/* [NL] */
	uint64_t	n;
} big_walk;

static bool
big_walk_cb(uint64_t key, uint32_t row, const void *payload, void *arg)
{
	big_walk   *w = arg;
	uint32_t	p;

	(void) row;
	memcpy(&p, payload, sizeof(p));
	if (key == w->big)
	{
		if (w->big_seen[w->list]++ != 0)
			fail_msg("list %u holds the big key twice", w->list);
		if (p != (w->list ^ 0xB16B16u))
			fail_msg("list %u: the big key's payload %08x is a repeat's", w->list, p);
	}
	else
	{
		uint32_t	o = gi_key_block(key);

		if (gi_key_offset(key) != 1 || o >= 100000 ||
			(uint32_t) (((uint64_t) o * 31) % 100000) != w->list || p != o)
			fail_msg("list %u holds key %llu payload %u, not in the model",
					 w->list, (unsigned long long) key, p);
	}
	w->n++;
	return true;
}

/* map and chain steps per record above which the work is not linear */
#define PL_STEPS_PER_RECORD 8

/*
 * One key owning 100,000 records (one per list), inserted in one call,
 * then in 100 calls of 1,000 interleaved with other keys, repeats and
 * all, and deleted: the store's step count stays proportional to the
 * records handled, where a walk of the key's records per insert would
 * take some 10^9 steps.
 */
static void
test_per_list_big_key(void **state)
{
	enum
	{
		NL = 100000, PER = 1000, CALLS = NL / PER
	};
	const uint64_t big = gi_tid_to_key(UINT32_MAX - 3, 42);
	gi_store   *s = new_store(NL, 4, 1 << 16, GI_KEYS_PER_LIST, 0);
	uint32_t   *lists = malloc(sizeof(uint32_t) * 2 * NL);
	uint64_t   *keys = malloc(sizeof(uint64_t) * 2 * NL);
	uint32_t   *pays = malloc(sizeof(uint32_t) * 2 * NL);
	uint32_t   *got = malloc(sizeof(uint32_t) * NL);
	uint8_t    *mark = calloc(NL, 1);
	uint32_t	perm[PER];
	uint64_t	steps;
	uint64_t	sent = 0;
	uint64_t	n;
	uint32_t	i;
	uint32_t	c;

	(void) state;
	assert_true(lists && keys && pays && got && mark);
	rng_seed(0xB16);

	/* one call: the key in every list, in a scattered order */
	for (i = 0; i < NL; i++)
	{
		lists[i] = (uint32_t) (((uint64_t) i * 7919) % NL);
		keys[i] = big;
		pays[i] = i;
	}
	steps = gi_host_store_steps(s);
	assert_int_equal(ops->store_insert(s, NL, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, NL);
	assert_true(gi_host_store_steps(s) - steps <= (uint64_t) PL_STEPS_PER_RECORD * NL);
	/* the same call again: every record is a repeat */
	steps = gi_host_store_steps(s);
	assert_int_equal(ops->store_insert(s, NL, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 0);
	assert_true(gi_host_store_steps(s) - steps <= (uint64_t) PL_STEPS_PER_RECORD * NL);
	check_store(s);
	assert_int_equal(gi_host_store_lookup(s, big, got, NULL, NL), NL);
	for (i = 0; i < NL; i++)
	{
		assert_true(got[i] < NL && !mark[got[i]]);
		mark[got[i]] = 1;
	}
	steps = gi_host_store_steps(s);
	n = 0;
	assert_int_equal(ops->store_delete(s, 1, &big, &n), GI_OK);
	assert_int_equal(n, NL);
	assert_true(gi_host_store_steps(s) - steps <= (uint64_t) PL_STEPS_PER_RECORD * NL);
	check_store(s);
	assert_int_equal(stats_of(s).rows, 0);

	/*
	 * 100 calls: call c brings the key's lists c * 1000 .. c * 1000 + 999
	 * in shuffled order, each followed by a record of another key (key o
	 * in list o * 31 % NL), and every 20th by a repeat of a pair of this
	 * call and one of an earlier call.
	 */
	steps = gi_host_store_steps(s);
	for (i = 0; i < PER; i++)
		perm[i] = i;
	for (c = 0; c < CALLS; c++)
	{
		uint32_t	m = 0;
		uint32_t	j;

		shuffle_u32(perm, PER);
		for (j = 0; j < PER; j++)
		{
			uint32_t	o = c * PER + j;

			lists[m] = c * PER + perm[j];
			keys[m] = big;
			pays[m] = lists[m] ^ 0xB16B16u;
			m++;
			lists[m] = (uint32_t) (((uint64_t) o * 31) % NL);
			keys[m] = gi_tid_to_key(o, 1);
			pays[m++] = o;
			if (j % 20 == 19)
			{
				lists[m] = c * PER + perm[rng_below(j + 1)];
				keys[m] = big;
				pays[m++] = 0;
				if (c > 0)
				{
					lists[m] = rng_below(c * PER);
					keys[m] = big;
					pays[m++] = 0;
				}
			}
		}
		assert_int_equal(ops->store_insert(s, m, lists, keys, pays, &n), GI_OK);
		assert_int_equal(n, 2 * PER);
		sent += m;
	}
	assert_true(gi_host_store_steps(s) - steps <= PL_STEPS_PER_RECORD * sent);

	/* the model here is arithmetic: list l holds (big, l) and others */
	check_store(s);
	{
		gi_store_stats st = stats_of(s);

		assert_int_equal(st.rows, 2 * NL);
		assert_int_equal(st.keys, 1 + NL);
		assert_int_equal(st.payload_bytes, 2 * NL * 4);
	}
	memset(mark, 0, NL);
	assert_int_equal(gi_host_store_lookup(s, big, got, NULL, NL), NL);
	for (i = 0; i < NL; i++)
	{
		uint32_t	row;
		uint32_t	list;
		uint32_t	p;

		assert_true(got[i] < NL && !mark[got[i]]);
		mark[got[i]] = 1;
		assert_int_equal(gi_host_store_lookup(s, gi_tid_to_key(i, 1), &list,
											  &row, 1), 1);
		assert_int_equal(list, (uint32_t) (((uint64_t) i * 31) % NL));
		assert_true(gi_host_store_row(s, row, NULL, NULL, &p));
		assert_int_equal(p, i);
	}
	{
		big_walk	w;

		memset(mark, 0, NL);
		w.big = big;
		w.big_seen = mark;
		w.n = 0;
		for (i = 0; i < NL; i++)
		{
			w.list = i;
			assert_true(gi_host_store_foreach(s, i, big_walk_cb, &w) >= 1);
		}
		assert_int_equal(w.n, 2 * NL);
		for (i = 0; i < NL; i++)
			assert_int_equal(mark[i], 1);
	}

	/* delete the big key among others: its records and theirs only */
	{
		uint64_t	d[4] = {gi_tid_to_key(5, 1), big, big, gi_tid_to_key(NL + 5, 1)};

		steps = gi_host_store_steps(s);
		assert_int_equal(ops->store_delete(s, 4, d, &n), GI_OK);
		assert_int_equal(n, NL + 1);
		assert_true(gi_host_store_steps(s) - steps <= (uint64_t) PL_STEPS_PER_RECORD * NL);
		check_store(s);
		assert_int_equal(stats_of(s).rows, NL - 1);
		assert_int_equal(stats_of(s).keys, NL - 1);
		assert_int_equal(gi_host_store_lookup(s, big, NULL, NULL, 0), 0);
		assert_int_equal(gi_host_store_lookup(s, gi_tid_to_key(6, 1), NULL, NULL, 0), 1);
	}

	free(lists);
	free(keys);
	free(pays);
	free(got);
	free(mark);
	ops->store_destroy(s);
}

/*
 * Record i of a random batch: a fresh (key index, list) pair, or one time
 * in repeat_one_in a repeat of an earlier record's pair; a random payload.
 */
static void
pl_random_record(uint32_t i, uint32_t nk, uint32_t nl, uint32_t repeat_one_in,
				 uint32_t *kidx, uint32_t *lists, uint32_t *pays)
{
	if (i > 0 && rng_below(repeat_one_in) == 0)
	{
		uint32_t	from = rng_below(i);

		kidx[i] = kidx[from];
		lists[i] = lists[from];
	}
	else
	{
		kidx[i] = rng_below(nk);
		lists[i] = rng_below(nl);
	}
	pays[i] = (uint32_t) rng_next();
}

/*
 * Random mixed operations, the model compared after every one: batches
 * with repeated pairs, deletes of present, absent and repeated keys, and
 * reloads that resend all of a key's pairs among new ones (what a load
 * racing with inserts sends).
 */
static void
test_per_list_random(void **state)
{
	enum
	{
		NL = 12, NK = 30, OPS = 600, MAXB = 24
	};
	gi_store   *s = new_store(NL, 4, 2, GI_KEYS_PER_LIST, 0);
	pl_model	m;
	uint32_t	op;

	(void) state;
	rng_seed(0x5EED0004);
	pl_model_init(&m, NK, NL);
	for (op = 0; op < OPS; op++)
	{
		uint32_t	kind = rng_below(10);
		uint32_t	bk[NL + MAXB];
		uint32_t	bl[NL + MAXB];
		uint32_t	bp[NL + MAXB];
		uint32_t	n = 0;
		uint32_t	i;

		if (kind < 5)
		{
			uint32_t	cnt = 1 + rng_below(MAXB);

			for (i = 0; i < cnt; i++)
				pl_random_record(n++, NK, NL, 4, bk, bl, bp);
			pl_insert(s, &m, n, bk, bl, bp);
		}
		else if (kind < 8)
		{
			uint32_t	cnt = 1 + rng_below(4);

			for (i = 0; i < cnt; i++)
				bk[n++] = i > 0 && rng_below(3) == 0 ? bk[0] : rng_below(NK);
			pl_delete(s, &m, n, bk);
		}
		else
		{
			uint32_t	k = rng_below(NK);
			uint32_t	l;
			uint32_t	extra = rng_below(MAXB);

			for (l = 0; l < NL; l++)
				if (m.live[(size_t) k * NL + l])
				{
					bk[n] = k;
					bl[n] = l;
					bp[n++] = (uint32_t) rng_next();
				}
			for (i = 0; i < extra; i++)
			{
				bk[n] = rng_below(3) == 0 ? k : rng_below(NK);
				bl[n] = rng_below(NL);
				bp[n++] = (uint32_t) rng_next();
			}
			shuffle_u32(bp, n);
			pl_insert(s, &m, n, bk, bl, bp);
		}
		pl_compare(s, &m);
	}
	assert_true(m.inserts > 500 && m.deletes > 200);
	pl_model_free(&m);
	ops->store_destroy(s);
}

/*
 * The kept pair set counts against the memory limit.  A call of new keys
 * keeps no pair (the store's bytes equal a GI_KEYS_ANY store's); a later
 * call that brings the keys again needs room to keep their pairs: at a
 * limit without it, repeats of present pairs still pass, the first new
 * pair of such a key fails and nothing changes; with the limit lifted the
 * call goes in and the kept pairs show in the bytes.
 */
static void
test_per_list_memory_limit(void **state)
{
	enum
	{
		NL = 10, NK = 10, HALF = NK * NL / 2
	};
	uint32_t	kidx[2 * NK * NL];
	uint32_t	lists[2 * NK * NL];
	uint32_t	pays[2 * NK * NL];
	uint64_t	keys[2 * NK * NL];
	gi_store   *any;
	gi_store   *s;
	uint64_t	n = 99;
	pl_model	m;
	uint32_t	i;

	(void) state;
	/*
	 * Records 0 .. HALF - 1: key i / 5 in list i % 5; then from HALF on,
	 * pairs of lists 5 .. 9, each preceded by a repeat of a present pair.
	 */
	for (i = 0; i < HALF; i++)
	{
		kidx[i] = i / 5;
		lists[i] = i % 5;
		pays[i] = i;
		kidx[HALF + 2 * i] = kidx[HALF + 2 * i + 1] = i / 5;
		lists[HALF + 2 * i] = i % 5;
		lists[HALF + 2 * i + 1] = 5 + i % 5;
		pays[HALF + 2 * i] = ~i;
		pays[HALF + 2 * i + 1] = i + 1000;
	}
	for (i = 0; i < 3 * HALF; i++)
		keys[i] = pl_key(kidx[i]);

	s = new_store(NL, 4, 16, GI_KEYS_PER_LIST, 0);
	any = new_store(NL, 4, 16, GI_KEYS_ANY, 0);
	pl_model_init(&m, NK, NL);
	pl_insert(s, &m, HALF, kidx, lists, pays);
	assert_int_equal(ops->store_insert(any, HALF, lists, keys, pays, &n), GI_OK);
	assert_int_equal(stats_of(s).bytes, stats_of(any).bytes);

	/* no room to keep pairs: the repeat passes, the new pair stops the call */
	ops->store_set_limit(s, stats_of(s).bytes);
	assert_int_equal(ops->store_insert(s, 2 * HALF, lists + HALF, keys + HALF,
									   pays + HALF, &n), GI_ERR_LIMIT);
	assert_int_equal(n, 0);
	assert_non_null(strstr(ops->last_error(), "gpuindex.memory_limit"));
	pl_compare(s, &m);
	assert_int_equal(ops->store_insert(s, HALF, lists, keys, pays, &n), GI_OK);
	assert_int_equal(n, 0);
	pl_compare(s, &m);

	/* room: every new pair goes in, and the kept pairs are counted */
	ops->store_set_limit(s, 0);
	pl_insert(s, &m, 2 * HALF, kidx + HALF, lists + HALF, pays + HALF);
	assert_int_equal(m.rows, NK * NL);
	assert_int_equal(ops->store_insert(any, 2 * HALF, lists + HALF, keys + HALF,
									   pays + HALF, &n), GI_OK);
	assert_int_equal(stats_of(s).slabs_total, stats_of(any).slabs_total);
	assert_true(stats_of(s).bytes >= stats_of(any).bytes +
				(NK * (NL + 1)) * 2 * sizeof(uint64_t));
	pl_compare(s, &m);
	for (i = 0; i < NK; i++)
		kidx[i] = i;
	pl_delete(s, &m, NK, kidx);
	assert_int_equal(m.rows, 0);
	pl_compare(s, &m);
	pl_model_free(&m);
	ops->store_destroy(any);
	ops->store_destroy(s);
}

/*
 * The allocator fails at every point of a batch that grows the pool, the
 * key map and the pair sets, on a store already holding some of the pairs:
 * each time the store is consistent and holds exactly the prefix that
 * ninserted reports, and takes the rest once memory is back.
 */
static void
test_per_list_alloc_failure(void **state)
{
	enum
	{
		NL = 30, NK = 60, N = 400, PRE = 40
	};
	uint32_t	kidx[N];
	uint32_t	lists[N];
	uint32_t	pays[N];
	uint64_t	keys[N];
	int64_t		after;
	bool		reached_ok = false;
	uint32_t	i;

	(void) state;
	rng_seed(0xFA11);
	for (i = 0; i < N; i++)
	{
		pl_random_record(i, NK, NL, 6, kidx, lists, pays);
		keys[i] = pl_key(kidx[i]);
	}
	for (after = 0; after < 400 && !reached_ok; after++)
	{
		gi_store   *s = new_store(NL, 4, 2, GI_KEYS_PER_LIST, 0);
		pl_model	m;
		uint64_t	n = 12345;
		gi_status	st;

		pl_model_init(&m, NK, NL);
		/* some pairs are present before the batch */
		pl_insert(s, &m, PRE, kidx + N - PRE, lists + N - PRE, pays + N - PRE);

		gi_host_store_fail_alloc_after(after);
		st = ops->store_insert(s, N, lists, keys, pays, &n);
		gi_host_store_fail_alloc_after(-1);
		if (st == GI_OK)
			reached_ok = true;
		else
		{
			assert_int_equal(st, GI_ERR_NOMEM);
			assert_non_null(strstr(ops->last_error(), "out of memory"));
		}
		assert_int_equal(pl_model_insert(&m, N, kidx, lists, pays, n), n);
		pl_compare(s, &m);

		/* memory is back: the whole batch again, the rest goes in */
		pl_insert(s, &m, N, kidx, lists, pays);
		pl_compare(s, &m);
		pl_model_free(&m);
		ops->store_destroy(s);
	}
	assert_true(reached_ok);
	assert_true(after > 10);

	/* failure while creating a PER_LIST store */
	for (after = 0; after < 8; after++)
	{
		gi_store_params p;
		gi_store   *s = NULL;
		gi_status	st;

		memset(&p, 0, sizeof(p));
		p.nlists = 3;
		p.record_bytes = 4;
		p.key_mode = GI_KEYS_PER_LIST;
		gi_host_store_fail_alloc_after(after);
		st = ops->store_create(&p, &s);
		gi_host_store_fail_alloc_after(-1);
		if (st == GI_OK)
		{
			check_store(s);
			ops->store_destroy(s);
		}
		else
		{
			assert_int_equal(st, GI_ERR_NOMEM);
			assert_null(s);
		}
	}
}

/* ---- IVF search against brute force ------------------------------------- */

/* the test's own distance: double sums in dimension order, see host_ivf.c */
static double
ref_distance(gi_metric metric, const float *q, const float *x, uint32_t dim)
{
	double		acc = 0.0;
	double		qq = 0.0;
	double		xx = 0.0;
	uint32_t	j;

	for (j = 0; j < dim; j++)
	{
		if (metric == GI_METRIC_L2)
			acc += ((double) x[j] - q[j]) * ((double) x[j] - q[j]);
		else
		{
			acc += (double) x[j] * q[j];
			qq += (double) q[j] * q[j];
			xx += (double) x[j] * x[j];
		}
	}
	if (metric == GI_METRIC_L2)
		return acc;
	if (metric == GI_METRIC_IP)
		return -acc;
	if (qq == 0.0 || xx == 0.0)
		return INFINITY;
	return 1.0 - acc / (sqrt(qq) * sqrt(xx));
}

typedef struct ref_hit
{
	double		d;
	uint64_t	id;
} ref_hit;

static int
ref_hit_cmp(const void *a, const void *b)
{
	const ref_hit *x = a;
	const ref_hit *y = b;

	if (x->d != y->d)
		return x->d < y->d ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

typedef struct ivf_data
{
	uint32_t	dim;
	uint32_t	nlists;
	uint32_t	n;
	float	   *centroids;
	float	   *vecs;			/* n * dim */
	uint32_t   *lists;
	uint64_t   *keys;
	bool	   *alive;
} ivf_data;

/* brute force restricted to the `probes` lists nearest to q */
static uint32_t
ref_search(const ivf_data *d, gi_metric metric, const float *q,
		   uint32_t probes, uint32_t k, ref_hit *out)
{
	ref_hit    *cl = malloc(sizeof(ref_hit) * d->nlists);
	ref_hit    *cand = malloc(sizeof(ref_hit) * (d->n + 1));
	bool	   *probed = calloc(d->nlists, sizeof(bool));
	uint32_t	nc = 0;
	uint32_t	i;

	assert_non_null(cl);
	assert_non_null(cand);
	assert_non_null(probed);
	for (i = 0; i < d->nlists; i++)
	{
		double		dd = ref_distance(metric, q, d->centroids + i * d->dim, d->dim);

		cl[i].d = isnan(dd) ? INFINITY : dd;
		cl[i].id = i;
	}
	qsort(cl, d->nlists, sizeof(ref_hit), ref_hit_cmp);
	for (i = 0; i < probes && i < d->nlists; i++)
		probed[cl[i].id] = true;
	for (i = 0; i < d->n; i++)
	{
		float		f;

		if (!d->alive[i] || !probed[d->lists[i]])
			continue;
		f = (float) ref_distance(metric, q, d->vecs + (size_t) i * d->dim, d->dim);
		cand[nc].d = isnan(f) ? INFINITY : f;
		cand[nc].id = d->keys[i];
		nc++;
	}
	qsort(cand, nc, sizeof(ref_hit), ref_hit_cmp);
	if (nc > k)
		nc = k;
	memcpy(out, cand, nc * sizeof(ref_hit));
	free(cl);
	free(cand);
	free(probed);
	return nc;
}

/* a gi_ivf_state for the given centroids (caller frees) */
static gi_ivf_state *
ivf_state_new(uint32_t nlists, uint32_t dim, gi_metric metric,
			  const float *centroids)
{
	gi_ivf_state *st = malloc(gi_ivf_state_size(nlists, dim));

	assert_non_null(st);
	memset(st, 0, sizeof(*st));
	st->dim = dim;
	st->metric = metric;
	st->nlists = nlists;
	memcpy(st + 1, centroids, sizeof(float) * nlists * dim);
	return st;
}

/* hand the store its centroids through the kind's set_state */
static void
ivf_set_state(gi_store *s, uint32_t nlists, uint32_t dim, gi_metric metric,
			  const float *centroids)
{
	gi_ivf_state *st = ivf_state_new(nlists, dim, metric, centroids);

	if (ops->kinds[GI_KIND_IVF]->set_state(s, st, gi_ivf_state_size(nlists, dim)) != GI_OK)
		fail_msg("ivf set_state: %s", ops->last_error());
	free(st);
}

/* the IVF kind's search with queries of dimension dim */
static gi_status
ivf_search(gi_store *s, uint32_t dim, uint32_t probes, uint32_t nq,
		   const float *queries, uint32_t k, gi_hit *hits, uint32_t *found)
{
	gi_ivf_search_params p;

	p.dim = dim;
	p.probes = probes;
	return ops->kinds[GI_KIND_IVF]->search(s, &p, nq, queries,
										   (size_t) nq * dim * sizeof(float),
										   k, hits, found);
}

static void
check_search(gi_store *s, const ivf_data *d, gi_metric metric, uint32_t nq,
			 const float *queries, uint32_t probes, uint32_t k)
{
	gi_hit	   *hits = malloc(sizeof(gi_hit) * nq * k);
	uint32_t   *found = malloc(sizeof(uint32_t) * nq);
	ref_hit    *want = malloc(sizeof(ref_hit) * k);
	uint32_t	q;

	assert_non_null(hits);
	assert_non_null(found);
	assert_non_null(want);
	ivf_set_state(s, d->nlists, d->dim, metric, d->centroids);
	if (ivf_search(s, d->dim, probes, nq, queries, k, hits, found) != GI_OK)
		fail_msg("ivf search: %s", ops->last_error());
	for (q = 0; q < nq; q++)
	{
		uint32_t	nw = ref_search(d, metric, queries + (size_t) q * d->dim,
									probes, k, want);
		uint32_t	r;

		if (found[q] != nw)
			fail_msg("metric %d probes %u k %u query %u: found %u, brute force %u",
					 metric, probes, k, q, found[q], nw);
		for (r = 0; r < k; r++)
		{
			const gi_hit *h = &hits[(size_t) q * k + r];

			if (r < nw)
			{
				if (h->key != want[r].id || h->distance != (float) want[r].d)
					fail_msg("metric %d probes %u k %u query %u rank %u: got (%llu, %.9g), want (%llu, %.9g)",
							 metric, probes, k, q, r,
							 (unsigned long long) h->key, h->distance,
							 (unsigned long long) want[r].id, want[r].d);
			}
			else
			{
				assert_int_equal(h->key, 0);
				assert_true(isinf(h->distance) && h->distance > 0);
			}
		}
	}
	free(hits);
	free(found);
	free(want);
}

static void
test_ivf_search(void **state)
{
	enum
	{
		DIM = 12, NL = 9, N = 900, NQ = 12
	};
	ivf_data	d;
	gi_store   *s = new_store(NL, DIM * 4, 4, GI_KEYS_ANY, 0);
	float		queries[NQ * DIM];
	uint32_t	i;
	uint32_t	j;
	int			m;

	(void) state;
	rng_seed(777);
	d.dim = DIM;
	d.nlists = NL;
	d.n = N;
	d.centroids = malloc(sizeof(float) * NL * DIM);
	d.vecs = malloc(sizeof(float) * N * DIM);
	d.lists = malloc(sizeof(uint32_t) * N);
	d.keys = malloc(sizeof(uint64_t) * N);
	d.alive = malloc(sizeof(bool) * N);
	for (i = 0; i < NL * DIM; i++)
		d.centroids[i] = rng_float();
	for (i = 0; i < N; i++)
	{
		for (j = 0; j < DIM; j++)
			d.vecs[i * DIM + j] = rng_float();
		d.lists[i] = rng_below(NL);
		/* shuffled keys, so key order is not insertion order */
		d.keys[i] = gi_tid_to_key((i * 7919u) % N, (uint16_t) (i % 3));
		d.alive[i] = true;
	}
	/* exact ties: copies of record 0 under other keys, in other lists */
	for (i = 1; i <= 6; i++)
		memcpy(d.vecs + (size_t) (N - i) * DIM, d.vecs, sizeof(float) * DIM);
	/* zero vectors: cosine ranks them last */
	for (i = 10; i < 14; i++)
		memset(d.vecs + (size_t) i * DIM, 0, sizeof(float) * DIM);
	/* multi-posting: record 20's key also owns record 21, 22 */
	d.keys[21] = d.keys[20];
	d.keys[22] = d.keys[20];

	assert_int_equal(ops->store_insert(s, N, d.lists, d.keys, d.vecs, NULL),
					 GI_OK);
	/* delete some keys in the model and the store alike */
	for (i = 0; i < N; i += 7)
	{
		uint32_t	x;

		delete1(s, d.keys[i]);
		for (x = 0; x < N; x++)
			if (d.keys[x] == d.keys[i])
				d.alive[x] = false;
	}
	check_store(s);

	for (i = 0; i < NQ * DIM; i++)
		queries[i] = rng_float();
	memcpy(queries, d.vecs, sizeof(float) * DIM);	/* hits the ties */
	memset(queries + DIM, 0, sizeof(float) * DIM);	/* zero query */
	memcpy(queries + 2 * DIM, d.centroids + 3 * DIM, sizeof(float) * DIM);

	for (m = 0; m < 3; m++)
	{
		gi_metric	metric = (gi_metric) m;

		check_search(s, &d, metric, NQ, queries, NL, 10);	/* exact */
		check_search(s, &d, metric, NQ, queries, NL + 5, 1);	/* clamped */
		check_search(s, &d, metric, NQ, queries, 3, 25);
		check_search(s, &d, metric, NQ, queries, 1, 7);
		check_search(s, &d, metric, NQ, queries, 2, 2000);	/* k > records */
	}

	/* argument errors */
	{
		gi_hit		h[4];
		uint32_t	f[1];

		assert_int_equal(ivf_search(s, DIM + 1, 1, 1, queries, 4, h, f),
						 GI_ERR_INVALID);
		assert_int_equal(ivf_search(s, DIM, 0, 1, queries, 4, h, f),
						 GI_ERR_INVALID);
		assert_int_equal(gi_host_ivf_search(s, d.centroids, DIM, (gi_metric) 9,
											1, queries, 1, 4, h, f),
						 GI_ERR_INVALID);
		assert_int_equal(ivf_search(s, DIM, 1, 0, queries, 4, h, f), GI_OK);
		f[0] = 99;
		assert_int_equal(ivf_search(s, DIM, 1, 1, queries, 0, NULL, f), GI_OK);
		assert_int_equal(f[0], 0);
	}

	free(d.centroids);
	free(d.vecs);
	free(d.lists);
	free(d.keys);
	free(d.alive);
	ops->store_destroy(s);
}

/* fewer records than k: found < k and +Inf padding; empty store too */
static void
test_ivf_search_small(void **state)
{
	enum
	{
		DIM = 3, NL = 2
	};
	gi_store   *s = new_store(NL, DIM * 4, 1, GI_KEYS_UNIQUE, 0);
	float		cent[NL * DIM] = {0, 0, 0, 10, 10, 10};
	float		vecs[5 * DIM] = {1, 0, 0, 2, 0, 0, 3, 0, 0, 9, 10, 10, 0, 1, 0};
	uint32_t	lists[5] = {0, 0, 0, 1, 0};
	uint64_t	keys[5] = {50, 40, 30, 20, 10};
	float		q[DIM] = {0, 0, 0};
	gi_hit		h[10];
	uint32_t	f;
	uint32_t	r;

	(void) state;
	ivf_set_state(s, NL, DIM, GI_METRIC_L2, cent);
	/* empty store: nothing found */
	assert_int_equal(ivf_search(s, DIM, 2, 1, q, 10, h, &f), GI_OK);
	assert_int_equal(f, 0);
	for (r = 0; r < 10; r++)
	{
		assert_int_equal(h[r].key, 0);
		assert_true(isinf(h[r].distance));
	}

	assert_int_equal(ops->store_insert(s, 5, lists, keys, vecs, NULL), GI_OK);
	assert_int_equal(ivf_search(s, DIM, 2, 1, q, 10, h, &f), GI_OK);
	assert_int_equal(f, 5);
	/* distances 1 (keys 50 and 10: tie broken by key), 4, 9, 281 */
	assert_int_equal(h[0].key, 10);
	assert_int_equal(h[1].key, 50);
	assert_true(h[0].distance == 1.0f && h[1].distance == 1.0f);
	assert_int_equal(h[2].key, 40);
	assert_true(h[2].distance == 4.0f);
	assert_int_equal(h[3].key, 30);
	assert_int_equal(h[4].key, 20);
	assert_true(h[4].distance == 281.0f);
	for (r = 5; r < 10; r++)
	{
		assert_int_equal(h[r].key, 0);
		assert_true(isinf(h[r].distance) && h[r].distance > 0);
	}

	/* one probe: list 0 only */
	assert_int_equal(ivf_search(s, DIM, 1, 1, q, 10, h, &f), GI_OK);
	assert_int_equal(f, 4);
	ops->store_destroy(s);
}

/*
 * The choice of lists to probe across blocks of 32 centroids: list counts
 * around a block's size, dimensions with and without a tail, centroids
 * repeated in other blocks (ties broken by list number), and a record on
 * each centroid, so that which lists were probed shows in the hits; every
 * answer against the brute force.
 */
static void
test_ivf_rank_blocks(void **state)
{
	static const uint32_t nls[] = {1, 31, 32, 33, 70};
	static const uint32_t dims[] = {1, 5, 33};
	enum
	{
		NQ = 7, PER = 3
	};

	(void) state;
	rng_seed(9090);
	for (size_t a = 0; a < sizeof(nls) / sizeof(nls[0]); a++)
		for (size_t b = 0; b < sizeof(dims) / sizeof(dims[0]); b++)
		{
			uint32_t	nl = nls[a];
			uint32_t	dim = dims[b];
			ivf_data	d;
			gi_store   *s = new_store(nl, dim * 4, 2, GI_KEYS_ANY, 0);
			float	   *queries = malloc(sizeof(float) * NQ * dim);
			uint32_t	i;

			d.dim = dim;
			d.nlists = nl;
			d.n = nl * (PER + 1);
			d.centroids = malloc(sizeof(float) * nl * dim);
			d.vecs = malloc(sizeof(float) * d.n * dim);
			d.lists = malloc(sizeof(uint32_t) * d.n);
			d.keys = malloc(sizeof(uint64_t) * d.n);
			d.alive = malloc(sizeof(bool) * d.n);
			for (i = 0; i < nl * dim; i++)
				d.centroids[i] = rng_float();
			/* copies of list 0's centroid in the next blocks */
			for (i = 32; i + 1 < nl; i += 32)
				memcpy(d.centroids + (size_t) (i + 1) * dim, d.centroids,
					   sizeof(float) * dim);
			for (i = 0; i < d.n; i++)
			{
				uint32_t	j;

				d.lists[i] = i < nl ? i : rng_below(nl);
				for (j = 0; j < dim; j++)
					d.vecs[(size_t) i * dim + j] = i < nl ?
						d.centroids[(size_t) i * dim + j] : rng_float();
				d.keys[i] = gi_tid_to_key(i + 1, 1);
				d.alive[i] = true;
			}
			assert_int_equal(ops->store_insert(s, d.n, d.lists, d.keys, d.vecs, NULL),
							 GI_OK);
			for (i = 0; i < NQ * dim; i++)
				queries[i] = rng_float();
			memcpy(queries, d.centroids, sizeof(float) * dim);	/* on the ties */
			memset(queries + dim, 0, sizeof(float) * dim);	/* zero query */
			for (int m = 0; m < 3; m++)
			{
				check_search(s, &d, (gi_metric) m, NQ, queries, 1, 5);
				check_search(s, &d, (gi_metric) m, NQ, queries, 3, 10);
				check_search(s, &d, (gi_metric) m, NQ, queries, nl / 2 + 1, 2 * PER);
				check_search(s, &d, (gi_metric) m, NQ, queries, nl, d.n);
			}
			free(d.centroids);
			free(d.vecs);
			free(d.lists);
			free(d.keys);
			free(d.alive);
			free(queries);
			ops->store_destroy(s);
		}
}

/* the kind's search against the reference with the same centroids */
static void
expect_kind_equals_reference(gi_store *s, const float *centroids,
							 uint32_t dim, gi_metric metric, uint32_t nq,
							 const float *queries, uint32_t probes, uint32_t k)
{
	gi_hit	   *h1 = calloc((size_t) nq * k + 1, sizeof(gi_hit));
	gi_hit	   *h2 = calloc((size_t) nq * k + 1, sizeof(gi_hit));
	uint32_t   *f1 = calloc(nq + 1, sizeof(uint32_t));
	uint32_t   *f2 = calloc(nq + 1, sizeof(uint32_t));

	assert_non_null(h1);
	assert_non_null(h2);
	assert_non_null(f1);
	assert_non_null(f2);
	if (ivf_search(s, dim, probes, nq, queries, k, h1, f1) != GI_OK)
		fail_msg("kind search: %s", ops->last_error());
	if (gi_host_ivf_search(s, centroids, dim, metric, nq, queries, probes, k,
						   h2, f2) != GI_OK)
		fail_msg("reference search: %s", ops->last_error());
	assert_memory_equal(f1, f2, nq * sizeof(uint32_t));
	assert_memory_equal(h1, h2, (size_t) nq * k * sizeof(gi_hit));
	free(h1);
	free(h2);
	free(f1);
	free(f2);
}

/*
 * The IVF kind's entries: the state is validated against the store, kept
 * as a copy, replaced by a second set_state and freed with the store.
 */
static void
test_ivf_kind(void **state)
{
	enum
	{
		DIM = 8, NL = 6, N = 500, NQ = 9
	};
	const gi_kind_ops *kind = ops->kinds[GI_KIND_IVF];
	gi_store   *s = new_store(NL, DIM * 4, 2, GI_KEYS_ANY, 0);
	float		cent_a[NL * DIM];
	float		cent_b[NL * DIM];
	float	   *vecs = malloc(sizeof(float) * N * DIM);
	uint32_t	lists[N];
	uint64_t	keys[N];
	float		queries[NQ * DIM];
	gi_ivf_state *st;
	gi_hit		h[4];
	gi_hit		ha[NQ * 5];
	gi_hit		hb[NQ * 5];
	uint32_t	f[NQ];
	uint32_t	i;
	int			m;

	(void) state;
	assert_non_null(vecs);
	rng_seed(4242);
	for (i = 0; i < NL * DIM; i++)
	{
		cent_a[i] = rng_float();
		cent_b[i] = rng_float();
	}
	for (i = 0; i < N * DIM; i++)
		vecs[i] = rng_float();
	for (i = 0; i < NQ * DIM; i++)
		queries[i] = rng_float();
	for (i = 0; i < N; i++)
	{
		lists[i] = rng_below(NL);
		keys[i] = gi_tid_to_key(i / 5, (uint16_t) (i % 5 + 1));
	}
	assert_int_equal(ops->store_insert(s, N, lists, keys, vecs, NULL), GI_OK);

	/* no state yet */
	assert_int_equal(ivf_search(s, DIM, 2, 1, queries, 4, h, f), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "set_state"));

	/* states that do not fit the store are refused and change nothing */
	st = ivf_state_new(NL, DIM, GI_METRIC_L2, cent_a);
	assert_int_equal(kind->set_state(s, NULL, gi_ivf_state_size(NL, DIM)),
					 GI_ERR_INVALID);
	assert_int_equal(kind->set_state(NULL, st, gi_ivf_state_size(NL, DIM)),
					 GI_ERR_INVALID);
	assert_int_equal(kind->set_state(s, st, sizeof(gi_ivf_state) - 1),
					 GI_ERR_INVALID);
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM) - 4),
					 GI_ERR_INVALID);
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM) + 4),
					 GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "does not fit"));
	st->nlists = NL - 1;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL - 1, DIM)),
					 GI_ERR_INVALID);
	st->nlists = NL;
	st->dim = DIM / 2;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM / 2)),
					 GI_ERR_INVALID);
	st->dim = 0;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, 0)),
					 GI_ERR_INVALID);
	st->dim = DIM;
	st->metric = 7;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM)),
					 GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "metric"));
	st->metric = GI_METRIC_L2;
	((float *) (st + 1))[NL * DIM - 1] = NAN;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM)),
					 GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "NaN or infinite"));
	((float *) (st + 1))[NL * DIM - 1] = INFINITY;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM)),
					 GI_ERR_INVALID);
	((float *) (st + 1))[NL * DIM - 1] = cent_a[NL * DIM - 1];
	assert_int_equal(ivf_search(s, DIM, 2, 1, queries, 4, h, f), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "set_state"));

	/* a good state is copied: the caller's buffer may go at once */
	st->metric = GI_METRIC_L2;
	assert_int_equal(kind->set_state(s, st, gi_ivf_state_size(NL, DIM)), GI_OK);
	memset(st, 0xFF, gi_ivf_state_size(NL, DIM));
	free(st);

	/* bit for bit the reference with the same centroids */
	expect_kind_equals_reference(s, cent_a, DIM, GI_METRIC_L2, NQ, queries, 1, 5);
	expect_kind_equals_reference(s, cent_a, DIM, GI_METRIC_L2, NQ, queries, 3, 40);
	expect_kind_equals_reference(s, cent_a, DIM, GI_METRIC_L2, NQ, queries, NL, N + 3);
	for (m = 0; m < 3; m++)
	{
		ivf_set_state(s, NL, DIM, (gi_metric) m, cent_b);
		expect_kind_equals_reference(s, cent_b, DIM, (gi_metric) m, NQ, queries, 2, 7);
		expect_kind_equals_reference(s, cent_b, DIM, (gi_metric) m, NQ, queries, NL, 50);
	}

	/* a second set_state replaces the first: other centroids, other lists */
	ivf_set_state(s, NL, DIM, GI_METRIC_L2, cent_a);
	assert_int_equal(ivf_search(s, DIM, 1, NQ, queries, 5, ha, f), GI_OK);
	ivf_set_state(s, NL, DIM, GI_METRIC_L2, cent_b);
	assert_int_equal(ivf_search(s, DIM, 1, NQ, queries, 5, hb, f), GI_OK);
	assert_true(memcmp(ha, hb, sizeof(ha)) != 0);
	expect_kind_equals_reference(s, cent_b, DIM, GI_METRIC_L2, NQ, queries, 1, 5);

	/* parameters that do not fit the state */
	assert_int_equal(ivf_search(s, DIM - 1, 1, 1, queries, 4, h, f), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "dimension"));
	{
		gi_ivf_search_params p = {DIM, 1};

		assert_int_equal(kind->search(s, &p, 2, queries, DIM * sizeof(float),
									  4, h, f), GI_ERR_INVALID);
		assert_int_equal(kind->search(s, NULL, 1, queries, DIM * sizeof(float),
									  4, h, f), GI_ERR_INVALID);
		assert_int_equal(kind->search(NULL, &p, 1, queries, DIM * sizeof(float),
									  4, h, f), GI_ERR_INVALID);
	}
	/* the store goes with its state (valgrind checks that it is freed) */
	free(vecs);
	ops->store_destroy(s);
}

/* ---- k-means (host_kmeans.c, gi_kmeans.h) --------------------------------- */

#include "gi_kmeans.h"

/*
 * gi_kmeans.h's PRNG must be PostgreSQL's pg_prng draw for draw (the
 * access method's centroids did not change when the k-means moved out of
 * the server code).  Values printed by PostgreSQL 15's pg_prng_seed /
 * pg_prng_uint64_range / pg_prng_double (libpgcommon).
 */
static void
test_prng_matches_pg_prng(void **state)
{
	gi_prng		s;

	(void) state;
	gi_prng_seed(&s, UINT64_C(0x67707569766653));
	assert_int_equal(gi_prng_u64_range(&s, 0, 51199), 25882);
	assert_true(gi_prng_double(&s) == 0.50514710298560384);
	assert_int_equal(gi_prng_u64_range(&s, 0, 2), 1);
	assert_int_equal(gi_prng_u64_range(&s, 5, 5), 5);
	assert_true(gi_prng_u64_range(&s, 0, UINT64_MAX) == UINT64_C(10348312315983046457));
	assert_true(gi_prng_double(&s) == 0.4415061578035977);
	gi_prng_seed(&s, 0);
	assert_int_equal(gi_prng_u64_range(&s, 0, 999), 891);
	assert_true(gi_prng_double(&s) == 0.42656972610760602);
}

static uint32_t
km_train(gi_metric metric, uint32_t n, uint32_t dim, uint32_t lists, uint32_t iters,
		 const float *samples, float *centroids)
{
	gi_kmeans_params p;
	float	   *copy = malloc(sizeof(float) * n * dim + 1);
	void	   *ws = malloc(gi_host_kmeans_workspace(n, dim, lists));
	uint32_t	k;

	assert_non_null(copy);
	assert_non_null(ws);
	memcpy(copy, samples, sizeof(float) * n * dim);
	memset(&p, 0, sizeof(p));
	p.dim = dim;
	p.nlists = lists;
	p.iterations = iters;
	p.metric = metric;
	p.seed = 42;
	k = gi_host_kmeans_train(&p, n, copy, centroids, ws, NULL, NULL);
	free(copy);
	free(ws);
	return k;
}

static int	km_checks;

static void
km_check(void *arg)
{
	(void) arg;
	km_checks++;
}

static void
test_host_kmeans(void **state)
{
	enum
	{
		N = 2000, DIM = 6, K = 4
	};
	static const float centre[K][DIM] = {
		{10, 0, 0, 0, 0, 0}, {0, 10, 0, 0, 0, 0}, {0, 0, 10, 0, 0, 0}, {0, 0, 0, 10, 0, 0}
	};
	float	   *x = malloc(sizeof(float) * N * DIM);
	float	   *c1 = malloc(sizeof(float) * N * DIM);
	float	   *c2 = malloc(sizeof(float) * N * DIM);
	gi_kmeans_params p;
	void	   *ws;
	uint32_t	i;
	uint32_t	j;
	uint32_t	k;

	(void) state;
	rng_seed(7);
	for (i = 0; i < N; i++)
		for (j = 0; j < DIM; j++)
			x[i * DIM + j] = centre[i % K][j] + (float) ((rng_next() % 2001) / 1000.0 - 1.0) * 0.5f;

	/* four tight clusters, four lists: one centroid in each cluster */
	assert_int_equal(km_train(GI_METRIC_L2, N, DIM, K, 10, x, c1), K);
	for (uint32_t c = 0; c < K; c++)
	{
		int			near = 0;

		for (uint32_t t = 0; t < K; t++)
		{
			double		d = 0;

			for (j = 0; j < DIM; j++)
				d += (c1[c * DIM + j] - centre[t][j]) * (c1[c * DIM + j] - centre[t][j]);
			near += d < 0.1;
		}
		assert_int_equal(near, 1);
	}
	/* deterministic */
	assert_int_equal(km_train(GI_METRIC_L2, N, DIM, K, 10, x, c2), K);
	assert_memory_equal(c1, c2, sizeof(float) * K * DIM);
	/* the objective is the members' spread: 4 dims... */
	assert_true(gi_host_kmeans_objective(GI_METRIC_L2, DIM, x, N, c1, K) < N * DIM * 0.25 * 0.5);

	/* more lists than samples: one per sample; zero iterations: samples */
	assert_int_equal(km_train(GI_METRIC_L2, 5, DIM, 32, 0, x, c1), 5);
	for (uint32_t c = 0; c < 5; c++)
	{
		bool		found = false;

		for (i = 0; i < 5; i++)
			found |= memcmp(c1 + c * DIM, x + i * DIM, sizeof(float) * DIM) == 0;
		assert_true(found);
	}

	/* identical samples: every D^2 is 0, duplicates are fine */
	for (i = 0; i < 50; i++)
		for (j = 0; j < DIM; j++)
			c2[i * DIM + j] = 1.5f;
	assert_int_equal(km_train(GI_METRIC_L2, 50, DIM, 4, 10, c2, c1), 4);
	for (i = 0; i < 4 * DIM; i++)
		assert_true(c1[i] == 1.5f);

	/* spherical: zero samples dropped, unit centroids */
	memcpy(c2, x, sizeof(float) * N * DIM);
	for (i = 0; i < N; i += 3)
		for (j = 0; j < DIM; j++)
			c2[i * DIM + j] = 0.0f;
	memset(&p, 0, sizeof(p));
	p.dim = DIM;
	p.nlists = 3000;
	p.iterations = 10;
	p.metric = GI_METRIC_COSINE;
	p.seed = 1;
	ws = malloc(gi_host_kmeans_workspace(N, DIM, 3000));
	km_checks = 0;
	k = gi_host_kmeans_train(&p, N, c2, c1, ws, km_check, NULL);
	assert_int_equal(k, N - (N + 2) / 3);
	assert_true(km_checks > 0);
	for (uint32_t c = 0; c < k; c++)
	{
		double		nn = 0;

		for (j = 0; j < DIM; j++)
			nn += (double) c1[c * DIM + j] * c1[c * DIM + j];
		assert_true(fabs(sqrt(nn) - 1.0) < 1e-5);
	}
	/* all zero: nothing to train */
	memset(c2, 0, sizeof(float) * 10 * DIM);
	assert_int_equal(gi_host_kmeans_train(&p, 10, c2, c1, ws, NULL, NULL), 0);
	free(ws);
	free(x);
	free(c1);
	free(c2);
}

/* the reference assignment: (double distance, list), NaN last */
static void
test_host_kmeans_assign(void **state)
{
	enum
	{
		DIM = 3
	};
	/* lists 1 and 3 are the same point: ties go to 1 */
	static const float cent[5][DIM] = {{0, 0, 0}, {1, 1, 1}, {-1, 0, 0}, {1, 1, 1}, {0, 0, 5}};
	static const float vec[4][DIM] = {{0.9f, 1, 1}, {0, 0, 4}, {-0.4f, 0, 0}, {0, 0, 0}};
	uint32_t	lists[4];

	(void) state;
	assert_int_equal(gi_host_kmeans_assign(NULL, 5, DIM, GI_METRIC_L2, &cent[0][0], 4, &vec[0][0],
										   lists), GI_OK);
	assert_int_equal(lists[0], 1);
	assert_int_equal(lists[1], 4);
	assert_int_equal(lists[2], 0);
	assert_int_equal(lists[3], 0);
	/* IP: largest dot; the zero vector ties everywhere: list 0 */
	assert_int_equal(gi_host_kmeans_assign(NULL, 5, DIM, GI_METRIC_IP, &cent[0][0], 4, &vec[0][0],
										   lists), GI_OK);
	assert_int_equal(lists[0], 4);	/* 5 beats 2.9 */
	assert_int_equal(lists[1], 4);
	assert_int_equal(lists[2], 2);
	assert_int_equal(lists[3], 0);
	/* cosine: centroid 0 has no direction (+Inf) */
	assert_int_equal(gi_host_kmeans_assign(NULL, 5, DIM, GI_METRIC_COSINE, &cent[0][0], 4, &vec[0][0],
										   lists), GI_OK);
	assert_int_equal(lists[0], 1);
	assert_int_equal(lists[1], 4);
	assert_int_equal(lists[2], 2);
	assert_int_equal(lists[3], 0);
	assert_int_equal(gi_host_kmeans_assign(NULL, 0, DIM, GI_METRIC_L2, &cent[0][0], 4, &vec[0][0],
										   lists), GI_ERR_INVALID);
	/* the host backend leaves the kmeans entries empty: builds train locally */
	assert_null(ops->kmeans_train);
	assert_null(ops->kmeans_assign);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend_identity),
		cmocka_unit_test(test_devices),
		cmocka_unit_test(test_create_invalid),
		cmocka_unit_test(test_insert_delete_basic),
		cmocka_unit_test(test_extreme_keys),
		cmocka_unit_test(test_payload_roundtrip),
		cmocka_unit_test(test_slab_reuse_simple),
		cmocka_unit_test(test_slab_reuse_sliding_window),
		cmocka_unit_test(test_idempotent_delete),
		cmocka_unit_test(test_unique_keys),
		cmocka_unit_test(test_multi_posting),
		cmocka_unit_test(test_set_limit),
		cmocka_unit_test(test_memory_limit),
		cmocka_unit_test(test_alloc_failure),
		cmocka_unit_test(test_random_differential),
		cmocka_unit_test(test_random_differential_unique),
		cmocka_unit_test(test_random_differential_per_list),
		cmocka_unit_test(test_per_list_skip),
		cmocka_unit_test(test_per_list_many_records),
		cmocka_unit_test(test_per_list_big_key),
		cmocka_unit_test(test_per_list_random),
		cmocka_unit_test(test_per_list_memory_limit),
		cmocka_unit_test(test_per_list_alloc_failure),
		cmocka_unit_test(test_ivf_search),
		cmocka_unit_test(test_ivf_search_small),
		cmocka_unit_test(test_ivf_rank_blocks),
		cmocka_unit_test(test_ivf_kind),
		cmocka_unit_test(test_prng_matches_pg_prng),
		cmocka_unit_test(test_host_kmeans),
		cmocka_unit_test(test_host_kmeans_assign),
	};

	ops = gi_host_backend();
	/* GI_TEST_THREADS=N: every search and k-means on N threads, however small */
	if (getenv("GI_TEST_THREADS") != NULL)
	{
		ops->set_host_threads((uint32_t) atoi(getenv("GI_TEST_THREADS")));
		gi_host_pool_set_grain(0);
	}
	return cmocka_run_group_tests_name("host_store", tests, NULL, NULL);
}
