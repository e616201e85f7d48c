/*
 * genie_keywords.c
 *		Hashing, words, n-grams and the two LSH families of the GENIE-style
 *		index (definitions in genie_keywords.h).
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genie_keywords.h"

#define GOLDEN64	UINT64_C(0x9E3779B97F4A7C15)
#define TWO_PI		6.283185307179586476925

/* ---- MurmurHash3 x86_32 ---- */

static inline uint32_t
rotl32(uint32_t x, int r)
{
	return (x << r) | (x >> (32 - r));
}

static inline uint32_t
murmur_scramble(uint32_t k)
{
	k *= 0xcc9e2d51;
	k = rotl32(k, 15);
	return k * 0x1b873593;
}

/* one 4-byte block (read little-endian) into the running hash */
static inline uint32_t
murmur_block(uint32_t h, uint32_t k)
{
	h ^= murmur_scramble(k);
	h = rotl32(h, 13);
	return h * 5 + 0xe6546b64;
}

static inline uint32_t
murmur_final(uint32_t h, uint32_t len)
{
	h ^= len;
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	return h ^ (h >> 16);
}

/* an int64 as two little-endian blocks: murmur of its 8 bytes, unfinished */
static inline uint32_t
murmur_int64(uint32_t h, int64_t v)
{
	uint64_t	u = (uint64_t) v;

	h = murmur_block(h, (uint32_t) u);
	return murmur_block(h, (uint32_t) (u >> 32));
}

static inline uint32_t
fetch(const unsigned char *p, bool fold)
{
	uint32_t	c = *p;

	if (fold && c - 'A' < 26u)
		c += 'a' - 'A';
	return c;
}

/* murmur3_32 of the bytes, with ASCII letters lower-cased when fold */
static uint32_t
murmur3_bytes(const unsigned char *p, size_t len, uint32_t seed, bool fold)
{
	size_t		nblocks = len / 4;
	uint32_t	h = seed;
	uint32_t	k = 0;
	size_t		i;

	for (i = 0; i < nblocks; i++, p += 4)
		h = murmur_block(h, fetch(p, fold) | fetch(p + 1, fold) << 8 |
						 fetch(p + 2, fold) << 16 | fetch(p + 3, fold) << 24);
	for (i = len & 3; i > 0; i--)
		k = (k << 8) | fetch(p + i - 1, fold);
	if (len & 3)
		h ^= murmur_scramble(k);
	return murmur_final(h, (uint32_t) len);
}

uint32_t
genie_murmur3_32(const void *key, size_t len, uint32_t seed)
{
	return murmur3_bytes(key, len, seed, false);
}

/* ---- 64-bit hashing and the parameters' PRNG ---- */

/* the splitmix64 finalizer, a bijection */
static inline uint64_t
mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static uint64_t
hash64_bytes(const unsigned char *p, size_t len, uint64_t seed, bool fold)
{
	uint64_t	s = mix64(seed + GOLDEN64);

	return (uint64_t) murmur3_bytes(p, len, (uint32_t) (s >> 32), fold) << 32 |
		murmur3_bytes(p, len, (uint32_t) s, fold);
}

uint64_t
genie_hash64(const void *key, size_t len, uint64_t seed)
{
	return hash64_bytes(key, len, seed, false);
}

/* splitmix64 uniform in (0, 1) */
static double
prng_uniform(uint64_t *state)
{
	*state += GOLDEN64;
	return ((double) (mix64(*state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double
prng_normal(uint64_t *state)
{
	double		u1 = prng_uniform(state);
	double		u2 = prng_uniform(state);

	return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
}

/* floor of x as an int64, saturating; NaN goes to INT64_MIN */
static int64_t
floor_int64(double x)
{
	if (!(x >= -9.2e18))
		return INT64_MIN;
	if (x >= 9.2e18)
		return INT64_MAX;
	return (int64_t) floor(x);
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static void
sort_u64(uint64_t *v, uint32_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(uint64_t), u64_cmp);
}

/* ---- UTF-8 ---- */

int
genie_utf8_charlen(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *) str;
	unsigned char lo = 0x80;
	unsigned char hi = 0xBF;
	size_t		n;
	size_t		i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		n = 2;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
	{
		n = 3;
		if (s[0] == 0xE0)
			lo = 0xA0;			/* overlong */
		else if (s[0] == 0xED)
			hi = 0x9F;			/* surrogates */
	}
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
	{
		n = 4;
		if (s[0] == 0xF0)
			lo = 0x90;			/* overlong */
		else if (s[0] == 0xF4)
			hi = 0x8F;			/* above U+10FFFF */
	}
	else
		return 1;
	if (len < n || s[1] < lo || s[1] > hi)
		return 1;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 1;
	return (int) n;
}

/* ---- words ---- */

static inline bool
is_word_byte(unsigned char c)
{
	return c >= 0x80 || (c >= '0' && c <= '9') ||
		(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* is x in the sorted v[0..n)? */
static bool
contains_u64(const uint64_t *v, uint32_t n, uint64_t x)
{
	uint32_t	lo = 0;
	uint32_t	hi = n;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == x;
}

static uint32_t
sort_unique(uint64_t *v, uint32_t n)
{
	uint32_t	k = 0;
	uint32_t	i;

	sort_u64(v, n);
	for (i = 0; i < n; i++)
		if (k == 0 || v[i] != v[k - 1])
			v[k++] = v[i];
	return k;
}

static uint32_t
count_words(const unsigned char *p, size_t len)
{
	uint32_t	n = 0;
	size_t		i;

	for (i = 0; i < len; i++)
		if (is_word_byte(p[i]) && (i == 0 || !is_word_byte(p[i - 1])))
			n++;
	return n;
}

/*
 * Words are appended after a sorted, distinct prefix of out; when out is
 * full it is sorted and de-duplicated again, and a word that then finds
 * neither a place nor itself in the prefix proves the capacity short.
 */
uint32_t
genie_words(const char *text, size_t len, uint64_t *out, uint32_t cap)
{
	const unsigned char *p = (const unsigned char *) text;
	uint32_t	n = 0;
	uint32_t	nsorted = 0;
	size_t		i = 0;

	while (i < len)
	{
		size_t		start;
		uint64_t	h;

		if (!is_word_byte(p[i]))
		{
			i++;
			continue;
		}
		start = i;
		while (i < len && is_word_byte(p[i]))
			i++;
		h = hash64_bytes(p + start, i - start, 0, true);
		if (contains_u64(out, nsorted, h))
			continue;
		if (n == cap)
		{
			n = nsorted = sort_unique(out, n);
			if (contains_u64(out, nsorted, h))
				continue;
			if (n == cap)
			{
				uint32_t	rest = count_words(p + i, len - i);

				/* this word and the rest, saturating */
				return rest < UINT32_MAX - cap ? cap + 1 + rest : UINT32_MAX;
			}
		}
		out[n++] = h;
	}
	return sort_unique(out, n);
}

/* ---- n-grams ---- */

uint32_t
genie_ngrams(const char *s, size_t len, int n, uint64_t *out, uint32_t cap)
{
	size_t		nchars = 0;
	size_t		start;
	size_t		end;
	uint32_t	count;
	uint32_t	i;
	uint32_t	j;
	uint64_t	prev = 0;

	if (n < 1)
		return 0;
	for (end = 0; end < len; nchars++)
		end += genie_utf8_charlen(s + end, len - end);
	if (nchars < (size_t) n)
		count = 1;
	else if (nchars - (size_t) n + 1 >= UINT32_MAX)
		return UINT32_MAX;
	else
		count = (uint32_t) (nchars - (size_t) n + 1);
	if (count > cap)
		return count;

	if (nchars < (size_t) n)
	{
		out[0] = mix64(genie_hash64(s, len, 0) + GOLDEN64);
		return 1;
	}

	/* every window of n characters, by its plain hash */
	for (end = 0, j = 0; j < (uint32_t) n; j++)
		end += genie_utf8_charlen(s + end, len - end);
	for (start = 0, i = 0; i < count; i++)
	{
		out[i] = genie_hash64(s + start, end - start, 0);
		start += genie_utf8_charlen(s + start, len - start);
		if (end < len)
			end += genie_utf8_charlen(s + end, len - end);
	}

	/* equal hashes are occurrences of one gram: number them 1, 2, ... */
	sort_u64(out, count);
	for (i = 0, j = 0; i < count; i++)
	{
		uint64_t	h = out[i];

		j = (i > 0 && h == prev) ? j + 1 : 1;
		prev = h;
		out[i] = mix64(h + (uint64_t) j * GOLDEN64);
	}
	sort_u64(out, count);
	return count;
}

/* ---- E2LSH ---- */

size_t
genie_e2lsh_params_size(uint32_t dim, uint32_t m)
{
	return (size_t) m * ((size_t) dim + 1);
}

void
genie_e2lsh_init(float *params, uint32_t dim, uint32_t m, float w,
				 uint64_t seed)
{
	uint64_t	state = seed;
	uint32_t	i;
	uint32_t	d;

	for (i = 0; i < m; i++)
	{
		float	   *p = params + (size_t) i * ((size_t) dim + 1);

		for (d = 0; d < dim; d++)
			p[d] = (float) prng_normal(&state);
		p[dim] = (float) (w * prng_uniform(&state));
		if (p[dim] >= w)		/* rounded up to w: the same shift as 0 */
			p[dim] = 0.0f;
	}
}

void
genie_e2lsh(const float *params, const float *v, uint32_t dim, uint32_t m,
			float w, uint32_t D, uint32_t *out)
{
	uint32_t	i;
	uint32_t	d;

	for (i = 0; i < m; i++)
	{
		const float *a = params + (size_t) i * ((size_t) dim + 1);
		double		dot = 0.0;
		int64_t		h;

		for (d = 0; d < dim; d++)
			dot += (double) a[d] * (double) v[d];
		h = floor_int64((dot + a[dim]) / w);
		out[i] = i * D + murmur_final(murmur_int64(i, h), 8) % D;
	}
}

/* ---- random binning ---- */

size_t
genie_rbin_params_size(uint32_t dim, uint32_t m)
{
	return (size_t) m * dim * 2;
}

void
genie_rbin_init(float *params, uint32_t dim, uint32_t m, float sigma,
				uint64_t seed)
{
	uint64_t	state = seed;
	size_t		k;

	for (k = 0; k < (size_t) m * dim; k++)
	{
		double		u1 = prng_uniform(&state);
		double		u2 = prng_uniform(&state);
		float		delta = (float) (-sigma * (log(u1) + log(u2)));
		float		u = (float) (delta * prng_uniform(&state));

		params[2 * k] = delta;
		params[2 * k + 1] = u < delta ? u : 0.0f;
	}
}

void
genie_rbin(const float *params, const float *v, uint32_t dim, uint32_t m,
		   uint32_t D, uint32_t *out)
{
	uint32_t	i;
	uint32_t	d;

	for (i = 0; i < m; i++)
	{
		const float *p = params + (size_t) i * dim * 2;
		uint32_t	h = i;

		for (d = 0; d < dim; d++)
			h = murmur_int64(h, floor_int64(((double) v[d] - p[2 * d + 1]) /
											p[2 * d]));
		out[i] = i * D + murmur_final(h, dim * 8) % D;
	}
}
