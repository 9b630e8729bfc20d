/*
 * gg_bench.c - times gradgraph's eager path on the benchmark cases and checks every case it times.
 *
 *   gg_bench [--block N] [--case I] [--iters N] [--warmup N] [--json FILE] [--csv FILE]
 *
 * Per case and precision mode: one correctness check against the float64 reference (the spec's rule), then
 * `warmup` untimed and `iters` timed calls, each after writing 2x the L2 size (cold L2), timed with CUDA events
 * around the call on the caller's stream; the median is reported. Progress on stderr, table on stdout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "case_runner.h"
#include "gradgraph.h"

typedef struct options {
    int block, case_index, iters, warmup;
    const char *json, *csv;
} options;

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--block 1-4] [--case 0-15] [--iters N] [--warmup N] [--json FILE] [--csv FILE]\n",
            argv0);
    return 2;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){0, -1, 50, 10, NULL, NULL};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (i + 1 >= argc) return usage(argv[0]);
        if (!strcmp(a, "--block")) o->block = atoi(argv[++i]);
        else if (!strcmp(a, "--case")) o->case_index = atoi(argv[++i]);
        else if (!strcmp(a, "--iters")) o->iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--json")) o->json = argv[++i];
        else if (!strcmp(a, "--csv")) o->csv = argv[++i];
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
    double median_us, sol_us;
    int correct;
    double worst_matched;
} result;

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
    if (gg_ctx_create(NULL, &ctx) != GG_SUCCESS) {
        fprintf(stderr, "gg_ctx_create: %s\n", gg_last_error(NULL));
        return 1;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const size_t flush_bytes = 2 * (size_t)prop.l2CacheSize;
    void *flush = NULL;
    CHECK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    float *samples = malloc(sizeof(float) * (size_t)opt.iters);
    result *results = calloc((size_t)n * 3, sizeof *results);
    int n_results = 0, failures = 0;

    for (int i = 0; i < n; ++i) {
        const gg_case *c = &cases[i];
        if ((opt.block && c->block_id != opt.block) || (opt.case_index >= 0 && c->index != opt.case_index)) continue;
        gg_case_run *run = NULL;
        CHECK(gg_case_run_create(c, (gg_stream)stream, &run, err, sizeof err));
        CHECK(gg_case_prepare(run, 4242u + (uint64_t)i));
        const gg_precision fp32_modes[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
        const int modes = c->block_id == 2 || c->block_id == 3 ? 3 : 1;
        for (int m = 0; m < modes; ++m) {
            const gg_precision mode = modes == 3 ? fp32_modes[m] : GG_PRECISION_BF16;
            result *r = &results[n_results++];
            r->c = c;
            r->mode = mode;
            r->sol_us = gg_case_sol_us_h200(c);
            CHECK(gg_case_poison(run));
            if (gg_case_execute(run, ctx, mode) != GG_SUCCESS) {
                fprintf(stderr, "%s case %d: %s\n", c->block, c->index, gg_last_error(ctx));
                return 1;
            }
            gg_case_verdict v;
            CHECK(gg_case_check(run, &v));
            r->correct = v.passed;
            r->worst_matched = v.worst_matched_ratio;
            failures += !v.passed;
            for (int it = 0; it < opt.warmup + opt.iters; ++it) {
                CHECK(cudaMemsetAsync(flush, it & 0xff, flush_bytes, stream)); /* cold L2 */
                CHECK(cudaEventRecord(start, stream));
                (void)gg_case_execute(run, ctx, mode);
                CHECK(cudaEventRecord(stop, stream));
                CHECK(cudaEventSynchronize(stop));
                if (it >= opt.warmup) CHECK(cudaEventElapsedTime(&samples[it - opt.warmup], start, stop));
            }
            qsort(samples, (size_t)opt.iters, sizeof *samples, cmp_float);
            r->median_us = 1000.0 * samples[opt.iters / 2];
            fprintf(stderr, "[%s %s] case %2d M=%6lld: %9.1f us (SOL %7.1f us) %s\n", gg_case_block_short(c->block_id),
                    gg_precision_string(mode), c->index, (long long)c->tokens, r->median_us, r->sol_us,
                    r->correct ? "correct" : "WRONG");
        }
        gg_case_run_destroy(run);
    }

    /* Table: per block and mode, geomean latency and fraction of the speed of light. */
    printf("%-10s %-5s %6s %14s %14s %8s %s\n", "block", "mode", "cases", "geomean_us", "sol_geomean_us", "sol_frac",
           "correct");
    FILE *json = opt.json ? fopen(opt.json, "w") : NULL;
    FILE *csv = opt.csv ? fopen(opt.csv, "w") : NULL;
    if (json) fprintf(json, "{\"gpu\": \"%s\", \"iters\": %d, \"warmup\": %d, \"results\": [", prop.name, opt.iters,
                      opt.warmup);
    if (csv) fprintf(csv, "block,mode,index,M,median_us,sol_us,correct,worst_matched_ratio\n");
    int first = 1;
    for (int b = 1; b <= 4; ++b) {
        for (int mode = GG_PRECISION_FP32; mode <= GG_PRECISION_BF16; ++mode) {
            double log_t = 0, log_sol = 0;
            int count = 0, correct = 0;
            for (int k = 0; k < n_results; ++k) {
                const result *r = &results[k];
                if (r->c->block_id != b || (int)r->mode != mode) continue;
                log_t += log(r->median_us);
                log_sol += log(r->sol_us);
                ++count;
                correct += r->correct;
                if (csv)
                    fprintf(csv, "%s,%s,%d,%lld,%.2f,%.3f,%d,%.6f\n", r->c->block, gg_precision_string(r->mode),
                            r->c->index, (long long)r->c->tokens, r->median_us, r->sol_us, r->correct,
                            r->worst_matched);
                if (json) {
                    fprintf(json, "%s\n  {\"block\": \"%s\", \"mode\": \"%s\", \"index\": %d, \"M\": %lld, "
                                  "\"median_us\": %.2f, \"sol_us\": %.3f, \"correct\": %s}",
                            first ? "" : ",", r->c->block, gg_precision_string(r->mode), r->c->index,
                            (long long)r->c->tokens, r->median_us, r->sol_us, r->correct ? "true" : "false");
                    first = 0;
                }
            }
            if (!count) continue;
            const double g = exp(log_t / count), s = exp(log_sol / count);
            printf("%-10s %-5s %6d %14.1f %14.1f %7.1f%% %d/%d\n", gg_case_block_short(b),
                   gg_precision_string((gg_precision)mode), count, g, s, 100.0 * s / g, correct, count);
        }
    }
    if (json) {
        fprintf(json, "\n]}\n");
        fclose(json);
    }
    if (csv) fclose(csv);
    free(samples);
    free(results);
    cudaFree(flush);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
    gg_ctx_destroy(ctx);
    return failures ? 1 : 0;
}
