/*
 * test_store.c
 *		The store itself against the host, whatever the kind: arguments,
 *		device objects, a kind-less random differential, the memory limit,
 *		injected device allocation failures, bulk inserts through the copy
 *		helpers, and the sliding window.  Records are IVF vectors where a
 *		test also searches (a spot check that the records read right).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* store_create, insert and delete refuse bad arguments */
static void
test_invalid(void)
{
	gi_store_params par;
	gi_store   *s = NULL;
	float		q[4] = {0};

	memset(&par, 0, sizeof(par));
	par.nlists = 0;
	par.record_bytes = 16;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID && s == NULL, "nlists 0 accepted");
	par.nlists = 2;
	par.record_bytes = 6;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "record_bytes 6 accepted");
	par.record_bytes = 0;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "record_bytes 0 accepted");
	par.record_bytes = (1u << 20) + 4;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID, "huge record accepted");
	par.record_bytes = 16;
	par.key_mode = GI_KEYS_PER_LIST + 1;
	EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID && H->store_create(&par, &s) == GI_ERR_INVALID,
		   "unknown key mode accepted");
	par.key_mode = GI_KEYS_UNIQUE;
	par.memory_limit = 100;
	EXPECT(C->store_create(&par, &s) == GI_ERR_LIMIT &&
		   strstr(C->last_error(), "gpuindex.memory_limit") != NULL,
		   "tiny limit at create: %s", C->last_error());
	par.memory_limit = 0;
	EXPECT(C->store_create(&par, &s) == GI_OK, "create: %s", C->last_error());
	if (s)
	{
		uint32_t	bad = 2;
		uint64_t	key = 1;
		uint64_t	n = 9;

		EXPECT(C->store_insert(s, 1, &bad, &key, q, &n) == GI_ERR_INVALID && n == 0,
			   "list out of range accepted");
		EXPECT(C->store_insert(s, 0, NULL, NULL, NULL, &n) == GI_OK && n == 0,
			   "empty insert");
		EXPECT(C->store_insert(s, 1, NULL, &key, q, &n) == GI_ERR_INVALID, "NULL lists accepted");
		EXPECT(C->store_delete(s, 0, NULL, &n) == GI_OK && n == 0, "empty delete");
		EXPECT(C->store_delete(s, 1, NULL, &n) == GI_ERR_INVALID, "NULL keys accepted");
		C->store_destroy(s);
	}
	C->store_destroy(NULL);
}

/*
 * Device objects: ordinals checked, a name, stores created on an explicit
 * device (each visible one) and used in turns, so every call must make
 * its store's device current; k-means on an explicit device; close.
 */
static void
test_devices(void)
{
	int			n = C->device_count();
	int			nd = n < 4 ? n : 4;
	gi_device  *devs[4] = {NULL};
	gi_device  *hdev = NULL;
	pair		ps[4];
	rng			r = {606};
	uint32_t	dim = 8;
	uint32_t	nrec = 500;
	uint32_t   *lists = malloc(nrec * sizeof(uint32_t));
	uint64_t   *keys = malloc(nrec * sizeof(uint64_t));
	float	   *pay = malloc((size_t) nrec * dim * sizeof(float));
	int			d;
	int			round;

	memset(ps, 0, sizeof(ps));
	EXPECT(n >= 1, "device_count %d", n);
	EXPECT(C->device_open(-1, &devs[0]) == GI_ERR_INVALID, "ordinal -1 accepted");
	EXPECT(C->device_open(n, &devs[0]) == GI_ERR_INVALID, "ordinal %d (of %d) accepted", n, n);
	EXPECT(C->device_open(0, NULL) == GI_ERR_INVALID, "NULL out accepted");
	devs[0] = NULL;
	EXPECT(H->device_open(0, &hdev) == GI_OK, "host device_open: %s", H->last_error());
	if (!self_mode)
	{
		gi_store_params par;
		gi_store   *s = NULL;

		/* another backend's device object is refused, never dereferenced blindly */
		memset(&par, 0, sizeof(par));
		par.nlists = 1;
		par.record_bytes = 4;
		par.device = hdev;
		EXPECT(C->store_create(&par, &s) == GI_ERR_INVALID && s == NULL,
			   "the host's device accepted by the CUDA backend");
	}
	for (d = 0; d < nd; d++)
	{
		pair_cfg	cfg;

		EXPECT(C->device_open(d, &devs[d]) == GI_OK, "device_open(%d): %s", d, C->last_error());
		if (devs[d] == NULL)
			goto out;
		EXPECT(C->device_name(devs[d]) != NULL && C->device_name(devs[d])[0] != '\0',
			   "device %d has no name", d);
		printf("  device %d: %s\n", d, C->device_name(devs[d]));
		memset(&cfg, 0, sizeof(cfg));
		cfg.nlists = 4 + d;
		cfg.words = dim;
		cfg.chunk_slabs = 2;
		cfg.key_mode = GI_KEYS_UNIQUE;
		cfg.hdev = hdev;
		cfg.cdev = devs[d];
		cfg.kind = &ivf_kind;
		if (!pair_open(&ps[d], &cfg, &r))
			goto out;
	}
	/* the stores in turns: inserts, deletes, searches, k-means on each device */
	for (round = 0; round < 6; round++)
		for (d = 0; d < nd; d++)
		{
			pair	   *p = &ps[d];
			uint32_t	i;
			char		when[64];

			snprintf(when, sizeof(when), "device %d round %d", d, round);
			for (i = 0; i < nrec; i++)
			{
				random_vector(&r, pay + (size_t) i * dim, dim, false);
				lists[i] = ivf_nearest_list(p, pay + (size_t) i * dim);
				keys[i] = (uint64_t) round * nrec + i;
			}
			do_insert(p, nrec, lists, keys, pay, when);
			for (i = 0; i < nrec / 3; i++)
				keys[i] = rbelow(&r, (round + 1) * nrec);
			do_delete(p, nrec / 3, keys, when);
			compare_stats(p, true, when);
			{
				float	   *qs = ivf_random_queries(p, &r, 20);
				uint32_t	got[20];
				uint32_t	ref[20];

				ivf_compare_search(p, (gi_metric) (round % 3), 20, qs, 2, 10, when);
				if (!self_mode)
				{
					EXPECT(C->kmeans_assign(devs[d], p->nlists, dim, GI_METRIC_L2,
											ivf_centroids(p), 20, qs, got) == GI_OK,
						   "%s: kmeans_assign: %s", when, C->last_error());
					EXPECT(gi_host_kmeans_assign(NULL, p->nlists, dim, GI_METRIC_L2,
												 ivf_centroids(p), 20, qs, ref) == GI_OK,
						   "host assign");
					EXPECT(memcmp(got, ref, sizeof(got)) == 0, "%s: kmeans_assign differs", when);
				}
				free(qs);
			}
		}
	for (d = 0; d < nd; d++)
		compare_contents(&ps[d], "devices");
out:
	for (d = 0; d < nd; d++)
	{
		pair_close(&ps[d]);
		if (devs[d] && !self_mode)
			C->kmeans_release(devs[d]);
		if (devs[d])
			C->device_close(devs[d]);
	}
	C->device_close(NULL);
	if (hdev)
		H->device_close(hdev);
	free(lists);
	free(keys);
	free(pay);
}

/* the store without a kind: records of 3 words, no searches */
static void
test_diff_no_kind(void)
{
	diff_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.store.nlists = 37;
	cfg.store.words = 3;
	cfg.store.chunk_slabs = 3;
	cfg.store.key_mode = GI_KEYS_ANY;
	cfg.keyspace = 1500;
	cfg.ops = scaled(300);
	cfg.seed = 17;
	cfg.insert_chunk = 29;
	cfg.per_row = 1;
	random_differential(&cfg);
}

/*
 * Memory limit: both stores fail at the same record with GI_ERR_LIMIT;
 * the CUDA store stays consistent, holds exactly the prefix, and works
 * again once the limit is raised.
 */
static void
test_memory_limit(void)
{
	gi_store_params par;
	gi_store   *c = NULL;
	gi_store_stats st;
	uint32_t	dim = 16;
	uint32_t	n = 5000;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint64_t	limit;
	uint64_t	done = 0;
	uint32_t	i;
	gi_status	s;
	pair		p;
	rng			r = {5};

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 10);
		keys[i] = 1000 + i;
	}
	/* what 1000 records need on the CUDA store: the limit sits in between */
	memset(&par, 0, sizeof(par));
	par.nlists = 10;
	par.record_bytes = dim * 4;
	par.chunk_slabs = 8;
	par.key_mode = GI_KEYS_UNIQUE;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create");
	if (c == NULL)
		goto out;
	EXPECT(C->store_insert(c, 1000, lists, keys, pay, &done) == GI_OK && done == 1000, "probe insert");
	C->store_stats(c, &st);
	limit = st.bytes;
	C->store_destroy(c);
	c = NULL;

	par.memory_limit = limit;
	EXPECT(C->store_create(&par, &c) == GI_OK, "create with limit");
	if (c == NULL)
		goto out;
	/* the limit strikes inside a pipelined chunk */
	if (!self_mode)
		cu_set_chunk(c, 64);
	s = C->store_insert(c, n, lists, keys, pay, &done);
	EXPECT(s == GI_ERR_LIMIT, "insert over the limit: status %d", s);
	EXPECT(strstr(C->last_error(), "gpuindex.memory_limit") != NULL, "message: %s",
		   C->last_error());
	EXPECT(done >= 900 && done < n, "inserted %" PRIu64 " before the limit", done);
	C->store_stats(c, &st);
	EXPECT(st.bytes <= limit, "bytes %" PRIu64 " over limit %" PRIu64, st.bytes, limit);
	EXPECT(st.rows == done, "rows %" PRIu64 " after %" PRIu64 " inserted", st.rows, done);

	/* the host store holding the same prefix is the reference */
	if (ivf_pair(&p, 10, dim, 8, &r))
	{
		uint64_t	hn = 0;
		float	   *qs;

		C->store_destroy(p.c);
		p.c = c;
		c = NULL;
		memset(ivf_centroids(&p), 0, sizeof(float) * 10 * dim);
		ivf_resend(&p);
		EXPECT(H->store_insert(p.h, (uint32_t) done, lists, keys, pay, &hn) == GI_OK, "host prefix");
		compare_stats(&p, false, "after limit");
		compare_contents(&p, "after limit");
		qs = ivf_random_queries(&p, &r, 10);
		ivf_compare_search(&p, GI_METRIC_L2, 10, qs, 10, 50, "after limit");
		/* still over: a further insert fails again, changes nothing */
		EXPECT(C->store_insert(p.c, n - (uint32_t) done, lists + done, keys + done,
							   pay + done * dim, &hn) == GI_ERR_LIMIT, "second insert over limit");
		EXPECT(hn == 0 || hn < 40, "second insert added %" PRIu64, hn);
		if (hn > 0)
			H->store_insert(p.h, (uint32_t) hn, lists + done, keys + done, pay + done * dim, NULL);
		done += hn;
		/* deletes work at the limit, then raise it and finish */
		do_delete(&p, 100, keys, "delete at limit");
		C->store_set_limit(p.c, 0);
		do_insert(&p, n - (uint32_t) done, lists + done, keys + done, pay + done * dim,
				  "after raising the limit");
		compare_stats(&p, false, "after raise");
		compare_contents(&p, "after raise");
		ivf_compare_search(&p, GI_METRIC_COSINE, 10, qs, 4, 20, "after raise");
		free(qs);
		pair_close(&p);
	}
	/* same limit on both backends: same error at the same record */
	{
		gi_store   *h = NULL;
		uint64_t	hlimit;
		uint64_t	na = 0;
		uint64_t	nb = 0;
		gi_status	sa;
		gi_status	sb;

		/* each backend measures its own bytes: each gets its own 1000-record limit */
		par.memory_limit = 0;
		H->store_create(&par, &h);
		H->store_insert(h, 1000, lists, keys, pay, &na);
		H->store_stats(h, &st);
		hlimit = st.bytes;
		H->store_destroy(h);
		par.memory_limit = hlimit;
		h = NULL;
		EXPECT(H->store_create(&par, &h) == GI_OK, "host create");
		sa = H->store_insert(h, n, lists, keys, pay, &na);
		par.memory_limit = limit;
		c = NULL;
		EXPECT(C->store_create(&par, &c) == GI_OK, "cuda create");
		sb = c ? C->store_insert(c, n, lists, keys, pay, &nb) : GI_ERR_DEVICE;
		EXPECT(sa == GI_ERR_LIMIT && sb == GI_ERR_LIMIT, "both hit their limit: %d %d", sa, sb);
		if (h)
			H->store_destroy(h);
		if (c)
			C->store_destroy(c);
		c = NULL;
	}
out:
	if (c)
		C->store_destroy(c);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * The device allocator fails (injected: gi_cuda_fail_alloc_after): the
 * insert stops with GI_ERR_NOMEM at the record that needed the growth, the
 * records before it are in, the store stays consistent and works again
 * once allocations succeed.
 */
static void
test_device_oom(void)
{
	pair		p;
	rng			r = {11};
	uint32_t	dim = 16;
	uint32_t	n = 3000;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint64_t	nc = 0;
	uint64_t	nh = 0;
	gi_status	st;
	uint32_t	i;
	int			at;

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 8);
		keys[i] = 500 + i;
	}
	/* a failure in each of the growth's four allocations */
	for (at = 0; at < 4; at++)
	{
		if (!ivf_pair(&p, 8, dim, 4, &r))
			break;
		cu_set_chunk(p.c, 100);
		do_insert(&p, 200, lists, keys, pay, "before the failure");
		cu_fail(at);
		st = C->store_insert(p.c, n - 200, lists + 200, keys + 200, pay + 200 * dim, &nc);
		cu_fail(-1);
		EXPECT(st == GI_ERR_NOMEM, "allocation %d failing: status %d (%s)", at, st,
			   C->last_error());
		EXPECT(strstr(C->last_error(), "out of device memory") != NULL, "message: %s",
			   C->last_error());
		EXPECT(nc < n - 200, "all %" PRIu64 " inserted despite the failure", nc);
		EXPECT(H->store_insert(p.h, (uint32_t) nc, lists + 200, keys + 200, pay + 200 * dim,
							   &nh) == GI_OK && nh == nc, "host prefix");
		compare_stats(&p, false, "after NOMEM");
		compare_contents(&p, "after NOMEM");
		do_delete(&p, 50, keys + 100, "delete after NOMEM");
		do_insert(&p, n - 200 - (uint32_t) nc, lists + 200 + nc, keys + 200 + nc,
				  pay + (200 + nc) * dim, "insert after NOMEM");
		compare_stats(&p, false, "after recovery");
		compare_contents(&p, "after recovery");
		{
			float	   *qs = ivf_random_queries(&p, &r, 5);

			ivf_compare_search(&p, GI_METRIC_L2, 5, qs, 3, 20, "after NOMEM");
			free(qs);
		}
		pair_close(&p);
	}
	free(lists);
	free(keys);
	free(pay);
}

/*
 * Large batches in default-sized pipeline chunks (4 MB of payload): the
 * payload goes through the copy helper threads and both upload arenas,
 * the key map is pre-sized for the batch, the pool grows many times while
 * chunks are in flight.  With 3 helpers, then with none; duplicates
 * inside the batch; deletes in between.
 */
static void
test_bulk_insert(void)
{
	pair		p;
	rng			r = {77};
	uint32_t	dim = 128;
	uint32_t	n = (uint32_t) (60000 * scale) < 3000 ? 3000 : (uint32_t) (60000 * scale);
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	uint32_t	half = n / 2;
	uint32_t	i;
	float	   *qs;

	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		lists[i] = rbelow(&r, 64);
		/* TID-like keys, 5% repeated inside the batch */
		keys[i] = i > 0 && rchance(&r, 0.05) ? keys[rbelow(&r, i)]
			: ((uint64_t) (i / 100) << 16) | (i % 100 + 1);
	}
	if (!ivf_pair(&p, 64, dim, 0, &r))
		goto out;
	if (cu_copy_threads)
		cu_copy_threads(3);
	do_insert(&p, half, lists, keys, pay, "bulk insert, 3 copy helpers");
	compare_stats(&p, true, "after bulk insert");
	compare_contents(&p, "after bulk insert");
	do_delete(&p, n / 10, keys + n / 4, "bulk delete");
	if (cu_copy_threads)
		cu_copy_threads(0);
	do_insert(&p, n - half, lists + half, keys + half, pay + (size_t) half * dim,
			  "bulk insert, no copy helpers");
	if (cu_copy_threads)
		cu_copy_threads(-1);
	compare_stats(&p, true, "after second bulk insert");
	compare_contents(&p, "after second bulk insert");
	qs = ivf_random_queries(&p, &r, 50);
	ivf_compare_search(&p, GI_METRIC_L2, 50, qs, 8, 10, "after bulk inserts");
	ivf_compare_search(&p, GI_METRIC_IP, 50, qs, 64, 100, "after bulk inserts, all lists");
	free(qs);
	pair_close(&p);
out:
	free(lists);
	free(keys);
	free(pay);
}

/* the SIVF sliding window: pool size stays constant, contents agree */
static void
test_sliding_window(void)
{
	pair		p;
	rng			r = {123};
	uint32_t	dim = 16;
	uint32_t	W = 4000;
	uint32_t	B = 500;
	int			steps = scaled(20);
	uint32_t   *lists = malloc(B * sizeof(uint32_t));
	uint64_t   *keys = malloc(B * sizeof(uint64_t));
	float	   *pay = malloc((size_t) B * dim * sizeof(float));
	uint64_t	next = 0;
	int			step;
	gi_store_stats st0;
	gi_store_stats st;

	if (!ivf_pair(&p, 20, dim, 16, &r))
		goto out;
	for (step = 0; step < steps + (int) (W / B) && checks_failed < 10; step++)
	{
		uint32_t	i;

		for (i = 0; i < B; i++)
		{
			random_vector(&r, pay + (size_t) i * dim, dim, false);
			lists[i] = ivf_nearest_list(&p, pay + (size_t) i * dim);
			keys[i] = next + i;
		}
		do_insert(&p, B, lists, keys, pay, "window insert");
		next += B;
		if (next > W)
		{
			for (i = 0; i < B; i++)
				keys[i] = next - W - B + i;
			do_delete(&p, B, keys, "window delete");
		}
		compare_stats(&p, true, "window");
		if (step == (int) (W / B) + 1)
			C->store_stats(p.c, &st0);
		if (step % 5 == 4)
		{
			float	   *qs = ivf_random_queries(&p, &r, 8);

			ivf_compare_search(&p, GI_METRIC_L2, 8, qs, 5, 10, "window search");
			free(qs);
		}
	}
	C->store_stats(p.c, &st);
	EXPECT(st.slabs_total <= st0.slabs_total + 16, "pool kept growing: %" PRIu64 " -> %" PRIu64,
		   st0.slabs_total, st.slabs_total);
	compare_contents(&p, "window end");
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}


static const test_case store_tests[] = {
	{"store: invalid arguments", test_invalid, false},
	{"store: device objects", test_devices, false},
	{"store: random differential without a kind", test_diff_no_kind, false},
	{"memory limit", test_memory_limit, false},
	{"device out of memory (injected)", test_device_oom, true},
	{"bulk insert through the copy helpers", test_bulk_insert, false},
	{"sliding window", test_sliding_window, false},
};

const test_suite store_suite = {store_tests, sizeof(store_tests) / sizeof(store_tests[0]), NULL};
