/*
 * model_backward.c - a model's whole backward as one step graph (gg_step_*): a stack of residual GELU-MLP layers
 * (block 3, the residual add in a callback) or of gated bf16 layers (blocks 1 and 4), checked against the same
 * layers run as separate eager calls, then timed per step against per-block graphs and eager calls.
 *
 *   model_backward [--small] [--gated] [--fused-residual] [--fp16-copies] [--layers L] [--hidden D] [--ffn F]
 *                  [--tokens M] [--precision fp32|tf32|fp16]
 *                  [--side-streams S] [--scratch-slots K] [--sweep S:K,S:K,...] [--rounds R] [--steps N]
 *                  [--warm SECONDS] [--overlap auto|never] [--autotune on|off]
 *                  [--json FILE] [--trace FILE] [--dot FILE] [--gpus N]
 *
 * --fused-residual: the residual MLPs add the residual's gradient in their dX GEMM (gg_mlp_args.grad_residual)
 * instead of in a callback (a cuBLAS axpy) after each layer.
 * --fp16-copies (fp16 residual MLPs): every MLP is handed the fp16 copies of its hidden states, weights, activation
 * and pre-activation (gg_mlp_args' *_fp16, made once with gg_to_fp16), as a training step whose forward and optimizer
 * keep them would (PyTorch's autocast saves the same fp16 tensors for its backward): the backward converts only
 * grad_output, and gelu' reads x in fp16 (so the gradients differ from the converting calls' by that rounding: the
 * check against those is within 1e-3 of the largest gradient, not bitwise).
 * Defaults: 8 layers, D = 2048, F = 8192, 8192 tokens, fp16 (--small: D = 1024, F = 4096, 2048 tokens), the step's
 * default side streams and scratch slots. --sweep times several step configurations of the same model (K = 0: the
 * default, S + 1 slots), R rounds (default 3) of N steps each, the median per configuration; the fastest is
 * reported as the step graph's time and every one in the JSON's "configs". Each round times every configuration,
 * then the per-block graphs, then the eager calls, so that all of them see the same clocks: a sustained step runs at
 * the clock the power limit allows, which drifts over a run. Before the first round the first configuration's step
 * runs untimed for --warm seconds (default 1; bench/peers/step_torch.py warms each of its variants alike), so that
 * the first timings are not taken at the boost clock of a GPU that was idle while the model was built and checked:
 * a training run spends its hours at the power limit. Every configuration is
 * checked against eager calls at the largest bucket, the first also padded. --trace appends the CUPTI kernel
 * records of one replay of the fastest configuration's step and of one per-block-graph step (built with the bench:
 * CUPTI) to FILE, for scripts/plot_step_timeline.py. --dot writes what a replay of the fastest configuration's step
 * runs at the largest bucket, as a Graphviz DOT file (gg_step_debug_dot). Exit 0 when every check passes (bitwise
 * in fp32 mode and for the bf16 blocks at the largest bucket, else within 1e-3 of the largest gradient), 1
 * otherwise, 77 without a GPU.
 *
 * --overlap never: the context's gg_config.overlap = GG_OVERLAP_NEVER, every block call's and the step's work on one
 * stream (what the concurrency is worth, measured against the default AUTO). --autotune off: gg_config.autotune = 0,
 * cuBLASLt's heuristic first choice for every GEMM (and block 3's gelu' pass unless GG_FFN_DGELU says otherwise).
 *
 * --gpus N (N >= 2): the same model data-parallel instead, one thread and one context per GPU (gg_dist_init_threads),
 * each rank its own inputs: checked (every rank's parameter gradients the mean of the ranks' eager ones, bitwise
 * equal across ranks) and timed with and without the reduction and the reduction alone, reporting the speedup over
 * one GPU and the share of the reduction hidden (defined in model_ddp.c; the JSON's "ddp"). 77 with fewer GPUs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_ddp.h"
#include "step_model.h"
#ifdef GG_HAVE_TRACE
#include "cupti_span.h"
#endif

#define CHECK(call)                                                                                                \
    do {                                                                                                           \
        gg_status st_ = (call);                                                                                    \
        if (st_ != GG_SUCCESS) {                                                                                   \
            fprintf(stderr, "%s: %s\n", #call, gg_last_error(ctx));                                                \
            return 1;                                                                                              \
        }                                                                                                          \
    } while (0)

enum { MAX_CONFIGS = 16 };

typedef enum { MODE_STEP, MODE_BLOCK_GRAPHS, MODE_EAGER } mode;

/* Milliseconds per backward, averaged over `steps` after two warm-up steps. */
static double time_steps(gg_ctx *ctx, gg_step *step, sm_model *m, mode md, int64_t tokens, int steps,
                         cudaStream_t s) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    gg_status st = GG_SUCCESS;
    for (int i = -2; i < steps && st == GG_SUCCESS; ++i) {
        if (i == 0) cudaEventRecord(a, s);
        st = md == MODE_STEP           ? gg_step_run(step, tokens, 0, (gg_stream)s)
             : md == MODE_BLOCK_GRAPHS ? sm_run_block_graphs(m, NULL, tokens, 0, s)
                                       : sm_run_eager(m, tokens, 0, s);
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (st != GG_SUCCESS) fprintf(stderr, "timing: %s\n", gg_last_error(ctx));
    return st == GG_SUCCESS ? ms / steps : -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Untimed steps for `seconds` of device time (each waited for, so that the host's clock follows the device's). */
static gg_status warm_up(gg_step *step, int64_t tokens, double seconds, cudaStream_t s) {
    gg_status st = GG_SUCCESS;
    for (const double t0 = now_s(); st == GG_SUCCESS && now_s() - t0 < seconds;) {
        st = gg_step_run(step, tokens, 0, (gg_stream)s);
        if (cudaStreamSynchronize(s) != cudaSuccess) st = GG_ERROR_CUDA;
    }
    return st;
}

typedef struct step_config {
    int sides, slots; /* slots 0: the step's default (sides + 1) */
    gg_step *step;
    double runs_ms[SM_MAX_ROUNDS];
    double median_ms;
    int correct;
    gg_step_memory mem;
} step_config;

/* "2:0,1:0,3:0" into configs; the count, or -1. */
static int parse_sweep(const char *text, step_config *configs) {
    int n = 0;
    for (const char *p = text; *p && n < MAX_CONFIGS;) {
        int s = 0, k = 0, used = 0;
        if (sscanf(p, "%d:%d%n", &s, &k, &used) != 2) return -1;
        configs[n].sides = s;
        configs[n++].slots = k;
        p += used;
        if (*p == ',') ++p;
        else if (*p) return -1;
    }
    return n;
}

/* The step graph's gradients at M rows against ref (the eager path's): prints the check, returns whether it passed. */
static int check_against(gg_ctx *ctx, sm_model *m, const sm_config *c, gg_step *step, const step_config *sc,
                         const void *ref, size_t ref_bytes, int64_t M, cudaStream_t s) {
    size_t bytes = 0;
    int elem = 0, bitwise = 0;
    sm_clear(m, 0x7f);
    if (gg_step_run(step, M, 0, (gg_stream)s) != GG_SUCCESS) {
        fprintf(stderr, "gg_step_run: %s\n", gg_last_error(ctx));
        return 0;
    }
    cudaStreamSynchronize(s);
    void *got = sm_gradients(m, M, &bytes, &elem);
    const double rel = ref && got && bytes == ref_bytes ? sm_max_rel_diff(got, ref, bytes, elem, &bitwise) : 1e30;
    const int exact_kernels = M == c->max_tokens && (c->gated || c->precision == GG_PRECISION_FP32);
    const int pass = exact_kernels ? bitwise : rel <= 1e-3;
    printf("check %lld tokens%s, %d side streams, %d slots: step graph vs eager: %s, max rel diff %.3g: %s\n",
           (long long)M, M == c->max_tokens ? "" : " (padded)", sc->sides, sc->slots,
           bitwise ? "bitwise equal" : "not bitwise", rel, pass ? "ok" : "FAILED");
    free(got);
    return pass;
}

#ifdef GG_HAVE_TRACE
/* The kernels of one more step in `mode` (after a warm-up one), appended to the trace file. */
static int trace_one(FILE *f, const char *model, const char *mode, const step_config *sc, gg_step *step,
                     sm_model *m, int64_t tokens, cudaStream_t s) {
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1) gg_span_begin();
        const gg_status st =
            step ? gg_step_run(step, tokens, 0, (gg_stream)s) : sm_run_block_graphs(m, NULL, tokens, 0, s);
        if (st != GG_SUCCESS) return -1;
        cudaStreamSynchronize(s);
    }
    const double span = gg_span_end();
    static gg_span_kernel k[GG_SPAN_MAX_KERNELS];
    const int n = gg_span_kernels(k, GG_SPAN_MAX_KERNELS);
    for (int i = 0; i < n; ++i)
        fprintf(f, "%s,%s,%d,%d,%u,%.2f,%.2f,%s,%u,%u\n", model, mode, sc->sides, sc->slots, k[i].stream, k[i].start_us,
                k[i].duration_us, k[i].name, k[i].ctas, k[i].threads);
    printf("trace %s %s: %d kernels over %.1f us%s\n", model, mode, n, span,
           n == GG_SPAN_MAX_KERNELS ? " (the trace is full: later kernels are missing)" : "");
    return 0;
}
#endif

int main(int argc, char **argv) {
    sm_config c = {.layers = 8, .hidden = 2048, .ffn = 8192, .max_tokens = 8192, .precision = GG_PRECISION_FP16};
    const gg_step_config defaults = GG_STEP_CONFIG_INIT;
    double warm = 1.0;
    gg_config ctx_config = GG_CONFIG_INIT;
    int steps = 20, rounds = 3, sides = defaults.side_streams, slots = defaults.scratch_slots;
    const char *json = NULL, *sweep = NULL, *trace = NULL, *dot = NULL;
    int gpus = 0, single_gpu_options = 0; /* --overlap, --autotune or --warm given */
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--small")) c.hidden = 1024, c.ffn = 4096, c.max_tokens = 2048;
        else if (!strcmp(a, "--fused-residual")) c.fused_residual = 1;
        else if (!strcmp(a, "--fp16-copies")) c.fp16_copies = 1;
        else if (!strcmp(a, "--gated")) c.gated = 1, c.hidden = 768, c.ffn = 1536, c.precision = GG_PRECISION_BF16;
        else if (!strcmp(a, "--layers")) c.layers = atoi(v), ++i;
        else if (!strcmp(a, "--hidden")) c.hidden = atoll(v), ++i;
        else if (!strcmp(a, "--ffn")) c.ffn = atoll(v), ++i;
        else if (!strcmp(a, "--tokens")) c.max_tokens = atoll(v), ++i;
        else if (!strcmp(a, "--side-streams")) sides = atoi(v), ++i;
        else if (!strcmp(a, "--scratch-slots")) slots = atoi(v), ++i;
        else if (!strcmp(a, "--sweep")) sweep = v, ++i;
        else if (!strcmp(a, "--rounds")) rounds = atoi(v), ++i;
        else if (!strcmp(a, "--steps")) steps = atoi(v), ++i;
        else if (!strcmp(a, "--warm")) warm = atof(v), single_gpu_options = 1, ++i;
        else if (!strcmp(a, "--overlap") && (!strcmp(v, "auto") || !strcmp(v, "never")))
            ctx_config.overlap = !strcmp(v, "never") ? GG_OVERLAP_NEVER : GG_OVERLAP_AUTO, single_gpu_options = 1, ++i;
        else if (!strcmp(a, "--autotune") && (!strcmp(v, "on") || !strcmp(v, "off")))
            ctx_config.autotune = !strcmp(v, "on"), single_gpu_options = 1, ++i;
        else if (!strcmp(a, "--json")) json = v, ++i;
        else if (!strcmp(a, "--trace")) trace = v, ++i;
        else if (!strcmp(a, "--dot")) dot = v, ++i;
        else if (!strcmp(a, "--gpus")) gpus = atoi(v), ++i;
        else if (!strcmp(a, "--precision")) {
            c.precision = !strcmp(v, "fp32") ? GG_PRECISION_FP32 : !strcmp(v, "tf32") ? GG_PRECISION_TF32
                                                                                      : GG_PRECISION_FP16;
            ++i;
        } else {
            fprintf(stderr, "usage: see the top of examples/model_backward.c\n");
            return 2;
        }
    }
    step_config configs[MAX_CONFIGS];
    memset(configs, 0, sizeof configs);
    int n_configs = 1;
    configs[0].sides = sides;
    configs[0].slots = slots;
    if (sweep && (n_configs = parse_sweep(sweep, configs)) < 1) {
        fprintf(stderr, "--sweep %s: expected S:K[,S:K...]\n", sweep);
        return 2;
    }
    if (rounds < 1 || rounds > SM_MAX_ROUNDS || steps < 1) {
        fprintf(stderr, "--rounds must be in [1, %d] and --steps at least 1\n", SM_MAX_ROUNDS);
        return 2;
    }
    if (!(warm >= 0 && warm <= 600)) {
        fprintf(stderr, "--warm must be in [0, 600] seconds\n");
        return 2;
    }
    if (gpus) {
        if (sweep || trace || dot)
            fprintf(stderr, "--gpus: --sweep, --trace and --dot are ignored (one step configuration)\n");
        if (single_gpu_options)
            fprintf(stderr, "--gpus: --overlap, --autotune and --warm are ignored (each rank's context is the "
                            "default's)\n");
        return md_run(&c, gpus, steps, rounds, json);
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("model_backward: no GPU, skipped\n");
        return 77;
    }
    gg_ctx *ctx = NULL;
    CHECK(gg_ctx_create(&ctx_config, &ctx));
    sm_model *m = NULL;
    if (sm_create(ctx, &c, &m) != 0) return 1;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

    /* the references: eager per-layer calls at the largest bucket and padded */
    const int64_t checks[2] = {c.max_tokens, c.max_tokens / 2 + c.max_tokens / 8};
    void *ref[2] = {NULL, NULL};
    size_t ref_bytes[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        int elem = 0;
        sm_clear(m, 0x7f);
        CHECK(sm_run_eager(m, checks[k], 0, s));
        cudaStreamSynchronize(s);
        ref[k] = sm_gradients(m, checks[k], &ref_bytes[k], &elem);
    }
    /* every configuration's step (all alive at once, so the timing rounds can interleave), checked */
    int ok = 1;
    const int64_t buckets[2] = {c.max_tokens / 2, c.max_tokens};
    for (int i = 0; i < n_configs; ++i) {
        step_config *sc = &configs[i];
        gg_step_config cfg = GG_STEP_CONFIG_INIT;
        cfg.policy = GG_BUCKETS_LIST;
        cfg.bucket_tokens = buckets;
        cfg.n_buckets = 2;
        cfg.side_streams = sc->sides;
        cfg.scratch_slots = sc->slots;
        CHECK(gg_step_create(ctx, &cfg, &sc->step));
        CHECK(sm_add_to_step(m, sc->step));
        CHECK(gg_step_finalize(sc->step));
        sc->correct = check_against(ctx, m, &c, sc->step, sc, ref[0], ref_bytes[0], checks[0], s);
        if (i == 0) sc->correct &= check_against(ctx, m, &c, sc->step, sc, ref[1], ref_bytes[1], checks[1], s);
        ok &= sc->correct;
    }
    if (c.fp16_copies) { /* the eager calls without the copies (converting the fp32 tensors) agree with them */
        int elem = 0, bitwise = 0;
        size_t bytes = 0;
        sm_use_copies(m, 0);
        sm_clear(m, 0x7f);
        CHECK(sm_run_eager(m, checks[0], 0, s));
        cudaStreamSynchronize(s);
        void *converting = sm_gradients(m, checks[0], &bytes, &elem);
        sm_use_copies(m, 1);
        const double rel = converting && bytes == ref_bytes[0]
                               ? sm_max_rel_diff(converting, ref[0], bytes, elem, &bitwise) : 1e30;
        printf("check %lld tokens: eager with the fp16 copies vs converting: %s, max rel diff %.3g: %s\n",
               (long long)checks[0], bitwise ? "bitwise equal" : "not bitwise", rel, rel <= 1e-3 ? "ok" : "FAILED");
        ok &= rel <= 1e-3;
        free(converting);
    }
    free(ref[0]);
    free(ref[1]);

    /* rounds of every configuration, the per-block graphs and the eager calls in turn (the same clocks and
     * temperature for all), then the medians */
    double graphs_runs[SM_MAX_ROUNDS], eager_runs[SM_MAX_ROUNDS];
    CHECK(warm_up(configs[0].step, c.max_tokens, warm, s));
    for (int r = 0; r < rounds; ++r) {
        for (int i = 0; i < n_configs; ++i)
            configs[i].runs_ms[r] = time_steps(ctx, configs[i].step, m, MODE_STEP, c.max_tokens, steps, s);
        graphs_runs[r] = time_steps(ctx, NULL, m, MODE_BLOCK_GRAPHS, c.max_tokens, steps, s);
        eager_runs[r] = time_steps(ctx, NULL, m, MODE_EAGER, c.max_tokens, steps, s);
    }
    int best = 0;
    for (int i = 0; i < n_configs; ++i) {
        configs[i].median_ms = sm_median(configs[i].runs_ms, rounds);
        CHECK(gg_step_memory_info(configs[i].step, &configs[i].mem));
        const double t = configs[i].median_ms, fastest = configs[best].median_ms;
        if (t > 0 && (fastest <= 0 || t < fastest)) best = i;
    }
    const double step_ms = configs[best].median_ms;
    const double graphs_ms = sm_median(graphs_runs, rounds), eager_ms = sm_median(eager_runs, rounds);
    const double sol_us = sm_flop(m, c.max_tokens) / 989.4e12 * 1e6;
    char name[32];
    const char *kind = c.gated ? "gated_bf16" : c.fused_residual ? "residual_mlp_fused" : "residual_mlp";
    snprintf(name, sizeof name, "%s%s", kind, c.fp16_copies ? "_copies" : "");
    for (int i = 0; i < n_configs; ++i)
        printf("step graph, %d side streams, %d scratch slots: %.1f us (median of %d rounds of %d steps)%s\n",
               configs[i].sides, configs[i].slots, configs[i].median_ms * 1e3, rounds, steps,
               i == best ? ": fastest" : "");
    const gg_step_memory *mem = &configs[best].mem;
    printf("%d layers, D = %lld, F = %lld, %lld tokens, %s: step graph %.1f us (%.0f %% of SOL %.1f us; %d side "
           "streams, %d slots), per-block graphs %.1f us, eager %.1f us; scratch %zu MiB (%zu per slot), exec %zu "
           "MiB\n",
           c.layers, (long long)c.hidden, (long long)c.ffn, (long long)c.max_tokens,
           gg_precision_string(c.precision), step_ms * 1e3, sol_us / (step_ms * 1e3) * 100, sol_us,
           configs[best].sides, configs[best].slots, graphs_ms * 1e3, eager_ms * 1e3, mem->scratch_bytes >> 20,
           mem->slot_bytes >> 20, mem->exec_bytes >> 20);

    if (dot && gg_step_debug_dot(configs[best].step, mem->buckets - 1, dot, 0) != GG_SUCCESS)
        fprintf(stderr, "--dot: %s\n", gg_last_error(ctx));
    if (trace) {
#ifdef GG_HAVE_TRACE
        FILE *f = fopen(trace, "a");
        if (!f || gg_span_init() != 0) {
            fprintf(stderr, "--trace %s: cannot open it or start CUPTI; no trace\n", trace);
        } else {
            fseek(f, 0, SEEK_END);
            if (ftell(f) == 0)
                fprintf(f, "model,mode,side_streams,scratch_slots,stream,start_us,duration_us,kernel,ctas,threads\n");
            char model[128];
            snprintf(model, sizeof model, "%s_%lldx%lld_%lld", name, (long long)c.hidden, (long long)c.ffn,
                     (long long)c.max_tokens);
            gg_span_enable(1); /* after the timing: tracing delays every launch */
            if (trace_one(f, model, "step_graph", &configs[best], configs[best].step, m, c.max_tokens, s) != 0 ||
                trace_one(f, model, "block_graphs", &configs[best], NULL, m, c.max_tokens, s) != 0)
                fprintf(stderr, "--trace: a traced step failed: %s\n", gg_last_error(ctx));
            gg_span_shutdown();
        }
        if (f) fclose(f);
#else
        fprintf(stderr, "--trace %s: built without CUPTI (GG_BUILD_BENCH=OFF); no trace\n", trace);
#endif
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (f) {
            fprintf(f,
                    "{\"name\": \"%s\", \"layers\": %d, \"hidden\": %lld, \"ffn\": %lld, \"tokens\": %lld, "
                    "\"precision\": \"%s\", \"fused_residual\": %s, \"side_streams\": %d, \"scratch_slots\": %d, "
                    "\"graph_launches_per_step\": 1, \"sol_us\": %.2f, "
                    "\"step_us\": {\"gg_step_graph\": %.2f, \"gg_block_graphs\": %.2f, \"gg_eager\": %.2f}, "
                    "\"memory\": {\"scratch_bytes\": %zu, \"slot_bytes\": %zu, \"exec_bytes\": %zu, "
                    "\"own_bytes\": %zu, \"staging_bytes\": 0}, \"rounds\": %d, \"steps_per_round\": %d, "
                    "\"configs\": [",
                    name, c.layers, (long long)c.hidden, (long long)c.ffn, (long long)c.max_tokens,
                    gg_precision_string(c.precision), c.fused_residual ? "true" : "false", configs[best].sides,
                    configs[best].slots, sol_us, step_ms * 1e3,
                    graphs_ms * 1e3, eager_ms * 1e3, mem->scratch_bytes, mem->slot_bytes, mem->exec_bytes,
                    mem->own_bytes, rounds, steps);
            for (int i = 0; i < n_configs; ++i) {
                fprintf(f, "%s{\"side_streams\": %d, \"scratch_slots\": %d, \"step_us\": %.2f, \"runs_us\": [",
                        i ? ", " : "", configs[i].sides, configs[i].slots, configs[i].median_ms * 1e3);
                for (int r = 0; r < rounds; ++r) fprintf(f, "%s%.2f", r ? ", " : "", configs[i].runs_ms[r] * 1e3);
                fprintf(f, "], \"scratch_bytes\": %zu, \"own_bytes\": %zu, \"correct\": %s}",
                        configs[i].mem.scratch_bytes, configs[i].mem.own_bytes, configs[i].correct ? "true" : "false");
            }
            fprintf(f, "], \"block_graphs_runs_us\": [");
            for (int r = 0; r < rounds; ++r) fprintf(f, "%s%.2f", r ? ", " : "", graphs_runs[r] * 1e3);
            fprintf(f, "], \"eager_runs_us\": [");
            for (int r = 0; r < rounds; ++r) fprintf(f, "%s%.2f", r ? ", " : "", eager_runs[r] * 1e3);
            fprintf(f, "], \"correct\": %s}\n", ok ? "true" : "false");
            fclose(f);
        }
    }
    for (int i = 0; i < n_configs; ++i) gg_step_destroy(configs[i].step);
    sm_destroy(m);
    cudaStreamDestroy(s);
    gg_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
