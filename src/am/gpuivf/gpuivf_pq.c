/*
 * gpuivf_pq.c
 *		The product quantizer of gpuivf indexes with quantizer = 'pq':
 *		training the codebooks at build time, encoding a row, and the exact
 *		distance the scan re-ranks with.
 *
 * Each sub-space's codebook is trained with the same host k-means as the
 * lists (gpuivf_kmeans: L2, seeded, deterministic) on the residuals of
 * the build's sample: the vector (scaled to unit length for cosine) minus
 * the centroid of its list.  Layouts and distances: gi_kind_ivfpq.h.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/float.h"

#include "gpuivf.h"
#include "gi_kmeans.h"
#include "host_pool.h"
#include "host_store.h"

/* what the sub-spaces' trainings share (tasks of the host backend's pool) */
typedef struct PqTrainJob
{
	const float4 *res;			/* n residuals of dim */
	uint32		n;
	uint32		dim;
	uint32		dsub;
	uint32		ksub;
	float4	  **sub;			/* per worker: n * dsub */
	void	  **ws;				/* per worker: k-means workspace */
	float4	   *codebooks;
	bool	   *stopped;		/* per sub-space: the training was interrupted */
} PqTrainJob;

/* the residual of vec in list: vec (unit length for cosine) minus the centroid */
static void
residual(uint32 metric, const float4 *centroid, uint32 dim, const float4 *vec,
		 float4 *out)
{
	memcpy(out, vec, dim * sizeof(float4));
	if (metric == GI_METRIC_COSINE)
		(void) gi_kmeans_normalize(out, dim);
	for (uint32 j = 0; j < dim; j++)
		out[j] -= centroid[(Size) j];
}

/* a cancel or a terminate is pending: the trainings on the threads stop early */
static bool
pq_keep_going(void *arg)
{
	(void) arg;
	return !QueryCancelPending && !ProcDiePending;
}

/*
 * Sub-space s's codebook: k-means over the residuals' s-th sub-vectors
 * (plain C on a pool thread: no PostgreSQL call, only the worker's
 * buffers); entries past the centroids produced repeat the first one.
 */
static gi_status
pq_train_task(void *arg, uint32_t s, uint32_t worker)
{
	PqTrainJob *j = arg;
	float4	   *sub = j->sub[worker];
	float4	   *book = j->codebooks + (Size) s * j->ksub * j->dsub;
	gi_kmeans_params p;
	uint32		k;

	for (uint32 i = 0; i < j->n; i++)
		memcpy(sub + (Size) i * j->dsub, j->res + (Size) i * j->dim + (Size) s * j->dsub,
			   j->dsub * sizeof(float4));
	gpuivf_kmeans_params(&p, j->dsub, j->ksub, GI_METRIC_L2);
	p.keep_going = pq_keep_going;
	k = gi_host_kmeans_train(&p, j->n, sub, book, j->ws[worker], NULL, NULL);
	if (k == 0)
	{
		j->stopped[s] = true;
		return GI_OK;
	}
	for (uint32 e = k; e < j->ksub; e++)
		memcpy(book + (Size) e * j->dsub, book, j->dsub * sizeof(float4));
	return GI_OK;
}

/*
 * The codebooks on the device service's backend, one k-means job a
 * sub-space (each with the settings the threads below use), kept beside the
 * build's lists' job: false, with a WARNING when it is not the usual
 * answer, when the build must train them itself.
 */
static bool
pq_train_service(Relation index, const float4 *res, uint32 n, uint32 dim, uint32 m,
				 uint32 ksub, float4 *codebooks)
{
	uint32		dsub = dim / m;
	float4	   *sub = palloc_extended((Size) n * dsub * sizeof(float4), MCXT_ALLOC_HUGE);
	bool		ok = true;

	for (uint32 s = 0; s < m && ok; s++)
	{
		float4	   *book = codebooks + (Size) s * ksub * dsub;
		uint64		job = 0;
		uint32		k = 0;

		for (uint32 i = 0; i < n; i++)
			memcpy(sub + (Size) i * dsub, res + (Size) i * dim + (Size) s * dsub,
				   dsub * sizeof(float4));
		ok = gpuivf_service_kmeans(index, "PQ codebook training", sub, n, dsub, ksub,
								   GI_METRIC_L2, true, book, &k, &job);
		gpuivf_service_kmeans_end(&job);
		if (ok && k == 0)
			elog(ERROR, "gpuindex k-means answered no entry for sub-space %u", s);
		for (uint32 e = k; ok && e < ksub; e++)
			memcpy(book + (Size) e * dsub, book, dsub * sizeof(float4));
		CHECK_FOR_INTERRUPTS();
	}
	pfree(sub);
	return ok;
}

/*
 * Train the codebooks (qz->pq_ksub * dim floats, gi_kind_ivfpq.h order)
 * on up to GPUIVF_PQ_SAMPLES_PER_ENTRY * pq_ksub of the samples (not
 * modified).  A sub-space with fewer distinct residuals than entries
 * repeats its first entry, which the encoder never picks over it.  With
 * service (the build's lists trained there) the device service trains them
 * one sub-space after another; otherwise, or when it cannot, the
 * sub-spaces train at the same time on the host backend's threads, each
 * exactly as alone; one a pending interrupt stopped trains again here
 * once the interrupt, if harmless, was served.
 */
void
gpuivf_pq_train(Relation index, bool service, const float4 *samples, uint32 nsamples,
				uint32 dim, uint32 metric, const float4 *centroids, const float4 *cnorms,
				uint32 lists, const GpuivfQuantizer *qz, float4 *codebooks)
{
	uint32		m = qz->pq_m;
	uint32		ksub = qz->pq_ksub;
	uint32		dsub = dim / m;
	uint32		n = Min(nsamples, GPUIVF_PQ_SAMPLES_PER_ENTRY * ksub);
	uint32		workers = Min(gi_host_pool_threads(), m);
	float4	   *res;
	PqTrainJob	job;

	memset(codebooks, 0, sizeof(float4) * ksub * dim);
	if (n == 0)
		return;
	res = palloc_extended((Size) n * dim * sizeof(float4), MCXT_ALLOC_HUGE);
	for (uint32 i = 0; i < n; i++)
	{
		const float4 *x = samples + (Size) i * dim;
		uint32		list = gpuivf_nearest_list(centroids, cnorms, lists, dim, metric, x);

		residual(metric, centroids + (Size) list * dim, dim, x, res + (Size) i * dim);
		if ((i & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}

	if (service && pq_train_service(index, res, n, dim, m, ksub, codebooks))
	{
		ereport(DEBUG1,
				(errmsg("gpuivf build of \"%s\": codebooks of %u sub-spaces (device service)",
						RelationGetRelationName(index), m)));
		pfree(res);
		return;
	}
	ereport(DEBUG1,
			(errmsg("gpuivf build of \"%s\": codebooks of %u sub-spaces (this backend)",
					RelationGetRelationName(index), m)));

	job.res = res;
	job.n = n;
	job.dim = dim;
	job.dsub = dsub;
	job.ksub = ksub;
	job.codebooks = codebooks;
	job.stopped = palloc0(sizeof(bool) * m);
	job.sub = palloc(sizeof(float4 *) * workers);
	job.ws = palloc(sizeof(void *) * workers);
	for (uint32 w = 0; w < workers; w++)
	{
		job.sub[w] = palloc_extended((Size) n * dsub * sizeof(float4), MCXT_ALLOC_HUGE);
		job.ws[w] = palloc_extended(gi_host_kmeans_workspace(n, dsub, ksub), MCXT_ALLOC_HUGE);
	}
	(void) gi_host_pool_run(m, workers, pq_train_task, &job);
	CHECK_FOR_INTERRUPTS();
	for (uint32 s = 0; s < m; s++)
		if (job.stopped[s])
		{
			job.stopped[s] = false;
			(void) pq_train_task(&job, s, 0);
			if (job.stopped[s])
				elog(ERROR, "gpuivf: the codebook of sub-space %u could not be trained", s);
		}
	for (uint32 w = 0; w < workers; w++)
	{
		pfree(job.sub[w]);
		pfree(job.ws[w]);
	}
	pfree(job.sub);
	pfree(job.ws);
	pfree(job.stopped);
	pfree(res);
}

/* the code of vec in list into record (rbytes, zero-padded); r: dim floats of scratch */
static void
encode_one(const GpuivfMeta *meta, uint32 list, const float4 *vec, float4 *r,
		   uint8 *record, uint32 rbytes)
{
	Assert(rbytes == gi_ivfpq_record_bytes(meta->pq_m, meta->pq_code_bits));
	residual(meta->metric, meta->centroids + (Size) list * meta->dim, meta->dim, vec, r);
	gi_pq_encode(meta->codebooks, meta->pq_m, meta->pq_ksub, meta->dim / meta->pq_m,
				 meta->pq_code_bits, r, record);
}

/* the record of vec in list: its code, zero-padded to gpuivf_record_bytes */
void
gpuivf_pq_encode(const GpuivfMeta *meta, uint32 list, const float4 *vec, uint8 *record)
{
	float4	   *r = palloc(sizeof(float4) * meta->dim);

	Assert(meta->quantizer == GPUIVF_QUANTIZER_PQ && list < meta->lists);
	encode_one(meta, list, vec, r, record, gpuivf_record_bytes(meta));
	pfree(r);
}

/* rows a task of the batch encoder takes */
#define GPUIVF_PQ_ENCODE_TASK	256

typedef struct PqEncodeJob
{
	const GpuivfMeta *meta;
	uint32		n;
	const uint32 *lists;
	const float4 *vecs;
	uint8	   *records;
	uint32		rbytes;
	float4	   *scratch;		/* per worker: dim floats */
} PqEncodeJob;

static gi_status
pq_encode_task(void *arg, uint32_t task, uint32_t worker)
{
	PqEncodeJob *j = arg;
	uint32		dim = j->meta->dim;
	uint32		end = Min(j->n, (task + 1) * GPUIVF_PQ_ENCODE_TASK);

	for (uint32 i = task * GPUIVF_PQ_ENCODE_TASK; i < end; i++)
		encode_one(j->meta, j->lists[i], j->vecs + (Size) i * dim,
				   j->scratch + (Size) worker * dim, j->records + (Size) i * j->rbytes,
				   j->rbytes);
	return GI_OK;
}

/*
 * The records of n rows (vecs, their lists) into records, gpuivf_record_bytes
 * each, on the host backend's threads: each row's code is the one
 * gpuivf_pq_encode gives.
 */
void
gpuivf_pq_encode_batch(const GpuivfMeta *meta, uint32 n, const uint32 *lists,
					   const float4 *vecs, uint8 *records)
{
	uint32		ntasks = (n + GPUIVF_PQ_ENCODE_TASK - 1) / GPUIVF_PQ_ENCODE_TASK;
	uint32		workers = Max(1, Min(gi_host_pool_threads(), ntasks));
	PqEncodeJob job;

	Assert(meta->quantizer == GPUIVF_QUANTIZER_PQ);
#ifdef USE_ASSERT_CHECKING
	for (uint32 i = 0; i < n; i++)
		Assert(lists[i] < meta->lists);
#endif
	job.meta = meta;
	job.n = n;
	job.lists = lists;
	job.vecs = vecs;
	job.records = records;
	job.rbytes = gpuivf_record_bytes(meta);
	job.scratch = palloc(sizeof(float4) * meta->dim * workers);
	(void) gi_host_pool_run(ntasks, workers, pq_encode_task, &job);
	pfree(job.scratch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * The distance the service ranks flat records by (host_ivf.c: sums in
 * double, dimension order): squared L2, negative inner product, or 1 -
 * cosine (+Inf for a zero vector).
 */
double
gpuivf_exact_distance(uint32 metric, const float4 *a, const float4 *b, uint32 dim)
{
	double		acc = 0.0;
	double		na = 0.0;
	double		nb = 0.0;

	for (uint32 j = 0; j < dim; j++)
	{
		if (metric == GI_METRIC_L2)
		{
			double		d = (double) a[j] - b[j];

			acc += d * d;
		}
		else
		{
			acc += (double) a[j] * b[j];
			na += (double) a[j] * a[j];
			nb += (double) b[j] * b[j];
		}
	}
	switch (metric)
	{
		case GI_METRIC_L2:
			return acc;
		case GI_METRIC_IP:
			return -acc;
		default:
			if (na == 0.0 || nb == 0.0)
				return get_float8_infinity();
			return 1.0 - acc / (sqrt(na) * sqrt(nb));
	}
}
