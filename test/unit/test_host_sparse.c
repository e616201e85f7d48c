/*
 * test_host_sparse.c
 *		cmocka tests of the host sparse kind (host_sparse.c) and of the key
 *		ordinals it scores by.
 *
 * The reference is the test's own copy of every document: scores are
 * computed here by merging the sorted term lists (the rule of
 * gi_kind_sparse.h), candidates are the documents sharing a term with the
 * query, and the expected answer is a full sort by (distance, key).
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

#include "gi_kind_sparse.h"
#include "host_pool.h"
#include "host_store.h"
#include "test_util.h"

static const gi_backend_ops *ops;

typedef struct doc
{
	uint64_t	key;
	bool		live;
	uint32_t	nnz;
	uint32_t   *terms;
	float	   *weights;
} doc;

typedef struct ref_hit
{
	float		dist;
	uint64_t	key;
} ref_hit;

static int
ref_hit_cmp(const void *a, const void *b)
{
	const ref_hit *x = a;
	const ref_hit *y = b;

	if (x->dist != y->dist)
		return x->dist < y->dist ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

static int
u32_cmp(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return x < y ? -1 : x > y;
}

/* nnz distinct sorted terms below dim with weights; weights may be negative */
static void
random_vector(uint32_t dim, uint32_t nnz, uint32_t *terms, float *weights,
			  bool skewed)
{
	uint32_t	n = 0;

	while (n < nnz)
	{
		uint32_t	t = skewed ? rng_below(1 + rng_below(dim)) : rng_below(dim);
		uint32_t	i;

		for (i = 0; i < n && terms[i] != t; i++)
			;
		if (i == n)
			terms[n++] = t;
	}
	qsort(terms, n, sizeof(uint32_t), u32_cmp);
	for (uint32_t i = 0; i < n; i++)
		weights[i] = rng_float() * 4.0f;
}

static gi_store *
sparse_store(uint32_t dim)
{
	gi_store_params p;
	gi_sparse_state st;
	gi_store   *s = NULL;

	memset(&p, 0, sizeof(p));
	p.nlists = dim;
	p.record_bytes = sizeof(float);
	p.key_mode = GI_KEYS_PER_LIST;
	p.chunk_slabs = 4;
	assert_int_equal(ops->store_create(&p, &s), GI_OK);
	st.dim = dim;
	st.terms = 0;
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->set_state(s, &st, sizeof(st)), GI_OK);
	return s;
}

/* a document's records in one insert call, as the access methods send them */
static void
insert_doc(gi_store *s, const doc *d)
{
	uint64_t   *keys = malloc(sizeof(uint64_t) * (d->nnz + 1));
	uint64_t	n = 0;

	for (uint32_t i = 0; i < d->nnz; i++)
		keys[i] = d->key;
	assert_int_equal(ops->store_insert(s, d->nnz, d->terms, keys, d->weights, &n),
					 GI_OK);
	assert_int_equal(n, d->nnz);
	/* the service tells the kind of every successful insert */
	ops->kinds[GI_KIND_SPARSE]->inserted(s, d->nnz, d->terms, d->weights);
	free(keys);
}

/*
 * The list bounds equal the largest |weight| ever inserted into each list
 * (docs[0..ever)) and are never below a live record's.
 */
static void
check_bounds(gi_store *s, uint32_t dim, const doc *docs, uint32_t ndocs)
{
	float	   *got = malloc(sizeof(float) * dim);
	float	   *ever = calloc(dim, sizeof(float));

	for (uint32_t d = 0; d < ndocs; d++)
		for (uint32_t i = 0; i < docs[d].nnz; i++)
		{
			float		a = fabsf(docs[d].weights[i]);

			if (a > ever[docs[d].terms[i]])
				ever[docs[d].terms[i]] = a;
		}
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->list_bounds(s, 0, dim, got), GI_OK);
	for (uint32_t t = 0; t < dim; t++)
		if (got[t] != ever[t])
			fail_msg("list %u: bound %g, largest |weight| inserted %g", t, got[t], ever[t]);
	/* a window inside the lists, and one past their end */
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->list_bounds(s, dim - 3, 3, got), GI_OK);
	assert_true(got[2] == ever[dim - 1]);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->list_bounds(s, dim - 3, 4, got),
					 GI_ERR_INVALID);
	free(got);
	free(ever);
}

static float
ref_distance(const doc *d, uint32_t nnz, const uint32_t *terms,
			 const float *weights, bool *shares)
{
	double		sum = 0.0;
	uint32_t	i = 0;
	uint32_t	j = 0;

	*shares = false;
	while (i < d->nnz && j < nnz)
	{
		if (d->terms[i] < terms[j])
			i++;
		else if (d->terms[i] > terms[j])
			j++;
		else
		{
			sum += (double) d->weights[i] * (double) weights[j];
			*shares = true;
			i++;
			j++;
		}
	}
	return (float) -sum;
}

/* pack one query as gi_kind_sparse.h lays it out */
static size_t
pack_query(unsigned char *out, uint32_t nnz, const uint32_t *terms,
		   const float *weights)
{
	memcpy(out, &nnz, 4);
	memcpy(out + 4, terms, (size_t) nnz * 4);
	memcpy(out + 4 + (size_t) nnz * 4, weights, (size_t) nnz * 4);
	return gi_sparse_query_bytes(nnz);
}

/*
 * Search nq queries at once and compare each with the full sort; with
 * whole, the query weights are whole numbers (1 to 3), which the store
 * counts when the lists' records all weigh 1.
 */
static void
check_queries_with(gi_store *s, uint32_t dim, const doc *docs, uint32_t ndocs,
				   uint32_t nq, uint32_t qnnz, uint32_t k, bool whole,
				   gi_sparse_method method)
{
	uint32_t   *qterms = malloc(sizeof(uint32_t) * nq * (qnnz + 1));
	float	   *qweights = malloc(sizeof(float) * nq * (qnnz + 1));
	uint32_t   *qn = malloc(sizeof(uint32_t) * nq);
	unsigned char *packed = malloc(nq * gi_sparse_query_bytes(qnnz) + 4);
	gi_hit	   *hits = malloc(sizeof(gi_hit) * nq * k + 1);
	uint32_t   *found = malloc(sizeof(uint32_t) * nq);
	ref_hit    *ref = malloc(sizeof(ref_hit) * (ndocs + 1));
	gi_sparse_search_params p = {dim, method};
	size_t		bytes = 0;

	for (uint32_t q = 0; q < nq; q++)
	{
		qn[q] = q % 7 == 6 ? 0 : 1 + rng_below(qnnz);
		random_vector(dim, qn[q], qterms + q * qnnz, qweights + q * qnnz, true);
		for (uint32_t i = 0; whole && i < qn[q]; i++)
			qweights[q * qnnz + i] = (float) (1 + rng_below(3));
		bytes += pack_query(packed + bytes, qn[q], qterms + q * qnnz,
							qweights + q * qnnz);
	}
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, nq, packed, bytes,
														 k, hits, found), GI_OK);
	for (uint32_t q = 0; q < nq; q++)
	{
		uint32_t	nref = 0;

		for (uint32_t d = 0; d < ndocs; d++)
		{
			bool		shares;
			float		dist;

			if (!docs[d].live)
				continue;
			dist = ref_distance(&docs[d], qn[q], qterms + q * qnnz,
								qweights + q * qnnz, &shares);
			if (shares)
			{
				ref[nref].dist = dist;
				ref[nref].key = docs[d].key;
				nref++;
			}
		}
		qsort(ref, nref, sizeof(ref_hit), ref_hit_cmp);
		assert_int_equal(found[q], nref < k ? nref : k);
		for (uint32_t i = 0; i < k; i++)
		{
			const gi_hit *h = &hits[(size_t) q * k + i];

			if (i < found[q])
			{
				if (h->key != ref[i].key || h->distance != ref[i].dist)
					fail_msg("query %u hit %u: key %llu distance %.9g, expected key %llu distance %.9g",
							 q, i, (unsigned long long) h->key, h->distance,
							 (unsigned long long) ref[i].key, ref[i].dist);
			}
			else
				assert_true(h->key == 0 && isinf(h->distance));
		}
	}
	free(qterms);
	free(qweights);
	free(qn);
	free(packed);
	free(hits);
	free(found);
	free(ref);
}

static void
check_queries(gi_store *s, uint32_t dim, const doc *docs, uint32_t ndocs,
			  uint32_t nq, uint32_t qnnz, uint32_t k)
{
	check_queries_with(s, dim, docs, ndocs, nq, qnnz, k, false, GI_SPARSE_AUTO);
}

static void
check_store(const gi_store *s)
{
	char		err[512];

	if (!gi_host_store_check(s, err, sizeof(err)))
		fail_msg("store invariant broken: %s", err);
}

/* random documents, deletes and re-inserts, searched after every phase */
static void
test_sparse_random(void **state)
{
	const uint32_t dim = 300;
	const uint32_t ndocs = 600;
	doc		   *docs = calloc(ndocs, sizeof(doc));
	gi_store   *s;

	(void) state;
	rng_seed(42);
	s = sparse_store(dim);
	for (uint32_t d = 0; d < ndocs; d++)
	{
		/* 0, 1, a few and many non-zeros, skewed towards low terms (Zipf-like) */
		uint32_t	nnz = d % 50 == 0 ? 0 : d % 50 == 1 ? 1 :
			d % 97 == 2 ? dim : 1 + rng_below(25);

		docs[d].key = ((uint64_t) (d / 7) << 16) | (d % 7 + 1);
		docs[d].nnz = nnz;
		docs[d].terms = malloc(sizeof(uint32_t) * (nnz + 1));
		docs[d].weights = malloc(sizeof(float) * (nnz + 1));
		random_vector(dim, nnz, docs[d].terms, docs[d].weights, true);
		docs[d].live = true;
	}
	/* exact ties: the same document under several keys */
	for (uint32_t d = 11; d < 14; d++)
	{
		docs[d].nnz = docs[10].nnz;
		memcpy(docs[d].terms, docs[10].terms, sizeof(uint32_t) * docs[10].nnz);
		memcpy(docs[d].weights, docs[10].weights, sizeof(float) * docs[10].nnz);
	}
	for (uint32_t d = 0; d < ndocs; d++)
		insert_doc(s, &docs[d]);
	check_store(s);
	check_bounds(s, dim, docs, ndocs);
	check_queries(s, dim, docs, ndocs, 40, 12, 10);
	check_queries(s, dim, docs, ndocs, 9, 30, 1000);

	/* delete a third, search, re-insert half of those, search */
	for (uint32_t d = 0; d < ndocs; d += 3)
	{
		uint64_t	n = 0;

		assert_int_equal(ops->store_delete(s, 1, &docs[d].key, &n), GI_OK);
		assert_int_equal(n, docs[d].nnz);
		docs[d].live = false;
	}
	check_store(s);
	/* deletes leave the bounds where they were */
	check_bounds(s, dim, docs, ndocs);
	check_queries(s, dim, docs, ndocs, 40, 12, 7);
	for (uint32_t d = 0; d < ndocs; d += 6)
	{
		/* a record of the document already there is skipped (PER_LIST) */
		insert_doc(s, &docs[d]);
		docs[d].live = true;
	}
	check_store(s);
	check_queries(s, dim, docs, ndocs, 40, 12, 25);

	ops->store_destroy(s);
	for (uint32_t d = 0; d < ndocs; d++)
	{
		free(docs[d].terms);
		free(docs[d].weights);
	}
	free(docs);
}

/* identical documents tie and come in key order; the tie survives deletes */
static void
test_sparse_ties(void **state)
{
	uint32_t	terms[3] = {1, 5, 9};
	float		weights[3] = {0.5f, 0.25f, 2.0f};
	doc			docs[20];
	gi_store   *s;

	(void) state;
	rng_seed(7);
	s = sparse_store(16);
	for (uint32_t d = 0; d < 20; d++)
	{
		docs[d].key = 1000 - d * 3;
		docs[d].nnz = 3;
		docs[d].terms = terms;
		docs[d].weights = weights;
		docs[d].live = true;
		insert_doc(s, &docs[d]);
	}
	check_queries(s, 16, docs, 20, 14, 4, 5);
	ops->store_destroy(s);
}

/* malformed queries are refused, nothing is read out of bounds */
static void
test_sparse_bad_queries(void **state)
{
	gi_store   *s;
	gi_sparse_search_params p = {8, GI_SPARSE_AUTO};
	unsigned char buf[64];
	uint32_t	terms[2] = {3, 3};
	float		weights[2] = {1, 1};
	gi_hit		hits[4];
	uint32_t	found[2];
	size_t		n;

	(void) state;
	s = sparse_store(8);
	/* repeated term */
	n = pack_query(buf, 2, terms, weights);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 1, buf, n, 2, hits, found),
					 GI_ERR_INVALID);
	/* term beyond the dimension */
	terms[0] = 2;
	terms[1] = 8;
	n = pack_query(buf, 2, terms, weights);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 1, buf, n, 2, hits, found),
					 GI_ERR_INVALID);
	/* sizes that do not add up */
	terms[1] = 7;
	n = pack_query(buf, 2, terms, weights);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 2, buf, n, 2, hits, found),
					 GI_ERR_INVALID);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 1, buf, n - 4, 2, hits, found),
					 GI_ERR_INVALID);
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 1, buf, n, 2, hits, found),
					 GI_OK);
	assert_int_equal(found[0], 0);
	/* another dimension */
	p.dim = 9;
	assert_int_equal(ops->kinds[GI_KIND_SPARSE]->search(s, &p, 1, buf, n, 2, hits, found),
					 GI_ERR_INVALID);
	ops->store_destroy(s);
}

/* ordinals are dense and reused: a sliding window keeps their bound flat */
static void
test_key_ordinals_reused(void **state)
{
	gi_store   *s;
	uint32_t	bound = 0;

	(void) state;
	s = sparse_store(64);
	for (uint32_t step = 0; step < 400; step++)
	{
		doc			d;
		uint32_t	terms[8];
		float		weights[8];

		d.key = step + 1;
		d.nnz = 1 + step % 8;
		d.terms = terms;
		d.weights = weights;
		random_vector(64, d.nnz, terms, weights, false);
		insert_doc(s, &d);
		if (step >= 50)
		{
			uint64_t	old = step - 49;

			assert_int_equal(ops->store_delete(s, 1, &old, NULL), GI_OK);
		}
		if (step == 100)
			bound = gi_host_store_key_ids(s);
	}
	check_store(s);
	assert_true(gi_host_store_key_ids(s) == bound);
	assert_true(bound <= 51);
	ops->store_destroy(s);
}

/*
 * Match counts (every record weighs 1, whole query weights): the counting
 * path (c-PQ) and the term path both equal the brute-force counts, ties
 * by key, through deletes and a list that stops being all ones.
 */
static void
test_sparse_counts(void **state)
{
	const uint32_t dim = 48;
	const uint32_t ndocs = 3000;
	doc		   *docs = calloc(ndocs + 1, sizeof(doc));
	float		two = 2.5f;
	uint32_t	five = 5;
	gi_store   *s;

	(void) state;
	rng_seed(11);
	s = sparse_store(dim);
	for (uint32_t d = 0; d < ndocs; d++)
	{
		docs[d].key = (uint64_t) (d * 7919 % ndocs) + 1;
		docs[d].nnz = 1 + rng_below(10);
		docs[d].terms = malloc(sizeof(uint32_t) * docs[d].nnz);
		docs[d].weights = malloc(sizeof(float) * docs[d].nnz);
		random_vector(dim, docs[d].nnz, docs[d].terms, docs[d].weights, true);
		for (uint32_t i = 0; i < docs[d].nnz; i++)
			docs[d].weights[i] = 1.0f;
		docs[d].live = true;
		insert_doc(s, &docs[d]);
	}
	for (uint32_t k = 1; k <= 300; k *= 5)
	{
		check_queries_with(s, dim, docs, ndocs, 30, 8, k, true, GI_SPARSE_AUTO);
		check_queries_with(s, dim, docs, ndocs, 30, 8, k, true, GI_SPARSE_TERM);
	}
	for (uint32_t d = 0; d < ndocs; d += 3)
	{
		uint64_t	n;

		assert_int_equal(ops->store_delete(s, 1, &docs[d].key, &n), GI_OK);
		docs[d].live = false;
	}
	check_queries_with(s, dim, docs, ndocs, 30, 8, 10, true, GI_SPARSE_AUTO);
	/* a record of weight 2.5 in list 5: queries on it are scored, not counted */
	docs[ndocs].key = 999999;
	docs[ndocs].nnz = 1;
	docs[ndocs].terms = &five;
	docs[ndocs].weights = &two;
	docs[ndocs].live = true;
	insert_doc(s, &docs[ndocs]);
	check_queries_with(s, dim, docs, ndocs + 1, 30, 8, 10, true, GI_SPARSE_AUTO);
	check_queries_with(s, dim, docs, ndocs + 1, 30, 8, 10, false, GI_SPARSE_AUTO);
	check_store(s);
	ops->store_destroy(s);
	for (uint32_t d = 0; d < ndocs; d++)
	{
		free(docs[d].terms);
		free(docs[d].weights);
	}
	free(docs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sparse_random),
		cmocka_unit_test(test_sparse_ties),
		cmocka_unit_test(test_sparse_bad_queries),
		cmocka_unit_test(test_key_ordinals_reused),
		cmocka_unit_test(test_sparse_counts),
	};

	ops = gi_host_backend();
	/* GI_TEST_THREADS=N: every search and k-means on N threads, however small */
	if (getenv("GI_TEST_THREADS") != NULL)
	{
		ops->set_host_threads((uint32_t) atoi(getenv("GI_TEST_THREADS")));
		gi_host_pool_set_grain(0);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
