/*
 * test_spread.c
 *		One store spread over several device objects, as the device service
 *		spreads it with gpuindex.devices: the same records in one store and,
 *		routed as the service routes them (the IVF kinds by list, the sparse
 *		kind by key, gi_spread.h), in shards on device objects opened over
 *		the visible GPUs in turn (so that one GPU holds several); every
 *		search of the shards, merged with gi_hits_merge, must be the one
 *		store's search.
 *
 * IVF: compared as the IVF tests compare host and device (distances within
 * 1e-4 relative, the same keys up to ties at the boundary), the one CUDA
 * store standing in for the host.  Sparse: exactly (scores are exact on
 * both, gi_kind_sparse.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gi_kind_sparse.h"
#include "gi_spread.h"
#include "harness.h"

#define MAX_SHARDS	4

typedef struct shards
{
	uint32_t	n;
	gi_kind		kind;
	bool		by_key;			/* else by list */
	uint32_t	record_bytes;
	gi_device  *dev[MAX_SHARDS];
	gi_store   *s[MAX_SHARDS];
	uint32_t   *owner;			/* by list: each list's shard */
	uint64_t	records[MAX_SHARDS];
} shards;

static void
shards_close(shards *sh)
{
	for (uint32_t j = 0; j < sh->n; j++)
	{
		if (sh->s[j])
			C->store_destroy(sh->s[j]);
		if (sh->dev[j])
			C->device_close(sh->dev[j]);
	}
	free(sh->owner);
	memset(sh, 0, sizeof(*sh));
}

/* n shards of params on device objects 0, 1, ... of the visible devices in turn */
static bool
shards_open(shards *sh, uint32_t n, gi_kind kind, const gi_store_params *params,
			const void *state, size_t bytes, bool by_key)
{
	int			count = C->device_count();

	memset(sh, 0, sizeof(*sh));
	sh->n = n;
	sh->kind = kind;
	sh->by_key = by_key;
	sh->record_bytes = params->record_bytes;
	sh->owner = malloc(sizeof(uint32_t) * params->nlists);
	memset(sh->owner, 0xFF, sizeof(uint32_t) * params->nlists);
	for (uint32_t j = 0; j < n; j++)
	{
		gi_store_params p = *params;
		gi_status	st = C->device_open((int) (j % count), &sh->dev[j]);

		EXPECT(st == GI_OK, "device_open(%d) for shard %u: %s", (int) (j % count), j,
			   C->last_error());
		if (st != GI_OK)
			return false;
		p.device = sh->dev[j];
		st = C->store_create(&p, &sh->s[j]);
		if (st == GI_OK && C->kinds[kind]->set_state)
			st = C->kinds[kind]->set_state(sh->s[j], state, bytes);
		EXPECT(st == GI_OK, "shard %u: %s", j, C->last_error());
		if (st != GI_OK)
			return false;
	}
	return true;
}

/* each shard's records, in their order, and the kind told of them */
static void
shards_insert(shards *sh, uint32_t n, const uint32_t *lists, const uint64_t *keys,
			  const char *payloads, const char *when)
{
	uint32_t	rb = sh->record_bytes;
	uint32_t   *to = malloc(sizeof(uint32_t) * (n + 1));
	uint32_t   *sl = malloc(sizeof(uint32_t) * (n + 1));
	uint64_t   *sk = malloc(sizeof(uint64_t) * (n + 1));
	char	   *sp = malloc((size_t) n * rb + 1);

	for (uint32_t i = 0; i < n; i++)
		to[i] = sh->by_key ? gi_key_shard(keys[i], sh->n) :
			gi_list_shard(sh->owner, sh->records, sh->n, lists[i]);
	for (uint32_t j = 0; j < sh->n; j++)
	{
		uint32_t	m = 0;
		gi_status	st;

		for (uint32_t i = 0; i < n; i++)
			if (to[i] == j)
			{
				sl[m] = lists[i];
				sk[m] = keys[i];
				memcpy(sp + (size_t) m * rb, payloads + (size_t) i * rb, rb);
				m++;
			}
		if (m == 0)
			continue;
		st = C->store_insert(sh->s[j], m, sl, sk, sp, NULL);
		EXPECT(st == GI_OK, "%s: insert into shard %u: %s", when, j, C->last_error());
		if (C->kinds[sh->kind]->inserted)
			C->kinds[sh->kind]->inserted(sh->s[j], m, sl, sp);
	}
	free(to);
	free(sl);
	free(sk);
	free(sp);
}

/* by key: to the key's shard; by list: to every shard */
static void
shards_delete(shards *sh, uint32_t n, const uint64_t *keys, const char *when)
{
	uint64_t   *mine = malloc(sizeof(uint64_t) * (n + 1));

	for (uint32_t j = 0; j < sh->n; j++)
	{
		uint32_t	m = 0;
		gi_status	st;

		for (uint32_t i = 0; i < n; i++)
			if (!sh->by_key || gi_key_shard(keys[i], sh->n) == j)
				mine[m++] = keys[i];
		st = C->store_delete(sh->s[j], m, mine, NULL);
		EXPECT(st == GI_OK, "%s: delete from shard %u: %s", when, j, C->last_error());
	}
	free(mine);
}

/* the kind's search on every shard, merged */
static gi_status
shards_search(shards *sh, const void *params, uint32_t nq, const void *queries,
			  size_t query_bytes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	const gi_kind_ops *kops = C->kinds[sh->kind];
	gi_hit	   *more = malloc(sizeof(gi_hit) * ((size_t) nq * k + 1));
	uint32_t   *more_found = malloc(sizeof(uint32_t) * (nq + 1));
	gi_hit	   *tmp = malloc(sizeof(gi_hit) * (k + 1));
	gi_status	st = kops->search(sh->s[0], params, nq, queries, query_bytes, k, hits, found);

	for (uint32_t j = 1; j < sh->n && st == GI_OK; j++)
	{
		st = kops->search(sh->s[j], params, nq, queries, query_bytes, k, more, more_found);
		if (st == GI_OK)
			gi_hits_merge(hits, found, more, more_found, nq, k, tmp);
	}
	gi_hits_pad(hits, found, nq, k);
	free(more);
	free(more_found);
	free(tmp);
	return st;
}

/* every live record on exactly one shard */
static void
shards_compare_rows(shards *sh, gi_store *one, const char *when)
{
	gi_store_stats a,
				b;
	uint64_t	rows = 0;

	EXPECT(C->store_stats(one, &a) == GI_OK, "%s: stats", when);
	for (uint32_t j = 0; j < sh->n; j++)
	{
		EXPECT(C->store_stats(sh->s[j], &b) == GI_OK, "%s: stats of shard %u", when, j);
		EXPECT(b.rows > 0, "%s: shard %u holds no record", when, j);
		rows += b.rows;
	}
	EXPECT(rows == a.rows, "%s: %llu rows in the shards, %llu in one store", when,
		   (unsigned long long) rows, (unsigned long long) a.rows);
}

/* ---- IVF --------------------------------------------------------------------- */

/* compare_hits' check of a hit: here, that its key is live (the host copy) */
static bool
key_live(pair *p, gi_metric m, const float *q, uint64_t key, float d)
{
	(void) m;
	(void) q;
	(void) d;
	return gi_host_store_lookup(p->h, key, NULL, NULL, 0) > 0;
}

static void
ivf_metric(pair *p, shards *sh, gi_metric m)
{
	gi_ivf_state *st = p->kstate;

	st->metric = m;
	ivf_resend(p);
	for (uint32_t j = 0; j < sh->n; j++)
		EXPECT(C->kinds[GI_KIND_IVF]->set_state(sh->s[j], st,
												gi_ivf_state_size(st->nlists, st->dim)) == GI_OK,
			   "set_state of shard %u: %s", j, C->last_error());
}

static void
ivf_spread_searches(pair *p, shards *sh, rng *r, const char *when)
{
	const uint32_t nq = 48;
	uint32_t	probes[] = {1, 5, p->nlists};
	uint32_t	ks[] = {10, 400};
	float	   *qs = ivf_random_queries(p, r, nq);
	gi_hit	   *ha = malloc(sizeof(gi_hit) * nq * 400);
	gi_hit	   *hb = malloc(sizeof(gi_hit) * nq * 400);
	uint32_t	fa[48],
				fb[48];
	char		what[160];

	for (int m = 0; m < 3; m++)
	{
		ivf_metric(p, sh, (gi_metric) m);
		for (int pi = 0; pi < 3; pi++)
			for (int ki = 0; ki < 2; ki++)
			{
				gi_ivf_search_params sp = {p->words, probes[pi]};
				size_t		qb = (size_t) nq * p->words * sizeof(float);
				gi_status	sa = C->kinds[GI_KIND_IVF]->search(p->c, &sp, nq, qs, qb, ks[ki],
															   ha, fa);
				gi_status	sb = shards_search(sh, &sp, nq, qs, qb, ks[ki], hb, fb);
				int			before = checks_failed;

				EXPECT(sa == GI_OK && sb == GI_OK, "%s: search: one %d, shards %d (%s)", when,
					   sa, sb, C->last_error());
				if (sa != GI_OK || sb != GI_OK)
					continue;
				for (uint32_t q = 0; q < nq && checks_failed - before < 3; q++)
				{
					snprintf(what, sizeof(what),
							 "%s, %u shards: one store vs shards, metric %d probes %u k %u query %u",
							 when, sh->n, m, probes[pi], ks[ki], q);
					compare_hits(p, (gi_metric) m, qs + (size_t) q * p->words, ks[ki],
								 ha + (size_t) q * ks[ki], fa[q], hb + (size_t) q * ks[ki], fb[q],
								 key_live, what);
				}
			}
	}
	free(qs);
	free(ha);
	free(hb);
}

static void
test_spread_ivf(void)
{
	rng			r = {808};

	for (uint32_t n = 2; n <= 3; n++)
	{
		pair		p;
		shards		sh;
		uint32_t	dim = 16;
		uint32_t	nrec = (uint32_t) scaled(6000);
		uint32_t   *lists = malloc(sizeof(uint32_t) * nrec);
		uint64_t   *keys = malloc(sizeof(uint64_t) * nrec);
		float	   *pay = malloc(sizeof(float) * nrec * dim);
		gi_store_params sp;

		if (!ivf_pair(&p, 24, dim, 0, &r))
			return;
		memset(&sp, 0, sizeof(sp));
		sp.nlists = p.nlists;
		sp.record_bytes = dim * sizeof(float);
		sp.key_mode = GI_KEYS_UNIQUE;
		if (!shards_open(&sh, n, GI_KIND_IVF, &sp, p.kstate,
						 gi_ivf_state_size(p.nlists, dim), false))
		{
			shards_close(&sh);
			pair_close(&p);
			return;
		}
		for (uint32_t i = 0; i < nrec; i++)
		{
			random_vector(&r, pay + (size_t) i * dim, dim, false);
			lists[i] = ivf_nearest_list(&p, pay + (size_t) i * dim);
			keys[i] = ((uint64_t) (i / 60) << 16) | (i % 60 + 1);
		}
		/* in chunks, as loads and inserts come */
		for (uint32_t at = 0; at < nrec; at += 1000)
		{
			uint32_t	m = nrec - at < 1000 ? nrec - at : 1000;

			do_insert(&p, m, lists + at, keys + at, pay + (size_t) at * dim, "insert");
			shards_insert(&sh, m, lists + at, keys + at, (const char *) (pay + (size_t) at * dim),
						  "insert");
		}
		shards_compare_rows(&sh, p.c, "ivf loaded");
		ivf_spread_searches(&p, &sh, &r, "ivf loaded");
		for (uint32_t i = 0; i < nrec / 3; i++)
			keys[i] = keys[rbelow(&r, nrec)];
		do_delete(&p, nrec / 3, keys, "delete");
		shards_delete(&sh, nrec / 3, keys, "delete");
		shards_compare_rows(&sh, p.c, "ivf after deletes");
		ivf_spread_searches(&p, &sh, &r, "ivf after deletes");
		shards_close(&sh);
		pair_close(&p);
		free(lists);
		free(keys);
		free(pay);
	}
}

/* ---- sparse ------------------------------------------------------------------ */

#define SP_DIM		300

/* docs [a, b) of the collection: records, and each doc's first record */
typedef struct sp_coll
{
	uint32_t	ndocs;
	uint32_t	n;
	uint32_t   *first;
	uint32_t   *lists;
	uint64_t   *keys;
	float	   *w;
} sp_coll;

static void
sp_coll_make(sp_coll *c, rng *r, uint32_t ndocs, bool unit)
{
	c->ndocs = ndocs;
	c->first = malloc(sizeof(uint32_t) * (ndocs + 1));
	c->lists = malloc(sizeof(uint32_t) * ndocs * 16);
	c->keys = malloc(sizeof(uint64_t) * ndocs * 16);
	c->w = malloc(sizeof(float) * ndocs * 16);
	c->n = 0;
	for (uint32_t d = 0; d < ndocs; d++)
	{
		uint32_t	t = rbelow(r, 40);

		c->first[d] = c->n;
		for (uint32_t j = 0, nnz = 1 + rbelow(r, 16); j < nnz && t < SP_DIM; j++)
		{
			c->lists[c->n] = t;
			c->keys[c->n] = ((uint64_t) (d / 50) << 16) | (d % 50 + 1);
			c->w[c->n] = unit ? 1.0f : (float) (1 + rbelow(r, 6)) * 0.5f;
			c->n++;
			t += 1 + rbelow(r, 1 + t / 2);
		}
	}
	c->first[ndocs] = c->n;
}

static void
sp_coll_free(sp_coll *c)
{
	free(c->first);
	free(c->lists);
	free(c->keys);
	free(c->w);
}

/* nq queries of 1..8 terms (whole weights with unit), packed */
static size_t
sp_queries(rng *r, uint32_t nq, bool unit, unsigned char *out)
{
	size_t		at = 0;

	for (uint32_t q = 0; q < nq; q++)
	{
		uint32_t	terms[8];
		float		w[8];
		uint32_t	m = 0;

		for (uint32_t t = rbelow(r, 30), nnz = 1 + rbelow(r, 8); m < nnz && t < SP_DIM;
			 t += 1 + rbelow(r, 1 + t))
		{
			terms[m] = t;
			w[m] = unit ? (float) (1 + rbelow(r, 2)) : (float) (1 + rbelow(r, 4)) * 0.25f;
			m++;
		}
		memcpy(out + at, &m, 4);
		memcpy(out + at + 4, terms, 4 * m);
		memcpy(out + at + 4 + 4 * m, w, 4 * m);
		at += gi_sparse_query_bytes(m);
	}
	return at;
}

static void
sp_one_insert(gi_store *one, const sp_coll *c, uint32_t a, uint32_t b)
{
	uint32_t	n = c->first[b] - c->first[a];

	EXPECT(C->store_insert(one, n, c->lists + c->first[a], c->keys + c->first[a],
						   c->w + c->first[a], NULL) == GI_OK, "insert: %s", C->last_error());
	if (C->kinds[GI_KIND_SPARSE]->inserted)
		C->kinds[GI_KIND_SPARSE]->inserted(one, n, c->lists + c->first[a], c->w + c->first[a]);
}

static void
sp_spread_searches(gi_store *one, shards *sh, const unsigned char *qs, size_t qbytes,
				   uint32_t nq, bool unit, const char *when)
{
	uint32_t	methods[] = {GI_SPARSE_AUTO, GI_SPARSE_TERM, GI_SPARSE_DOC, GI_SPARSE_COUNT};
	uint32_t	ks[] = {1, 10, 1000};
	gi_hit	   *ha = malloc(sizeof(gi_hit) * nq * 1000);
	gi_hit	   *hb = malloc(sizeof(gi_hit) * nq * 1000);
	uint32_t   *fa = malloc(sizeof(uint32_t) * nq);
	uint32_t   *fb = malloc(sizeof(uint32_t) * nq);

	for (int mi = 0; mi < (unit ? 4 : 3); mi++)
		for (int ki = 0; ki < 3; ki++)
		{
			gi_sparse_search_params p = {SP_DIM, methods[mi]};
			uint32_t	k = ks[ki];
			gi_status	sa = C->kinds[GI_KIND_SPARSE]->search(one, &p, nq, qs, qbytes, k, ha, fa);
			gi_status	sb = shards_search(sh, &p, nq, qs, qbytes, k, hb, fb);
			int			before = checks_failed;

			EXPECT(sa == GI_OK && sb == GI_OK, "%s: search: one %d, shards %d (%s)", when, sa,
				   sb, C->last_error());
			if (sa != GI_OK || sb != GI_OK)
				continue;
			for (uint32_t q = 0; q < nq && checks_failed - before < 3; q++)
			{
				EXPECT(fa[q] == fb[q], "%s, %u shards, method %u k %u query %u: found %u, shards %u",
					   when, sh->n, methods[mi], k, q, fa[q], fb[q]);
				for (uint32_t i = 0; i < fa[q] && i < fb[q]; i++)
				{
					const gi_hit *a = &ha[(size_t) q * k + i];
					const gi_hit *b = &hb[(size_t) q * k + i];

					if (a->key != b->key || memcmp(&a->distance, &b->distance, sizeof(float)) != 0)
					{
						EXPECT(false, "%s, %u shards, method %u k %u query %u rank %u: key %llu at %.9g, shards key %llu at %.9g",
							   when, sh->n, methods[mi], k, q, i, (unsigned long long) a->key,
							   (double) a->distance, (unsigned long long) b->key,
							   (double) b->distance);
						break;
					}
				}
			}
		}
	free(ha);
	free(hb);
	free(fa);
	free(fb);
}

static void
test_spread_sparse(void)
{
	rng			r = {909};

	for (int unit = 0; unit < 2; unit++)
		for (uint32_t n = 2; n <= 3; n++)
		{
			gi_sparse_state st = {SP_DIM, 0};
			gi_store_params sp;
			gi_store   *one = NULL;
			shards		sh;
			sp_coll		c;
			uint32_t	nq = 40;
			unsigned char *qs = malloc(nq * gi_sparse_query_bytes(8));
			size_t		qbytes;
			uint32_t   *dels;
			uint32_t	ndel = 0;

			memset(&sp, 0, sizeof(sp));
			sp.nlists = SP_DIM;
			sp.record_bytes = 4;
			sp.key_mode = GI_KEYS_PER_LIST;
			EXPECT(C->store_create(&sp, &one) == GI_OK &&
				   C->kinds[GI_KIND_SPARSE]->set_state(one, &st, sizeof(st)) == GI_OK,
				   "one store: %s", C->last_error());
			if (!shards_open(&sh, n, GI_KIND_SPARSE, &sp, &st, sizeof(st), true) || one == NULL)
			{
				shards_close(&sh);
				if (one)
					C->store_destroy(one);
				free(qs);
				return;
			}
			sp_coll_make(&c, &r, (uint32_t) scaled(5000), unit);
			qbytes = sp_queries(&r, nq, unit, qs);
			/* whole documents per call, as the service gets them */
			for (uint32_t d = 0; d < c.ndocs; d += 700)
			{
				uint32_t	e = d + 700 < c.ndocs ? d + 700 : c.ndocs;

				sp_one_insert(one, &c, d, e);
				shards_insert(&sh, c.first[e] - c.first[d], c.lists + c.first[d],
							  c.keys + c.first[d], (const char *) (c.w + c.first[d]), "insert");
			}
			shards_compare_rows(&sh, one, "sparse loaded");
			sp_spread_searches(one, &sh, qs, qbytes, nq, unit, "sparse loaded");
			dels = malloc(sizeof(uint32_t) * c.ndocs);
			for (uint32_t d = 0; d < c.ndocs; d += 3)
			{
				uint64_t	key = c.keys[c.first[d]];

				dels[ndel++] = d;
				EXPECT(C->store_delete(one, 1, &key, NULL) == GI_OK, "delete");
				shards_delete(&sh, 1, &key, "delete");
			}
			/* a third of them back */
			for (uint32_t i = 0; i < ndel; i += 3)
			{
				uint32_t	d = dels[i];

				sp_one_insert(one, &c, d, d + 1);
				shards_insert(&sh, c.first[d + 1] - c.first[d], c.lists + c.first[d],
							  c.keys + c.first[d], (const char *) (c.w + c.first[d]), "reinsert");
			}
			shards_compare_rows(&sh, one, "sparse after deletes");
			sp_spread_searches(one, &sh, qs, qbytes, nq, unit, "sparse after deletes");
			free(dels);
			sp_coll_free(&c);
			shards_close(&sh);
			C->store_destroy(one);
			free(qs);
		}
}

static const test_case spread_tests[] = {
	{"spread: IVF over 2 and 3 device objects equals one store", test_spread_ivf, false},
	{"spread: sparse over 2 and 3 device objects equals one store", test_spread_sparse, false},
};

const test_suite spread_suite = {spread_tests, sizeof(spread_tests) / sizeof(spread_tests[0]),
	NULL};
