/*
 * cuda_sparse_term.cu
 *		Term-parallel scoring of the sparse kind: every (query, term) pair's
 *		posting list is scattered into the query's row of dense double
 *		accumulators indexed by key ordinal, for a whole sub-batch of
 *		queries in one launch.
 *
 * The work is cut into chunks of GI_SP_CHUNK slabs of one list (the slab
 * directory lists them, so a long list spreads over many warps); a warp
 * finds its chunk's unit by binary search over the chunks' prefix sums,
 * its first lanes read the chunk's slab headers, and then every lane
 * (slot) loads its weight and ordinal of all the chunk's slabs before the
 * first atomic.  A product is q * w in double (exact for two floats) plus
 * 0.0, which turns -0.0 into +0.0: the rows start at -0.0, so an entry
 * still -0.0 afterwards was never touched.
 */
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

__global__ void __launch_bounds__(256)
gi_k_sp_scatter(const gi_sp_unit *__restrict__ units, const uint32_t *__restrict__ prefix,
				uint32_t nu, uint32_t nchunks, const uint32_t *__restrict__ dir,
				const gi_dslab *slabs, uint32_t W, uint32_t lo, uint32_t rlen,
				uint32_t span, double *acc)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
	uint32_t	c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	for (; c < nchunks; c += nwarps)
	{
		uint32_t	u = gi_sp_find_unit(prefix, nu, c);
		gi_sp_unit	un = units[u];
		uint32_t	first = (c - __ldg(&prefix[u])) * GI_SP_CHUNK;
		uint32_t	m = un.n - first < GI_SP_CHUNK ? un.n - first : GI_SP_CHUNK;
		double	   *row = acc + (size_t) un.q * span;
		const double qw = (double) un.w;
		uint32_t	wv[GI_SP_CHUNK];
		uint32_t	kv[GI_SP_CHUNK];
		int			j;

		/* every slot's weight and ordinal of the chunk, then the atomics */
		gi_sp_load_chunk<true>(dir, un.beg + first, m, slabs, W, lo, lane, kv, wv);
#pragma unroll
		for (j = 0; j < GI_SP_CHUNK; j++)
			if (kv[j] < rlen)
				atomicAdd(&row[kv[j]], __dadd_rn(qw * (double) __uint_as_float(wv[j]), 0.0));
	}
}

gi_status
gi_cu_sp_term_score(gi_store *s, gi_cu_sparse *sp, const gi_sp_unit *units,
					const uint32_t *prefix, uint32_t nu, uint32_t nchunks, uint32_t nsub,
					uint32_t lo, uint32_t rlen, uint32_t span, double *acc)
{
	size_t		n = (size_t) nsub * span;
	uint32_t	most = (uint32_t) s->dev->sms * 8;
	uint32_t	blocks;

	(void) sp;
	blocks = gi_cu_div_up(n / 2 + 1, 256);
	gi_k_sp_untouch<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
		(unsigned long long *) acc, n);
	GI_CU_TRY(cudaGetLastError());
	if (nchunks == 0)
		return GI_OK;
	most = (uint32_t) s->dev->sms * 16;
	blocks = gi_cu_div_up(nchunks, 8);
	gi_k_sp_scatter<<<blocks < most ? blocks : most, 256, 0, s->ss>>>(
		units, prefix, nu, nchunks, (const uint32_t *) sp->dir.d_dir.p, s->d_slabs, s->words,
		lo, rlen, span, acc);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}
