/*
 * faiss_gpu_bench.cpp
 *		A Faiss GPU IVF-Flat and IVFPQ peer for gpuindex's benchmarks, linked against
 *		a static Faiss 1.7.3 built from Debian bookworm's source package for
 *		sm_90 (bench/faiss-gpu/build.sh, README.md).
 *
 *	 faiss_gpu_bench store [OUTDIR]
 *		bench/store/bench_store.c's figures on its exact data (bench/store/
 *		synth.h: same generator, seeds, centroids and delete sets):
 *		ingestion, delete 10K of 1M, sliding window, search QPS / recall@10
 *		against probes for batches 1 / 32 / 1,024 / 10,000, device memory.
 *		Environment as bench_store: BENCH_N (1,000,000), BENCH_DIM (128),
 *		BENCH_LISTS (1024), BENCH_SKIP_SEARCH=1.  CSV: OUTDIR/faiss_gpu_store.csv.
 *	 faiss_gpu_bench sweep --base B.npy --queries Q.npy --gt GT.npy --lists L
 *			[--probes 1,2,4,8,16,32,64] [--batch 1,1000] [--metric l2|cosine|ip]
 *			[--train-per-list 50] [--repeats 5] [--csv OUT.csv]
 *		the SQL benchmark's cached datasets (bench/.cache/data/NAME/): train
 *		with Faiss's k-means, add, then QPS and recall@10 per probes and batch.
 *	 faiss_gpu_bench pqsweep --base B.npy --queries Q.npy --gt GT.npy --lists L
 *			[--m 64] [--nbits 8] [--probes 1,2,4,8,16,32,64] [--batch 1,1000,10000]
 *			[--metric l2|cosine|ip] [--train-per-list 50] [--pq-per-entry 256] [--pq-niter 25]
 *			[--precomputed 0|1|0,1] [--float16-lut auto|0|1] [--interleaved 0|1]
 *			[--repeats 5] [--csv OUT.csv]
 *		the same with GpuIndexIVFPQ (Faiss trains the coarse quantizer and
 *		the PQ codebooks); CSV adds m, nbits and bytes_per_vector.
 *	 faiss_gpu_bench synth-check		(no GPU) hashes of the store data, for
 *		bench/faiss-gpu/check-synth.sh
 *	 faiss_gpu_bench npy-check FILE...	(no GPU) what the .npy reader reads
 *
 * Exit status 77 when no CUDA device is present (as bench_store.run).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/gpu/GpuIndexFlat.h>
#include <faiss/gpu/GpuIndexIVFFlat.h>
#include <faiss/gpu/GpuIndexIVFPQ.h>
#include <faiss/gpu/StandardGpuResources.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "synth.h"

using faiss::gpu::GpuIndexFlatL2;
using faiss::gpu::GpuIndexIVFFlat;
using faiss::gpu::GpuIndexIVFFlatConfig;
using faiss::gpu::StandardGpuResources;
typedef faiss::Index::idx_t idx_t;

static const char *SYSTEM = "faiss-gpu-1.7.3";

#define CK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
			throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
	} while (0)

static double
now_ms()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* bench_store's percentile: the element at rank p*(n-1), rounded */
static double
pct(std::vector<double> v, double p)
{
	if (v.empty())
		return NAN;
	std::sort(v.begin(), v.end());
	return v[(size_t) (p * (v.size() - 1) + 0.5)];
}

static std::string
fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static std::string
fmt(const char *f, ...)
{
	char		buf[4096];
	va_list		ap;

	va_start(ap, f);
	vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *) p;

	while (n--)
		h = (h ^ *b++) * 1099511628211ull;
	return h;
}

static const uint64_t FNV0 = 14695981039346656037ull;

/* ------------------------------------------------------------------ */
/* output: bench_store's table rows, and a CSV                         */

static FILE *csv;

static void
row(const char *bench, const std::string &params, const char *metric, double value,
	const char *unit, double floor_v, const std::string &note)
{
	printf("| %-16s | %-34s | %-22s | %12.4g %-8s | %10.4g | %s\n", bench, params.c_str(), metric,
		   value, unit, floor_v, note.c_str());
	fflush(stdout);
}

static std::string
num(double v, const char *f = "%.6g")
{
	return std::isfinite(v) ? fmt(f, v) : std::string();
}

/* system,figure,batch,probes,recall10,p50_ms,p99_ms,qps,value,unit,params,note */
static void
csv_row(const char *figure, int batch, int probes, double recall, double p50, double p99,
		double qps, double value, const char *unit, const std::string &params,
		const std::string &note)
{
	if (!csv)
		return;
	fprintf(csv, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,\"%s\",\"%s\"\n", SYSTEM, figure,
			batch > 0 ? fmt("%d", batch).c_str() : "", probes > 0 ? fmt("%d", probes).c_str() : "",
			num(recall, "%.4f").c_str(), num(p50, "%.4f").c_str(), num(p99, "%.4f").c_str(),
			num(qps, "%.1f").c_str(), num(value).c_str(), unit, params.c_str(), note.c_str());
	fflush(csv);
}

/* ------------------------------------------------------------------ */
/* .npy reader: little-endian float32 / int32 / int64, C order, 1-2 D  */

struct Npy
{
	std::string descr;
	size_t		rows = 0;
	size_t		cols = 0;
	std::vector<float> f;		/* descr <f4 */
	std::vector<int64_t> i;		/* descr <i4 or <i8, widened */
};

static void
read_npy(const std::string &path, Npy &out)
{
	FILE	   *fp = fopen(path.c_str(), "rb");
	unsigned char pre[10];
	size_t		hlen;
	std::string h;
	size_t		item;

	if (!fp)
		throw std::runtime_error(path + ": " + strerror(errno));
	if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
		throw std::runtime_error(path + ": not a .npy file");
	if (pre[6] == 1)
		hlen = pre[8] | (size_t) pre[9] << 8;
	else
	{
		unsigned char b[2];

		if (fread(b, 1, 2, fp) != 2)
			throw std::runtime_error(path + ": short header");
		hlen = pre[8] | (size_t) pre[9] << 8 | (size_t) b[0] << 16 | (size_t) b[1] << 24;
	}
	h.resize(hlen);
	if (fread(&h[0], 1, hlen, fp) != hlen)
		throw std::runtime_error(path + ": short header");
	auto field = [&](const char *key) -> std::string {
		size_t		p = h.find(key);

		if (p == std::string::npos)
			throw std::runtime_error(path + ": header lacks " + key);
		p = h.find(':', p);
		size_t		e = p + 1;

		while (e < h.size() && h[e] == ' ')
			e++;
		if (h[e] == '(')
			return h.substr(e + 1, h.find(')', e) - e - 1);
		size_t		end = h.find_first_of(",}", e);

		return h.substr(e, end - e);
	};
	out.descr = field("'descr'");
	out.descr.erase(std::remove(out.descr.begin(), out.descr.end(), '\''), out.descr.end());
	if (field("'fortran_order'").find("False") == std::string::npos)
		throw std::runtime_error(path + ": Fortran order not supported");
	std::string shape = field("'shape'");
	std::vector<size_t> dims;

	for (size_t p = 0; p < shape.size();)
	{
		while (p < shape.size() && (shape[p] == ' ' || shape[p] == ','))
			p++;
		if (p >= shape.size())
			break;
		dims.push_back(strtoull(shape.c_str() + p, NULL, 10));
		while (p < shape.size() && shape[p] != ',')
			p++;
	}
	if (dims.empty() || dims.size() > 2)
		throw std::runtime_error(path + ": want a 1-D or 2-D array, shape (" + shape + ")");
	out.rows = dims[0];
	out.cols = dims.size() == 2 ? dims[1] : 1;
	size_t		n = out.rows * out.cols;

	if (out.descr == "<f4")
	{
		out.f.resize(n);
		item = 4;
		if (fread(out.f.data(), 4, n, fp) != n)
			throw std::runtime_error(path + ": short data");
	}
	else if (out.descr == "<i4")
	{
		std::vector<int32_t> t(n);

		item = 4;
		if (fread(t.data(), 4, n, fp) != n)
			throw std::runtime_error(path + ": short data");
		out.i.assign(t.begin(), t.end());
	}
	else if (out.descr == "<i8")
	{
		out.i.resize(n);
		item = 8;
		if (fread(out.i.data(), 8, n, fp) != n)
			throw std::runtime_error(path + ": short data");
	}
	else
		throw std::runtime_error(path + ": dtype " + out.descr + " not supported (want <f4, <i4, <i8)");
	(void) item;
	fclose(fp);
}

/* ------------------------------------------------------------------ */
/* device                                                              */

static int
have_gpu()
{
	int			n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n <= 0)
	{
		fprintf(stderr, "faiss_gpu_bench: no CUDA device present (cudaGetDeviceCount: %s, %d devices)\n",
				e != cudaSuccess ? cudaGetErrorString(e) : "no error", n);
		return 0;
	}
	return 1;
}

static size_t
dev_free()
{
	size_t		fr;
	size_t		tot;

	CK(cudaDeviceSynchronize());
	CK(cudaMemGetInfo(&fr, &tot));
	return fr;
}

/* bytes Faiss's resources hold for indexes (all but the temporary stack) */
static void
faiss_bytes(StandardGpuResources &res, double *lists, double *all)
{
	*lists = *all = 0;
	for (auto &dev : res.getMemoryInfo())
		for (auto &t : dev.second)
		{
			if (t.first.find("Temporary") == 0)
				continue;
			*all += t.second.second;
			if (t.first == "IVFLists")
				*lists += t.second.second;
		}
}

/* device, driver, CUDA runtime and cuBLAS versions */
static std::string
device_desc(StandardGpuResources &res)
{
	cudaDeviceProp p;
	int			rt = 0;
	int			drv = 0;
	int			bl = 0;

	CK(cudaGetDeviceProperties(&p, 0));
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	cublasGetVersion(res.getResources()->getBlasHandle(0), &bl);
	return fmt("%s (sm_%d%d, %.1f GiB), driver API %d, CUDA runtime %d (static), cuBLAS %d",
			   p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0, drv, rt, bl);
}

static std::string
print_setup(StandardGpuResources &res, int interleaved)
{
	std::string dev = device_desc(res);
	std::string fs = fmt("faiss %d.%d.%d (Debian bookworm source faiss_1.7.3-2, built for sm_90), "
						 "GpuIndexIVFFlat, interleavedLayout %d, indicesOptions INDICES_64_BIT, float32 lists, "
						 "StandardGpuResources defaults (temp memory %.0f MiB), k 10",
						 FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR, FAISS_VERSION_PATCH, interleaved,
						 res.getResources()->getTempMemoryAvailable(0) / 1048576.0);

	printf("device: %s\n%s\n", dev.c_str(), fs.c_str());
	return dev + "; " + fs;
}

/* 512 MiB copies, median of 7: device to device (read + write), host to device */
static void
bandwidth(size_t bytes, double *d2d, double *h2d_pg, double *h2d_pin)
{
	void	   *a;
	void	   *b;
	void	   *hp;
	char	   *hg = (char *) malloc(bytes);
	std::vector<double> t[3];

	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	CK(cudaMallocHost(&hp, bytes));
	memset(hg, 1, bytes);
	memset(hp, 1, bytes);
	CK(cudaMemset(a, 0, bytes));
	for (int r = 0; r < 8; r++)
	{
		double		t0 = now_ms();

		CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
		CK(cudaDeviceSynchronize());
		double		t1 = now_ms();

		CK(cudaMemcpy(a, hg, bytes, cudaMemcpyHostToDevice));
		CK(cudaDeviceSynchronize());
		double		t2 = now_ms();

		CK(cudaMemcpy(a, hp, bytes, cudaMemcpyHostToDevice));
		CK(cudaDeviceSynchronize());
		double		t3 = now_ms();

		if (r == 0)
			continue;			/* warm-up */
		t[0].push_back(t1 - t0);
		t[1].push_back(t2 - t1);
		t[2].push_back(t3 - t2);
	}
	*d2d = 2.0 * bytes / (pct(t[0], 0.5) * 1e-3) / 1e9;
	*h2d_pg = bytes / (pct(t[1], 0.5) * 1e-3) / 1e9;
	*h2d_pin = bytes / (pct(t[2], 0.5) * 1e-3) / 1e9;
	cudaFree(a);
	cudaFree(b);
	cudaFreeHost(hp);
	free(hg);
}

/* ------------------------------------------------------------------ */
/* store mode                                                          */

struct StoreData
{
	uint32_t	N, dim, nlists, nclusters = 4096, NQ = 10000, NT = 1000;
	std::vector<float> x, qs, cent, centers;
	std::vector<uint64_t> keys;
};

static void
store_data(StoreData &d)
{
	d.N = getenv("BENCH_N") ? (uint32_t) atol(getenv("BENCH_N")) : 1000000;
	d.dim = getenv("BENCH_DIM") ? (uint32_t) atol(getenv("BENCH_DIM")) : 128;
	d.nlists = getenv("BENCH_LISTS") ? (uint32_t) atol(getenv("BENCH_LISTS")) : 1024;
	d.x.resize((size_t) d.N * d.dim);
	d.qs.resize((size_t) d.NQ * d.dim);
	d.centers.resize((size_t) d.nclusters * d.dim);
	d.cent.resize((size_t) d.nlists * d.dim);
	d.keys.resize(d.N);
	synth_generate(d.N, d.dim, d.nclusters, d.NQ, d.nlists, d.centers.data(), d.x.data(),
				   d.keys.data(), d.qs.data(), d.cent.data());
}

/* one of bench_store's delete sets: N/100 draws j = rnext() % N, key keys[j] */
static void
delete_set(const StoreData &d, std::vector<uint32_t> &rows, std::vector<idx_t> &dk)
{
	uint32_t	nd = d.N / 100;

	rows.resize(nd);
	dk.resize(nd);
	for (uint32_t i = 0; i < nd; i++)
	{
		uint32_t	j = (uint32_t) (rnext() % d.N);

		rows[i] = j;
		dk[i] = (idx_t) d.keys[j];
	}
}

static int
synth_check()
{
	StoreData	d;

	store_data(d);
	printf("synth: centroids %u fnv %016" PRIx64 "\n", d.nlists,
		   fnv(FNV0, d.cent.data(), d.cent.size() * 4));
	printf("synth: vectors %u fnv %016" PRIx64 " keys fnv %016" PRIx64 "\n", d.N,
		   fnv(FNV0, d.x.data(), d.x.size() * 4), fnv(FNV0, d.keys.data(), d.keys.size() * 8));
	printf("synth: queries %u fnv %016" PRIx64 "\n", d.NT,
		   fnv(FNV0, d.qs.data(), (size_t) d.NT * d.dim * 4));
	for (int r = 0; r < 7; r++)
	{
		std::vector<uint32_t> rows;
		std::vector<idx_t> dk;

		delete_set(d, rows, dk);
		printf("synth: delete set %d of %zu fnv %016" PRIx64 "\n", r, dk.size(),
			   fnv(FNV0, dk.data(), dk.size() * 8));
	}
	return 0;
}

static std::unique_ptr<GpuIndexIVFFlat>
new_ivf(StandardGpuResources &res, faiss::Index *quant, const StoreData &d)
{
	GpuIndexIVFFlatConfig cfg;

	cfg.device = 0;
	cfg.indicesOptions = faiss::gpu::INDICES_64_BIT;
	/* cfg.interleavedLayout: 1.7.3's default (true) */
	return std::unique_ptr<GpuIndexIVFFlat>(
		new GpuIndexIVFFlat(&res, quant, (int) d.dim, (int) d.nlists, faiss::METRIC_L2, cfg));
}

/* add rows [from, from + n) with their keys, in batches */
static void
add_rows(GpuIndexIVFFlat &idx, const StoreData &d, const std::vector<idx_t> &ids, size_t from,
		 size_t n, size_t batch = 100000)
{
	for (size_t i = 0; i < n; i += batch)
	{
		size_t		m = std::min(batch, n - i);

		idx.add_with_ids((idx_t) m, d.x.data() + (from + i) * d.dim, ids.data() + from + i);
	}
}

static double
recall_keys(const std::vector<idx_t> &res, const std::vector<idx_t> &truth, size_t nq, int k)
{
	uint64_t	good = 0;

	for (size_t q = 0; q < nq; q++)
		for (int a = 0; a < k; a++)
			for (int b = 0; b < k; b++)
				if (res[q * k + a] == truth[q * k + b])
				{
					good++;
					break;
				}
	return (double) good / ((double) nq * k);
}

/*
 * Faiss 1.7.3's GPU IVF indexes have no remove_ids (faiss::Index's default
 * throws).  Two ways a Faiss GPU user deletes, both measured:
 *	 roundtrip: copyTo a CPU IndexIVFFlat, IndexIVF::remove_ids, copyFrom
 *	 rebuild:   reset() and add the kept vectors again from the host
 */
static size_t
delete_roundtrip(GpuIndexIVFFlat &idx, const std::vector<idx_t> &dk, double part[3])
{
	double		t0 = now_ms();
	faiss::IndexIVFFlat cpu;

	idx.copyTo(&cpu);
	double		t1 = now_ms();
	faiss::IDSelectorBatch sel(dk.size(), dk.data());
	size_t		n = cpu.remove_ids(sel);
	double		t2 = now_ms();

	idx.copyFrom(&cpu);
	CK(cudaDeviceSynchronize());
	double		t3 = now_ms();

	part[0] = t1 - t0;
	part[1] = t2 - t1;
	part[2] = t3 - t2;
	return n;
}

static int
store_mode(const char *outdir)
{
	StoreData	d;
	StandardGpuResources res;
	double		d2d = 0, h2d_pg = 0, h2d_pin = 0;
	size_t		rb;
	std::vector<idx_t> ids;
	std::string params, note;
	double		t0, t1;

	res.getResources()->initializeForDevice(0);
	if (outdir)
	{
		std::string fn = std::string(outdir) + "/faiss_gpu_store.csv";

		csv = fopen(fn.c_str(), "w");
		if (!csv)
			throw std::runtime_error(fn + ": " + strerror(errno));
		fprintf(csv, "system,figure,batch,probes,recall10,p50_ms,p99_ms,qps,value,unit,params,note\n");
	}
	note = print_setup(res, GpuIndexIVFFlatConfig().interleavedLayout);
	csv_row("setup", 0, 0, NAN, NAN, NAN, NAN, NAN, "", "", note);
	t0 = now_ms();
	store_data(d);
	rb = (size_t) d.dim * 4;
	printf("N %u, d %u, lists %u (bench/store/synth.h data, %.1f s to generate)\n", d.N, d.dim,
		   d.nlists, (now_ms() - t0) * 1e-3);
	ids.assign(d.keys.begin(), d.keys.end());
	bandwidth((size_t) 512 << 20, &d2d, &h2d_pg, &h2d_pin);
	printf("| bench            | params                             | metric                 |   value               |      floor | note\n");
	printf("|---|---|---|---|---|---|\n");
	row("bandwidth", "512 MiB copies, median of 7", "device to device", d2d, "GB/s", 0, "read + write");
	row("bandwidth", "512 MiB copies, median of 7", "host to device pageable", h2d_pg, "GB/s", 0, "");
	row("bandwidth", "512 MiB copies, median of 7", "host to device pinned", h2d_pin, "GB/s", 0, "");
	csv_row("bandwidth", 0, 0, NAN, NAN, NAN, NAN, d2d, "GB/s", "device to device", "read + write");
	csv_row("bandwidth", 0, 0, NAN, NAN, NAN, NAN, h2d_pg, "GB/s", "host to device pageable", "");
	csv_row("bandwidth", 0, 0, NAN, NAN, NAN, NAN, h2d_pin, "GB/s", "host to device pinned", "");

	/* coarse quantizer: bench_store's centroids (data points), no training */
	faiss::gpu::GpuIndexFlatConfig fcfg;

	fcfg.device = 0;
	GpuIndexFlatL2 quant(&res, (int) d.dim, fcfg);

	quant.add(d.nlists, d.cent.data());

	/* ---- ingestion: add_with_ids from host memory in batches of 100K, best of 2 ---- */
	std::unique_ptr<GpuIndexIVFFlat> idx;
	size_t		free0 = 0;
	size_t		free1 = 0;
	double		best = 1e30;

	for (int rep = 0; rep < 2; rep++)
	{
		idx.reset();
		free0 = dev_free();
		idx = new_ivf(res, &quant, d);
		t0 = now_ms();
		add_rows(*idx, d, ids, 0, d.N);
		CK(cudaDeviceSynchronize());
		t1 = now_ms();
		best = std::min(best, t1 - t0);
		printf("  ingest run %d: %.1f ms wall\n", rep, t1 - t0);
	}
	free1 = dev_free();
	params = fmt("N %u, d %u, %u lists, batch 100000", d.N, d.dim, d.nlists);
	note = "best of 2; add_with_ids from pageable host memory; floor: pageable H2D of the payload";
	row("ingest", params, "wall vectors/s", d.N / (best * 1e-3), "vec/s", h2d_pg * 1e9 / rb, note);
	csv_row("ingest", 100000, 0, NAN, NAN, NAN, NAN, d.N / (best * 1e-3), "vec/s", params,
			fmt("wall %.2f ms; %s", best, note.c_str()));
	{
		int			mn = 1 << 30, mx = 0;

		for (uint32_t l = 0; l < d.nlists; l++)
		{
			int			n = idx->getListLength((int) l);

			mn = std::min(mn, n);
			mx = std::max(mx, n);
		}
		printf("  list lengths: min %d, mean %.1f, max %d\n", mn, (double) d.N / d.nlists, mx);
	}

	/* ---- memory ---- */
	{
		double		raw = (double) d.N * rb;
		double		lists, all;

		faiss_bytes(res, &lists, &all);
		params = fmt("N %u, d %u, %u lists, after build", d.N, d.dim, d.nlists);
		note = fmt("%.0f bytes in IVF lists (data + 64-bit ids + list arrays) for %.0f payload bytes",
				   lists, raw);
		row("memory", params, "device bytes / raw - 1", lists / raw - 1.0, "ratio", 0, note);
		csv_row("memory", 0, 0, NAN, NAN, NAN, NAN, lists / raw - 1.0, "ratio", params, note);
		note = fmt("cudaMemGetInfo: %.0f bytes for the index (quantizer %.0f bytes not counted)",
				   ((double) free0 - (double) free1), all - lists);
		row("memory", params, "cudaMemGetInfo / raw - 1", ((double) free0 - (double) free1) / raw - 1.0, "ratio", 0, note);
		csv_row("memory", 0, 0, NAN, NAN, NAN, NAN, ((double) free0 - (double) free1) / raw - 1.0, "ratio", params, note);
		t0 = now_ms();
		size_t		rec = idx->reclaimMemory();

		t1 = now_ms();
		size_t		free2 = dev_free();

		faiss_bytes(res, &lists, &all);
		params = fmt("N %u, d %u, %u lists, after reclaimMemory()", d.N, d.dim, d.nlists);
		note = fmt("%.0f bytes in IVF lists; reclaimMemory freed %zu bytes in %.1f ms; cudaMemGetInfo %+.4f",
				   lists, rec, t1 - t0, ((double) free0 - (double) free2) / raw - 1.0);
		row("memory", params, "device bytes / raw - 1", lists / raw - 1.0, "ratio", 0, note);
		csv_row("memory", 0, 0, NAN, NAN, NAN, NAN, lists / raw - 1.0, "ratio", params, note);
	}

	/* ---- search: exact 10-NN by brute force (GpuIndexFlatL2), recall and QPS ---- */
	std::vector<idx_t> labels((size_t) d.NQ * 10);
	std::vector<float> dist((size_t) d.NQ * 10);

	if (getenv("BENCH_SKIP_SEARCH") == NULL)
	{
		std::vector<idx_t> truth((size_t) d.NT * 10);

		{
			GpuIndexFlatL2 flat(&res, (int) d.dim, fcfg);

			t0 = now_ms();
			flat.add(d.N, d.x.data());
			flat.search(d.NT, d.qs.data(), 10, dist.data(), truth.data());
			t1 = now_ms();
			for (auto &t : truth)
				t = t >= 0 ? (idx_t) d.keys[t] : -1;
			printf("  ground truth: GpuIndexFlatL2 over %u vectors, %u queries, %.1f ms\n", d.N,
				   d.NT, t1 - t0);
		}
		uint32_t	probes_set[] = {1, 4, 16, 64};
		uint32_t	batches[] = {1, 32, 1024, 10000};
		double		list_bytes = (double) d.N * rb / d.nlists;

		for (uint32_t P : probes_set)
		{
			idx->setNumProbes((int) P);
			idx->search(d.NT, d.qs.data(), 10, dist.data(), labels.data());
			std::vector<idx_t> got(labels.begin(), labels.begin() + (size_t) d.NT * 10);
			double		rec = recall_keys(got, truth, d.NT, 10);

			for (uint32_t B : batches)
			{
				uint32_t	reps = B == 1 ? 300 : B == 32 ? 40 : B == 1024 ? 4 : 2;
				std::vector<double> times;

				idx->search(B, d.qs.data(), 10, dist.data(), labels.data());	/* warm-up */
				for (uint32_t r = 0; r < reps; r++)
				{
					uint32_t	off = (uint32_t) (((uint64_t) r * B) % (d.NQ - B + 1));

					t0 = now_ms();
					idx->search(B, d.qs.data() + (size_t) off * d.dim, 10, dist.data(), labels.data());
					times.push_back(now_ms() - t0);
				}
				double		med = pct(times, 0.5);
				double		p99 = pct(times, 0.99);
				double		uniq = d.nlists * (1.0 - pow(1.0 - (double) P / d.nlists, B));
				double		floor_ms = uniq * list_bytes / (d2d * 1e9) * 1e3;

				params = fmt("batch %u, probes %u, k 10", B, P);
				note = fmt("recall@10 %.3f, p50 %.3f ms, p99 %.3f ms, floor %.3f ms", rec, med, p99,
						   floor_ms);
				row("search", params, "QPS", B / (med * 1e-3), "q/s", B / (floor_ms * 1e-3), note);
				csv_row("search", (int) B, (int) P, rec, med, p99, B / (med * 1e-3), B / (med * 1e-3),
						"q/s", params, fmt("%u calls, host pointers; floor %.3f ms", reps, floor_ms));
			}
		}
	}

	/* ---- delete 10K of 1M: bench_store's 7 random sets, each put back afterwards ---- */
	{
		std::vector<uint32_t> rows;
		std::vector<idx_t> dk;
		std::vector<double> wrt, wrb, pc, pr, pf;
		std::vector<float> kept_x((size_t) d.N * d.dim);
		std::vector<idx_t> kept_id(d.N);
		std::vector<char> gone(d.N);
		size_t		removed = 0;

		try
		{
			faiss::IDSelectorBatch sel(1, ids.data());

			idx->remove_ids(sel);
			printf("  GpuIndexIVFFlat::remove_ids: supported?!\n");
		}
		catch (const faiss::FaissException &e)
		{
			printf("  GpuIndexIVFFlat::remove_ids: not available in Faiss %d.%d.%d GPU (\"%s\"); "
				   "measuring the two ways around it\n", FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR,
				   FAISS_VERSION_PATCH, e.what());
		}
		for (int rep = 0; rep < 7; rep++)
		{
			double		part[3];
			std::vector<uint32_t> uniq;
			std::vector<float> bx;
			std::vector<idx_t> bid;

			delete_set(d, rows, dk);
			std::fill(gone.begin(), gone.end(), 0);
			for (uint32_t j : rows)
				if (!gone[j])
				{
					gone[j] = 1;
					uniq.push_back(j);
				}
			for (uint32_t j : uniq)
			{
				bx.insert(bx.end(), d.x.begin() + (size_t) j * d.dim, d.x.begin() + (size_t) (j + 1) * d.dim);
				bid.push_back(ids[j]);
			}

			/* roundtrip through a CPU IndexIVFFlat */
			t0 = now_ms();
			removed = delete_roundtrip(*idx, dk, part);
			t1 = now_ms();
			wrt.push_back(t1 - t0);
			pc.push_back(part[0]);
			pr.push_back(part[1]);
			pf.push_back(part[2]);
			if (removed != uniq.size() || idx->ntotal != (idx_t) (d.N - uniq.size()))
				throw std::runtime_error(fmt("delete removed %zu of %zu", removed, uniq.size()));
			idx->add_with_ids((idx_t) uniq.size(), bx.data(), bid.data());

			/* rebuild: kept vectors gathered on the host beforehand (not timed) */
			size_t		nk = 0;

			for (uint32_t i = 0; i < d.N; i++)
				if (!gone[i])
				{
					memcpy(kept_x.data() + nk * d.dim, d.x.data() + (size_t) i * d.dim, rb);
					kept_id[nk++] = ids[i];
				}
			CK(cudaDeviceSynchronize());
			t0 = now_ms();
			idx->reset();
			for (size_t i = 0; i < nk; i += 100000)
			{
				size_t		m = std::min((size_t) 100000, nk - i);

				idx->add_with_ids((idx_t) m, kept_x.data() + i * d.dim, kept_id.data() + i);
			}
			CK(cudaDeviceSynchronize());
			t1 = now_ms();
			wrb.push_back(t1 - t0);
			idx->add_with_ids((idx_t) uniq.size(), bx.data(), bid.data());
			printf("  delete set %d: %zu distinct keys; roundtrip %.1f ms (copyTo %.1f, remove_ids %.1f, copyFrom %.1f), rebuild %.1f ms\n",
				   rep, uniq.size(), wrt.back(), part[0], part[1], part[2], wrb.back());
		}
		params = fmt("%u random keys of %u, 7 sets", d.N / 100, d.N);
		note = fmt("copyTo CPU + IndexIVF::remove_ids + copyFrom; p50 of 7, max %.3f ms; parts p50: copyTo %.1f, remove_ids %.1f, copyFrom %.1f",
				   pct(wrt, 1.0), pct(pc, 0.5), pct(pr, 0.5), pct(pf, 0.5));
		row("delete", params, "roundtrip wall ms", pct(wrt, 0.5), "ms", 0, note);
		csv_row("delete", 0, 0, NAN, pct(wrt, 0.5), pct(wrt, 1.0), NAN, pct(wrt, 0.5), "ms",
				params + ", roundtrip", note);
		note = fmt("reset() + add_with_ids of the %u kept vectors from host memory; p50 of 7, max %.3f ms",
				   d.N - d.N / 100, pct(wrb, 1.0));
		row("delete", params, "rebuild wall ms", pct(wrb, 0.5), "ms", 0, note);
		csv_row("delete", 0, 0, NAN, pct(wrb, 0.5), pct(wrb, 1.0), NAN, pct(wrb, 0.5), "ms",
				params + ", rebuild", note);
	}
	idx.reset();

	/* ---- sliding window W = 200K, B = 10K: insert B, delete oldest B, search 100 q probes 16 ---- */
	for (int v = 0; v < 2; v++)
	{
		const char *how = v == 0 ? "roundtrip" : "rebuild";
		uint32_t	W = d.N < 200000 ? d.N / 2 : 200000;
		uint32_t	B = W / 20;
		int			steps = 50;
		std::vector<double> tot, ins, del, srch;
		std::deque<uint32_t> blocks;	/* starts of the B-blocks in the window, oldest first */
		double		part[3];

		free0 = dev_free();
		idx = new_ivf(res, &quant, d);
		idx->setNumProbes(16);
		add_rows(*idx, d, ids, 0, W);
		for (uint32_t b = 0; b < W; b += B)
			blocks.push_back(b);

		auto	delete_oldest = [&]() {
			uint32_t	h = blocks.front();

			blocks.pop_front();
			if (v == 0)
			{
				std::vector<idx_t> dk(ids.begin() + h, ids.begin() + h + B);

				delete_roundtrip(*idx, dk, part);
			}
			else
			{
				idx->reset();
				for (uint32_t b : blocks)
					idx->add_with_ids(B, d.x.data() + (size_t) b * d.dim, ids.data() + b);
				CK(cudaDeviceSynchronize());
			}
		};

		/* warm-up step, not counted */
		add_rows(*idx, d, ids, W, B);
		blocks.push_back(W);
		delete_oldest();
		idx->search(100, d.qs.data(), 10, dist.data(), labels.data());
		for (int k = 0; k < steps; k++)
		{
			uint32_t	in0 = (W + (uint32_t) (k + 1) * B) % (d.N - B);
			double		a = now_ms();

			idx->add_with_ids(B, d.x.data() + (size_t) in0 * d.dim, ids.data() + in0);
			CK(cudaDeviceSynchronize());
			blocks.push_back(in0);
			double		b = now_ms();

			delete_oldest();
			double		c = now_ms();

			idx->search(100, d.qs.data(), 10, dist.data(), labels.data());
			double		e = now_ms();

			ins.push_back(b - a);
			del.push_back(c - b);
			srch.push_back(e - c);
			tot.push_back(e - a);
		}
		if (idx->ntotal != (idx_t) W)
			throw std::runtime_error(fmt("window holds %" PRId64 " vectors, not %u", (int64_t) idx->ntotal, W));
		params = fmt("W %u, B %u, %d steps, %s", W, B, steps, how);
		note = fmt("p99 %.3f ms; insert p50 %.3f, delete p50 %.3f (p99 %.3f), search(100 q, probes 16) p50 %.3f",
				   pct(tot, 0.99), pct(ins, 0.5), pct(del, 0.5), pct(del, 0.99), pct(srch, 0.5));
		row("window", params, "step p50 wall ms", pct(tot, 0.5), "ms", 0, note);
		csv_row("window", 100, 16, NAN, pct(tot, 0.5), pct(tot, 0.99), NAN, pct(tot, 0.5), "ms", params, note);
		{
			double		raw = (double) W * rb;
			double		lists, all;
			size_t		free1w = dev_free();

			faiss_bytes(res, &lists, &all);
			params = fmt("W %u, d %u, %u lists, after %d window steps, %s", W, d.dim, d.nlists,
						 steps + 1, how);
			note = fmt("%.0f bytes in IVF lists for %.0f payload bytes; cudaMemGetInfo %+.4f",
					   lists, raw, ((double) free0 - (double) free1w) / raw - 1.0);
			row("memory", params, "device bytes / raw - 1", lists / raw - 1.0, "ratio", 0, note);
			csv_row("memory", 0, 0, NAN, NAN, NAN, NAN, lists / raw - 1.0, "ratio", params, note);
		}
		idx.reset();
	}
	if (csv)
		fclose(csv);
	printf("done\n");
	return 0;
}

/* ------------------------------------------------------------------ */
/* sweep and pqsweep modes: the SQL benchmark's datasets               */

static std::vector<int>
int_list(const char *s)
{
	std::vector<int> v;

	for (const char *p = s; *p;)
	{
		v.push_back(atoi(p));
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	return v;
}

static void
normalize(std::vector<float> &x, size_t d)
{
	for (size_t i = 0; i < x.size() / d; i++)
	{
		double		s = 0;

		for (size_t j = 0; j < d; j++)
			s += (double) x[i * d + j] * x[i * d + j];
		float		n = s > 0 ? (float) sqrt(s) : 1.0f;

		for (size_t j = 0; j < d; j++)
			x[i * d + j] /= n;
	}
}

/* one cached dataset: base, queries, ground truth (row numbers of base) */
struct SweepData
{
	Npy			xb, xq, g;
	size_t		n = 0, d = 0, nq = 0;
	std::string metric;
	faiss::MetricType mt = faiss::METRIC_L2;
};

/* reads the three files; metric from the ground truth's name unless given; returns seconds */
static double
sweep_data(const char *mode, const std::string &base, const std::string &queries,
		   const std::string &gt, const std::string &metric, SweepData &s)
{
	double		t0 = now_ms();

	s.metric = metric;
	if (s.metric.empty())
		s.metric = gt.find("cosine") != std::string::npos ? "cosine" :
			gt.find("-ip") != std::string::npos ? "ip" : "l2";
	read_npy(base, s.xb);
	read_npy(queries, s.xq);
	read_npy(gt, s.g);
	if (s.xb.descr != "<f4" || s.xq.descr != "<f4" || s.g.i.empty() || s.xb.cols != s.xq.cols ||
		s.g.rows != s.xq.rows || s.g.cols < 10)
		throw std::runtime_error(std::string(mode) +
								 ": want float32 base/queries of one dimension and int ground truth (>= 10 per query)");
	s.n = s.xb.rows;
	s.d = s.xb.cols;
	s.nq = s.xq.rows;
	s.mt = s.metric == "l2" ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
	if (s.metric == "cosine")
	{
		normalize(s.xb.f, s.d);
		normalize(s.xq.f, s.d);
	}
	return (now_ms() - t0) * 1e-3;
}

/* m rows of the base drawn without replacement (seeded), in base order */
static void
draw_sample(const SweepData &s, size_t m, int seed, std::vector<float> &sample)
{
	std::vector<uint32_t> perm(s.n);
	std::mt19937_64 rng(seed);

	for (size_t i = 0; i < s.n; i++)
		perm[i] = (uint32_t) i;
	for (size_t i = 0; i < m; i++)
		std::swap(perm[i], perm[i + rng() % (s.n - i)]);
	std::sort(perm.begin(), perm.begin() + m);
	sample.resize(m * s.d);
	for (size_t i = 0; i < m; i++)
		memcpy(&sample[i * s.d], &s.xb.f[(size_t) perm[i] * s.d], s.d * 4);
}

/* recall@10 of the first nq answers against the first 10 columns of the ground truth */
static double
recall10(const std::vector<idx_t> &lab, const SweepData &s)
{
	uint64_t	good = 0;

	for (size_t q = 0; q < s.nq; q++)
		for (int a = 0; a < 10; a++)
			for (int b = 0; b < 10; b++)
				if (lab[q * 10 + a] == s.g.i[q * s.g.cols + b])
				{
					good++;
					break;
				}
	return (double) good / (s.nq * 10.0);
}

struct SweepPoint
{
	size_t		batch;			/* queries a call */
	double		recall, qps, p50;
};

/*
 * One (probes, batch) point, the probes already set: a warm-up call, then
 * `repeats` passes over the queries in calls of `batch`; QPS = queries a pass
 * / p50 of the pass times, p50 = p50 of the calls, recall@10 from the first
 * pass.  A batch larger than the query set is clamped to it (tile false, the
 * sweep mode) or made of the queries repeated in order until it is full, one
 * call a pass (tile true, pqsweep); recall then counts the first copy.
 */
static SweepPoint
sweep_point(faiss::Index &idx, const SweepData &s, int B0, int repeats, bool tile)
{
	size_t		d = s.d;
	size_t		B = std::max(B0, 1);
	size_t		rows = s.nq;
	const float *xq = s.xq.f.data();
	std::vector<float> tiled;

	if (B > s.nq && !tile)
		B = s.nq;
	if (B > s.nq)
	{
		rows = B;
		tiled.resize(rows * d);
		for (size_t r = 0; r < rows; r++)
			memcpy(&tiled[r * d], &s.xq.f[(r % s.nq) * d], d * 4);
		xq = tiled.data();
	}

	std::vector<idx_t> lab(rows * 10);
	std::vector<float> dist(rows * 10);
	std::vector<double> calls, passes;
	double		rec = 0;

	idx.search((idx_t) B, xq, 10, dist.data(), lab.data());	/* warm-up */
	for (int r = 0; r < repeats; r++)
	{
		double		p0 = now_ms();

		for (size_t q = 0; q < rows; q += B)
		{
			size_t		b = std::min(B, rows - q);
			double		c0 = now_ms();

			idx.search((idx_t) b, xq + q * d, 10, dist.data() + q * 10, lab.data() + q * 10);
			calls.push_back(now_ms() - c0);
		}
		passes.push_back(now_ms() - p0);
		if (r == 0)
			rec = recall10(lab, s);
	}

	SweepPoint	pt;

	pt.batch = B;
	pt.recall = rec;
	pt.qps = rows / (pct(passes, 0.5) * 1e-3);
	pt.p50 = pct(calls, 0.5);
	return pt;
}

/* the options sweep and pqsweep share */
struct SweepOpts
{
	std::string base, queries, gt, csvpath, metric;
	int			lists = 0, per_list = 50, repeats = 5, seed = 1;
	std::vector<int> probes = int_list("1,2,4,8,16,32,64");
	std::vector<int> batches;
};

/*
 * Parse argv: the shared options into o, the mode's own through own(a, v)
 * (false: unknown); then check the required ones.
 */
template <typename Own>
static void
sweep_options(const char *mode, int argc, char **argv, SweepOpts &o, Own own)
{
	for (int i = 0; i < argc; i++)
	{
		std::string a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			throw std::runtime_error(std::string(mode) + ": " + a + " needs a value");
		i++;
		if (a == "--base") o.base = v;
		else if (a == "--queries") o.queries = v;
		else if (a == "--gt") o.gt = v;
		else if (a == "--lists") o.lists = atoi(v);
		else if (a == "--probes") o.probes = int_list(v);
		else if (a == "--batch") o.batches = int_list(v);
		else if (a == "--csv") o.csvpath = v;
		else if (a == "--metric") o.metric = v;
		else if (a == "--train-per-list") o.per_list = atoi(v);
		else if (a == "--repeats") o.repeats = atoi(v);
		else if (a == "--seed") o.seed = atoi(v);
		else if (!own(a, v))
			throw std::runtime_error(std::string(mode) + ": unknown option " + a);
	}
	if (o.base.empty() || o.queries.empty() || o.gt.empty() || o.lists <= 0)
		throw std::runtime_error(std::string(mode) +
								 ": --base, --queries, --gt and --lists are required");
}

/* a build's times and the device's free memory around it */
struct Built
{
	double		train_s;
	double		add_s;
	double		build_s;
	size_t		free0;
	size_t		free1;
};

/* train on m rows (the drawn sample when m < n), add every row, timed */
static Built
train_add(faiss::Index &idx, const SweepData &s, size_t m, const std::vector<float> &sample)
{
	Built		b;

	b.free0 = dev_free();
	double		t0 = now_ms();

	idx.train((idx_t) m, m < s.n ? sample.data() : s.xb.f.data());
	CK(cudaDeviceSynchronize());
	double		t1 = now_ms();

	idx.add((idx_t) s.n, s.xb.f.data());
	CK(cudaDeviceSynchronize());
	double		t2 = now_ms();

	b.train_s = (t1 - t0) * 1e-3;
	b.add_s = (t2 - t1) * 1e-3;
	b.build_s = (t2 - t0) * 1e-3;
	b.free1 = dev_free();
	return b;
}

/* the CSV file with its header line, or NULL when no path was given */
static FILE *
open_csv(const std::string &path, const char *header)
{
	if (path.empty())
		return NULL;

	FILE	   *out = fopen(path.c_str(), "w");

	if (!out)
		throw std::runtime_error(path + ": " + strerror(errno));
	fprintf(out, "%s\n", header);
	return out;
}

static int
sweep_mode(int argc, char **argv)
{
	SweepOpts	o;

	o.batches = int_list("1,1000");
	sweep_options("sweep", argc, argv, o, [](const std::string &, const char *) { return false; });

	const int	lists = o.lists;
	SweepData	s;
	double		read_s = sweep_data("sweep", o.base, o.queries, o.gt, o.metric, s);
	size_t		n = s.n, d = s.d;

	printf("sweep: %s (%zu x %zu), %zu queries, metric %s, %d lists; read in %.1f s\n",
		   o.base.c_str(), n, d, s.nq, s.metric.c_str(), lists, read_s);

	StandardGpuResources res;

	res.getResources()->initializeForDevice(0);
	print_setup(res, GpuIndexIVFFlatConfig().interleavedLayout);

	GpuIndexIVFFlatConfig cfg;

	cfg.device = 0;
	cfg.indicesOptions = faiss::gpu::INDICES_64_BIT;
	GpuIndexIVFFlat idx(&res, (int) d, lists, s.mt, cfg);

	idx.cp.seed = o.seed;

	/* training sample as the Faiss CPU reference (bench/gibench/faissref.py): per_list rows a list */
	size_t		m = o.per_list > 0 ? std::min(n, (size_t) o.per_list * lists) : n;
	std::vector<float> sample;

	if (m < n)
		draw_sample(s, m, o.seed, sample);
	Built		b = train_add(idx, s, m, sample);
	double		lb, all;

	faiss_bytes(res, &lb, &all);
	printf("build: %.3f s (train %.3f s on %zu rows, %d iterations; add %.3f s); IVF lists %.0f bytes (%.4f over raw), cudaMemGetInfo %+.4f\n",
		   b.build_s, b.train_s, m, idx.cp.niter, b.add_s, lb,
		   lb / ((double) n * d * 4) - 1.0, ((double) b.free0 - (double) b.free1) / ((double) n * d * 4) - 1.0);

	FILE	   *out = open_csv(o.csvpath, "system,dataset_n,dim,lists,probes,batch,recall10,qps,p50_ms,build_s");

	for (int P : o.probes)
	{
		if (P > lists)
			continue;
		idx.setNumProbes(P);
		for (int B0 : o.batches)
		{
			SweepPoint	pt = sweep_point(idx, s, B0, o.repeats, false);

			printf("| sweep | n %zu, d %zu, lists %d | probes %3d, batch %5zu | recall@10 %.4f | %10.1f q/s | p50 %.3f ms |\n",
				   n, d, lists, P, pt.batch, pt.recall, pt.qps, pt.p50);
			fflush(stdout);
			if (out)
			{
				fprintf(out, "%s,%zu,%zu,%d,%d,%zu,%.4f,%.1f,%.4f,%.3f\n", SYSTEM, n, d, lists, P, pt.batch,
						pt.recall, pt.qps, pt.p50, b.build_s);
				fflush(out);
			}
		}
	}
	if (out)
		fclose(out);
	printf("done\n");
	return 0;
}

/*
 * pqsweep: as sweep, with GpuIndexIVFPQ (M sub-quantizers of nbits bits,
 * residuals of the coarse centroids, 64-bit ids).  Faiss trains both parts
 * itself (GpuIndexIVFPQ::train): the coarse k-means, then the PQ codebooks on
 * the residuals; the sample below.
 */
static int
pqsweep_mode(int argc, char **argv)
{
	SweepOpts	o;
	std::string lut = "auto";
	int			M = 64, nbits = 8;
	int			interleaved = 0, pq_per_entry = 0, pq_niter = 0;
	std::vector<int> precomp;	/* empty: GpuIndexIVFPQConfig's default */

	o.batches = int_list("1,1000,10000");
	sweep_options("pqsweep", argc, argv, o, [&](const std::string &a, const char *v) {
		if (a == "--m") M = atoi(v);
		else if (a == "--nbits") nbits = atoi(v);
		else if (a == "--pq-per-entry") pq_per_entry = atoi(v);
		else if (a == "--pq-niter") pq_niter = atoi(v);
		else if (a == "--precomputed") precomp = int_list(v);
		else if (a == "--float16-lut") lut = v;
		else if (a == "--interleaved") interleaved = atoi(v);
		else
			return false;
		return true;
	});
	if (M <= 0 || nbits <= 0 || nbits > 8)
		throw std::runtime_error("pqsweep: --m must be > 0 and --nbits 1..8");
	if (lut != "auto" && lut != "0" && lut != "1")
		throw std::runtime_error("pqsweep: --float16-lut auto, 0 or 1");

	const int	lists = o.lists, per_list = o.per_list, seed = o.seed;
	SweepData	s;
	double		read_s = sweep_data("pqsweep", o.base, o.queries, o.gt, o.metric, s);
	size_t		n = s.n, d = s.d;

	printf("pqsweep: %s (%zu x %zu), %zu queries, metric %s, %d lists, M %d, nbits %d; read in %.1f s\n",
		   o.base.c_str(), n, d, s.nq, s.metric.c_str(), lists, M, nbits, read_s);

	StandardGpuResources res;
	cudaDeviceProp prop;

	res.getResources()->initializeForDevice(0);
	CK(cudaGetDeviceProperties(&prop, 0));

	/*
	 * The scan kernels keep one query's residual distance table, M x 2^nbits
	 * entries, in shared memory; Faiss 1.7.3 checks it against
	 * sharedMemPerBlock (48 KiB, not the opt-in maximum) and refuses float32
	 * tables that do not fit.  auto: float16 exactly when float32 would not fit.
	 */
	size_t		ksub = (size_t) 1 << nbits;
	size_t		lut32 = 4 * (size_t) M * ksub;
	bool		f16 = lut == "1" || (lut == "auto" && lut32 > prop.sharedMemPerBlock);
	faiss::gpu::GpuIndexIVFPQConfig cfg;
	bool		pc_default = cfg.usePrecomputedTables;

	if (precomp.empty())
		precomp.push_back(pc_default ? 1 : 0);
	cfg.device = 0;
	cfg.indicesOptions = faiss::gpu::INDICES_64_BIT;
	cfg.useFloat16LookupTables = f16;
	cfg.interleavedLayout = interleaved != 0;
	/* cfg.usePrecomputedTables: the default; the sweep sets it (setPrecomputedCodes) after the build */

	faiss::gpu::GpuIndexIVFPQ idx(&res, (int) d, lists, M, nbits, s.mt, cfg);

	idx.cp.seed = seed;

	/*
	 * One sample for both parts: per_list rows a list for the coarse k-means
	 * (Faiss subsamples to cp.max_points_per_centroid a list), and up to
	 * pq.cp.max_points_per_centroid rows a codebook entry for the PQ (Faiss's
	 * fvecs_maybe_subsample cap); the sample is the larger of the two.
	 */
	if (per_list > 0)
		idx.cp.max_points_per_centroid = per_list;
	if (pq_per_entry > 0)
		idx.pq.cp.max_points_per_centroid = pq_per_entry;
	if (pq_niter > 0)
		idx.pq.cp.niter = pq_niter;

	size_t		pq_cap = (size_t) idx.pq.cp.max_points_per_centroid * ksub;
	size_t		coarse_n = per_list > 0 ? std::min(n, (size_t) per_list * lists) : n;
	size_t		m = std::max(coarse_n, std::min(n, pq_cap));
	std::vector<float> sample;

	if (m < n)
		draw_sample(s, m, seed, sample);
	size_t		coarse_used = std::min(m, (size_t) lists * idx.cp.max_points_per_centroid);
	size_t		pq_used = std::min(m, pq_cap);

	std::string dev = device_desc(res);
	std::string setup = fmt(
		"faiss %d.%d.%d (Debian bookworm source faiss_1.7.3-2, built for sm_90), GpuIndexIVFPQ, "
		"M %d, nbits %d, %zu code bytes a vector, indicesOptions INDICES_64_BIT, interleavedLayout %d, metric %s; "
		"useFloat16LookupTables %d (--float16-lut %s: float32 table M x 2^nbits x 4 = %zu B against "
		"sharedMemPerBlock %zu B); usePrecomputedTables %s (GpuIndexIVFPQConfig default %d%s); "
		"training by GpuIndexIVFPQ::train on %zu sampled rows (seed %d): coarse k-means on %zu of them "
		"(%d iterations, seed %d, cp.max_points_per_centroid %d), PQ k-means on the residuals of %zu "
		"(%d iterations, seed %d, pq.cp.max_points_per_centroid %d); StandardGpuResources defaults (temp memory %.0f MiB), k 10",
		FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR, FAISS_VERSION_PATCH, M, nbits,
		((size_t) M * nbits + 7) / 8, interleaved, s.metric.c_str(), f16 ? 1 : 0, lut.c_str(), lut32,
		(size_t) prop.sharedMemPerBlock,
		s.mt == faiss::METRIC_L2 ? (precomp.size() == 1 ? (precomp[0] ? "1" : "0") : "per row: system ...-precomputed is 1") : "0",
		pc_default ? 1 : 0, s.mt == faiss::METRIC_L2 ? "" : "; not used for inner product",
		m, seed, coarse_used, idx.cp.niter, idx.cp.seed, idx.cp.max_points_per_centroid,
		pq_used, idx.pq.cp.niter, idx.pq.cp.seed, idx.pq.cp.max_points_per_centroid,
		res.getResources()->getTempMemoryAvailable(0) / 1048576.0);

	printf("device: %s\nsetup: %s\n", dev.c_str(), setup.c_str());
	fflush(stdout);

	Built		b = train_add(idx, s, m, sample);
	double		lb0, all0, lb, all;

	faiss_bytes(res, &lb0, &all0);	/* the lists before reclaimMemory() */
	size_t		reclaimed = idx.reclaimMemory();

	faiss_bytes(res, &lb, &all);

	/* bytes_per_vector: Faiss's IVFLists allocations after reclaimMemory() (exact sizes), a row */
	double		bpv = lb / n;
	size_t		listed = 0;
	int			mn = 1 << 30, mx = 0;

	for (int l = 0; l < lists; l++)
	{
		int			len = idx.getListLength(l);

		listed += len;
		mn = std::min(mn, len);
		mx = std::max(mx, len);
	}
	printf("build: %.3f s (train %.3f s, add %.3f s); list lengths min %d, mean %.1f, max %d (%zu rows listed)\n",
		   b.build_s, b.train_s, b.add_s, mn, (double) n / lists, mx, listed);
	printf("memory: IVF lists %.0f bytes after build (%.2f B a row, power-of-two growth), %.0f after reclaimMemory() "
		   "(%.2f B a row; codes + 64-bit ids alone: %zu B a row; %zu bytes reclaimed); other Faiss allocations "
		   "(coarse centroids, PQ centroids, precomputed tables) %.0f bytes; cudaMemGetInfo drop at build %.0f bytes\n",
		   lb0, lb0 / n, lb, bpv, ((size_t) M * nbits + 7) / 8 + 8, reclaimed, all - lb,
		   (double) b.free0 - (double) b.free1);
	fflush(stdout);

	FILE	   *out = open_csv(o.csvpath,
								   "system,dataset_n,dim,lists,m,nbits,probes,batch,recall10,qps,p50_ms,build_s,bytes_per_vector");

	if (out)
	{
		std::string sp = o.csvpath + ".setup.txt";
		FILE	   *f = fopen(sp.c_str(), "w");

		if (!f)
			throw std::runtime_error(sp + ": " + strerror(errno));
		fprintf(f, "dataset: %s (%zu x %zu), %zu queries, %d lists\ndevice: %s\nsetup: %s\n"
				"build: %.3f s (train %.3f s, add %.3f s)\n"
				"bytes_per_vector: IVFLists allocations after reclaimMemory() %.0f B / %zu rows = %.4f "
				"(after build, before reclaimMemory(): %.4f)\n",
				o.base.c_str(), n, d, s.nq, lists, dev.c_str(), setup.c_str(), b.build_s, b.train_s,
				b.add_s, lb, n, bpv, lb0 / n);
		fclose(f);
	}
	for (int pc : precomp)
	{
		if (pc && s.mt != faiss::METRIC_L2)
		{
			printf("pqsweep: precomputed tables are for L2 only; skipped for %s\n", s.metric.c_str());
			continue;
		}
		if (idx.getPrecomputedCodes() != (pc != 0))
			idx.setPrecomputedCodes(pc != 0);
		CK(cudaDeviceSynchronize());

		double		lp, ap;

		faiss_bytes(res, &lp, &ap);
		std::string system = std::string(SYSTEM) + "-ivfpq" + (pc ? "-precomputed" : "");

		printf("%s: usePrecomputedTables %d, useFloat16LookupTables %d; Faiss allocations besides the lists %.0f bytes\n",
			   system.c_str(), pc ? 1 : 0, f16 ? 1 : 0, ap - lp);
		for (int P : o.probes)
		{
			if (P > lists)
				continue;
			idx.setNumProbes(P);
			for (int B0 : o.batches)
			{
				SweepPoint	pt = sweep_point(idx, s, B0, o.repeats, true);

				printf("| pqsweep | n %zu, d %zu, lists %d, M %d, nbits %d, precomputed %d | probes %3d, batch %5zu | recall@10 %.4f | %10.1f q/s | p50 %.3f ms |\n",
					   n, d, lists, M, nbits, pc ? 1 : 0, P, pt.batch, pt.recall, pt.qps, pt.p50);
				fflush(stdout);
				if (out)
				{
					fprintf(out, "%s,%zu,%zu,%d,%d,%d,%d,%zu,%.4f,%.1f,%.4f,%.3f,%.4f\n", system.c_str(), n, d,
							lists, M, nbits, P, pt.batch, pt.recall, pt.qps, pt.p50, b.build_s, bpv);
					fflush(out);
				}
			}
		}
	}
	if (out)
		fclose(out);
	printf("done\n");
	return 0;
}

/* ------------------------------------------------------------------ */

static int
npy_check(int argc, char **argv)
{
	for (int a = 0; a < argc; a++)
	{
		Npy			v;
		double		s = 0;

		read_npy(argv[a], v);
		if (!v.f.empty())
			for (float f : v.f)
				s += f;
		else
			for (int64_t i : v.i)
				s += (double) i;
		auto at = [&](size_t k) { return v.f.empty() ? (double) v.i[k] : (double) v.f[k]; };
		size_t		n = v.rows * v.cols;

		printf("%s: %s %zu x %zu sum %.10e first %.9g mid %.9g last %.9g\n", argv[a], v.descr.c_str(),
			   v.rows, v.cols, s, at(0), at(n / 2), at(n - 1));
	}
	return 0;
}

static void
usage(const char *p)
{
	fprintf(stderr,
			"usage: %s store [OUTDIR]            (env BENCH_N, BENCH_DIM, BENCH_LISTS, BENCH_SKIP_SEARCH)\n"
			"       %s sweep --base B.npy --queries Q.npy --gt GT.npy --lists L [--probes 1,2,4,8,16,32,64]\n"
			"             [--batch 1,1000] [--metric l2|cosine|ip] [--train-per-list 50] [--repeats 5] [--csv OUT.csv]\n"
			"       %s pqsweep --base B.npy --queries Q.npy --gt GT.npy --lists L [--m 64] [--nbits 8]\n"
			"             [--probes 1,2,4,8,16,32,64] [--batch 1,1000,10000] [--metric l2|cosine|ip] [--train-per-list 50]\n"
			"             [--pq-per-entry 256] [--pq-niter 25] [--precomputed 0|1|0,1] [--float16-lut auto|0|1] [--interleaved 0|1]\n"
			"             [--repeats 5] [--csv OUT.csv]\n"
			"       %s synth-check | npy-check FILE...   (no GPU needed)\n", p, p, p, p);
}

int
main(int argc, char **argv)
{
	if (argc < 2)
	{
		usage(argv[0]);
		return 2;
	}
	std::string mode = argv[1];

	try
	{
		if (mode == "synth-check")
			return synth_check();
		if (mode == "npy-check")
			return npy_check(argc - 2, argv + 2);
		if (mode != "store" && mode != "sweep" && mode != "pqsweep")
		{
			usage(argv[0]);
			return 2;
		}
		if (!have_gpu())
			return 77;
		if (mode == "store")
			return store_mode(argc > 2 ? argv[2] : NULL);
		if (mode == "pqsweep")
			return pqsweep_mode(argc - 2, argv + 2);
		return sweep_mode(argc - 2, argv + 2);
	}
	catch (const std::exception &e)
	{
		fprintf(stderr, "faiss_gpu_bench: %s\n", e.what());
		return 1;
	}
}
