/*
 * cuda_sparse_term.cu
 *		Term-parallel scoring of the sparse kind: the posting lists of the
 *		sub-batch's query terms scattered into the queries' dense double
 *		accumulators (indexed by key ordinal) with atomics.
 *
 * A chunk is GI_SP_CHUNK slabs of one list (the slab directory lists
 * them, so a long list spreads over many warps).  When a block of
 * GI_SP_QGROUP queries' rows fit half the L2, a unit is one (query, term)
 * pair and the warps take the chunks in query order, each its own share.
 * Beyond that, a unit is a term and the queries of one block holding it
 * (the chunk is loaded once for all of them), and the chunks are taken
 * block by block, in a block in the order of their first slab in the
 * pool, through a work counter: slabs are allocated as rows arrive, so
 * the chunks in flight hold rows of about the same age (key ordinals
 * close together, across all lists) for at most GI_SP_QGROUP queries, and
 * the accumulator entries their atomics hit stay in L2 however large the
 * collection and the sub-batch.
 *
 * A warp's first lanes read the chunk's slab headers, then every lane
 * (slot) loads its weight and ordinal of all the chunk's slabs before the
 * first atomic.  A product is q * w in double (exact for two floats) plus
 * 0.0, which turns -0.0 into +0.0: the rows start at -0.0, so an entry
 * still -0.0 afterwards was never touched.
 */
#include <cub/device/device_radix_sort.cuh>

#include "cuda_sparse_chunk.cuh"

/* every entry of acc[0, n) to -0.0, 16 bytes a store */
__global__ void
gi_k_sp_untouch(unsigned long long *acc, size_t n)
{
	size_t		i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
	size_t		stride = (size_t) gridDim.x * blockDim.x;
	ulonglong2	v = make_ulonglong2(GI_SP_UNTOUCHED, GI_SP_UNTOUCHED);

	for (; 2 * i + 1 < n; i += stride)
		((ulonglong2 *) acc)[i] = v;
	if ((n & 1) && i == n / 2)
		acc[n - 1] = GI_SP_UNTOUCHED;
}

/* sort key (query block, first slab) and value (chunk number) of every chunk */
__global__ void
gi_k_sp_chunk_keys(const gi_sp_unit *__restrict__ units, const uint32_t *__restrict__ prefix,
				   uint32_t nu, uint32_t nchunks, const uint32_t *__restrict__ dir,
				   const gi_sp_qw *__restrict__ pairs, int slab_bits,
				   unsigned long long *keys, uint32_t *vals)
{
	uint32_t	c = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t	stride = gridDim.x * blockDim.x;

	for (; c < nchunks; c += stride)
	{
		uint32_t	u = gi_sp_find_unit(prefix, nu, c);
		uint32_t	blk = pairs[units[u].q].q / GI_SP_QGROUP;
		uint32_t	slab = __ldg(&dir[units[u].beg + (c - __ldg(&prefix[u])) * GI_SP_CHUNK]);

		keys[c] = ((unsigned long long) blk << slab_bits) | slab;
		vals[c] = c;
	}
}

__global__ void __launch_bounds__(256)
gi_k_sp_scatter(const gi_sp_unit *__restrict__ units, const uint32_t *__restrict__ prefix,
				uint32_t nu, uint32_t nchunks, const uint32_t *__restrict__ order,
				uint32_t *next, const gi_sp_qw *__restrict__ pairs,
				const uint32_t *__restrict__ dir, const gi_dslab *slabs, uint32_t W,
				uint32_t lo, uint32_t rlen, uint32_t span, double *acc)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
	uint32_t	own = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	for (;; own += nwarps)
	{
		uint32_t	i = own;
		uint32_t	c;
		uint32_t	u;
		gi_sp_unit	un;
		uint32_t	first;
		uint32_t	m;
		uint32_t	wv[GI_SP_CHUNK];
		uint32_t	kv[GI_SP_CHUNK];
		double		wd[GI_SP_CHUNK];
		int			j;

		if (next != NULL)
		{
			if (lane == 0)
				i = atomicAdd(next, 1u);
			i = __shfl_sync(GI_CU_FULL_MASK, i, 0);
		}
		if (i >= nchunks)
			break;
		c = order ? __ldg(&order[i]) : i;
		u = gi_sp_find_unit(prefix, nu, c);
		un = units[u];
		first = (c - __ldg(&prefix[u])) * GI_SP_CHUNK;
		m = un.n - first < GI_SP_CHUNK ? un.n - first : GI_SP_CHUNK;

		/* every slot's weight and ordinal of the chunk, then the atomics */
		gi_sp_load_chunk<true>(dir, un.beg + first, m, slabs, W, lo, lane, kv, wv);
#pragma unroll
		for (j = 0; j < GI_SP_CHUNK; j++)
			wd[j] = (double) __uint_as_float(wv[j]);
		for (uint32_t p0 = 0; p0 < un.nq; p0 += 32)
		{
			uint32_t	np = un.nq - p0 < 32 ? un.nq - p0 : 32;
			gi_sp_qw	mine = {0, 0.0f};

			if (lane < np)
				mine = pairs[un.q + p0 + lane];
			for (uint32_t t = 0; t < np; t++)
			{
				uint32_t	q = __shfl_sync(GI_CU_FULL_MASK, mine.q, t);
				double		qw = (double) __shfl_sync(GI_CU_FULL_MASK, mine.w, t);
				double	   *row = acc + (size_t) q * span;

#pragma unroll
				for (j = 0; j < GI_SP_CHUNK; j++)
					if (kv[j] < rlen)
						atomicAdd(&row[kv[j]], __dadd_rn(qw * wd[j], 0.0));
			}
		}
	}
}

gi_status
gi_cu_sp_term_order(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
					const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
					const gi_sp_qw *pairs, uint32_t nsub, bool by_slab)
{
	size_t		n = nchunks;
	uint32_t   *order;
	uint32_t   *vals;
	unsigned long long *keys_in;
	unsigned long long *keys_out;
	size_t		tmp = 0;
	int			slab_bits = 1;
	int			blk_bits = 0;
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	uint32_t	blocks;
	gi_status	st;

	/* order | values | keys in | keys out | the scatter's work counter */
	st = gi_cu_buf_reserve(&sp->s_ord, n * 24 + 8);
	if (st != GI_OK || nchunks == 0 || !by_slab)
		return st;
	order = (uint32_t *) sp->s_ord.p;
	vals = order + n;
	keys_in = (unsigned long long *) (vals + n);
	keys_out = keys_in + n;
	while (slab_bits < 32 && ((uint64_t) 1 << slab_bits) < s->nslabs)
		slab_bits++;
	while (((uint64_t) 1 << blk_bits) * GI_SP_QGROUP < nsub)
		blk_bits++;
	blocks = gi_cu_div_up(nchunks, 256);
	gi_k_sp_chunk_keys<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
		units, prefix, nu, nchunks, (const uint32_t *) sp->dir.d_dir.p, pairs, slab_bits,
		keys_in, vals);
	GI_CU_TRY(cudaGetLastError());
	GI_CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmp, keys_in, keys_out, vals, order,
											  (int) nchunks, 0, slab_bits + blk_bits, s->ss));
	st = gi_cu_buf_reserve(&sp->s_tmp, tmp);
	if (st != GI_OK)
		return st;
	GI_CU_TRY(cub::DeviceRadixSort::SortPairs(sp->s_tmp.p, tmp, keys_in, keys_out, vals, order,
											  (int) nchunks, 0, slab_bits + blk_bits, s->ss));
	return GI_OK;
}

gi_status
gi_cu_sp_term_score(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
					const uint32_t *prefix, uint32_t nu, uint32_t nchunks,
					const gi_sp_qw *pairs, bool by_slab, uint32_t nsub, uint32_t lo,
					uint32_t rlen, uint32_t span, double *acc)
{
	size_t		n = (size_t) nsub * span;
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	uint32_t	blocks;
	uint32_t   *next = (uint32_t *) ((char *) sp->s_ord.p + (size_t) nchunks * 24);

	blocks = gi_cu_div_up(n / 2 + 1, 256);
	gi_k_sp_untouch<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
		(unsigned long long *) acc, n);
	GI_CU_TRY(cudaGetLastError());
	if (nchunks == 0)
		return GI_OK;
	if (by_slab)
		GI_CU_TRY(cudaMemsetAsync(next, 0, sizeof(uint32_t), s->ss));
	blocks = gi_cu_div_up(nchunks, 8);
	gi_k_sp_scatter<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
		units, prefix, nu, nchunks, by_slab ? (const uint32_t *) sp->s_ord.p : NULL,
		by_slab ? next : NULL, pairs,
		(const uint32_t *) sp->dir.d_dir.p, s->d_slabs, s->words, lo, rlen, span, acc);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}
