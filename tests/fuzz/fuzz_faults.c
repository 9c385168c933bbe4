/* fuzz_faults.c - libFuzzer target: the CDCGEMM_FAULTS grammar (docs/faults.md).
 *
 * The input, up to its first NUL, is the variable's value. A plan that
 * parses is held to what faults.h promises (at most CDC_FAULT_MAX_RULES
 * rules, targets in range, numbers in their documented ranges) and then
 * drawn from, as a worker does, for a few calls of three workers: the
 * decisions must be finite and the draws free of undefined behaviour. */
#include "cdcgemm.h"
#include "faults.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz_faults: parsed plan violates: %s\n", #cond);            \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static void check_rule(const cdc_fault_rule_t *r)
{
    EXPECT(r->kind >= CDC_FAULT_CRASH && r->kind <= CDC_FAULT_DISK);
    EXPECT((r->target >= -1 && r->target < CDC_MAX_WORKERS) ||
           (r->target == CDC_FAULT_COORDINATOR && r->kind == CDC_FAULT_SLOW && r->x == 0 &&
            (r->gflops > 0 || r->gbps > 0) && r->after == 0));
    EXPECT(r->after >= 0);
    EXPECT(isfinite(r->for_ms) && r->for_ms >= 0);
    EXPECT(isfinite(r->ms) && r->ms >= 0);
    EXPECT(r->p >= 0 && r->p <= 1);
    EXPECT(r->x == 0 || (r->x >= 1 && r->x <= 1e6));
    EXPECT(r->gflops == 0 || (r->gflops > 0 && r->gflops <= 1e6));
    EXPECT(r->gbps == 0 || (r->gbps > 0 && r->gbps <= 1e4));
    EXPECT(r->mbit == 0 || (r->mbit > 0 && r->mbit <= 1e6));
    EXPECT(isfinite(r->lat_ms) && r->lat_ms >= 0);
    EXPECT(r->kind == CDC_FAULT_DISK ? r->mbyte >= 1e-3 && r->mbyte <= 1e6 : r->mbyte == 0);
}

static void draw(const cdc_fault_plan_t *plan)
{
    cdc_emulated_device_t coordinator = cdc__fault_coordinator(plan);
    EXPECT(coordinator.gflops == 0 || (coordinator.gflops > 0 && coordinator.gflops <= 1e6));
    EXPECT(coordinator.gbps == 0 || (coordinator.gbps > 0 && coordinator.gbps <= 1e4));
    for (int worker = 0; worker < 3; worker++) {
        cdc_fault_state_t state;
        cdc__fault_state_init(&state, plan, worker);
        for (int i = 0; i < state.plan.count; i++) /* the coordinator's rule is no worker's */
            EXPECT(state.plan.rules[i].target != CDC_FAULT_COORDINATOR);
        for (int call = 0; call < 4; call++) {
            cdc_fault_decision_t d;
            cdc__fault_next(&state, 1.5 * call, 1e9 * call, 4e6 * call, (size_t) 1 << 20,
                            (size_t) 1 << 16, &d);
            EXPECT(isfinite(d.delay_ms) && d.delay_ms >= 0);
            EXPECT(d.latency_ms >= 0 && d.latency_ms <= d.delay_ms);
            EXPECT(d.hang_ms >= -1.0 && isfinite(d.hang_ms));
        }
        double disk_ms = cdc__fault_disk_ms(&state, (size_t) 1 << 20);
        EXPECT(isfinite(disk_ms) && disk_ms >= 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    cdc_fault_plan_t plan;
    if (cdc__fault_plan_parse(text, &plan) == CDC_OK) {
        EXPECT(plan.count >= 0 && plan.count <= CDC_FAULT_MAX_RULES);
        for (int i = 0; i < plan.count; i++)
            check_rule(&plan.rules[i]);
        draw(&plan);
    }
    free(text);
    return 0;
}
