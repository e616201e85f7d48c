/*
 * gi_kmeans.h
 *		Pieces of the CREATE INDEX k-means that every implementation must
 *		share exactly: the seeded PRNG and the preparation of the samples.
 *
 * Header-only plain C (static inline), included by the host reference
 * (host_kmeans.c, which the access method runs) and by the CUDA module
 * (cuda/kmeans/cuda_kmeans.cu, whose k-means++ draws run in a device kernel: the
 * functions are __host__ __device__ there).
 *
 * The PRNG is PostgreSQL's pg_prng (src/common/pg_prng.c, xoroshiro128**
 * seeded through splitmix64), reproduced draw for draw so that the
 * access method's centroids did not change when its k-means moved out of
 * the server code: gi_prng_seed, gi_prng_u64_range and gi_prng_double
 * return exactly what pg_prng_seed, pg_prng_uint64_range and
 * pg_prng_double return (test/unit checks known values).
 */
#ifndef GI_KMEANS_H
#define GI_KMEANS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GI_KM_HD __host__ __device__
#else
#define GI_KM_HD
#endif

typedef struct gi_prng
{
	uint64_t	s0;
	uint64_t	s1;
} gi_prng;

static inline GI_KM_HD uint64_t
gi_prng_rotl(uint64_t x, int bits)
{
	return (x << bits) | (x >> (64 - bits));
}

static inline GI_KM_HD uint64_t
gi_prng_next(gi_prng *st)
{
	uint64_t	s0 = st->s0;
	uint64_t	sx = st->s1 ^ s0;
	uint64_t	val = gi_prng_rotl(s0 * 5, 7) * 9;

	st->s0 = gi_prng_rotl(s0, 24) ^ sx ^ (sx << 16);
	st->s1 = gi_prng_rotl(sx, 37);
	return val;
}

static inline GI_KM_HD uint64_t
gi_prng_splitmix64(uint64_t *state)
{
	uint64_t	val = (*state += UINT64_C(0x9E3779B97f4A7C15));

	val = (val ^ (val >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	val = (val ^ (val >> 27)) * UINT64_C(0x94D049BB133111EB);
	return val ^ (val >> 31);
}

static inline GI_KM_HD void
gi_prng_seed(gi_prng *st, uint64_t seed)
{
	st->s0 = gi_prng_splitmix64(&seed);
	st->s1 = gi_prng_splitmix64(&seed);
	if (st->s0 == 0 && st->s1 == 0)
	{
		st->s0 = UINT64_C(0x5851F42D4C957F2D);
		st->s1 = UINT64_C(0x14057B7EF767814F);
	}
}

/* uniform in [rmin, rmax] (pg_prng_uint64_range: bitmask rejection) */
static inline GI_KM_HD uint64_t
gi_prng_u64_range(gi_prng *st, uint64_t rmin, uint64_t rmax)
{
	uint64_t	val = 0;

	if (rmax > rmin)
	{
		uint64_t	range = rmax - rmin;
		int			top = 63;
		int			rshift;

		while (!((range >> top) & 1))
			top--;
		rshift = 63 - top;
		do
		{
			val = gi_prng_next(st) >> rshift;
		} while (val > range);
	}
	return rmin + val;
}

/* uniform in [0, 1) with 52 random bits (pg_prng_double) */
static inline GI_KM_HD double
gi_prng_double(gi_prng *st)
{
	uint64_t	v = gi_prng_next(st);

	return (double) (v >> (64 - 52)) * (1.0 / 4503599627370496.0);
}

/*
 * Scale to unit length: n = sum of squares in double, dimension order,
 * then v[i] = (float) (v[i] / sqrt(n)).  False (v unchanged) for a zero
 * vector.  The CUDA module normalises centroids on the device with the
 * same operations, never contracted.
 */
static inline bool
gi_kmeans_normalize(float *v, uint32_t dim)
{
	double		n = 0.0;
	uint32_t	i;

	for (i = 0; i < dim; i++)
		n += (double) v[i] * v[i];
	if (n == 0.0)
		return false;
	n = sqrt(n);
	for (i = 0; i < dim; i++)
		v[i] = (float) (v[i] / n);
	return true;
}

/*
 * Prepare n samples in place for training: for the spherical metrics
 * (IP, cosine) drop zero vectors (no direction) and normalise the rest,
 * keeping their order.  Returns the number of usable samples, now packed
 * at the front.
 */
static inline uint32_t
gi_kmeans_prepare(float *samples, uint32_t n, uint32_t dim, bool spherical)
{
	uint32_t	kept = 0;
	uint32_t	i;

	if (!spherical)
		return n;
	for (i = 0; i < n; i++)
	{
		float	   *x = samples + (size_t) i * dim;

		if (!gi_kmeans_normalize(x, dim))
			continue;
		if (kept != i)
			memmove(samples + (size_t) kept * dim, x, dim * sizeof(float));
		kept++;
	}
	return kept;
}

/*
 * Dot product in float with eight partial sums: the order of the sums is
 * part of the CPU k-means' deterministic result, so every CPU caller uses
 * this one.  Where the compiler has vector types, sums 0-3 and 4-7 are the
 * lanes of two 4-float vectors: each lane still rounds the same products
 * and sums in the same order, so the result is the scalar loop's, to the
 * bit, at a quarter of the instructions.
 */
#if defined(__GNUC__) && !defined(__CUDACC__)
#define GI_KM_VECTORS 1
typedef float gi_km_v4sf __attribute__((vector_size(16)));

static inline gi_km_v4sf
gi_km_load4(const float *p)
{
	gi_km_v4sf	v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline float
gi_km_dot(const float *a, const float *b, uint32_t dim)
{
	gi_km_v4sf	lo = {0, 0, 0, 0};
	gi_km_v4sf	hi = {0, 0, 0, 0};
	uint32_t	i = 0;

	for (; i + 8 <= dim; i += 8)
	{
		lo += gi_km_load4(a + i) * gi_km_load4(b + i);
		hi += gi_km_load4(a + i + 4) * gi_km_load4(b + i + 4);
	}
	for (; i < dim; i++)
		lo[0] += a[i] * b[i];
	return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
}
#else
static inline float
gi_km_dot(const float *a, const float *b, uint32_t dim)
{
	float		s0 = 0,
				s1 = 0,
				s2 = 0,
				s3 = 0,
				s4 = 0,
				s5 = 0,
				s6 = 0,
				s7 = 0;
	uint32_t	i = 0;

	for (; i + 8 <= dim; i += 8)
	{
		s0 += a[i] * b[i];
		s1 += a[i + 1] * b[i + 1];
		s2 += a[i + 2] * b[i + 2];
		s3 += a[i + 3] * b[i + 3];
		s4 += a[i + 4] * b[i + 4];
		s5 += a[i + 5] * b[i + 5];
		s6 += a[i + 6] * b[i + 6];
		s7 += a[i + 7] * b[i + 7];
	}
	for (; i < dim; i++)
		s0 += a[i] * b[i];
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}
#endif

#endif							/* GI_KMEANS_H */
