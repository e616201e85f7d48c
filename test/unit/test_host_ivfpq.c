/*
 * test_host_ivfpq.c
 *		cmocka tests of the host IVF-PQ kind (host_ivfpq.c) and of the
 *		encoder of gi_kind_ivfpq.h.
 *
 * The reference keeps every record's list and code and scores it here
 * from the reconstructed vector c + e (the definition in gi_kind_ivfpq.h,
 * not a look-up table), probing the lists with the nearest centroids
 * exactly as the IVF kind does; the expected answer is a full sort by
 * (distance, key), compared with a float tolerance.  The selective modes'
 * reference computes each sub-space's threshold from a sort of the
 * codebook's distances and a record's estimate as the sum of
 * min(table value, threshold) (juno) or from its hit counts (hits), in
 * double without the integer rewards, whose rounding the tolerance allows.
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
#include "host_pool.h"
#include "host_store.h"
#include "test_util.h"

static const gi_backend_ops *ops;

#define DIM		12
#define NLISTS	6
#define NREC	700

typedef struct ref_hit
{
	double		dist;
	uint64_t	key;
} ref_hit;

static int
ref_cmp(const void *a, const void *b)
{
	const ref_hit *x = a;
	const ref_hit *y = b;

	if (x->dist != y->dist)
		return x->dist < y->dist ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* the metric's distance of q to the reconstructed vector x */
static double
ref_distance(gi_metric metric, const float *q, const double *x)
{
	double		acc = 0.0;
	double		qn = 0.0;

	for (int j = 0; j < DIM; j++)
	{
		if (metric == GI_METRIC_L2)
			acc += ((double) q[j] - x[j]) * ((double) q[j] - x[j]);
		else
			acc += (double) q[j] * x[j];
		qn += (double) q[j] * q[j];
	}
	if (metric == GI_METRIC_L2)
		return acc;
	if (metric == GI_METRIC_IP)
		return -acc;
	return 1.0 - acc / sqrt(qn);
}

typedef struct ref_mode
{
	uint32_t	mode;			/* gi_pq_search_mode */
	uint32_t	select;
	float		scale;
} ref_mode;

static int
ref_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* the table value of (sub-space s, entry e) in distance sense, as a float */
static float
ref_value(gi_metric metric, const float *q, const float *c, const float *books,
		  uint32_t ksub, uint32_t dsub, uint32_t s, uint32_t e)
{
	double		acc = 0.0;

	for (uint32_t j = 0; j < dsub; j++)
	{
		double		qj = q[s * dsub + j];
		double		ev = books[((size_t) s * ksub + e) * dsub + j];

		if (metric == GI_METRIC_L2)
			acc += (qj - c[s * dsub + j] - ev) * (qj - c[s * dsub + j] - ev);
		else
			acc += qj * ev;
	}
	return metric == GI_METRIC_L2 ? (float) acc : -(float) acc;
}

/*
 * The threshold of sub-space s: around the entry with the smallest value,
 * the distance to its n-th nearest entry (itself first) by a full sort.
 */
static float
ref_threshold(gi_metric metric, const float *q, const float *books, uint32_t ksub,
			  uint32_t dsub, uint32_t s, float vmin, uint32_t emin, uint32_t n, float scale)
{
	double	   *d = malloc(sizeof(double) * ksub);
	double		r;
	double		qn = 0.0;

	for (uint32_t o = 0; o < ksub; o++)
	{
		d[o] = 0.0;
		for (uint32_t j = 0; j < dsub; j++)
		{
			double		t = (double) books[((size_t) s * ksub + emin) * dsub + j] -
				books[((size_t) s * ksub + o) * dsub + j];

			d[o] += t * t;
		}
	}
	qsort(d, ksub, sizeof(double), ref_cmp_double);
	r = (float) sqrt(d[(n < ksub ? n : ksub) - 1]);
	free(d);
	if (metric == GI_METRIC_L2)
		return (float) ((sqrt(vmin) + (double) scale * r) * (sqrt(vmin) + (double) scale * r));
	for (uint32_t j = 0; j < dsub; j++)
		qn += (double) q[s * dsub + j] * q[s * dsub + j];
	return (float) (vmin + sqrt(qn) * ((double) scale * r));
}

/*
 * A selective mode's estimate of a record with entries code[0 .. m) into
 * *dist, and how far the integer rewards may move it (tol).
 */
static void
ref_selective(gi_metric metric, const ref_mode *mo, const float *q, const float *c,
			  const float *books, uint32_t m, uint32_t ksub, const uint8_t *code,
			  double *dist, double *tol)
{
	uint32_t	dsub = DIM / m;
	double		sum_tau = 0.0;
	double		span = 0.0;
	double		rmax = 0.0;
	double		sum = 0.0;
	uint32_t	hits = 0;
	double		qc = 0.0;
	double		qn = 0.0;
	double		d;

	for (uint32_t s = 0; s < m; s++)
	{
		float		vmin = 0.0f;
		uint32_t	emin = 0;
		float		tau;
		float		tau_in;
		float		v;

		for (uint32_t e = 0; e < ksub; e++)
		{
			float		x = ref_value(metric, q, c, books, ksub, dsub, s, e);

			if (e == 0 || x < vmin)
			{
				vmin = x;
				emin = e;
			}
		}
		tau = ref_threshold(metric, q, books, ksub, dsub, s, vmin, emin, mo->select, mo->scale);
		tau_in = ref_threshold(metric, q, books, ksub, dsub, s, vmin, emin,
							   mo->select >= 4 ? mo->select / 4 : 1, mo->scale);
		sum_tau += tau;
		span += (double) tau - vmin;
		if ((double) tau - vmin > rmax)
			rmax = (double) tau - vmin;
		v = ref_value(metric, q, c, books, ksub, dsub, s, code[s]);
		sum += v < tau ? v : tau;
		hits += v <= tau_in ? 2 : v <= tau ? 1 : 0;
	}
	if (mo->mode == GI_PQ_SEARCH_HITS)
	{
		d = sum_tau - span / (2.0 * m) * hits;
		*tol = 1e-9;
	}
	else
	{
		d = sum;
		*tol = m * rmax / 65535.0;
	}
	for (int j = 0; j < DIM; j++)
	{
		qc += (double) q[j] * c[j];
		qn += (double) q[j] * q[j];
	}
	if (metric == GI_METRIC_IP)
		d = -(qc - d);
	else if (metric == GI_METRIC_COSINE)
	{
		d = 1.0 - (qc - d) / sqrt(qn);
		*tol /= sqrt(qn);
	}
	*dist = d;
}

/* the IVF kind's choice of lists: (centroid distance, list) */
static void
ref_probe(gi_metric metric, const float *cent, const float *q, uint32_t probes,
		  bool *probed)
{
	ref_hit		l[NLISTS];

	for (uint32_t i = 0; i < NLISTS; i++)
	{
		double		x[DIM];
		double		qn = 0.0;
		double		cn = 0.0;
		double		acc = 0.0;

		for (int j = 0; j < DIM; j++)
		{
			x[j] = cent[i * DIM + j];
			qn += (double) q[j] * q[j];
			cn += x[j] * x[j];
			acc += (double) q[j] * x[j];
		}
		l[i].key = i;
		if (metric == GI_METRIC_COSINE)
			l[i].dist = 1.0 - acc / (sqrt(qn) * sqrt(cn));
		else
			l[i].dist = ref_distance(metric, q, x);
		probed[i] = false;
	}
	qsort(l, NLISTS, sizeof(ref_hit), ref_cmp);
	for (uint32_t i = 0; i < probes; i++)
		probed[l[i].key] = true;
}

/*
 * The store's record of entries ent[0 .. m), written here by hand: one
 * byte a sub-space, or for 4-bit codes sub-space s in byte s / 2, the low
 * half first; zeros after the last code.
 */
static void
pack_record(const uint8_t *ent, uint32_t m, uint32_t code_bits, uint8_t *rec)
{
	for (uint32_t s = 0; s < m; s++)
	{
		if (code_bits == 8)
			rec[s] = ent[s];
		else if (s % 2 == 0)
			rec[s / 2] = ent[s];
		else
			rec[s / 2] |= (uint8_t) (ent[s] << 4);
	}
}

static void
run_mode_bits(gi_metric metric, uint32_t m, uint32_t ksub, uint32_t code_bits,
			  uint32_t probes, const ref_mode *mo)
{
	uint32_t	dsub = DIM / m;
	size_t		bytes = gi_ivfpq_state_size(NLISTS, DIM, ksub);
	gi_ivfpq_state *st = calloc(1, bytes);
	float	   *cent = (float *) (st + 1);
	float	   *books = cent + NLISTS * DIM;
	uint32_t	rb = gi_ivfpq_record_bytes(m, code_bits);
	uint8_t    *codes = calloc(NREC, rb);
	uint8_t    *ents = calloc(NREC, m);
	uint32_t   *lists = malloc(sizeof(uint32_t) * NREC);
	uint64_t   *keys = malloc(sizeof(uint64_t) * NREC);
	gi_store_params sp = {.nlists = NLISTS, .record_bytes = rb, .key_mode = GI_KEYS_UNIQUE};
	gi_store   *s;
	const gi_kind_ops *kind = ops->kinds[GI_KIND_IVFPQ];
	float		q[DIM];
	gi_ivfpq_search_params p = {.ivf = {.dim = DIM, .probes = probes},
	.mode = mo->mode, .select = mo->select, .scale = mo->scale};
	uint32_t	k = 15;
	gi_hit		hits[15];
	uint32_t	found;

	st->ivf.dim = DIM;
	st->ivf.metric = metric;
	st->ivf.nlists = NLISTS;
	st->m = m;
	st->ksub = ksub;
	st->code_bits = code_bits;
	assert_int_equal(rb, code_bits == 8 ? (m + 3) / 4 * 4 : (m + 7) / 8 * 4);
	for (uint32_t i = 0; i < NLISTS * DIM; i++)
		cent[i] = 3.0f * rng_float();
	for (uint32_t i = 0; i < ksub * DIM; i++)
		books[i] = rng_float();
	assert_int_equal(ops->store_create(&sp, &s), GI_OK);
	if (kind->set_state(s, st, bytes) != GI_OK)
		fail_msg("%s", ops->last_error());
	for (uint32_t i = 0; i < NREC; i++)
	{
		lists[i] = rng_below(NLISTS);
		keys[i] = 1000 + i;
		for (uint32_t j = 0; j < m; j++)
			ents[(size_t) i * m + j] = (uint8_t) rng_below(ksub);
		pack_record(ents + (size_t) i * m, m, code_bits, codes + (size_t) i * rb);
	}
	assert_int_equal(ops->store_insert(s, NREC, lists, keys, codes, NULL), GI_OK);
	/* a deleted record never comes back */
	assert_int_equal(ops->store_delete(s, 1, &keys[7], NULL), GI_OK);

	for (int t = 0; t < 10; t++)
	{
		bool		probed[NLISTS];
		ref_hit    *ref = malloc(sizeof(ref_hit) * NREC);
		uint32_t	nref = 0;
		double		maxtol = 0.0;

		for (int j = 0; j < DIM; j++)
			q[j] = 3.0f * rng_float();
		ref_probe(metric, cent, q, probes, probed);
		for (uint32_t i = 0; i < NREC; i++)
		{
			double		x[DIM];

			if (i == 7 || !probed[lists[i]])
				continue;
			if (mo->mode != GI_PQ_SEARCH_LUT)
			{
				double		tol;

				ref_selective(metric, mo, q, cent + lists[i] * DIM, books, m, ksub,
							  ents + (size_t) i * m, &ref[nref].dist, &tol);
				if (tol > maxtol)
					maxtol = tol;
			}
			else
			{
				for (uint32_t s2 = 0; s2 < m; s2++)
					for (uint32_t j = 0; j < dsub; j++)
						x[s2 * dsub + j] = (double) cent[lists[i] * DIM + s2 * dsub + j] +
							books[((size_t) s2 * ksub + ents[(size_t) i * m + s2]) * dsub + j];
				ref[nref].dist = ref_distance(metric, q, x);
			}
			ref[nref].key = keys[i];
			nref++;
		}
		qsort(ref, nref, sizeof(ref_hit), ref_cmp);
		assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), k, hits, &found), GI_OK);
		assert_int_equal(found, nref < k ? nref : k);
		for (uint32_t r = 0; r < found; r++)
		{
			double		tol = 1e-4 * (1.0 + fabs(ref[r].dist)) + maxtol;

			assert_true(fabs(hits[r].distance - ref[r].dist) <= tol);
			/*
			 * L2 tables: each entry's value as a float from double sums in
			 * coordinate order, the record's estimate their double sum in
			 * sub-space order, exactly (what the CUDA backend matches bit for bit)
			 */
			if (metric == GI_METRIC_L2 && mo->mode == GI_PQ_SEARCH_LUT)
			{
				uint32_t	i = (uint32_t) (hits[r].key - 1000);
				double		est = 0.0;

				for (uint32_t s2 = 0; s2 < m; s2++)
					est += (double) ref_value(metric, q, cent + lists[i] * DIM, books, ksub,
											  dsub, s2, ents[(size_t) i * m + s2]);
				assert_true(hits[r].distance == (float) est);
			}
			/* the same record, unless two distances lie within rounding */
			if (hits[r].key != ref[r].key)
				assert_true(fabs(ref[r].dist - ref[r + (r + 1 < nref)].dist) <= 2 * tol ||
							(r > 0 && fabs(ref[r].dist - ref[r - 1].dist) <= 2 * tol));
		}
		free(ref);
	}
	ops->store_destroy(s);
	free(keys);
	free(lists);
	free(codes);
	free(ents);
	free(st);
}

/* one byte a code; and, for up to 16 entries, the packed 4-bit codes too */
static void
run_mode(gi_metric metric, uint32_t m, uint32_t ksub, uint32_t probes, const ref_mode *mo)
{
	run_mode_bits(metric, m, ksub, 8, probes, mo);
	if (ksub <= 16)
		run_mode_bits(metric, m, ksub, 4, probes, mo);
}

static const ref_mode lut = {GI_PQ_SEARCH_LUT, 16, 1.0f};

static void
test_pq_l2(void **state)
{
	(void) state;
	rng_seed(41);
	run_mode(GI_METRIC_L2, 6, 256, 3, &lut);
	run_mode(GI_METRIC_L2, 12, 16, NLISTS, &lut);
	/* an odd number of 4-bit codes, the last word part empty */
	run_mode(GI_METRIC_L2, 3, 8, NLISTS, &lut);
	run_mode(GI_METRIC_L2, 6, 16, 2, &lut);
}

static void
test_pq_ip_cosine(void **state)
{
	(void) state;
	rng_seed(42);
	run_mode(GI_METRIC_IP, 4, 64, 2, &lut);
	run_mode(GI_METRIC_COSINE, 3, 256, NLISTS, &lut);
	run_mode(GI_METRIC_IP, 12, 16, 2, &lut);
	run_mode(GI_METRIC_COSINE, 6, 16, NLISTS, &lut);
}

/* JUNO's threshold search and its hit counts, every metric, several selections */
static void
test_pq_selective(void **state)
{
	const ref_mode modes[] = {
		{GI_PQ_SEARCH_JUNO, 16, 1.0f},
		{GI_PQ_SEARCH_JUNO, 1, 1.0f},
		{GI_PQ_SEARCH_JUNO, 256, 0.5f},
		{GI_PQ_SEARCH_HITS, 32, 1.0f},
		{GI_PQ_SEARCH_HITS, 4, 2.0f},
	};

	(void) state;
	rng_seed(43);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
	{
		run_mode(GI_METRIC_L2, 6, 256, 3, &modes[i]);
		run_mode(GI_METRIC_L2, 12, 16, NLISTS, &modes[i]);
		run_mode(GI_METRIC_IP, 4, 64, 2, &modes[i]);
		run_mode(GI_METRIC_COSINE, 3, 256, NLISTS, &modes[i]);
		run_mode(GI_METRIC_IP, 4, 16, 2, &modes[i]);
	}
}

/* the encoder: per sub-space the nearest entry, the lowest on ties */
static void
test_pq_encode(void **state)
{
	float		books[2 * 4 * 2] = {
		/* sub-space 0: four entries of 2 floats */
		0, 0, 1, 0, 0, 1, 1, 0,
		/* sub-space 1 */
		5, 5, -1, -1, 2, 2, 3, 3,
	};
	float		r[4] = {0.9f, 0.1f, 2.4f, 2.6f};
	uint8_t		code[4];

	(void) state;
	memset(code, 0xAB, sizeof(code));
	gi_pq_encode(books, 2, 4, 2, 8, r, code);
	assert_int_equal(code[0], 1);	/* entry 3 equals entry 1: the lower wins */
	assert_int_equal(code[1], 2);	/* (2.4, 2.6) is as near (2,2) as (3,3) */
	assert_int_equal(code[2], 0);	/* the padding is zeroed */
	assert_int_equal(code[3], 0);
	/* 4-bit codes: sub-space 0 in the low half of byte 0, 1 in its high half */
	memset(code, 0xAB, sizeof(code));
	gi_pq_encode(books, 2, 4, 2, 4, r, code);
	assert_int_equal(code[0], 0x21);
	assert_int_equal(code[1], 0);
	assert_int_equal(code[3], 0);
	assert_int_equal(gi_pq_code_get(code, 0, 4), 1);
	assert_int_equal(gi_pq_code_get(code, 1, 4), 2);
	assert_int_equal(gi_ivfpq_record_bytes(1, 8), 4);
	assert_int_equal(gi_ivfpq_record_bytes(8, 8), 8);
	assert_int_equal(gi_ivfpq_record_bytes(9, 8), 12);
	assert_int_equal(gi_ivfpq_record_bytes(1, 4), 4);
	assert_int_equal(gi_ivfpq_record_bytes(8, 4), 4);
	assert_int_equal(gi_ivfpq_record_bytes(9, 4), 8);
	assert_int_equal(gi_ivfpq_record_bytes(64, 4), 32);
	assert_true(gi_ivfpq_code_bits_valid(4, 16));
	assert_false(gi_ivfpq_code_bits_valid(4, 32));
	assert_false(gi_ivfpq_code_bits_valid(2, 4));
	assert_true(gi_ivfpq_code_bits_valid(8, 256));
}

/* states that do not fit the store are refused */
static void
test_pq_bad_state(void **state)
{
	size_t		bytes = gi_ivfpq_state_size(2, 8, 16);
	gi_ivfpq_state *st = calloc(1, gi_ivfpq_state_size(2, 8, 32));
	gi_store_params sp = {.nlists = 2, .record_bytes = 4, .key_mode = GI_KEYS_UNIQUE};
	gi_store   *s;
	const gi_kind_ops *kind = ops->kinds[GI_KIND_IVFPQ];
	gi_ivfpq_search_params p = {.ivf = {.dim = 8, .probes = 1}, .select = 16, .scale = 1.0f};
	float		q[8] = {0};
	gi_hit		hits[2];
	uint32_t	found;

	(void) state;
	st->ivf.dim = 8;
	st->ivf.nlists = 2;
	st->ivf.metric = GI_METRIC_L2;
	st->m = 4;
	st->ksub = 16;
	st->code_bits = 8;
	assert_int_equal(ops->store_create(&sp, &s), GI_OK);
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	st->m = 3;					/* does not divide 8 */
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	st->m = 8;					/* 8 code bytes, the store has 4 */
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	st->m = 4;
	st->ksub = 300;
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	st->ksub = 16;
	st->code_bits = 0;
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	st->code_bits = 4;			/* 4 codes of 4 bits fill 2 bytes, padded to 4: fits */
	st->m = 16;					/* 16 of 4 bits: 8 bytes, the store has 4 */
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	st->m = 8;					/* 8 of 4 bits: 4 bytes */
	assert_int_equal(kind->set_state(s, st, bytes), GI_OK);
	st->ksub = 32;				/* 32 entries do not fit 4 bits */
	assert_int_equal(kind->set_state(s, st, gi_ivfpq_state_size(2, 8, 32)), GI_ERR_INVALID);
	st->ksub = 16;
	st->m = 4;
	st->code_bits = 8;
	assert_int_equal(kind->set_state(s, st, bytes - 4), GI_ERR_INVALID);
	/* NaN or infinite centroids and codebook values: the first and the last value */
	((float *) (st + 1))[2 * 8 + 16 * 8 - 1] = NAN;
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	assert_non_null(strstr(ops->last_error(), "NaN or infinite"));
	((float *) (st + 1))[2 * 8 + 16 * 8 - 1] = 0.0f;
	((float *) (st + 1))[0] = -INFINITY;
	assert_int_equal(kind->set_state(s, st, bytes), GI_ERR_INVALID);
	((float *) (st + 1))[0] = 0.0f;
	assert_int_equal(kind->set_state(s, st, bytes), GI_OK);
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_OK);
	assert_int_equal(found, 0);
	/* search modes and selections out of range */
	p.mode = 3;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.mode = GI_PQ_SEARCH_JUNO;
	p.select = 12;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.select = 512;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.select = 16;
	p.scale = 0.0f;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.scale = NAN;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.scale = INFINITY;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.select = 0;
	p.scale = 1.0f;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_ERR_INVALID);
	p.select = 16;
	assert_int_equal(kind->search(s, &p, 1, q, sizeof(q), 2, hits, &found), GI_OK);
	ops->store_destroy(s);
	free(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pq_l2),
		cmocka_unit_test(test_pq_ip_cosine),
		cmocka_unit_test(test_pq_selective),
		cmocka_unit_test(test_pq_encode),
		cmocka_unit_test(test_pq_bad_state),
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
