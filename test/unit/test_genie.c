/*
 * test_genie.c
 *		cmocka tests of the GENIE building blocks: hashing, words, n-grams,
 *		E2LSH and random binning (genie_keywords.c), edit distance and the
 *		n-gram count bound (genie_edit.c).
 *
 * Every reference is independent of the code under test: published
 * MurmurHash3 vectors and values computed with Python's mmh3 (the 64-bit
 * hash and the keyword formulas re-derived on top of it), strings built
 * character by character so that grams and edit distances are counted by
 * brute force on the characters, and the collision probabilities that the
 * LSH families' formulas predict.
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

#include "genie_edit.h"
#include "genie_keywords.h"
#include "test_util.h"

#define MAXC 400				/* characters in a test string */

/* test strings are arrays of indices into this palette */
static const char *const palette[] = {
	"a", "b", "c", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e",
	"\xff", "\x80"				/* invalid bytes: a character each */
};
#define NPALETTE 8

typedef struct tstr
{
	int			n;
	int			c[MAXC];
} tstr;

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* random string of n characters from the first nsym palette entries */
static void
random_tstr(tstr *s, int n, int nsym)
{
	s->n = n;
	for (int i = 0; i < n; i++)
		s->c[i] = (int) rng_below(nsym);
}

static size_t
tstr_bytes(const tstr *s, char *buf)
{
	size_t		len = 0;

	for (int i = 0; i < s->n; i++)
	{
		size_t		l = strlen(palette[s->c[i]]);

		memcpy(buf + len, palette[s->c[i]], l);
		len += l;
	}
	return len;
}

/* one random insertion, deletion or substitution */
static void
random_edit(tstr *s, int nsym)
{
	int			op = (int) rng_below(3);

	if (s->n == 0 || (op == 0 && s->n < MAXC))
	{
		int			at = (int) rng_below(s->n + 1);

		memmove(s->c + at + 1, s->c + at, sizeof(int) * (s->n - at));
		s->c[at] = (int) rng_below(nsym);
		s->n++;
	}
	else if (op == 1)
	{
		int			at = (int) rng_below(s->n);

		memmove(s->c + at, s->c + at + 1, sizeof(int) * (s->n - at - 1));
		s->n--;
	}
	else
		s->c[rng_below(s->n)] = (int) rng_below(nsym);
}

/* plain O(n m) edit distance over the characters */
static int
ref_levenshtein(const tstr *a, const tstr *b)
{
	static int	d[MAXC + 1][MAXC + 1];

	for (int i = 0; i <= a->n; i++)
		d[i][0] = i;
	for (int j = 0; j <= b->n; j++)
		d[0][j] = j;
	for (int i = 1; i <= a->n; i++)
		for (int j = 1; j <= b->n; j++)
		{
			int			v = d[i - 1][j - 1] + (a->c[i - 1] != b->c[j - 1]);

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			d[i][j] = v;
		}
	return d[a->n][b->n];
}

/* the number of grams of s; *glen gets their length in characters */
static int
gram_count(const tstr *s, int n, int *glen)
{
	*glen = s->n < n ? s->n : n;
	return s->n < n ? 1 : s->n - n + 1;
}

static int
occurrences(const tstr *s, int n, const int *g, int glen)
{
	int			len;
	int			count = gram_count(s, n, &len);
	int			occ = 0;

	if (len != glen)
		return 0;
	for (int k = 0; k < count; k++)
		if (memcmp(s->c + k, g, sizeof(int) * glen) == 0)
			occ++;
	return occ;
}

/* sum over the distinct grams g of a of min(occ_a(g), occ_b(g)) */
static int
ref_shared_grams(const tstr *a, const tstr *b, int n)
{
	int			glen;
	int			count = gram_count(a, n, &glen);
	int			shared = 0;

	for (int k = 0; k < count; k++)
	{
		int			first = 1;
		int			oa;
		int			ob;

		for (int e = 0; e < k && first; e++)
			if (memcmp(a->c + e, a->c + k, sizeof(int) * glen) == 0)
				first = 0;
		if (!first)
			continue;
		oa = occurrences(a, n, a->c + k, glen);
		ob = occurrences(b, n, a->c + k, glen);
		shared += oa < ob ? oa : ob;
	}
	return shared;
}

static int
sorted_intersection(const uint64_t *x, int nx, const uint64_t *y, int ny)
{
	int			i = 0;
	int			j = 0;
	int			n = 0;

	while (i < nx && j < ny)
	{
		if (x[i] < y[j])
			i++;
		else if (x[i] > y[j])
			j++;
		else
		{
			n++;
			i++;
			j++;
		}
	}
	return n;
}

/* ---- hashing ---- */

typedef struct murmur_vec
{
	const char *key;
	size_t		len;
	uint32_t	seed;
	uint32_t	hash;
} murmur_vec;

static void
test_murmur3_vectors(void **state)
{
	static char all[256];
	/* published vectors, then values of Python's mmh3.hash(signed=False) */
	static const murmur_vec vecs[] = {
		{"", 0, 0, 0},
		{"", 0, 1, 0x514E28B7},
		{"", 0, 0xffffffff, 0x81F16F39},
		{"\0\0\0\0", 4, 0, 0x2362F9DE},
		{"aaaa", 4, 0x9747b28c, 0x5A97808A},
		{"aaa", 3, 0x9747b28c, 0x283E0130},
		{"aa", 2, 0x9747b28c, 0x5D211726},
		{"a", 1, 0x9747b28c, 0x7FA09EA6},
		{"abcd", 4, 0x9747b28c, 0xF0478627},
		{"abc", 3, 0x9747b28c, 0xC84A62DD},
		{"ab", 2, 0x9747b28c, 0x74875592},
		{"Hello, world!", 13, 0x9747b28c, 0x24884CBA},
		{"The quick brown fox jumps over the lazy dog", 43, 0x9747b28c, 0x2FA826CD},
		{"\xff\xff\xff\xff", 4, 0, 0x76293B50},
		{"\x21\x43\x65\x87", 4, 0, 0xF55B516B},
		{"\x21\x43\x65\x87", 4, 0x5082EDEE, 0x2362F9DE},
		{"\x21\x43\x65", 3, 0, 0x7E4A8634},
		{"\x21\x43", 2, 0, 0xA0F7B07A},
		{"\x21", 1, 0, 0x72661CF4},
		{"hello", 5, 0, 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 43, 0, 0x2e4ff723},
		{"na\xc3\xafve caf\xc3\xa9 \xe2\x82\xac\xf0\x9d\x84\x9e", 20, 0x12345678, 0x2bc69bf1},
		{"12345", 5, 7, 0x59787afa},
	};

	(void) state;
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		assert_int_equal(genie_murmur3_32(vecs[i].key, vecs[i].len, vecs[i].seed),
						 vecs[i].hash);
	for (int i = 0; i < 256; i++)
		all[i] = (char) i;
	assert_int_equal(genie_murmur3_32(all, 256, 0xdeadbeef), 0xec6fb783);
}

static void
test_hash64_vectors(void **state)
{
	(void) state;
	/* (mmh3(seed hi) << 32 | mmh3(seed lo)), seeds from splitmix64, in Python */
	assert_true(genie_hash64("", 0, 0) == UINT64_C(0xa5f28424a8e60d2e));
	assert_true(genie_hash64("hello", 5, 0) == UINT64_C(0xfabf53e052818fdb));
	assert_true(genie_hash64("abc", 3, 42) == UINT64_C(0xe9b6f20900f70288));
	assert_true(genie_hash64("a", 1, UINT64_MAX) == UINT64_C(0x791312dfe101bc50));
	assert_true(genie_hash64("\xc3\xa9t\xc3\xa9", 5, 0) == UINT64_C(0x53ede5b2e52bd119));
}

typedef struct utf8_vec
{
	const char *s;
	size_t		len;
	int			charlen;
} utf8_vec;

static void
test_utf8_charlen(void **state)
{
	static const utf8_vec vecs[] = {
		{"a", 1, 1}, {"\0", 1, 1}, {"\x7f", 1, 1},
		{"\xc3\xa9", 2, 2}, {"\xdf\xbf", 2, 2},
		{"\xe2\x82\xac", 3, 3}, {"\xe0\xa0\x80", 3, 3}, {"\xed\x9f\xbf", 3, 3},
		{"\xf0\x9d\x84\x9e", 4, 4}, {"\xf4\x8f\xbf\xbf", 4, 4},
		{"\xc0\x80", 2, 1},		/* overlong */
		{"\xc1\xbf", 2, 1},
		{"\xe0\x80\x80", 3, 1},
		{"\xf0\x80\x80\x80", 4, 1},
		{"\xed\xa0\x80", 3, 1},	/* surrogate */
		{"\xf4\x90\x80\x80", 4, 1},	/* above U+10FFFF */
		{"\xf5\x80\x80\x80", 4, 1},
		{"\xff", 1, 1}, {"\x80", 1, 1}, {"\xbf\xbf", 2, 1},
		{"\xc3\x41", 2, 1},		/* bad continuation */
		{"\xe2\x82\x41", 3, 1},
		{"\xe2\x82\xac", 2, 1},	/* truncated by len */
		{"\xf0\x9d\x84\x9e", 3, 1},
		{"\xc3\xa9", 1, 1},
	};

	(void) state;
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++)
		assert_int_equal(genie_utf8_charlen(vecs[i].s, vecs[i].len),
						 vecs[i].charlen);
}

/* ---- words ---- */

/* sorted distinct hashes of the given lower-case words */
static int
expected_words(const char *const *words, int n, uint64_t *out)
{
	int			k = 0;

	for (int i = 0; i < n; i++)
		out[i] = genie_hash64(words[i], strlen(words[i]), 0);
	qsort(out, n, sizeof(uint64_t), u64_cmp);
	for (int i = 0; i < n; i++)
		if (k == 0 || out[i] != out[k - 1])
			out[k++] = out[i];
	return k;
}

static void
check_words(const char *text, const char *const *words, int nwords)
{
	uint64_t	want[64];
	uint64_t	got[64];
	int			n = expected_words(words, nwords, want);

	assert_int_equal(genie_words(text, strlen(text), got, 64), n);
	assert_memory_equal(got, want, sizeof(uint64_t) * n);
}

static void
test_words_fixed(void **state)
{
	static const char *const w1[] = {"hello", "hello", "world", "x"};
	static const char *const w2[] = {
		"foo", "bar", "baz", "42x", "caf\xc3\xa9", "caf\xc3\x89",
		"\xc3\x9cn\xc3\xaf\xff\xfe", "a1"
	};
	static const uint64_t py[] = {	/* Python: genie_hash64 of the words */
		UINT64_C(0xd845e668b8c6eb90), UINT64_C(0xdffc80426eebdaec),
		UINT64_C(0xfabf53e052818fdb)
	};
	const char *hello = "Hello, hello WORLD! x";
	uint64_t	got[8];

	(void) state;
	assert_int_equal(genie_words(hello, strlen(hello), got, 8), 3);
	assert_memory_equal(got, py, sizeof(py));
	check_words(hello, w1, 4);
	/* only ASCII is folded: CAFÉ is not café */
	check_words("  Foo-bar_BAZ 42x, caf\xc3\xa9 CAF\xc3\x89\t\xc3\x9cN\xc3\xaf\xff\xfe.(A1)\n",
				w2, 8);
	check_words("", NULL, 0);
	check_words(" ,.;!?-_()\t\n'\"", NULL, 0);
	assert_int_equal(genie_words("", 0, NULL, 0), 0);
	assert_int_equal(genie_words("--", 2, NULL, 0), 0);
	/* a length that cuts the text */
	assert_int_equal(genie_words("ab cd", 4, got, 8), 2);
	assert_int_equal(genie_words("c ab", 4, got + 2, 6), 2);
	assert_memory_equal(got, got + 2, sizeof(uint64_t) * 2);
	/* repeats with a buffer of exactly the distinct count */
	assert_int_equal(genie_words("a a A b B a b a b a", 19, got, 2), 2);
	assert_true(genie_words("a a A b B a b a b a c", 21, got, 2) > 2);
}

static void
test_words_random(void **state)
{
	static const char *const vocab[] = {
		"alpha", "beta", "gamma", "delta", "x", "y7", "42", "2024", "q",
		"caf\xc3\xa9", "na\xc3\xafve", "\xe2\x82\xac" "100",
		"\xf0\x9d\x84\x9e" "clef", "\xc3\xa9t\xc3\xa9", "\xc3\x89t\xc3\xa9",
		"stra\xc3\x9f" "e", "zz\xff", "\x80", "longerwordwithdigits123",
		"b", "c0ffee",
	};
	static const char *const seps[] = {
		" ", ",", ". ", "-", "_", "\t", "\n", "!?", "'", "\"", " ( ", "/"
	};
	const int	nvocab = sizeof(vocab) / sizeof(vocab[0]);
	char		text[4096];
	uint64_t	want[64];
	uint64_t	got[256];

	(void) state;
	rng_seed(101);
	for (int iter = 0; iter < 500; iter++)
	{
		const char *used[256];
		int			nw = (int) rng_below(60);
		size_t		len = 0;
		int			n;
		uint32_t	r;

		if (rng_below(2))
			len += strlen(strcpy(text, seps[rng_below(12)]));
		for (int k = 0; k < nw; k++)
		{
			const char *w = vocab[rng_below(nvocab)];

			used[k] = w;
			for (const char *p = w; *p; p++)	/* random ASCII case */
				text[len++] = (*p >= 'a' && *p <= 'z' && rng_below(2)) ?
					(char) (*p - 'a' + 'A') : *p;
			if (k + 1 < nw || rng_below(2))
				len += strlen(strcpy(text + len, seps[rng_below(12)]));
		}
		n = expected_words(used, nw, want);

		assert_int_equal(genie_words(text, len, got, 256), n);
		assert_memory_equal(got, want, sizeof(uint64_t) * n);
		assert_int_equal(genie_words(text, len, got, n), n);
		assert_memory_equal(got, want, sizeof(uint64_t) * n);
		if (n == 0)
			continue;
		/* too small: a count that is enough, then the same words */
		r = genie_words(text, len, got, n - 1);
		assert_true(r > (uint32_t) n - 1 && r >= (uint32_t) n && r <= 256);
		assert_true(genie_words(text, len, NULL, 0) >= (uint32_t) n);
		assert_int_equal(genie_words(text, len, got, r), n);
		assert_memory_equal(got, want, sizeof(uint64_t) * n);
	}
}

/* ---- n-grams ---- */

static void
test_ngrams_fixed(void **state)
{
	static const uint64_t abab[] = {	/* Python: ab#1, ba#1, ab#2 */
		UINT64_C(0x181c8395340872dd), UINT64_C(0x5632a352ae922dcc),
		UINT64_C(0xc22842c0cdb283fc)
	};
	static const uint64_t eeur[] = {	/* é€#1, €é#1, é€#2 */
		UINT64_C(0x524ca8644d832230), UINT64_C(0x6ca16d35f705c4e2),
		UINT64_C(0xc84150e4eea86a3a)
	};
	const char *e = "\xc3\xa9\xe2\x82\xac\xc3\xa9\xe2\x82\xac";
	uint64_t	got[16];
	uint64_t	one[1];

	(void) state;
	assert_int_equal(genie_ngrams("abab", 4, 2, got, 16), 3);
	assert_memory_equal(got, abab, sizeof(abab));
	assert_int_equal(genie_ngrams(e, 10, 2, got, 16), 3);
	assert_memory_equal(got, eeur, sizeof(eeur));
	/* shorter than n, the empty string included: one gram, the whole string */
	assert_int_equal(genie_ngrams("", 0, 3, got, 16), 1);
	assert_true(got[0] == UINT64_C(0x3e0add76063c7042));
	assert_int_equal(genie_ngrams("ab", 2, 3, got, 16), 1);
	assert_int_equal(genie_ngrams("ab", 2, 3, one, 1), 1);
	assert_true(got[0] == one[0]);
	assert_int_equal(genie_ngrams(e, 10, 5, one, 1), 1);
	assert_int_equal(genie_ngrams(e, 10, 4, one, 1), 1);
	assert_int_equal(genie_ngrams(e, 10, 1, got, 16), 4);
	/* a capacity too small: the count, nothing written */
	got[0] = got[1] = 7;
	assert_int_equal(genie_ngrams("abcdef", 6, 2, got, 4), 5);
	assert_true(got[0] == 7 && got[1] == 7);
	assert_int_equal(genie_ngrams("abcdef", 6, 2, NULL, 0), 5);
	assert_int_equal(genie_ngrams("", 0, 1, NULL, 0), 1);
	assert_int_equal(genie_ngrams("abc", 3, 0, got, 16), 0);
	assert_int_equal(genie_ngrams("abc", 3, -1, got, 16), 0);
	/* invalid bytes are characters: \xe2\x82 is two of them */
	assert_int_equal(genie_ngrams("\xe2\x82" "a", 3, 1, got, 16), 3);
	assert_int_equal(genie_ngrams("\xe2\x82\xac" "a", 4, 1, got, 16), 2);
}

static void
test_ngrams_shared(void **state)
{
	static tstr a;
	static tstr b;
	char		abuf[MAXC * 4];
	char		bbuf[MAXC * 4];
	uint64_t	ka[MAXC];
	uint64_t	kb[MAXC];

	(void) state;
	rng_seed(202);
	for (int iter = 0; iter < 3000; iter++)
	{
		int			n = 1 + (int) rng_below(4);
		int			nsym = 2 + (int) rng_below(NPALETTE - 1);
		size_t		alen;
		size_t		blen;
		int			glen;
		int			na;
		int			nb;

		random_tstr(&a, (int) rng_below(30), nsym);
		if (rng_below(2))
			random_tstr(&b, (int) rng_below(30), nsym);
		else
		{
			b = a;				/* a near copy shares more */
			for (int k = (int) rng_below(4); k > 0; k--)
				random_edit(&b, nsym);
		}
		alen = tstr_bytes(&a, abuf);
		blen = tstr_bytes(&b, bbuf);
		na = (int) genie_ngrams(abuf, alen, n, ka, MAXC);
		nb = (int) genie_ngrams(bbuf, blen, n, kb, MAXC);
		assert_int_equal(na, gram_count(&a, n, &glen));
		assert_int_equal(nb, gram_count(&b, n, &glen));
		for (int k = 1; k < na; k++)
			assert_true(ka[k - 1] < ka[k]);
		assert_int_equal(sorted_intersection(ka, na, kb, nb),
						 ref_shared_grams(&a, &b, n));
	}
}

/* ---- E2LSH ---- */

static double
normal_cdf(double x)
{
	return 0.5 * erfc(-x / sqrt(2.0));
}

/* collision probability of E2LSH at distance c (Datar et al.) */
static double
e2lsh_p(double c, double w)
{
	double		r = w / c;

	return 1.0 - 2.0 * normal_cdf(-r) -
		2.0 / (sqrt(2.0 * M_PI) * r) * (1.0 - exp(-r * r / 2.0));
}

static void
check_rate(const char *what, int hits, int trials, double p)
{
	double		rate = (double) hits / trials;
	double		tol = 5.0 * sqrt(p * (1.0 - p) / trials) + 1e-3;

	if (fabs(rate - p) > tol)
		fail_msg("%s: rate %.4f, expected %.4f +- %.4f", what, rate, p, tol);
}

static void
test_e2lsh_params(void **state)
{
	const uint32_t dim = 64;
	const uint32_t m = 256;
	const float w = 4.0f;
	size_t		size = genie_e2lsh_params_size(dim, m);
	float	   *p = malloc(sizeof(float) * size);
	float	   *q = malloc(sizeof(float) * size);
	double		sum = 0;
	double		sum2 = 0;
	double		bsum = 0;
	int			within1 = 0;
	int			n = (int) (dim * m);

	(void) state;
	assert_int_equal(size, m * (dim + 1));
	assert_int_equal(genie_e2lsh_params_size(1, 1), 2);
	genie_e2lsh_init(p, dim, m, w, 12345);
	genie_e2lsh_init(q, dim, m, w, 12345);
	assert_memory_equal(p, q, sizeof(float) * size);
	genie_e2lsh_init(q, dim, m, w, 12346);
	assert_true(memcmp(p, q, sizeof(float) * size) != 0);

	/* a ~ N(0, 1): mean, variance, mass within one sd; b ~ U[0, w) */
	for (uint32_t i = 0; i < m; i++)
	{
		const float *a = p + i * (dim + 1);

		for (uint32_t d = 0; d < dim; d++)
		{
			sum += a[d];
			sum2 += (double) a[d] * a[d];
			within1 += fabs(a[d]) < 1.0;
		}
		assert_true(a[dim] >= 0.0f && a[dim] < w);
		bsum += a[dim];
	}
	assert_true(fabs(sum / n) < 5.0 / sqrt(n));
	assert_true(fabs(sum2 / n - 1.0) < 5.0 * sqrt(2.0 / n));
	check_rate("N(0,1) within 1", within1, n, 0.682689492137);
	assert_true(fabs(bsum / m - w / 2) < 5.0 * w * sqrt(1.0 / 12.0 / m));
	free(p);
	free(q);
}

static void
test_e2lsh_fixed(void **state)
{
	/* Python: i * 1000 + mmh3(8 zero bytes, seed i) % 1000 */
	static const uint32_t zero_kw[] = {676, 1133, 2798, 3111};
	float		p[4 * 9];
	float		v[8];
	float		v2[8];
	uint32_t	out[4];
	uint32_t	out2[4];

	(void) state;
	/* the zero vector falls in bucket 0 of every function */
	memset(v, 0, sizeof(v));
	for (uint32_t dim = 1; dim <= 8; dim += 7)
	{
		genie_e2lsh_init(p, dim, 4, 2.5f, 7 + dim);
		genie_e2lsh(p, v, dim, 4, 2.5f, 1000, out);
		assert_memory_equal(out, zero_kw, sizeof(zero_kw));
	}

	/* identical vectors collide everywhere; keyword i is in [i D, (i+1) D) */
	rng_seed(303);
	for (int iter = 0; iter < 200; iter++)
	{
		uint32_t	dim = 1 + rng_below(8);

		genie_e2lsh_init(p, dim, 4, 1.0f, iter);
		for (uint32_t d = 0; d < dim; d++)
			v[d] = v2[d] = rng_float() * 100.0f;
		genie_e2lsh(p, v, dim, 4, 1.0f, 1u << 20, out);
		genie_e2lsh(p, v2, dim, 4, 1.0f, 1u << 20, out2);
		assert_memory_equal(out, out2, sizeof(out));
		for (uint32_t i = 0; i < 4; i++)
			assert_int_equal(out[i] >> 20, i);
	}
}

/* random vector of L2 norm c (any direction will do: a is isotropic) */
static void
random_l2(float *u, uint32_t dim, double c)
{
	double		norm;

	do
	{
		norm = 0;
		for (uint32_t d = 0; d < dim; d++)
		{
			u[d] = rng_float();
			norm += (double) u[d] * u[d];
		}
	} while (norm < 1e-4);
	for (uint32_t d = 0; d < dim; d++)
		u[d] = (float) (u[d] * c / sqrt(norm));
}

/*
 * Each pair gets parameters of its own, so that all pairs * m trials are
 * independent and the hit count is binomial.
 */
static void
test_e2lsh_probability(void **state)
{
	static const uint32_t dims[] = {1, 8};
	static const double ratios[] = {0.25, 0.5, 1.0, 2.0, 4.0};
	const uint32_t m = 8;
	const uint32_t D = 1u << 20;
	const float w = 4.0f;
	const int	pairs = 4000;
	float		p[8 * 9];
	float		x[8];
	float		y[8];
	uint32_t	kx[8];
	uint32_t	ky[8];
	char		what[64];

	(void) state;
	rng_seed(404);
	for (int di = 0; di < 2; di++)
		for (int ri = 0; ri < 5; ri++)
		{
			uint32_t	dim = dims[di];
			double		c = ratios[ri] * w;
			int			hits = 0;

			for (int k = 0; k < pairs; k++)
			{
				genie_e2lsh_init(p, dim, m, w, rng_next());
				random_l2(y, dim, c);
				for (uint32_t d = 0; d < dim; d++)
				{
					x[d] = rng_float() * 10.0f;
					y[d] += x[d];
				}
				genie_e2lsh(p, x, dim, m, w, D, kx);
				genie_e2lsh(p, y, dim, m, w, D, ky);
				for (uint32_t i = 0; i < m; i++)
					hits += kx[i] == ky[i];
			}
			snprintf(what, sizeof(what), "e2lsh dim %u c/w %.2f", dim, ratios[ri]);
			check_rate(what, hits, pairs * (int) m, e2lsh_p(c, w));
		}
}

/* ---- random binning ---- */

static void
test_rbin_params(void **state)
{
	const uint32_t dim = 16;
	const uint32_t m = 512;
	const float sigma = 2.0f;
	size_t		size = genie_rbin_params_size(dim, m);
	float	   *p = malloc(sizeof(float) * size);
	float	   *q = malloc(sizeof(float) * size);
	double		dsum = 0;
	double		fsum = 0;
	int			below = 0;
	int			n = (int) (dim * m);

	(void) state;
	assert_int_equal(size, m * dim * 2);
	assert_int_equal(genie_rbin_params_size(1, 1), 2);
	genie_rbin_init(p, dim, m, sigma, 99);
	genie_rbin_init(q, dim, m, sigma, 99);
	assert_memory_equal(p, q, sizeof(float) * size);
	genie_rbin_init(q, dim, m, sigma, 100);
	assert_true(memcmp(p, q, sizeof(float) * size) != 0);

	/* delta ~ Gamma(2, sigma): mean 2 sigma, P(delta <= sigma) = 1 - 2/e */
	for (int k = 0; k < n; k++)
	{
		float		delta = p[2 * k];
		float		u = p[2 * k + 1];

		assert_true(delta > 0.0f && u >= 0.0f && u < delta);
		dsum += delta;
		fsum += u / delta;
		below += delta <= sigma;
	}
	assert_true(fabs(dsum / n - 2.0 * sigma) < 5.0 * sigma * sqrt(2.0 / n));
	check_rate("Gamma(2) below its scale", below, n, 1.0 - 2.0 / M_E);
	assert_true(fabs(fsum / n - 0.5) < 5.0 * sqrt(1.0 / 12.0 / n));
	free(p);
	free(q);
}

static void
test_rbin_fixed(void **state)
{
	/* Python: i * 1000 + mmh3(the bins -1 as 8-byte integers, seed i) % 1000 */
	static const uint32_t zero3[] = {215, 1270, 2086, 3488};
	static const uint32_t zero1[] = {712, 1534, 2590, 3418};
	float		p[4 * 3 * 2];
	float		v[8];
	float		v2[8];
	uint32_t	out[4];
	uint32_t	out2[4];

	(void) state;
	/* 0 - u with 0 < u < delta is in bin -1 */
	memset(v, 0, sizeof(v));
	genie_rbin_init(p, 3, 4, 1.5f, 5);
	for (int k = 0; k < 12; k++)
		assert_true(p[2 * k + 1] > 0.0f);
	genie_rbin(p, v, 3, 4, 1000, out);
	assert_memory_equal(out, zero3, sizeof(zero3));
	genie_rbin_init(p, 1, 4, 1.5f, 6);
	for (int k = 0; k < 4; k++)
		assert_true(p[2 * k + 1] > 0.0f);
	genie_rbin(p, v, 1, 4, 1000, out);
	assert_memory_equal(out, zero1, sizeof(zero1));

	rng_seed(505);
	for (int iter = 0; iter < 200; iter++)
	{
		uint32_t	dim = 1 + rng_below(3);

		genie_rbin_init(p, dim, 4, 1.0f, iter);
		for (uint32_t d = 0; d < dim; d++)
			v[d] = v2[d] = rng_float() * 100.0f;
		genie_rbin(p, v, dim, 4, 1u << 20, out);
		genie_rbin(p, v2, dim, 4, 1u << 20, out2);
		assert_memory_equal(out, out2, sizeof(out));
		for (uint32_t i = 0; i < 4; i++)
			assert_int_equal(out[i] >> 20, i);
	}
}

static void
test_rbin_probability(void **state)
{
	static const uint32_t dims[] = {1, 3};
	static const double dists[] = {0.1, 0.5, 1.0, 2.0};
	const uint32_t m = 8;
	const uint32_t D = 1u << 20;
	const float sigma = 1.5f;
	const int	pairs = 4000;
	float		p[8 * 3 * 2];
	float		x[3];
	float		y[3];
	uint32_t	kx[8];
	uint32_t	ky[8];
	char		what[64];

	(void) state;
	rng_seed(606);
	for (int di = 0; di < 2; di++)
		for (int ti = 0; ti < 4; ti++)
		{
			uint32_t	dim = dims[di];
			double		t = dists[ti] * sigma;	/* |x - y|_1 */
			int			hits = 0;

			for (int k = 0; k < pairs; k++)
			{
				double		wsum = 0;
				double		wd[3];

				genie_rbin_init(p, dim, m, sigma, rng_next());
				for (uint32_t d = 0; d < dim; d++)
					wsum += wd[d] = 0.01 + (rng_float() + 1.0);
				for (uint32_t d = 0; d < dim; d++)
				{
					double		step = t * wd[d] / wsum;

					x[d] = rng_float() * 10.0f;
					y[d] = (float) (x[d] + (rng_below(2) ? step : -step));
				}
				genie_rbin(p, x, dim, m, D, kx);
				genie_rbin(p, y, dim, m, D, ky);
				for (uint32_t i = 0; i < m; i++)
					hits += kx[i] == ky[i];
			}
			snprintf(what, sizeof(what), "rbin dim %u |x-y|/sigma %.2f", dim, dists[ti]);
			check_rate(what, hits, pairs * (int) m, exp(-dists[ti]));
		}
}

/* ---- edit distance ---- */

static int
lev(const char *a, const char *b)
{
	size_t		alen = strlen(a);
	size_t		blen = strlen(b);
	int		   *work = malloc(sizeof(int) * genie_levenshtein_work_size(alen, blen));
	int			d = genie_levenshtein(a, alen, b, blen, work);

	free(work);
	return d;
}

static int
lev_max(const char *a, const char *b, int max)
{
	size_t		alen = strlen(a);
	size_t		blen = strlen(b);
	int		   *work = malloc(sizeof(int) * genie_levenshtein_work_size(alen, blen));
	int			d = genie_levenshtein_max(a, alen, b, blen, max, work);

	free(work);
	return d;
}

static void
test_levenshtein_fixed(void **state)
{
	(void) state;
	/* fuzzystrmatch's documented examples */
	assert_int_equal(lev("GUMBO", "GAMBOL"), 2);
	assert_int_equal(lev_max("extensive", "exhaustive", 2), 3);
	assert_int_equal(lev_max("extensive", "exhaustive", 4), 4);
	assert_int_equal(lev("kitten", "sitting"), 3);
	assert_int_equal(lev("", ""), 0);
	assert_int_equal(lev("abc", ""), 3);
	assert_int_equal(lev("", "\xe2\x82\xac\xf0\x9d\x84\x9e"), 2);
	assert_int_equal(lev("\xc3\xa9", "e"), 1);
	assert_int_equal(lev("caf\xc3\xa9", "cafe"), 1);
	/* a lone lead byte is a character, é is another */
	assert_int_equal(lev("\xc3", "\xc3\xa9"), 1);
	assert_int_equal(lev("\xff\xfe", ""), 2);
	assert_int_equal(lev("a\xe2\x82", "a\xe2\x82\xac"), 2);
	assert_int_equal(lev_max("", "", 0), 0);
	assert_int_equal(lev_max("abc", "", 1), 2);
	assert_int_equal(lev_max("abc", "abd", -3), 1);
	assert_int_equal(lev_max("abc", "abc", -3), 0);
	assert_int_equal(lev_max("abc", "xyz", 100), 3);
	assert_int_equal(lev_max("\xe2\x82\xac\xe2\x82\xac", "\xe2\x82\xac", 0), 1);
}

/*
 * Distance of two strings both ways, unbounded and under several bounds.
 * The work array is zeroed before each call: a cell read before it is
 * written would then look like a short distance.
 */
static void
check_distance(const tstr *a, const tstr *b)
{
	static char abuf[MAXC * 4];
	static char bbuf[MAXC * 4];
	size_t		alen = tstr_bytes(a, abuf);
	size_t		blen = tstr_bytes(b, bbuf);
	size_t		wsize = sizeof(int) * genie_levenshtein_work_size(alen, blen);
	int		   *work = malloc(wsize);
	int			want = ref_levenshtein(a, b);

	memset(work, 0, wsize);
	assert_int_equal(genie_levenshtein(abuf, alen, bbuf, blen, work), want);
	memset(work, 0, wsize);
	assert_int_equal(genie_levenshtein(bbuf, blen, abuf, alen, work), want);
	for (int max = -1; max <= want + 2; max++)
	{
		int			m = max < 0 ? 0 : max;
		int			bounded = want <= m ? want : m + 1;

		memset(work, 0, wsize);
		assert_int_equal(genie_levenshtein_max(abuf, alen, bbuf, blen, max, work),
						 bounded);
		memset(work, 0, wsize);
		assert_int_equal(genie_levenshtein_max(bbuf, blen, abuf, alen, max, work),
						 bounded);
	}
	free(work);
}

static void
test_levenshtein_random(void **state)
{
	static tstr a;
	static tstr b;

	(void) state;
	rng_seed(707);
	for (int iter = 0; iter < 3000; iter++)
	{
		/* ASCII only, multibyte and invalid bytes, or all of them */
		int			nsym = iter % 3 == 0 ? 3 : NPALETTE;
		int			first = iter % 3 == 1 ? 3 : 0;

		random_tstr(&a, (int) rng_below(25), nsym);
		if (iter % 2)
			random_tstr(&b, (int) rng_below(25), nsym);
		else
		{
			b = a;
			for (int k = (int) rng_below(6); k > 0; k--)
				random_edit(&b, nsym);
		}
		for (int i = 0; first && i < a.n; i++)
			a.c[i] = 3 + a.c[i] % (NPALETTE - 3);
		for (int i = 0; first && i < b.n; i++)
			b.c[i] = 3 + b.c[i] % (NPALETTE - 3);
		check_distance(&a, &b);
	}
}

/*
 * ASCII strings of 40 to 90 characters: the shorter one on both sides of
 * the bit-parallel path's 64 characters, unrelated or a few edits apart.
 */
static void
test_levenshtein_ascii_64(void **state)
{
	static tstr a;
	static tstr b;

	(void) state;
	rng_seed(909);
	for (int iter = 0; iter < 2000; iter++)
	{
		random_tstr(&a, 40 + (int) rng_below(51), 3);
		if (iter % 3 == 0)
			random_tstr(&b, 40 + (int) rng_below(51), 3);
		else
		{
			b = a;
			for (int k = (int) rng_below(12); k > 0; k--)
				random_edit(&b, 3);
		}
		check_distance(&a, &b);
	}
}

/*
 * ASCII strings of 50 to 300 characters: the shorter one in one to four
 * 64-bit words of the bit-parallel path (the word boundaries 64, 128, 192
 * and 256 on both sides) or beyond it, unrelated or a few edits apart.
 */
static void
test_levenshtein_ascii_words(void **state)
{
	static tstr a;
	static tstr b;

	(void) state;
	rng_seed(1313);
	for (int iter = 0; iter < 1500; iter++)
	{
		random_tstr(&a, 50 + (int) rng_below(251), 3);
		if (iter % 3 == 0)
			random_tstr(&b, 50 + (int) rng_below(251), 3);
		else
		{
			b = a;
			for (int k = (int) rng_below(30); k > 0; k--)
				random_edit(&b, 3);
		}
		check_distance(&a, &b);
	}
}

/* long strings a few edits apart: the band is narrow, the rows long */
static void
test_levenshtein_long(void **state)
{
	static tstr a;
	static tstr b;

	(void) state;
	rng_seed(808);
	for (int iter = 0; iter < 60; iter++)
	{
		random_tstr(&a, 200 + (int) rng_below(MAXC - 210), NPALETTE);
		b = a;
		for (int k = (int) rng_below(10); k > 0; k--)
			random_edit(&b, NPALETTE);
		check_distance(&a, &b);
	}
}

static void
test_count_bound(void **state)
{
	static tstr q;
	static tstr t;
	char		qbuf[MAXC * 4];
	char		tbuf[MAXC * 4];
	uint64_t	kq[MAXC];
	uint64_t	kt[MAXC];

	(void) state;
	assert_int_equal(genie_ngram_count_lower_bound(10, 3, 2), 4);
	assert_int_equal(genie_ngram_count_lower_bound(10, 3, 0), 10);
	assert_int_equal(genie_ngram_count_lower_bound(5, 3, 2), 0);
	assert_int_equal(genie_ngram_count_lower_bound(0, 1, 0), 0);
	assert_int_equal(genie_ngram_count_lower_bound(5, 1 << 20, 1 << 20), 0);

	rng_seed(909);
	for (int iter = 0; iter < 3000; iter++)
	{
		int			n = 1 + (int) rng_below(4);
		int			nsym = 2 + (int) rng_below(NPALETTE - 1);
		int			nq;
		int			nt;
		int			d;
		int			shared;

		random_tstr(&q, (int) rng_below(30), nsym);
		t = q;
		for (int k = (int) rng_below(6); k > 0; k--)
			random_edit(&t, nsym);
		d = ref_levenshtein(&q, &t);
		nq = (int) genie_ngrams(qbuf, tstr_bytes(&q, qbuf), n, kq, MAXC);
		nt = (int) genie_ngrams(tbuf, tstr_bytes(&t, tbuf), n, kt, MAXC);
		shared = ref_shared_grams(&q, &t, n);
		assert_int_equal(sorted_intersection(kq, nq, kt, nt), shared);
		assert_true(shared >= genie_ngram_count_lower_bound(nq, n, d));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_murmur3_vectors),
		cmocka_unit_test(test_hash64_vectors),
		cmocka_unit_test(test_utf8_charlen),
		cmocka_unit_test(test_words_fixed),
		cmocka_unit_test(test_words_random),
		cmocka_unit_test(test_ngrams_fixed),
		cmocka_unit_test(test_ngrams_shared),
		cmocka_unit_test(test_e2lsh_params),
		cmocka_unit_test(test_e2lsh_fixed),
		cmocka_unit_test(test_e2lsh_probability),
		cmocka_unit_test(test_rbin_params),
		cmocka_unit_test(test_rbin_fixed),
		cmocka_unit_test(test_rbin_probability),
		cmocka_unit_test(test_levenshtein_fixed),
		cmocka_unit_test(test_levenshtein_random),
		cmocka_unit_test(test_levenshtein_ascii_64),
		cmocka_unit_test(test_levenshtein_ascii_words),
		cmocka_unit_test(test_levenshtein_long),
		cmocka_unit_test(test_count_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
