/*
 * genie_edit.c
 *		Edit distance over UTF-8 characters and the n-gram count bound
 *		(definitions in genie_edit.h).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "genie_edit.h"
#include "genie_keywords.h"

/*
 * The character at p packed into one value, its bytes big-endian: distinct
 * characters give distinct values, since continuation bytes are never 0.
 */
static inline uint32_t
next_char(const char **p, const char *end)
{
	int			n = genie_utf8_charlen(*p, end - *p);
	uint32_t	c = 0;
	int			i;

	for (i = 0; i < n; i++)
		c = (c << 8) | (unsigned char) (*p)[i];
	*p += n;
	return c;
}

/* the next character: one byte when the strings are ASCII */
static inline uint32_t
fetch(const char **p, const char *end, bool ascii)
{
	if (ascii)
		return (unsigned char) *(*p)++;
	return next_char(p, end);
}

static inline int
char_len(const char *p, const char *end, bool ascii)
{
	return ascii ? 1 : genie_utf8_charlen(p, end - p);
}

static bool
is_ascii(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) s[i] >= 0x80)
			return false;
	return true;
}

static size_t
count_chars(const char *s, size_t len, bool ascii)
{
	const char *end = s + len;
	size_t		n = 0;

	if (ascii)
		return len;
	while (s < end)
	{
		s += genie_utf8_charlen(s, end - s);
		n++;
	}
	return n;
}

static inline int
min3(int x, int y, int z)
{
	int			m = x < y ? x : y;

	return m < z ? m : z;
}

/* 64-bit words of the bit-parallel path: the shorter string up to 256 bytes */
#define MYERS_WORDS 4

/*
 * Bit-parallel edit distance (Myers, in Hyyro's form for whole strings) of
 * two ASCII strings, the shorter b of at most 64 * MYERS_WORDS bytes: each
 * 64-bit word holds 64 rows of a column of the matrix as vertical deltas,
 * so a character of a costs a dozen word operations a word instead of a
 * row of cells.  The words of a column are chained through the horizontal
 * delta at each word's last row, which enters the next word's first (+1
 * into the first word: the distance to the empty prefix grows by one a
 * character).
 */
static int
myers(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
	uint64_t	peq[128][MYERS_WORDS];
	uint64_t	pv[MYERS_WORDS];
	uint64_t	mv[MYERS_WORDS];
	uint64_t	last;
	int			nw;
	int			score = (int) blen;

	if (blen == 0)
		return (int) alen;
	nw = (int) ((blen + 63) / 64);
	for (int c = 0; c < 128; c++)
		for (int w = 0; w < nw; w++)
			peq[c][w] = 0;
	for (size_t i = 0; i < blen; i++)
		peq[b[i]][i / 64] |= UINT64_C(1) << (i % 64);
	for (int w = 0; w < nw; w++)
	{
		pv[w] = ~UINT64_C(0);
		mv[w] = 0;
	}
	last = UINT64_C(1) << ((blen - 1) % 64);
	for (size_t j = 0; j < alen; j++)
	{
		const uint64_t *eqs = peq[a[j]];
		int			hin = 1;

		for (int w = 0; w < nw; w++)
		{
			uint64_t	neg = hin < 0 ? 1 : 0;
			uint64_t	pos = hin > 0 ? 1 : 0;
			uint64_t	eq = eqs[w] | neg;
			uint64_t	xv = eqs[w] | mv[w];
			uint64_t	xh = (((eq & pv[w]) + pv[w]) ^ pv[w]) | eq;
			uint64_t	ph = mv[w] | ~(xh | pv[w]);
			uint64_t	mh = pv[w] & xh;
			uint64_t	end = w == nw - 1 ? last : UINT64_C(1) << 63;

			hin = (ph & end) ? 1 : (mh & end) ? -1 : 0;
			ph = (ph << 1) | pos;
			mh = (mh << 1) | neg;
			pv[w] = mh | ~(xv | ph);
			mv[w] = ph & xv;
		}
		score += hin;
	}
	return score;
}

size_t
genie_levenshtein_work_size(size_t alen, size_t blen)
{
	return (alen < blen ? alen : blen) + 1;
}

/* the rows run over a, work holds one row over b, the shorter in bytes */
int
genie_levenshtein(const char *a, size_t alen, const char *b, size_t blen,
				  int *work)
{
	const char *aend;
	const char *bend;
	const char *p;
	int			nb = 0;
	int			i;
	int			j;
	bool		ascii;

	if (blen > alen)
		return genie_levenshtein(b, blen, a, alen, work);
	ascii = is_ascii(a, alen) && is_ascii(b, blen);
	if (ascii && blen <= 64 * MYERS_WORDS)
		return myers((const unsigned char *) a, alen, (const unsigned char *) b, blen);
	aend = a + alen;
	bend = b + blen;
	work[0] = 0;
	for (p = b; p < bend; p += char_len(p, bend, ascii))
	{
		nb++;
		work[nb] = nb;
	}

	for (i = 1; a < aend; i++)
	{
		uint32_t	ca = fetch(&a, aend, ascii);
		int			diag = work[0];

		work[0] = i;
		for (p = b, j = 1; j <= nb; j++)
		{
			int			up = work[j];

			work[j] = min3(up + 1, work[j - 1] + 1,
						   diag + (ca != fetch(&p, bend, ascii)));
			diag = up;
		}
	}
	return work[nb];
}

/*
 * Only the cells with |i - j| <= max can hold a distance of at most max:
 * the others count as max + 1, and so does every value above max.
 */
int
genie_levenshtein_max(const char *a, size_t alen, const char *b, size_t blen,
					  int max, int *work)
{
	const char *aend;
	const char *bend;
	const char *blo;
	size_t		na;
	size_t		nb;
	int			big;
	int			lo_at = 1;
	int			i;
	int			j;
	bool		ascii;

	if (blen > alen)
		return genie_levenshtein_max(b, blen, a, alen, max, work);
	if (max < 0)
		max = 0;
	ascii = is_ascii(a, alen) && is_ascii(b, blen);
	if (ascii && blen <= 64 * MYERS_WORDS)
	{
		int			d = myers((const unsigned char *) a, alen,
							  (const unsigned char *) b, blen);

		return d > max ? max + 1 : d;
	}
	na = count_chars(a, alen, ascii);
	nb = count_chars(b, blen, ascii);
	if ((na > nb ? na - nb : nb - na) > (size_t) max)
		return max + 1;
	if ((size_t) max >= (na > nb ? na : nb))
		return genie_levenshtein(a, alen, b, blen, work);

	/* from here max < na + nb fits in an int, as do all the counts */
	big = max + 1;
	aend = a + alen;
	bend = b + blen;
	for (j = 0; j <= (int) nb && j <= max; j++)
		work[j] = j;
	blo = b;					/* character lo_at - 1 of b */

	for (i = 1; i <= (int) na; i++)
	{
		uint32_t	ca = fetch(&a, aend, ascii);
		int			lo = i - max > 1 ? i - max : 1;
		int			hi = i + max < (int) nb ? i + max : (int) nb;
		int			diag;
		int			left;
		int			rowmin;
		const char *p;

		for (; lo_at < lo; lo_at++)
			blo += char_len(blo, bend, ascii);
		diag = work[lo - 1];
		left = lo == 1 ? i : big;
		work[lo - 1] = left;
		rowmin = left;
		for (p = blo, j = lo; j <= hi; j++)
		{
			int			up = j <= i - 1 + max ? work[j] : big;
			int			cur = min3(up + 1, left + 1,
								   diag + (ca != fetch(&p, bend, ascii)));

			if (cur > big)
				cur = big;
			diag = up;
			work[j] = left = cur;
			if (cur < rowmin)
				rowmin = cur;
		}
		if (rowmin > max)
			return big;
	}
	return work[nb];
}

int
genie_ngram_count_lower_bound(int query_grams, int n, int d)
{
	int64_t		bound = (int64_t) query_grams - (int64_t) n * (d > 0 ? d : 0);

	return bound > 0 ? (int) bound : 0;
}
