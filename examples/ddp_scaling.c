/*
 * ddp_scaling.c - data-parallel scaling of one block's backward on the GPUs of this machine.
 *
 *   ddp_scaling [--block 2|3] [--tokens M] [--gpus N] [--steps S] [--bucket-mib B] [--precision fp16|tf32|fp32]
 *               [--no-overlap] [--comm-sms N] [--copy-engines 0|1] [--warm-l2] [--verbose] [--json FILE] [--trace FILE]
 *
 * Weak scaling: every rank runs the block's graph on its own shard of M tokens per step, with the parameter
 * gradients all-reduced (averaged) inside the graph. One process, one thread and one context per GPU; gradgraph
 * makes the communicators (gg_dist_init_threads: NCCL on --comm-sms CTAs; with --copy-engines 1 the weight
 * gradients, in gg_dist_alloc buffers, through the copy engines), and gg_dist_reduce times the same reduction
 * alone. Every timed call starts with a cold L2 (--warm-l2: not).
 * Printed and written as JSON: step time on 1 GPU (no communication; measured before and after the N-GPU phase, the
 * mean is used), step time on N GPUs, the same graph without communication on N GPUs (its steps alternate with
 * the synced graph's, so both see the same clocks), the all-reduce alone (captured in a CUDA graph like the synced
 * step's, so no launch gaps inflate it), the share of the all-reduce hidden behind the backward
 * (1 - (step_N - step_local) / allreduce), and the speedup N * step_1 / step_N. --trace writes the kernels of one
 * synced and one local step on every GPU (CUPTI: device, stream, start, duration, name) as CSV.
 * --gpus N: N of this machine's GPUs (default: all, at most 8); more than it has is refused, and a machine of one GPU
 * exits 77 (skipped): there is nothing to scale to.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "case_runner.h"
#include "gradgraph.h"
#ifdef GG_HAVE_TRACE
#include "cupti_span.h"
#endif

#define MAX_GPUS 8

typedef struct options {
    int block, gpus, steps, overlap, comm_sms, copy_engines, cold_l2, verbose;
    int64_t tokens;
    size_t bucket_bytes;
    gg_precision precision;
    const char *json, *trace;
} options;

typedef struct rank_state {
    int rank;
    const options *opt;
    gg_case c;
    gg_ctx *ctx; /* with its communicator (gg_dist_init_threads) */
    double step_us, local_us, allreduce_us; /* medians */
    int failed;
} rank_state;

static pthread_barrier_t barrier;

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The ranks' barrier that also agrees on failure: a rank that failed says so here, and every rank learns it, so
 * all stop together instead of leaving the others waiting at a later barrier or in a collective. Reset per phase. */
static int any_rank_failed;
static int all_ranks_ok(int failed) {
    if (failed) __atomic_store_n(&any_rank_failed, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&barrier);
    return !__atomic_load_n(&any_rank_failed, __ATOMIC_SEQ_CST);
}

/* Median device times (us) of `steps` calls of each of `count` runs, alternating run by run within each step (the
 * same clocks and temperature for all), every rank in lockstep (a barrier before each call). 0 on success. */
static int time_steps(int steps, int count, int (*const run[])(void *), void *const arg[], cudaStream_t stream,
                      int cold_l2, double median_us[]) {
    float *ms = malloc(sizeof(float) * (size_t)(steps * count));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    /* Cold L2 before every timed call, as in a training step (the forward pass and the optimizer ran in between) and
     * in the benchmark's protocol: otherwise a graph replayed back to back (the 1-GPU phase) finds part of its
     * inputs in L2, and one that follows another graph (the N-GPU phase) does not. */
    int device = 0, l2_bytes = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device);
    const size_t flush_bytes = cold_l2 ? 2 * (size_t)l2_bytes : 0;
    void *flush = NULL;
    if (flush_bytes && cudaMalloc(&flush, flush_bytes) != cudaSuccess) { /* never skip the barriers: warm L2 */
        fprintf(stderr, "ddp_scaling: no memory for the L2 flush: timing with a warm L2\n");
        flush = NULL;
        (void)cudaGetLastError();
    }
    /* Every rank calls the barrier equally often: a failed call is reported at the next one, where all stop. */
    int rc = !ms, ok = 1;
    for (int i = -3; i < steps && ok; ++i) { /* 3 warm-ups */
        for (int k = 0; k < count && ok; ++k) {
            if (flush) cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream);
            ok = all_ranks_ok(rc);
            if (!ok) break;
            cudaEventRecord(a, stream);
            rc = run[k](arg[k]);
            cudaEventRecord(b, stream);
            cudaEventSynchronize(b);
            if (i >= 0 && !rc) cudaEventElapsedTime(&ms[k * steps + i], a, b);
        }
    }
    if (ok) ok = all_ranks_ok(rc); /* the last call's verdict */
    rc = !ok;
    for (int k = 0; k < count && !rc; ++k) {
        qsort(ms + k * steps, (size_t)steps, sizeof *ms, cmp_float);
        median_us[k] = 1000.0 * ms[k * steps + steps / 2];
    }
    free(ms);
    cudaFree(flush);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return rc;
}

typedef struct graph_step {
    gg_case_run *run;
    gg_graph *graph;
    gg_precision precision;
} graph_step;

static int graph_step_run(void *p) {
    graph_step *g = p;
    return gg_case_graph_run(g->run, g->graph, g->precision) == GG_SUCCESS ? 0 : 1;
}

typedef struct allreduce_step {
    gg_case_run *run;
    gg_ctx *ctx;
    cudaStream_t stream;
} allreduce_step;

/* The parameter gradients reduced alone, exactly as the syncing graph reduces them (gg_dist_reduce: the same
 * pieces, the same engine), enqueued once into the CUDA graph that allreduce_graph_run replays. */
static int enqueue_allreduce(allreduce_step *a) {
    for (int o = 0; o < a->run->n_out; ++o) {
        const gg_tensor *t = &a->run->out[o];
        if (!t->param) continue;
        if (gg_dist_reduce(a->ctx, t->dev, (size_t)(t->rows * t->cols), t->elem == 2, (gg_stream)a->stream) !=
            GG_SUCCESS) {
            fprintf(stderr, "gg_dist_reduce: %s\n", gg_last_error(a->ctx));
            return 1;
        }
    }
    return 0;
}

typedef struct allreduce_graph {
    cudaGraphExec_t exec;
    cudaStream_t stream;
} allreduce_graph;

static int allreduce_graph_run(void *p) {
    const allreduce_graph *g = p;
    return cudaGraphLaunch(g->exec, g->stream) != cudaSuccess;
}

static int capture_allreduce(allreduce_step *a, cudaGraphExec_t *exec) {
    cudaGraph_t graph = NULL;
    if (cudaStreamBeginCapture(a->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return 1;
    const int rc = enqueue_allreduce(a);
    if (cudaStreamEndCapture(a->stream, &graph) != cudaSuccess || rc) return 1;
    const int failed = cudaGraphInstantiate(exec, graph, 0) != cudaSuccess;
    cudaGraphDestroy(graph);
    return failed;
}

static gg_graph *make_graph(gg_case_run *run, gg_ctx *ctx, const options *o, int sync) {
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = &run->c.tokens;
    gc.n_buckets = 1;
    gc.sync_gradients = sync;
    gg_graph *g = NULL;
    if (gg_case_graph_create(run, ctx, o->precision, &gc, &g) != GG_SUCCESS) return NULL;
    return g;
}

/* One step of g on every rank with CUPTI recording (process-wide: all GPUs); rank 0 appends the kernels to path. */
static void trace_step(int rank, const char *path, const char *label, graph_step *g, cudaStream_t stream) {
#ifdef GG_HAVE_TRACE
    pthread_barrier_wait(&barrier);
    if (rank == 0) {
        gg_span_enable(1);
        gg_span_begin();
    }
    pthread_barrier_wait(&barrier);
    graph_step_run(g);
    cudaStreamSynchronize(stream);
    pthread_barrier_wait(&barrier);
    if (rank == 0) {
        const double span = gg_span_end();
        static gg_span_kernel k[GG_SPAN_MAX_KERNELS];
        const int n = gg_span_kernels(k, GG_SPAN_MAX_KERNELS);
        gg_span_enable(0);
        FILE *f = fopen(path, "a");
        if (f) {
            for (int i = 0; i < n; ++i)
                fprintf(f, "%s,%u,%u,%.2f,%.2f,%s\n", label, k[i].device, k[i].stream, k[i].start_us, k[i].duration_us,
                        k[i].name);
            fclose(f);
        }
        fprintf(stderr, "  traced one %s step: %d kernels, span %.1f us\n", label, n, span);
    }
    pthread_barrier_wait(&barrier);
#else
    (void)rank, (void)path, (void)label, (void)g, (void)stream;
#endif
}

static void print_log(void *user_data, gg_log_level level, const char *message) {
    (void)level;
    fprintf(stderr, "  rank %d: %s\n", ((const rank_state *)user_data)->rank, message);
}

static void *rank_main(void *arg) {
    rank_state *s = arg;
    const options *o = s->opt;
    gg_ctx *ctx = s->ctx;
    cudaSetDevice(s->rank);
    (void)gg_dist_bind_thread(ctx); /* this thread near its GPU (the log says why when it leaves the binding) */
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    gg_case_run *run = NULL;
    graph_step synced = {NULL, NULL, o->precision}, local = synced;
    allreduce_graph ag = {NULL, stream};
    char err[256];
    if (gg_case_run_create(&s->c, (gg_stream)stream, &run, err, sizeof err) != 0) {
        fprintf(stderr, "rank %d: %s\n", s->rank, err);
        s->failed = 1;
    }
    /* The parameter gradients in gg_dist_alloc's buffers, where the copy engines reduce them (collective). */
    if (all_ranks_ok(s->failed) && gg_case_run_dist_grads(run, ctx) != 0) {
        fprintf(stderr, "rank %d: gg_dist_alloc: %s\n", s->rank, gg_last_error(ctx));
        s->failed = 1;
    }
    if (all_ranks_ok(s->failed)) { /* before making the syncing graph, which is collective */
        gg_case_prepare(run, 77 + (uint64_t)s->rank); /* each rank its own shard */
        synced = (graph_step){run, make_graph(run, ctx, o, 1), o->precision}; /* collective: every rank at once */
        local = (graph_step){run, make_graph(run, ctx, o, 0), o->precision};
        allreduce_step ar = {run, ctx, stream};
        if (!synced.graph || !local.graph) {
            fprintf(stderr, "rank %d: graph: %s\n", s->rank, gg_last_error(ctx));
            s->failed = 1;
        } else if (capture_allreduce(&ar, &ag.exec)) {
            fprintf(stderr, "rank %d: capturing the all-reduce failed\n", s->rank);
            s->failed = 1;
        }
    }
    if (all_ranks_ok(s->failed)) {
        int (*const steps[3])(void *) = {graph_step_run, graph_step_run, allreduce_graph_run};
        void *const args[3] = {&synced, &local, &ag};
        double us[3] = {-1, -1, -1};
        if (time_steps(o->steps, 3, steps, args, stream, o->cold_l2, us)) s->failed = 1; /* on every rank alike */
        s->step_us = us[0];
        s->local_us = us[1];
        s->allreduce_us = us[2];
        if (!s->failed && o->trace) trace_step(s->rank, o->trace, "synced", &synced, stream);
        if (!s->failed && o->trace) trace_step(s->rank, o->trace, "local", &local, stream);
    } else {
        s->failed = 1;
    }
    if (gg_dist_check(ctx) == GG_ERROR_NCCL) s->failed = 1;
    /* teardown in the documented order: the graphs that captured NCCL work here, then (main, after every rank) the
     * contexts, each destroying its communicator */
    if (ag.exec) cudaGraphExecDestroy(ag.exec);
    gg_graph_destroy(synced.graph);
    gg_graph_destroy(local.graph);
    gg_case_run_destroy(run);
    cudaStreamDestroy(stream);
    return NULL;
}

/* Step time of the graph without communication on GPU 0 alone. */
static double single_gpu_step(const gg_case *c, const options *o) {
    cudaSetDevice(0);
    gg_ctx *ctx = NULL;
    if (gg_ctx_create(NULL, &ctx) != GG_SUCCESS) return -1;
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    gg_case_run *run = NULL;
    char err[256];
    if (gg_case_run_create(c, (gg_stream)stream, &run, err, sizeof err) != 0) return -1;
    gg_case_prepare(run, 77);
    graph_step step = {run, make_graph(run, ctx, o, 0), o->precision};
    pthread_barrier_init(&barrier, NULL, 1);
    any_rank_failed = 0;
    int (*const run_one[1])(void *) = {graph_step_run};
    void *const arg_one[1] = {&step};
    double us = -1;
    if (step.graph && time_steps(o->steps, 1, run_one, arg_one, stream, o->cold_l2, &us)) us = -1;
    pthread_barrier_destroy(&barrier);
    gg_graph_destroy(step.graph);
    gg_case_run_destroy(run);
    cudaStreamDestroy(stream);
    gg_ctx_destroy(ctx);
    return us;
}

/* One context per GPU, and their communicators made by gradgraph (gg_dist_init_threads: NCCL on comm_sms CTAs, the
 * warm-up done). 0 on success; on failure nothing is left. */
static int make_contexts(const options *o, const gg_case *c, rank_state *states, gg_ctx **ctxs) {
    int rc = 0;
    for (int i = 0; i < o->gpus && !rc; ++i) {
        states[i] = (rank_state){.rank = i, .opt = o, .c = *c};
        gg_config cfg = GG_CONFIG_INIT;
        cfg.device = i;
        if (o->verbose) { /* e.g. each rank's autotune choices */
            cfg.log_level = GG_LOG_INFO;
            cfg.log_fn = print_log;
            cfg.log_user_data = &states[i];
        }
        rc = gg_ctx_create(&cfg, &ctxs[i]) != GG_SUCCESS;
        if (rc) fprintf(stderr, "gg_ctx_create (device %d): %s\n", i, gg_last_error(NULL));
        states[i].ctx = ctxs[i];
    }
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bucket_bytes = o->bucket_bytes;
    dc.overlap = o->overlap;
    dc.comm_sms = o->comm_sms;
    dc.copy_engines = o->copy_engines;
    if (!rc && gg_dist_init_threads(ctxs, o->gpus, &dc) != GG_SUCCESS) {
        for (int i = 0; i < o->gpus; ++i) /* the message is on the context it concerns */
            if (*gg_last_error(ctxs[i])) fprintf(stderr, "gg_dist_init_threads: %s\n", gg_last_error(ctxs[i]));
        rc = 1;
    }
    if (rc)
        for (int i = 0; i < o->gpus; ++i) gg_ctx_destroy(ctxs[i]);
    return rc;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){.block = 3, .steps = 50, .overlap = 1, .comm_sms = GG_DIST_COMM_SMS_DEFAULT,
                   .copy_engines = 0, .cold_l2 = 1,
                   .bucket_bytes = (size_t)25 << 20, .precision = GG_PRECISION_FP16};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-overlap")) { o->overlap = 0; continue; }
        if (!strcmp(a, "--warm-l2")) { o->cold_l2 = 0; continue; }
        if (!strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (i + 1 >= argc) return 1;
        const char *v = argv[++i];
        if (!strcmp(a, "--block")) o->block = atoi(v);
        else if (!strcmp(a, "--tokens")) o->tokens = atoll(v);
        else if (!strcmp(a, "--gpus")) o->gpus = atoi(v);
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--comm-sms")) o->comm_sms = atoi(v);
        else if (!strcmp(a, "--copy-engines")) o->copy_engines = atoi(v);
        else if (!strcmp(a, "--bucket-mib")) o->bucket_bytes = (size_t)(atof(v) * 1024 * 1024);
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--precision"))
            o->precision = !strcmp(v, "fp32")   ? GG_PRECISION_FP32
                           : !strcmp(v, "tf32") ? GG_PRECISION_TF32
                                                : GG_PRECISION_FP16;
        else return 1;
    }
    return (o->block != 2 && o->block != 3) || o->steps < 1 || o->gpus < 0;
}

int main(int argc, char **argv) {
    options o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: %s [--block 2|3] [--tokens M] [--gpus N] [--steps S] [--bucket-mib B] "
                        "[--precision fp16|tf32|fp32] [--no-overlap] [--comm-sms N] [--copy-engines 0|1] [--warm-l2] "
                        "[--verbose] [--json FILE] [--trace FILE]\n",
                argv[0]);
        return 2;
    }
    int available = 0;
    if (cudaGetDeviceCount(&available) != cudaSuccess || available < 1) {
        fprintf(stderr, "ddp_scaling: no CUDA device\n");
        return 77;
    }
    if (o.gpus > available || o.gpus > MAX_GPUS) { /* never fewer GPUs than asked for, silently */
        fprintf(stderr, "ddp_scaling: --gpus %d, but this machine has %d (and %d at most are supported)\n", o.gpus,
                available, MAX_GPUS);
        return 2;
    }
    if (!o.gpus) o.gpus = available < MAX_GPUS ? available : MAX_GPUS;
    if (o.gpus < 2) { /* one GPU has nothing to scale to: its "speedup" would be a number about nothing */
        fprintf(stderr, "ddp_scaling: needs 2 GPUs or more, this machine has %d\n", available);
        return 77;
    }
    /* the block's largest benchmark case unless --tokens says otherwise */
    gg_case cases[GG_CASES_MAX], c;
    char err[256];
    const int n = gg_cases_load(GG_CASES_FILE, cases, GG_CASES_MAX, err, sizeof err);
    if (n < 0) { fprintf(stderr, "%s\n", err); return 1; }
    c.tokens = 0;
    for (int i = 0; i < n; ++i)
        if (cases[i].block_id == o.block && cases[i].tokens > c.tokens) c = cases[i];
    if (o.tokens > 0) c.tokens = o.tokens;
    setenv("NCCL_NVLS_ENABLE", "0", 0);
#ifdef GG_HAVE_TRACE
    if (o.trace) {
        FILE *f = fopen(o.trace, "w");
        if (!f || gg_span_init() != 0) { fprintf(stderr, "--trace %s: cannot trace\n", o.trace); return 1; }
        fprintf(f, "step,device,stream,start_us,duration_us,kernel\n");
        fclose(f);
    }
#endif

    fprintf(stderr, "ddp_scaling: %s, M = %lld tokens per GPU, %s, buckets of %.1f MiB, overlap %s\n", c.block,
            (long long)c.tokens, gg_precision_string(o.precision), o.bucket_bytes / 1048576.0,
            o.overlap ? "on" : "off");
    const double step1_before = single_gpu_step(&c, &o);
    fprintf(stderr, "  1 GPU: %.1f us per step\n", step1_before);

    rank_state states[MAX_GPUS];
    gg_ctx *ctxs[MAX_GPUS] = {NULL};
    if (make_contexts(&o, &c, states, ctxs)) return 1;
    pthread_t threads[MAX_GPUS];
    pthread_barrier_init(&barrier, NULL, (unsigned)o.gpus);
    any_rank_failed = 0;
    for (int i = 0; i < o.gpus; ++i) pthread_create(&threads[i], NULL, rank_main, &states[i]);
    int failed = 0;
    double step = 0, local = 0, ar = 0;
    for (int i = 0; i < o.gpus; ++i) {
        pthread_join(threads[i], NULL);
        failed |= states[i].failed;
        if (states[i].step_us > step) step = states[i].step_us; /* the slowest rank sets the pace */
        if (states[i].local_us > local) local = states[i].local_us;
        if (states[i].allreduce_us > ar) ar = states[i].allreduce_us;
        fprintf(stderr, "  rank %d: step %.1f us, without comm %.1f us, all-reduce alone %.1f us\n", i,
                states[i].step_us, states[i].local_us, states[i].allreduce_us);
    }
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < o.gpus; ++i) gg_ctx_destroy(ctxs[i]); /* the graphs are gone: now the communicators */
    const double step1_after = single_gpu_step(&c, &o); /* again: clocks and temperature drift over a run */
    fprintf(stderr, "  1 GPU again: %.1f us per step\n", step1_after);
    const double step1 = 0.5 * (step1_before + step1_after);
    if (failed || step1_before <= 0 || step1_after <= 0) return 1;

    double hidden = ar > 0 ? 1.0 - (step - local) / ar : 1.0;
    hidden = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
    const double speedup = o.gpus * step1 / step;
    printf("%-40s %6s %5s %12s %12s %12s %12s %8s %8s\n", "block", "M", "gpus", "step_1gpu_us", "step_us", "local_us",
           "allreduce_us", "hidden", "speedup");
    printf("%-40s %6lld %5d %12.1f %12.1f %12.1f %12.1f %7.1f%% %8.3f\n", c.block, (long long)c.tokens, o.gpus, step1,
           step, local, ar, 100 * hidden, speedup);
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) { perror(o.json); return 1; }
        fprintf(f, "{\"block\": \"%s\", \"M\": %lld, \"gpus\": %d, \"precision\": \"%s\", \"bucket_bytes\": %zu, "
                   "\"overlap\": %d, \"comm_sms\": %d, \"copy_engines\": %d, \"cold_l2\": %d, \"steps\": %d, "
                   "\"step_us_1gpu\": %.2f, \"step_us_1gpu_before\": %.2f, "
                   "\"step_us_1gpu_after\": %.2f, \"step_us_ngpu\": %.2f, \"local_step_us_ngpu\": %.2f, "
                   "\"allreduce_us\": %.2f, \"allreduce_hidden_fraction\": %.4f, \"speedup\": %.4f, "
                   "\"efficiency\": %.4f}\n",
                c.block, (long long)c.tokens, o.gpus, gg_precision_string(o.precision), o.bucket_bytes, o.overlap,
                o.comm_sms, o.copy_engines, o.cold_l2, o.steps,
                step1, step1_before, step1_after, step, local, ar, hidden, speedup, speedup / o.gpus);
        fclose(f);
    }
    return 0;
}
