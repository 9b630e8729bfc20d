/*
 * gg_bench.c - times gradgraph's eager path and its graph replay on the benchmark cases, and checks every case
 * it times.
 *
 *   gg_bench [--block N] [--case I] [--iters N] [--warmup N] [--modes all|fast] [--json FILE] [--csv FILE]
 *            [--autotune on|off] [--trace FILE] [--log error|warn|info|debug]
 *
 * Per case and precision mode (--modes fast: only FP16 for the fp32 blocks): a correctness check of the eager path
 * against the float64 reference (the spec's rule); a graph for exactly that M, whose first replay must equal the
 * eager outputs bit for bit; then for each path `warmup` untimed and `iters` timed calls, each after writing 2x
 * the L2 size (cold L2), with the inputs at a different address each call (three copies of them, rotated: the
 * graph keeps one executable per pointer set, so no call pays a rebinding). Device time: CUDA events around the
 * call on the caller's stream (what a training loop sees, host launch gaps included); CUPTI span: first kernel
 * start to last kernel end of the call, any stream (the published protocol's measure). Host time: the wall time of
 * the call itself (launch cost). Medians reported.
 * Progress on stderr ("[k/N]" per case and mode), table on stdout; the JSON records the versions of gradgraph,
 * the CUDA runtime, the driver and cuBLASLt that made the numbers. --trace appends, per case, the kernels of the
 * last timed graph replay (stream, start, duration, name, then grid in CTAs, threads per CTA and cluster shape as
 * launched) as CSV: where the time goes, and how each kernel sat on the SMs. The library's messages go to stderr
 * from --log's level (default warn; debug names, among others, each GEMM's chosen cuBLASLt algorithm).
 */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "case_runner.h"
#include "cupti_span.h"
#include "gradgraph.h"

typedef struct options {
    int block, case_index, iters, warmup, fast, autotune;
    gg_overlap overlap;
    gg_log_level log_level;
    const char *json, *csv, *trace;
} options;

static const char *const log_level_names[] = {"error", "warn", "info", "debug"}; /* gg_log_level's order */

static int usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--block 1-4] [--case 0-15] [--iters N] [--warmup N] [--modes all|fast] "
            "[--overlap auto|always|never] [--autotune on|off] [--json FILE] [--csv FILE] [--trace FILE] "
            "[--log error|warn|info|debug]\n",
            argv0);
    return 2;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){0, -1, 50, 10, 0, 1, GG_OVERLAP_AUTO, GG_LOG_WARN, NULL, NULL, NULL};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (i + 1 >= argc) return usage(argv[0]);
        if (!strcmp(a, "--block")) o->block = atoi(argv[++i]);
        else if (!strcmp(a, "--case")) o->case_index = atoi(argv[++i]);
        else if (!strcmp(a, "--iters")) o->iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--modes")) o->fast = !strcmp(argv[++i], "fast");
        else if (!strcmp(a, "--overlap")) {
            ++i;
            o->overlap = !strcmp(argv[i], "always") ? GG_OVERLAP_ALWAYS
                         : !strcmp(argv[i], "never") ? GG_OVERLAP_NEVER
                                                      : GG_OVERLAP_AUTO;
        }
        else if (!strcmp(a, "--autotune")) o->autotune = strcmp(argv[++i], "off") != 0;
        else if (!strcmp(a, "--trace")) o->trace = argv[++i];
        else if (!strcmp(a, "--json")) o->json = argv[++i];
        else if (!strcmp(a, "--csv")) o->csv = argv[++i];
        else if (!strcmp(a, "--log")) {
            ++i;
            o->log_level = (gg_log_level)-1;
            for (int l = GG_LOG_ERROR; l <= GG_LOG_DEBUG; ++l)
                if (!strcmp(argv[i], log_level_names[l])) o->log_level = (gg_log_level)l;
            if ((int)o->log_level < 0) return usage(argv[0]);
        }
        else return usage(argv[0]);
    }
    if (o->iters < 1 || o->warmup < 0 || o->block < 0 || o->block > 4) return usage(argv[0]);
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

#define CHECK(call)                                                                                                \
    do {                                                                                                           \
        int rc_ = (int)(call);                                                                                     \
        if (rc_ != 0) {                                                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString((cudaError_t)rc_));   \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

typedef struct result {
    const gg_case *c;
    gg_precision mode;
    double eager_us, sol_us;     /* eager, device time */
    double graph_us;             /* graph replay, device time */
    double eager_span_us, graph_span_us; /* CUPTI kernel spans (-1 without CUPTI) */
    double host_us, graph_host_us; /* the calls' own wall time */
    int correct, bitwise;
    double worst_matched;
} result;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

/* The timing loop shared by both paths: cold L2, events around the call, host wall time of the call. */
typedef struct timer {
    cudaStream_t stream;
    void *flush;
    size_t flush_bytes;
    cudaEvent_t start, stop;
    float *device_ms;
    double *host_us;
    double *span_us;
    int iters, warmup;
    int cupti; /* CUPTI spans are recorded */
    FILE *trace;       /* --trace: the kernels of the last timed iteration of run[1] go here */
    char label[128];   /* the trace rows' leading columns */
} timer;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void write_trace(timer *t) {
    gg_span_kernel k[GG_SPAN_MAX_KERNELS];
    const int n = gg_span_kernels(k, GG_SPAN_MAX_KERNELS);
    for (int i = 0; i < n; ++i)
        fprintf(t->trace, "%s,%u,%.2f,%.2f,%s,%u,%u,%ux%ux%u\n", t->label, k[i].stream, k[i].start_us,
                k[i].duration_us, k[i].name, k[i].ctas, k[i].threads, k[i].cluster[0], k[i].cluster[1],
                k[i].cluster[2]);
    fflush(t->trace);
}

/* Times two ways of making the same call, alternating them iteration by iteration (same clocks and temperature
 * for both): run[k](arg) is one call. Pass 1: CUDA events and host time, CUPTI off. Pass 2 (with CUPTI): kernel
 * spans only — CUPTI's tracing delays launches, which would inflate the event times (seen at commit c0d6516: 061
 * event time 21 -> 525 us with tracing on). Medians into device_us[k], host_us[k], span_us[k] (-1: no CUPTI). */
static gg_status time_calls(timer *t, gg_status (*run[2])(void *), void *arg, double device_us[2], double host_us[2],
                            double span_us[2]) {
    float *dev[2] = {t->device_ms, t->device_ms + t->iters};
    double *host[2] = {t->host_us, t->host_us + t->iters};
    double *span[2] = {t->span_us, t->span_us + t->iters};
    for (int pass = 0; pass < (t->cupti ? 2 : 1); ++pass) {
        const int spans = pass == 1;
        if (spans) gg_span_enable(1);
        for (int it = 0; it < t->warmup + t->iters; ++it) {
            for (int k = 0; k < 2; ++k) {
                CHECK(cudaMemsetAsync(t->flush, it & 0xff, t->flush_bytes, t->stream)); /* cold L2 */
                if (spans) gg_span_begin();
                CHECK(cudaEventRecord(t->start, t->stream));
                const double h0 = now_us();
                const gg_status st = run[k](arg);
                const double h1 = now_us();
                if (st != GG_SUCCESS) return st;
                CHECK(cudaEventRecord(t->stop, t->stream));
                CHECK(cudaEventSynchronize(t->stop));
                if (it < t->warmup) continue;
                if (spans) {
                    span[k][it - t->warmup] = gg_span_end();
                    if (t->trace && k == 1 && it == t->warmup + t->iters - 1) write_trace(t);
                } else {
                    CHECK(cudaEventElapsedTime(&dev[k][it - t->warmup], t->start, t->stop));
                    host[k][it - t->warmup] = h1 - h0;
                }
            }
        }
        if (spans) gg_span_enable(0);
    }
    for (int k = 0; k < 2; ++k) {
        qsort(dev[k], (size_t)t->iters, sizeof *dev[k], cmp_float);
        qsort(host[k], (size_t)t->iters, sizeof *host[k], cmp_double);
        device_us[k] = 1000.0 * dev[k][t->iters / 2];
        host_us[k] = host[k][t->iters / 2];
        span_us[k] = -1.0;
        if (t->cupti) {
            qsort(span[k], (size_t)t->iters, sizeof *span[k], cmp_double);
            span_us[k] = span[k][t->iters / 2];
        }
    }
    return GG_SUCCESS;
}

#define INPUT_COPIES 3 /* input sets rotated between timed calls (the graph keeps 4 executables per bucket) */

typedef struct call_arg {
    gg_case_run *run;
    gg_ctx *ctx;
    gg_graph *graph;
    gg_precision mode;
    void *copies[INPUT_COPIES][GG_RUN_MAX_TENSORS]; /* NULL: no rotation (the checked calls) */
    unsigned calls;
} call_arg;

/* Copies of every input at fresh addresses, for the timed calls. */
static void make_copies(call_arg *a) {
    for (int k = 0; k < INPUT_COPIES; ++k)
        for (int i = 0; i < a->run->n_in; ++i) {
            const gg_tensor *t = &a->run->in[i];
            const size_t bytes = (size_t)(t->rows * t->cols) * t->elem;
            CHECK(cudaMalloc(&a->copies[k][i], bytes));
            CHECK(cudaMemcpy(a->copies[k][i], t->dev, bytes, cudaMemcpyDeviceToDevice));
        }
}

static void free_copies(call_arg *a, void *const originals[]) {
    for (int i = 0; i < a->run->n_in; ++i) a->run->in[i].dev = originals[i];
    for (int k = 0; k < INPUT_COPIES; ++k)
        for (int i = 0; i < a->run->n_in; ++i) {
            cudaFree(a->copies[k][i]);
            a->copies[k][i] = NULL;
        }
}

/* Before each timed call: the next input set. */
static void rotate_inputs(call_arg *a) {
    if (!a->copies[0][0]) return;
    const unsigned k = a->calls++ % INPUT_COPIES;
    for (int i = 0; i < a->run->n_in; ++i) a->run->in[i].dev = a->copies[k][i];
}

static gg_status eager_call(void *p) {
    call_arg *a = p;
    rotate_inputs(a);
    return gg_case_execute(a->run, a->ctx, a->mode);
}

static gg_status graph_call(void *p) {
    call_arg *a = p;
    rotate_inputs(a);
    return gg_case_graph_run(a->run, a->graph, a->mode);
}

/* What made the numbers: gradgraph, the CUDA runtime, the driver and cuBLASLt, as "x.y[.z]" strings. */
typedef struct versions {
    char runtime[16], driver[16], cublaslt[16];
} versions;

static versions get_versions(void) {
    versions v;
    int runtime = 0, driver = 0;
    CHECK(cudaRuntimeGetVersion(&runtime));
    CHECK(cudaDriverGetVersion(&driver));
    const int lt = (int)cublasLtGetVersion(); /* major * 10000 + minor * 100 + patch */
    snprintf(v.runtime, sizeof v.runtime, "%d.%d", runtime / 1000, runtime % 1000 / 10);
    snprintf(v.driver, sizeof v.driver, "%d.%d", driver / 1000, driver % 1000 / 10);
    snprintf(v.cublaslt, sizeof v.cublaslt, "%d.%d.%d", lt / 10000, lt % 10000 / 100, lt % 100);
    return v;
}

/* The runs (case x precision mode) the options select, for the k/N progress. */
static int count_runs(const gg_case *cases, int n, const options *o) {
    int runs = 0;
    for (int i = 0; i < n; ++i) {
        const gg_case *c = &cases[i];
        if ((o->block && c->block_id != o->block) || (o->case_index >= 0 && c->index != o->case_index)) continue;
        const int fp32_block = c->block_id == 2 || c->block_id == 3;
        runs += fp32_block ? (o->fast ? 1 : 3) : 1;
    }
    return runs;
}

static void print_log(void *user_data, gg_log_level level, const char *message) {
    (void)user_data;
    fprintf(stderr, "gradgraph %s: %s\n", log_level_names[level], message);
}

int main(int argc, char **argv) {
    options opt;
    if (parse(argc, argv, &opt)) return 2;
    static gg_case cases[GG_CASES_MAX];
    char err[256];
    const int n = gg_cases_load(GG_CASES_FILE, cases, GG_CASES_MAX, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    gg_ctx *ctx = NULL;
    gg_config config = GG_CONFIG_INIT;
    config.overlap = opt.overlap;
    config.autotune = opt.autotune;
    config.log_level = opt.log_level;
    config.log_fn = print_log;
    if (gg_ctx_create(&config, &ctx) != GG_SUCCESS) {
        fprintf(stderr, "gg_ctx_create: %s\n", gg_last_error(NULL));
        return 1;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const versions ver = get_versions();
    const int total_runs = count_runs(cases, n, &opt);
    fprintf(stderr, "gradgraph %s, CUDA runtime %s, driver %s, cuBLASLt %s on %s: %d runs\n", gg_version_string(),
            ver.runtime, ver.driver, ver.cublaslt, prop.name, total_runs);
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const size_t flush_bytes = 2 * (size_t)prop.l2CacheSize;
    void *flush = NULL;
    CHECK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    timer tm = {stream, flush, flush_bytes, start, stop, malloc(sizeof(float) * 2 * (size_t)opt.iters),
                malloc(sizeof(double) * 2 * (size_t)opt.iters), malloc(sizeof(double) * 2 * (size_t)opt.iters),
                opt.iters, opt.warmup, gg_span_init() == 0, NULL, ""};
    if (opt.trace) {
        tm.trace = fopen(opt.trace, "a");
        if (!tm.trace) {
            fprintf(stderr, "--trace %s: cannot open\n", opt.trace);
            return 1;
        }
        fprintf(tm.trace, "block,mode,index,M,stream,start_us,duration_us,kernel,ctas,threads,cluster\n");
    }
    result *results = calloc((size_t)n * 3, sizeof *results);
    int n_results = 0, failures = 0;

    for (int i = 0; i < n; ++i) {
        const gg_case *c = &cases[i];
        if ((opt.block && c->block_id != opt.block) || (opt.case_index >= 0 && c->index != opt.case_index)) continue;
        gg_case_run *run = NULL;
        CHECK(gg_case_run_create(c, (gg_stream)stream, &run, err, sizeof err));
        CHECK(gg_case_prepare(run, 4242u + (uint64_t)i));
        const gg_precision fp32_modes[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
        const int fp32_block = c->block_id == 2 || c->block_id == 3;
        const int first_mode = fp32_block && opt.fast ? 2 : 0, modes = fp32_block ? 3 : 1;
        for (int m = first_mode; m < modes; ++m) {
            const gg_precision mode = fp32_block ? fp32_modes[m] : GG_PRECISION_BF16;
            result *r = &results[n_results++];
            r->c = c;
            r->mode = mode;
            r->sol_us = gg_case_sol_us_h200(c);
            call_arg arg = {run, ctx, NULL, mode, {{0}}, 0};
            /* correctness of the eager path, then the graph's first replay against it, bit for bit */
            CHECK(gg_case_poison(run));
            if (eager_call(&arg) != GG_SUCCESS) {
                fprintf(stderr, "%s case %d: %s\n", c->block, c->index, gg_last_error(ctx));
                return 1;
            }
            gg_case_verdict v;
            CHECK(gg_case_check(run, &v));
            r->correct = v.passed;
            r->worst_matched = v.worst_matched_ratio;
            size_t bytes = 0;
            void *eager_out = gg_case_outputs_to_host(run, &bytes);
            gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
            gc.policy = GG_BUCKETS_LIST;
            gc.bucket_tokens = &c->tokens;
            gc.n_buckets = 1;
            if (gg_case_graph_create(run, ctx, mode, &gc, &arg.graph) != GG_SUCCESS) {
                fprintf(stderr, "%s case %d: %s\n", c->block, c->index, gg_last_error(ctx));
                return 1;
            }
            CHECK(gg_case_poison(run));
            if (graph_call(&arg) != GG_SUCCESS) {
                fprintf(stderr, "%s case %d: %s\n", c->block, c->index, gg_last_error(ctx));
                return 1;
            }
            void *graph_out = gg_case_outputs_to_host(run, &bytes);
            r->bitwise = eager_out && graph_out && memcmp(eager_out, graph_out, bytes) == 0;
            free(eager_out);
            free(graph_out);
            failures += !r->correct || !r->bitwise;
            void *originals[GG_RUN_MAX_TENSORS];
            for (int t = 0; t < run->n_in; ++t) originals[t] = run->in[t].dev;
            make_copies(&arg);
            gg_status (*paths[2])(void *) = {eager_call, graph_call};
            snprintf(tm.label, sizeof tm.label, "%s,%s,%d,%lld", gg_case_block_short(c->block_id),
                     gg_precision_string(mode), c->index, (long long)c->tokens);
            double device_us[2], host_us[2], span_us[2];
            if (time_calls(&tm, paths, &arg, device_us, host_us, span_us) != GG_SUCCESS) {
                fprintf(stderr, "%s case %d: %s\n", c->block, c->index, gg_last_error(ctx));
                return 1;
            }
            r->eager_us = device_us[0];
            r->graph_us = device_us[1];
            r->host_us = host_us[0];
            r->graph_host_us = host_us[1];
            r->eager_span_us = span_us[0];
            r->graph_span_us = span_us[1];
            free_copies(&arg, originals);
            gg_graph_destroy(arg.graph);
            fprintf(stderr,
                    "[%d/%d] [%s %s] case %2d M=%6lld: eager %9.1f us (host %6.1f) graph %9.1f us (host %5.1f, "
                    "kernels %9.1f) SOL %7.1f us %s%s\n",
                    n_results, total_runs, gg_case_block_short(c->block_id), gg_precision_string(mode), c->index,
                    (long long)c->tokens,
                    r->eager_us, r->host_us, r->graph_us, r->graph_host_us, r->graph_span_us, r->sol_us,
                    r->correct ? "correct" : "WRONG", r->bitwise ? "" : " GRAPH!=EAGER");
        }
        gg_case_run_destroy(run);
    }

    /* Table: per block and mode, geomean latencies and fraction of the speed of light. */
    printf("%-10s %-5s %5s %11s %11s %11s %11s %9s %8s %s\n", "block", "mode", "cases", "eager_us", "graph_us",
           "span_us", "sol_us", "sol_frac", "bitwise", "correct");
    FILE *json = opt.json ? fopen(opt.json, "w") : NULL;
    FILE *csv = opt.csv ? fopen(opt.csv, "w") : NULL;
    if (json)
        fprintf(json,
                "{\"gpu\": \"%s\", \"versions\": {\"gradgraph\": \"%s\", \"cuda_runtime\": \"%s\", "
                "\"cuda_driver\": \"%s\", \"cublaslt\": \"%s\"}, \"iters\": %d, \"warmup\": %d, \"overlap\": %d, "
                "\"results\": [",
                prop.name, gg_version_string(), ver.runtime, ver.driver, ver.cublaslt, opt.iters, opt.warmup,
                (int)opt.overlap);
    if (csv)
        fprintf(csv, "block,mode,index,M,eager_us,graph_us,eager_host_us,graph_host_us,sol_us,correct,bitwise,"
                     "eager_span_us,graph_span_us\n");
    int first = 1;
    for (int b = 1; b <= 4; ++b) {
        for (int mode = GG_PRECISION_FP32; mode <= GG_PRECISION_BF16; ++mode) {
            double log_t = 0, log_g = 0, log_sol = 0, log_span = 0;
            int count = 0, correct = 0, bitwise = 0;
            for (int k = 0; k < n_results; ++k) {
                const result *r = &results[k];
                if (r->c->block_id != b || (int)r->mode != mode) continue;
                log_t += log(r->eager_us);
                log_g += log(r->graph_us);
                log_span += log(r->graph_span_us > 0 ? r->graph_span_us : r->graph_us);
                log_sol += log(r->sol_us);
                ++count;
                correct += r->correct;
                bitwise += r->bitwise;
                if (csv)
                    fprintf(csv, "%s,%s,%d,%lld,%.2f,%.2f,%.2f,%.2f,%.3f,%d,%d,%.2f,%.2f\n", r->c->block,
                            gg_precision_string(r->mode), r->c->index, (long long)r->c->tokens, r->eager_us,
                            r->graph_us, r->host_us, r->graph_host_us, r->sol_us, r->correct, r->bitwise,
                            r->eager_span_us, r->graph_span_us);
                if (json) {
                    fprintf(json,
                            "%s\n  {\"block\": \"%s\", \"mode\": \"%s\", \"index\": %d, \"M\": %lld, "
                            "\"eager_us\": %.2f, \"graph_us\": %.2f, \"eager_host_us\": %.2f, \"graph_host_us\": "
                            "%.2f, \"sol_us\": %.3f, \"correct\": %s, \"bitwise_equal\": %s, \"eager_span_us\": %.2f, "
                            "\"graph_span_us\": %.2f}",
                            first ? "" : ",", r->c->block, gg_precision_string(r->mode), r->c->index,
                            (long long)r->c->tokens, r->eager_us, r->graph_us, r->host_us, r->graph_host_us, r->sol_us,
                            r->correct ? "true" : "false", r->bitwise ? "true" : "false", r->eager_span_us,
                            r->graph_span_us);
                    first = 0;
                }
            }
            if (!count) continue;
            const double e = exp(log_t / count), g = exp(log_g / count), s = exp(log_sol / count);
            const double span = exp(log_span / count); /* the published protocol's measure, when CUPTI works */
            printf("%-10s %-5s %5d %11.1f %11.1f %11.1f %11.1f %8.1f%% %5d/%-2d %d/%d\n", gg_case_block_short(b),
                   gg_precision_string((gg_precision)mode), count, e, g, span, s, 100.0 * s / span, bitwise, count,
                   correct, count);
        }
    }
    if (json) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    if (csv) fclose(csv);
    if (tm.trace) fclose(tm.trace);
    if (tm.cupti) gg_span_shutdown();
    free(tm.device_ms);
    free(tm.host_us);
    free(tm.span_us);
    free(results);
    cudaFree(flush);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
    gg_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
