/*
 * test_dist.c - data-parallel gradients on several GPUs (label `multigpu`; SKIPPED with fewer than 2 GPUs).
 * One process, one thread and one context per GPU (gg_dist_init_threads). Each rank draws its own inputs.
 *  - the synced parameter gradients equal the sum (or mean) of the ranks' local gradients, on every rank, and two
 *    identical synced runs give the same bits;
 *  - overlap on and off give the same bits for the reduced gradients (dX within rounding: its GEMM leaves SMs to NCCL
 *    with overlap on only);
 *    (blocks 3, 4 and 1: FFN weights, SSM weight and bias, the tanh gate's scalar);
 *  - reduce-scatter leaves each rank the right shard of the sum, the same bits in two identical runs;
 *  - large gradients reduced through the copy engines (copy_engines = 1) and through NCCL's all-reduce: the same
 *    bits (2 ranks); bf16 means through them within the bound; gg_dist_reduce of an odd count at an unaligned
 *    offset in a gg_dist_alloc buffer, copy engines on and off: the exact sums, the rest untouched. The parameter
 *    gradients live in gg_dist_alloc buffers (where copy engines reduce them; cudaMalloc's with copy engines off)
 *    except in the overlap test;
 *  - a syncing graph leaves every rank on rank 0's GEMM algorithms (rank 0 tuned, the others not);
 *  - teardown in the documented order never hangs (a watchdog ends the whole run after 600 s), and detaching a
 *    communicator while a graph holds NCCL work is refused.
 */
#include <math.h>
#include <pthread.h>

#include "gpu_test.h"

#define MAX_RANKS 8

static int world;

#define REQUIRE_GPUS()                                                                                             \
    do {                                                                                                           \
        if (world < 2) skip();                                                                                     \
    } while (0)

typedef struct rank_job {
    int rank;
    gg_ctx *ctx;
    gg_case c;
    gg_precision precision;
    uint64_t seed;
    gg_case_run *run;
    void *local;  /* host copy of the outputs, local gradients */
    void *synced; /* host copy of the outputs after a synced graph */
    void *again;  /* a second synced run */
    size_t bytes;
    int dist_grads; /* parameter gradients in gg_dist_alloc buffers (copy engines reduce those in place) */
    int accumulate; /* the synced runs add to the local gradients (accumulate is per call): 2x the reduction */
    int beyond_max; /* the graph's one bucket is M/2 and eager_beyond_max runs M on the eager path */
    gg_status status;
    char error[512];
} rank_job;

/* Options of the next run_ranks (reset before every test): the parameter gradients in gg_dist_alloc buffers (the
 * default) or cudaMalloc's; synced runs that accumulate onto the local gradients instead of overwriting; M past the
 * graph's largest bucket (eager_beyond_max). */
static int use_dist_grads = 1, use_accumulate = 0, use_beyond_max = 0;

static int reset_options(void **state) {
    (void)state;
    use_dist_grads = 1, use_accumulate = 0, use_beyond_max = 0;
    return 0;
}

static void *rank_main(void *arg) {
    rank_job *j = arg;
    cudaSetDevice(j->rank);
    char err[256];
    if (gg_case_run_create(&j->c, NULL, &j->run, err, sizeof err) != 0) {
        snprintf(j->error, sizeof j->error, "%s", err);
        j->status = GG_ERROR_CUDA;
        return NULL;
    }
    if (j->dist_grads) { /* collective: every rank's thread at once */
        j->status = (gg_status)gg_case_run_dist_grads(j->run, j->ctx);
        if (j->status != GG_SUCCESS) {
            snprintf(j->error, sizeof j->error, "gg_dist_alloc: %s", gg_last_error(j->ctx));
            gg_case_run_destroy(j->run);
            return NULL;
        }
    }
    gg_case_prepare(j->run, j->seed);
    /* local gradients, eagerly */
    j->status = gg_case_execute(j->run, j->ctx, j->precision);
    if (j->status == GG_SUCCESS) j->local = gg_case_outputs_to_host(j->run, &j->bytes);
    /* synced, twice, through one graph */
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST;
    const int64_t half = j->c.tokens / 2;
    gc.bucket_tokens = j->beyond_max ? &half : &j->c.tokens;
    gc.n_buckets = 1;
    gc.eager_beyond_max = j->beyond_max;
    gg_graph *g = NULL;
    if (j->status == GG_SUCCESS) j->status = gg_case_graph_create(j->run, j->ctx, j->precision, &gc, &g);
    for (int k = 0; k < 2 && j->status == GG_SUCCESS; ++k) {
        gg_case_poison(j->run);
        if (j->accumulate) { /* the parameter gradients start from the local ones: each rank adds its own again */
            j->run->accumulate = 1;
            if (gg_case_params_to_device(j->run, j->local) != cudaSuccess) {
                j->status = GG_ERROR_CUDA;
                snprintf(j->error, sizeof j->error, "restoring the local gradients failed");
                break;
            }
        }
        j->status = gg_case_graph_run(j->run, g, j->precision);
        if (j->status == GG_SUCCESS) *(k == 0 ? &j->synced : &j->again) = gg_case_outputs_to_host(j->run, &j->bytes);
    }
    if (j->status != GG_SUCCESS && !j->error[0]) snprintf(j->error, sizeof j->error, "%s", gg_last_error(j->ctx));
    /* detaching while this graph holds NCCL work is refused (past the bucket the graph captured none) */
    if (j->status == GG_SUCCESS && !j->beyond_max && gg_dist_detach(j->ctx) != GG_ERROR_INVALID_ARGUMENT) {
        snprintf(j->error, sizeof j->error, "gg_dist_detach did not refuse a live NCCL graph");
        j->status = GG_ERROR_INTERNAL;
    }
    gg_graph_destroy(g);
    gg_case_run_destroy(j->run);
    return NULL;
}

/* What each rank's context logged (INFO and up) during the last run_ranks. */
static char rank_log[MAX_RANKS][1 << 16];

static void log_to_rank(void *user_data, gg_log_level level, const char *message) {
    (void)level;
    char *log = user_data;
    const size_t used = strlen(log);
    snprintf(log + used, sizeof rank_log[0] - used, "%s\n", message);
}

/* Makes one context per GPU with communicators (rank r's config changed by tweak, if given), runs rank_main on
 * every rank, checks statuses. */
/* One context per GPU logging into rank_log (rank r's config changed by tweak, if given), with communicators. */
static void make_contexts(gg_ctx **ctxs, const gg_dist_config *dc, void (*tweak)(int rank, gg_config *cfg)) {
    for (int r = 0; r < world; ++r) {
        gg_config cfg = GG_CONFIG_INIT;
        cfg.device = r;
        rank_log[r][0] = 0;
        cfg.log_fn = log_to_rank;
        cfg.log_user_data = rank_log[r];
        cfg.log_level = GG_LOG_INFO;
        if (tweak) tweak(r, &cfg);
        if (gg_ctx_create(&cfg, &ctxs[r]) != GG_SUCCESS) fail_msg("gg_ctx_create: %s", gg_last_error(NULL));
    }
    GG_OK(ctxs[0], gg_dist_init_threads(ctxs, world, dc));
}

static void run_ranks_with(rank_job *jobs, const gg_case *c, gg_precision p, const gg_dist_config *dc,
                           void (*tweak)(int rank, gg_config *cfg), int same_inputs) {
    gg_ctx *ctxs[MAX_RANKS];
    make_contexts(ctxs, dc, tweak);
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < world; ++r) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r] = (rank_job){.rank = r, .ctx = ctxs[r], .c = *c, .precision = p,
                             .seed = 1000 + (same_inputs ? 0 : (uint64_t)r), .dist_grads = use_dist_grads,
                             .accumulate = use_accumulate, .beyond_max = use_beyond_max};
        pthread_create(&threads[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < world; ++r) pthread_join(threads[r], NULL);
    int ranks_ok = 1; /* a failed rank's own message first: it also explains an aborted communicator */
    for (int r = 0; r < world; ++r) ranks_ok &= gg_dist_rank(ctxs[r]) == r && gg_dist_size(ctxs[r]) == world;
    for (int r = 0; r < world; ++r) gg_ctx_destroy(ctxs[r]); /* graphs are gone: the communicator goes after them */
    for (int r = 0; r < world; ++r)
        if (jobs[r].status != GG_SUCCESS) fail_msg("rank %d: %s", r, jobs[r].error);
    if (!ranks_ok) fail_msg("a context lost its communicator or rank although every rank succeeded");
}

static void run_ranks(rank_job *jobs, const gg_case *c, gg_precision p, const gg_dist_config *dc) {
    run_ranks_with(jobs, c, p, dc, NULL, 0);
}

/* Every parameter gradient of every rank against op(local gradients of all ranks) (twice that after accumulating
 * runs, which start from the local gradients); elements [lo, hi) of each (the whole tensor, or a rank's shard). */
static void check_reduced(rank_job *jobs, int average, int shard_only) {
    const double factor = jobs[0].accumulate ? 2 : 1; /* accumulating runs started from the local gradients */
    gg_case_run layout = {.c = jobs[0].c}; /* the outputs' descriptions only: nothing allocated */
    gg_case_describe(&layout);
    const gg_case_run *probe = &layout;
    size_t at = 0;
    for (int o = 0; o < probe->n_out; ++o) {
        const gg_tensor *t = &probe->out[o];
        const size_t n = gg_case_tensor_elems(t), bytes = n * t->elem;
        if (t->param) {
            for (int r = 0; r < world; ++r) {
                const size_t lo = shard_only ? (size_t)r * n / world : 0;
                const size_t hi = shard_only ? (size_t)(r + 1) * n / world : n;
                size_t bad = 0;
                double bad_got = 0, bad_want = 0, bad_tol = 0;
                for (size_t j = lo; j < hi; ++j) {
                    /* The synced graph's GEMMs may run other algorithms than the eager calls that made the local
                     * gradients (its plans leave SMs to NCCL, and every rank runs rank 0's choice), so each term
                     * may differ by its own rounding: the tolerance scales with the terms, not with their sum,
                     * which can cancel. */
                    double sum = 0, magnitude = 0;
                    for (int q = 0; q < world; ++q) {
                        const double x = host_value(t, (char *)jobs[q].local + at, j);
                        sum += x;
                        magnitude += fabs(x);
                    }
                    if (average) sum /= world, magnitude /= world;
                    sum *= factor, magnitude *= factor;
                    const double got = host_value(t, (char *)jobs[r].synced + at, j);
                    /* bf16: each term may be 1 ulp (2^-7 relative) off the eager one, and NCCL rounds twice more
                     * (for the mean it scales each term, then sums): 2^-7 + 2 * 2^-8 = 2^-6 of the magnitude. */
                    const double tol = t->elem == GG_ELEM_F32 ? 1e-5 * magnitude + 1e-5 : 0x1p-6 * magnitude + 1e-3;
                    if (!(fabs(got - sum) <= tol) && bad++ == 0) bad_got = got, bad_want = sum, bad_tol = tol;
                }
                if (bad > 0) /* every element: a piece boundary reduced wrongly must fail */
                    fail_msg("rank %d %s: %zu of %zu elements differ from the %s of the ranks' gradients (the first: "
                             "%.8g against %.8g, tolerance %.3g)",
                             r, t->name, bad, hi - lo, average ? "mean" : "sum", bad_got, bad_want, bad_tol);
                if (!shard_only && memcmp((char *)jobs[r].synced + at, (char *)jobs[0].synced + at, bytes) != 0)
                    fail_msg("%s differs between rank 0 and rank %d", t->name, r);
                const size_t first = at + lo * t->elem, span = (hi - lo) * t->elem; /* the reduced part */
                if (memcmp((char *)jobs[r].synced + first, (char *)jobs[r].again + first, span) != 0)
                    fail_msg("rank %d %s: two identical synced runs differ", r, t->name);
            }
        }
        at += bytes;
    }
}

static void free_jobs(rank_job *jobs) {
    for (int r = 0; r < world; ++r) {
        free(jobs[r].local);
        free(jobs[r].synced);
        free(jobs[r].again);
    }
}

static gg_case case_of(int block_id, int index) {
    gg_case cases[GG_CASES_MAX];
    const int n = load_all_cases(cases);
    for (int i = 0; i < n; ++i)
        if (cases[i].block_id == block_id && cases[i].index == index) return cases[i];
    fail_msg("no such case");
    return cases[0];
}

static void synced_equals_sum_of_local(void **state) {
    (void)state;
    REQUIRE_GPUS();
    rank_job jobs[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    dc.bucket_bytes = 4 << 20; /* several pieces per weight gradient */
    const gg_case c3 = case_of(3, 14); /* M = 1024 */
    run_ranks(jobs, &c3, GG_PRECISION_FP32, &dc);
    check_reduced(jobs, 0, 0);
    free_jobs(jobs);
    dc.op = GG_REDUCE_AVERAGE;
    const gg_case c4 = case_of(4, 9); /* M = 2984, silu, bf16 */
    run_ranks(jobs, &c4, GG_PRECISION_BF16, &dc);
    check_reduced(jobs, 1, 0);
    free_jobs(jobs);
    const gg_case c1 = case_of(1, 10); /* M = 997: grad_gate, one bf16 number reduced after the backward */
    run_ranks(jobs, &c1, GG_PRECISION_BF16, &dc);
    check_reduced(jobs, 1, 0);
    free_jobs(jobs);
    /* Block 4 at M = 128: with the reductions after the backward its plan is the one-launch kernel (both gradients
     * final when it ends); with overlap, the cuBLASLt route that leaves comm_sms SMs free */
    const gg_case c4small = case_of(4, 0);
    for (int overlap = 0; overlap <= 1; ++overlap) {
        dc.overlap = overlap;
        run_ranks(jobs, &c4small, GG_PRECISION_BF16, &dc);
        check_reduced(jobs, 1, 0);
        free_jobs(jobs);
    }
}

/* Every rank's activation gradients (dX: not reduced) in got[r] against want[r], within rounding: another GEMM
 * algorithm adds in another order, which moves an element by rounding of the terms' size, not of its own (a
 * cancelling element of 0.0037 in a tensor of RMS ~0.8 moved by 1.2e-5 on one machine, de07aac), so the bound follows
 * the tensor's RMS (the spec's own atol for block 2 is 0.066). Parameter gradients are skipped. */
static void assert_activation_grads_close(const gg_case *c, void *const *got, void *const *want, const char *what) {
    gg_case_run layout = {.c = *c};
    gg_case_describe(&layout);
    for (int r = 0; r < world; ++r) {
        size_t at = 0;
        for (int o = 0; o < layout.n_out; ++o) {
            const gg_tensor *t = &layout.out[o];
            const size_t n = gg_case_tensor_elems(t);
            double rms = 0;
            for (size_t j = 0; j < n && !t->param; ++j) {
                const double b = host_value(t, (char *)want[r] + at, j);
                rms += b * b;
            }
            rms = sqrt(rms / (double)n);
            for (size_t j = 0; j < n && !t->param; ++j) {
                const double a = host_value(t, (char *)got[r] + at, j), b = host_value(t, (char *)want[r] + at, j);
                if (!(fabs(a - b) <= 1e-4 * (fabs(b) + rms)))
                    fail_msg("rank %d %s[%zu]: %g %s, %g (RMS %g)", r, t->name, j, a, what, b, rms);
            }
            at += n * t->elem;
        }
    }
}

/* The parameter gradients of two runs on the same inputs: the same bits, every rank. */
static void assert_same_reduced_bits(rank_job *a, rank_job *b, const char *what) {
    gg_case_run layout = {.c = a[0].c};
    gg_case_describe(&layout);
    for (int r = 0; r < world; ++r) {
        size_t at = 0;
        for (int o = 0; o < layout.n_out; ++o) {
            const gg_tensor *t = &layout.out[o];
            const size_t bytes = gg_case_tensor_bytes(t);
            if (t->param && memcmp((char *)a[r].synced + at, (char *)b[r].synced + at, bytes) != 0)
                fail_msg("rank %d %s: %s give different bits", r, t->name, what);
            at += bytes;
        }
    }
}

static void overlap_on_and_off_agree(void **state) {
    (void)state;
    REQUIRE_GPUS();
    rank_job on[MAX_RANKS], off[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    /* M = 1024; M = 256, where fp16 mode's G is a TF32 GEMM (the few-token route) */
    const gg_case cases[] = {case_of(2, 10), case_of(2, 5)};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        const gg_case c = cases[k];
        dc.overlap = 1;
        use_dist_grads = 0; /* cudaMalloc'd gradients too (the harness's own buffers) */
        run_ranks(on, &c, GG_PRECISION_FP16, &dc);
        dc.overlap = 0;
        run_ranks(off, &c, GG_PRECISION_FP16, &dc);
        use_dist_grads = 1;
        /* The reduced parameter gradients: the same bits. dX: its GEMM leaves comm_sms SMs to NCCL with overlap on
         * only, so it may run another algorithm: within rounding. */
        void *got[MAX_RANKS], *want[MAX_RANKS];
        for (int r = 0; r < world; ++r) {
            assert_int_equal(on[r].bytes, off[r].bytes);
            got[r] = on[r].synced, want[r] = off[r].synced;
        }
        assert_same_reduced_bits(on, off, "overlap on and off");
        assert_activation_grads_close(&c, got, want, "with overlap on, with it off");
        check_reduced(on, 1, 0);
        free_jobs(on);
        free_jobs(off);
    }
}

static void reduce_scatter_gives_each_rank_its_shard(void **state) {
    (void)state;
    REQUIRE_GPUS();
    rank_job jobs[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.sync = GG_SYNC_REDUCE_SCATTER;
    dc.op = GG_REDUCE_SUM;
    const gg_case c = case_of(3, 12); /* M = 256 */
    if (c.dim0 % world || c.dim1 % world) skip(); /* shards need gradients divisible by the rank count */
    run_ranks(jobs, &c, GG_PRECISION_TF32, &dc);
    check_reduced(jobs, 0, 1);
    free_jobs(jobs);
}

static void log_debug(int rank, gg_config *cfg) {
    (void)rank;
    cfg->log_level = GG_LOG_DEBUG; /* says which gradients went through the copy engines */
}

/* Large gradients in gg_dist_alloc buffers, all-reduced through the copy engines (all-to-all, adding kernel,
 * all-gather, in place) and through NCCL's all-reduce: with two ranks both add the same two numbers once, so the
 * bits must agree; the log must say which path ran. Block 3's dW (64 MiB) in 4 MiB pieces: 16 pieces each. */
static void copy_engines_and_all_reduce_agree(void **state) {
    (void)state;
    REQUIRE_GPUS();
    if (world != 2) skip(); /* with more ranks the two paths add in different orders */
    rank_job ce[MAX_RANKS], sm[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    dc.bucket_bytes = 4 << 20;
    const gg_case c = case_of(3, 14); /* M = 1024 */
    dc.copy_engines = 1;
    run_ranks_with(ce, &c, GG_PRECISION_FP32, &dc, log_debug, 0);
    for (int r = 0; r < world; ++r) {
        if (!strstr(rank_log[r], "copy engines on"))
            fail_msg("rank %d did not log copy engines on:\n%s", r, rank_log[r]);
        int through = 0; /* dW1 and dW2 (biases: NCCL's all-reduce) */
        for (const char *at = rank_log[r]; (at = strstr(at, "in place through the copy engines")) != NULL; ++at)
            ++through;
        if (through < 2) fail_msg("rank %d: %d gradients went through the copy engines, want dW1 and dW2", r, through);
    }
    dc.copy_engines = 0;
    run_ranks(sm, &c, GG_PRECISION_FP32, &dc);
    for (int r = 0; r < world; ++r)
        if (!strstr(rank_log[r], "copy engines off")) fail_msg("rank %d did not log copy engines off", r);
    check_reduced(ce, 0, 0);
    assert_same_reduced_bits(ce, sm, "copy engines and NCCL's all-reduce");
    free_jobs(ce);
    free_jobs(sm);
    /* bf16 and the mean: block 4's dW (2.25 MiB) through the copy engines, its db through NCCL */
    dc.copy_engines = 1;
    dc.op = GG_REDUCE_AVERAGE;
    const gg_case c4 = case_of(4, 9); /* M = 2984, silu */
    run_ranks_with(ce, &c4, GG_PRECISION_BF16, &dc, log_debug, 0);
    for (int r = 0; r < world; ++r)
        if (!strstr(rank_log[r], "in place through the copy engines")) fail_msg("rank %d: dW did not use them", r);
    check_reduced(ce, 1, 0);
    free_jobs(ce);
}

/* Every rank's log has `what` (after a run with log_debug). */
static void assert_logged(const char *what) {
    for (int r = 0; r < world; ++r)
        if (!strstr(rank_log[r], what)) fail_msg("rank %d did not log \"%s\":\n%s", r, what, rank_log[r]);
}

/* One synced run of case c on every rank: the reduced gradients checked (the mean when dc says so), the activation
 * gradients against the local ones, and every rank's log must have `logged`. */
static void check_split_run(const gg_case *c, gg_precision p, const gg_dist_config *dc, const char *logged) {
    rank_job jobs[MAX_RANKS];
    run_ranks_with(jobs, c, p, dc, log_debug, 0);
    assert_logged(logged);
    check_reduced(jobs, dc->op == GG_REDUCE_AVERAGE, 0);
    void *got[MAX_RANKS], *want[MAX_RANKS];
    for (int r = 0; r < world; ++r) got[r] = jobs[r].synced, want[r] = jobs[r].local;
    assert_activation_grads_close(c, got, want, "synced (dX in halves), locally");
    free_jobs(jobs);
}

/* Two ranks, copy engines, half of each gradient within one piece: the FFNs' split reduction (each rank computes the
 * peer's half of dW first, then its own with the peer's partial added in the GEMM epilogue). The sums and means
 * must match the ranks' local gradients, every rank must hold the same bits, dX (in halves) must match the local
 * one, and the log must say it ran. With the gradients in cudaMalloc's buffers, and in accumulating runs (onto the
 * local gradients: adding must not turn into overwriting), the same plan computes the halves in place and the
 * gradients are reduced as usual. */
static void two_rank_split_reduction(void **state) {
    (void)state;
    REQUIRE_GPUS();
    if (world != 2) skip();
    static const char both[] = "dW2 through, dW1 through the two-rank split reduction";
    static const char neither[] = "dW2 not through, dW1 not through the two-rank split reduction";
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.copy_engines = 1;
    dc.bucket_bytes = 32 << 20; /* block 3's dW are 64 MiB: halves of one piece */
    dc.op = GG_REDUCE_SUM;
    const gg_case c3 = case_of(3, 14), c2 = case_of(2, 5); /* M = 1024, M = 256 */
    check_split_run(&c3, GG_PRECISION_FP32, &dc, both);
    dc.op = GG_REDUCE_AVERAGE;
    check_split_run(&c2, GG_PRECISION_FP16, &dc, both);
    use_dist_grads = 0;
    check_split_run(&c2, GG_PRECISION_FP16, &dc, neither);
    use_dist_grads = 1;
    use_accumulate = 1;
    check_split_run(&c2, GG_PRECISION_FP16, &dc, neither);
    use_accumulate = 0;
    use_beyond_max = 1; /* the eager path of a syncing graph splits too (its own plan) */
    check_split_run(&c2, GG_PRECISION_FP16, &dc, both);
}

/* M past a syncing graph's largest bucket with eager_beyond_max: the eager path must still reduce the gradients
 * (overlap on: as they finish; off: after the backward) and join the reductions before the call returns. */
static void eager_beyond_max_still_syncs(void **state) {
    (void)state;
    REQUIRE_GPUS();
    rank_job jobs[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    const gg_case c3 = case_of(3, 14); /* M = 1024, the graph's bucket 512 */
    use_beyond_max = 1;
    for (int overlap = 1; overlap >= 0; --overlap) {
        dc.overlap = overlap;
        run_ranks(jobs, &c3, GG_PRECISION_FP32, &dc);
        check_reduced(jobs, 0, 0);
        free_jobs(jobs);
    }
}

/* gg_dist_reduce on a buffer the library did not make gradients in: an odd count (a one-element tail for NCCL's
 * all-reduce) starting 3 floats into a gg_dist_alloc buffer (not 16-byte aligned: the adding kernel's scalar form),
 * in 256 KiB pieces. */
typedef struct reduce_job {
    int rank;
    gg_ctx *ctx;
    float *result; /* host copy of the whole buffer afterwards */
    gg_status status;
    char error[512];
} reduce_job;

enum { REDUCE_OFFSET = 3, REDUCE_COUNT = 300001 };

static float reduce_input(int rank, size_t i) {
    return (float)((i * 7919u + 13u * (unsigned)rank) % 2003u) / 256.0f - 3.0f;
}

static void *reduce_main(void *arg) {
    reduce_job *j = arg;
    cudaSetDevice(j->rank);
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const size_t n = REDUCE_OFFSET + REDUCE_COUNT;
    float *buf = NULL;
    j->result = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) j->result[i] = reduce_input(j->rank, i);
    j->status = gg_dist_alloc(j->ctx, n * sizeof(float), (void **)&buf); /* collective */
    if (j->status == GG_SUCCESS && cudaMemcpy(buf, j->result, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
        j->status = GG_ERROR_CUDA;
    if (j->status == GG_SUCCESS)
        j->status = gg_dist_reduce(j->ctx, buf + REDUCE_OFFSET, REDUCE_COUNT, 0, (gg_stream)stream);
    const size_t bytes = n * sizeof(float);
    if (j->status == GG_SUCCESS && (cudaStreamSynchronize(stream) != cudaSuccess ||
                                    cudaMemcpy(j->result, buf, bytes, cudaMemcpyDeviceToHost) != cudaSuccess))
        j->status = GG_ERROR_CUDA;
    if (j->status != GG_SUCCESS) snprintf(j->error, sizeof j->error, "%s", gg_last_error(j->ctx));
    const gg_status freed = gg_dist_free(j->ctx, buf); /* collective too */
    if (j->status == GG_SUCCESS && freed != GG_SUCCESS) {
        j->status = freed;
        snprintf(j->error, sizeof j->error, "gg_dist_free: %s", gg_last_error(j->ctx));
    }
    cudaStreamDestroy(stream);
    return NULL;
}

static void reduce_any_buffer_at_an_offset(void **state) {
    (void)state;
    REQUIRE_GPUS();
    if (world != 2) skip(); /* with more ranks NCCL's ring adds in another order than the host */
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    dc.bucket_bytes = 256 << 10;
    for (int ce = 1; ce >= 0; --ce) {
        dc.copy_engines = ce;
        gg_ctx *ctxs[MAX_RANKS];
        make_contexts(ctxs, &dc, log_debug);
        reduce_job jobs[MAX_RANKS];
        pthread_t threads[MAX_RANKS];
        for (int r = 0; r < world; ++r) {
            jobs[r] = (reduce_job){.rank = r, .ctx = ctxs[r]};
            pthread_create(&threads[r], NULL, reduce_main, &jobs[r]);
        }
        for (int r = 0; r < world; ++r) pthread_join(threads[r], NULL);
        for (int r = 0; r < world; ++r) gg_ctx_destroy(ctxs[r]);
        for (int r = 0; r < world; ++r) {
            if (jobs[r].status != GG_SUCCESS) fail_msg("copy engines %d, rank %d: %s", ce, r, jobs[r].error);
            if (ce && !strstr(rank_log[r], "in place through the copy engines"))
                fail_msg("rank %d: the reduction did not go through the copy engines", r);
            for (size_t i = 0; i < REDUCE_OFFSET + REDUCE_COUNT; ++i) {
                float want = reduce_input(r, i); /* before the offset: untouched */
                if (i >= REDUCE_OFFSET) {
                    want = 0.0f;
                    for (int q = 0; q < world; ++q) want += reduce_input(q, i); /* 2 ranks: one exact rounding */
                }
                if (memcmp(&want, &jobs[r].result[i], sizeof want) != 0)
                    fail_msg("copy engines %d, rank %d, element %zu: %.9g, want %.9g", ce, r, i,
                             (double)jobs[r].result[i], (double)want);
            }
            free(jobs[r].result);
        }
    }
}

/* Rank 0 times its GEMM candidates afresh (no cache), the others take the heuristic's first choice, so their
 * algorithms differ wherever tuning found a faster one (1 of the 4 GEMMs in the runs so far). Making the syncing
 * graph must leave every rank on rank 0's: with the same inputs on every rank, the activation gradient (local, made
 * by the dX GEMM) must then be the same bits on every rank, and each difference a rank reports must be adopted. */
static void tune_on_rank0_only(int rank, gg_config *cfg) {
    cfg->autotune = rank == 0;
    cfg->tune_cache_path = "";
}

static void ranks_adopt_rank0_gemm_algorithms(void **state) {
    (void)state;
    REQUIRE_GPUS();
    rank_job jobs[MAX_RANKS];
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.op = GG_REDUCE_SUM;
    const gg_case c = case_of(3, 13); /* M = 4096 */
    run_ranks_with(jobs, &c, GG_PRECISION_FP16, &dc, tune_on_rank0_only, 1);
    check_reduced(jobs, 0, 0);
    gg_case_run layout = {.c = jobs[0].c};
    gg_case_describe(&layout);
    size_t at = 0;
    for (int o = 0; o < layout.n_out; ++o) {
        const gg_tensor *t = &layout.out[o];
        const size_t bytes = gg_case_tensor_bytes(t);
        for (int r = 1; r < world && !t->param; ++r)
            if (memcmp((char *)jobs[r].synced + at, (char *)jobs[0].synced + at, bytes) != 0)
                fail_msg("%s differs between rank 0 and rank %d on the same inputs: their kernels differ", t->name, r);
        at += bytes;
    }
    free_jobs(jobs);
    assert_null(strstr(rank_log[0], "differed from rank 0's")); /* rank 0 keeps its own */
    for (int r = 1; r < world; ++r) {
        const char *said = strstr(rank_log[r], "GEMM algorithms differed from rank 0's");
        int differed = 0, adopted = 0;
        if (said) {
            const char *line = said;
            while (line > rank_log[r] && line[-1] != '\n') --line;
            const char *counts = strstr(line, ": rank ");
            assert_non_null(counts);
            assert_int_equal(sscanf(counts, ": rank %*d: %d of its GEMM algorithms differed from rank 0's; %d adopted",
                                    &differed, &adopted), 2);
        }
        assert_int_equal(adopted, differed);
        print_message("rank %d: %d of its GEMM algorithms differed from rank 0's, %d adopted%s\n", r, differed, adopted,
                      differed ? "" : " (tuning chose the heuristic's first everywhere this time: nothing to adopt)");
    }
}

int main(void) {
    world = gpu_count();
    if (world > MAX_RANKS) world = MAX_RANKS;
    start_watchdog(600, "test_dist: the run hung (600 s watchdog)\n"); /* teardowns included */
    apply_test_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(synced_equals_sum_of_local, reset_options),
        cmocka_unit_test_setup(overlap_on_and_off_agree, reset_options),
        cmocka_unit_test_setup(reduce_scatter_gives_each_rank_its_shard, reset_options),
        cmocka_unit_test_setup(copy_engines_and_all_reduce_agree, reset_options),
        cmocka_unit_test_setup(two_rank_split_reduction, reset_options),
        cmocka_unit_test_setup(eager_beyond_max_still_syncs, reset_options),
        cmocka_unit_test_setup(reduce_any_buffer_at_an_offset, reset_options),
        cmocka_unit_test_setup(ranks_adopt_rank0_gemm_algorithms, reset_options),
    };
    return cmocka_run_group_tests_name("dist_multigpu", tests, NULL, NULL);
}
