/*
 * gi_kmeans_jobs.h
 *		k-means jobs of CREATE INDEX inside the device service.
 */
#ifndef GI_KMEANS_JOBS_H
#define GI_KMEANS_JOBS_H

#include "gi_reply.h"

/* answer a KMEANS_* or ASSIGN request */
extern void gi_kmeans_handle(GiWork *w);

/*
 * Reap a finished training thread; drop jobs of backends that died or
 * fell silent (once a second at most).
 */
extern void gi_kmeans_maintain(void);

/* a k-means training runs on its thread (the service polls for its end) */
extern bool gi_kmeans_training(void);

#endif							/* GI_KMEANS_JOBS_H */
