/* stats_json.c - write cdc_stats_t and the workers' profiles as JSON for CDCGEMM_STATS. */
#include "stats_json.h"

#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void cdc__profile_write_json(FILE *out, const cdc_profile_report_t *profile)
{
    fputs("\"profile\": [", out);
    for (int w = 0; w < profile->count; w++) {
        const cdc_worker_profile_t *p = &profile->workers[w];
        fprintf(out,
                "%s{\"worker\": %d, \"live\": %s, \"gflops\": %.6g, \"gbps\": %.6g, "
                "\"mbit\": %.6g, \"rtt_ms\": %.3f, \"max_memory\": %llu, "
                "\"cache_bytes\": %llu, \"rate_samples\": %llu, \"stream_samples\": %llu, "
                "\"gbps_floor\": %s, \"link_samples\": %llu, \"generation\": %llu}",
                w ? ", " : "", w, p->live ? "true" : "false", p->gflops, p->gbps, p->mbit,
                p->rtt_ms, (unsigned long long) p->max_memory,
                (unsigned long long) p->cache_bytes, (unsigned long long) p->rate_samples,
                (unsigned long long) p->stream_samples, p->gbps_floor ? "true" : "false",
                (unsigned long long) p->link_samples,
                (unsigned long long) p->generation);
    }
    fputs("]", out);
    if (profile->has_coordinator)
        fprintf(out, ", \"coordinator_profile\": {\"gflops\": %.6g, \"rate_samples\": %llu}",
                profile->coordinator.gflops,
                (unsigned long long) profile->coordinator.rate_samples);
}

void cdc__stats_write_members(FILE *out, const cdc_stats_t *stats)
{
    const struct {
        const char *name;
        uint64_t value;
    } fields[] = {
        {"calls", stats->calls},
        {"coded_calls", stats->coded_calls},
        {"shards_sent", stats->shards_sent},
        {"shards_erased", stats->shards_erased},
        {"results_decoded", stats->results_decoded},
        {"corrupt_detected", stats->corrupt_detected},
        {"fallbacks", stats->fallbacks},
        {"weight_encodes", stats->weight_encodes},
        {"weight_hits", stats->weight_hits},
        {"bytes_out", stats->bytes_out},
        {"bytes_in", stats->bytes_in},
        {"late_replies", stats->late_replies},
        {"heartbeats_missed", stats->heartbeats_missed},
        {"worker_deaths", stats->worker_deaths},
        {"worker_rejoins", stats->worker_rejoins},
        {"worker_goodbyes", stats->worker_goodbyes},
        {"worker_respawns", stats->worker_respawns},
        {"respawns_given_up", stats->respawns_given_up},
        {"degraded_calls", stats->degraded_calls},
        {"background_weight_bytes", stats->background_weight_bytes},
        {"redundancy_repairs", stats->redundancy_repairs},
        {"repair_us_sum", stats->repair_us_sum},
        {"repair_us_max", stats->repair_us_max},
        {"cancels_sent", stats->cancels_sent},
        {"budget_fallbacks", stats->budget_fallbacks},
        {"budget_erasures", stats->budget_erasures},
        {"oversized_skipped", stats->oversized_skipped},
        {"parity_on_demand", stats->parity_on_demand},
        {"planned_local", stats->planned_local},
        {"late_blocks", stats->late_blocks},
        {"rotated_calls", stats->rotated_calls},
        {"decodes_refused", stats->decodes_refused},
        {"verified_calls", stats->verified_calls},
        {"first_corrupt_call", stats->first_corrupt_call},
        {"invalid_messages", stats->invalid_messages},
        {"weights_sent", stats->weights_sent},
        {"weights_stored_asked", stats->weights_stored_asked},
        {"weights_stored_missing", stats->weights_stored_missing},
        {"weight_bytes", stats->weight_bytes},
    };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        fprintf(out, "%s\"%s\": %llu", i ? ", " : "", fields[i].name,
                (unsigned long long) fields[i].value);
}

int cdc__stats_write_json(const cdc_stats_t *stats, const cdc_profile_report_t *profile,
                          const char *path)
{
    if (!stats || !path || !*path)
        return cdc__fail(CDC_EINVAL, "stats: NULL stats or empty path");
    char tmp[CDC_CONFIG_STR + 32];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long) getpid());
    if (len < 0 || (size_t) len >= sizeof tmp)
        return cdc__fail(CDC_EINVAL, "stats: path '%s' too long", path);
    FILE *out = fopen(tmp, "w");
    if (!out)
        return cdc__fail(CDC_EINVAL, "stats: cannot write %s: %s", tmp, strerror(errno));
    fputs("{", out);
    cdc__stats_write_members(out, stats);
    if (profile) {
        fputs(", ", out);
        cdc__profile_write_json(out, profile);
    }
    fputs("}\n", out);
    int failed = ferror(out);
    if (fclose(out) != 0 || failed) {
        remove(tmp);
        return cdc__fail(CDC_EINVAL, "stats: write error on %s", tmp);
    }
    if (rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return cdc__fail(CDC_EINVAL, "stats: rename to %s: %s", path, strerror(err));
    }
    return CDC_OK;
}
