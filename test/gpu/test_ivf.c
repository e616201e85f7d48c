/*
 * test_ivf.c
 *		The IVF kind against the host: set_state and search arguments,
 *		random differentials with searches, the large-k (sort) path, the
 *		multi-query tiles, exact ties, and searches concurrent with
 *		mutations.
 *
 * Searches must return the same ids up to distance ties and distances
 * within 1e-4 relative; each GPU hit is also re-computed here, in double,
 * from the host store's copy of the record, so a wrong payload can never
 * pass by agreeing with itself.  The metric is part of the kind's state:
 * a search under another metric hands both stores the state again.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static double max_rel_err;		/* over |d| >= 1e-2 */
static uint64_t hits_compared;
static uint64_t ties_accepted;

/* ---- the kind's state and search -------------------------------------------- */

float *
ivf_centroids(pair *p)
{
	return (float *) gi_ivf_state_centroids(p->kstate);
}

void
ivf_resend(pair *p)
{
	gi_ivf_state *st = p->kstate;
	size_t		bytes = gi_ivf_state_size(st->nlists, st->dim);
	gi_status	sh = H->kinds[GI_KIND_IVF]->set_state(p->h, st, bytes);
	gi_status	sc = C->kinds[GI_KIND_IVF]->set_state(p->c, st, bytes);

	EXPECT(sh == GI_OK && sc == GI_OK, "set_state: host %d (%s), cuda %d (%s)", sh,
		   sh != GI_OK ? H->last_error() : "", sc, sc != GI_OK ? C->last_error() : "");
}

/* random centroids, metric L2 */
static bool
ivf_open(pair *p, rng *r)
{
	gi_ivf_state *st = malloc(gi_ivf_state_size(p->nlists, p->words));
	float	   *cent = (float *) (st + 1);
	uint32_t	i;

	st->dim = p->words;
	st->metric = GI_METRIC_L2;
	st->nlists = p->nlists;
	st->pad = 0;
	for (i = 0; i < p->nlists * p->words; i++)
		cent[i] = rfloat(r);
	p->kstate = st;
	ivf_resend(p);
	return true;
}

static void
ivf_close(pair *p)
{
	free(p->kstate);
	p->kstate = NULL;
}

static uint32_t
ivf_pick_list(const pair *p, const void *payload, rng *r)
{
	(void) r;
	return ivf_nearest_list(p, payload);
}

/* one backend's search under metric m (the state follows m on both stores) */
static gi_status
ivf_search(const gi_backend_ops *B, pair *p, gi_store *s, gi_metric m, uint32_t nq,
		   const float *qs, uint32_t probes, uint32_t k, gi_hit *hits, uint32_t *found)
{
	gi_ivf_state *st = p->kstate;
	gi_ivf_search_params sp = {p->words, probes};

	if (st->metric != (uint32_t) m)
	{
		st->metric = m;
		ivf_resend(p);
	}
	return B->kinds[GI_KIND_IVF]->search(s, &sp, nq, qs, (size_t) nq * p->words * sizeof(float),
										 k, hits, found);
}

static void random_search(pair *p, rng *r, const char *when);

/* a big batch of queries, each metric, large k too */
static void
final_search(pair *p, rng *r)
{
	float	   *qs = ivf_random_queries(p, r, 1000);

	ivf_compare_search(p, GI_METRIC_L2, 1000, qs, p->nlists > 4 ? p->nlists / 4 : 1, 10,
					   "final batch");
	ivf_compare_search(p, GI_METRIC_IP, 1000, qs, p->nlists, 64, "final batch");
	ivf_compare_search(p, GI_METRIC_COSINE, 7, qs, 3, 3000, "final batch, large k");
	free(qs);
}

const test_kind ivf_kind = {"ivf", ivf_open, ivf_close, ivf_pick_list, random_search,
	final_search};

/* a pair of IVF stores with unique keys */
bool
ivf_pair(pair *p, uint32_t nlists, uint32_t dim, uint32_t chunk_slabs, rng *r)
{
	pair_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.nlists = nlists;
	cfg.words = dim;
	cfg.chunk_slabs = chunk_slabs;
	cfg.key_mode = GI_KEYS_UNIQUE;
	cfg.kind = &ivf_kind;
	return pair_open(p, &cfg, r);
}
/* ---- reference distance (the host's numerics) --------------------------- */

static float
ref_distance(gi_metric m, const float *q, const float *x, uint32_t dim)
{
	double		acc = 0.0;
	double		qn = 0.0;
	double		xn = 0.0;
	double		d;
	float		f;
	uint32_t	j;

	for (j = 0; j < dim; j++)
	{
		if (m == GI_METRIC_L2)
		{
			double		t = (double) x[j] - q[j];

			acc += t * t;
		}
		else
		{
			acc += (double) x[j] * q[j];
			qn += (double) q[j] * q[j];
			xn += (double) x[j] * x[j];
		}
	}
	if (m == GI_METRIC_L2)
		d = acc;
	else if (m == GI_METRIC_IP)
		d = -acc;
	else if (qn == 0.0 || xn == 0.0)
		d = INFINITY;
	else
		d = 1.0 - acc / (sqrt(qn) * sqrt(xn));
	f = (float) d;
	return isnan(f) ? INFINITY : f;
}

/* within 1e-4 relative (absolute 1e-4 under magnitude 1) */
bool
dist_near(float a, float b)
{
	if (isinf(a) || isinf(b))
		return a == b;
	return fabs((double) a - b) <= 1e-4 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* the same, and record the relative error of a matched pair */
static bool
dist_close(float a, float b)
{
	double		m;

	if (isinf(a) || isinf(b))
		return a == b;
	m = fmax(fabs(a), fabs(b));
	if (dist_near(a, b) && m >= 1e-2 && fabs((double) a - b) / m > max_rel_err)
		max_rel_err = fabs((double) a - b) / m;
	return dist_near(a, b);
}


/* ---- search comparison ----------------------------------------------------- */

static int
u64cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* does some live row of key lie at distance d (within tolerance)? */
static bool
hit_is_real(pair *p, gi_metric m, const float *q, uint64_t key, float d)
{
	uint32_t	rows[64];
	uint32_t	n = gi_host_store_lookup(p->h, key, NULL, rows, 64);
	float	   *x = malloc(p->words * sizeof(float));
	bool		ok = false;
	uint32_t	i;

	for (i = 0; i < n && i < 64 && !ok; i++)
	{
		if (gi_host_store_row(p->h, rows[i], NULL, NULL, x))
			ok = dist_near(ref_distance(m, q, x, p->words), d);
	}
	free(x);
	return ok;
}

/* one query's hits: host ha (reference) vs device hb (see harness.h) */
void
compare_hits(pair *p, gi_metric m, const float *q, uint32_t k, const gi_hit *ha,
			 uint32_t fa, const gi_hit *hb, uint32_t fb, hit_real_fn real, const char *what)
{
	uint64_t   *ka;
	uint64_t   *kb;
	uint32_t	r;
	uint32_t	i;
	uint32_t	j;
	float		boundary;

	EXPECT(fa == fb, "%s: found host %u, cuda %u", what, fa, fb);
	if (fa != fb)
		return;
	for (r = fa; r < k; r++)
		EXPECT(hb[r].key == 0 && isinf(hb[r].distance) && hb[r].distance > 0,
			   "%s: padding slot %u holds key %" PRIu64 " distance %g", what, r, hb[r].key,
			   (double) hb[r].distance);
	for (r = 0; r < fa; r++)
	{
		EXPECT(dist_close(ha[r].distance, hb[r].distance),
			   "%s: rank %u distance host %.9g, cuda %.9g (keys %" PRIu64 "/%" PRIu64 ")",
			   what, r, (double) ha[r].distance, (double) hb[r].distance, ha[r].key, hb[r].key);
		if (r > 0)
			EXPECT(hb[r - 1].distance <= hb[r].distance,
				   "%s: cuda hits out of order at rank %u", what, r);
	}
	hits_compared += fa;
	if (fa == 0)
		return;
	/* every device hit is a live record at the distance it reports */
	for (r = 0; r < fb; r++)
	{
		if (!real(p, m, q, hb[r].key, hb[r].distance))
		{
			EXPECT(false, "%s: cuda hit %u (key %" PRIu64 ", distance %.9g) is no live record at that distance",
				   what, r, hb[r].key, (double) hb[r].distance);
			break;
		}
	}
	/* same multiset of keys, except ties at the boundary */
	ka = malloc(fa * sizeof(uint64_t));
	kb = malloc(fa * sizeof(uint64_t));
	for (r = 0; r < fa; r++)
	{
		ka[r] = ha[r].key;
		kb[r] = hb[r].key;
	}
	qsort(ka, fa, sizeof(uint64_t), u64cmp);
	qsort(kb, fa, sizeof(uint64_t), u64cmp);
	boundary = ha[fa - 1].distance;
	i = j = 0;
	while (i < fa || j < fa)
	{
		if (i < fa && j < fa && ka[i] == kb[j])
		{
			i++;
			j++;
			continue;
		}
		/* a key in one list only: fine only when it ties with the boundary */
		{
			bool		host_only = j >= fa || (i < fa && ka[i] < kb[j]);
			uint64_t	key = host_only ? ka[i] : kb[j];
			const gi_hit *h = host_only ? ha : hb;
			float		d = INFINITY;

			for (r = 0; r < fa; r++)
				if (h[r].key == key)
					d = h[r].distance;
			if (fa == k && dist_close(d, boundary))
				ties_accepted++;
			else
			{
				EXPECT(false, "%s: key %" PRIu64 " (distance %.9g) only in the %s result; boundary %.9g, found %u of k %u",
					   what, key, (double) d, host_only ? "host" : "cuda", (double) boundary, fa, k);
				break;
			}
			if (host_only)
				i++;
			else
				j++;
		}
	}
	free(ka);
	free(kb);
}

void
ivf_compare_search(pair *p, gi_metric m, uint32_t nq, const float *queries,
			   uint32_t probes, uint32_t k, const char *when)
{
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
	sa = ivf_search(H, p, p->h, m, nq, queries, probes, k, ha, fa);
	sb = ivf_search(C, p, p->c, m, nq, queries, probes, k, hb, fb);
	EXPECT(sa == sb, "%s: search status host %d, cuda %d (%s)", when, sa, sb,
		   sb != GI_OK ? C->last_error() : "");
	if (sa == GI_OK && sb == GI_OK)
	{
		int			before = checks_failed;

		for (q = 0; q < nq && checks_failed - before < 3; q++)
		{
			snprintf(what, sizeof(what), "%s: metric %d nq %u probes %u k %u query %u",
					 when, (int) m, nq, probes, k, q);
			compare_hits(p, m, queries + (size_t) q * p->words, k, ha + (size_t) q * k, fa[q],
						 hb + (size_t) q * k, fb[q], hit_is_real, what);
		}
	}
	free(ha);
	free(hb);
	free(fa);
	free(fb);
}


uint32_t
ivf_nearest_list(const pair *p, const float *v)
{
	const float *cent = gi_ivf_state_centroids(p->kstate);
	uint32_t	best = 0;
	double		bd = INFINITY;
	uint32_t	l;

	for (l = 0; l < p->nlists; l++)
	{
		double		d = 0.0;
		uint32_t	j;

		for (j = 0; j < p->words; j++)
		{
			double		t = (double) v[j] - cent[(size_t) l * p->words + j];

			d += t * t;
		}
		if (d < bd)
		{
			bd = d;
			best = l;
		}
	}
	return best;
}


/* a random batch of queries: fresh vectors, stored ones, zero vectors */
float *
ivf_random_queries(pair *p, rng *r, uint32_t nq)
{
	float	   *qs = malloc((size_t) nq * p->words * sizeof(float));
	uint32_t	q;

	for (q = 0; q < nq; q++)
	{
		float	   *v = qs + (size_t) q * p->words;

		random_vector(r, v, p->words, false);
		if (rchance(r, 0.02))
			memset(v, 0, p->words * sizeof(float));
		else if (rchance(r, 0.1))
		{
			uint32_t	j;

			for (j = 0; j < p->words; j++)
				v[j] = (float) ((int) (v[j] * 2)) / 2.0f;
		}
	}
	return qs;
}

static void
random_search(pair *p, rng *r, const char *when)
{
	uint32_t	nq;
	uint32_t	probes;
	uint32_t	k;
	uint32_t	x = rbelow(r, 100);
	gi_metric	m = (gi_metric) rbelow(r, 3);
	float	   *qs;

	nq = x < 30 ? 1 : x < 70 ? 1 + rbelow(r, 16) : x < 95 ? 1 + rbelow(r, 200) : 600 + rbelow(r, 600);
	x = rbelow(r, 100);
	probes = x < 20 ? 1 : x < 70 ? 1 + rbelow(r, p->nlists) : x < 90 ? p->nlists : p->nlists + 1 + rbelow(r, 5);
	x = rbelow(r, 100);
	k = x < 15 ? 1 : x < 45 ? 10 : x < 75 ? 1 + rbelow(r, 100) : x < 88 ? 1 + rbelow(r, 1024)
		: x < 92 ? 1024 : 1025 + rbelow(r, 3000);
	if (k > 1024 && nq > 40)
		nq = 1 + rbelow(r, 40);
	qs = ivf_random_queries(p, r, nq);
	ivf_compare_search(p, m, nq, qs, probes, k, when);
	free(qs);
}


/* big k and big candidate sets: the sort-based path against the host */
static void
test_large_k(void)
{
	pair		p;
	rng			r = {77};
	uint32_t	n = 20000;
	uint32_t	dim = 24;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	float	   *qs;
	uint32_t	i;

	if (!ivf_pair(&p, 40, dim, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, true);
		lists[i] = ivf_nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = (uint64_t) i * 7919;
	}
	do_insert(&p, n, lists, keys, pay, "large k fill");
	qs = ivf_random_queries(&p, &r, 50);
	ivf_compare_search(&p, GI_METRIC_L2, 50, qs, 40, 1025, "large k");
	ivf_compare_search(&p, GI_METRIC_L2, 5, qs, 40, 25000, "k over the store");
	ivf_compare_search(&p, GI_METRIC_IP, 20, qs, 7, 4096, "large k, some probes");
	ivf_compare_search(&p, GI_METRIC_COSINE, 50, qs, 40, 1024, "k at the fast bound");
	ivf_compare_search(&p, GI_METRIC_L2, 1, qs, 1, 1, "k 1");
	free(qs);
	/* the SQL scan's doubling: same query, k = 10, 20, ... 5120 */
	qs = ivf_random_queries(&p, &r, 1);
	for (i = 10; i <= 5120; i *= 2)
		ivf_compare_search(&p, GI_METRIC_L2, 1, qs, 3, i, "doubling k");
	free(qs);
	compare_contents(&p, "large k");
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * Few queries: their probed lists' slabs come from the slab directory,
 * spread over the groups of each query, or from the chain walk.  Both
 * against the host, on lists of very different lengths (one list holds
 * most records, so a group's share passes the slab queue and is scanned in
 * windows), with deleted records, for each metric; the directory's answer
 * in each of its shapes (blocks an SM, words loaded at a time; a dimension
 * that leaves a tail after 32- and 16-word batches) bitwise equal to the
 * chain walk's; and in the automatic mode the search after a mutation (the
 * directory rebuilt) and the one after it.
 */
static void
test_few_query_dir(void)
{
	pair		p;
	rng			r = {4242};
	uint32_t	n = (uint32_t) scaled(90000);
	uint32_t	dim = 53;
	uint32_t	nl = 48;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	uint64_t   *dels = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	static const uint32_t shapes[][2] = {{1, 1}, {1, 2}, {1, 13}, {3, 48}, {8, 5}, {2, 48}};
	static const gi_metric metrics[] = {GI_METRIC_L2, GI_METRIC_IP, GI_METRIC_COSINE};
	uint32_t	ndel = 0;
	uint32_t	i;

	memset(&p, 0, sizeof(p));
	if (self_mode || cu_ivf_scan == NULL)
	{
		printf("  (skipped: %s)\n", self_mode ? "self mode" : "no scan hook");
		goto done;
	}
	if (!ivf_pair(&p, nl, dim, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, false);
		/* two thirds in list 0 (about 1,900 slabs), the rest as the centroids say */
		lists[i] = rbelow(&r, 3) < 2 ? 0 : ivf_nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = (uint64_t) i * 31 + 5;
		if (rbelow(&r, 10) == 0)
			dels[ndel++] = keys[i];
	}
	do_insert(&p, n, lists, keys, pay, "few-query fill");
	do_delete(&p, ndel, dels, "few-query deletes");
	for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++)
		for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++)
		{
			uint32_t	nq = shapes[t][0];
			uint32_t	probes = shapes[t][1];
			float	   *qs = ivf_random_queries(&p, &r, nq);
			char		what[96];

			snprintf(what, sizeof(what), "directory, metric %d", (int) metrics[m]);
			cu_ivf_scan(GI_CU_SCAN_DIR);
			ivf_compare_search(&p, metrics[m], nq, qs, probes, 10, what);
			{
				static const int dshape[][2] = {{1, 16}, {2, 16}, {3, 16}, {1, 32}, {2, 32}, {1, 64}, {1, 128}, {1, 0}, {0, 0}};
				gi_hit	   *hd = malloc((size_t) nq * 100 * sizeof(gi_hit));
				gi_hit	   *hc = malloc((size_t) nq * 100 * sizeof(gi_hit));
				uint32_t   *fd = malloc(nq * sizeof(uint32_t));
				uint32_t   *fc = malloc(nq * sizeof(uint32_t));
				gi_status	sc;

				cu_ivf_scan(GI_CU_SCAN_CHAINS);
				sc = ivf_search(C, &p, p.c, metrics[m], nq, qs, probes, 100, hc, fc);
				cu_ivf_scan(GI_CU_SCAN_DIR);
				for (size_t e = 0; e < (cu_ivf_dir_shape ? sizeof(dshape) / sizeof(dshape[0]) : 1); e++)
				{
					gi_status	sd;
					bool		same;

					if (cu_ivf_dir_shape)
						cu_ivf_dir_shape(dshape[e][0], dshape[e][1]);
					sd = ivf_search(C, &p, p.c, metrics[m], nq, qs, probes, 100, hd, fd);
					same = sd == GI_OK && sc == GI_OK;
					for (uint32_t q = 0; same && q < nq; q++)
					{
						same = fd[q] == fc[q];
						for (uint32_t h = 0; same && h < fd[q] && h < 100; h++)
							same = hd[q * 100 + h].key == hc[q * 100 + h].key &&
								memcmp(&hd[q * 100 + h].distance, &hc[q * 100 + h].distance,
									   sizeof(float)) == 0;
					}
					EXPECT(same, "%s: nq %u probes %u, shape %dx%d: the directory's hits differ from the chain walk's",
						   what, nq, probes, dshape[e][0], dshape[e][1]);
				}
				if (cu_ivf_dir_shape)
					cu_ivf_dir_shape(0, 0);
				free(hd);
				free(hc);
				free(fd);
				free(fc);
			}
			free(qs);
		}

	/* automatic: a mutation, then the directory rebuilt, then as it is */
	cu_ivf_scan(GI_CU_SCAN_AUTO);
	for (i = 0; i < 3; i++)
	{
		float	   *qs = ivf_random_queries(&p, &r, 2);
		uint64_t	key = (uint64_t) (n + i) * 31 + 5;
		uint32_t	list = 0;

		do_insert(&p, 1, &list, &key, pay, "few-query insert");
		ivf_compare_search(&p, GI_METRIC_L2, 2, qs, 6, 10, "automatic, after a mutation");
		ivf_compare_search(&p, GI_METRIC_L2, 2, qs, 6, 10, "automatic, unchanged store");
		free(qs);
	}
	compare_contents(&p, "few queries");
out:
	cu_ivf_scan(GI_CU_SCAN_AUTO);
	pair_close(&p);
done:
	free(lists);
	free(keys);
	free(dels);
	free(pay);
}

/*
 * Large batches: lists probed by many queries of a batch are scored in
 * multi-query tiles (cuda_search.cu).  Against the host for each metric, k
 * on both sides of the tile path's bounds, a dimension that is not a
 * multiple of 16 (word tail and padded query rows), deleted records
 * (partly valid and empty slabs) and grid vectors (exact ties); and every
 * query's hits in the batch bitwise equal to its hits searched alone.
 */
static void
test_batch_tiles(void)
{
	pair		p;
	rng			r = {4242};
	uint32_t	n = 2000 + (uint32_t) scaled(10000);
	uint32_t	dim = 37;
	uint32_t	nq = 900;
	uint32_t	nlists = 24;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	static const uint32_t ks[] = {1, 10, 64, 256, 300, 600};
	float	   *qs = NULL;
	uint32_t	i;
	int			m;

	if (!ivf_pair(&p, nlists, dim, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, true);
		lists[i] = ivf_nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = (uint64_t) i * 104729 + 3;
	}
	do_insert(&p, n, lists, keys, pay, "tiles fill");
	/* every third record gone: partly valid slabs, some empty */
	for (i = 0; i < n / 3; i++)
		keys[i] = (uint64_t) (3 * i) * 104729 + 3;
	do_delete(&p, n / 3, keys, "tiles delete");
	qs = ivf_random_queries(&p, &r, nq);
	/* shortened under the sanitizers (scale < 1): L2, one k per path */
	for (m = 0; m < (scale < 1.0 ? 1 : 3); m++)
	{
		uint32_t	t;

		for (t = 0; t < sizeof(ks) / sizeof(ks[0]); t++)
			if (scale >= 1.0 || ks[t] == 10 || ks[t] == 300)
				ivf_compare_search(&p, (gi_metric) m, nq, qs, 1 + (t * 5 + (uint32_t) m) % nlists, ks[t],
						   "multi-query tiles");
	}

	/* tiles forced for few queries too (the hook): the host's answers */
	if (cu_ivf_tiles)
	{
		static const uint32_t fewq[] = {1, 3, 8, 32};

		cu_ivf_tiles(1);
		for (i = 0; i < sizeof(fewq) / sizeof(fewq[0]); i++)
			ivf_compare_search(&p, GI_METRIC_L2, fewq[i], qs, 1 + (7 * i) % nlists, 10,
							   "tiles forced, few queries");
		cu_ivf_tiles(0);
	}

	/*
	 * A long list's tile over several blocks of the slab directory, from a
	 * slab a block to the chain walk: the host's answers, every metric
	 */
	if (cu_ivf_tile_chunk)
	{
		static const int chunks[] = {1, 3, 8, -1};
		uint32_t	c;

		for (c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++)
		{
			cu_ivf_tile_chunk(chunks[c]);
			for (m = 0; m < (scale < 1.0 ? 1 : 3); m++)
				ivf_compare_search(&p, (gi_metric) m, nq, qs, 2 + (c * 3 + (uint32_t) m) % nlists,
								   c == 1 ? 64 : 10, "tiles over the directory");
			if (cu_ivf_tiles)
			{
				cu_ivf_tiles(1);
				ivf_compare_search(&p, GI_METRIC_L2, 8, qs, 5, 10,
								   "tiles over the directory, few queries");
				cu_ivf_tiles(0);
			}
		}
		cu_ivf_tile_chunk(0);
	}

	/* batch vs alone: the same arithmetic, so the same bits */
	{
		uint32_t	k = 10;
		uint32_t	probes = 6;
		gi_hit	   *hb = malloc((size_t) nq * k * sizeof(gi_hit));
		uint32_t   *fb = malloc(nq * sizeof(uint32_t));
		gi_hit		h1[10];
		uint32_t	f1;
		uint32_t	bad = 0;

		EXPECT(ivf_search(C, &p, p.c, GI_METRIC_L2, nq, qs, probes, k, hb, fb) == GI_OK,
			   "tiles batch: %s", C->last_error());
		for (i = 0; i < nq && bad < 3; i += 37)
		{
			uint32_t	j;

			EXPECT(ivf_search(C, &p, p.c, GI_METRIC_L2, 1, qs + (size_t) i * dim, probes,
								 k, h1, &f1) == GI_OK, "tiles alone: %s", C->last_error());
			if (f1 != fb[i])
			{
				bad++;
				EXPECT(false, "query %u: found %u alone, %u in the batch", i, f1, fb[i]);
				continue;
			}
			for (j = 0; j < f1; j++)
				if (h1[j].key != hb[(size_t) i * k + j].key ||
					memcmp(&h1[j].distance, &hb[(size_t) i * k + j].distance, sizeof(float)) != 0)
				{
					bad++;
					EXPECT(false, "query %u rank %u: alone %" PRIu64 " %.9g, batch %" PRIu64 " %.9g",
						   i, j, h1[j].key, (double) h1[j].distance,
						   hb[(size_t) i * k + j].key, (double) hb[(size_t) i * k + j].distance);
					break;
				}
		}
		free(hb);
		free(fb);
	}
	compare_contents(&p, "tiles");
out:
	pair_close(&p);
	free(qs);
	free(lists);
	free(keys);
	free(pay);
}

/* exact ties: identical vectors under many keys, order by key */
static void
test_ties(void)
{
	pair		p;
	rng			r = {99};
	uint32_t	n = 3000;
	uint32_t	dim = 8;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	float	   *qs;
	uint32_t	i;

	if (!ivf_pair(&p, 8, dim, 2, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		uint32_t	j;

		for (j = 0; j < dim; j++)
			pay[(size_t) i * dim + j] = (float) (i % 5) * 0.25f;
		lists[i] = rbelow(&r, 8);
		keys[i] = (uint64_t) (n - i) * 3;
	}
	do_insert(&p, n, lists, keys, pay, "ties fill");
	qs = ivf_random_queries(&p, &r, 20);
	ivf_compare_search(&p, GI_METRIC_L2, 20, qs, 8, 10, "ties");
	ivf_compare_search(&p, GI_METRIC_L2, 20, qs, 8, 700, "ties, k 700");
	ivf_compare_search(&p, GI_METRIC_COSINE, 20, qs, 8, 2000, "ties, large k");
	ivf_compare_search(&p, GI_METRIC_IP, 20, qs, 3, 33, "ties, ip");
	free(qs);
out:
	pair_close(&p);
	free(lists);
	free(keys);
	free(pay);
}


/* ---- concurrency stress ---------------------------------------------------- */

typedef struct stress_shared
{
	pair	   *p;
	volatile int stop;
	uint32_t	nq;
	uint32_t	k;
	uint32_t	probes;
	const float *qs;
	/* reference over the records live throughout the epoch */
	const gi_hit *ref;
	const uint32_t *ref_found;
	/* key -> vector for everything that may be visible (unique keys) */
	const float *vec_of_key;
	const uint8_t *maybe_live;
	uint64_t	nkeys;
	/* results */
	uint64_t	searches;
	uint64_t	bad;
	char		msg[256];
} stress_shared;

static void *
stress_searcher(void *arg)
{
	stress_shared *sh = arg;
	pair	   *p = sh->p;
	gi_hit	   *h = malloc((size_t) sh->nq * sh->k * sizeof(gi_hit));
	uint32_t   *f = malloc(sh->nq * sizeof(uint32_t));

	while (!sh->stop)
	{
		gi_status	s = ivf_search(C, p, p->c, GI_METRIC_L2, sh->nq, sh->qs,
									  sh->probes, sh->k, h, f);
		uint32_t	q;

		sh->searches++;
		if (s != GI_OK)
		{
			if (sh->bad++ == 0)
				snprintf(sh->msg, sizeof(sh->msg), "search failed: %s", C->last_error());
			continue;
		}
		for (q = 0; q < sh->nq; q++)
		{
			const gi_hit *hq = h + (size_t) q * sh->k;
			const gi_hit *rq = sh->ref + (size_t) q * sh->k;
			uint32_t	r;

			if (f[q] < sh->ref_found[q])
			{
				if (sh->bad++ == 0)
					snprintf(sh->msg, sizeof(sh->msg), "query %u found %u < %u always-live records",
							 q, f[q], sh->ref_found[q]);
			}
			for (r = 0; r < f[q] && r < sh->k; r++)
			{
				uint64_t	key = hq[r].key;
				float		d;

				if (key >= sh->nkeys || !sh->maybe_live[key])
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg), "hit key %" PRIu64 " was never live", key);
					break;
				}
				/* a torn (half-written) record would not match its vector */
				d = ref_distance(GI_METRIC_L2, sh->qs + (size_t) q * p->words,
								 sh->vec_of_key + key * p->words, p->words);
				if (!dist_close(d, hq[r].distance))
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg),
								 "hit key %" PRIu64 " distance %.9g, its vector gives %.9g",
								 key, (double) hq[r].distance, (double) d);
					break;
				}
				/* never worse than the always-live records alone */
				if (r < sh->ref_found[q] && hq[r].distance > rq[r].distance &&
					!dist_close(hq[r].distance, rq[r].distance))
				{
					if (sh->bad++ == 0)
						snprintf(sh->msg, sizeof(sh->msg),
								 "rank %u distance %.9g worse than always-live %.9g", r,
								 (double) hq[r].distance, (double) rq[r].distance);
					break;
				}
			}
		}
	}
	free(h);
	free(f);
	return NULL;
}

static void
test_concurrent_stress(void)
{
	pair		p;
	rng			r = {31337};
	uint32_t	dim = 32;
	uint32_t	nlists = 64;
	uint64_t	nkeys = 200000;
	uint32_t	initial = (uint32_t) scaled(40000);
	uint32_t	batch = 200;
	int			epochs = scaled(6);
	int			batches = scaled(30);
	float	   *vec = malloc((size_t) nkeys * dim * sizeof(float));
	uint8_t    *live = calloc(nkeys, 1);
	uint8_t    *maybe = calloc(nkeys, 1);
	uint32_t   *lists = malloc(initial * sizeof(uint32_t) + batch * sizeof(uint32_t));
	uint64_t   *keys = malloc((initial + batch) * sizeof(uint64_t));
	uint64_t	next_key = 0;
	uint64_t	total_searches = 0;
	uint64_t	i;
	int			e;

	if (self_mode)
	{
		printf("  (skipped in self mode)\n");
		goto done;
	}
	if (!ivf_pair(&p, nlists, dim, 64, &r))
		goto done;
	cu_set_chunk(p.c, 37);
	for (i = 0; i < nkeys * dim; i++)
		vec[i] = rfloat(&r);
	for (i = 0; i < initial; i++)
	{
		keys[i] = next_key++;
		lists[i] = ivf_nearest_list(&p, vec + keys[i] * dim);
		live[keys[i]] = 1;
	}
	/* payloads: rows of vec in key order */
	do_insert(&p, initial, lists, keys, vec, "stress fill");

	for (e = 0; e < epochs && checks_failed == 0; e++)
	{
		stress_shared sh;
		pthread_t	th;
		uint64_t   *dels = malloc((size_t) batches * batch * sizeof(uint64_t));
		uint32_t	ndel = 0;
		/* odd epochs: a batch large enough for the multi-query tiles */
		uint32_t	nq = e % 2 ? 700 : 16;
		uint32_t	k = 20;
		float	   *qs = ivf_random_queries(&p, &r, nq);
		gi_hit	   *ref = malloc((size_t) nq * k * sizeof(gi_hit));
		uint32_t   *ref_found = malloc(nq * sizeof(uint32_t));
		int			b;

		/* this epoch deletes dels[] and inserts fresh keys */
		for (b = 0; b < batches * (int) batch / 2; b++)
		{
			uint64_t	key = rbelow(&r, (uint32_t) next_key);

			if (live[key])
			{
				live[key] = 0;
				dels[ndel++] = key;
			}
		}
		for (i = 0; i < next_key; i++)
			maybe[i] = live[i];
		/* reference: the host store without the deleted records */
		H->store_delete(p.h, ndel, dels, NULL);
		for (i = 0; i < ndel; i++)
			maybe[dels[i]] = 1;
		EXPECT(ivf_search(H, &p, p.h, GI_METRIC_L2, nq, qs, 8, k, ref, ref_found) == GI_OK,
			   "reference search");
		for (i = next_key; i < next_key + (uint64_t) batches * batch && i < nkeys; i++)
			maybe[i] = 1;

		memset(&sh, 0, sizeof(sh));
		sh.p = &p;
		sh.nq = nq;
		sh.k = k;
		sh.probes = 8;
		sh.qs = qs;
		sh.ref = ref;
		sh.ref_found = ref_found;
		sh.vec_of_key = vec;
		sh.maybe_live = maybe;
		sh.nkeys = nkeys;
		EXPECT(cu_set_concurrent(p.c, true) == GI_OK, "concurrent on");
		pthread_create(&th, NULL, stress_searcher, &sh);
		/* mutations interleaved: insert a batch, delete a batch, ... */
		{
			uint32_t	dpos = 0;

			for (b = 0; b < batches; b++)
			{
				uint64_t	n = 0;

				if (b % 2 == 0 && next_key + batch <= nkeys)
				{
					for (i = 0; i < batch; i++)
					{
						keys[i] = next_key + i;
						lists[i] = ivf_nearest_list(&p, vec + keys[i] * dim);
					}
					EXPECT(C->store_insert(p.c, batch, lists, keys, vec + next_key * dim, &n) == GI_OK &&
						   n == batch, "concurrent insert: %s", C->last_error());
					H->store_insert(p.h, batch, lists, keys, vec + next_key * dim, NULL);
					for (i = 0; i < batch; i++)
						live[next_key + i] = 1;
					next_key += batch;
				}
				else if (dpos < ndel)
				{
					uint32_t	m = ndel - dpos < batch ? ndel - dpos : batch;

					EXPECT(C->store_delete(p.c, m, dels + dpos, &n) == GI_OK && n == m,
						   "concurrent delete: %s", C->last_error());
					dpos += m;
				}
			}
			if (dpos < ndel)
			{
				uint64_t	n = 0;

				EXPECT(C->store_delete(p.c, ndel - dpos, dels + dpos, &n) == GI_OK,
					   "concurrent delete rest");
			}
		}
		sh.stop = 1;
		pthread_join(th, NULL);
		EXPECT(cu_set_concurrent(p.c, false) == GI_OK, "concurrent off: %s", C->last_error());
		EXPECT(sh.bad == 0, "epoch %d: %" PRIu64 " bad results of %" PRIu64 " searches; first: %s",
			   e, sh.bad, sh.searches, sh.msg);
		total_searches += sh.searches;
		compare_stats(&p, false, "after epoch");
		compare_contents(&p, "after epoch");
		ivf_compare_search(&p, GI_METRIC_L2, nq, qs, 8, k, "after epoch");
		free(dels);
		free(qs);
		free(ref);
		free(ref_found);
	}
	printf("  %" PRIu64 " searches ran concurrently with mutations\n", total_searches);
	EXPECT(total_searches >= (uint64_t) epochs, "searches did not run");
	pair_close(&p);
done:
	free(vec);
	free(live);
	free(maybe);
	free(lists);
	free(keys);
}


/* ---- arguments ----------------------------------------------------------------- */

/* the same status from both backends, GI_ERR_INVALID expected */
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
test_invalid(void)
{
	const gi_kind_ops *HK = H->kinds[GI_KIND_IVF];
	const gi_kind_ops *CK = C->kinds[GI_KIND_IVF];
	gi_store_params par;
	gi_store   *hs = NULL;
	gi_store   *cs = NULL;
	gi_ivf_state *st = calloc(1, gi_ivf_state_size(3, 4) + 64);
	size_t		bytes = gi_ivf_state_size(3, 4);
	gi_ivf_search_params sp = {4, 1};
	gi_hit		hit[4];
	uint32_t	found = 7;
	float		q[8] = {0};
	pair		p;
	rng			r = {42};

	memset(&par, 0, sizeof(par));
	par.nlists = 3;
	par.record_bytes = 16;
	par.key_mode = GI_KEYS_UNIQUE;
	EXPECT(H->store_create(&par, &hs) == GI_OK && C->store_create(&par, &cs) == GI_OK,
		   "create: %s", C->last_error());
	if (hs == NULL || cs == NULL)
		goto out;
	both_invalid(HK->search(hs, &sp, 1, q, 16, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 16, 1, hit, &found), "search before set_state");
	EXPECT(strstr(C->last_error(), "set_state") != NULL, "message: %s", C->last_error());

	st->dim = 4;
	st->metric = GI_METRIC_L2;
	st->nlists = 3;
	both_invalid(HK->set_state(hs, NULL, bytes), CK->set_state(cs, NULL, bytes), "NULL state");
	both_invalid(HK->set_state(hs, st, 8), CK->set_state(cs, st, 8), "state shorter than its header");
	both_invalid(HK->set_state(hs, st, bytes - 4), CK->set_state(cs, st, bytes - 4),
				 "state one float short");
	both_invalid(HK->set_state(hs, st, bytes + 4), CK->set_state(cs, st, bytes + 4),
				 "state one float long");
	st->nlists = 2;
	both_invalid(HK->set_state(hs, st, gi_ivf_state_size(2, 4)),
				 CK->set_state(cs, st, gi_ivf_state_size(2, 4)), "state of another list count");
	st->nlists = 3;
	st->dim = 3;
	both_invalid(HK->set_state(hs, st, gi_ivf_state_size(3, 3)),
				 CK->set_state(cs, st, gi_ivf_state_size(3, 3)), "state of another dimension");
	st->dim = 0;
	both_invalid(HK->set_state(hs, st, gi_ivf_state_size(3, 0)),
				 CK->set_state(cs, st, gi_ivf_state_size(3, 0)), "dimension 0");
	st->dim = 4;
	st->metric = 7;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "unknown metric");
	st->metric = GI_METRIC_COSINE;
	((float *) (st + 1))[5] = NAN;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "a NaN centroid");
	((float *) (st + 1))[5] = -INFINITY;
	both_invalid(HK->set_state(hs, st, bytes), CK->set_state(cs, st, bytes), "an infinite centroid");
	((float *) (st + 1))[5] = 0.0f;
	EXPECT(HK->set_state(hs, st, bytes) == GI_OK && CK->set_state(cs, st, bytes) == GI_OK,
		   "valid state: %s", C->last_error());

	sp.dim = 3;
	both_invalid(HK->search(hs, &sp, 1, q, 12, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 12, 1, hit, &found), "search of another dimension");
	sp.dim = 4;
	both_invalid(HK->search(hs, &sp, 1, q, 20, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 20, 1, hit, &found), "query bytes do not match nq");
	both_invalid(HK->search(hs, NULL, 1, q, 16, 1, hit, &found),
				 CK->search(cs, NULL, 1, q, 16, 1, hit, &found), "no parameters");
	sp.probes = 0;
	both_invalid(HK->search(hs, &sp, 1, q, 16, 1, hit, &found),
				 CK->search(cs, &sp, 1, q, 16, 1, hit, &found), "probes 0");
	sp.probes = 1;
	EXPECT(CK->search(cs, &sp, 0, q, 0, 1, hit, &found) == GI_OK, "nq 0 refused: %s",
		   C->last_error());
	found = 7;
	EXPECT(CK->search(cs, &sp, 1, q, 16, 0, NULL, &found) == GI_OK && found == 0,
		   "k 0: status or found %u", found);
	found = 7;
	EXPECT(CK->search(cs, &sp, 1, q, 16, 4, hit, &found) == GI_OK && found == 0 &&
		   hit[3].key == 0 && isinf(hit[3].distance), "empty store: found %u", found);

	/* empty store: padding only */
	if (ivf_pair(&p, 2, 4, 0, &r))
	{
		float	   *qs = ivf_random_queries(&p, &r, 3);

		ivf_compare_search(&p, GI_METRIC_L2, 3, qs, 1, 5, "empty store");
		ivf_compare_search(&p, GI_METRIC_COSINE, 2, qs, 9, 2000, "empty store, large k");
		free(qs);
		pair_close(&p);
	}
out:
	if (hs)
		H->store_destroy(hs);
	if (cs)
		C->store_destroy(cs);
	free(st);
}

/*
 * Lists at equal distances: 96 centroids that are five distinct points
 * (dimension 6, coordinates in halves), rows spread over all lists, and
 * queries that sit on a centroid, between centroids or anywhere, so that
 * many lists tie exactly and the P-th probed list is often one of a tie:
 * the probed lists must be the host's (by distance, then list number) on
 * the direct path (a few queries) and the DGEMM path (a batch), for each
 * metric and for probes at and between the ties; also distinct centroids,
 * whose selection ends before the last byte of the keys.
 */
static void
test_list_ties(void)
{
	pair		p;
	rng			r = {3141};
	uint32_t	n = 6000;
	uint32_t	dim = 6;
	uint32_t	nl = 96;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	static const uint32_t probes[] = {1, 3, 10, 11, 32, 95};
	uint32_t	nq = 60;
	float	   *qs = NULL;
	uint32_t	i;

	if (!ivf_pair(&p, nl, dim, 0, &r))
		goto out;
	for (int distinct = 0; distinct < 2; distinct++)
	{
		float	   *cent = ivf_centroids(&p);

		for (i = 0; i < nl * dim; i++)
			cent[i] = distinct ? rfloat(&r) :
				(float) ((int) ((i / dim) % 9 * 7 + i % dim) % 5) * 0.5f - 1.0f;
		ivf_resend(&p);
		if (distinct == 0)
		{
			for (i = 0; i < n; i++)
			{
				random_vector(&r, pay + (size_t) i * dim, dim, false);
				lists[i] = rbelow(&r, nl);
				keys[i] = 7 + (uint64_t) i * 5;
			}
			do_insert(&p, n, lists, keys, pay, "list ties fill");
		}
		free(qs);
		qs = ivf_random_queries(&p, &r, nq);
		for (uint32_t q = 0; q < nq; q++)
		{
			float	   *v = qs + (size_t) q * dim;
			const float *c = cent + (size_t) rbelow(&r, nl) * dim;
			const float *c2 = cent + (size_t) rbelow(&r, nl) * dim;

			if (q % 3 == 0)
				memcpy(v, c, dim * sizeof(float));
			else if (q % 3 == 1)
				for (uint32_t j = 0; j < dim; j++)
					v[j] = (c[j] + c2[j]) * 0.5f;
		}
		for (int m = 0; m < 3; m++)
			for (size_t t = 0; t < sizeof(probes) / sizeof(probes[0]); t++)
			{
				ivf_compare_search(&p, (gi_metric) m, 4, qs, probes[t], 10,
								   distinct ? "distinct centroids, few queries" :
								   "tied lists, few queries");
				ivf_compare_search(&p, (gi_metric) m, nq, qs, probes[t], 10,
								   distinct ? "distinct centroids, a batch" : "tied lists, a batch");
			}
	}
out:
	pair_close(&p);
	free(qs);
	free(lists);
	free(keys);
	free(pay);
}

/*
 * set_state once per store generation: the search uses the latest
 * state's centroids and metric; a state replaced after inserts moves
 * which lists are probed but not the records.
 */
static void
test_set_state(void)
{
	pair		p;
	rng			r = {2718};
	uint32_t	n = 3000;
	uint32_t	dim = 12;
	uint32_t	nlists = 20;
	uint32_t   *lists = malloc(n * sizeof(uint32_t));
	uint64_t   *keys = malloc(n * sizeof(uint64_t));
	float	   *pay = malloc((size_t) n * dim * sizeof(float));
	float	   *qs = NULL;
	uint32_t	i;
	int			round;

	if (!ivf_pair(&p, nlists, dim, 0, &r))
		goto out;
	for (i = 0; i < n; i++)
	{
		random_vector(&r, pay + (size_t) i * dim, dim, true);
		lists[i] = ivf_nearest_list(&p, pay + (size_t) i * dim);
		keys[i] = 11 + (uint64_t) i * 3;
	}
	do_insert(&p, n, lists, keys, pay, "set_state fill");
	qs = ivf_random_queries(&p, &r, 40);
	for (round = 0; round < 4; round++)
	{
		float	   *cent = ivf_centroids(&p);

		ivf_compare_search(&p, (gi_metric) (round % 3), 40, qs, 3, 10, "before new centroids");
		for (i = 0; i < nlists * dim; i++)
			cent[i] = rfloat(&r) * (float) (round + 1);
		ivf_resend(&p);
		ivf_compare_search(&p, (gi_metric) (round % 3), 40, qs, 3, 10, "after new centroids");
		ivf_compare_search(&p, (gi_metric) ((round + 1) % 3), 40, qs, 5, 300, "another metric");
	}
	compare_contents(&p, "set_state");
out:
	pair_close(&p);
	free(qs);
	free(lists);
	free(keys);
	free(pay);
}

/* ---- random differentials with searches ------------------------------------------ */

static void
ivf_diff(uint32_t nlists, uint32_t dim, uint32_t chunk, uint32_t key_mode, uint32_t keyspace,
		 int ops, uint64_t seed, uint32_t insert_chunk)
{
	diff_cfg	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.store.nlists = nlists;
	cfg.store.words = dim;
	cfg.store.chunk_slabs = chunk;
	cfg.store.key_mode = key_mode;
	cfg.store.kind = &ivf_kind;
	cfg.keyspace = keyspace;
	cfg.ops = ops;
	cfg.seed = seed;
	cfg.insert_chunk = insert_chunk;
	cfg.per_row = 1;
	random_differential(&cfg);
}

static void
test_diff_small_chunks(void)
{
	ivf_diff(16, 8, 1, GI_KEYS_UNIQUE, 3000, scaled(400), 1, 7);
}

static void
test_diff_multi_posting(void)
{
	ivf_diff(64, 33, 4, GI_KEYS_ANY, 800, scaled(400), 2, 50);
}

static void
test_diff_single_list(void)
{
	ivf_diff(1, 4, 2, GI_KEYS_UNIQUE, 2000, scaled(250), 3, 1);
}

static void
test_diff_many_lists(void)
{
	ivf_diff(300, 16, 0, GI_KEYS_UNIQUE, 20000, scaled(250), 4, 0);
}

static void
test_diff_wide(void)
{
	ivf_diff(32, 128, 8, GI_KEYS_UNIQUE, 6000, scaled(200), 5, 333);
}

static void
ivf_summary(void)
{
	if (hits_compared > 0)
		printf("ivf, ivfpq: hits compared: %" PRIu64 ", boundary ties accepted: %" PRIu64
		   ", max relative distance error (|d| >= 1e-2): %.3g\n",
		   hits_compared, ties_accepted, max_rel_err);
}

static const test_case ivf_tests[] = {
	{"ivf: invalid arguments and empty stores", test_invalid, false},
	{"ivf: set_state replaces centroids and metric", test_set_state, false},
	{"ivf: lists at equal distances probed as the host probes them", test_list_ties, false},
	{"random differential, 1-slab chunks", test_diff_small_chunks, false},
	{"random differential, multi-posting keys", test_diff_multi_posting, false},
	{"random differential, one list", test_diff_single_list, false},
	{"random differential, 300 lists", test_diff_many_lists, false},
	{"random differential, d=128", test_diff_wide, false},
	{"large k (sort path)", test_large_k, false},
	{"ivf: few queries, slab directory and chain walk", test_few_query_dir, false},
	{"large batches (multi-query tiles)", test_batch_tiles, false},
	{"exact distance ties", test_ties, false},
	{"concurrent search during insert/delete", test_concurrent_stress, false},
};

const test_suite ivf_suite = {ivf_tests, sizeof(ivf_tests) / sizeof(ivf_tests[0]), ivf_summary};
