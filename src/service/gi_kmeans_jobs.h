/*
 * gi_kmeans_jobs.h
 *		k-means jobs of CREATE INDEX inside the device service.
 */
#ifndef GI_KMEANS_JOBS_H
#define GI_KMEANS_JOBS_H

#include "gi_reply.h"

/* answer a KMEANS_* or ASSIGN request */
extern void gi_kmeans_handle(GiWork *w);

/* drop jobs of backends that died or fell silent (once a second at most) */
extern void gi_kmeans_maintain(void);

#endif							/* GI_KMEANS_JOBS_H */
