/*
 * test_spread.c
 *		cmocka tests of one store spread over several (gi_spread.h): the
 *		answer order and the merge of answers, the routings by key and by
 *		list, and, for the IVF, IVF-PQ and sparse kinds of the host backend,
 *		that searches of every shard merged are the one store's searches.
 *
 * The reference is one host store holding every record; the same records
 * go to nshards host stores as the device service routes them (IVF kinds
 * by list, the sparse kind by key), the same deletes to the shards that
 * may hold the keys, and each search's shard answers are merged with
 * gi_hits_merge.  Hits, distances (bit for bit) and found counts must be
 * equal.
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

#include "gi_kind_ivfpq.h"
#include "gi_kind_sparse.h"
#include "gi_spread.h"
#include "host_pool.h"
#include "host_store.h"
#include "test_util.h"

static const gi_backend_ops *ops;

#define MAX_SHARDS	4
#define MAX_LISTS	64

/* one store and the same records spread over nshards */
typedef struct spread
{
	gi_kind		kind;
	uint32_t	record_bytes;
	uint32_t	nshards;
	bool		by_key;			/* else by list */
	gi_store   *one;
	gi_store   *shard[MAX_SHARDS];
	uint32_t	owner[MAX_LISTS];
	uint64_t	records[MAX_SHARDS];
} spread;

static void
spread_create(spread *sp, gi_kind kind, const gi_store_params *params,
			  const void *state, size_t bytes, uint32_t nshards, bool by_key)
{
	const gi_kind_ops *k = ops->kinds[kind];

	memset(sp, 0, sizeof(*sp));
	sp->kind = kind;
	sp->record_bytes = params->record_bytes;
	sp->nshards = nshards;
	sp->by_key = by_key;
	memset(sp->owner, 0xFF, sizeof(sp->owner));
	assert_true(params->nlists <= MAX_LISTS);
	assert_int_equal(ops->store_create(params, &sp->one), GI_OK);
	if (k->set_state)
		assert_int_equal(k->set_state(sp->one, state, bytes), GI_OK);
	for (uint32_t j = 0; j < nshards; j++)
	{
		assert_int_equal(ops->store_create(params, &sp->shard[j]), GI_OK);
		if (k->set_state)
			assert_int_equal(k->set_state(sp->shard[j], state, bytes), GI_OK);
	}
}

static void
spread_destroy(spread *sp)
{
	ops->store_destroy(sp->one);
	for (uint32_t j = 0; j < sp->nshards; j++)
		ops->store_destroy(sp->shard[j]);
}

static void
insert_into(spread *sp, gi_store *s, uint32_t n, const uint32_t *lists,
			const uint64_t *keys, const char *payloads, uint64_t *ninserted)
{
	uint64_t	done = 0;

	assert_int_equal(ops->store_insert(s, n, lists, keys, payloads, &done), GI_OK);
	if (ops->kinds[sp->kind]->inserted)
		ops->kinds[sp->kind]->inserted(s, n, lists, payloads);
	*ninserted += done;
}

/* records to the one store, and each shard's in their order to it */
static void
spread_insert(spread *sp, uint32_t n, const uint32_t *lists, const uint64_t *keys,
			  const char *payloads)
{
	uint32_t	rb = sp->record_bytes;
	uint32_t   *to = malloc(sizeof(uint32_t) * n);
	uint32_t   *sl = malloc(sizeof(uint32_t) * n);
	uint64_t   *sk = malloc(sizeof(uint64_t) * n);
	char	   *spay = malloc((size_t) n * rb);
	uint64_t	one = 0;
	uint64_t	spread_total = 0;

	insert_into(sp, sp->one, n, lists, keys, payloads, &one);
	for (uint32_t i = 0; i < n; i++)
		to[i] = sp->by_key ? gi_key_shard(keys[i], sp->nshards) :
			gi_list_shard(sp->owner, sp->records, sp->nshards, lists[i]);
	for (uint32_t j = 0; j < sp->nshards; j++)
	{
		uint32_t	m = 0;

		for (uint32_t i = 0; i < n; i++)
		{
			assert_true(to[i] < sp->nshards);
			if (to[i] != j)
				continue;
			sl[m] = lists[i];
			sk[m] = keys[i];
			memcpy(spay + (size_t) m * rb, payloads + (size_t) i * rb, rb);
			m++;
		}
		if (m > 0)
			insert_into(sp, sp->shard[j], m, sl, sk, spay, &spread_total);
	}
	assert_int_equal(one, spread_total);
	free(to);
	free(sl);
	free(sk);
	free(spay);
}

/* by key: to the key's shard; by list: to every shard */
static void
spread_delete(spread *sp, uint32_t n, const uint64_t *keys)
{
	uint64_t	one = 0;
	uint64_t	total = 0;

	assert_int_equal(ops->store_delete(sp->one, n, keys, &one), GI_OK);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < sp->nshards; j++)
		{
			uint64_t	done = 0;

			if (sp->by_key && gi_key_shard(keys[i], sp->nshards) != j)
				continue;
			assert_int_equal(ops->store_delete(sp->shard[j], 1, &keys[i], &done), GI_OK);
			total += done;
		}
	assert_int_equal(one, total);
}

/* the same search of the one store and of the shards, merged: equal */
static void
spread_compare(spread *sp, const void *params, uint32_t nq, const void *queries,
			   size_t query_bytes, uint32_t k)
{
	const gi_kind_ops *kops = ops->kinds[sp->kind];
	size_t		nh = (size_t) nq * k;
	gi_hit	   *h1 = malloc(sizeof(gi_hit) * nh);
	gi_hit	   *h2 = malloc(sizeof(gi_hit) * nh);
	gi_hit	   *more = malloc(sizeof(gi_hit) * nh);
	uint32_t   *f1 = malloc(sizeof(uint32_t) * nq);
	uint32_t   *f2 = malloc(sizeof(uint32_t) * nq);
	uint32_t   *fm = malloc(sizeof(uint32_t) * nq);
	gi_hit	   *tmp = malloc(sizeof(gi_hit) * k);
	gi_store_stats st1,
				st2;
	uint64_t	rows = 0;

	assert_int_equal(kops->search(sp->one, params, nq, queries, query_bytes, k, h1, f1), GI_OK);
	assert_int_equal(kops->search(sp->shard[0], params, nq, queries, query_bytes, k, h2, f2), GI_OK);
	for (uint32_t j = 1; j < sp->nshards; j++)
	{
		assert_int_equal(kops->search(sp->shard[j], params, nq, queries, query_bytes, k,
									  more, fm), GI_OK);
		gi_hits_merge(h2, f2, more, fm, nq, k, tmp);
	}
	gi_hits_pad(h2, f2, nq, k);
	for (uint32_t q = 0; q < nq; q++)
	{
		assert_int_equal(f1[q], f2[q]);
		for (uint32_t i = 0; i < k; i++)
		{
			const gi_hit *a = &h1[(size_t) q * k + i];
			const gi_hit *b = &h2[(size_t) q * k + i];

			assert_int_equal(a->key, b->key);
			assert_memory_equal(&a->distance, &b->distance, sizeof(float));
		}
	}
	/* every live record is in exactly one shard */
	assert_int_equal(ops->store_stats(sp->one, &st1), GI_OK);
	for (uint32_t j = 0; j < sp->nshards; j++)
	{
		assert_int_equal(ops->store_stats(sp->shard[j], &st2), GI_OK);
		rows += st2.rows;
	}
	assert_int_equal(rows, st1.rows);
	free(h1);
	free(h2);
	free(more);
	free(f1);
	free(f2);
	free(fm);
	free(tmp);
}

/* the merge keeps the answer order of the union, NaN last, ties by key */
static void
test_merge(void **state)
{
	enum
	{
		K = 6, NQ = 3
	};
	gi_hit		a[NQ * K],
				b[NQ * K],
				all[2 * K],
				tmp[K];
	uint32_t	fa[NQ],
				fb[NQ],
				want;

	(void) state;
	rng_seed(7);
	for (int t = 0; t < 200; t++)
	{
		for (uint32_t q = 0; q < NQ; q++)
		{
			fa[q] = rng_below(K + 1);
			fb[q] = rng_below(K + 1);
			for (uint32_t i = 0; i < K; i++)
			{
				gi_hit	   *x[2] = {&a[q * K + i], &b[q * K + i]};

				for (int s = 0; s < 2; s++)
				{
					uint32_t	r = rng_below(10);

					x[s]->key = rng_below(20);
					x[s]->distance = r == 0 ? NAN : r == 1 ? INFINITY : (float) rng_below(4);
					x[s]->pad = 0;
				}
			}
			/* each answer in order, as a search gives it */
			for (uint32_t i = 1; i < fa[q]; i++)
				for (uint32_t j = i; j > 0 && gi_hit_order(&a[q * K + j - 1], &a[q * K + j]) > 0; j--)
				{
					gi_hit		s = a[q * K + j];

					a[q * K + j] = a[q * K + j - 1];
					a[q * K + j - 1] = s;
				}
			for (uint32_t i = 1; i < fb[q]; i++)
				for (uint32_t j = i; j > 0 && gi_hit_order(&b[q * K + j - 1], &b[q * K + j]) > 0; j--)
				{
					gi_hit		s = b[q * K + j];

					b[q * K + j] = b[q * K + j - 1];
					b[q * K + j - 1] = s;
				}
		}
		for (uint32_t q = 0; q < NQ; q++)
		{
			memcpy(all, &a[q * K], fa[q] * sizeof(gi_hit));
			memcpy(all + fa[q], &b[q * K], fb[q] * sizeof(gi_hit));
			/* the expected: the union sorted (insertion sort by the order) */
			for (uint32_t i = 1; i < fa[q] + fb[q]; i++)
				for (uint32_t j = i; j > 0 && gi_hit_order(&all[j - 1], &all[j]) > 0; j--)
				{
					gi_hit		s = all[j];

					all[j] = all[j - 1];
					all[j - 1] = s;
				}
			want = fa[q] + fb[q] > K ? K : fa[q] + fb[q];
			gi_hits_merge(&a[q * K], &fa[q], &b[q * K], &fb[q], 1, K, tmp);
			assert_int_equal(fa[q], want);
			for (uint32_t i = 0; i < fa[q]; i++)
			{
				assert_int_equal(a[q * K + i].key, all[i].key);
				assert_memory_equal(&a[q * K + i].distance, &all[i].distance, sizeof(float));
			}
		}
	}
}

/* the merged count is min(k, the two counts' sum); padding follows it */
static void
test_merge_counts(void **state)
{
	gi_hit		a[4] = {{1, 0.5f, 0}, {3, 1.0f, 0}, {0, 0, 0}, {0, 0, 0}};
	gi_hit		b[4] = {{2, 0.5f, 0}, {4, NAN, 0}, {9, 0, 0}, {9, 0, 0}};
	gi_hit		tmp[4];
	uint32_t	fa = 2,
				fb = 2;

	(void) state;
	gi_hits_merge(a, &fa, b, &fb, 1, 4, tmp);
	assert_int_equal(fa, 4);
	assert_int_equal(a[0].key, 1);	/* 0.5 twice: key 1 before 2 */
	assert_int_equal(a[1].key, 2);
	assert_int_equal(a[2].key, 3);
	assert_int_equal(a[3].key, 4);	/* NaN after every number */
	fa = 1;
	fb = 0;
	gi_hits_merge(a, &fa, b, &fb, 1, 4, tmp);
	assert_int_equal(fa, 1);
	gi_hits_pad(a, &fa, 1, 4);
	assert_int_equal(a[1].key, 0);
	assert_true(isinf(a[3].distance) && a[3].distance > 0);
}

/* by key: shards of about equal size, independent of a split into parts */
static void
test_key_routing(void **state)
{
	enum
	{
		N = 60000
	};

	(void) state;
	for (uint32_t n = 1; n <= MAX_SHARDS; n++)
	{
		uint32_t	count[MAX_SHARDS] = {0};
		uint32_t	part0[MAX_SHARDS] = {0};
		uint32_t	in_part0 = 0;

		for (uint64_t i = 0; i < N; i++)
		{
			/* heap TIDs: block << 16 | offset */
			uint64_t	key = ((i / 50) << 16) | (i % 50 + 1);
			uint32_t	s = gi_key_shard(key, n);

			assert_true(s < n);
			assert_int_equal(s, gi_key_shard(key, n));
			count[s]++;
			if (gi_key_hash(key) % 2 == 0)
			{
				part0[s]++;
				in_part0++;
			}
		}
		for (uint32_t s = 0; s < n; s++)
		{
			assert_true(fabs((double) count[s] - (double) N / n) < 0.03 * N / n);
			assert_true(fabs((double) part0[s] - (double) in_part0 / n) < 0.05 * in_part0 / n);
		}
	}
}

/*
 * By list: a list stays on its shard, and placed greedily in list order
 * the shards differ by at most the largest list.
 */
static void
test_list_routing(void **state)
{
	(void) state;
	rng_seed(11);
	for (uint32_t n = 2; n <= MAX_SHARDS; n++)
	{
		uint32_t	owner[MAX_LISTS];
		uint64_t	records[MAX_SHARDS] = {0};
		uint32_t	largest = 0;
		uint64_t	lo = UINT64_MAX,
					hi = 0;

		memset(owner, 0xFF, sizeof(owner));
		for (uint32_t l = 0; l < MAX_LISTS; l++)
		{
			uint32_t	size = 1 + rng_below(l % 7 == 0 ? 900 : 90);
			uint32_t	s = gi_list_shard(owner, records, n, l);

			for (uint32_t i = 1; i < size; i++)
				assert_int_equal(gi_list_shard(owner, records, n, l), s);
			if (size > largest)
				largest = size;
		}
		for (uint32_t s = 0; s < n; s++)
		{
			lo = records[s] < lo ? records[s] : lo;
			hi = records[s] > hi ? records[s] : hi;
		}
		assert_true(hi - lo <= largest);
	}
}

/* IVF and IVF-PQ stores of random records: inserts, deletes, searches */
static void
run_ivf(gi_kind kind, gi_metric metric, uint32_t nshards)
{
	const uint32_t dim = 8,
				nlists = 12,
				m = 4,
				ksub = 16,
				n = 3000,
				nq = 9;
	bool		pq = kind == GI_KIND_IVFPQ;
	size_t		bytes = pq ? gi_ivfpq_state_size(nlists, dim, ksub) : gi_ivf_state_size(nlists, dim);
	char	   *state = calloc(1, bytes);
	gi_ivf_state *ivf = (gi_ivf_state *) state;
	float	   *cent = (float *) (state + (pq ? sizeof(gi_ivfpq_state) : sizeof(gi_ivf_state)));
	uint32_t	rb = pq ? gi_ivfpq_record_bytes(m, 8) : dim * sizeof(float);
	gi_store_params params = {.nlists = nlists, .record_bytes = rb, .key_mode = GI_KEYS_UNIQUE};
	uint32_t   *lists = malloc(sizeof(uint32_t) * n);
	uint64_t   *keys = malloc(sizeof(uint64_t) * n);
	char	   *payloads = calloc(n, rb);
	float	   *queries = malloc(sizeof(float) * nq * dim);
	uint32_t	probes[] = {1, 3, nlists};
	uint32_t	ks[] = {1, 10, 700};
	spread		sp;

	ivf->dim = dim;
	ivf->metric = metric;
	ivf->nlists = nlists;
	if (pq)
	{
		((gi_ivfpq_state *) state)->m = m;
		((gi_ivfpq_state *) state)->ksub = ksub;
		((gi_ivfpq_state *) state)->code_bits = 8;
		for (uint32_t i = 0; i < ksub * dim; i++)
			cent[nlists * dim + i] = rng_float();
	}
	for (uint32_t i = 0; i < nlists * dim; i++)
		cent[i] = 3.0f * rng_float();
	spread_create(&sp, kind, &params, state, bytes, nshards, false);
	for (uint32_t i = 0; i < n; i++)
	{
		/* lists of very different sizes; coarse values make ties */
		lists[i] = rng_below(4) == 0 ? rng_below(nlists) : rng_below(3);
		keys[i] = ((uint64_t) (i / 40) << 16) | (i % 40 + 1);
		for (uint32_t j = 0; j < (pq ? m : dim); j++)
		{
			if (pq)
				((uint8_t *) payloads)[(size_t) i * rb + j] = (uint8_t) rng_below(ksub);
			else
				((float *) payloads)[(size_t) i * dim + j] = (float) rng_below(5);
		}
	}
	for (uint32_t i = 0; i < nq * dim; i++)
		queries[i] = (float) rng_below(5);

	/* in chunks, as loads and inserts come */
	for (uint32_t at = 0; at < n; at += 700)
		spread_insert(&sp, n - at < 700 ? n - at : 700, lists + at, keys + at,
					  payloads + (size_t) at * rb);
	for (uint32_t p = 0; p < 3; p++)
		for (uint32_t t = 0; t < 3; t++)
		{
			/* IVF reads the first part; IVF-PQ also its mode, selective every other time */
			gi_ivfpq_search_params sprm = {.ivf = {.dim = dim, .probes = probes[p]},
			.mode = pq && t == 1 ? GI_PQ_SEARCH_JUNO : GI_PQ_SEARCH_LUT, .select = 16, .scale = 1.0f};

			spread_compare(&sp, &sprm, nq, queries, sizeof(float) * nq * dim, ks[t]);
		}
	/* a third of the rows deleted, some of them inserted again */
	for (uint32_t i = 0; i < n; i += 3)
		spread_delete(&sp, 1, &keys[i]);
	spread_insert(&sp, 200, lists, keys, payloads);
	for (uint32_t p = 0; p < 3; p++)
	{
		gi_ivfpq_search_params sprm = {.ivf = {.dim = dim, .probes = probes[p]},
		.mode = pq && p == 2 ? GI_PQ_SEARCH_HITS : GI_PQ_SEARCH_LUT, .select = 8, .scale = 1.0f};

		spread_compare(&sp, &sprm, nq, queries, sizeof(float) * nq * dim, 10);
		spread_compare(&sp, &sprm, nq, queries, sizeof(float) * nq * dim, 2000);
	}
	spread_destroy(&sp);
	free(state);
	free(lists);
	free(keys);
	free(payloads);
	free(queries);
}

static void
test_ivf_spread(void **state)
{
	(void) state;
	rng_seed(21);
	for (uint32_t n = 2; n <= 3; n++)
	{
		run_ivf(GI_KIND_IVF, GI_METRIC_L2, n);
		run_ivf(GI_KIND_IVF, GI_METRIC_IP, n);
		run_ivf(GI_KIND_IVF, GI_METRIC_COSINE, n);
	}
}

static void
test_ivfpq_spread(void **state)
{
	(void) state;
	rng_seed(22);
	for (uint32_t n = 2; n <= 3; n++)
	{
		run_ivf(GI_KIND_IVFPQ, GI_METRIC_L2, n);
		run_ivf(GI_KIND_IVFPQ, GI_METRIC_IP, n);
	}
}

/* the sparse kind: documents of several terms, real or unit weights */
static void
run_sparse(bool unit, uint32_t nshards)
{
	const uint32_t dim = 40,
				ndocs = 1500,
				nq = 7;
	gi_sparse_state st = {.dim = dim};
	gi_store_params params = {.nlists = dim, .record_bytes = 4, .key_mode = GI_KEYS_PER_LIST};
	uint32_t	cap = ndocs * 8;
	uint32_t   *lists = malloc(sizeof(uint32_t) * cap);
	uint64_t   *keys = malloc(sizeof(uint64_t) * cap);
	float	   *weights = malloc(sizeof(float) * cap);
	uint32_t   *first = malloc(sizeof(uint32_t) * (ndocs + 1));
	char	   *queries = malloc(nq * gi_sparse_query_bytes(dim));
	size_t		qbytes = 0;
	uint32_t	n = 0;
	uint32_t	methods[] = {GI_SPARSE_AUTO, GI_SPARSE_TERM};
	spread		sp;

	spread_create(&sp, GI_KIND_SPARSE, &params, &st, sizeof(st), nshards, true);
	for (uint32_t d = 0; d < ndocs; d++)
	{
		uint32_t	nnz = 1 + rng_below(8);
		uint32_t	t = rng_below(dim);

		first[d] = n;
		for (uint32_t j = 0; j < nnz && t < dim; j++, t += 1 + rng_below(5))
		{
			lists[n] = t;
			keys[n] = ((uint64_t) (d / 30) << 16) | (d % 30 + 1);
			weights[n] = unit ? 1.0f : (float) (1 + rng_below(4)) / 2.0f;
			n++;
		}
	}
	first[ndocs] = n;
	for (uint32_t q = 0; q < nq; q++)
	{
		uint32_t	nnz = 1 + rng_below(5);
		uint32_t	terms[5];
		float		w[5];
		uint32_t	m = 0;

		for (uint32_t t = rng_below(dim); m < nnz && t < dim; t += 1 + rng_below(9))
		{
			terms[m] = t;
			w[m] = unit ? (float) (1 + rng_below(2)) : (float) (1 + rng_below(3)) / 4.0f;
			m++;
		}
		memcpy(queries + qbytes, &m, 4);
		memcpy(queries + qbytes + 4, terms, 4 * m);
		memcpy(queries + qbytes + 4 + 4 * m, w, 4 * m);
		qbytes += gi_sparse_query_bytes(m);
	}

	/* whole documents per call, as the service gets them */
	for (uint32_t d = 0; d < ndocs; d += 250)
	{
		uint32_t	end = first[d + 250 < ndocs ? d + 250 : ndocs];

		spread_insert(&sp, end - first[d], lists + first[d], keys + first[d],
					  (char *) (weights + first[d]));
	}
	for (uint32_t mth = 0; mth < 2; mth++)
	{
		gi_sparse_search_params p = {.dim = dim, .method = methods[mth]};

		spread_compare(&sp, &p, nq, queries, qbytes, 1);
		spread_compare(&sp, &p, nq, queries, qbytes, 10);
		spread_compare(&sp, &p, nq, queries, qbytes, ndocs);
	}
	for (uint32_t d = 0; d < ndocs; d += 4)
		spread_delete(&sp, 1, &keys[first[d]]);
	/* some documents back */
	spread_insert(&sp, first[100], lists, keys, (char *) weights);
	{
		gi_sparse_search_params p = {.dim = dim, .method = GI_SPARSE_AUTO};

		spread_compare(&sp, &p, nq, queries, qbytes, 10);
		spread_compare(&sp, &p, nq, queries, qbytes, ndocs);
	}
	spread_destroy(&sp);
	free(lists);
	free(keys);
	free(weights);
	free(first);
	free(queries);
}

static void
test_sparse_spread(void **state)
{
	(void) state;
	rng_seed(31);
	for (uint32_t n = 2; n <= 3; n++)
	{
		run_sparse(false, n);
		run_sparse(true, n);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_merge_counts),
		cmocka_unit_test(test_key_routing),
		cmocka_unit_test(test_list_routing),
		cmocka_unit_test(test_ivf_spread),
		cmocka_unit_test(test_ivfpq_spread),
		cmocka_unit_test(test_sparse_spread),
	};

	ops = gi_host_backend();
	/* GI_TEST_THREADS=N: every search on N threads, however small */
	if (getenv("GI_TEST_THREADS") != NULL)
	{
		ops->set_host_threads((uint32_t) atoi(getenv("GI_TEST_THREADS")));
		gi_host_pool_set_grain(0);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
