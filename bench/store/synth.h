/*
 * synth.h
 *		The store benchmark's synthetic data: SIFT-like vectors, N(center,
 *		0.25^2) around random centers in [-1, 1]^d, TID-like keys, queries
 *		from the same mixture and IVF centroids drawn from the data, all from
 *		one xorshift64* stream with a fixed seed.
 *
 * Shared by bench_store.c and bench/faiss-gpu/faiss_gpu_bench.cpp (C and
 * C++), so that both run on the same vectors, queries, centroids and delete
 * sets: the draws happen in this order, and a program that keeps drawing
 * with rnext() afterwards (bench_store's delete sets) gets the same values
 * in both.  Everything is static inline: one copy of the stream per program.
 */
#ifndef BENCH_SYNTH_H
#define BENCH_SYNTH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t synth_rs = 88172645463325252ull;

static inline uint64_t
rnext(void)
{
	synth_rs ^= synth_rs >> 12;
	synth_rs ^= synth_rs << 25;
	synth_rs ^= synth_rs >> 27;
	return synth_rs * UINT64_C(2685821657736338717);
}

static inline double
runif(void)
{
	return (double) (rnext() >> 11) / 9007199254740992.0;
}

static inline float
rgauss(void)
{
	double		u = runif() + 1e-12;
	double		v = runif();

	return (float) (sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/*
 * centers[nclusters * dim], x[N * dim] with keys[N], qs[NQ * dim],
 * cent[nlists * dim] (data points drawn at random): in this order.
 */
static inline void
synth_generate(uint32_t N, uint32_t dim, uint32_t nclusters, uint32_t NQ, uint32_t nlists,
			   float *centers, float *x, uint64_t *keys, float *qs, float *cent)
{
	size_t		rb = (size_t) dim * 4;
	uint32_t	i;

	for (i = 0; i < nclusters * dim; i++)
		centers[i] = (float) (2.0 * runif() - 1.0);
	for (i = 0; i < N; i++)
	{
		const float *c = centers + (size_t) (rnext() % nclusters) * dim;
		uint32_t	j;

		for (j = 0; j < dim; j++)
			x[(size_t) i * dim + j] = c[j] + 0.25f * rgauss();
		keys[i] = ((uint64_t) (i / 100) << 16) | (i % 100 + 1);	/* TID-like */
	}
	for (i = 0; i < NQ; i++)
	{
		const float *c = centers + (size_t) (rnext() % nclusters) * dim;
		uint32_t	j;

		for (j = 0; j < dim; j++)
			qs[(size_t) i * dim + j] = c[j] + 0.25f * rgauss();
	}
	for (i = 0; i < nlists; i++)
		memcpy(cent + (size_t) i * dim, x + (size_t) (rnext() % N) * dim, rb);
}

#endif							/* BENCH_SYNTH_H */
