/*
 * cuda_kmeans.cu
 *		k-means for CREATE INDEX on the GPU: the kmeans_train, kmeans_assign
 *		and kmeans_release entries of gi_backend_ops.
 *
 * The algorithm is the host's (src/backend/host/host_kmeans.c, described at
 * gi_kmeans_params in gi_backend.h); everything here is deterministic:
 * the same samples give the same centroids on the same device.
 *
 * Samples are prepared on the host side with the host's own code
 * (gi_kmeans_prepare: spherical metrics drop zero vectors and normalise),
 * then everything runs on the device:
 *
 *	k-means++	PRNG draws (gi_kmeans.h's, pg_prng's sequence) in a one-
 *				block kernel.  Per new centre: a grid kernel updates every
 *				sample's D^2 (warp per sample, float, fixed shuffle tree)
 *				and writes per-chunk sums (double, fixed block tree); the
 *				one-block kernel scans the chunk sums, draws r in
 *				[0, total) and picks the sample where the running sum
 *				passes r (largest chunk, then sample, whose prefix <= r),
 *				or a uniform sample when every D^2 is 0, as the host does.
 *	assignment	cuBLAS DGEMM of centroids x samples in row blocks, turned
 *				into |x|^2 - 2 x.c + |c|^2 (L2) / -x.c (IP) / cosine;
 *				then per row (one warp) every list whose approximate
 *				distance is within a rigorous error bound of the minimum
 *				is recomputed exactly as the host search ranks lists
 *				(double sums in dimension order, never contracted), and
 *				the best (distance, list) wins.  So the answer is the
 *				host's list ranking's, bit for bit.  Double, not float:
 *				the expanded L2 form cancels badly far from the origin,
 *				and H100/H200 run DGEMM on FP64 tensor cores as fast as
 *				SGEMM on CUDA cores.  Spherical training ranks by -x.c
 *				(unit samples: the same order as 1 - x.c).
 *	update		stable radix sort of (list, sample) (CUB), so each
 *				cluster's members come in sample order; one block per
 *				cluster sums its members per dimension in double in that
 *				order: the host's sums, bit for bit.  mean -> float,
 *				spherical: normalised with the host's operations.  An
 *				empty cluster keeps its centre; the iterations stop when
 *				no assignment changes.
 *
 * Given the same assignments the update reproduces the host exactly; the
 * assignments themselves differ from the host's training (float partial
 * sums) only on near-ties, and k-means++ picks differ when a draw lands
 * within rounding of a boundary, so the centroids are not the host's but
 * equally good (the GPU tests compare the k-means objective).
 *
 * Scratch lives in a context per device (gi_device.km), grown on demand
 * and kept between calls (a build assigns its rows in many calls, with
 * the same centroids: they are uploaded once, recognised by content),
 * until kmeans_release.  It is transient and not counted in
 * gpuindex.memory_limit (like the search scratch).  The service trains on
 * a thread of its own while its main thread searches: the context's mutex
 * serialises the k-means calls of a device, and the context has its own
 * stream and cuBLAS handle, so nothing it launches shares state with the
 * searches' calls.
 */
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cublas_v2.h>

#include "cuda_store.h"
#include "cuda_util.cuh"
#include "gi_kmeans.h"

/* samples per chunk of the D^2 update (and per partial sum) */
#define GI_KM_CHUNK 512
#define GI_KM_UPD_THREADS 256
/* the one-block pick kernel */
#define GI_KM_PICK_THREADS 1024
/* bytes of the distance matrix per DGEMM block */
#define GI_KM_GEMM_BYTES ((size_t) 128 << 20)

struct gi_cu_km
{
	gi_device  *dev;
	std::mutex	mu;
	cudaStream_t st;
	cublasHandle_t blas;		/* the context's own (a handle is not for two threads) */

	/* centroids of the assignment (recognised by content) */
	float	   *h_cent;
	size_t		h_cent_cap;
	uint32_t	cent_k;
	uint32_t	cent_dim;
	bool		cent_valid;
	double		cent_max2;		/* max |c|^2, for the error bound */

	gi_cu_buf	c;				/* float centroids */
	gi_cu_buf	cd;				/* double centroids (DGEMM) */
	gi_cu_buf	cn;				/* |c|^2, host order */
	gi_cu_buf	x;				/* float rows */
	gi_cu_buf	xd;				/* double rows (DGEMM) */
	gi_cu_buf	xn;				/* |x|^2, host order */
	gi_cu_buf	g;				/* distance block */
	gi_cu_buf	out;			/* lists */

	/* training only */
	gi_cu_buf	mind;
	gi_cu_buf	part;			/* chunk sums of D^2 */
	gi_cu_buf	prefix;			/* their exclusive prefix */
	gi_cu_buf	prev;			/* previous assignment */
	gi_cu_buf	skey;			/* sorted (list, sample) */
	gi_cu_buf	sval;
	gi_cu_buf	ival;			/* 0..n-1 */
	gi_cu_buf	seg;			/* [2 * k] first and end of each cluster */
	gi_cu_buf	tmp;			/* CUB */
	gi_cu_buf	misc;			/* PRNG state, flags */
	gi_cu_pinned p_host;		/* prepared samples, on their way up */
};

/* ---- shared device helpers ----------------------------------------------- */

/* the host's list distance (host_ivf.c), operation for operation */
__device__ __forceinline__ double
gi_km_exact(int metric, const float *__restrict__ c, const float *__restrict__ x,
			uint32_t dim, double xn, double cn)
{
	double		acc = 0.0;
	uint32_t	j;

	if (metric == GI_METRIC_L2)
	{
		for (j = 0; j < dim; j++)
		{
			double		d = __dsub_rn((double) c[j], (double) x[j]);

			acc = __dadd_rn(acc, __dmul_rn(d, d));
		}
		return acc;
	}
	for (j = 0; j < dim; j++)
		acc = __dadd_rn(acc, __dmul_rn((double) c[j], (double) x[j]));
	if (metric == GI_METRIC_IP)
		return -acc;
	if (xn == 0.0 || cn == 0.0)
		return __longlong_as_double(0x7ff0000000000000LL);
	return __dsub_rn(1.0, __ddiv_rn(acc, __dmul_rn(__dsqrt_rn(xn), __dsqrt_rn(cn))));
}

/* rows -> double copy and |x|^2 summed like the host (one thread per row) */
__global__ void
gi_k_km_rowprep(const float *__restrict__ v, uint32_t n, uint32_t dim, double *vd,
				double *vn)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;
	double		s = 0.0;
	uint32_t	j;

	if (i >= n)
		return;
	for (j = 0; j < dim; j++)
	{
		double		x = (double) v[(size_t) i * dim + j];

		s = __dadd_rn(s, __dmul_rn(x, x));
		if (vd)
			vd[(size_t) i * dim + j] = x;
	}
	vn[i] = s;
}

/*
 * The nearest list of each row of a block: G is the DGEMM block (k x rows,
 * column-major: G[r * k + l] = x_r . c_l).  One warp per row.
 */
__global__ void __launch_bounds__(256)
gi_k_km_assign(const double *__restrict__ G, uint32_t k, uint32_t rows, uint32_t dim,
			   int metric, const float *__restrict__ X, const double *__restrict__ xn,
			   const float *__restrict__ C, const double *__restrict__ cn, double cmax2,
			   uint32_t *out)
{
	uint32_t	r = (blockIdx.x * blockDim.x + threadIdx.x) / GI_CU_WARP;
	uint32_t	lane = threadIdx.x & (GI_CU_WARP - 1);
	const double *g;
	const float *x;
	double		xr;
	double		amin = __longlong_as_double(0x7ff0000000000000LL);
	double		tol;
	double		best = __longlong_as_double(0x7ff0000000000000LL);
	uint32_t	bestl = UINT32_MAX;
	uint32_t	l;
	int			o;

	if (r >= rows)
		return;
	g = G + (size_t) r * k;
	x = X + (size_t) r * dim;
	xr = xn[r];

#define GI_KM_APPROX(l_) \
	(metric == GI_METRIC_L2 ? xr + cn[l_] - 2.0 * g[l_] : \
	 metric == GI_METRIC_IP ? -g[l_] : \
	 (xr == 0.0 || cn[l_] == 0.0) ? __longlong_as_double(0x7ff0000000000000LL) : \
	 1.0 - g[l_] / (sqrt(xr) * sqrt(cn[l_])))

	for (l = lane; l < k; l += GI_CU_WARP)
		amin = fmin(amin, gi_rank_double(GI_KM_APPROX(l)));
	for (o = 16; o > 0; o >>= 1)
		amin = fmin(amin, __shfl_xor_sync(GI_CU_FULL_MASK, amin, o));

	/*
	 * Both the DGEMM form and the exact sums are within (dim + 2) u of
	 * |x|^2 + |c|^2 (L2, IP) or of 1 (cosine) of the true value; twice
	 * the sum of both bounds, times 2 for luck, keeps every list that can
	 * be the exact minimum.
	 */
	tol = 8.0 * (dim + 2) * DBL_EPSILON * (metric == GI_METRIC_COSINE ? 1.0 : xr + cmax2);

	for (l = lane; l < k; l += GI_CU_WARP)
	{
		double		a = gi_rank_double(GI_KM_APPROX(l));
		double		d;

		if (!(a <= amin + tol))
			continue;
		d = gi_rank_double(gi_km_exact(metric, C + (size_t) l * dim, x, dim, xr, cn[l]));
		if (d < best || (d == best && l < bestl))
		{
			best = d;
			bestl = l;
		}
	}
#undef GI_KM_APPROX
	for (o = 16; o > 0; o >>= 1)
	{
		double		ob = __shfl_xor_sync(GI_CU_FULL_MASK, best, o);
		uint32_t	ol = __shfl_xor_sync(GI_CU_FULL_MASK, bestl, o);

		if (ob < best || (ob == best && ol < bestl))
		{
			best = ob;
			bestl = ol;
		}
	}
	if (lane == 0)
		out[r] = bestl == UINT32_MAX ? 0 : bestl;
}

/* ---- context ------------------------------------------------------------- */

static gi_status
gi_km_stream(gi_cu_km *km)
{
	if (km->st == NULL)
		GI_CU_TRY(cudaStreamCreateWithFlags(&km->st, cudaStreamNonBlocking));
	return GI_OK;
}

static gi_status
gi_km_sync(gi_cu_km *km, const char *what)
{
	cudaError_t err = cudaStreamSynchronize(km->st);

	if (err == cudaSuccess)
		err = cudaGetLastError();
	if (err != cudaSuccess)
	{
		km->cent_valid = false;
		return gi_cu_status(err, what);
	}
	return GI_OK;
}

static void
gi_km_free_all(gi_cu_km *km)
{
	gi_cu_buf  *bufs[] = {&km->c, &km->cd, &km->cn, &km->x, &km->xd, &km->xn,
		&km->g, &km->out, &km->mind, &km->part, &km->prefix, &km->prev,
		&km->skey, &km->sval, &km->ival, &km->seg, &km->tmp, &km->misc};

	if (km->st)
		cudaStreamSynchronize(km->st);
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		gi_cu_buf_free(bufs[i]);
	gi_cu_pinned_free(&km->p_host);
	free(km->h_cent);
	km->h_cent = NULL;
	km->h_cent_cap = 0;
	km->cent_valid = false;
	cudaGetLastError();
}

/*
 * The device's k-means context, made on first use (with create false:
 * NULL when there is none).  The caller has entered the device.
 */
static gi_cu_km *
gi_km_get(gi_device *dev, bool create)
{
	std::lock_guard<std::mutex> guard(dev->mu);

	if (dev->km == NULL && create)
	{
		dev->km = new(std::nothrow) gi_cu_km();
		if (dev->km == NULL)
			gi_cu_set_error("out of memory for the k-means context");
		else
			dev->km->dev = dev;
	}
	return dev->km;
}

/* resolve and enter the device, and find (or make) its context */
static gi_status
gi_km_open(gi_device *device, bool create, gi_cu_km **out)
{
	gi_device  *dev;
	gi_status	st;

	*out = NULL;
	st = gi_cu_device_resolve(device, &dev);
	if (st == GI_OK)
		st = gi_cu_enter(dev);
	if (st != GI_OK)
		return st;
	*out = gi_km_get(dev, create);
	return *out || !create ? GI_OK : GI_ERR_NOMEM;
}

void
gi_cu_kmeans_release(gi_device *device)
{
	gi_cu_km   *km;

	if (gi_km_open(device, false, &km) != GI_OK || km == NULL)
		return;
	std::lock_guard<std::mutex> guard(km->mu);

	gi_km_free_all(km);
}

/* device_close: everything, the stream too (the caller entered the device) */
void
gi_cu_kmeans_device_free(gi_device *dev)
{
	gi_cu_km   *km = dev->km;

	if (km == NULL)
		return;
	gi_km_free_all(km);
	if (km->blas)
		cublasDestroy(km->blas);
	if (km->st)
		cudaStreamDestroy(km->st);
	cudaGetLastError();
	dev->km = NULL;
	delete km;
}

/*
 * |c|^2 (host order) and the double copy of k centroids already in
 * km->c; also prepares the DGEMM operand.
 */
static gi_status
gi_km_prep_centroids(gi_cu_km *km, uint32_t k, uint32_t dim)
{
	gi_status	st;

	st = gi_cu_buf_reserve(&km->cd, (size_t) k * dim * sizeof(double));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->cn, (size_t) k * sizeof(double));
	if (st != GI_OK)
		return st;
	gi_k_km_rowprep<<<gi_cu_div_up(k, 128), 128, 0, km->st>>>(
		(const float *) km->c.p, k, dim, (double *) km->cd.p, (double *) km->cn.p);
	GI_CU_TRY(cudaGetLastError());
	return GI_OK;
}

/* rows per DGEMM block so that the block of k columns stays bounded */
static uint32_t
gi_km_block_rows(uint32_t k, uint32_t n)
{
	size_t		r = GI_KM_GEMM_BYTES / ((size_t) k * sizeof(double));

	if (r < 32)
		r = 32;
	if (r > n)
		r = n;
	return (uint32_t) r;
}

/*
 * Nearest list of n rows already on the device (km->x float, km->xd
 * double, km->xn norms), against k prepared centroids (km->c, cd, cn),
 * into out[n] (device).
 */
static gi_status
gi_km_assign_device(gi_cu_km *km, uint32_t k, uint32_t dim, gi_metric metric, uint32_t n,
					double cmax2, uint32_t *out)
{
	uint32_t	rb = gi_km_block_rows(k, n);
	cublasHandle_t h;
	gi_status	st;

	st = gi_cu_buf_reserve(&km->g, (size_t) rb * k * sizeof(double));
	if (st != GI_OK)
		return st;
	if (km->blas == NULL)
	{
		cublasStatus_t cs = cublasCreate(&km->blas);

		if (cs != CUBLAS_STATUS_SUCCESS)
		{
			km->blas = NULL;
			gi_cu_set_error("cublasCreate (k-means) failed: %s", cublasGetStatusString(cs));
			return cs == CUBLAS_STATUS_ALLOC_FAILED ? GI_ERR_NOMEM : GI_ERR_DEVICE;
		}
		/* default math: DGEMM stays IEEE double (FP64 tensor cores) */
		cublasSetMathMode(km->blas, CUBLAS_DEFAULT_MATH);
	}
	h = km->blas;
	for (uint32_t r0 = 0; r0 < n; r0 += rb)
	{
		uint32_t	rows = n - r0 < rb ? n - r0 : rb;
		const double one = 1.0;
		const double zero = 0.0;
		cublasStatus_t cs = cublasSetStream(h, km->st);

		/* column-major: G (k x rows) = C^T (k x dim) * X (dim x rows) */
		if (cs == CUBLAS_STATUS_SUCCESS)
			cs = cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) k, (int) rows, (int) dim,
							 &one, (const double *) km->cd.p, (int) dim,
							 (const double *) km->xd.p + (size_t) r0 * dim, (int) dim,
							 &zero, (double *) km->g.p, (int) k);
		if (cs != CUBLAS_STATUS_SUCCESS)
		{
			km->cent_valid = false;
			gi_cu_set_error("cublasDgemm (k-means distances) failed: %s",
							cublasGetStatusString(cs));
			return cs == CUBLAS_STATUS_ALLOC_FAILED ? GI_ERR_NOMEM : GI_ERR_DEVICE;
		}
		gi_k_km_assign<<<gi_cu_div_up((uint64_t) rows * GI_CU_WARP, 256), 256, 0, km->st>>>(
			(const double *) km->g.p, k, rows, dim, (int) metric,
			(const float *) km->x.p + (size_t) r0 * dim,
			(const double *) km->xn.p + r0, (const float *) km->c.p,
			(const double *) km->cn.p, cmax2, out + r0);
		GI_CU_TRY(cudaGetLastError());
	}
	return GI_OK;
}

static double
gi_km_max_norm2(const float *c, uint32_t k, uint32_t dim)
{
	double		m = 0.0;

	for (uint32_t l = 0; l < k; l++)
	{
		double		s = 0.0;

		for (uint32_t j = 0; j < dim; j++)
			s += (double) c[(size_t) l * dim + j] * c[(size_t) l * dim + j];
		if (s > m)
			m = s;
	}
	return m;
}

/* ---- assignment (kmeans_assign) ------------------------------------------ */

gi_status
gi_cu_kmeans_assign(gi_device *device, uint32_t k, uint32_t dim, gi_metric metric,
					const float *centroids, uint32_t n, const float *vectors,
					uint32_t *lists)
{
	size_t		csize = (size_t) k * dim * sizeof(float);
	gi_cu_km   *km;
	gi_status	st;

	if (k == 0 || dim == 0 || (metric != GI_METRIC_L2 && metric != GI_METRIC_IP &&
							   metric != GI_METRIC_COSINE) ||
		(n > 0 && (centroids == NULL || vectors == NULL || lists == NULL)))
	{
		gi_cu_set_error("kmeans_assign: invalid arguments");
		return GI_ERR_INVALID;
	}
	if (n == 0)
		return GI_OK;
	st = gi_km_open(device, true, &km);
	if (st != GI_OK)
		return st;

	std::lock_guard<std::mutex> guard(km->mu);

	st = gi_km_stream(km);
	if (st != GI_OK)
		return st;

	/* the same centroids as last time (a build's next chunk): keep them */
	if (!km->cent_valid || km->cent_k != k || km->cent_dim != dim ||
		memcmp(km->h_cent, centroids, csize) != 0)
	{
		km->cent_valid = false;
		if (km->h_cent_cap < csize)
		{
			float	   *p = (float *) realloc(km->h_cent, csize);

			if (p == NULL)
			{
				gi_cu_set_error("out of memory caching %u centroids", k);
				return GI_ERR_NOMEM;
			}
			km->h_cent = p;
			km->h_cent_cap = csize;
		}
		st = gi_cu_buf_reserve(&km->c, csize);
		if (st != GI_OK)
			return st;
		GI_CU_TRY(cudaMemcpyAsync(km->c.p, centroids, csize, cudaMemcpyHostToDevice,
								  km->st));
		st = gi_km_prep_centroids(km, k, dim);
		if (st != GI_OK)
			return st;
		memcpy(km->h_cent, centroids, csize);
		km->cent_max2 = gi_km_max_norm2(centroids, k, dim);
		km->cent_k = k;
		km->cent_dim = dim;
		km->cent_valid = true;
	}

	/* rows in blocks that keep the row scratch bounded too */
	for (uint32_t r0 = 0; r0 < n;)
	{
		uint32_t	rows = gi_km_block_rows(k, n - r0);
		size_t		rbytes;

		if ((size_t) rows * dim * sizeof(double) > GI_KM_GEMM_BYTES)
			rows = (uint32_t) (GI_KM_GEMM_BYTES / ((size_t) dim * sizeof(double)));
		if (rows == 0)
			rows = 1;
		rbytes = (size_t) rows * dim * sizeof(float);
		st = gi_cu_buf_reserve(&km->x, rbytes);
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&km->xd, rbytes * 2);
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&km->xn, (size_t) rows * sizeof(double));
		if (st == GI_OK)
			st = gi_cu_buf_reserve(&km->out, (size_t) rows * sizeof(uint32_t));
		if (st != GI_OK)
			return st;
		GI_CU_TRY(cudaMemcpyAsync(km->x.p, vectors + (size_t) r0 * dim, rbytes,
								  cudaMemcpyHostToDevice, km->st));
		gi_k_km_rowprep<<<gi_cu_div_up(rows, 128), 128, 0, km->st>>>(
			(const float *) km->x.p, rows, dim, (double *) km->xd.p,
			(double *) km->xn.p);
		GI_CU_TRY(cudaGetLastError());
		st = gi_km_assign_device(km, k, dim, metric, rows, km->cent_max2,
								 (uint32_t *) km->out.p);
		if (st != GI_OK)
			return st;
		GI_CU_TRY(cudaMemcpyAsync(lists + r0, km->out.p, (size_t) rows * sizeof(uint32_t),
								  cudaMemcpyDeviceToHost, km->st));
		st = gi_km_sync(km, "k-means assignment");
		if (st != GI_OK)
			return st;
		r0 += rows;
	}
	return GI_OK;
}

/* ---- training: k-means++ -------------------------------------------------- */

struct gi_km_state
{
	gi_prng		prng;
	uint32_t	pick;
	uint32_t	changed;
};

/* the first centre: uniform (the host's first draw) */
__global__ void
gi_k_km_first(gi_km_state *stt, uint64_t seed, uint32_t n, const float *__restrict__ X,
			  uint32_t dim, float *C)
{
	__shared__ uint32_t pick;

	if (threadIdx.x == 0)
	{
		gi_prng_seed(&stt->prng, seed);
		pick = (uint32_t) gi_prng_u64_range(&stt->prng, 0, n - 1);
		stt->pick = pick;
	}
	__syncthreads();
	for (uint32_t j = threadIdx.x; j < dim; j += blockDim.x)
		C[j] = X[(size_t) pick * dim + j];
}

/*
 * D^2 update against centre c (first: set, else min), then the chunk's
 * sum of max(D^2, 0) in double.  One block per chunk of GI_KM_CHUNK
 * samples, one warp per sample at a time.
 */
__global__ void __launch_bounds__(GI_KM_UPD_THREADS)
gi_k_km_mind(const float *__restrict__ X, uint32_t n, uint32_t dim, bool spherical,
			 const float *__restrict__ c, bool first, float *mind, double *part)
{
	typedef cub::BlockReduce<double, GI_KM_UPD_THREADS> Reduce;
	__shared__ typename Reduce::TempStorage tmp;
	const uint32_t base = blockIdx.x * GI_KM_CHUNK;
	const uint32_t warp = threadIdx.x / GI_CU_WARP;
	const uint32_t lane = threadIdx.x & (GI_CU_WARP - 1);
	const uint32_t per = GI_KM_CHUNK / (GI_KM_UPD_THREADS / GI_CU_WARP);
	double		s = 0.0;

	for (uint32_t q = 0; q < per; q++)
	{
		uint32_t	i = base + warp * per + q;
		const float *x;
		float		acc = 0.0f;

		if (i >= n)
			break;
		x = X + (size_t) i * dim;
		for (uint32_t j = lane; j < dim; j += GI_CU_WARP)
		{
			if (spherical)
				acc = fmaf(x[j], c[j], acc);
			else
			{
				float		d = x[j] - c[j];

				acc = fmaf(d, d, acc);
			}
		}
		for (int o = 16; o > 0; o >>= 1)
			acc += __shfl_xor_sync(GI_CU_FULL_MASK, acc, o);
		if (lane == 0)
		{
			float		d = spherical ? 1.0f - acc : acc;

			if (first || d < mind[i])
				mind[i] = d;
		}
	}
	__syncthreads();
	for (uint32_t t = threadIdx.x; t < GI_KM_CHUNK; t += GI_KM_UPD_THREADS)
	{
		uint32_t	i = base + t;

		if (i < n)
		{
			float		m = mind[i];

			s += m > 0.0f ? (double) m : 0.0;
		}
	}
	s = Reduce(tmp).Sum(s);
	if (threadIdx.x == 0)
		part[blockIdx.x] = s;
}

/*
 * Pick centre c: total of the chunk sums, r = draw * total, the chunk
 * and then the sample where the running sum passes r; copy it to C[c].
 */
__global__ void __launch_bounds__(GI_KM_PICK_THREADS)
gi_k_km_pick(gi_km_state *stt, uint32_t n, uint32_t nchunks, const double *__restrict__ part,
			 double *prefix, const float *__restrict__ mind, const float *__restrict__ X,
			 uint32_t dim, float *C)
{
	typedef cub::BlockScan<double, GI_KM_PICK_THREADS> Scan;
	__shared__ typename Scan::TempStorage tmp;
	__shared__ double r_sh;
	__shared__ int	owner;
	__shared__ int	pick_t;
	__shared__ uint32_t pick;
	double		running = 0.0;
	const uint32_t t = threadIdx.x;

	for (uint32_t b0 = 0; b0 < nchunks; b0 += GI_KM_PICK_THREADS)
	{
		double		v = b0 + t < nchunks ? part[b0 + t] : 0.0;
		double		excl;
		double		agg;

		Scan(tmp).ExclusiveSum(v, excl, agg);
		if (b0 + t < nchunks)
			prefix[b0 + t] = running + excl;
		running += agg;
		__syncthreads();
	}
	if (t == 0)
	{
		owner = -1;
		pick_t = -1;
		if (running > 0.0)
		{
			r_sh = gi_prng_double(&stt->prng) * running;
			if (!isfinite(r_sh))
			{
				/* D^2 overflowed: the host's scan finds nothing either */
				r_sh = -1.0;
				pick = n - 1;
			}
		}
		else
		{
			/* every sample sits on a centre already: duplicates are fine */
			r_sh = -1.0;
			pick = (uint32_t) gi_prng_u64_range(&stt->prng, 0, n - 1);
		}
	}
	__syncthreads();
	if (r_sh >= 0.0)
	{
		const double r = r_sh;
		uint32_t	base;
		float		m;
		double		w;
		double		excl;
		double		agg;

		for (uint32_t b = t; b < nchunks; b += GI_KM_PICK_THREADS)
			if (part[b] > 0.0 && prefix[b] <= r)
				atomicMax(&owner, (int) b);
		__syncthreads();
		/* owner >= 0: chunk 0's prefix is 0 and some chunk sum is > 0 */
		base = (uint32_t) owner * GI_KM_CHUNK;
		m = (t < GI_KM_CHUNK && base + t < n) ? mind[base + t] : 0.0f;
		w = m > 0.0f ? (double) m : 0.0;
		Scan(tmp).ExclusiveSum(w, excl, agg);
		if (w > 0.0 && prefix[owner] + excl <= r)
			atomicMax(&pick_t, (int) t);
		__syncthreads();
		if (t == 0)
			pick = base + (uint32_t) (pick_t >= 0 ? pick_t : 0);
	}
	__syncthreads();
	if (t == 0)
		stt->pick = pick;
	for (uint32_t j = t; j < dim; j += GI_KM_PICK_THREADS)
		C[j] = X[(size_t) pick * dim + j];
}

/* ---- training: Lloyd update ------------------------------------------------ */

__global__ void
gi_k_km_iota(uint32_t *v, uint32_t n)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		v[i] = i;
}

/* did any assignment change (it > 0)?  also keeps the new one */
__global__ void
gi_k_km_changed(const uint32_t *__restrict__ a, uint32_t *prev, uint32_t n,
				gi_km_state *stt)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	if (a[i] != prev[i])
	{
		stt->changed = 1;
		prev[i] = a[i];
	}
}

/* cluster boundaries in the sorted assignment: seg[2l] first, seg[2l+1] end */
__global__ void
gi_k_km_segments(const uint32_t *__restrict__ key, uint32_t n, uint32_t *seg)
{
	uint32_t	i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	if (i == 0 || key[i] != key[i - 1])
		seg[2 * key[i]] = i;
	if (i == n - 1 || key[i] != key[i + 1])
		seg[2 * key[i] + 1] = i + 1;
}

/*
 * One block per cluster: the mean of its members (in sample order, double
 * sums: the host's), then for the spherical metrics the host's
 * normalisation.  An empty cluster keeps its centre.
 */
__global__ void __launch_bounds__(256)
gi_k_km_update(const float *__restrict__ X, uint32_t dim, const uint32_t *__restrict__ members,
			   const uint32_t *__restrict__ seg, bool spherical, float *C)
{
	__shared__ double norm_sh;
	const uint32_t l = blockIdx.x;
	const uint32_t first = seg[2 * l];
	const uint32_t end = seg[2 * l + 1];
	const uint32_t count = end - first;
	float	   *cv = C + (size_t) l * dim;

	if (count == 0)
		return;
	for (uint32_t j = threadIdx.x; j < dim; j += blockDim.x)
	{
		double		s = 0.0;

		for (uint32_t m = first; m < end; m++)
			s = __dadd_rn(s, (double) X[(size_t) members[m] * dim + j]);
		cv[j] = __double2float_rn(__ddiv_rn(s, (double) count));
	}
	if (!spherical)
		return;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		double		n2 = 0.0;

		for (uint32_t j = 0; j < dim; j++)
		{
			double		v = (double) cv[j];

			n2 = __dadd_rn(n2, __dmul_rn(v, v));
		}
		norm_sh = n2 == 0.0 ? 0.0 : __dsqrt_rn(n2);
	}
	__syncthreads();
	if (norm_sh == 0.0)
		return;
	for (uint32_t j = threadIdx.x; j < dim; j += blockDim.x)
		cv[j] = __double2float_rn(__ddiv_rn((double) cv[j], norm_sh));
}

/* ---- training (kmeans_train) ------------------------------------------------ */

/* the work queued so far done, does the caller want the rest? */
static gi_status
gi_km_keep_going(gi_cu_km *km, const gi_kmeans_params *p)
{
	gi_status	st;

	if (p->keep_going == NULL)
		return GI_OK;
	st = gi_km_sync(km, "k-means training");
	if (st != GI_OK)
		return st;
	if (!p->keep_going(p->keep_going_arg))
	{
		gi_cu_set_error("k-means training stopped by its caller");
		return GI_ERR_CANCELLED;
	}
	return GI_OK;
}

static gi_status
gi_km_train_locked(gi_cu_km *km, const gi_kmeans_params *p, uint32_t nsamples, const float *samples,
				   float *centroids, uint32_t *nproduced)
{
	const uint32_t dim = p->dim;
	const bool	spherical = p->metric != GI_METRIC_L2;
	const gi_metric rank_metric = spherical ? GI_METRIC_IP : GI_METRIC_L2;
	uint32_t	n;
	uint32_t	k;
	uint32_t	nchunks;
	size_t		xbytes;
	gi_km_state *stt;
	uint32_t   *assign;
	int			bits;
	size_t		tmpbytes = 0;
	double		cmax2;
	gi_status	st;

	*nproduced = 0;
	st = gi_km_stream(km);
	if (st != GI_OK)
		return st;

	/* the host's preparation, on a pinned copy */
	xbytes = (size_t) nsamples * dim * sizeof(float);
	st = gi_cu_pinned_reserve(&km->p_host, xbytes);
	if (st != GI_OK)
		return st;
	memcpy(km->p_host.p, samples, xbytes);
	n = gi_kmeans_prepare((float *) km->p_host.p, nsamples, dim, spherical);
	if (n == 0)
		return GI_OK;
	k = p->nlists < n ? p->nlists : n;
	xbytes = (size_t) n * dim * sizeof(float);

	/*
	 * |c|^2 of the error bound of the assignment: every centre is a sample
	 * or a mean of samples, so |c| <= max |x| (plus the float rounding of
	 * the mean: the margin).
	 */
	cmax2 = 1.01 * gi_km_max_norm2((const float *) km->p_host.p, n, dim);
	nchunks = gi_cu_div_up(n, GI_KM_CHUNK);
	for (bits = 1; bits < 32 && (1u << bits) < k; bits++)
		;

	/* training invalidates the assignment's centroid cache (shared buffers) */
	km->cent_valid = false;
	st = gi_cu_buf_reserve(&km->x, xbytes);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->xd, xbytes * 2);
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->xn, (size_t) n * sizeof(double));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->c, (size_t) k * dim * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->out, (size_t) n * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->mind, (size_t) n * sizeof(float));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->part, (size_t) nchunks * sizeof(double));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->prefix, (size_t) nchunks * sizeof(double));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->prev, (size_t) n * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->skey, (size_t) n * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->sval, (size_t) n * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->ival, (size_t) n * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->seg, (size_t) 2 * k * sizeof(uint32_t));
	if (st == GI_OK)
		st = gi_cu_buf_reserve(&km->misc, sizeof(gi_km_state));
	if (st != GI_OK)
		return st;
	GI_CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, tmpbytes, (const uint32_t *) NULL,
											  (uint32_t *) NULL, (const uint32_t *) NULL,
											  (uint32_t *) NULL, (int) n, 0, bits,
											  km->st));
	st = gi_cu_buf_reserve(&km->tmp, tmpbytes);
	if (st != GI_OK)
		return st;
	stt = (gi_km_state *) km->misc.p;
	assign = (uint32_t *) km->out.p;

	GI_CU_TRY(cudaMemcpyAsync(km->x.p, km->p_host.p, xbytes, cudaMemcpyHostToDevice,
							  km->st));
	gi_k_km_rowprep<<<gi_cu_div_up(n, 128), 128, 0, km->st>>>(
		(const float *) km->x.p, n, dim, (double *) km->xd.p, (double *) km->xn.p);
	gi_k_km_iota<<<gi_cu_div_up(n, 256), 256, 0, km->st>>>((uint32_t *) km->ival.p, n);
	GI_CU_TRY(cudaGetLastError());

	/* k-means++ */
	gi_k_km_first<<<1, 128, 0, km->st>>>(stt, p->seed, n, (const float *) km->x.p, dim,
											(float *) km->c.p);
	GI_CU_TRY(cudaGetLastError());
	for (uint32_t c = 1; c < k; c++)
	{
		float	   *C = (float *) km->c.p;

		gi_k_km_mind<<<nchunks, GI_KM_UPD_THREADS, 0, km->st>>>(
			(const float *) km->x.p, n, dim, spherical, C + (size_t) (c - 1) * dim,
			c == 1, (float *) km->mind.p, (double *) km->part.p);
		gi_k_km_pick<<<1, GI_KM_PICK_THREADS, 0, km->st>>>(
			stt, n, nchunks, (const double *) km->part.p, (double *) km->prefix.p,
			(const float *) km->mind.p, (const float *) km->x.p, dim,
			C + (size_t) c * dim);
		if ((c & 255) == 0)
			GI_CU_TRY(cudaGetLastError());
		if ((c & 63) == 0 && (st = gi_km_keep_going(km, p)) != GI_OK)
			return st;
	}
	GI_CU_TRY(cudaGetLastError());

	/* Lloyd iterations */
	for (uint32_t it = 0; it < p->iterations; it++)
	{
		uint32_t	changed = 1;

		if ((st = gi_km_keep_going(km, p)) != GI_OK)
			return st;
		st = gi_km_prep_centroids(km, k, dim);
		if (st == GI_OK)
			st = gi_km_assign_device(km, k, dim, rank_metric, n, cmax2, assign);
		if (st != GI_OK)
			return st;
		if (it == 0)
			GI_CU_TRY(cudaMemcpyAsync(km->prev.p, assign, (size_t) n * sizeof(uint32_t),
									  cudaMemcpyDeviceToDevice, km->st));
		else
		{
			GI_CU_TRY(cudaMemsetAsync(&stt->changed, 0, sizeof(uint32_t), km->st));
			gi_k_km_changed<<<gi_cu_div_up(n, 256), 256, 0, km->st>>>(
				assign, (uint32_t *) km->prev.p, n, stt);
			GI_CU_TRY(cudaGetLastError());
			GI_CU_TRY(cudaMemcpyAsync(&changed, &stt->changed, sizeof(uint32_t),
									  cudaMemcpyDeviceToHost, km->st));
			st = gi_km_sync(km, "k-means iteration");
			if (st != GI_OK)
				return st;
		}
		if (!changed)
			break;

		GI_CU_TRY(cub::DeviceRadixSort::SortPairs(km->tmp.p, tmpbytes, assign,
												  (uint32_t *) km->skey.p,
												  (const uint32_t *) km->ival.p,
												  (uint32_t *) km->sval.p, (int) n, 0,
												  bits, km->st));
		GI_CU_TRY(cudaMemsetAsync(km->seg.p, 0, (size_t) 2 * k * sizeof(uint32_t),
								  km->st));
		gi_k_km_segments<<<gi_cu_div_up(n, 256), 256, 0, km->st>>>(
			(const uint32_t *) km->skey.p, n, (uint32_t *) km->seg.p);
		gi_k_km_update<<<k, dim < 256 ? ((dim + 31) / 32) * 32 : 256, 0, km->st>>>(
			(const float *) km->x.p, dim, (const uint32_t *) km->sval.p,
			(const uint32_t *) km->seg.p, spherical, (float *) km->c.p);
		GI_CU_TRY(cudaGetLastError());
	}

	GI_CU_TRY(cudaMemcpyAsync(centroids, km->c.p, (size_t) k * dim * sizeof(float),
							  cudaMemcpyDeviceToHost, km->st));
	st = gi_km_sync(km, "k-means training");
	if (st != GI_OK)
		return st;
	*nproduced = k;
	return GI_OK;
}

gi_status
gi_cu_kmeans_train(const gi_kmeans_params *p, uint32_t n, const float *samples,
				   float *centroids, uint32_t *nproduced)
{
	uint32_t	k = 0;
	gi_cu_km   *km;
	gi_status	st;

	if (p == NULL || nproduced == NULL || p->dim == 0 || p->nlists == 0 ||
		(p->metric != GI_METRIC_L2 && p->metric != GI_METRIC_IP &&
		 p->metric != GI_METRIC_COSINE) ||
		(n > 0 && (samples == NULL || centroids == NULL)))
	{
		gi_cu_set_error("kmeans_train: invalid arguments");
		return GI_ERR_INVALID;
	}
	if (n == 0)
	{
		*nproduced = 0;
		return GI_OK;
	}
	*nproduced = 0;
	st = gi_km_open(p->device, true, &km);
	if (st != GI_OK)
		return st;

	std::lock_guard<std::mutex> guard(km->mu);

	st = gi_km_train_locked(km, p, n, samples, centroids, &k);
	/* the training scratch is big and one-off: keep none of it */
	if (km->st)
		cudaStreamSynchronize(km->st);
	gi_cu_buf_free(&km->mind);
	gi_cu_buf_free(&km->part);
	gi_cu_buf_free(&km->prefix);
	gi_cu_buf_free(&km->prev);
	gi_cu_buf_free(&km->skey);
	gi_cu_buf_free(&km->sval);
	gi_cu_buf_free(&km->ival);
	gi_cu_buf_free(&km->seg);
	gi_cu_buf_free(&km->tmp);
	gi_cu_buf_free(&km->x);
	gi_cu_buf_free(&km->xd);
	gi_cu_buf_free(&km->xn);
	gi_cu_buf_free(&km->g);
	gi_cu_buf_free(&km->out);
	gi_cu_pinned_free(&km->p_host);
	km->cent_valid = false;
	*nproduced = st == GI_OK ? k : 0;
	return st;
}
