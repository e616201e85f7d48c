/*
 * genie_edit.h
 *		Edit distance over UTF-8 characters, and the count filter that lets
 *		a GENIE n-gram index find the strings within an edit distance.
 *
 * Plain C with no PostgreSQL header.  Characters are those of
 * genie_utf8_charlen (genie_keywords.h); costs are those of fuzzystrmatch's
 * levenshtein(): 1 to insert, delete or substitute a character.  Nothing
 * is allocated: the caller passes a work array of
 * genie_levenshtein_work_size(alen, blen) ints.
 */
#ifndef GENIE_EDIT_H
#define GENIE_EDIT_H

#include <stddef.h>

extern size_t genie_levenshtein_work_size(size_t alen, size_t blen);

/*
 * The edit distance between a and b, in O(chars(a) * chars(b)), or
 * O(chars(a)) word operations for two ASCII strings the shorter of which
 * has at most 64 bytes.
 */
extern int	genie_levenshtein(const char *a, size_t alen, const char *b,
							  size_t blen, int *work);

/*
 * The edit distance if it is at most max, else max + 1, in
 * O(max * length) time; a negative max counts as 0.
 */
extern int	genie_levenshtein_max(const char *a, size_t alen, const char *b,
								  size_t blen, int max, int *work);

/*
 * The fewest (gram, occurrence) keywords of genie_ngrams() that a string
 * within edit distance d of a query with query_grams of them shares with
 * it: query_grams - n * d, at least 0 (each edit spoils at most n grams).
 */
extern int	genie_ngram_count_lower_bound(int query_grams, int n, int d);

#endif							/* GENIE_EDIT_H */
