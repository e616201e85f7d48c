/*
 * plan_bench.cu
 *		The host side of the CUDA store's mutations, timed without a GPU:
 *		insert planning (key map, mirror, plan entries, patches), the payload
 *		copy into an upload arena on the helper threads, and the delete's
 *		host side, on the store benchmark's workloads (1M x d128 TID-like
 *		keys in 1,024 lists, batches of 100K; delete 10K of 1M; sliding
 *		window W 200K, B 10K).  It links cuda/common/cuda_plan.cu and
 *		cuda/common/cuda_keymap.cu, which make no CUDA call, with a mirror-only
 *		stand-in for pool growth; built by nvcc (the files include the CUDA
 *		headers) but runs on any x86 machine.
 *
 *	 make -C bench/store plan && bench/store/plan_bench.run [copy threads]
 *	 (BENCH_N records; PLAN_ONLY_POSTINGS=1: only the posting lists' part)
 *
 * Before timing it checks itself: the copy helpers against memcpy, and the
 * planning against the host store (src/backend/host/host_store.c, linked in)
 * over random inserts and deletes in each key mode (duplicates,
 * multi-posting keys, repeated key and list pairs, unknown and repeated
 * keys, 1-slab pool steps): statistics equal after
 * every operation, and the mirror's invariants and per-list contents
 * (keys) equal to the host's.  Exit status 1 on a difference.
 */
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <vector>

#include "cuda_store.h"
#include "cuda_util.cuh"

/* the host store, the reference (C, linked from src/backend/host/host_store.c) */
extern "C" const gi_backend_ops *gi_host_backend(void);
typedef bool (*host_record_cb) (uint64_t key, uint32_t row, const void *payload, void *arg);
extern "C" int64_t gi_host_store_foreach(const gi_store *store, uint32_t list,
										 host_record_cb cb, void *arg);

void
gi_cu_set_error(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* pool growth without a device: the same steps and limit, the mirror only */
gi_status
gi_cu_grow_pool(gi_store *s)
{
	uint64_t	old = s->nslabs;
	uint64_t	step = old < 16 ? 16 : old;
	uint64_t	want;
	uint64_t	t0 = gi_cu_now_ns();

	if (step > s->params.chunk_slabs)
		step = s->params.chunk_slabs;
	want = old + step;
	if (s->params.memory_limit != 0)
	{
		uint64_t	base = gi_cu_bytes_for(s, old, s->map_cap);
		uint64_t	per_slab = gi_cu_bytes_for(s, old + 1, s->map_cap) - base;

		if (gi_cu_bytes_for(s, want, s->map_cap) > s->params.memory_limit)
		{
			if (base + per_slab > s->params.memory_limit)
				return gi_cu_limit_error(s, base + per_slab);
			want = old + (s->params.memory_limit - base) / per_slab;
		}
	}
	if (!gi_cu_grow_mirror(s, want))
		return GI_ERR_NOMEM;
	gi_cu_init_mirror(s, old, want);
	s->prof.grow_dev_ns += gi_cu_now_ns() - t0;
	return GI_OK;
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static uint64_t rs = 88172645463325252ull;

static uint64_t
rnext(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 2685821657736338717ull;
}

static gi_store *
mk(uint32_t nlists, uint32_t rb, uint32_t mode)
{
	gi_store   *s = new gi_store();
	uint32_t	i;

	s->params.nlists = nlists;
	s->params.record_bytes = rb;
	s->params.chunk_slabs = 1024;
	s->params.key_mode = mode;
	s->words = rb / 4;
	s->slab_bytes = (size_t) GI_SLAB_RECORDS * (rb + 8);
	s->list_head = (uint32_t *) malloc(nlists * sizeof(uint32_t));
	for (i = 0; i < nlists; i++)
		s->list_head[i] = GI_NIL;
	s->list_rows = (uint32_t *) calloc(nlists, sizeof(uint32_t));
	s->list_dirty = (uint8_t *) calloc(nlists, 1);
	s->dirty_lists = (uint32_t *) malloc(nlists * sizeof(uint32_t));
	gi_cu_maps_init(s);
	return s;
}

struct arena
{
	unsigned char *pay;
	gi_cu_plan *plan;
	gi_cu_patch *patch;
	uint64_t	npatch;			/* room in patch */
	uint32_t	chunk;
};

static bool no_copy;		/* PLAN_NO_COPY=1: planning alone */
static double t_plan;
static double t_copy;
static double t_patch;

/* what gi_cu_store_insert does on the host, minus the CUDA calls */
static void
ins(gi_store *s, uint32_t n, const uint32_t *lists, const uint64_t *keys,
	const unsigned char *pay, arena *a)
{
	uint32_t	rb = s->params.record_bytes;
	uint64_t	done = 0;
	uint32_t	i;

	(void) gi_cu_map_reserve(s, gi_cu_batch_keys(s, keys, n));
	gi_pairs_reset_call(&s->pairs);
	for (i = 0; i < n; i += a->chunk)
	{
		uint32_t	end = n - i > a->chunk ? i + a->chunk : n;
		uint32_t	np = 0;
		uint32_t	nfirst;
		double		t0 = now_ms();
		double		t1;
		double		t2;

		if (!no_copy)
			gi_cu_copy_begin(a->pay, pay + (size_t) i * rb, (size_t) (end - i) * rb);
		if (gi_cu_plan_insert(s, lists, keys, i, end, a->plan, &np, &done) != GI_OK)
			abort();
		t1 = now_ms();
		gi_cu_copy_end();
		t2 = now_ms();
		gi_cu_collect_patches_into(s, a->patch, &nfirst);
		t_plan += t1 - t0;
		t_copy += t2 - t1;
		t_patch += now_ms() - t2;
	}
}

static void
del(gi_store *s, uint32_t n, const uint64_t *keys, arena *a)
{
	uint64_t	done = 0;
	uint32_t	nfirst;

	if (gi_cu_plan_delete(s, n, keys, &done) != GI_OK)
		abort();
	/* a delete's patches are bounded by what it touched, as in the module */
	if (gi_cu_patch_bound(s) > a->npatch)
	{
		a->npatch = gi_cu_patch_bound(s);
		a->patch = (gi_cu_patch *) realloc(a->patch, a->npatch * sizeof(gi_cu_patch));
	}
	gi_cu_collect_patches_into(s, a->patch, &nfirst);
}

/* ---- self-checks ---------------------------------------------------------- */

static int	failures;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fputc('\n', stderr); \
			failures++; \
			return; \
		} \
	} while (0)

static void
check_copier(void)
{
	size_t		sizes[] = {0, 100, 512 << 10, (512 << 10) + 4, 3u << 20, (4u << 20) + 12, 9u << 20};
	size_t		max = 9u << 20;
	unsigned char *src = (unsigned char *) malloc(max);
	unsigned char *dst = (unsigned char *) malloc(max);
	size_t		i;
	int			t;

	for (i = 0; i < max; i++)
		src[i] = (unsigned char) rnext();
	for (t = 0; t < 4; t++)
	{
		gi_cu_copy_set_threads(t);
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		{
			size_t		off = (i * 7919) % 64;
			size_t		n = sizes[i] - (sizes[i] > off ? off : 0);

			memset(dst, 0xEE, max);
			gi_cu_copy_begin(dst + off, src + off, n);
			gi_cu_copy_end();
			CHECK(memcmp(dst + off, src + off, n) == 0 && (off == 0 || dst[off - 1] == 0xEE) &&
				  (off + n >= max || dst[off + n] == 0xEE),
				  "copy helpers %d: copy of %zu bytes at %zu differs", t, n, off);
		}
	}
	gi_cu_copy_set_threads(-1);
	free(src);
	free(dst);
}

static bool
collect_key(uint64_t key, uint32_t row, const void *payload, void *arg)
{
	(void) row;
	(void) payload;
	((std::vector<uint64_t> *) arg)->push_back(key);
	return true;
}

/* mirror invariants and per-list keys against the host store */
static void
check_mirror(gi_store *s, gi_store *h, const gi_backend_ops *H, const char *when)
{
	gi_store_stats hs;
	uint64_t	nslots = (uint64_t) s->nslabs * GI_SLAB_RECORDS;
	std::vector<uint64_t> row_key(nslots, UINT64_MAX);
	std::vector<uint32_t> loc_row(nslots, GI_NIL);
	uint64_t	chained = 0;
	uint64_t	i;
	uint32_t	l;

	H->store_stats(h, &hs);
	CHECK(hs.rows == s->rows && hs.keys == s->map_count && hs.slabs_used == s->slabs_used &&
		  hs.slabs_free == (uint64_t) s->nfree + s->npending && hs.slabs_total == s->nslabs &&
		  hs.inserts == s->inserts && hs.deletes == s->deletes,
		  "%s: stats differ: rows %llu/%llu keys %llu/%llu used %llu/%llu free %llu/%u total %llu/%u",
		  when, (unsigned long long) hs.rows, (unsigned long long) s->rows,
		  (unsigned long long) hs.keys, (unsigned long long) s->map_count,
		  (unsigned long long) hs.slabs_used, (unsigned long long) s->slabs_used,
		  (unsigned long long) hs.slabs_free, s->nfree, (unsigned long long) hs.slabs_total,
		  s->nslabs);
	for (i = 0; i < s->map_cap; i++)
	{
		uint32_t	row;

		if (s->map[i].row1 == 0)
			continue;
		CHECK(gi_cu_map_find(s, s->map[i].key) == i, "%s: key not found at its slot", when);
		for (row = s->map[i].row1 - 1; row != GI_NIL; row = s->row_next[row])
		{
			uint32_t	a = s->att[row];

			CHECK(row < s->row_hwm && a != GI_CU_ATT_NONE && loc_row[a] == GI_NIL,
				  "%s: row %u of a key chain is not live or shares a slot", when, row);
			CHECK(s->slabs[GI_CU_LOC_SLAB(a)].bitmap >> GI_CU_LOC_SLOT(a) & 1,
				  "%s: row %u points at a clear bit", when, row);
			loc_row[a] = row;
			row_key[row] = s->map[i].key;
			chained++;
		}
	}
	CHECK(chained == s->rows, "%s: chains reach %llu rows of %llu", when,
		  (unsigned long long) chained, (unsigned long long) s->rows);
	for (l = 0; l < s->params.nlists; l++)
	{
		std::vector<uint64_t> a;
		std::vector<uint64_t> b;
		uint32_t	prev = GI_NIL;
		uint32_t	slab;
		uint32_t	rows = 0;

		H->store_stats(h, &hs);
		gi_host_store_foreach(h, l, collect_key, &a);
		for (slab = s->list_head[l]; slab != GI_NIL; slab = s->slabs[slab].next)
		{
			const gi_mslab *m = &s->slabs[slab];
			uint32_t	bits = m->bitmap;

			CHECK(m->list == l && m->prev == prev && m->count == (uint32_t) __builtin_popcount(bits) &&
				  m->count > 0, "%s: slab %u of list %u: bad header", when, slab, l);
			while (bits)
			{
				uint32_t	slot = (uint32_t) __builtin_ctz(bits);
				uint32_t	row = loc_row[GI_CU_LOC(slab, slot)];

				bits &= bits - 1;
				CHECK(row != GI_NIL, "%s: slab %u slot %u live without a row", when, slab, slot);
				b.push_back(row_key[row]);
			}
			rows += m->count;
			prev = slab;
		}
		CHECK(rows == s->list_rows[l], "%s: list %u counts %u rows, holds %u", when, l,
			  s->list_rows[l], rows);
		std::sort(a.begin(), a.end());
		std::sort(b.begin(), b.end());
		CHECK(a == b, "%s: list %u: keys differ (%zu host, %zu mirror)", when, l, a.size(), b.size());
	}
}

/* test/gpu's memory-limit case: the limit strikes near where it should */
static void
check_limit(void)
{
	uint32_t	n = 5000;
	std::vector<uint32_t> lists(n);
	std::vector<uint64_t> keys(n);
	std::vector<gi_cu_plan> plan(n);
	uint64_t	done = 0;
	uint64_t	limit;
	uint32_t	np = 0;
	gi_store   *s;
	uint32_t	i;

	for (i = 0; i < n; i++)
	{
		lists[i] = (uint32_t) (rnext() % 10);
		keys[i] = 1000 + i;
	}
	s = mk(10, 64, GI_KEYS_UNIQUE);
	s->params.chunk_slabs = 8;
	(void) gi_cu_map_reserve(s, 1000);
	if (gi_cu_plan_insert(s, lists.data(), keys.data(), 0, 1000, plan.data(), &np, &done) != GI_OK)
		abort();
	limit = gi_cu_bytes_for(s, s->nslabs, s->map_cap);
	gi_cu_free_mirror(s);
	delete s;

	s = mk(10, 64, GI_KEYS_UNIQUE);
	s->params.chunk_slabs = 8;
	s->params.memory_limit = limit;
	done = 0;
	np = 0;
	(void) gi_cu_map_reserve(s, n);
	{
		gi_status	st = gi_cu_plan_insert(s, lists.data(), keys.data(), 0, n, plan.data(), &np, &done);

		CHECK(st == GI_ERR_LIMIT && done >= 900 && done < n &&
			  gi_cu_bytes_for(s, s->nslabs, s->map_cap) <= limit,
			  "memory limit: status %d after %llu records", (int) st, (unsigned long long) done);
	}
	gi_cu_free_mirror(s);
	delete s;
}

static void
check_planning(uint32_t nlists, uint32_t chunk_slabs, uint32_t mode, uint32_t seed)
{
	const gi_backend_ops *H = gi_host_backend();
	gi_store_params par;
	gi_store   *h = NULL;
	gi_store   *s;
	std::vector<uint32_t> lists;
	std::vector<uint64_t> keys;
	std::vector<uint32_t> pay;
	std::vector<gi_cu_plan> plan;
	std::vector<gi_cu_patch> patch;
	int			op;
	char		when[96];

	rs = 88172645463325252ull + seed;
	memset(&par, 0, sizeof(par));
	par.nlists = nlists;
	par.record_bytes = 16;
	par.chunk_slabs = chunk_slabs;
	par.key_mode = mode;
	H->store_create(&par, &h);
	s = mk(nlists, 16, mode);
	s->params.chunk_slabs = chunk_slabs;
	for (op = 0; op < 300 && failures == 0; op++)
	{
		uint32_t	n = 1 + (uint32_t) (rnext() % (rnext() % 4 == 0 ? 3000 : 200));
		uint32_t	i;
		uint64_t	dh = 0;
		uint64_t	dc = 0;
		uint32_t	nfirst;

		keys.resize(n);
		lists.resize(n);
		pay.assign((size_t) n * 4, 0);
		for (i = 0; i < n; i++)
		{
			keys[i] = rnext() % 5000;	/* repeats, known and unknown keys */
			lists[i] = (uint32_t) (rnext() % nlists);
		}
		if (rnext() % 3 != 0)
		{
			uint32_t	np = 0;
			uint32_t	c;
			uint32_t	step = 1 + (uint32_t) (rnext() % 700);

			H->store_insert(h, n, lists.data(), keys.data(), pay.data(), &dh);
			(void) gi_cu_map_reserve(s, gi_cu_batch_keys(s, keys.data(), n));
			gi_pairs_reset_call(&s->pairs);
			plan.resize(n);
			patch.resize(8 * (size_t) n + 16);
			/* in pipeline chunks, patches collected after each */
			for (c = 0; c < n; c += step)
			{
				uint32_t	end = n - c > step ? c + step : n;

				np = 0;
				if (gi_cu_plan_insert(s, lists.data(), keys.data(), c, end, plan.data(), &np, &dc) != GI_OK)
					abort();
				CHECK(gi_cu_patch_bound(s) <= 8 * (uint64_t) (end - c) + 16, "patch bound exceeded");
				gi_cu_collect_patches_into(s, patch.data(), &nfirst);
			}
			snprintf(when, sizeof(when), "op %d insert %u", op, n);
		}
		else
		{
			H->store_delete(h, n, keys.data(), &dh);
			if (gi_cu_plan_delete(s, n, keys.data(), &dc) != GI_OK)
				abort();
			patch.resize(3 * (size_t) s->ndirty_slabs + 2 * (size_t) s->ndirty_lists + s->nfree + 16);
			gi_cu_collect_patches_into(s, patch.data(), &nfirst);
			CHECK(s->nrows_del == dc, "op %d: %u rows for the device, %llu deleted", op,
				  s->nrows_del, (unsigned long long) dc);
			snprintf(when, sizeof(when), "op %d delete %u", op, n);
		}
		CHECK(dh == dc, "%s: host %llu, planned %llu", when, (unsigned long long) dh,
			  (unsigned long long) dc);
		if (op % 10 == 0 || op == 299)
			check_mirror(s, h, H, when);
	}
	H->store_destroy(h);
	gi_cu_free_mirror(s);
	delete s;
}

int
main(int argc, char **argv)
{
	uint32_t	N = getenv("BENCH_N") ? (uint32_t) atol(getenv("BENCH_N")) : 1000000;
	uint32_t	L = getenv("BENCH_LISTS") ? (uint32_t) atol(getenv("BENCH_LISTS")) : 1024;
	bool		only_postings = getenv("PLAN_ONLY_POSTINGS") != NULL;
	uint32_t	rb = only_postings ? 4 : 512;
	uint32_t	B = 100000;
	uint32_t   *lists = (uint32_t *) malloc(N * sizeof(uint32_t));
	uint64_t   *keys = (uint64_t *) malloc(N * sizeof(uint64_t));
	unsigned char *pay = (unsigned char *) malloc((size_t) N * rb);
	uint64_t   *dk = (uint64_t *) malloc(10000 * sizeof(uint64_t));
	arena		a;
	gi_store   *s;
	double		t0;
	double		t1;
	uint32_t	i;
	int			rep;

	if (argc > 1)
		gi_cu_copy_set_threads(atoi(argv[1]));
	no_copy = getenv("PLAN_NO_COPY") != NULL;
	a.chunk = 8192;
	a.pay = (unsigned char *) malloc((size_t) a.chunk * rb);
	a.plan = (gi_cu_plan *) malloc(a.chunk * sizeof(gi_cu_plan));
	a.npatch = 8 * (size_t) a.chunk + 16;
	a.patch = (gi_cu_patch *) malloc(a.npatch * sizeof(gi_cu_patch));
	memset(a.pay, 1, (size_t) a.chunk * rb);
	for (i = 0; i < N; i++)
	{
		lists[i] = (uint32_t) (rnext() % L);
		keys[i] = ((uint64_t) (i / 100) << 16) | (i % 100 + 1);
	}
	for (i = 0; i < N * (rb / 8); i++)
		((uint64_t *) pay)[i] = rnext();
	check_copier();
	check_limit();
	check_planning(16, 1, GI_KEYS_UNIQUE, 1);
	check_planning(7, 3, GI_KEYS_ANY, 2);
	check_planning(300, 1024, GI_KEYS_UNIQUE, 3);
	check_planning(1, 16, GI_KEYS_ANY, 4);
	check_planning(7, 3, GI_KEYS_PER_LIST, 5);
	check_planning(64, 2, GI_KEYS_PER_LIST, 6);
	if (failures)
	{
		printf("self-check FAILED\n");
		return 1;
	}
	printf("self-check: copy helpers and planning agree with memcpy and the host store\n");
	printf("copy helper threads: %d\n", gi_cu_copy_threads());

	for (rep = 0; rep < (getenv("PLAN_ONLY_WINDOW") || only_postings ? 0 : 3); rep++)
	{
		s = mk(L, rb, GI_KEYS_UNIQUE);
		t_plan = t_copy = t_patch = 0;
		t0 = now_ms();
		for (i = 0; i < N; i += B)
			ins(s, N - i < B ? N - i : B, lists + i, keys + i, pay + (size_t) i * rb, &a);
		t1 = now_ms();
		printf("ingest %u: %.1f ms = %.1f ns/rec (%.1f M/s): plan+copy overlap %.1f (mirror growth %.1f in %llu), copy tail %.1f, patches %.1f; map %.1f ms (%llu), slabs %u\n",
			   N, t1 - t0, (t1 - t0) * 1e6 / N, N / ((t1 - t0) * 1e3), t_plan,
			   s->prof.grow_ns * 1e-6, (unsigned long long) s->prof.ngrow, t_copy, t_patch,
			   s->prof.map_ns * 1e-6, (unsigned long long) s->prof.nmap, s->nslabs);
		for (i = 0; i < 10000; i++)
			dk[i] = keys[rnext() % N];
		t0 = now_ms();
		del(s, 10000, dk, &a);
		t1 = now_ms();
		printf("delete 10K of %u: %.3f ms\n", N, t1 - t0);
		gi_cu_free_mirror(s);
		delete s;
	}
	if (N >= 400000 && !only_postings)
	{
		uint32_t	W = 200000;
		uint32_t	WB = 10000;
		uint32_t	head = 0;
		double		ti = 0;
		double		td = 0;
		int			k;

		s = mk(L, rb, GI_KEYS_UNIQUE);
		ins(s, W, lists, keys, pay, &a);
		int			steps = getenv("PLAN_ONLY_WINDOW") ? 1000 : 50;

		for (k = 0; k < steps; k++)
		{
			uint32_t	in0 = (W + (uint32_t) k * WB) % (N - WB);

			t0 = now_ms();
			ins(s, WB, lists + in0, keys + in0, pay + (size_t) in0 * rb, &a);
			t1 = now_ms();
			del(s, WB, keys + head, &a);
			head = (head + WB) % (N - WB);
			ti += t1 - t0;
			td += now_ms() - t1;
		}
		printf("window W %u B %u: insert %.3f ms, delete %.3f ms per step (mean of %d); pool %u slabs\n",
			   W, WB, ti / steps, td / steps, steps, s->nslabs);
	}
	/* posting lists: rows of 100 weights in distinct lists of 30,000 */
	if (!getenv("PLAN_ONLY_WINDOW"))
	{
		const uint32_t PL = 30000;
		const uint32_t T = 100;
		uint32_t	rows = N / T;

		for (i = 0; i < rows * T; i++)
		{
			uint32_t	row = i / T;

			lists[i] = (uint32_t) ((row * 7919u + (i % T) * 104729u) % PL);
			keys[i] = ((uint64_t) (row / 100) << 16) | (row % 100 + 1);
		}
		s = mk(PL, 4, GI_KEYS_PER_LIST);
		t0 = now_ms();
		for (i = 0; i < rows * T; i += B)
			ins(s, rows * T - i < B ? rows * T - i : B, lists + i, keys + i, pay + (size_t) i * 4, &a);
		t1 = now_ms();
		printf("postings ingest %u records (%u rows of %u): %.1f ms = %.1f ns/rec; kept pairs %llu\n",
			   rows * T, rows, T, t1 - t0, (t1 - t0) * 1e6 / (rows * T),
			   (unsigned long long) s->pairs.kept.count);
		for (i = 0; i < 1000 && i < rows; i++)
			dk[i] = keys[(size_t) (rnext() % rows) * T];
		t0 = now_ms();
		del(s, i, dk, &a);
		t1 = now_ms();
		printf("postings delete %u rows (%u records each): %.3f ms\n", i, T, t1 - t0);
		gi_cu_free_mirror(s);
		delete s;
	}
	return 0;
}
