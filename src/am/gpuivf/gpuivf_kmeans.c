/*
 * gpuivf_kmeans.c
 *		Training the centroids at build time, and choosing a row's list.
 *
 * The training itself is the host k-means of src/backend/host/host_kmeans.c
 * (plain C, shared with the GPU tests as their reference): L2 k-means,
 * spherical k-means for inner product and cosine, k-means++ seeding with
 * GPUIVF_SEED, GPUIVF_KMEANS_ITERATIONS Lloyd iterations, an empty
 * cluster keeps its centre.  This file runs it in the building backend
 * with a palloc'd workspace and CHECK_FOR_INTERRUPTS as its check, so a
 * cancelled build leaks nothing.  When the device service's backend trains
 * (CUDA), gpuivf_build.c asks it instead (device_kmeans, device_assign).
 *
 * Unit centroids make "nearest list" agree for every metric with what the
 * device service computes when it picks the lists to probe (for a unit
 * centroid, -<q,c> and 1 - cos(q,c) rank the same).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpuivf.h"
#include "gi_kmeans.h"
#include "host_store.h"

static void
gpuivf_kmeans_check(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

/* the build's k-means settings: seeded, GPUIVF_KMEANS_ITERATIONS Lloyd iterations */
void
gpuivf_kmeans_params(gi_kmeans_params *p, uint32 dim, uint32 lists, uint32 metric)
{
	memset(p, 0, sizeof(*p));
	p->dim = dim;
	p->nlists = lists;
	p->iterations = GPUIVF_KMEANS_ITERATIONS;
	p->metric = metric;
	p->seed = GPUIVF_SEED;
}

/*
 * Train up to `lists` centroids on the samples (which may be modified:
 * the spherical metrics normalise them in place).  Returns the number of
 * centroids produced: min(lists, usable samples), at least 1 when there is
 * any usable sample, 0 otherwise.
 */
uint32
gpuivf_kmeans(float4 *samples, int nsamples, int dim, int lists,
			  uint32 metric, float4 *centroids)
{
	gi_kmeans_params p;
	void	   *ws;
	uint32		k;

	if (nsamples <= 0)
		return 0;
	gpuivf_kmeans_params(&p, (uint32) dim, (uint32) lists, metric);
	ws = palloc_extended(gi_host_kmeans_workspace((uint32) nsamples, (uint32) dim,
												  (uint32) lists),
						 MCXT_ALLOC_HUGE);
	k = gi_host_kmeans_train(&p, (uint32) nsamples, samples, centroids, ws,
							 gpuivf_kmeans_check, NULL);
	pfree(ws);
	return k;
}

void
gpuivf_centroid_norms(const float4 *centroids, uint32 lists, uint32 dim,
					  float4 *norms)
{
	for (uint32 c = 0; c < lists; c++)
	{
		double		n = 0.0;
		const float4 *cv = centroids + (Size) c * dim;

		for (uint32 j = 0; j < dim; j++)
			n += (double) cv[j] * cv[j];
		norms[c] = (float4) sqrt(n);
	}
}

/* the list a row belongs to (host_kmeans.c: the rule shared with the build) */
uint32
gpuivf_nearest_list(const float4 *centroids, const float4 *cnorms, uint32 lists,
					uint32 dim, uint32 metric, const float4 *vec)
{
	return gi_host_nearest_list(centroids, cnorms, lists, dim, (gi_metric) metric, vec);
}
