/*
 * gi_dispatch.h
 *		Answering one round of requests inside the device service.
 */
#ifndef GI_DISPATCH_H
#define GI_DISPATCH_H

#include "gi_reply.h"

/* answer every request of work[0..nwork) not answered yet */
extern void gi_dispatch_round(GiWork *work, int nwork);

#endif							/* GI_DISPATCH_H */
