/*
 * gi_reply.c
 *		Answering a request inside the device service: reply codes, error
 *		messages and the SQLSTATE of a compute backend failure.
 */
#include "postgres.h"

#include "gi_device.h"
#include "gi_reply.h"
#include "gi_service.h"
#include "gi_stores.h"

void
gi_reply(GiWork *w, GiReply reply)
{
	w->slot->reply = reply;
	w->answered = true;
}

void
gi_reply_error(GiWork *w, int sqlstate, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(w->slot->rargs.errmsg, GI_ERRMSG_LEN, fmt, ap);
	va_end(ap);
	w->slot->rargs.sqlstate = sqlstate;
	w->slot->reply = GI_REPLY_ERROR;
	w->answered = true;
}

void
gi_reply_status(GiWork *w, gi_status st)
{
	int			sqlstate;

	switch (st)
	{
		case GI_ERR_LIMIT:
			sqlstate = ERRCODE_CONFIGURATION_LIMIT_EXCEEDED;
			break;
		case GI_ERR_NOMEM:
			sqlstate = ERRCODE_OUT_OF_MEMORY;
			break;
		case GI_ERR_INVALID:
			sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
		case GI_ERR_UNSUPPORTED:
			sqlstate = ERRCODE_FEATURE_NOT_SUPPORTED;
			break;
		case GI_ERR_CANCELLED:
			sqlstate = ERRCODE_QUERY_CANCELED;
			break;
		case GI_ERR_DEVICE:
			sqlstate = ERRCODE_SYSTEM_ERROR;
			gi_service_restart_pending = true;
			break;
		default:
			sqlstate = ERRCODE_SYSTEM_ERROR;
			break;
	}
	if (st == GI_ERR_LIMIT && gi_budget_by_role)
		gi_reply_error(w, sqlstate,
					   "gpuindex stores of the index's owner would pass gpuindex.role_memory_limit (%d MB)",
					   gi_role_memory_limit_mb);
	else
		gi_reply_error(w, sqlstate, "gpuindex %s backend: %s",
					   gi_ops->name, gi_ops->last_error());
}

bool
gi_reply_over_budget(GiWork *w, gi_status st)
{
	if (st != GI_ERR_LIMIT && st != GI_ERR_NOMEM)
		return false;
	gi_reply_status(w, st);
	w->slot->reply = GI_REPLY_OVER_BUDGET;
	return true;
}

bool
gi_reply_check_backend(GiWork *w)
{
	if (gi_ops)
		return true;
	gi_reply_error(w, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
				   "gpuindex has no usable compute backend: %s", gi_ops_unavailable);
	return false;
}
