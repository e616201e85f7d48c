/*
 * genie_keywords.h
 *		Keywords of a GENIE-style inverted index: a row is a set of 64-bit or
 *		32-bit keywords, and a query ranks rows by how many it shares.
 *
 * Plain C with no PostgreSQL header, so that it can be unit-tested
 * standalone and mirrored on the device.  No function allocates: output
 * goes to caller-provided arrays.
 *
 * Hashing:
 *	genie_murmur3_32	MurmurHash3 x86_32; blocks are read little-endian
 *						on every host, so results match the x86 reference.
 *	genie_hash64		two murmur3_32 of the key concatenated (high word,
 *						then low word); their seeds are the high and low
 *						halves of mix64(seed + 0x9E3779B97F4A7C15), mix64
 *						being the splitmix64 finalizer.
 *
 * Random parameters (E2LSH, random binning) come from splitmix64 started at
 * the seed: state += 0x9E3779B97F4A7C15, output mix64(state); a uniform in
 * (0, 1) is ((output >> 11) + 0.5) / 2^53, a normal is Box-Muller's
 * sqrt(-2 ln u1) cos(2 pi u2) over two successive uniforms.
 */
#ifndef GENIE_KEYWORDS_H
#define GENIE_KEYWORDS_H

#include <stddef.h>
#include <stdint.h>

extern uint32_t genie_murmur3_32(const void *key, size_t len, uint32_t seed);
extern uint64_t genie_hash64(const void *key, size_t len, uint64_t seed);

/*
 * Byte length (1 to 4) of the UTF-8 character at s, len >= 1 bytes being
 * readable.  A byte that does not start a well-formed sequence (RFC 3629:
 * no overlong form, no surrogate, nothing above U+10FFFF, no truncation) is
 * a character of its own.
 */
extern int	genie_utf8_charlen(const char *s, size_t len);

/*
 * The distinct words of a document, sorted.  A word is a maximal run of
 * ASCII letters and digits and bytes >= 0x80 (UTF-8 letters stay inside
 * words); ASCII letters are lower-cased; the keyword is genie_hash64 of the
 * lower-cased bytes with seed 0.  Returns the number of distinct words when
 * that is at most cap.  Otherwise it returns a count above cap that is
 * enough (at least the number of distinct words), and out holds no usable
 * result: a second call with that capacity succeeds.
 */
extern uint32_t genie_words(const char *text, size_t len, uint64_t *out,
							uint32_t cap);

/*
 * The n-grams of a string as (gram, occurrence) keywords, sorted.
 * Characters are UTF-8 code points (genie_utf8_charlen).  A string of k >= n
 * characters has k - n + 1 grams; a shorter one, the empty string included,
 * has one gram: the whole string.  The j-th occurrence (1-based) of gram g
 * becomes mix64(genie_hash64(g, 0) + j * 0x9E3779B97F4A7C15), so two strings
 * share sum over g of min(occ_a(g), occ_b(g)) keywords, and occurrences of
 * one gram never collide.  Returns the number of grams; when it is above cap
 * nothing is written.  n < 1 gives 0.
 */
extern uint32_t genie_ngrams(const char *s, size_t len, int n, uint64_t *out,
							 uint32_t cap);

/*
 * E2LSH for the L2 distance.  Function i (0 <= i < m) has a_i ~ N(0,1)^dim
 * and b_i ~ U[0, w), stored as params[i * (dim + 1) + d] for a_i, then b_i.
 * h_i = floor((a_i . v + b_i) / w) (in double), and keyword i is
 * i * D + murmur3_32(h_i as 8 little-endian bytes, seed i) % D: function i
 * owns the D lists [i * D, (i + 1) * D).  D >= 1 and m * D <= 2^32.
 */
extern size_t genie_e2lsh_params_size(uint32_t dim, uint32_t m);
extern void genie_e2lsh_init(float *params, uint32_t dim, uint32_t m, float w,
							 uint64_t seed);
extern void genie_e2lsh(const float *params, const float *v, uint32_t dim,
						uint32_t m, float w, uint32_t D, uint32_t *out);

/*
 * Random binning for the Laplacian kernel exp(-|x - y|_1 / sigma).  For
 * function i and dimension d, a pitch delta ~ Gamma(2, sigma) (the sum of
 * two exponentials of mean sigma) and a shift u ~ U[0, delta), stored as
 * params[(i * dim + d) * 2] and the next float.  bin_d = floor((v_d - u) /
 * delta) (in double); keyword i is i * D + murmur3_32(the bins as 8-byte
 * little-endian integers, seed i) % D.  Two vectors share keyword i with
 * probability exp(-|x - y|_1 / sigma), up to re-hash collisions.
 */
extern size_t genie_rbin_params_size(uint32_t dim, uint32_t m);
extern void genie_rbin_init(float *params, uint32_t dim, uint32_t m,
							float sigma, uint64_t seed);
extern void genie_rbin(const float *params, const float *v, uint32_t dim,
					   uint32_t m, uint32_t D, uint32_t *out);

#endif							/* GENIE_KEYWORDS_H */
