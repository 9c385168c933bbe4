/* cdcgemm.h - public API: coded distributed GEMM, FC and conv2d layers. */
#ifndef CDCGEMM_H_INCLUDED
#define CDCGEMM_H_INCLUDED

#include "cdcgemm_version.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CDC_EXPORT __attribute__((visibility("default")))
#else
#define CDC_EXPORT
#endif

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH" (static
   storage, never NULL); compare with CDC_VERSION_STRING, the version of the
   headers compiled against. Thread-safe. */
CDC_EXPORT const char *cdc_version(void);

/* ---------------------------------------------------------------------------
 * Status codes. Every fallible call returns CDC_OK (0) or one of these negative
 * values; cdc_last_error() gives the detail (which argument, which variable).
 * ------------------------------------------------------------------------- */
#define CDC_STATUS_MAP(X)                                                      \
    X(OK, 0, "success")                                                        \
    X(EINVAL, -1, "invalid argument")                                          \
    X(EDIM, -2, "invalid or overflowing dimension")                            \
    X(ELD, -3, "leading dimension too small")                                  \
    X(ENOMEM, -4, "out of memory")                                             \
    X(ECONFIG, -5, "invalid configuration value")                              \
    X(EDECODE, -6, "not enough shards to decode")                              \
    X(ECORRUPT, -7, "shard failed the parity consistency check")               \
    X(ETIMEDOUT, -8, "worker timed out")                                       \
    X(ETRANSPORT, -9, "transport failure")                                     \
    X(EPROTO, -10, "malformed or unexpected message")                          \
    X(EBLAS, -11, "BLAS backend unavailable")                                  \
    X(ESTATE, -12, "object used in a wrong state")

typedef enum {
#define CDC_STATUS_ENUM_(name, value, text) CDC_##name = (value),
    CDC_STATUS_MAP(CDC_STATUS_ENUM_)
#undef CDC_STATUS_ENUM_
} cdc_status_t;

/* Static text for a status ("leading dimension too small"); never NULL. */
CDC_EXPORT const char *cdc_strerror(int status);
/* Static name of a status ("CDC_ELD"); never NULL. */
CDC_EXPORT const char *cdc_err_name(int status);
/* Detail of the last failure in the calling thread ("lda = 3 < max(1, K = 8)").
   Points to thread-local storage valid until the thread's next failing call. */
CDC_EXPORT const char *cdc_last_error(void);

/* ---------------------------------------------------------------------------
 * Configuration. Caller allocates; cdc_config_init fills the defaults and
 * cdc_config_from_env overlays the CDCGEMM_* environment variables.
 * ------------------------------------------------------------------------- */
typedef enum {
    CDC_SPLIT_AUTO = 0,
    CDC_SPLIT_ROWS = 1,    /* "output" (FC) / "channel" (conv): rows of A   */
    CDC_SPLIT_COLUMNS = 2  /* "spatial" (conv): columns of B (im2col)       */
} cdc_split_t;

typedef enum {
    CDC_LOG_ERROR = 0,
    CDC_LOG_WARN = 1,
    CDC_LOG_INFO = 2,
    CDC_LOG_DEBUG = 3
} cdc_log_level_t;

/* How a call's blocks are sized (config.plan; docs/heterogeneous.md). */
typedef enum {
    CDC_PLAN_EQUAL = 0,    /* equal blocks, slot s on worker s                  */
    CDC_PLAN_PROFILED = 1, /* blocks and homes from the measured devices        */
    CDC_PLAN_AUTO = 2      /* the adaptive plan (the default, issue 26):
                              the devices measured first, blocks sized to them */
} cdc_plan_mode_t;

/* What a re-plan gives up when workers die (config.replan). */
typedef enum {
    CDC_REPLAN_KEEP_SHARDS = 0, /* n stays, r drops: latency first (default)     */
    CDC_REPLAN_KEEP_PARITY = 1  /* r stays, n drops: fault tolerance first      */
} cdc_replan_t;

/* Where a coded call's parity lives (config.parity_layout; docs/codes.md). */
typedef enum {
    CDC_LAYOUT_DEDICATED = 0, /* n data shards and r parity shards, each on a
                                 worker of its own                          */
    CDC_LAYOUT_ROTATED = 1    /* W stripes, parity blocks rotated over every
                                 worker; data computed first, parity only
                                 when a stripe needs it (default)           */
} cdc_parity_layout_t;

#define CDC_MAX_WORKERS 64
#define CDC_MAX_PARITY 3
#define CDC_CONFIG_STR 1024

typedef struct {
    char workers[CDC_CONFIG_STR]; /* comma-separated endpoints, or discover[:PORT]
                                     (docs/deploy.md); "" = local            */
    int local_workers;            /* workers to spawn/run locally (default 5)   */
    int parity;                   /* r, 0..CDC_MAX_PARITY (default 1)           */
    cdc_split_t split;            /* default split for layers (default auto)   */
    int wait_ms;                  /* extra wait for data shards (default 0)     */
    int timeout_ms;               /* bound on a remote call (default 2000)      */
    double min_flops;             /* BLAS calls below run locally; <0 = measure;
                                     set (>= 0), calls above go to the workers
                                     whatever the plan predicts here         */
    char faults[CDC_CONFIG_STR];  /* fault-injection schedule; "" = none        */
    char stats_path[CDC_CONFIG_STR]; /* JSON counters at exit; "" = none       */
    cdc_log_level_t log_level;    /* default warn                               */
    char code[32];                /* code scheme for r >= 2; "" = default      */
    int in_process;               /* 1: run the shards in this process on
                                     local_workers virtual workers (no worker
                                     processes); 0: workers (default)          */
    cdc_replan_t replan;          /* when workers die (default keep shards)     */
    int replicate;                /* 1: 2-modular redundancy instead of a code
                                     (needs parity 0): each of W/2 data shards
                                     runs on two workers, first copy wins     */
    int verify;                   /* check shard results against the parity
                                     equations and never return a corrupted
                                     one: 0 off; 1 (default) calls wait for a
                                     parity to check with on a sample (the
                                     first 4, then 1 in 16; every call once a
                                     check failed, and then what a call could
                                     not check is computed here) and check
                                     whatever else arrived; 2 every call
                                     waits for one                           */
    /* Since 0.1.0 (took 256 reserved words; docs/security.md). */
    char curve_secret[CDC_CONFIG_STR]; /* this coordinator's secret CURVE
                                     certificate file; "" = plaintext         */
    char curve_server[CDC_CONFIG_STR]; /* a worker public certificate (every
                                     endpoint) or a directory of them, each
                                     naming its endpoint; "" = plaintext      */
    int insecure;                 /* 1: allow plaintext tcp workers that are
                                     not loopback (refused otherwise)         */
    /* Since 0.1.0 (took 9 reserved words; docs/deploy.md): discovery. */
    char discover_interface[64];  /* workers=discover: the interface beacons
                                     are heard on; "" = CZMQ's choice        */
    int32_t discover_wait_ms;     /* workers=discover: how long to listen for
                                     the first set (default 3000)            */
    /* Since 0.1.0 (took the pad half-word beside discover_wait_ms). */
    int32_t respawn;              /* 1: a local worker that dies or hangs is
                                     respawned (default 1; docs/workers.md);
                                     0: it stays dead                         */
    /* Since 0.1.0 (took 1 reserved word): hot spares (docs/workers.md). */
    int32_t data_shards;          /* n, data shards per coded call; 0 = the
                                     workers minus r. Fewer leaves the rest
                                     as hot spares that stand in for a slot
                                     whose worker fails (default 0)          */
    /* Since 0.1.0 (took the pad beside data_shards): heterogeneous devices. */
    int32_t plan;                 /* cdc_plan_mode_t (default auto)            */
    /* Since 0.1.0 (took 1 reserved word): rotated parity (issue 13). */
    int32_t parity_layout;        /* cdc_parity_layout_t (default rotated)     */
    int32_t reserved_pad;         /* 0                                         */
    /* Room for new settings without an ABI break (docs/abi.md): zeroed by
       cdc_config_init, never read by this version. A new field takes the
       first slots and the count shrinks so the size stays the same. */
    uint64_t reserved[245];
} cdc_config_t;

/* Fill *config with the documented defaults. Never fails. */
CDC_EXPORT void cdc_config_init(cdc_config_t *config);
/* Overlay the CDCGEMM_* variables on *config. Returns CDC_ECONFIG on a bad value
   (cdc_last_error names the variable and the value) and leaves *config as it was. */
CDC_EXPORT int cdc_config_from_env(cdc_config_t *config);
/* Parse a split name: auto, output, channel, rows, spatial, columns. */
CDC_EXPORT int cdc_split_parse(const char *name, cdc_split_t *split);

/* ---------------------------------------------------------------------------
 * Context: the workers, the code, the counters. Thread-safe: calls on one
 * context are serialised internally.
 * ------------------------------------------------------------------------- */
typedef struct cdc_context cdc_context_t;

/* Create a context from *config (copied). On success *context_p is set;
   caller owns it and must destroy it with cdc_context_destroy. */
CDC_EXPORT int cdc_context_new(const cdc_config_t *config, cdc_context_t **context_p);
/* Same, from the defaults overlaid with the CDCGEMM_* environment. */
CDC_EXPORT int cdc_context_new_from_env(cdc_context_t **context_p);
/* Destroy a context and everything it owns; accepts NULL and *NULL; nulls *context_p.
   Layers created on it must be destroyed first. */
CDC_EXPORT void cdc_context_destroy(cdc_context_t **context_p);
/* The configuration in force (read-only, owned by the context). */
CDC_EXPORT const cdc_config_t *cdc_context_config(const cdc_context_t *context);

/* Counters since the context was created. */
typedef struct {
    uint64_t calls;            /* coded or local calls completed              */
    uint64_t coded_calls;      /* calls that ran through the coded path       */
    uint64_t shards_sent;      /* shard tasks dispatched                      */
    uint64_t shards_erased;    /* shard results missing when decoding         */
    uint64_t results_decoded;  /* data shard results rebuilt from parity      */
    uint64_t corrupt_detected; /* consistency-check failures                  */
    uint64_t fallbacks;        /* calls finished locally (not decodable)      */
    uint64_t weight_encodes;   /* weight matrices encoded (once per plan)     */
    uint64_t bytes_out;        /* payload bytes sent to workers               */
    uint64_t bytes_in;         /* payload bytes received from workers         */
    uint64_t weight_hits;      /* BLAS calls that reused cached weights       */
    /* Worker transport (ZeroMQ executor; 0 in process). */
    uint64_t late_replies;      /* replies to finished calls, dropped         */
    uint64_t heartbeats_missed; /* PINGs to a live worker left unanswered     */
    uint64_t worker_deaths;     /* workers taken out: connection dropped or
                                   silent for 300 ms                          */
    uint64_t worker_rejoins;    /* dead workers that answered again           */
    uint64_t invalid_messages;  /* malformed or unmatched replies, dropped     */
    uint64_t weights_sent;      /* weight shards sent to workers              */
    uint64_t weight_bytes;      /* payload bytes of those (in bytes_out too)  */
    /* Since 0.1.0 (took 1 reserved word). */
    uint64_t worker_goodbyes;   /* live workers that left on purpose (said
                                   GOODBYE: SIGTERM, a service stop); not
                                   deaths                                     */
    /* Since 0.1.0 (took 2 reserved words). */
    uint64_t worker_respawns;   /* local workers started again after dying or
                                   hanging (config.respawn)                   */
    uint64_t respawns_given_up; /* local worker slots left dead: a crash loop
                                   (more than 5 deaths within 10 s)           */
    /* Since 0.1.0 (took 6 reserved words): staying redundant (issue 11). */
    uint64_t degraded_calls;    /* coded calls that ran with fewer parity
                                   shards than configured (a slot's worker
                                   down or still receiving its weights)       */
    uint64_t background_weight_bytes; /* weight bytes shipped between calls to
                                   returning workers and hot spares (also in
                                   weight_bytes)                              */
    uint64_t redundancy_repairs; /* times full redundancy came back after a
                                   failure took it away                       */
    uint64_t repair_us_sum;     /* failure to full redundancy, summed over
                                   those repairs (mean = sum / repairs), us   */
    uint64_t repair_us_max;     /* the longest of them, us                    */
    uint64_t cancels_sent;      /* CANCELs sent for a finished call's shards
                                   still outstanding                          */
    /* Since 0.1.0 (took 2 reserved words): issue 12's planner. */
    uint64_t budget_fallbacks;  /* calls computed on the coordinator because
                                   some shard's weights would not fit its
                                   worker's --max-memory                      */
    uint64_t planned_local;     /* calls computed on the coordinator because
                                   that was predicted faster than the workers
                                   (CDCGEMM_PLAN=profiled)                    */
    /* Since 0.1.0 (took 1 reserved word): issue 13's rotated parity. */
    uint64_t late_blocks;       /* results (whole, or a streamed block) that
                                   came after their call was complete:
                                   counted, not used                         */
    uint64_t rotated_calls;     /* coded calls in the rotated layout         */
    /* Since 0.1.0 (took 1 reserved word): issue 23's accuracy guard. */
    uint64_t decodes_refused;   /* decodes not used because their error
                                   amplification passed the bound (the
                                   blocks were computed here instead;
                                   docs/codes.md)                            */
    /* Since 0.1.0 (took 2 reserved words): issue 23's sampled check. */
    uint64_t verified_calls;    /* coded calls whose results were checked
                                   against parity (config.verify), or, once
                                   a check failed, computed here where they
                                   could not be                              */
    uint64_t first_corrupt_call; /* the coded call (1 = the first) whose
                                   check first failed; 0 = none did          */
    /* Since 0.1.0 (took 1 reserved word): issue 24's budgets. */
    uint64_t budget_erasures;   /* shards not sent because their worker's
                                   --max-memory could not hold their weights:
                                   erasures the parity covered               */
    /* Since 0.1.0 (took 1 reserved word): issue 28's task limit. */
    uint64_t oversized_skipped; /* shards not sent because they would exceed
                                   their worker's --max-task-memory (as its
                                   heartbeats report it): erasures          */
    /* Since 0.1.0 (took 1 reserved word): issue 26's on-demand parity. */
    uint64_t parity_on_demand;  /* calls of per-call operands (a spatial
                                   conv's bands) whose parity was sent after
                                   dispatch, because a data task was lost or
                                   late; fault-free calls send none          */
    /* Since 0.1.0 (took 2 reserved words): issue 27's worker stores. */
    uint64_t weights_stored_asked; /* weight shards a worker process that
                                   keeps a store on its disk (cdcgemm-worker
                                   --store) was asked to load from it
                                   instead of being sent them               */
    uint64_t weights_stored_missing; /* of those, shards its store lacked
                                   (then sent, in weights_sent)             */
    /* Room for new counters without an ABI break (docs/abi.md): written as
       0 by this version. A new counter takes the first slot and the count
       shrinks by one. */
    uint64_t reserved[11];
} cdc_stats_t;

/* Copy the counters into *stats. Thread-safe. */
CDC_EXPORT int cdc_context_stats(cdc_context_t *context, cdc_stats_t *stats);

/* What the last coded call on a context did (for benchmarks and tests). */
typedef struct {
    int n, r;            /* data and parity shards of the call                 */
    int erased;          /* shards dropped by cdc_context_erase_next           */
    int arrived;         /* shard results that came back                       */
    int decoded;         /* data shards rebuilt from parity                    */
    int fallback;        /* data shards computed locally                       */
    int corrupt;         /* 1 when a result failed the parity check            */
    double shard_ms[CDC_MAX_WORKERS]; /* per shard: dispatch to result, < 0 none */
    double oracle_ms;    /* the n-th fastest shard result: the earliest any
                            decoder could have finished; < 0 if < n arrived   */
    double executor_ms;  /* time the call spent waiting on the executor        */
    cdc_split_t split;   /* what the call cut, in the caller's terms: ROWS the
                            rows of C (FC output, conv channel), COLUMNS its
                            columns (batch, spatial), whatever the layout;
                            AUTO (0) from a library before 0.1.0             */
    int redundancy;      /* parity shards the call could have used: r minus
                            those not dispatched (their worker down, or still
                            receiving its weights); r for a call the plan
                            computed on the coordinator (no worker's loss
                            can reach it)                                   */
    int degraded;        /* 1 when redundancy was below the configured parity */
    /* Room for new fields without an ABI break (docs/abi.md): written as 0
       by this version. */
    uint64_t reserved[14];
} cdc_call_report_t;

/* Copy the report of the last coded call. Thread-safe. */
CDC_EXPORT int cdc_context_last_call(cdc_context_t *context, cdc_call_report_t *report);

/* ---------------------------------------------------------------------------
 * GEMM: C = alpha * op(A) * op(B) + beta * C with full BLAS semantics
 * (CBLAS argument order; beta = 0 overwrites C, NaN included).
 * ------------------------------------------------------------------------- */
typedef enum { CDC_ROW_MAJOR = 101, CDC_COL_MAJOR = 102 } cdc_layout_t;
typedef enum { CDC_NO_TRANS = 111, CDC_TRANS = 112, CDC_CONJ_TRANS = 113 } cdc_transpose_t;

/* Coded GEMM on the context's workers. A, B are only read; C is written only on
   success. Returns CDC_OK or a status; on bad arguments C is untouched. */
CDC_EXPORT int cdc_sgemm(cdc_context_t *context, cdc_layout_t layout,
                         cdc_transpose_t trans_a, cdc_transpose_t trans_b,
                         int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc);

/* ---------------------------------------------------------------------------
 * Layers. Weights are copied and encoded once when the layer is created;
 * forward calls only move activations.
 * ------------------------------------------------------------------------- */
typedef struct cdc_layer cdc_layer_t;

#define CDC_PARITY_DEFAULT (-1) /* use the context's parity */

typedef struct {
    cdc_split_t split; /* CDC_SPLIT_AUTO, ROWS (output/channel) or COLUMNS (spatial) */
    int parity;        /* r for this layer, or CDC_PARITY_DEFAULT                  */
    int relu;          /* nonzero: apply ReLU after bias                           */
} cdc_layer_options_t;

/* Defaults: split from the context, parity from the context, no ReLU. */
CDC_EXPORT void cdc_layer_options_init(cdc_layer_options_t *options);

/* Fully-connected layer: y = x * W^T + bias, W is out_features x in_features
   row-major (PyTorch nn.Linear), bias may be NULL. Weights and bias are copied.
   Caller owns *layer_p and must destroy it with cdc_layer_destroy. */
CDC_EXPORT int cdc_fc_new(cdc_context_t *context, int64_t out_features,
                          int64_t in_features, const float *weights,
                          const float *bias, const cdc_layer_options_t *options,
                          cdc_layer_t **layer_p);

/* Weights the caller lends a layer (cdc_fc_new_borrowed): parts stacked in
   row order, each `count` rows x in_features floats, row-major, contiguous. */
#define CDC_MAX_WEIGHT_PARTS 8

typedef struct {
    const float *rows;
    int64_t count;
} cdc_weight_part_t;

/* cdc_fc_new_borrowed flags. FILE_MAPPED: every part lies in a read-only
   file mapping (mmap PROT_READ); the library gives back the pages it has
   read (MADV_DONTNEED), so the coordinator's resident memory does not grow
   with the model, and the kernel reads them again from the file when they
   are needed. */
#define CDC_BORROW_FILE_MAPPED 1u

/* Fully-connected layer over borrowed weights: W is the parts stacked (their
   rows sum to out_features), never copied whole. The library reads them when
   it encodes them and when it ships a worker its rows (respawned workers and
   re-sized plans included), and computes from them only when more results
   are missing than the parity covers; they must stay valid and unchanged
   until cdc_layer_destroy returns. A call whose split or parity layout needs
   the weights contiguous past the call (the dedicated layout, a batch split)
   copies them once, for the layer's life. bias (out_features) is copied and
   may be NULL. CDC_EINVAL for no parts, more than CDC_MAX_WEIGHT_PARTS, a
   NULL or empty part, an unknown flag. Since 0.1.0. */
CDC_EXPORT int cdc_fc_new_borrowed(cdc_context_t *context, int64_t in_features,
                                   const cdc_weight_part_t *parts, int part_count,
                                   unsigned flags, const float *bias,
                                   const cdc_layer_options_t *options,
                                   cdc_layer_t **layer_p);

/* x is batch x in_features, y is batch x out_features, both row-major. */
CDC_EXPORT int cdc_fc_forward(cdc_layer_t *layer, int64_t batch, const float *x,
                              float *y);

typedef struct {
    int64_t in_channels, out_channels;
    int64_t kernel_h, kernel_w;
    int64_t stride_h, stride_w;     /* >= 1 */
    int64_t pad_h, pad_w;           /* symmetric zero padding, >= 0 */
    int64_t dilation_h, dilation_w; /* >= 1 */
} cdc_conv2d_desc_t;

/* Output height/width of a conv for an input of h x w; CDC_EDIM if empty. */
CDC_EXPORT int cdc_conv2d_output_size(const cdc_conv2d_desc_t *desc, int64_t h,
                                      int64_t w, int64_t *out_h, int64_t *out_w);

/* Conv2d layer with OIHW weights (out_channels x in_channels x kh x kw) as
   PyTorch/ONNX lay them out; bias (out_channels) may be NULL. Copied.
   Caller owns *layer_p and must destroy it with cdc_layer_destroy. */
CDC_EXPORT int cdc_conv2d_new(cdc_context_t *context, const cdc_conv2d_desc_t *desc,
                              const float *weights, const float *bias,
                              const cdc_layer_options_t *options,
                              cdc_layer_t **layer_p);

/* x is NCHW (batch x in_channels x h x w), y is batch x out_channels x out_h x out_w. */
CDC_EXPORT int cdc_conv2d_forward(cdc_layer_t *layer, int64_t batch, int64_t h,
                                  int64_t w, const float *x, float *y);

/* The split the layer used for its last forward call (auto resolved). */
CDC_EXPORT cdc_split_t cdc_layer_split(const cdc_layer_t *layer);

/* Destroy a layer; accepts NULL and *NULL; nulls *layer_p. */
CDC_EXPORT void cdc_layer_destroy(cdc_layer_t **layer_p);

#ifdef __cplusplus
}
#endif

#endif /* CDCGEMM_H_INCLUDED */
