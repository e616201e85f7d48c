/*
 * test_util.h
 *		What the host unit tests share: a seeded PRNG.
 */
#ifndef GI_TEST_UTIL_H
#define GI_TEST_UTIL_H

#include <stdint.h>

/* xorshift64*: fixed seeds make every run identical */
static uint64_t rng_state;

static inline void
rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 1;
}

static inline uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static inline uint32_t
rng_below(uint32_t n)
{
	return (uint32_t) ((rng_next() >> 32) % n);
}

static inline float
rng_float(void)
{
	/* uniform in [-1, 1) */
	return (float) ((double) (rng_next() >> 40) / (double) (1 << 23) - 1.0);
}

#endif							/* GI_TEST_UTIL_H */
