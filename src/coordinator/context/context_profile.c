/* context_profile.c - a context's live profiles (profile.h), from its executor. */
#include "context.h"
#include "profile.h"

#include "error.h"

#include <string.h>

int cdc__context_profile(cdc_context_t *context, cdc_worker_profile_t *out, int max)
{
    int count = cdc__executor_profile(context->executor, out, max, NULL);
    return count > 0 ? count : 0;
}

int cdc__context_profile_self(cdc_context_t *context, cdc_worker_profile_t *out)
{
    if (cdc__executor_profile(context->executor, NULL, 0, out) < 0)
        return cdc__fail(CDC_EINVAL, "no profile: the context has no remote workers");
    return CDC_OK;
}

void cdc__context_profile_report(cdc_context_t *context, cdc_profile_report_t *report)
{
    memset(report, 0, sizeof *report);
    int count = cdc__executor_profile(context->executor, report->workers, CDC_MAX_WORKERS,
                                      &report->coordinator);
    report->count = count > 0 ? count : 0;
    report->has_coordinator = count >= 0;
}
