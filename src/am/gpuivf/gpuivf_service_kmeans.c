/*
 * gpuivf_service_kmeans.c
 *		k-means of a build on the device service's backend: the client side
 *		of GI_REQ_KMEANS_* (gi_kmeans_jobs.c), for the lists and for the PQ
 *		codebooks.
 *
 * A job is opened with the sample (BEGIN, DATA), trained (TRAIN) and its
 * centroids read back (RESULT); it stays open until the caller ends it, so
 * that the build can assign its rows with the lists' job (ASSIGN).  Any
 * answer but OK makes the caller do the work itself: the reason goes to a
 * WARNING (none for the host backend's usual UNSUPPORTED) and the job is
 * ended.
 */
#include "postgres.h"

#include "gpuivf.h"
#include "gi_client.h"
#include "gi_protocol.h"

/* vectors of dim floats per request: about GI_CHUNK_BYTES */
uint32
gpuivf_vectors_per_request(uint32 dim)
{
	return (uint32) Max(GI_CHUNK_BYTES / ((Size) dim * sizeof(float4)), 1);
}

void
gpuivf_service_kmeans_end(uint64 *job)
{
	GiReqArgs	args;

	if (*job == 0)
		return;
	memset(&args, 0, sizeof(args));
	GI_KARGS(&args, GiKmeansArgs)->job = *job;
	*job = 0;
	(void) gi_call_simple(GI_REQ_KMEANS_END, NULL, &args, NULL);
}

void
gpuivf_service_kmeans_failed(Relation index, uint64 *job, const GiCall *call,
							 const char *what)
{
	if (call->reply == GI_REPLY_UNSUPPORTED && call->rargs.errmsg[0] != '\0')
		ereport(WARNING,
				(errmsg("gpuivf index \"%s\": %s continues in this backend",
						RelationGetRelationName(index), what),
				 errdetail("%s", call->rargs.errmsg)));
	else if (call->reply == GI_REPLY_NO_JOB)
		ereport(WARNING,
				(errmsg("gpuivf index \"%s\": %s continues in this backend",
						RelationGetRelationName(index), what),
				 errdetail("The device service lost the build's k-means job (it was restarted).")));
	else if (call->reply != GI_REPLY_UNSUPPORTED)
		elog(ERROR, "unexpected gpuindex reply %d to a k-means request", (int) call->reply);
	gpuivf_service_kmeans_end(job);
}

/*
 * Train up to lists centroids of n samples (metric, the build's seed and
 * iterations) on the service's backend: true with *k centroids written and
 * the job open in *job; false when the caller must train itself.  keep:
 * the backend's other open jobs stay (a BEGIN otherwise replaces them).
 */
bool
gpuivf_service_kmeans(Relation index, const char *what, const float4 *samples,
					  uint32 n, uint32 dim, uint32 lists, uint32 metric, bool keep,
					  float4 *centroids, uint32 *k, uint64 *job)
{
	GiCall		call;
	GiKmeansArgs *ka;
	uint32		per = gpuivf_vectors_per_request(dim);

	*job = 0;
	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_KMEANS_BEGIN;
	call.args.n = n;
	call.args.flags = keep ? GI_REQ_KMEANS_KEEP : 0;
	ka = GI_KARGS(&call.args, GiKmeansArgs);
	ka->dim = dim;
	ka->nlists = lists;
	ka->metric = metric;
	ka->iterations = GPUIVF_KMEANS_ITERATIONS;
	ka->seed = GPUIVF_SEED;
	gi_call(&call);
	if (call.reply != GI_REPLY_OK)
	{
		/* the usual answer of the host backend: quietly train here */
		gpuivf_service_kmeans_failed(index, job, &call, what);
		return false;
	}
	*job = call.rargs.token;

	for (uint32 off = 0; off < n; off += per)
	{
		uint32		c = Min(per, n - off);

		memset(&call, 0, sizeof(call));
		call.type = GI_REQ_KMEANS_DATA;
		GI_KARGS(&call.args, GiKmeansArgs)->job = *job;
		GI_KARGS(&call.args, GiKmeansArgs)->offset = off;
		call.args.n = c;
		call.in = samples + (Size) off * dim;
		call.in_size = (Size) c * dim * sizeof(float4);
		gi_call(&call);
		if (call.reply != GI_REPLY_OK)
		{
			gpuivf_service_kmeans_failed(index, job, &call, what);
			return false;
		}
	}

	memset(&call, 0, sizeof(call));
	call.type = GI_REQ_KMEANS_TRAIN;
	GI_KARGS(&call.args, GiKmeansArgs)->job = *job;
	gi_call(&call);
	if (call.reply != GI_REPLY_OK)
	{
		gpuivf_service_kmeans_failed(index, job, &call, what);
		return false;
	}
	*k = (uint32) call.rargs.count;
	if (*k > lists)
		elog(ERROR, "gpuindex k-means answered %u centroids for %u lists", *k, lists);

	for (uint32 off = 0; off < *k; off += per)
	{
		uint32		c = Min(per, *k - off);
		Size		bytes = (Size) c * dim * sizeof(float4);

		memset(&call, 0, sizeof(call));
		call.type = GI_REQ_KMEANS_RESULT;
		GI_KARGS(&call.args, GiKmeansArgs)->job = *job;
		GI_KARGS(&call.args, GiKmeansArgs)->offset = off;
		call.args.n = c;
		call.out_capacity = bytes;
		gi_call(&call);
		if (call.reply != GI_REPLY_OK)
		{
			gpuivf_service_kmeans_failed(index, job, &call, what);
			return false;
		}
		if (call.rargs.out_size != bytes || call.out == NULL)
			elog(ERROR, "gpuindex k-means result: %llu bytes, expected %zu",
				 (unsigned long long) call.rargs.out_size, bytes);
		memcpy(centroids + (Size) off * dim, call.out, bytes);
		pfree(call.out);
	}
	return true;
}
