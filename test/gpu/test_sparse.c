/*
 * test_sparse.c
 *		The sparse kind against the host: documents with Zipf-skewed terms
 *		(none, one, many non-zeros, one document with thousands), batches
 *		of 1, 7 and 500 queries, k from 1 to 5,000, each scoring kernel
 *		forced and the chooser's pick, exact ties from identical
 *		documents, deletes, re-inserts and a sliding window, small scratch
 *		budgets (sub-batches of queries, ranges of key ordinals), the
 *		store's key ordinals after random mutations, and the same again with
 *		each way of the term path forced.
 *
 * Hits must equal the host's key for key and distance for distance (the
 * host sums double products and rounds to float; so do the kernels), and
 * found[] and the padding too.  The first queries of every batch are also
 * scored here from the test's own copy of the documents, so the reference
 * cannot pass by agreeing with itself.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gi_kind_sparse.h"
#include "harness.h"

/* the CUDA backend's room for a query's candidates on the counting path (GI_SP_COUNT_CAND) */
#define GI_SP_COUNT_TEST_CAND 65536

static uint64_t sp_hits_compared;
static uint64_t sp_searches;
static uint64_t sp_auto_doc;
static uint64_t sp_auto_term;
static uint64_t sp_auto_count;

/* the data of the running test can be counted: a forced GI_SPARSE_COUNT must count */
static bool sp_countable;

/* ---- documents ----------------------------------------------------------------- */

/* a collection as the test knows it: doc i has terms/w[off[i], off[i+1]) */
typedef struct sp_docs
{
	uint32_t	dim;
	uint32_t	n;
	uint32_t	cap;
	uint64_t   *key;
	bool	   *live;
	uint32_t   *off;
	uint32_t   *terms;
	float	   *w;
	uint64_t	nnz_cap;
	double	   *zipf;			/* [dim] cumulative Zipf probabilities */
	uint32_t   *stamp;			/* [dim] distinct-term draws */
	uint32_t	epoch;
	float	   *bound;			/* [dim] largest |weight| ever inserted */
} sp_docs;

static void
sp_docs_init(sp_docs *d, uint32_t dim, double s)
{
	double		sum = 0.0;
	uint32_t	i;

	memset(d, 0, sizeof(*d));
	d->dim = dim;
	d->zipf = malloc(dim * sizeof(double));
	d->stamp = calloc(dim, sizeof(uint32_t));
	d->bound = calloc(dim, sizeof(float));
	for (i = 0; i < dim; i++)
	{
		sum += 1.0 / pow(i + 1.0, s);
		d->zipf[i] = sum;
	}
	for (i = 0; i < dim; i++)
		d->zipf[i] /= sum;
	d->off = malloc(sizeof(uint32_t));
	d->off[0] = 0;
}

static void
sp_docs_free(sp_docs *d)
{
	free(d->zipf);
	free(d->stamp);
	free(d->bound);
	free(d->key);
	free(d->live);
	free(d->off);
	free(d->terms);
	free(d->w);
	memset(d, 0, sizeof(*d));
}

/* a term drawn from the Zipf distribution (term 0 the most frequent) */
static uint32_t
sp_zipf(sp_docs *d, rng *r)
{
	double		u = (double) (rnext(r) >> 11) / 9007199254740992.0;
	uint32_t	lo = 0;
	uint32_t	hi = d->dim - 1;

	while (lo < hi)
	{
		uint32_t	mid = (lo + hi) / 2;

		if (d->zipf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int
sp_u32_cmp(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return x < y ? -1 : x > y;
}

/*
 * m distinct terms, ascending: Zipf draws (uniform ones mixed in so that
 * the tail is reached), or for large m a random subset of all terms.
 */
static void
sp_draw_terms(sp_docs *d, rng *r, uint32_t m, uint32_t *out)
{
	uint32_t	n = 0;

	if (++d->epoch == 0)
	{
		memset(d->stamp, 0, d->dim * sizeof(uint32_t));
		d->epoch = 1;
	}
	if (m > d->dim / 4)
	{
		uint32_t	t;

		for (t = 0; t < d->dim && n < m; t++)
			if (rbelow(r, d->dim - t) < m - n)
				out[n++] = t;
		return;
	}
	while (n < m)
	{
		uint32_t	t = rchance(r, 0.2) ? rbelow(r, d->dim) : sp_zipf(d, r);

		if (d->stamp[t] == d->epoch)
			continue;
		d->stamp[t] = d->epoch;
		out[n++] = t;
	}
	qsort(out, m, sizeof(uint32_t), sp_u32_cmp);
}

/* a weight: mostly positive, some negative, a few zeros, some on a grid */
static float
sp_weight(rng *r, bool grid)
{
	float		v = (rfloat(r) + 1.0f) * 1.5f + 0.01f;

	if (grid)
		v = (float) (1 + rbelow(r, 4)) * 0.25f;
	if (rchance(r, 0.05))
		v = -v;
	if (rchance(r, 0.005))
		v = 0.0f;
	return v;
}

/* distinct keys spread over all 64 bits (the murmur3 finalizer is a bijection) */
static uint64_t
sp_key(uint64_t i)
{
	uint64_t	k = i * UINT64_C(0x9E3779B97F4A7C15) + 12345;

	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	return k;
}

static void
sp_docs_room(sp_docs *d, uint32_t docs, uint64_t nnz)
{
	if (d->n + docs > d->cap)
	{
		d->cap = (d->n + docs) * 2;
		d->key = realloc(d->key, d->cap * sizeof(uint64_t));
		d->live = realloc(d->live, d->cap * sizeof(bool));
		d->off = realloc(d->off, (d->cap + 1) * sizeof(uint32_t));
	}
	if (d->off[d->n] + nnz > d->nnz_cap)
	{
		d->nnz_cap = (d->off[d->n] + nnz) * 2;
		d->terms = realloc(d->terms, d->nnz_cap * sizeof(uint32_t));
		d->w = realloc(d->w, d->nnz_cap * sizeof(float));
	}
}

/*
 * Append n documents (not yet inserted): non-zeros 0 (a document the
 * store never sees), 1, 2-3, or 5-120; one of 4,500 when `big`; 5% copies
 * of an earlier document (exact ties).  Returns the first one's index.
 */
static uint32_t
sp_docs_add(sp_docs *d, rng *r, uint32_t n, bool big, uint64_t key_base)
{
	uint32_t	first = d->n;
	uint32_t	i;

	for (i = 0; i < n; i++)
	{
		uint32_t	y = rbelow(r, 100);
		uint32_t	m = y < 2 ? 0 : y < 12 ? 1 : y < 15 ? 2 + rbelow(r, 2) : 5 + rbelow(r, 116);
		uint32_t	at;
		uint32_t	j;
		bool		grid = rchance(r, 0.2);

		if (big && i == n / 2)
			m = 4500;
		if (m > d->dim)
			m = d->dim;
		if (d->n > first && rchance(r, 0.05))
		{
			/* a copy of an earlier document of this batch */
			uint32_t	src = first + rbelow(r, d->n - first);

			m = d->off[src + 1] - d->off[src];
			sp_docs_room(d, 1, m);
			memcpy(d->terms + d->off[d->n], d->terms + d->off[src], m * sizeof(uint32_t));
			memcpy(d->w + d->off[d->n], d->w + d->off[src], m * sizeof(float));
		}
		else
		{
			sp_docs_room(d, 1, m);
			at = d->off[d->n];
			sp_draw_terms(d, r, m, d->terms + at);
			for (j = 0; j < m; j++)
				d->w[at + j] = sp_weight(r, grid);
		}
		d->key[d->n] = sp_key(key_base + d->n);
		d->live[d->n] = false;
		d->off[d->n + 1] = d->off[d->n] + m;
		d->n++;
	}
	return first;
}

/* insert documents [a, b) on both stores, in calls of about `batch` records */
/* both stores' list bounds equal the largest |weight| the test inserted */
static void
sp_compare_bounds(pair *p, sp_docs *d, const char *when)
{
	float	   *hb = malloc(d->dim * sizeof(float));
	float	   *cb = malloc(d->dim * sizeof(float));
	gi_status	sh = H->kinds[GI_KIND_SPARSE]->list_bounds(p->h, 0, d->dim, hb);
	gi_status	sc = C->kinds[GI_KIND_SPARSE]->list_bounds(p->c, 0, d->dim, cb);
	uint32_t	bad = 0;

	EXPECT(sh == GI_OK && sc == GI_OK, "%s: list bounds: host %d, cuda %d (%s)", when, sh, sc,
		   C->last_error());
	for (uint32_t t = 0; sh == GI_OK && sc == GI_OK && t < d->dim && bad < 5; t++)
		if (hb[t] != d->bound[t] || cb[t] != d->bound[t])
		{
			EXPECT(false, "%s: list %u bound: host %g, cuda %g, inserted %g", when, t,
				   hb[t], cb[t], d->bound[t]);
			bad++;
		}
	free(hb);
	free(cb);
}

static void
sp_insert(pair *p, sp_docs *d, uint32_t a, uint32_t b, uint32_t batch, const char *when)
{
	uint64_t	total = d->off[b] - d->off[a];
	uint32_t   *lists = malloc((total + 1) * sizeof(uint32_t));
	uint64_t   *keys = malloc((total + 1) * sizeof(uint64_t));
	uint64_t	n = 0;
	uint64_t	from = 0;
	uint32_t	i;
	uint32_t	j;
	gi_store_stats s0;
	gi_store_stats s1;

	H->store_stats(p->h, &s0);
	for (i = a; i < b; i++)
	{
		for (j = d->off[i]; j < d->off[i + 1]; j++)
		{
			lists[n] = d->terms[j];
			keys[n] = d->key[i];
			if (fabsf(d->w[j]) > d->bound[d->terms[j]])
				d->bound[d->terms[j]] = fabsf(d->w[j]);
			n++;
		}
		d->live[i] = d->off[i + 1] > d->off[i];
	}
	while (from < n)
	{
		uint64_t	m = n - from < batch ? n - from : batch;
		const float *w = d->w + d->off[a] + from;

		do_insert(p, (uint32_t) m, lists + from, keys + from, w, when);
		/* as the service does after each insert */
		H->kinds[GI_KIND_SPARSE]->inserted(p->h, (uint32_t) m, lists + from, w);
		C->kinds[GI_KIND_SPARSE]->inserted(p->c, (uint32_t) m, lists + from, w);
		from += m;
	}
	H->store_stats(p->h, &s1);
	EXPECT(s1.rows - s0.rows == n, "%s: %" PRIu64 " of %" PRIu64 " records inserted (%s)", when,
		   s1.rows - s0.rows, n, H->last_error());
	sp_compare_bounds(p, d, when);
	free(lists);
	free(keys);
}

static void
sp_delete(pair *p, sp_docs *d, const uint32_t *idx, uint32_t n, const char *when)
{
	uint64_t   *keys = malloc((n + 1) * sizeof(uint64_t));
	uint32_t	i;

	for (i = 0; i < n; i++)
	{
		keys[i] = d->key[idx[i]];
		d->live[idx[i]] = false;
	}
	do_delete(p, n, keys, when);
	free(keys);
}

/* ---- queries --------------------------------------------------------------------- */

typedef struct sp_queries
{
	uint32_t	nq;
	size_t		bytes;
	unsigned char *buf;
	size_t	   *at;				/* each query's offset */
} sp_queries;

/*
 * nq queries: 1-40 terms (Zipf), 4% empty, 3% with a term nothing was
 * inserted into (the last term), one of 300 terms.
 */
static void
sp_queries_make(sp_queries *qs, sp_docs *d, rng *r, uint32_t nq)
{
	uint32_t   *t = malloc((d->dim + 1) * sizeof(uint32_t));
	size_t		cap = 1024;
	uint32_t	q;

	qs->nq = nq;
	qs->bytes = 0;
	qs->buf = malloc(cap);
	qs->at = malloc((nq + 1) * sizeof(size_t));
	for (q = 0; q < nq; q++)
	{
		uint32_t	y = rbelow(r, 100);
		uint32_t	m = y < 4 ? 0 : 1 + rbelow(r, 40);
		size_t		need;
		uint32_t	j;
		float	   *w;
		bool		grid = rchance(r, 0.3);

		if (q == nq / 2 && nq > 2)
			m = 300;
		if (m > d->dim)
			m = d->dim;
		sp_draw_terms(d, r, m, t);
		if (m > 0 && y >= 97)
			t[m - 1] = d->dim - 1;	/* the rarest term: no postings */
		if (m > 1 && t[m - 1] <= t[m - 2])
			m--;
		need = gi_sparse_query_bytes(m);
		while (qs->bytes + need > cap)
			cap *= 2;
		qs->buf = realloc(qs->buf, cap);
		qs->at[q] = qs->bytes;
		memcpy(qs->buf + qs->bytes, &m, sizeof(uint32_t));
		memcpy(qs->buf + qs->bytes + 4, t, m * sizeof(uint32_t));
		w = (float *) (qs->buf + qs->bytes + 4 + 4 * (size_t) m);
		for (j = 0; j < m; j++)
			w[j] = sp_weight(r, grid);
		qs->bytes += need;
	}
	qs->at[nq] = qs->bytes;
	free(t);
}

static void
sp_queries_free(sp_queries *qs)
{
	free(qs->buf);
	free(qs->at);
	memset(qs, 0, sizeof(*qs));
}

/* the first n queries of qs as their own batch (they are packed at the front) */
static size_t
sp_prefix_bytes(const sp_queries *qs, uint32_t n)
{
	return qs->at[n];
}

/* ---- the kind in the harness -------------------------------------------------------- */

static bool
sp_open(pair *p, rng *r)
{
	gi_sparse_state st = {p->nlists, 0};
	gi_status	sh = H->kinds[GI_KIND_SPARSE]->set_state(p->h, &st, sizeof(st));
	gi_status	sc = C->kinds[GI_KIND_SPARSE]->set_state(p->c, &st, sizeof(st));

	(void) r;
	EXPECT(sh == GI_OK && sc == GI_OK, "set_state: host %d (%s), cuda %d (%s)", sh,
		   sh != GI_OK ? H->last_error() : "", sc, sc != GI_OK ? C->last_error() : "");
	return sh == GI_OK && sc == GI_OK;
}

static const test_kind sparse_kind = {"sparse", sp_open, NULL, NULL, NULL, NULL};

static bool
sp_pair(pair *p, uint32_t dim, uint32_t chunk_slabs, rng *r)
{
	pair_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.nlists = dim;
	cfg.words = 1;
	cfg.chunk_slabs = chunk_slabs;
	cfg.key_mode = GI_KEYS_PER_LIST;
	cfg.kind = &sparse_kind;
	if (C->kinds[GI_KIND_SPARSE] == NULL)
	{
		EXPECT(false, "the CUDA backend has no sparse kind");
		return false;
	}
	return pair_open(p, &cfg, r);
}

/* ---- comparison ------------------------------------------------------------------------ */

/* the host's answer to one batch, reused for every method */
typedef struct sp_ref
{
	gi_status	st;
	gi_hit	   *hits;
	uint32_t   *found;
} sp_ref;

static void
sp_ref_run(pair *p, const sp_queries *qs, uint32_t nq, uint32_t k, sp_ref *ref)
{
	gi_sparse_search_params par = {p->nlists, GI_SPARSE_AUTO};

	ref->hits = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	ref->found = malloc((nq + 1) * sizeof(uint32_t));
	ref->st = H->kinds[GI_KIND_SPARSE]->search(p->h, &par, nq, qs->buf, sp_prefix_bytes(qs, nq),
											   k, ref->hits, ref->found);
}

static void
sp_ref_free(sp_ref *ref)
{
	free(ref->hits);
	free(ref->found);
}

/*
 * Score query q from the test's own documents: the host's arithmetic
 * (double products summed in the query's term order, rounded to float)
 * and the number of live documents sharing a term with it.
 */
static void
sp_own_scores(const sp_docs *d, const sp_queries *qs, uint32_t q, float *dist,
			  bool *cand, uint32_t *ncand)
{
	const unsigned char *b = qs->buf + qs->at[q];
	uint32_t	m;
	const uint32_t *t;
	const float *w;
	uint32_t	i;

	memcpy(&m, b, 4);
	t = (const uint32_t *) (b + 4);
	w = (const float *) (t + m);
	*ncand = 0;
	for (i = 0; i < d->n; i++)
	{
		double		sum = 0.0;
		bool		hit = false;
		uint32_t	a = d->off[i];
		uint32_t	e = d->off[i + 1];
		uint32_t	j = 0;

		cand[i] = false;
		if (!d->live[i])
			continue;
		/* both term lists ascending: merge */
		while (j < m && a < e)
		{
			if (t[j] < d->terms[a])
				j++;
			else if (t[j] > d->terms[a])
				a++;
			else
			{
				sum += (double) w[j] * (double) d->w[a];
				hit = true;
				j++;
				a++;
			}
		}
		if (hit)
		{
			cand[i] = true;
			dist[i] = (float) -sum;
			(*ncand)++;
		}
	}
}

/* live documents by key: (key, index) sorted, for the look-ups below */
typedef struct sp_kidx
{
	uint64_t	key;
	uint32_t	i;
} sp_kidx;

static int
sp_kidx_cmp(const void *a, const void *b)
{
	uint64_t	x = ((const sp_kidx *) a)->key;
	uint64_t	y = ((const sp_kidx *) b)->key;

	return x < y ? -1 : x > y;
}

static sp_kidx *
sp_key_index(const sp_docs *d, uint32_t *n)
{
	sp_kidx    *v = malloc((d->n + 1) * sizeof(sp_kidx));
	uint32_t	i;

	*n = 0;
	for (i = 0; i < d->n; i++)
		if (d->live[i])
		{
			v[*n].key = d->key[i];
			v[*n].i = i;
			(*n)++;
		}
	qsort(v, *n, sizeof(sp_kidx), sp_kidx_cmp);
	return v;
}

static int64_t
sp_find_key(const sp_kidx *v, uint32_t n, uint64_t key)
{
	uint32_t	lo = 0;
	uint32_t	hi = n;

	while (lo < hi)
	{
		uint32_t	mid = (lo + hi) / 2;

		if (v[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].key == key ? (int64_t) v[lo].i : -1;
}

/*
 * The CUDA search of the batch under `method` against the host's answer:
 * same status, found, keys and distances (bits, except -0 == +0), padding.
 */
static void
sp_compare(pair *p, const sp_queries *qs, uint32_t nq, uint32_t k, uint32_t method,
		   const sp_ref *ref, const char *when)
{
	gi_sparse_search_params par = {p->nlists, method};
	gi_hit	   *hits = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	uint32_t   *found = malloc((nq + 1) * sizeof(uint32_t));
	gi_status	sc;
	uint32_t	q;
	uint32_t	i;
	int			bad = 0;

	for (i = 0; i < (size_t) nq * k; i++)
	{
		hits[i].key = 0xBAD;
		hits[i].distance = 12345.0f;
		hits[i].pad = 77;
	}
	sc = C->kinds[GI_KIND_SPARSE]->search(p->c, &par, nq, qs->buf, sp_prefix_bytes(qs, nq), k,
										  hits, found);
	sp_searches++;
	EXPECT(sc == ref->st, "%s: nq %u k %u method %u: status host %d, cuda %d (%s)", when, nq, k,
		   method, ref->st, sc, sc != GI_OK ? C->last_error() : "");
	if (sc != GI_OK || ref->st != GI_OK)
		goto out;
	if (!self_mode && cu_sparse_profile && method == GI_SPARSE_AUTO)
	{
		double		prof[GI_CUDA_SPARSE_PROFILE_N];

		if (cu_sparse_profile(p->c, -1, prof, GI_CUDA_SPARSE_PROFILE_N) == GI_OK)
		{
			if (prof[0] == GI_SPARSE_DOC)
				sp_auto_doc++;
			else if (prof[0] == GI_SPARSE_COUNT)
				sp_auto_count++;
			else
				sp_auto_term++;
			EXPECT((prof[0] == GI_SPARSE_COUNT) == sp_countable,
				   "%s: the chooser ran method %g on %s data", when, prof[0],
				   sp_countable ? "countable" : "weighted");
		}
	}
	else if (!self_mode && cu_sparse_profile)
	{
		double		prof[GI_CUDA_SPARSE_PROFILE_N];

		EXPECT(cu_sparse_profile(p->c, -1, prof, GI_CUDA_SPARSE_PROFILE_N) == GI_OK &&
			   (method == GI_SPARSE_COUNT ? (prof[0] == GI_SPARSE_COUNT) == sp_countable :
				prof[0] == method), "%s: method %u forced, %g ran", when, method, prof[0]);
	}
	for (q = 0; q < nq && bad < 5; q++)
	{
		const gi_hit *a = ref->hits + (size_t) q * k;
		const gi_hit *b = hits + (size_t) q * k;

		if (ref->found[q] != found[q])
		{
			EXPECT(false, "%s: nq %u k %u method %u query %u: found host %u, cuda %u", when, nq,
				   k, method, q, ref->found[q], found[q]);
			bad++;
			continue;
		}
		for (i = 0; i < k; i++)
		{
			if (a[i].key != b[i].key || a[i].distance != b[i].distance || b[i].pad != 0 ||
				signbit(a[i].distance) != signbit(b[i].distance))
			{
				EXPECT(false, "%s: nq %u k %u method %u query %u hit %u of %u: host (%" PRIu64
					   ", %.9g), cuda (%" PRIu64 ", %.9g)", when, nq, k, method, q, i,
					   found[q], a[i].key, a[i].distance, b[i].key, b[i].distance);
				bad++;
				break;
			}
			if (i >= found[q] && !(b[i].key == 0 && isinf(b[i].distance) && b[i].distance > 0))
			{
				EXPECT(false, "%s: query %u: padding %u is (%" PRIu64 ", %g)", when, q, i,
					   b[i].key, b[i].distance);
				bad++;
				break;
			}
		}
		sp_hits_compared += found[q];
	}
out:
	free(hits);
	free(found);
}

/*
 * The host's answer checked from the test's own documents for the first
 * few queries: every hit's distance, found = min(k, candidates), order.
 */
static void
sp_check_ref(const sp_docs *d, const sp_queries *qs, uint32_t nq, uint32_t k,
			 const sp_ref *ref, const char *when)
{
	float	   *dist = malloc((d->n + 1) * sizeof(float));
	bool	   *cand = malloc((d->n + 1) * sizeof(bool));
	uint32_t	nidx;
	sp_kidx    *idx = sp_key_index(d, &nidx);
	uint32_t	q;

	if (ref->st != GI_OK)
		goto out;
	for (q = 0; q < nq && q < 3; q++)
	{
		uint32_t	ncand;
		uint32_t	i;
		const gi_hit *h = ref->hits + (size_t) q * k;

		sp_own_scores(d, qs, q, dist, cand, &ncand);
		EXPECT(ref->found[q] == (ncand < k ? ncand : k), "%s: query %u: host found %u of %u candidates, k %u",
			   when, q, ref->found[q], ncand, k);
		for (i = 0; i < ref->found[q] && i < 200; i++)
		{
			int64_t		di = sp_find_key(idx, nidx, h[i].key);

			EXPECT(di >= 0 && cand[di] && dist[di] == h[i].distance,
				   "%s: query %u hit %u: key %" PRIu64 " distance %.9g, own score %.9g", when, q,
				   i, h[i].key, h[i].distance, di >= 0 ? dist[di] : NAN);
			if (i > 0)
				EXPECT(h[i - 1].distance < h[i].distance ||
					   (h[i - 1].distance == h[i].distance && h[i - 1].key < h[i].key),
					   "%s: query %u: hits %u and %u out of order", when, q, i - 1, i);
		}
	}
out:
	free(dist);
	free(cand);
	free(idx);
}

static const uint32_t sp_methods[] = {GI_SPARSE_AUTO, GI_SPARSE_TERM, GI_SPARSE_DOC, GI_SPARSE_COUNT};

/* one batch, every method, against one host answer */
static void
sp_compare_all(pair *p, const sp_docs *d, const sp_queries *qs, uint32_t nq, uint32_t k,
			   const char *when)
{
	sp_ref		ref;
	size_t		m;

	sp_ref_run(p, qs, nq, k, &ref);
	EXPECT(ref.st == GI_OK, "%s: host search: %s", when, H->last_error());
	if (d)
		sp_check_ref(d, qs, nq, k, &ref, when);
	for (m = 0; m < sizeof(sp_methods) / sizeof(sp_methods[0]); m++)
		sp_compare(p, qs, nq, k, sp_methods[m], &ref, when);
	sp_ref_free(&ref);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void
both_invalid(gi_status sh, gi_status sc, const char *what)
{
	EXPECT(sh == GI_ERR_INVALID && sc == GI_ERR_INVALID, "%s: host %d, cuda %d (%s)", what,
		   sh, sc, C->last_error());
}

/* a query buffer written by hand: nnz, terms, weights */
static size_t
sp_put(unsigned char *b, uint32_t nnz, const uint32_t *t, const float *w)
{
	memcpy(b, &nnz, 4);
	memcpy(b + 4, t, 4 * (size_t) nnz);
	memcpy(b + 4 + 4 * (size_t) nnz, w, 4 * (size_t) nnz);
	return gi_sparse_query_bytes(nnz);
}

/*
 * set_state must fit the store; searches: not before set_state, the
 * parameters' dimension, well-formed queries (terms ascending and below
 * the dimension, sizes adding up); nq 0, k 0, NULL pointers; empty
 * stores give padding only.
 */
static void
test_sparse_invalid(void)
{
	const gi_kind_ops *HK = H->kinds[GI_KIND_SPARSE];
	const gi_kind_ops *CK = C->kinds[GI_KIND_SPARSE];
	gi_store_params par;
	gi_store   *hs = NULL;
	gi_store   *cs = NULL;
	gi_sparse_state st = {10, 0};
	gi_sparse_search_params sp = {10, GI_SPARSE_AUTO};
	gi_hit		hit[4];
	uint32_t	found[2] = {7, 7};
	unsigned char b[256];
	uint32_t	t[4] = {1, 3, 9, 0};
	float		w[4] = {1.0f, 0.5f, -2.0f, 1.0f};
	size_t		n;
	pair		p;
	rng			r = {77};

	if (HK == NULL || CK == NULL)
	{
		EXPECT(false, "no sparse kind: host %p, cuda %p", (const void *) HK, (const void *) CK);
		return;
	}
	memset(&par, 0, sizeof(par));
	par.nlists = 10;
	par.record_bytes = 4;
	par.key_mode = GI_KEYS_PER_LIST;
	EXPECT(H->store_create(&par, &hs) == GI_OK && C->store_create(&par, &cs) == GI_OK,
		   "create: %s", C->last_error());
	if (hs == NULL || cs == NULL)
		goto out;
	n = sp_put(b, 3, t, w);
	both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, found),
				 CK->search(cs, &sp, 1, b, n, 1, hit, found), "search before set_state");
	EXPECT(strstr(C->last_error(), "set_state") != NULL, "message: %s", C->last_error());
	both_invalid(HK->set_state(hs, NULL, sizeof(st)), CK->set_state(cs, NULL, sizeof(st)),
				 "NULL state");
	both_invalid(HK->set_state(hs, &st, 4), CK->set_state(cs, &st, 4), "short state");
	st.dim = 9;
	both_invalid(HK->set_state(hs, &st, sizeof(st)), CK->set_state(cs, &st, sizeof(st)),
				 "state of another dimension");
	st.dim = 10;
	EXPECT(HK->set_state(hs, &st, sizeof(st)) == GI_OK && CK->set_state(cs, &st, sizeof(st)) == GI_OK,
		   "valid state: %s", C->last_error());

	sp.dim = 11;
	both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, found),
				 CK->search(cs, &sp, 1, b, n, 1, hit, found), "parameters of another dimension");
	sp.dim = 10;
	both_invalid(HK->search(hs, NULL, 1, b, n, 1, hit, found),
				 CK->search(cs, NULL, 1, b, n, 1, hit, found), "no parameters");
	both_invalid(HK->search(hs, &sp, 1, b, n - 4, 1, hit, found),
				 CK->search(cs, &sp, 1, b, n - 4, 1, hit, found), "bytes short of the query");
	both_invalid(HK->search(hs, &sp, 1, b, n + 4, 1, hit, found),
				 CK->search(cs, &sp, 1, b, n + 4, 1, hit, found), "bytes beyond the query");
	both_invalid(HK->search(hs, &sp, 2, b, n, 1, hit, found),
				 CK->search(cs, &sp, 2, b, n, 1, hit, found), "fewer queries than nq");
	both_invalid(HK->search(hs, &sp, 1, NULL, n, 1, hit, found),
				 CK->search(cs, &sp, 1, NULL, n, 1, hit, found), "NULL queries");
	both_invalid(HK->search(hs, &sp, 1, b, n, 1, NULL, found),
				 CK->search(cs, &sp, 1, b, n, 1, NULL, found), "NULL hits");
	both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, NULL),
				 CK->search(cs, &sp, 1, b, n, 1, hit, NULL), "NULL found");
	{
		uint32_t	desc[3] = {3, 1, 9};
		uint32_t	dup[3] = {1, 3, 3};
		uint32_t	big[3] = {1, 3, 10};
		uint32_t	huge = 11;

		n = sp_put(b, 3, desc, w);
		both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, found),
					 CK->search(cs, &sp, 1, b, n, 1, hit, found), "terms descending");
		n = sp_put(b, 3, dup, w);
		both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, found),
					 CK->search(cs, &sp, 1, b, n, 1, hit, found), "a term twice");
		n = sp_put(b, 3, big, w);
		both_invalid(HK->search(hs, &sp, 1, b, n, 1, hit, found),
					 CK->search(cs, &sp, 1, b, n, 1, hit, found), "a term beyond the dimension");
		memcpy(b, &huge, 4);
		both_invalid(HK->search(hs, &sp, 1, b, 4 + 8 * 11, 1, hit, found),
					 CK->search(cs, &sp, 1, b, 4 + 8 * 11, 1, hit, found), "more terms than dimensions");
		/* the second query bad, the first good */
		n = sp_put(b, 2, t, w);
		n += sp_put(b + n, 3, desc, w);
		both_invalid(HK->search(hs, &sp, 2, b, n, 1, hit, found),
					 CK->search(cs, &sp, 2, b, n, 1, hit, found), "second query out of order");
	}
	n = sp_put(b, 3, t, w);
	EXPECT(CK->search(cs, &sp, 0, b, 0, 1, hit, found) == GI_OK, "nq 0 refused: %s",
		   C->last_error());
	found[0] = 7;
	EXPECT(CK->search(cs, &sp, 1, b, n, 0, NULL, found) == GI_OK && found[0] == 0,
		   "k 0: status or found %u (%s)", found[0], C->last_error());
	found[0] = 7;
	EXPECT(CK->search(cs, &sp, 1, b, n, 4, hit, found) == GI_OK && found[0] == 0 &&
		   hit[3].key == 0 && isinf(hit[3].distance), "empty store: found %u", found[0]);
	sp.method = 99;
	EXPECT(CK->search(cs, &sp, 1, b, n, 4, hit, found) == GI_OK, "unknown method (the host ignores it): %s",
		   C->last_error());

	/* stores with a few records: a zero score, an empty query, the empty list */
	if (sp_pair(&p, 10, 0, &r))
	{
		uint32_t	lists[5] = {1, 3, 1, 9, 2};
		uint64_t	keys[5] = {5, 5, 6, 6, UINT64_MAX};
		float		pay[5] = {2.0f, 0.0f, -1.0f, 0.25f, 3.0f};
		sp_queries	qs;
		uint32_t	k;

		memset(&qs, 0, sizeof(qs));
		qs.buf = b;
		qs.at = malloc(4 * sizeof(size_t));
		qs.nq = 3;
		qs.at[0] = 0;
		qs.at[1] = sp_put(b, 3, t, w);
		qs.at[2] = qs.at[1] + sp_put(b + qs.at[1], 0, t, w);
		{
			uint32_t	t3 = 3;
			float		w3 = 4.0f;

			qs.at[3] = qs.at[2] + sp_put(b + qs.at[2], 1, &t3, &w3);
		}
		qs.bytes = qs.at[3];
		for (k = 1; k <= 3; k++)
			sp_compare_all(&p, NULL, &qs, 3, k, "empty store");
		do_insert(&p, 5, lists, keys, pay, "five records");
		/* as the service does after each insert: a weight 0 ends list 3's counting */
		H->kinds[GI_KIND_SPARSE]->inserted(p.h, 5, lists, pay);
		C->kinds[GI_KIND_SPARSE]->inserted(p.c, 5, lists, pay);
		for (k = 1; k <= 3; k++)
			sp_compare_all(&p, NULL, &qs, 3, k, "three documents");
		free(qs.at);
		pair_close(&p);
	}
out:
	if (hs)
		H->store_destroy(hs);
	if (cs)
		C->store_destroy(cs);
}

/*
 * A Zipf collection (0 to 120 non-zeros, one document of 4,500, copies),
 * batches of 1, 7 and 500 queries, k 1 to 5,000, every method.
 */
static void
test_sparse_random(void)
{
	pair		p;
	rng			r = {31};
	sp_docs		d;
	sp_queries	qs;
	uint32_t	dim = 6000;
	uint32_t	ndocs = (uint32_t) scaled(20000);
	static const uint32_t nqs[] = {1, 7, 500};
	static const uint32_t ks[] = {1, 10, 100, 1000, 5000};
	size_t		a;
	size_t		b;
	char		when[96];

	if (!sp_pair(&p, dim, 0, &r))
		return;
	sp_docs_init(&d, dim, 1.0);
	sp_docs_add(&d, &r, ndocs, true, 0);
	sp_insert(&p, &d, 0, d.n, 200000, "collection");
	compare_stats(&p, true, "collection");
	sp_queries_make(&qs, &d, &r, 500);
	for (a = 0; a < sizeof(nqs) / sizeof(nqs[0]) && checks_failed < 10; a++)
		for (b = 0; b < sizeof(ks) / sizeof(ks[0]) && checks_failed < 10; b++)
		{
			snprintf(when, sizeof(when), "collection of %u", ndocs);
			sp_compare_all(&p, &d, &qs, nqs[a], ks[b], when);
		}
	compare_contents(&p, "after the searches");
	sp_queries_free(&qs);
	sp_docs_free(&d);
	pair_close(&p);
}

/*
 * Exact ties: 4,000 documents that are copies of five, so every score is
 * shared by hundreds of keys and the k-th falls inside a tie: the select
 * must resolve it by key.
 */
static void
test_sparse_ties(void)
{
	pair		p;
	rng			r = {32};
	sp_docs		d;
	sp_queries	qs;
	uint32_t	dim = 64;
	uint32_t	n = (uint32_t) scaled(4000);
	static const uint32_t ks[] = {1, 3, 100, 999, 1000, 1001, 4096, 5000};
	uint32_t	i;
	size_t		b;

	if (!sp_pair(&p, dim, 0, &r))
		return;
	sp_docs_init(&d, dim, 0.5);
	sp_docs_add(&d, &r, 5, false, 1000);
	for (i = 5; i < n; i++)
	{
		uint32_t	src = i % 5;
		uint32_t	m = d.off[src + 1] - d.off[src];

		sp_docs_room(&d, 1, m);
		memcpy(d.terms + d.off[d.n], d.terms + d.off[src], m * sizeof(uint32_t));
		memcpy(d.w + d.off[d.n], d.w + d.off[src], m * sizeof(float));
		d.key[d.n] = sp_key(1000 + d.n);
		d.live[d.n] = false;
		d.off[d.n + 1] = d.off[d.n] + m;
		d.n++;
	}
	sp_insert(&p, &d, 0, d.n, 50000, "tied collection");
	sp_queries_make(&qs, &d, &r, 20);
	for (b = 0; b < sizeof(ks) / sizeof(ks[0]) && checks_failed < 10; b++)
		sp_compare_all(&p, &d, &qs, 20, ks[b], "ties");
	sp_queries_free(&qs);
	sp_docs_free(&d);
	pair_close(&p);
}

/*
 * Mutations: delete a third of the documents (every record of each),
 * search; re-insert some deleted keys with new terms, search; then slide
 * a window (insert the newest batch, delete the oldest) with searches
 * and full store comparisons (key ordinals included) along the way.
 */
static void
test_sparse_mutations(void)
{
	pair		p;
	rng			r = {33};
	sp_docs		d;
	sp_queries	qs;
	uint32_t	dim = 3000;
	uint32_t	n0 = (uint32_t) scaled(6000);
	uint32_t	step = (uint32_t) scaled(800);
	uint32_t   *idx = calloc(n0 + step + 1, sizeof(uint32_t));
	uint32_t	ndel = 0;
	uint32_t	i;
	uint32_t	oldest;
	int			s;

	if (!sp_pair(&p, dim, 2, &r))
		goto out;
	sp_docs_init(&d, dim, 1.1);
	sp_docs_add(&d, &r, n0, true, 0);
	sp_insert(&p, &d, 0, d.n, 7000, "initial");
	sp_queries_make(&qs, &d, &r, 100);
	sp_compare_all(&p, &d, &qs, 100, 50, "initial");

	for (i = 0; i < n0; i++)
		if (rchance(&r, 0.33))
			idx[ndel++] = i;
	sp_delete(&p, &d, idx, ndel, "delete a third");
	compare_stats(&p, true, "delete a third");
	compare_contents(&p, "delete a third");
	sp_compare_all(&p, &d, &qs, 100, 50, "after deletes");
	sp_compare_all(&p, &d, &qs, 7, 3000, "after deletes, large k");

	/* the same keys again, other documents: ordinals reused */
	{
		uint32_t	first = sp_docs_add(&d, &r, ndel / 2, false, 0);

		for (i = 0; i < ndel / 2; i++)
			d.key[first + i] = d.key[idx[i]];
		sp_insert(&p, &d, first, d.n, 3000, "re-insert deleted keys");
		compare_stats(&p, true, "re-insert");
		compare_contents(&p, "re-insert");
		sp_compare_all(&p, &d, &qs, 100, 50, "after re-inserts");
	}

	/* a sliding window over everything inserted so far, then new documents */
	oldest = 0;
	for (s = 0; s < 6 && checks_failed < 10; s++)
	{
		uint32_t	first = sp_docs_add(&d, &r, step, false, 1000000);
		uint32_t	nd = 0;
		char		when[64];

		sp_insert(&p, &d, first, d.n, 5000, "window insert");
		for (; oldest < first && nd < step; oldest++)
			if (d.live[oldest])
				idx[nd++] = oldest;
		sp_delete(&p, &d, idx, nd, "window delete");
		snprintf(when, sizeof(when), "window step %d", s);
		compare_stats(&p, true, when);
		if (s % 2 == 1)
			compare_contents(&p, when);
		sp_compare_all(&p, &d, &qs, s % 2 ? 100 : 7, s % 3 == 2 ? 1000 : 20, when);
	}
	compare_contents(&p, "window end");
	sp_queries_free(&qs);
	sp_docs_free(&d);
	pair_close(&p);
out:
	free(idx);
}

/*
 * Small scratch budgets: a search runs in sub-batches of queries, the
 * ordinals in several ranges whose winners are selected again, the
 * document path's forward index in sub-ranges.
 */
static void
test_sparse_budget(void)
{
	pair		p;
	rng			r = {34};
	sp_docs		d;
	sp_queries	qs;
	uint32_t	dim = 2000;
	static const size_t budgets[] = {4 << 20, 600 << 10, 160 << 10};
	size_t		a;

	if (self_mode || cu_sparse_budget == NULL)
	{
		printf("  (no budget hook: the default budget only)\n");
	}
	if (!sp_pair(&p, dim, 0, &r))
		return;
	sp_docs_init(&d, dim, 1.0);
	sp_docs_add(&d, &r, (uint32_t) scaled(8000), true, 0);
	sp_insert(&p, &d, 0, d.n, 100000, "collection");
	sp_queries_make(&qs, &d, &r, 40);
	for (a = 0; a < sizeof(budgets) / sizeof(budgets[0]) && checks_failed < 10; a++)
	{
		char		when[64];

		if (!self_mode && cu_sparse_budget)
			cu_sparse_budget(budgets[a]);
		snprintf(when, sizeof(when), "budget %zu KB", budgets[a] >> 10);
		sp_compare_all(&p, &d, &qs, 40, 10, when);
		sp_compare_all(&p, &d, &qs, 9, 1000, when);
		if (!self_mode && cu_sparse_profile)
		{
			double		prof[GI_CUDA_SPARSE_PROFILE_N];

			if (cu_sparse_profile(p.c, -1, prof, GI_CUDA_SPARSE_PROFILE_N) == GI_OK)
				printf("  %s: last search in %g sub-batches, %g ordinal ranges\n", when,
					   prof[1], prof[2]);
		}
	}
	if (!self_mode && cu_sparse_budget)
		cu_sparse_budget(0);
	sp_queries_free(&qs);
	sp_docs_free(&d);
	pair_close(&p);
}

/*
 * The term path's other way of working (units by term and query block,
 * chunks in slab order through a work counter), which only collections
 * larger than the tests' would take by default: forced on for the
 * collection, ties, mutations (reused slabs and ordinals scramble the
 * order) and budget tests, then forced off for the same, then back to
 * the default.
 */
static void
test_sparse_slab_order(void)
{
	static const int modes[] = {1, 0};

	if (self_mode || cu_sparse_slab_order == NULL)
	{
		printf("  (no slab-order hook: the default only)\n");
		return;
	}
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]) && checks_failed < 10; m++)
	{
		printf("  term path %s\n", modes[m] ? "by term and query block, slab order"
			   : "by (query, term), query order");
		cu_sparse_slab_order(modes[m]);
		test_sparse_random();
		test_sparse_ties();
		test_sparse_mutations();
		test_sparse_budget();
	}
	cu_sparse_slab_order(-1);
}

/*
 * Key ordinals after random mutations: posting-list rows inserted and
 * deleted at random (many deletes, keys coming back), the store's check
 * hook verifying the ordinals every 10 operations.
 */
static void
test_sparse_ordinals(void)
{
	diff_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.store.nlists = 300;
	cfg.store.words = 1;
	cfg.store.chunk_slabs = 4;
	cfg.store.key_mode = GI_KEYS_PER_LIST;
	cfg.keyspace = 500;
	cfg.ops = scaled(300);
	cfg.seed = 35;
	cfg.insert_chunk = 17;
	cfg.per_row = 30;
	random_differential(&cfg);
}

/* every weight of documents [a, b) to 1 */
static void
sp_unit_weights(sp_docs *d, uint32_t a, uint32_t b)
{
	for (uint32_t j = d->off[a]; j < d->off[b]; j++)
		d->w[j] = 1.0f;
}

/* every query weight to a whole number from 1 to most */
static void
sp_count_weights(sp_queries *qs, rng *r, uint32_t most)
{
	for (uint32_t q = 0; q < qs->nq; q++)
	{
		uint32_t	m;
		float	   *w;

		memcpy(&m, qs->buf + qs->at[q], sizeof(uint32_t));
		w = (float *) (qs->buf + qs->at[q] + 4 + 4 * (size_t) m);
		for (uint32_t j = 0; j < m; j++)
			w[j] = (float) (1 + rbelow(r, most));
	}
}

/*
 * The counting path: documents whose weights are all 1 and queries of
 * whole weights (counts up to 120, 8-bit counters; then up to 900, 16-bit
 * ones; a query of 300 terms), each method against the host, AUTO
 * counting; after deletes; a batch with one fractional weight is not
 * counted; 70,000 documents tied on one term overflow the candidates'
 * room and go by the term path, with the same answer.
 */
static void
test_sparse_counts(void)
{
	pair		p;
	rng			r = {33};
	sp_docs		d;
	sp_queries	qs;
	uint32_t	dim = 3000;
	uint32_t	ndocs = (uint32_t) scaled(30000);
	static const uint32_t ks[] = {1, 10, 100, 1000};
	uint32_t   *dead;
	uint32_t	nd = 0;
	size_t		b;

	if (!sp_pair(&p, dim, 0, &r))
		return;
	sp_docs_init(&d, dim, 1.0);
	sp_docs_add(&d, &r, ndocs, false, 0);
	sp_unit_weights(&d, 0, d.n);
	sp_insert(&p, &d, 0, d.n, 100000, "unit-weight collection");
	sp_queries_make(&qs, &d, &r, 200);
	/* the first 99 queries have at most 40 terms, query 100 has 300 */
	sp_countable = true;
	sp_count_weights(&qs, &r, 3);
	for (b = 0; b < sizeof(ks) / sizeof(ks[0]) && checks_failed < 10; b++)
	{
		sp_compare_all(&p, &d, &qs, 99, ks[b], "counts up to 120, 8-bit");
		sp_compare_all(&p, &d, &qs, 200, ks[b], "counts up to 900, 16-bit");
	}
	sp_count_weights(&qs, &r, 30);
	sp_compare_all(&p, &d, &qs, 99, 10, "counts up to 1,200, 16-bit");
	sp_countable = false;
	sp_compare_all(&p, &d, &qs, 200, 10, "a query whose counts pass 4,095");
	sp_count_weights(&qs, &r, 3);
	sp_countable = true;

	dead = malloc(d.n * sizeof(uint32_t));
	for (uint32_t i = 0; i < d.n; i += 3)
		dead[nd++] = i;
	sp_delete(&p, &d, dead, nd, "a third deleted");
	sp_compare_all(&p, &d, &qs, 200, 10, "counts after deletes");
	free(dead);

	/* one fractional weight: the batch is scored, not counted */
	{
		uint32_t	m;

		memcpy(&m, qs.buf + qs.at[5], sizeof(uint32_t));
		if (m > 0)
		{
			((float *) (qs.buf + qs.at[5] + 4 + 4 * (size_t) m))[0] = 1.5f;
			sp_countable = false;
			sp_compare_all(&p, &d, &qs, 200, 10, "one fractional query weight");
		}
	}
	sp_queries_free(&qs);

	/* ties beyond the candidates' room: every new document holds term 0 */
	{
		uint32_t	a = d.n;
		uint32_t	n = (uint32_t) scaled(70000);
		unsigned char qb[64];
		uint32_t	t0 = 0;
		float		w1 = 1.0f;
		sp_queries	one;

		for (uint32_t i = 0; i < n; i++)
		{
			sp_docs_room(&d, 1, 1);
			d.terms[d.off[d.n]] = 0;
			d.w[d.off[d.n]] = 1.0f;
			d.key[d.n] = sp_key(500000 + d.n);
			d.live[d.n] = false;
			d.off[d.n + 1] = d.off[d.n] + 1;
			d.n++;
		}
		sp_insert(&p, &d, a, d.n, 100000, "tied on term 0");
		memset(&one, 0, sizeof(one));
		one.nq = 1;
		one.bytes = sp_put(qb, 1, &t0, &w1);
		one.buf = qb;
		one.at = malloc(2 * sizeof(size_t));
		one.at[0] = 0;
		one.at[1] = one.bytes;
		sp_countable = true;
		sp_compare_all(&p, &d, &one, 1, 10, "70,000 tied documents");
		if (!self_mode && cu_sparse_profile && n > GI_SP_COUNT_TEST_CAND)
		{
			double		prof[GI_CUDA_SPARSE_PROFILE_N];

			EXPECT(cu_sparse_profile(p.c, -1, prof, GI_CUDA_SPARSE_PROFILE_N) == GI_OK &&
				   prof[9] == 1, "tied documents: %g queries went by the term path, not 1",
				   prof[9]);
		}
		free(one.at);
	}
	sp_countable = false;
	sp_docs_free(&d);
	pair_close(&p);
}

/*
 * The counting path in tiles of shared memory (a block per query and band
 * of ordinals) and by the plain scatter, each forced, on the counting
 * test's collections (deletes widen the slabs, so bands straddle them):
 * bands of 1,024 ordinals (tens of them), of 96 (a slab spans several),
 * and the default width (one band for these collections).
 */
static void
test_sparse_count_tiles(void)
{
	static const struct
	{
		int			mode;
		uint32_t	band;
		const char *what;
	}			runs[] = {
		{1, 1024, "tiles of 1,024 ordinals"},
		{1, 96, "tiles of 96 ordinals"},
		{1, 0, "tiles of the default width"},
		{0, 0, "the plain scatter"},
	};

	if (self_mode || cu_sparse_count_tiles == NULL)
	{
		printf("  (no count-tiles hook: the default only)\n");
		return;
	}
	for (size_t m = 0; m < sizeof(runs) / sizeof(runs[0]) && checks_failed < 10; m++)
	{
		printf("  counting path: %s\n", runs[m].what);
		cu_sparse_count_tiles(runs[m].mode, runs[m].band);
		test_sparse_counts();
	}
	cu_sparse_count_tiles(-1, 0);
}

static void
sparse_summary(void)
{
	if (sp_searches > 0)
		printf("sparse: %" PRIu64 " searches, %" PRIu64 " hits compared, chooser picked the document path %"
			   PRIu64 " times, the term path %" PRIu64 " times and the counting path %" PRIu64
			   " times\n", sp_searches, sp_hits_compared, sp_auto_doc, sp_auto_term,
			   sp_auto_count);
}

static const test_case sparse_tests[] = {
	{"sparse: invalid arguments and empty stores", test_sparse_invalid, false},
	{"sparse: Zipf collection, nq 1/7/500, k 1..5000, each method", test_sparse_random, false},
	{"sparse: exact ties (identical documents)", test_sparse_ties, false},
	{"sparse: deletes, re-inserts, sliding window", test_sparse_mutations, false},
	{"sparse: small scratch budgets (sub-batches, ordinal ranges)", test_sparse_budget, false},
	{"sparse: key ordinals after random mutations", test_sparse_ordinals, false},
	{"sparse: each way of the term path forced", test_sparse_slab_order, false},
	{"sparse: counting path (unit weights, whole query weights), ties beyond its room", test_sparse_counts, false},
	{"sparse: counting path in shared-memory tiles and by the scatter, each forced", test_sparse_count_tiles, false},
};

const test_suite sparse_suite = {sparse_tests, sizeof(sparse_tests) / sizeof(sparse_tests[0]),
	sparse_summary};
