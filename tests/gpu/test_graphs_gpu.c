/*
 * test_graphs_gpu.c - per-bucket CUDA graphs (label `gpu`; SKIPPED without a GPU):
 *  - graph replay is bitwise equal to the eager path, every block, all 64 cases, every precision mode;
 *  - rebinding: another pointer set writes the new outputs and leaves the old ones untouched; going back costs no
 *    new executable graph;
 *  - padding: a call whose M is not a bucket equals the exact-shape eager result within the case's tolerance;
 *  - accumulation: 3 accumulating replays equal 3x one overwriting replay within tolerance;
 *  - 1000 replays stay correct and identical;
 *  - device-side bucket selection gives the eager result for several M, and runs nothing for a bad M;
 *  - destroying a context with live graphs returns device memory to where it started;
 *  - an error the application left pending is refused as not the run's, and a busy stream's query is no error;
 *  - the default streams and a stream the application is capturing pass the stream's device check.
 */
#include <math.h>
#include <time.h>

#include "gpu_test.h"

static gg_case cases[GG_CASES_MAX];

static gg_graph_config list_config(const int64_t *tokens, int n) {
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = tokens;
    gc.n_buckets = n;
    return gc;
}

/* One representative case per block (a mid-size one), with the silu gate for block 4. */
static const gg_case *case_of(int block_id, int index) {
    const int n = load_all_cases(cases);
    for (int i = 0; i < n; ++i)
        if (cases[i].block_id == block_id && cases[i].index == index) return &cases[i];
    fail_msg("no case %d of block %d", index, block_id);
    return NULL;
}
static const int probe_index[5] = {0, 7, 9, 9, 9}; /* M = 1024, 512, 2048, 2984 (silu) */

/* c run at another M than its own (c->tokens changed): the spec's tolerances grow with M (the weight gradients sum
 * over it), so c takes the looser atol and rtol of the block's case with the smallest M >= c->tokens, if any. */
static void tolerance_at_tokens(gg_case *c) {
    const int n = load_all_cases(cases);
    const gg_case *next = NULL;
    for (int i = 0; i < n; ++i)
        if (cases[i].block_id == c->block_id && cases[i].tokens >= c->tokens &&
            (!next || cases[i].tokens < next->tokens))
            next = &cases[i];
    if (!next) return;
    if (next->atol > c->atol) c->atol = next->atol;
    if (next->rtol > c->rtol) c->rtol = next->rtol;
}

/* Block b's probe case with fresh inputs, in its fast mode, and a graph for exactly its M. */
typedef struct probe {
    const gg_case *c;
    gg_case_run *run;
    gg_precision precision;
    gg_graph *graph;
} probe;

static probe probe_open(gg_ctx *ctx, int block_id, uint64_t seed) {
    probe p = {case_of(block_id, probe_index[block_id]), NULL, speed_mode(block_id), NULL};
    p.run = new_run(p.c);
    CUDA_OK(gg_case_prepare(p.run, seed));
    const gg_graph_config gc = list_config(&p.c->tokens, 1);
    GG_OK(ctx, gg_case_graph_create(p.run, ctx, p.precision, &gc, &p.graph));
    return p;
}

/* The run's outputs pass its case's check. */
static void expect_passes(gg_case_run *r) {
    gg_case_verdict v;
    CUDA_OK(gg_case_check(r, &v));
    assert_true(v.passed);
}

static void probe_close(probe *p) {
    gg_graph_destroy(p->graph);
    gg_case_run_destroy(p->run);
}

static void graph_equals_eager_bitwise_all_cases(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    const int n = load_all_cases(cases);
    int compared = 0;
    for (int i = 0; i < n; ++i) {
        gg_case_run *r = new_run(&cases[i]);
        CUDA_OK(gg_case_prepare(r, 500 + (uint64_t)i));
        gg_precision modes[3];
        const int n_modes = block_modes(cases[i].block_id, modes);
        for (int m = 0; m < n_modes; ++m) {
            GG_OK(ctx, gg_case_execute(r, ctx, modes[m]));
            size_t bytes = 0;
            void *eager = gg_case_outputs_to_host(r, &bytes);
            CUDA_OK(gg_case_poison(r));
            const gg_graph_config gc = list_config(&cases[i].tokens, 1);
            gg_graph *g = NULL;
            GG_OK(ctx, gg_case_graph_create(r, ctx, modes[m], &gc, &g));
            GG_OK(ctx, gg_case_graph_run(r, g, modes[m]));
            void *graph = gg_case_outputs_to_host(r, &bytes);
            if (memcmp(eager, graph, bytes) != 0)
                fail_msg("%s case %d (%s): graph replay differs from the eager path", cases[i].block, cases[i].index,
                         gg_precision_string(modes[m]));
            free(eager);
            free(graph);
            gg_graph_destroy(g);
            ++compared;
        }
        gg_case_run_destroy(r);
    }
    printf("RESULT {\"test\": \"bitwise\", \"compared\": %d}\n", compared);
    assert_int_equal(compared, 16 * (1 + 3 + 3 + 1));
    gg_ctx_destroy(ctx);
}

static void rebinding_writes_new_outputs_only(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int b = 1; b <= 4; ++b) {
        probe pr = probe_open(ctx, b, 1);
        const gg_case *c = pr.c;
        gg_case_run *a = pr.run, *z = new_run(c);
        CUDA_OK(gg_case_prepare(z, 2));
        const gg_precision p = pr.precision;
        const gg_graph_config gc = list_config(&c->tokens, 1);
        gg_graph *g = pr.graph;
        GG_OK(ctx, gg_case_graph_run(a, g, p));
        size_t bytes;
        void *a_out = gg_case_outputs_to_host(a, &bytes);
        GG_OK(ctx, gg_case_graph_run(z, g, p)); /* another pointer set: captured and installed beside the first */
        void *a_after = gg_case_outputs_to_host(a, &bytes);
        if (memcmp(a_out, a_after, bytes) != 0) fail_msg("%s: rebinding wrote the old outputs", c->block);
        gg_case_verdict v;
        CUDA_OK(gg_case_check(z, &v));
        if (!v.passed) fail_msg("%s: the rebound graph's outputs are wrong", c->block);
        expect_passes(a);
        gg_graph_memory mem;
        GG_OK(ctx, gg_graph_memory_info(g, -1, &mem));
        assert_int_equal(mem.execs, 2);
        /* back and forth: both pointer sets stay cached, no new executable graph */
        for (int k = 0; k < 3; ++k) {
            CUDA_OK(gg_case_poison(a));
            GG_OK(ctx, gg_case_graph_run(a, g, p));
            GG_OK(ctx, gg_case_graph_run(z, g, p));
        }
        expect_passes(a);
        GG_OK(ctx, gg_graph_memory_info(g, -1, &mem));
        assert_int_equal(mem.execs, 2);
        /* more pointer sets than execs_per_bucket: the LRU exec is updated in place, results stay right */
        gg_graph_config small = gc;
        small.execs_per_bucket = 1;
        gg_graph *g1 = NULL;
        GG_OK(ctx, gg_case_graph_create(a, ctx, p, &small, &g1));
        for (int k = 0; k < 2; ++k) {
            CUDA_OK(gg_case_poison(a));
            CUDA_OK(gg_case_poison(z));
            GG_OK(ctx, gg_case_graph_run(a, g1, p));
            GG_OK(ctx, gg_case_graph_run(z, g1, p));
            expect_passes(a);
            expect_passes(z);
        }
        GG_OK(ctx, gg_graph_memory_info(g1, -1, &mem));
        assert_int_equal(mem.execs, 1);
        free(a_out);
        free(a_after);
        gg_graph_destroy(g1);
        gg_case_run_destroy(z);
        probe_close(&pr);
    }
    gg_ctx_destroy(ctx);
}

static void padded_bucket_equals_exact_shape(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int b = 1; b <= 4; ++b) {
        gg_case c = *case_of(b, probe_index[b]);
        c.tokens = c.tokens - 37; /* not a bucket: runs in the next one up, padded */
        const int64_t buckets[] = {c.tokens / 2, c.tokens + 37, 4 * c.tokens};
        gg_case_run *r = new_run(&c);
        CUDA_OK(gg_case_prepare(r, 3));
        const gg_precision p = b == 2 || b == 3 ? GG_PRECISION_TF32 : GG_PRECISION_BF16; /* not the fast mode */
        GG_OK(ctx, gg_case_execute(r, ctx, p));
        size_t bytes;
        void *exact = gg_case_outputs_to_host(r, &bytes);
        CUDA_OK(gg_case_poison(r));
        const gg_graph_config gc = list_config(buckets, 3);
        gg_graph *g = NULL;
        GG_OK(ctx, gg_case_graph_create(r, ctx, p, &gc, &g));
        GG_OK(ctx, gg_case_graph_run(r, g, p));
        gg_case_verdict v;
        CUDA_OK(gg_case_check(r, &v));
        if (!v.passed) fail_msg("%s: the padded run fails the reference check", c.block);
        void *padded = gg_case_outputs_to_host(r, &bytes);
        if (!outputs_match(r, exact, padded, 1, c.atol, c.rtol, c.rtol, 0.99))
            fail_msg("%s: padded != exact shape", c.block);
        /* past the largest bucket: a clear error, nothing written */
        gg_case big = c;
        big.tokens = 4 * c.tokens + 1;
        gg_case_run *rb = new_run(&big);
        CUDA_OK(gg_case_poison(rb));
        assert_int_equal(gg_case_graph_run(rb, g, p), GG_ERROR_INVALID_ARGUMENT);
        if (!strstr(gg_last_error(ctx), "exceeds the largest bucket")) fail_msg("message: %s", gg_last_error(ctx));
        gg_case_run_destroy(rb);
        free(exact);
        free(padded);
        gg_graph_destroy(g);
        gg_case_run_destroy(r);
    }
    gg_ctx_destroy(ctx);
}

static void accumulation_equals_sum_of_replays(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int b = 1; b <= 4; ++b) {
        probe pr = probe_open(ctx, b, 4);
        gg_case_run *r = pr.run;
        GG_OK(ctx, gg_case_graph_run(r, pr.graph, pr.precision));
        size_t bytes;
        void *once = gg_case_outputs_to_host(r, &bytes);
        /* parameter gradients to zero, then 3 accumulating replays */
        r->accumulate = 1;
        for (int o = 0; o < r->n_out; ++o)
            if (r->out[o].param)
                CUDA_OK(cudaMemset(r->out[o].dev, 0, gg_case_tensor_bytes(&r->out[o])));
        for (int k = 0; k < 3; ++k) GG_OK(ctx, gg_case_graph_run(r, pr.graph, pr.precision));
        void *thrice = gg_case_outputs_to_host(r, &bytes);
        /* expected: 3x the parameter gradients, the activation gradients unchanged */
        /* fp32: summation order only; bf16: three roundings, within the case's rtol */
        if (!outputs_match(r, once, thrice, 3, pr.c->atol, 1e-5, pr.c->rtol, 0.99))
            fail_msg("%s: 3 accumulating replays != 3x one replay", pr.c->block);
        free(once);
        free(thrice);
        probe_close(&pr);
    }
    gg_ctx_destroy(ctx);
}

static void thousand_replays_stay_correct(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    for (int b = 1; b <= 4; ++b) {
        probe pr = probe_open(ctx, b, 5);
        GG_OK(ctx, gg_case_graph_run(pr.run, pr.graph, pr.precision));
        size_t bytes;
        void *first = gg_case_outputs_to_host(pr.run, &bytes);
        CUDA_OK(gg_case_poison(pr.run));
        for (int k = 0; k < 1000; ++k) GG_OK(ctx, gg_case_graph_run(pr.run, pr.graph, pr.precision));
        gg_case_verdict v;
        CUDA_OK(gg_case_check(pr.run, &v));
        if (!v.passed) fail_msg("%s: wrong after 1000 replays", pr.c->block);
        void *last = gg_case_outputs_to_host(pr.run, &bytes);
        if (memcmp(first, last, bytes) != 0) fail_msg("%s: replay 1000 differs from replay 1", pr.c->block);
        free(first);
        free(last);
        probe_close(&pr);
    }
    gg_ctx_destroy(ctx);
}

static void device_selected_bucket(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    int64_t *d_tokens = NULL;
    CUDA_OK(cudaMalloc((void **)&d_tokens, sizeof *d_tokens));
    for (int b = 1; b <= 4; ++b) {
        const gg_case *base = case_of(b, probe_index[b]);
        const gg_precision p = speed_mode(b);
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gc.min_tokens = 256;
        gc.max_tokens = 4096;
        gc.device_select = 1;
        gg_case cap = *base;
        cap.tokens = gc.max_tokens; /* the capacity: buffers for the largest bucket */
        gg_case_run *r = new_run(&cap);
        gg_graph *g = NULL;
        GG_OK(ctx, gg_case_graph_create(r, ctx, p, &gc, &g));
        const int64_t ms[] = {300, 1024, 4096, 77};
        for (size_t k = 0; k < sizeof ms / sizeof ms[0]; ++k) {
            /* the same data as an exact-M run: prepare a run of M rows and copy its inputs in */
            gg_case exact = *base;
            exact.tokens = ms[k];
            tolerance_at_tokens(&exact); /* M = 4096 is 8x block 2's probe M */
            gg_case_run *e = new_run(&exact);
            CUDA_OK(gg_case_prepare(e, 60 + k));
            for (int i = 0; i < e->n_in; ++i)
                CUDA_OK(cudaMemcpy(r->in[i].dev, e->in[i].dev, gg_case_tensor_bytes(&e->in[i]),
                                   cudaMemcpyDeviceToDevice));
            CUDA_OK(gg_case_poison(r));
            CUDA_OK(cudaMemcpy(d_tokens, &ms[k], sizeof ms[k], cudaMemcpyHostToDevice));
            GG_OK(ctx, gg_case_graph_run_device(r, g, p, d_tokens));
            CUDA_OK(cudaDeviceSynchronize());
            /* the first M rows of r's outputs against e's reference: copy them over e's outputs and check */
            for (int o = 0; o < e->n_out; ++o)
                CUDA_OK(cudaMemcpy(e->out[o].dev, r->out[o].dev,
                                   gg_case_tensor_bytes(&e->out[o]), cudaMemcpyDeviceToDevice));
            gg_case_verdict v;
            CUDA_OK(gg_case_check(e, &v));
            if (!v.passed) fail_msg("%s: device-selected run with M=%lld is wrong", base->block, (long long)ms[k]);
            gg_case_run_destroy(e);
        }
        /* M past every bucket: nothing runs, the error is counted */
        unsigned before = 0, after = 0;
        GG_OK(ctx, gg_graph_device_errors(g, &before));
        const int64_t too_big = gc.max_tokens + 1;
        CUDA_OK(gg_case_poison(r));
        CUDA_OK(cudaMemcpy(d_tokens, &too_big, sizeof too_big, cudaMemcpyHostToDevice));
        GG_OK(ctx, gg_case_graph_run_device(r, g, p, d_tokens));
        GG_OK(ctx, gg_graph_device_errors(g, &after));
        assert_int_equal(after, before + 1);
        gg_case_verdict v;
        CUDA_OK(gg_case_check(r, &v));
        assert_int_equal(v.result[0].nonfinite, v.result[0].n); /* still the poison: nothing was written */
        gg_graph_destroy(g);
        gg_case_run_destroy(r);
    }
    cudaFree(d_tokens);
    gg_ctx_destroy(ctx);
}

/* The CUDA runtime as gradgraph's refusal of an application's pending error assumes it (tests/cpu/test_api.c checks
 * the rule on the fakes): a failed runtime call of the application's (a cudaMalloc too large) leaves its error for
 * cudaGetLastError; the graph's run is refused for it and leaves it there, runs (and is right) once it is read; a
 * cudaStreamQuery answering cudaErrorNotReady (a busy stream) does not refuse the next run. */
static void pending_application_error_is_not_gradgraphs(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    probe p = probe_open(ctx, 1, 7);
    CUDA_OK(gg_case_poison(p.run)); /* its launch reads the last error too */
    void *huge = NULL;
    assert_int_equal(cudaMalloc(&huge, (size_t)1 << 62), cudaErrorMemoryAllocation);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(gg_case_graph_run(p.run, p.graph, p.precision), GG_ERROR_CUDA);
    const char *msg = gg_last_error(ctx);
    if (!strstr(msg, "a CUDA error is pending on this thread from earlier work that was not this call's: "
                     "cudaErrorMemoryAllocation"))
        fail_msg("refusal's message: %s", msg);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation); /* still pending: the application reads it */
    GG_OK(ctx, gg_case_graph_run(p.run, p.graph, p.precision));
    expect_passes(p.run);
    /* a busy stream's query: ~1 GiB of memset behind it */
    const size_t bytes = (size_t)1 << 30;
    void *big = NULL;
    cudaStream_t busy = NULL;
    CUDA_OK(cudaMalloc(&big, bytes));
    CUDA_OK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    for (int i = 0; i < 8; ++i) CUDA_OK(cudaMemsetAsync(big, i, bytes, busy));
    const cudaError_t q = cudaStreamQuery(busy);
    print_message("cudaStreamQuery of the busy stream: %s, then cudaPeekAtLastError: %s\n", cudaGetErrorName(q),
                  cudaGetErrorName(cudaPeekAtLastError()));
    CUDA_OK(gg_case_poison(p.run));
    GG_OK(ctx, gg_case_graph_run(p.run, p.graph, p.precision));
    expect_passes(p.run);
    CUDA_OK(cudaStreamSynchronize(busy));
    CUDA_OK(cudaStreamDestroy(busy));
    CUDA_OK(cudaFree(big));
    probe_close(&p);
    gg_ctx_destroy(ctx);
}

/* The streams a call takes are asked their device (a stream of another device is refused; tests/cpu/test_api.c): the
 * default streams are the context's device's; an eager call on a stream the application is capturing (global mode)
 * is captured and right when the graph runs (asking that stream its device would invalidate the capture: it is not
 * asked), and one on another stream beside such a capture runs without invalidating it. */
static void default_and_capturing_streams_are_the_devices(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_ctx *ctx = new_ctx();
    probe p = probe_open(ctx, 1, 11);
    const gg_stream own = p.run->stream;
    const gg_stream defaults[2] = {(gg_stream)cudaStreamPerThread, (gg_stream)cudaStreamLegacy};
    for (int k = 0; k < 2; ++k) {
        p.run->stream = defaults[k];
        CUDA_OK(gg_case_poison(p.run));
        GG_OK(ctx, gg_case_graph_run(p.run, p.graph, p.precision));
        GG_OK(ctx, gg_case_execute(p.run, ctx, p.precision));
        expect_passes(p.run);
    }
    cudaStream_t cap = NULL;
    CUDA_OK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    /* what the check costs a call on the host (printed, not asserted) */
    struct timespec t0, t1;
    int device = -1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100000; ++i) CUDA_OK(cudaStreamGetDevice(cap, &device));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("cudaStreamGetDevice: %.3f us a call (100000 calls)\n",
                  ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / 100000);
    p.run->stream = (gg_stream)cap;
    GG_OK(ctx, gg_case_execute(p.run, ctx, p.precision)); /* planned outside the capture */
    CUDA_OK(gg_case_poison(p.run));
    CUDA_OK(cudaStreamSynchronize(cap));
    CUDA_OK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    const gg_status inside = gg_case_execute(p.run, ctx, p.precision);
    cudaGraph_t graph = NULL;
    const cudaError_t ended = cudaStreamEndCapture(cap, &graph);
    if (inside != GG_SUCCESS) fail_msg("eager call inside the capture: %s", gg_last_error(ctx));
    CUDA_OK(ended);
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, cap));
    CUDA_OK(cudaStreamSynchronize(cap));
    expect_passes(p.run);
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    /* a call on a stream that is not capturing while this thread captures another in global mode: it runs, and the
     * capture stays valid */
    p.run->stream = own;
    CUDA_OK(gg_case_poison(p.run));
    CUDA_OK(cudaStreamSynchronize((cudaStream_t)own));
    CUDA_OK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal));
    const gg_status beside = gg_case_execute(p.run, ctx, p.precision);
    const cudaError_t ended_beside = cudaStreamEndCapture(cap, &graph);
    if (beside != GG_SUCCESS) fail_msg("eager call beside the capture: %s", gg_last_error(ctx));
    CUDA_OK(ended_beside);
    CUDA_OK(cudaGraphDestroy(graph));
    expect_passes(p.run);
    CUDA_OK(cudaStreamDestroy(cap));
    probe_close(&p);
    gg_ctx_destroy(ctx);
}

/* One context's life: graphs made, run, and left alive for gg_ctx_destroy. */
static void context_life(gg_case_run *r, int report) {
    gg_ctx *ctx = new_ctx();
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 4096;
    gc.device_select = 1;
    gg_graph *g = NULL, *g2 = NULL;
    GG_OK(ctx, gg_case_graph_create(r, ctx, GG_PRECISION_FP16, &gc, &g));
    GG_OK(ctx, gg_case_graph_run(r, g, GG_PRECISION_FP16));
    GG_OK(ctx, gg_case_graph_create(r, ctx, GG_PRECISION_TF32, &gc, &g2));
    GG_OK(ctx, gg_case_graph_run(r, g2, GG_PRECISION_TF32));
    gg_graph_memory mem;
    GG_OK(ctx, gg_graph_memory_info(g, -1, &mem));
    if (report)
        printf("RESULT {\"test\": \"memory\", \"block\": \"%s\", \"M\": %lld, \"buckets\": %d, \"execs\": %d, "
               "\"exec_bytes\": %zu, \"staging_bytes\": %zu, \"scratch_bytes\": %zu, \"ctx_bytes\": %zu}\n",
               r->c.block, (long long)r->c.tokens, mem.buckets, mem.execs, mem.exec_bytes, mem.staging_bytes,
               mem.scratch_bytes, gg_ctx_device_bytes(ctx));
    gg_ctx_destroy(ctx); /* both graphs are still alive: the context destroys them */
}

static void context_teardown_returns_memory(void **state) {
    (void)state;
    REQUIRE_GPU();
    gg_case_run *r = new_run(case_of(3, 9));
    CUDA_OK(gg_case_prepare(r, 6));
    context_life(r, 0); /* first: modules and cuBLASLt kernels load lazily and stay loaded */
    CUDA_OK(cudaDeviceSynchronize());
    size_t free_before, free_after, total;
    CUDA_OK(cudaMemGetInfo(&free_before, &total));
    context_life(r, 1);
    CUDA_OK(cudaMemGetInfo(&free_after, &total));
    const double diff = (double)free_before - (double)free_after;
    printf("RESULT {\"test\": \"teardown\", \"free_before\": %zu, \"free_after\": %zu}\n", free_before, free_after);
    if (fabs(diff) > 2.0 * 1024 * 1024)
        fail_msg("device memory after teardown differs by %.1f MiB", diff / (1024.0 * 1024.0));
    gg_case_run_destroy(r);
}

int main(void) {
    apply_test_filter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rebinding_writes_new_outputs_only),
        cmocka_unit_test(padded_bucket_equals_exact_shape),
        cmocka_unit_test(accumulation_equals_sum_of_replays),
        cmocka_unit_test(thousand_replays_stay_correct),
        cmocka_unit_test(device_selected_bucket),
        cmocka_unit_test(context_teardown_returns_memory),
        cmocka_unit_test(pending_application_error_is_not_gradgraphs),
        cmocka_unit_test(default_and_capturing_streams_are_the_devices),
        cmocka_unit_test(graph_equals_eager_bitwise_all_cases),
    };
    return cmocka_run_group_tests_name("graphs_gpu", tests, NULL, NULL);
}
