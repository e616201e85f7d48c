/*
 * test_ivfpq.c
 *		The IVF-PQ kind against the host: set_state and search arguments,
 *		searches under every metric over encoded vectors (several probes,
 *		k from 1 to the sort path, empty lists, deleted rows, few and many
 *		queries), tables too large for shared memory, and random
 *		differentials over arbitrary code bytes; the same for the
 *		selective modes (JUNO's threshold search, hit counts), whose
 *		answers must equal the host's exactly.
 *
 * Hits are compared as test_ivf.c compares the IVF kind (compare_hits);
 * each device hit is re-scored here from the host store's copy of the code
 * by the formula of gi_kind_ivfpq.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gi_kind_ivfpq.h"
#include "harness.h"

/* shape of the next pair's state (a test_kind's open takes no arguments) */
static uint32_t pq_dim;
static uint32_t pq_m;
static uint32_t pq_ksub;
static uint32_t pq_bits = 8;	/* code width of the stores pq_pair and pq_diff open */

/* the search mode of pq_search (the IVF part is filled per call) */
static gi_ivfpq_search_params pq_mode = {.mode = GI_PQ_SEARCH_LUT, .select = 16, .scale = 1.0f};

/* ---- the kind's state and search ------------------------------------------- */

static gi_ivfpq_state *
pq_state(pair *p)
{
	return p->kstate;
}

static size_t
pq_state_bytes(const gi_ivfpq_state *st)
{
	return gi_ivfpq_state_size(st->ivf.nlists, st->ivf.dim, st->ksub);
}

static void
pq_resend(pair *p)
{
	gi_ivfpq_state *st = pq_state(p);
	gi_status	sh = H->kinds[GI_KIND_IVFPQ]->set_state(p->h, st, pq_state_bytes(st));
	gi_status	sc = C->kinds[GI_KIND_IVFPQ]->set_state(p->c, st, pq_state_bytes(st));

	EXPECT(sh == GI_OK && sc == GI_OK, "set_state: host %d (%s), cuda %d (%s)", sh,
		   sh != GI_OK ? H->last_error() : "", sc, sc != GI_OK ? C->last_error() : "");
}

/* random centroids and codebooks of the shape pq_dim, pq_m, pq_ksub; L2 */
static bool
pq_open(pair *p, rng *r)
{
	gi_ivfpq_state *st = malloc(gi_ivfpq_state_size(p->nlists, pq_dim, pq_ksub));
	float	   *f = (float *) (st + 1);
	size_t		n = (size_t) p->nlists * pq_dim + (size_t) pq_ksub * pq_dim;
	size_t		i;

	memset(st, 0, sizeof(*st));
	st->ivf.dim = pq_dim;
	st->ivf.metric = GI_METRIC_L2;
	st->ivf.nlists = p->nlists;
	st->m = pq_m;
	st->ksub = pq_ksub;
	st->code_bits = pq_bits;
	for (i = 0; i < n; i++)
		f[i] = rfloat(r);
	/* codebook entries smaller than the centroids' spread */
	for (i = (size_t) p->nlists * pq_dim; i < n; i++)
		f[i] *= 0.5f;
	p->kstate = st;
	pq_resend(p);
	return true;
}

static void
pq_close(pair *p)
{
	free(p->kstate);
	p->kstate = NULL;
}

static gi_status
pq_search(const gi_backend_ops *B, pair *p, gi_store *s, gi_metric m, uint32_t nq,
		  const float *qs, uint32_t probes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	gi_ivfpq_state *st = pq_state(p);
	gi_ivfpq_search_params sp = pq_mode;

	sp.ivf.dim = st->ivf.dim;
	sp.ivf.probes = probes;
	if (st->ivf.metric != (uint32_t) m)
	{
		st->ivf.metric = m;
		pq_resend(p);
	}
	return B->kinds[GI_KIND_IVFPQ]->search(s, &sp, nq, qs,
										   (size_t) nq * st->ivf.dim * sizeof(float),
										   k, hits, found);
}

/* ---- reference distance: gi_kind_ivfpq.h's formula, in double ------------- */

static float
pq_ref_distance(const gi_ivfpq_state *st, gi_metric m, const float *q, uint32_t list,
				const uint8_t *code)
{
	uint32_t	dim = st->ivf.dim;
	uint32_t	dsub = dim / st->m;
	const float *c = gi_ivfpq_state_centroids(st) + (size_t) list * dim;
	const float *books = gi_ivfpq_state_codebooks(st);
	double		acc = 0.0;
	double		qn = 0.0;
	double		d;
	float		f;
	uint32_t	s;
	uint32_t	j;

	if (m != GI_METRIC_L2)
		for (j = 0; j < dim; j++)
		{
			acc += (double) q[j] * c[j];
			qn += (double) q[j] * q[j];
		}
	for (s = 0; s < st->m; s++)
	{
		/* 4-bit codes: sub-space s in byte s / 2, the low half first */
		uint32_t	ent = st->code_bits == 4 ? (code[s / 2] >> (s % 2 ? 4 : 0)) & 0xFu : code[s];
		const float *e;
		double		t = 0.0;

		if (ent >= st->ksub)
			return INFINITY;
		e = books + ((size_t) s * st->ksub + ent) * dsub;
		for (j = 0; j < dsub; j++)
		{
			uint32_t	x = s * dsub + j;

			if (m == GI_METRIC_L2)
			{
				double		r = (double) q[x] - c[x] - e[j];

				t += r * r;
			}
			else
				t += (double) q[x] * e[j];
		}
		acc += (double) (float) t;
	}
	if (m == GI_METRIC_L2)
		d = acc;
	else if (m == GI_METRIC_IP)
		d = -acc;
	else if (qn == 0.0)
		d = INFINITY;
	else
		d = 1.0 - acc / sqrt(qn);
	f = (float) d;
	return isnan(f) ? INFINITY : f;
}

/* does some live row of key lie at distance d (within tolerance)? */
static bool
pq_hit_is_real(pair *p, gi_metric m, const float *q, uint64_t key, float d)
{
	uint32_t	rows[64];
	uint32_t	n = gi_host_store_lookup(p->h, key, NULL, rows, 64);
	uint8_t    *code = malloc((size_t) p->words * 4);
	bool		ok = false;
	uint32_t	i;

	for (i = 0; i < n && i < 64 && !ok; i++)
	{
		uint32_t	list;

		if (gi_host_store_row(p->h, rows[i], &list, NULL, code))
			ok = pq_mode.mode != GI_PQ_SEARCH_LUT ||
				dist_near(pq_ref_distance(pq_state(p), m, q, list, code), d);
	}
	free(code);
	return ok;
}

/* the same search on both stores, compared query by query */
static void
pq_compare_search(pair *p, gi_metric m, uint32_t nq, const float *queries,
				  uint32_t probes, uint32_t k, const char *when)
{
	uint32_t	dim = pq_state(p)->ivf.dim;
	gi_hit	   *ha = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	gi_hit	   *hb = malloc(((size_t) nq * k + 1) * sizeof(gi_hit));
	uint32_t   *fa = malloc((nq + 1) * sizeof(uint32_t));
	uint32_t   *fb = malloc((nq + 1) * sizeof(uint32_t));
	gi_status	sa;
	gi_status	sb;
	uint32_t	q;
	char		what[160];

	/* poison: every slot must be written */
	memset(hb, 0xA5, ((size_t) nq * k + 1) * sizeof(gi_hit));
	memset(fb, 0xA5, (nq + 1) * sizeof(uint32_t));
	sa = pq_search(H, p, p->h, m, nq, queries, probes, k, ha, fa);
	sb = pq_search(C, p, p->c, m, nq, queries, probes, k, hb, fb);
	EXPECT(sa == sb, "%s: search status host %d, cuda %d (%s)", when, sa, sb,
		   sb != GI_OK ? C->last_error() : "");
	if (sa == GI_OK && sb == GI_OK)
	{
		int			before = checks_failed;

		for (q = 0; q < nq && checks_failed - before < 3; q++)
		{
			snprintf(what, sizeof(what), "%s: metric %d nq %u probes %u k %u query %u",
					 when, (int) m, nq, probes, k, q);
			compare_hits(p, m, queries + (size_t) q * dim, k, ha + (size_t) q * k, fa[q],
						 hb + (size_t) q * k, fb[q], pq_hit_is_real, what);
			/* the selective modes' integer sums: the host's answer exactly */
			for (uint32_t r = 0; pq_mode.mode != GI_PQ_SEARCH_LUT && r < fa[q] && fa[q] == fb[q]; r++)
			{
				const gi_hit *x = ha + (size_t) q * k + r;
				const gi_hit *y = hb + (size_t) q * k + r;

				/* equal values (the device ranks -0 as 0) */
				if (x->key != y->key || !(x->distance == y->distance))
				{
					EXPECT(false, "%s mode %u select %u: rank %u host (%" PRIu64 ", %.9g), cuda (%" PRIu64 ", %.9g)",
						   what, pq_mode.mode, pq_mode.select, r, x->key, (double) x->distance,
						   y->key, (double) y->distance);
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

/* nq queries: fresh vectors, a few zero vectors (cosine +Inf) */
static float *
pq_random_queries(pair *p, rng *r, uint32_t nq)
{
	uint32_t	dim = pq_state(p)->ivf.dim;
	float	   *qs = malloc(((size_t) nq * dim + 1) * sizeof(float));
	size_t		i;

	for (i = 0; i < (size_t) nq * dim; i++)
		qs[i] = rfloat(r);
	for (i = 0; i < nq; i++)
		if (rchance(r, 0.03))
			memset(qs + i * dim, 0, dim * sizeof(float));
	return qs;
}

static void
pq_random_search(pair *p, rng *r, const char *when)
{
	uint32_t	x = rbelow(r, 100);
	gi_metric	m = (gi_metric) rbelow(r, 3);
	uint32_t	nq;
	uint32_t	probes;
	uint32_t	k;
	float	   *qs;

	nq = x < 30 ? 1 : x < 70 ? 1 + rbelow(r, 16) : x < 95 ? 1 + rbelow(r, 200) : 600 + rbelow(r, 600);
	x = rbelow(r, 100);
	probes = x < 20 ? 1 : x < 70 ? 1 + rbelow(r, p->nlists) : x < 90 ? p->nlists : p->nlists + 1 + rbelow(r, 5);
	x = rbelow(r, 100);
	k = x < 15 ? 1 : x < 45 ? 10 : x < 75 ? 1 + rbelow(r, 100) : x < 90 ? 1 + rbelow(r, 1024)
		: 1025 + rbelow(r, 3000);
	if (k > 1024 && nq > 40)
		nq = 1 + rbelow(r, 40);
	qs = pq_random_queries(p, r, nq);
	pq_mode.mode = rbelow(r, 3);
	pq_mode.select = 1u << rbelow(r, 9);
	pq_mode.scale = rchance(r, 0.5) ? 1.0f : 0.25f + rfloat(r) * rfloat(r) * 3.0f;
	pq_compare_search(p, m, nq, qs, probes, k, when);
	pq_mode.mode = GI_PQ_SEARCH_LUT;
	free(qs);
}

static void
pq_final_search(pair *p, rng *r)
{
	float	   *qs = pq_random_queries(p, r, 1000);

	pq_compare_search(p, GI_METRIC_L2, 1000, qs, p->nlists > 4 ? p->nlists / 4 : 1, 10,
					  "final batch");
	pq_compare_search(p, GI_METRIC_IP, 1000, qs, p->nlists, 64, "final batch");
	pq_compare_search(p, GI_METRIC_COSINE, 7, qs, 3, 3000, "final batch, large k");
	free(qs);
}

static const test_kind pq_kind = {"ivfpq", pq_open, pq_close, NULL, pq_random_search,
	pq_final_search};

/* a pair of IVF-PQ stores with unique keys */
static bool
pq_pair(pair *p, uint32_t nlists, uint32_t dim, uint32_t m, uint32_t ksub, rng *r)
{
	pair_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	pq_dim = dim;
	pq_m = m;
	pq_ksub = ksub;
	cfg.nlists = nlists;
	cfg.words = gi_ivfpq_record_bytes(m, pq_bits) / 4;
	cfg.key_mode = GI_KEYS_UNIQUE;
	cfg.kind = &pq_kind;
	return pair_open(p, &cfg, r);
}

/*
 * n random vectors encoded as the service does: the nearest of the first
 * `used` lists (L2), the residual's code padded to the record; keys
 * key0, key0 + 1, ...  Lists from `used` on stay empty.
 */
static void
pq_fill(pair *p, rng *r, uint32_t n, uint32_t used, uint64_t key0, const char *when)
{
	const gi_ivfpq_state *st = pq_state(p);
	uint32_t	dim = st->ivf.dim;
	uint32_t	rb = p->words * 4;
	const float *cent = gi_ivfpq_state_centroids(st);
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint8_t    *codes = calloc((size_t) n, rb);
	float	   *v = malloc(dim * sizeof(float));
	float	   *res = malloc(dim * sizeof(float));
	uint32_t	i;

	for (i = 0; i < n; i++)
	{
		double		bd = INFINITY;
		uint32_t	best = 0;
		uint32_t	l;
		uint32_t	j;

		for (j = 0; j < dim; j++)
			v[j] = rfloat(r);
		for (l = 0; l < used; l++)
		{
			double		d = 0.0;

			for (j = 0; j < dim; j++)
			{
				double		t = (double) v[j] - cent[(size_t) l * dim + j];

				d += t * t;
			}
			if (d < bd)
			{
				bd = d;
				best = l;
			}
		}
		for (j = 0; j < dim; j++)
			res[j] = v[j] - cent[(size_t) best * dim + j];
		gi_pq_encode(gi_ivfpq_state_codebooks(st), st->m, st->ksub, dim / st->m,
					 st->code_bits, res, codes + (size_t) i * rb);
		lists[i] = best;
		keys[i] = key0 + i;
	}
	do_insert(p, n, lists, keys, codes, when);
	free(lists);
	free(keys);
	free(codes);
	free(v);
	free(res);
}

/* delete every `every`-th key of [key0, key0 + n) */
static void
pq_delete_every(pair *p, uint32_t n, uint64_t key0, uint32_t every, const char *when)
{
	uint64_t   *keys = malloc((n / every + 1) * sizeof(uint64_t));
	uint32_t	c = 0;
	uint32_t	i;

	for (i = 0; i < n; i += every)
		keys[c++] = key0 + i;
	do_delete(p, c, keys, when);
	free(keys);
}

/* ---- tests ------------------------------------------------------------------ */

static void
both_invalid(gi_status sh, gi_status sc, const char *what)
{
	EXPECT(sh == GI_ERR_INVALID && sc == GI_ERR_INVALID, "%s: host %d, cuda %d (%s)", what,
		   sh, sc, C->last_error());
}

/*
 * set_state: the state must fit the store; search: not before set_state,
 * parameters and query bytes must fit the state; empty stores give
 * padding only.
 */
static void
test_pq_invalid(void)
{
	const gi_kind_ops *HK = H->kinds[GI_KIND_IVFPQ];
	const gi_kind_ops *CK = C->kinds[GI_KIND_IVFPQ];
	gi_store_params par;
	gi_store   *hs = NULL;
	gi_store   *cs = NULL;
	size_t		bytes = gi_ivfpq_state_size(3, 8, 4);
	gi_ivfpq_state *st = calloc(1, gi_ivfpq_state_size(3, 16, 300));
	gi_ivfpq_search_params sp = {{8, 1}, GI_PQ_SEARCH_LUT, 16, 1.0f, 0};
	gi_hit		hit[4];
	uint32_t	found = 7;
	float		q[16] = {0};
	pair		p;
	rng			r = {4242};

	memset(&par, 0, sizeof(par));
	par.nlists = 3;
	par.record_bytes = 4;		/* m of 1 .. 4 */
	par.key_mode = GI_KEYS_UNIQUE;
	EXPECT(H->store_create(&par, &hs) == GI_OK && C->store_create(&par, &cs) == GI_OK,
		   "create: %s", C->last_error());
	if (hs == NULL || cs == NULL)
		goto out;
	both_invalid(HK->search(hs, &sp, 1, q, 32, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 32, 1, hit, &found), "search before set_state");
	EXPECT(strstr(C->last_error(), "set_state") != NULL, "message: %s", C->last_error());

	st->ivf.dim = 8;
	st->ivf.metric = GI_METRIC_L2;
	st->ivf.nlists = 3;
	st->m = 4;
	st->ksub = 4;
	st->code_bits = 8;
	both_invalid(HK->set_state(hs, NULL, bytes), CK->set_state(cs, NULL, bytes), "NULL state");
	both_invalid(HK->set_state(hs, st, 8), CK->set_state(cs, st, 8), "state shorter than its header");
	both_invalid(HK->set_state(hs, st, bytes - 4), CK->set_state(cs, st, bytes - 4),
				 "state one float short");
	both_invalid(HK->set_state(hs, st, bytes + 4), CK->set_state(cs, st, bytes + 4),
				 "state one float long");
	st->ivf.nlists = 2;
	both_invalid(HK->set_state(hs, st, gi_ivfpq_state_size(2, 8, 4)),
				 CK->set_state(cs, st, gi_ivfpq_state_size(2, 8, 4)), "another list count");
	st->ivf.nlists = 3;
	st->m = 3;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes),
				 "m does not divide dim");
	st->m = 8;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes),
				 "records of another size");
	st->m = 0;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "m 0");
	st->m = 4;
	st->code_bits = 0;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "code width 0");
	st->code_bits = 5;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "code width 5");
	st->code_bits = 4;
	st->m = 8;					/* eight 4-bit codes: one word, the store's record */
	EXPECT(HK->set_state(hs, st, bytes) == GI_OK && CK->set_state(cs, st, bytes) == GI_OK,
		   "4-bit codes filling the record: %s", C->last_error());
	st->m = 4;					/* four 4-bit codes: also one word */
	EXPECT(HK->set_state(hs, st, bytes) == GI_OK && CK->set_state(cs, st, bytes) == GI_OK,
		   "4-bit codes padded: %s", C->last_error());
	st->code_bits = 8;
	st->ksub = 0;
	both_invalid(HK->set_state(hs, st, gi_ivfpq_state_size(3, 8, 0)),
				 CK->set_state(cs, st, gi_ivfpq_state_size(3, 8, 0)), "ksub 0");
	st->ksub = GI_PQ_MAX_KSUB + 1;
	both_invalid(HK->set_state(hs, st, gi_ivfpq_state_size(3, 8, st->ksub)),
				 CK->set_state(cs, st, gi_ivfpq_state_size(3, 8, st->ksub)), "ksub 257");
	st->ksub = 17;
	st->code_bits = 4;
	both_invalid(HK->set_state(hs, st, gi_ivfpq_state_size(3, 8, st->ksub)),
				 CK->set_state(cs, st, gi_ivfpq_state_size(3, 8, st->ksub)),
				 "17 entries in 4-bit codes");
	st->code_bits = 8;
	st->ksub = 4;
	st->ivf.dim = 0;
	both_invalid(HK->set_state(hs, st, gi_ivfpq_state_size(3, 0, 4)),
				 CK->set_state(cs, st, gi_ivfpq_state_size(3, 0, 4)), "dimension 0");
	st->ivf.dim = 8;
	st->ivf.metric = 7;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "unknown metric");
	st->ivf.metric = GI_METRIC_COSINE;
	((float *) (st + 1))[3 * 8 + 4 * 8 - 1] = NAN;	/* the last codebook value */
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "a NaN codebook value");
	((float *) (st + 1))[3 * 8 + 4 * 8 - 1] = 0.0f;
	((float *) (st + 1))[0] = INFINITY;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "an infinite centroid");
	((float *) (st + 1))[0] = 0.0f;
	EXPECT(HK->set_state(hs, st, bytes) == GI_OK && CK->set_state(cs, st, bytes) == GI_OK,
		   "valid state: %s", C->last_error());

	sp.ivf.dim = 4;
	both_invalid(HK->search(hs, &sp, 1, q, 16, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 16, 1, hit, &found), "search of another dimension");
	sp.ivf.dim = 8;
	both_invalid(HK->search(hs, &sp, 1, q, 36, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 36, 1, hit, &found), "query bytes do not match nq");
	both_invalid(HK->search(hs, NULL, 1, q, 32, 1, hit, &found),
				 CK->search(cs, NULL, 1, q, 32, 1, hit, &found), "no parameters");
	sp.ivf.probes = 0;
	both_invalid(HK->search(hs, &sp, 1, q, 32, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 32, 1, hit, &found), "probes 0");
	sp.ivf.probes = 1;
	sp.mode = 3;
	both_invalid(HK->search(hs, &sp, 1, q, 32, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 32, 1, hit, &found), "unknown search mode");
	sp.mode = GI_PQ_SEARCH_JUNO;
	sp.select = 24;
	both_invalid(HK->search(hs, &sp, 1, q, 32, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 32, 1, hit, &found), "selection not a power of two");
	sp.select = 16;
	sp.scale = -1.0f;
	both_invalid(HK->search(hs, &sp, 1, q, 32, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 32, 1, hit, &found), "negative scale");
	sp.scale = 1.0f;
	sp.mode = GI_PQ_SEARCH_LUT;
	EXPECT(CK->search(cs, &sp, 0, q, 0, 1, hit, &found) == GI_OK, "nq 0 refused: %s",
		   C->last_error());
	found = 7;
	EXPECT(CK->search(cs, &sp, 1, q, 32, 0, NULL, &found) == GI_OK && found == 0,
		   "k 0: status or found %u", found);
	found = 7;
	EXPECT(CK->search(cs, &sp, 1, q, 32, 4, hit, &found) == GI_OK && found == 0 &&
		   hit[3].key == 0 && isinf(hit[3].distance), "empty store: found %u", found);

	/* an IVF search of an IVF-PQ store has no state */
	both_invalid(H->kinds[GI_KIND_IVF]->search(hs, &sp.ivf, 1, q, 32, 1, hit, &found),
				 C->kinds[GI_KIND_IVF]->search(cs, &sp.ivf, 1, q, 32, 1, hit, &found),
				 "IVF search of an IVF-PQ store");

	/* empty store: padding only */
	if (pq_pair(&p, 2, 8, 2, 16, &r))
	{
		float	   *qs = pq_random_queries(&p, &r, 3);

		pq_compare_search(&p, GI_METRIC_L2, 3, qs, 1, 5, "empty store");
		pq_compare_search(&p, GI_METRIC_COSINE, 2, qs, 9, 2000, "empty store, large k");
		pair_close(&p);
		free(qs);
	}
out:
	if (hs)
		H->store_destroy(hs);
	if (cs)
		C->store_destroy(cs);
	free(st);
}

/*
 * Encoded vectors in 30 of 40 lists (10 empty), a fifth of the rows
 * deleted: every metric, probes 1 .. beyond the list count, k = 1, 10,
 * 100 and 1,500 (the sort path), a few queries (lists split over blocks
 * and merged) and many.
 */
static void
pq_metrics(uint32_t dim, uint32_t m, uint32_t ksub, uint64_t seed)
{
	static const uint32_t probes[] = {1, 3, 40, 45};
	static const uint32_t ks[] = {1, 10, 100, 1500};
	pair		p;
	rng			r = {seed};
	uint32_t	n = (uint32_t) scaled(6000);
	uint32_t	nq;
	float	   *qs;
	char		when[96];

	if (!pq_pair(&p, 40, dim, m, ksub, &r))
		return;
	pq_fill(&p, &r, n, 30, 1000, "fill");
	pq_delete_every(&p, n, 1000, 5, "delete a fifth");
	compare_contents(&p, "filled");
	qs = pq_random_queries(&p, &r, 600);
	for (int mi = 0; mi < 3; mi++)
		for (size_t pi = 0; pi < sizeof(probes) / sizeof(probes[0]); pi++)
			for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++)
			{
				if (checks_failed > 20)
					break;
				nq = ks[ki] > 1024 ? 20 : (pi + ki) % 2 ? 3 : 600;
				snprintf(when, sizeof(when), "dim %u m %u ksub %u", dim, m, ksub);
				pq_compare_search(&p, (gi_metric) mi, nq, qs, probes[pi], ks[ki], when);
			}
	/* the store emptied and refilled: stale codes in reused slots */
	pq_delete_every(&p, n, 1000, 1, "delete all");
	pq_fill(&p, &r, n / 3, 40, 50000, "refill");
	pq_compare_search(&p, GI_METRIC_L2, 600, qs, 4, 10, "refilled");
	pq_compare_search(&p, GI_METRIC_IP, 5, qs, 40, 1500, "refilled, large k");
	pq_compare_search(&p, GI_METRIC_COSINE, 5, qs, 40, 100, "refilled");
	free(qs);
	pair_close(&p);
}

static void
test_pq_metrics(void)
{
	pq_metrics(32, 8, 256, 31);
}

/* m not a multiple of 4 (a padded last word), small codebooks */
static void
test_pq_odd_m(void)
{
	pq_metrics(30, 5, 16, 37);
}

/*
 * 4-bit codes, two a byte: a whole number of words, and an odd m with a
 * padded last word; then the selective modes over them.
 */
static void
test_pq_4bit(void)
{
	static const gi_ivfpq_search_params modes[] = {
		{.mode = GI_PQ_SEARCH_JUNO, .select = 4, .scale = 1.0f},
		{.mode = GI_PQ_SEARCH_HITS, .select = 8, .scale = 1.5f},
	};
	pair		p;
	rng			r = {67};
	float	   *qs;

	pq_bits = 4;
	pq_metrics(32, 16, 16, 71);
	pq_metrics(30, 15, 12, 73);
	if (pq_pair(&p, 20, 32, 16, 16, &r))
	{
		pq_fill(&p, &r, (uint32_t) scaled(4000), 18, 1000, "fill");
		pq_delete_every(&p, (uint32_t) scaled(4000), 1000, 3, "delete a third");
		qs = pq_random_queries(&p, &r, 200);
		for (size_t mo = 0; mo < sizeof(modes) / sizeof(modes[0]); mo++)
		{
			pq_mode = modes[mo];
			for (int mi = 0; mi < 3; mi++)
			{
				pq_compare_search(&p, (gi_metric) mi, 200, qs, 5, 10, "4-bit, selective");
				pq_compare_search(&p, (gi_metric) mi, 4, qs, 20, 1500,
								  "4-bit, selective, large k");
			}
		}
		pq_mode.mode = GI_PQ_SEARCH_LUT;
		free(qs);
		pair_close(&p);
	}
	pq_bits = 8;
}

/*
 * m * ksub * 4 bytes over the device's shared memory per block: the
 * tables go to global memory (both the top-k and the sort path).
 */
static void
test_pq_global_lut(void)
{
	pair		p;
	rng			r = {41};
	uint32_t	n = (uint32_t) scaled(3000);
	float	   *qs;

	if (!pq_pair(&p, 6, 256, 256, 256, &r))
		return;
	pq_fill(&p, &r, n, 6, 7, "fill");
	pq_delete_every(&p, n, 7, 3, "delete a third");
	qs = pq_random_queries(&p, &r, 40);
	pq_compare_search(&p, GI_METRIC_L2, 2, qs, 2, 10, "global tables");
	pq_compare_search(&p, GI_METRIC_IP, 40, qs, 6, 100, "global tables");
	pq_compare_search(&p, GI_METRIC_COSINE, 3, qs, 3, 1500, "global tables, large k");
	free(qs);
	pair_close(&p);
}

/*
 * The selective modes over encoded vectors: every metric, selections from
 * one entry to the whole codebook, scales, probes, k up to the sort path;
 * 2-d sub-spaces as the access method's default, and a table in global
 * memory.
 */
static void
test_pq_selective(void)
{
	static const gi_ivfpq_search_params modes[] = {
		{.mode = GI_PQ_SEARCH_JUNO, .select = 16, .scale = 1.0f},
		{.mode = GI_PQ_SEARCH_JUNO, .select = 1, .scale = 1.0f},
		{.mode = GI_PQ_SEARCH_JUNO, .select = 256, .scale = 0.3f},
		{.mode = GI_PQ_SEARCH_HITS, .select = 32, .scale = 1.0f},
		{.mode = GI_PQ_SEARCH_HITS, .select = 2, .scale = 2.5f},
	};
	static const uint32_t probes[] = {1, 7, 40};
	static const uint32_t ks[] = {1, 10, 1500};
	pair		p;
	rng			r = {59};
	uint32_t	n = (uint32_t) scaled(6000);
	float	   *qs;
	char		when[96];

	if (!pq_pair(&p, 40, 32, 16, 256, &r))
		return;
	pq_fill(&p, &r, n, 34, 1000, "fill");
	pq_delete_every(&p, n, 1000, 4, "delete a quarter");
	qs = pq_random_queries(&p, &r, 500);
	/* under the sanitizers (GI_TEST_SCALE < 1): every other mode, probes and k, fewer queries */
	const size_t step = scaled(100) < 100 ? 2 : 1;
	const uint32_t nq = (uint32_t) (scaled(500) > 0 ? scaled(500) : 1);

	for (size_t mo = 0; mo < sizeof(modes) / sizeof(modes[0]); mo += step)
	{
		pq_mode = modes[mo];
		for (int mi = 0; mi < 3; mi++)
			for (size_t pi = 0; pi < sizeof(probes) / sizeof(probes[0]); pi += step)
				for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki += step)
				{
					if (checks_failed > 20)
						break;
					snprintf(when, sizeof(when), "selective, mode %u select %u",
							 modes[mo].mode, modes[mo].select);
					pq_compare_search(&p, (gi_metric) mi, ks[ki] > 1024 ? 9 : nq, qs,
									  probes[pi], ks[ki], when);
				}
	}
	pair_close(&p);
	free(qs);

	/* 256 sub-spaces of 256 entries: the table lives in global memory */
	r.s = 61;
	if (pq_pair(&p, 6, 256, 256, 256, &r))
	{
		pq_fill(&p, &r, (uint32_t) scaled(2000), 6, 7, "fill");
		qs = pq_random_queries(&p, &r, 30);
		for (size_t mo = 0; mo < sizeof(modes) / sizeof(modes[0]); mo += 3)
		{
			pq_mode = modes[mo];
			pq_compare_search(&p, GI_METRIC_L2, 30, qs, 3, 10, "selective, global tables");
			pq_compare_search(&p, GI_METRIC_IP, 3, qs, 6, 1500, "selective, global tables");
		}
		free(qs);
		pair_close(&p);
	}
	pq_mode.mode = GI_PQ_SEARCH_LUT;
}

/* set_state again (another metric, other codebooks): the search follows */
static void
test_pq_set_state(void)
{
	pair		p;
	rng			r = {43};
	float	   *qs;
	int			round;

	if (!pq_pair(&p, 12, 16, 4, 64, &r))
		return;
	pq_fill(&p, &r, (uint32_t) scaled(2000), 12, 1, "fill");
	qs = pq_random_queries(&p, &r, 30);
	for (round = 0; round < 3; round++)
	{
		gi_ivfpq_state *st = pq_state(&p);
		float	   *books = (float *) gi_ivfpq_state_codebooks(st);
		size_t		i;

		pq_compare_search(&p, (gi_metric) round, 30, qs, 3, 10, "before new codebooks");
		for (i = 0; i < (size_t) st->ksub * st->ivf.dim; i++)
			books[i] = rfloat(&r) * (float) (round + 1);
		pq_resend(&p);
		pq_compare_search(&p, (gi_metric) round, 30, qs, 3, 10, "after new codebooks");
	}
	free(qs);
	pair_close(&p);
}

/* random operations over arbitrary code bytes (codes past ksub: +Inf) */
static void
pq_diff(uint32_t nlists, uint32_t dim, uint32_t m, uint32_t ksub, int ops, uint64_t seed)
{
	diff_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	pq_dim = dim;
	pq_m = m;
	pq_ksub = ksub;
	cfg.store.nlists = nlists;
	cfg.store.words = gi_ivfpq_record_bytes(m, pq_bits) / 4;
	cfg.store.key_mode = GI_KEYS_UNIQUE;
	cfg.store.kind = &pq_kind;
	cfg.keyspace = 5000;
	cfg.ops = ops;
	cfg.seed = seed;
	cfg.insert_chunk = 7;
	cfg.per_row = 1;
	random_differential(&cfg);
}

static void
test_pq_diff(void)
{
	pq_diff(16, 24, 8, 256, scaled(250), 47);
}

static void
test_pq_diff_small_books(void)
{
	pq_diff(7, 12, 6, 200, scaled(250), 53);
}

/* 4-bit codes over arbitrary words: codes past 12 entries, junk in the padding */
static void
test_pq_diff_4bit(void)
{
	pq_bits = 4;
	pq_diff(16, 24, 12, 16, scaled(250), 79);
	pq_diff(7, 12, 3, 12, scaled(250), 83);
	pq_bits = 8;
}

/* the same with the scan taking the slab directory, rebuilt at every change */
static void
test_pq_diff_dir(void)
{
	if (cu_ivf_scan == NULL)
	{
		printf("no scan hook in this module: skipped\n");
		return;
	}
	cu_ivf_scan(GI_CU_SCAN_DIR);
	pq_diff(16, 24, 8, 256, scaled(250), 59);
	pq_diff(7, 12, 6, 200, scaled(120), 61);
	pq_bits = 4;
	pq_diff(16, 24, 12, 16, scaled(120), 89);
	pq_bits = 8;
	cu_ivf_scan(GI_CU_SCAN_AUTO);
}

static const test_case ivfpq_tests[] = {
	{"ivfpq: invalid arguments and empty stores", test_pq_invalid, false},
	{"ivfpq: metrics, probes, k, empty lists, deletes", test_pq_metrics, false},
	{"ivfpq: odd m, small codebooks", test_pq_odd_m, false},
	{"ivfpq: 4-bit codes, two a byte", test_pq_4bit, false},
	{"ivfpq: tables in global memory", test_pq_global_lut, false},
	{"ivfpq: selective modes (juno, hits) equal the host", test_pq_selective, false},
	{"ivfpq: set_state replaces codebooks and metric", test_pq_set_state, false},
	{"ivfpq: random differential", test_pq_diff, false},
	{"ivfpq: random differential, codes past the codebook", test_pq_diff_small_books, false},
	{"ivfpq: random differential, 4-bit codes", test_pq_diff_4bit, false},
	{"ivfpq: random differential, slab directory", test_pq_diff_dir, false},
};

const test_suite ivfpq_suite = {ivfpq_tests, sizeof(ivfpq_tests) / sizeof(ivfpq_tests[0]), NULL};
