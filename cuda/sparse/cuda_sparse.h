/*
 * cuda_sparse.h
 *		The sparse kind of the CUDA backend (layouts and scores in
 *		gi_kind_sparse.h): what it keeps per store and the entry points
 *		between its files: cuda_sparse.cu (the kind's entries, planning of
 *		a search, the chooser), cuda_sparse_term.cu (term-parallel
 *		scatter-add), cuda_sparse_doc.cu (document-parallel scoring),
 *		cuda_sparse_topk.cu (candidates, exact selection, ordered hits),
 *		cuda_sparse_count.cu (the counting path's counters and candidates).
 *
 * Both scoring kernels leave the same thing behind: for a sub-batch of
 * nsub queries and a range of key ordinals [lo, lo + rlen), a dense array
 * acc[q * span + r] of double scores, where an ordinal the query did not
 * touch holds -0.0 (a touched one never does: see cuda/README.md).  The
 * top-k stage reads only that.
 */
#ifndef GI_CUDA_SPARSE_H
#define GI_CUDA_SPARSE_H

#include "cuda_slabdir.h"
#include "cuda_store.h"
#include "gi_cuda_test.h"
#include "gi_kind_sparse.h"

/* slabs one warp takes in one step of a list (scatter, index build) */
#define GI_SP_CHUNK 8

/* term path: a unit's queries are of one block of this many */
#define GI_SP_QGROUP 32

/* the bit pattern of -0.0: "not touched" in the accumulators */
#define GI_SP_UNTOUCHED 0x8000000000000000ull

/* digits of the 96-bit (distance, key) radix select: at most 2^11 bins */
#define GI_SP_BINS 2048

/*
 * One list of the sub-batch's union of terms, its slabs dir[beg, beg + n).
 * Term path: the queries of one block of GI_SP_QGROUP that hold the term
 * are the (query, weight) pairs [q, q + nq) of the sub-batch's pair table;
 * document path: q is the union term's index and nq is 0.
 */
struct gi_sp_unit
{
	uint32_t	q;
	uint32_t	beg;
	uint32_t	n;
	uint32_t	nq;
};

/* term path: a query of the sub-batch holding a unit's term, and its weight */
struct gi_sp_qw
{
	uint32_t	q;
	float		w;
};

/* one query's state in the radix select */
struct gi_sp_sel
{
	uint32_t	need;			/* still to take among those matching the prefix */
	uint32_t	done;			/* every element matching the prefix is taken */
	uint32_t	dmask;			/* distance bits resolved */
	uint32_t	pd;				/* their value */
	uint64_t	kmask;			/* key bits resolved */
	uint64_t	pk;
};

struct gi_cu_sparse
{
	uint32_t	dim;			/* == the store's nlists */
	gi_cu_slabdir dir;
	float	   *bound;			/* [dim] list bounds, host (gi_kind_sparse.h) */
	uint8_t    *unit;			/* [dim] host: 1 while every record the list got weighed 1 */

	/* scratch of a search (device) */
	gi_cu_buf	s_up;			/* units, chunk prefix, query weights and masks */
	gi_cu_buf	s_acc;			/* nsub x span double scores */
	gi_cu_buf	s_cd;			/* candidates: ordered distance (u32) */
	gi_cu_buf	s_ck;			/* candidates: key (u64) */
	gi_cu_buf	s_xd;			/* per-range winners (several ranges) */
	gi_cu_buf	s_xk;
	gi_cu_buf	s_fd;			/* the selected k of each query */
	gi_cu_buf	s_fk;
	gi_cu_buf	s_gd;			/* sort buffers (k beyond the block sort) */
	gi_cu_buf	s_gk;
	gi_cu_buf	s_cnt;			/* counts: candidates, winners, selected */
	gi_cu_buf	s_beg;			/* segment offsets of the sorts */
	gi_cu_buf	s_sel;			/* gi_sp_sel per query */
	gi_cu_buf	s_hist;			/* GI_SP_BINS per query */
	gi_cu_buf	s_thr;			/* per query: the prefilter's first-digit bound */
	gi_cu_buf	s_tmp;			/* CUB scratch */
	gi_cu_buf	s_hits;			/* nsub x kf gi_hit */
	gi_cu_buf	s_fcnt;			/* document path: entries per ordinal */
	gi_cu_buf	s_foff;			/* document path: first entry per ordinal */
	gi_cu_buf	s_fwd;			/* document path: (union term, weight) entries */
	gi_cu_buf	s_ord;			/* term path: chunks in slab order, sort keys, work counter */
	gi_cu_pinned p_up;
	gi_cu_pinned p_res;
	gi_cu_hbuf	h_q;			/* per query: offset into the caller's bytes */
	gi_cu_hbuf	h_hash;			/* union of terms: open addressing */
	gi_cu_hbuf	h_foff;			/* document path: offsets for range splits */
	gi_cu_hbuf	h_units;		/* term path: units being put in block order */

	/* the counting path's bands (cuda_sparse_bands.cu), rebuilt with the directory */
	bool		b_valid;
	uint64_t	b_gen;			/* dir.gen at the build */
	double		b_reads[2];		/* slab reads per slab, bands of 8- and 16-bit counters */
	gi_cu_buf	b_dir;			/* [nslabs] a list's slabs by their smallest ordinal */
	gi_cu_buf	b_min;			/* [nslabs] that ordinal (UINT32_MAX: no live slot) */
	gi_cu_buf	b_span;			/* [nslabs] the widest (max - min) of the entry's list */
	gi_cu_buf	b_tmp;			/* keys before the sort, per-list widths, CUB scratch */
	gi_cu_hbuf	h_span;			/* [nlists] host copy of the widths */

	/* the last search, for the benchmark hook */
	double		prof[GI_CUDA_SPARSE_PROFILE_N];
};

/* ---- cuda_sparse.cu: the kind's entries (kinds[GI_KIND_SPARSE]) ---- */
extern const gi_kind_ops gi_cu_sparse_kind;

/* ---- cuda_sparse_term.cu ---- */

/*
 * The order the term path takes the sub-batch's chunks (GI_SP_CHUNK slabs
 * of a unit's list) in, into sp->s_ord: the units' order (they come in
 * query-block order), or, by_slab, (query block, first slab in the pool)
 * order.  units/prefix/pairs are on the device; prefix[u] is the first
 * chunk of unit u, prefix[nu] the total.
 */
extern gi_status gi_cu_sp_term_order(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
									 const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
									 const gi_sp_qw *pairs, uint32_t nsub, bool by_slab);

/*
 * Term-parallel scores of one range for the sub-batch: acc (nsub rows of
 * span) set to -0.0, then each chunk of the union's lists, loaded once,
 * scattered into the rows of every query of a block holding its term with
 * double atomics, chunks taken in gi_cu_sp_term_order's order.
 */
extern gi_status gi_cu_sp_term_score(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
									 const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
									 const gi_sp_qw *pairs, bool by_slab, uint32_t nsub,
									 uint32_t lo, uint32_t rlen, uint32_t span, double *acc);

/* ---- cuda_sparse_doc.cu ---- */

/*
 * Document-parallel scores of one range for the sub-batch: the union
 * terms' postings with an ordinal in the range are sorted by ordinal
 * (a forward index of at most fwd_bytes, split into sub-ranges when
 * larger), then one warp scores 32 documents for 32 queries, a lane per
 * query, with the queries' weights of the union terms qw[u * npad + q]
 * and presence bits pm[u * groups + q / 32].  Every entry of acc's rows
 * is written.
 */
extern gi_status gi_cu_sp_doc_score(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
									const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
									const float *qw, const uint32_t *pm, uint32_t npad,
									uint32_t nsub, uint32_t lo, uint32_t rlen, uint32_t span,
									size_t fwd_bytes, double *acc);

/* ---- cuda_sparse_topk.cu ---- */

/*
 * The touched ordinals of acc (nsub rows of span, rlen used, ordinals
 * from lo) that can be among a row's k best, as candidates (ordered
 * distance, key) at cd/ck[q * span ...], their number in cnt[q] (zeroed
 * here): at least min(k, touched), all of the k best among them.
 */
extern gi_status gi_cu_sp_compact(gi_store *s, gi_cu_sparse *sp, const double *acc,
								  uint32_t nsub, uint32_t lo, uint32_t rlen, uint32_t span,
								  uint32_t k, uint32_t *cd, uint64_t *ck, uint32_t *cnt);

/*
 * Exact selection: for each of nsub queries the min(k, cnt[q]) best
 * candidates by (distance, key) among src[q * sstride, + cnt[q]) are
 * appended, in no order, to dst[q * dstride + dcnt[q] ...] (dcnt[q]
 * grows by as many).  cap bounds every cnt[q].
 */
extern gi_status gi_cu_sp_select(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t k,
								 const uint32_t *sd, const uint64_t *sk, size_t sstride,
								 const uint32_t *scnt, uint32_t cap, uint32_t *dd,
								 uint64_t *dk, size_t dstride, uint32_t *dcnt);

/*
 * Order each query's selected candidates (dd/dk[q * kf, + dcnt[q])) by
 * (distance, key) and write them as hits[q * kf + r] and found[q] =
 * dcnt[q]; hits beyond found are left alone.
 */
extern gi_status gi_cu_sp_order(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t kf,
								uint32_t *dd, uint64_t *dk, const uint32_t *dcnt,
								gi_hit *hits, uint32_t *found);

/*
 * Select and order in one: when kf is small and no query has more than
 * GI_SP_BLOCK_SORT candidates (cd/ck[q * cstride, + ccnt[q]); the counts
 * are read back, through sp->p_res), each query's first min(kf, ccnt[q])
 * by (distance, key) become its hits and found[q], and *done is set;
 * otherwise nothing is written.
 */
extern gi_status gi_cu_sp_order_few(gi_store *s, gi_cu_sparse *sp, uint32_t nsub, uint32_t kf,
									const uint32_t *cd, const uint64_t *ck, size_t cstride,
									const uint32_t *ccnt, gi_hit *hits, uint32_t *found,
									bool *done);

/* ---- cuda_sparse_count.cu ---- */

/* the counting path's largest count (a query's summed weights) */
#define GI_SP_COUNT_MAX 4095

/* candidates a query of the counting path has room for, unless H is smaller */
#define GI_SP_COUNT_CAND 65536

/* counter bits for counts up to maxc, and 32-bit words of them for H documents */
static inline uint32_t
gi_sp_count_bits(uint32_t maxc)
{
	return maxc <= 255 ? 8 : 16;
}

static inline size_t
gi_sp_count_words(uint32_t H, uint32_t maxc)
{
	uint32_t	per = 32 / gi_sp_count_bits(maxc);

	return ((size_t) H + per - 1) / per;
}

/*
 * The counting path's candidates for a sub-batch of nsub queries (units
 * of one (query, term) pair, whole-number weights summing to at most
 * maxc): every record counts its query weight into the document's
 * counter; the documents at or above each query's threshold (the lowest
 * count k of them reach) go to cd/ck[q * cap ...], their number to
 * cnt[q]; *over (device, nsub flags) marks the queries whose candidates
 * would pass cap (none written: the caller answers them another way).
 */
extern gi_status gi_cu_sp_count(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
								const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
								const gi_sp_qw *pairs, uint32_t nsub, uint32_t H, uint32_t maxc,
								uint32_t k, uint32_t cap, uint32_t band, uint32_t *cd,
								uint64_t *ck, uint32_t *cnt, uint32_t **over);

/* ordinals a band of the tiled count holds: 64 KiB of 8- or 16-bit counters */
static inline uint32_t
gi_sp_band_ords(uint32_t bits)
{
	return bits == 8 ? 65536u : 32768u;
}

/* ---- cuda_sparse_bands.cu ---- */

/*
 * The counting path's bands: each list's slabs sorted by their smallest
 * live key ordinal, that ordinal, and the list's widest slab, so that a
 * block counting the ordinals [lo, hi) of a query in shared memory finds
 * every slab of a list that may hold one by two binary searches (minimum
 * in [lo - widest, hi)).  Rebuilt after the directory (the caller has
 * updated it); b_reads[i] is the slabs such blocks read per slab in the
 * lists, for bands of gi_sp_band_ords(8 << i) ordinals.
 */
extern gi_status gi_cu_sp_bands_update(gi_store *s, gi_cu_sparse *sp);
extern void gi_cu_sp_bands_free(gi_cu_sparse *sp);

#endif							/* GI_CUDA_SPARSE_H */
