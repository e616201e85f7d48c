/*
 * test_postings.c
 *		Posting-list stores (GI_KEYS_PER_LIST) against the host: a row (key)
 *		owns records in many lists, at most one per list.  Repeated (key,
 *		list) pairs inside a call and across calls must be skipped exactly
 *		as the host skips them (also across the pipeline's chunks), a delete
 *		removes every record of its key, and the pool is reused.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static bool
postings_pair(pair *p, uint32_t nlists, uint32_t words, uint32_t chunk_slabs, rng *r)
{
	pair_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.nlists = nlists;
	cfg.words = words;
	cfg.chunk_slabs = chunk_slabs;
	cfg.key_mode = GI_KEYS_PER_LIST;
	return pair_open(p, &cfg, r);
}

/* insert on both, expecting `want` records in */
static void
insert_expect(pair *p, uint32_t n, const uint32_t *lists, const uint64_t *keys,
			  uint64_t want, const char *when)
{
	float	   *pay = malloc((n + 1) * p->words * sizeof(float));
	uint64_t	na = 0;
	uint64_t	nb = 0;
	gi_status	sa;
	gi_status	sb;
	uint32_t	i;

	for (i = 0; i < n * p->words; i++)
		pay[i] = (float) (i + 1) * 0.5f + (float) keys[i / p->words];
	sa = H->store_insert(p->h, n, lists, keys, pay, &na);
	sb = C->store_insert(p->c, n, lists, keys, pay, &nb);
	EXPECT(sa == GI_OK && sb == GI_OK, "%s: status host %d, cuda %d (%s)", when, sa, sb,
		   C->last_error());
	EXPECT(na == want && nb == want, "%s: inserted host %" PRIu64 ", cuda %" PRIu64
		   ", expected %" PRIu64, when, na, nb, want);
	free(pay);
	compare_stats(p, true, when);
	compare_contents(p, when);
}

static void
delete_expect(pair *p, uint32_t n, const uint64_t *keys, uint64_t want, const char *when)
{
	uint64_t	na = 0;
	uint64_t	nb = 0;

	EXPECT(H->store_delete(p->h, n, keys, &na) == GI_OK &&
		   C->store_delete(p->c, n, keys, &nb) == GI_OK, "%s: %s", when, C->last_error());
	EXPECT(na == want && nb == want, "%s: deleted host %" PRIu64 ", cuda %" PRIu64
		   ", expected %" PRIu64, when, na, nb, want);
	compare_stats(p, true, when);
	compare_contents(p, when);
}

/* a scripted sequence whose every count is known */
static void
test_repeated_pairs(void)
{
	pair		p;
	rng			r = {5};
	int			chunked;

	for (chunked = 0; chunked < 2; chunked++)
	{
		if (!postings_pair(&p, 8, 1, 1, &r))
			return;
		/* pipelined chunks of 2 records: repeats straddle chunk boundaries */
		if (chunked && !self_mode)
			cu_set_chunk(p.c, 2);
		{
			/* key 5 in 1 2 2 3 1 7 (4 new pairs), key 6 in 2 2 (1) */
			uint32_t	lists[] = {1, 2, 2, 3, 1, 7, 2, 2};
			uint64_t	keys[] = {5, 5, 5, 5, 5, 5, 6, 6};

			insert_expect(&p, 8, lists, keys, 5, "pairs repeated in one call");
		}
		{
			/* (5,2) and (6,2) present; (5,4) new, then repeated; (7,0) new */
			uint32_t	lists[] = {2, 4, 4, 2, 0, 4};
			uint64_t	keys[] = {5, 5, 5, 6, 7, 5};

			insert_expect(&p, 6, lists, keys, 2, "pairs present from an earlier call");
		}
		{
			gi_store_stats st;

			EXPECT(C->store_stats(p.c, &st) == GI_OK && st.keys == 3 && st.rows == 7,
				   "keys %" PRIu64 " rows %" PRIu64 ", expected 3 and 7", st.keys, st.rows);
		}
		{
			uint64_t	keys[] = {5, 5, 99};

			delete_expect(&p, 3, keys, 5, "delete a key of five records");
		}
		{
			/* key 5 again: nothing of it is left, so every list is free */
			uint32_t	lists[] = {1, 2, 1, 3};
			uint64_t	keys[] = {5, 5, 5, 6};

			insert_expect(&p, 4, lists, keys, 3, "refill a deleted key");
		}
		{
			uint64_t	keys[] = {6, 7, 5};

			delete_expect(&p, 3, keys, 5, "delete everything");
		}
		pair_close(&p);
	}
}

/* the same batch under each key mode: counts known from the modes' rules */
static void
test_key_modes(void)
{
	static const uint32_t lists[] = {0, 1, 0, 2, 1, 1, 3, 0, 2, 2};
	static const uint64_t keys[] = {1, 1, 1, 2, 2, 2, 1, 3, 3, 3};
	/* ANY: all 10; UNIQUE: first of keys 1, 2, 3; PER_LIST: distinct pairs */
	static const uint64_t want[] = {10, 3, 7};
	uint32_t	mode;
	rng			r = {6};

	for (mode = GI_KEYS_ANY; mode <= GI_KEYS_PER_LIST; mode++)
	{
		pair		p;
		pair_cfg	cfg;
		char		when[64];

		memset(&cfg, 0, sizeof(cfg));
		cfg.nlists = 4;
		cfg.words = 2;
		cfg.chunk_slabs = 1;
		cfg.key_mode = mode;
		if (!pair_open(&p, &cfg, &r))
			return;
		snprintf(when, sizeof(when), "key mode %u", mode);
		insert_expect(&p, 10, lists, keys, want[mode], when);
		snprintf(when, sizeof(when), "key mode %u, the batch again", mode);
		insert_expect(&p, 10, lists, keys, mode == GI_KEYS_ANY ? 10 : 0, when);
		pair_close(&p);
	}
}

static void
postings_diff(uint32_t nlists, uint32_t words, uint32_t chunk, uint32_t keyspace,
			  uint32_t per_row, int ops, uint64_t seed, uint32_t insert_chunk)
{
	diff_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.store.nlists = nlists;
	cfg.store.words = words;
	cfg.store.chunk_slabs = chunk;
	cfg.store.key_mode = GI_KEYS_PER_LIST;
	cfg.keyspace = keyspace;
	cfg.ops = ops;
	cfg.seed = seed;
	cfg.insert_chunk = insert_chunk;
	cfg.per_row = per_row;
	random_differential(&cfg);
}

/* few keys, few lists: most pairs repeat, within calls and across them */
static void
test_diff_dense(void)
{
	postings_diff(50, 1, 2, 300, 40, scaled(300), 21, 13);
}

/* many lists, long rows, 1-slab pool steps */
static void
test_diff_long_rows(void)
{
	postings_diff(500, 2, 1, 2000, 120, scaled(200), 22, 0);
}

/*
 * Rows owning hundreds of records each: delete half of them (each delete
 * removes all of its key's records), refill with new rows and with the
 * deleted keys, then slide a window of rows through a pool that must stop
 * growing.
 */
static void
test_many_records_per_key(void)
{
	pair		p;
	rng			r = {23};
	uint32_t	nlists = 1000;
	uint32_t	rows = (uint32_t) scaled(120);
	uint32_t	maxn = 800 * 8;
	uint32_t   *lists = malloc(maxn * sizeof(uint32_t));
	uint64_t   *keys = malloc(maxn * sizeof(uint64_t));
	float	   *pay = malloc(maxn * sizeof(float));
	uint64_t   *dk = malloc((rows + 8) * sizeof(uint64_t));
	gi_store_stats st0;
	gi_store_stats st;
	uint64_t	next = 1;
	uint64_t	oldest = 1;
	uint32_t	i;
	int			step;

	if (!postings_pair(&p, nlists, 1, 64, &r))
		goto out;
	if (!self_mode)
		cu_set_chunk(p.c, 500);
	/* rows of 200 .. 800 records in distinct lists, inserted 8 rows a call */
	for (i = 0; i < rows; i += 8)
	{
		uint32_t	n = 0;
		uint32_t	j;

		for (j = 0; j < 8; j++, next++)
		{
			uint32_t	m = 200 + rbelow(&r, 601);
			uint32_t	base = rbelow(&r, nlists);
			uint32_t	t;

			for (t = 0; t < m; t++, n++)
			{
				lists[n] = (base + t * 7u) % nlists;
				keys[n] = next;
				pay[n] = rfloat(&r);
			}
		}
		do_insert(&p, n, lists, keys, pay, "long rows");
	}
	compare_stats(&p, true, "long rows");
	compare_contents(&p, "long rows");
	/* every other row goes */
	for (i = 0; i < rows / 2; i++)
		dk[i] = 1 + 2 * (uint64_t) i;
	do_delete(&p, rows / 2, dk, "delete half the rows");
	compare_stats(&p, true, "after delete");
	compare_contents(&p, "after delete");
	/* deleted keys come back in other lists; live keys add a few pairs */
	{
		uint32_t	n = 0;

		for (i = 0; i < 16 && n + 400 <= maxn; i++)
		{
			uint64_t	key = 1 + (uint64_t) rbelow(&r, (uint32_t) (next - 1));
			uint32_t	t;

			for (t = 0; t < 400; t++, n++)
			{
				lists[n] = rbelow(&r, nlists);
				keys[n] = key;
				pay[n] = rfloat(&r);
			}
		}
		do_insert(&p, n, lists, keys, pay, "refill");
		compare_stats(&p, true, "refill");
		compare_contents(&p, "refill");
	}
	/* a sliding window of rows: insert 4, delete the 4 oldest */
	oldest = 1;
	for (step = 0; step < scaled(40) && checks_failed < 10; step++)
	{
		uint32_t	n = 0;
		uint32_t	j;

		for (j = 0; j < 4; j++, next++)
		{
			uint32_t	m = 100 + rbelow(&r, 200);
			uint32_t	base = rbelow(&r, nlists);
			uint32_t	t;

			for (t = 0; t < m; t++, n++)
			{
				lists[n] = (base + t * 3u) % nlists;
				keys[n] = next;
				pay[n] = rfloat(&r);
			}
		}
		do_insert(&p, n, lists, keys, pay, "window insert");
		for (j = 0; j < 4; j++)
			dk[j] = oldest++;
		do_delete(&p, 4, dk, "window delete");
		compare_stats(&p, true, "window");
		if (step == 10)
			C->store_stats(p.c, &st0);
	}
	if (step > 10)
	{
		C->store_stats(p.c, &st);
		EXPECT(st.slabs_total <= st0.slabs_total + 64, "pool kept growing: %" PRIu64 " -> %" PRIu64,
			   st0.slabs_total, st.slabs_total);
	}
	compare_contents(&p, "window end");
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
	free(dk);
}

/*
 * The memory limit strikes in a posting-list batch (the CUDA store alone:
 * each backend measures its own bytes): the prefix is in, the store
 * consistent, and it takes the rest once the limit is raised.
 */
static void
test_limit(void)
{
	gi_store_params par;
	gi_store   *c = NULL;
	gi_store_stats st;
	uint32_t	n = 6000;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc(n * sizeof(float));
	uint64_t	done = 0;
	uint64_t	more = 0;
	char		err[512];
	uint32_t	i;
	rng			r = {24};

	for (i = 0; i < n; i++)
	{
		keys[i] = 1 + i / 30;
		lists[i] = rbelow(&r, 40);	/* repeats inside a row: skipped */
		pay[i] = rfloat(&r);
	}
	memset(&par, 0, sizeof(par));
	par.nlists = 40;
	par.record_bytes = 4;
	par.chunk_slabs = 4;
	par.key_mode = GI_KEYS_PER_LIST;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create: %s", C->last_error());
	if (c == NULL)
		goto out;
	EXPECT(C->store_insert(c, n / 4, lists, keys, pay, &done) == GI_OK, "probe insert");
	C->store_stats(c, &st);
	C->store_destroy(c);
	c = NULL;
	par.memory_limit = st.bytes;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create with limit: %s", C->last_error());
	if (c == NULL)
		goto out;
	if (!self_mode)
		cu_set_chunk(c, 97);
	EXPECT(C->store_insert(c, n, lists, keys, pay, &done) == GI_ERR_LIMIT, "insert over the limit");
	C->store_stats(c, &st);
	EXPECT(st.rows == done && done > 0, "rows %" PRIu64 " after %" PRIu64 " inserted", st.rows, done);
	EXPECT(self_mode ? gi_host_store_check(c, err, sizeof(err)) : cu_check(c, err, sizeof(err)),
		   "after the limit: %s", err);
	C->store_set_limit(c, 0);
	/* the whole batch again: what is in is skipped, the rest goes in */
	EXPECT(C->store_insert(c, n, lists, keys, pay, &more) == GI_OK, "after raising the limit: %s",
		   C->last_error());
	{
		gi_store   *h = NULL;
		uint64_t	hn = 0;

		par.memory_limit = 0;
		EXPECT(H->store_create(&par, &h) == GI_OK && H->store_insert(h, n, lists, keys, pay, &hn) == GI_OK,
			   "host insert");
		EXPECT(done + more == hn, "%" PRIu64 " + %" PRIu64 " inserted, the host %" PRIu64,
			   done, more, hn);
		if (h)
			H->store_destroy(h);
	}
	EXPECT(self_mode ? gi_host_store_check(c, err, sizeof(err)) : cu_check(c, err, sizeof(err)),
		   "after the rest: %s", err);
out:
	if (c)
		C->store_destroy(c);
	free(lists);
	free(keys);
	free(pay);
}

static const test_case postings_tests[] = {
	{"postings: repeated (key, list) pairs, in a call and across calls", test_repeated_pairs, false},
	{"postings: one batch under each key mode", test_key_modes, false},
	{"postings: random differential, dense pairs", test_diff_dense, false},
	{"postings: random differential, long rows", test_diff_long_rows, false},
	{"postings: keys owning hundreds of records", test_many_records_per_key, false},
	{"postings: memory limit", test_limit, false},
};

const test_suite postings_suite = {postings_tests,
	sizeof(postings_tests) / sizeof(postings_tests[0]), NULL};
