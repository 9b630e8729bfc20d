/*
 * test_faults.c - fault injection on the CPU: every call of the kinds in fake_cuda.h (GEMMs, kernel launches, event
 * records and waits, allocations and heuristics while planning, graph capture, instantiation, update and launch, host
 * memory) is failed in turn, the k-th for every k until the call runs through, for every block on the eager path, the
 * graph path and a device-selected graph's (gg_*_graph_run_device), on a fake device without and with the sm_90a-only
 * routes (fake.compute_capability 0 and 90: blocks 2/3's gemm_f32w, block 4's small and fused kernels), blocks 2/3 in
 * fp16 mode also with the fp16 copies of their operands given (G on every SM in the narrow schedule; block 3 also with
 * x's, its R then written in G's DGELU epilogue, forced by GG_FFN_DGELU=epilogue); then, on the same
 * paths, the k-th CUDA or cuBLASLt resource made. Each injected fault must give its status and a message that begins
 * with the call's name, leave no stream capturing, leak nothing (the fakes count what is alive), leave the context
 * usable (the same call succeeds next), and on the graph path enqueue nothing. Prints `FAULTS {"injected": n,
 * "failures": m}` and `FAULTS_RESOURCES {...}` for scripts/collect_reliability.py. The step graphs, optimizers and
 * forwards are test_faults_entry.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block_calls.h"
#include "fake_cuda.h"
#include "faults.h"
#include "gradgraph.h"


/* One block call, eager or through a graph (block_calls.h), named. absorbed: the heuristic query (its count in the
 * call's plan, from 1) whose failure the plan absorbs by a documented fallback, and the call succeeds: block 3's G with
 * the DGELU epilogue (its third GEMM planned, after G and G on every SM: R then in the gelu' pass); 0: none. */
typedef struct scenario {
    const char *name;
    block_case call;
    int absorbed;
} scenario;

static const scenario scenarios[] = {
    {"tanh_gate", {1, 64, 4096, 0, GG_PRECISION_DEFAULT, 0, 1, 0}, 0},
    {"gelu_ffn fp32", {2, 64, 1536, 6144, GG_PRECISION_FP32, 0, 0, 0}, 0},
    {"gelu_ffn fp16 few tokens", {2, 64, 1536, 6144, GG_PRECISION_FP16, 0, 1, 0}, 0},
    {"gelu_ffn fp16 narrow", {2, 1200, 1536, 6144, GG_PRECISION_FP16, 0, 0, 0}, 0},
    {"gelu_ffn fp16 narrow copies", {2, 1200, 1536, 6144, GG_PRECISION_FP16, 0, 0, 1}, 0},
    {"mlp tf32", {3, 600, 2048, 8192, GG_PRECISION_TF32, 0, 1, 0}, 0},
    {"mlp fp16 few tokens", {3, 256, 2048, 8192, GG_PRECISION_FP16, 0, 0, 0}, 0},
    {"mlp fp16 few tokens copies", {3, 256, 2048, 8192, GG_PRECISION_FP16, 0, 0, 1}, 0},
    {"mlp fp16 narrow", {3, 2048, 2048, 8192, GG_PRECISION_FP16, 0, 1, 0}, 3},
    {"mlp fp16 narrow copies", {3, 2048, 2048, 8192, GG_PRECISION_FP16, 0, 1, 1}, 3},
    /* x's copy too, with GG_FFN_DGELU=epilogue (main): G writes R in its DGELU epilogue, grad_bias1 a sum over R */
    {"mlp fp16 narrow x copy dgelu", {3, 2048, 2048, 8192, GG_PRECISION_FP16, 0, 1, 2}, 3},
    {"ssm_gate one launch", {4, 64, 768, 1536, GG_PRECISION_DEFAULT, 1, 0, 0}, 0},
    {"ssm_gate narrow", {4, 4001, 768, 1536, GG_PRECISION_DEFAULT, 0, 1, 0}, 0},
    {"ssm_gate narrow silu", {4, 40000, 768, 1536, GG_PRECISION_DEFAULT, 1, 0, 0}, 0},
    /* split-k over 11904 (12000) rows of k, then the tail apart (matmul.c, gg_matmul_tail_apart) */
    {"ssm_gate narrow tail apart", {4, 11913, 768, 1536, GG_PRECISION_DEFAULT, 0, 1, 0}, 0},
    {"mlp fp32 tail apart", {3, 12001, 256, 512, GG_PRECISION_FP32, 0, 1, 0}, 0},
};

static int injected, failures;
static int tail_runs; /* clean eager calls that ran a GEMM's tail apart (the "tail apart" scenarios) */
static int dgelu_runs; /* clean eager calls that wrote R in G's DGELU epilogue (the "dgelu" scenario) */
int faults_device_cc;

static void check(int ok, const scenario *s, const char *path, fake_kind kind, int k, const char *fmt, ...) {
    if (ok) return;
    ++failures;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("FAULT FAIL %s %s%s: %s #%d: %s\n", s->name, path, faults_device_cc ? " (9.0 device)" : "",
           fake_kind_names[kind], k, what);
}

gg_ctx *faults_make_ctx(void) {
    fake_reset(1);
    fake.compute_capability = faults_device_cc;
    fake.plan_ok = 1;
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    memset(fake.calls, 0, sizeof fake.calls);
    return ctx;
}

const char *faults_error_name(fake_kind kind) {
    switch (kind) {
    case FAKE_MATMUL: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case FAKE_LAUNCH: return "cudaErrorLaunchOutOfResources";
    case FAKE_EVENT_RECORD: return "cudaErrorLaunchFailure";
    case FAKE_WAIT_EVENT: return "cudaErrorInvalidResourceHandle";
    case FAKE_MALLOC: return "cudaErrorMemoryAllocation";
    case FAKE_HEURISTIC: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case FAKE_BEGIN_CAPTURE: return "cudaErrorStreamCaptureUnsupported";
    case FAKE_END_CAPTURE: return "cudaErrorStreamCaptureInvalidated";
    case FAKE_INSTANTIATE: return "cudaErrorInvalidValue";
    case FAKE_GRAPH_LAUNCH: return "cudaErrorLaunchFailure";
    case FAKE_HOST_MEMORY: return "out of host memory";
    default: return "";
    }
}

/* Whether a message begins with the public call that failed: block's entry point of that suffix ("backward",
 * "graph_run", ...) and a colon. */
static int names_entry(const char *msg, int block, const char *suffix) {
    static const char *const stems[] = {"", "gg_tanh_gate_", "gg_gelu_ffn_", "gg_mlp_", "gg_ssm_gate_"};
    char entry[64];
    snprintf(entry, sizeof entry, "%s%s: ", stems[block], suffix);
    return strncmp(msg, entry, strlen(entry)) == 0;
}

/* Whether a message quotes a call's source text (its arguments, gradgraph's own expressions) instead of naming the
 * function that failed. */
static int quotes_source(const char *msg) {
    return strstr(msg, "(ctx") || strstr(msg, "t[T_") || strstr(msg, "stream)") || strstr(msg, "sizeof");
}

/* Whether the k-th fault of `kind` is the one the scenario's plan absorbs (scenario.absorbed): the call then succeeds,
 * and the loop over k goes on. */
static int absorbed(const scenario *s, int kind, int k) { return kind == FAKE_HEURISTIC && k == s->absorbed; }

/* The eager path: the planning faults enqueue nothing and say what failed; the enqueue faults say GG_ERROR_PARTIAL. */
static void eager_faults(const scenario *s) {
    for (int kind = 0; kind < FAKE_KINDS; ++kind)
        for (int k = 1;; ++k) {
            gg_ctx *ctx = faults_make_ctx();
            fake.fail_kind = (fake_kind)kind;
            fake.fail_at = k;
            fake.enqueued = 0;
            const int before = fake.injected;
            const gg_status st = block_call_run(ctx, NULL, &s->call, 0, 0);
            const int reached = fake.injected > before, hit = reached && !absorbed(s, kind, k);
            injected += hit;
            fake.fail_at = 0;
            if (hit) {
                const char *msg = gg_last_error(ctx);
                const int planning = kind == FAKE_MALLOC || kind == FAKE_HEURISTIC || kind == FAKE_HOST_MEMORY;
                const gg_status want = kind == FAKE_MALLOC || kind == FAKE_HOST_MEMORY ? GG_ERROR_OUT_OF_MEMORY
                                       : kind == FAKE_HEURISTIC ? GG_ERROR_CUBLAS
                                                                : GG_ERROR_PARTIAL;
                check(st == want, s, "eager", kind, k, "status %s, expected %s", gg_status_string(st),
                      gg_status_string(want));
                check(strstr(msg, faults_error_name((fake_kind)kind)) != NULL, s, "eager", kind, k,
                      "message \"%s\" does not name %s", msg, faults_error_name((fake_kind)kind));
                check(!quotes_source(msg), s, "eager", kind, k, "message \"%s\" quotes gradgraph's source", msg);
                check(names_entry(msg, s->call.block, "backward"), s, "eager", kind, k,
                      "message \"%s\" does not begin with the call's name", msg);
                if (planning) check(fake.enqueued == 0, s, "eager", kind, k, "%d enqueued", fake.enqueued);
                if (want == GG_ERROR_PARTIAL && s->call.accumulate)
                    check(strstr(msg, "recompute") != NULL, s, "eager", kind, k, "\"%s\" names no gradients", msg);
            } else {
                check(st == GG_SUCCESS, s, "eager", kind, k, "no fault, status %s: %s", gg_status_string(st),
                      gg_last_error(ctx));
            }
            check(fake.captures_open == 0, s, "eager", kind, k, "a stream is left capturing");
            const gg_status again = block_call_run(ctx, NULL, &s->call, 0, 0);
            check(again == GG_SUCCESS, s, "eager", kind, k, "the next call: %s", gg_last_error(ctx));
            if (!hit) tail_runs += fake.tail_matmuls > 0;
            if (!hit) dgelu_runs += fake.dgelu_matmuls > 0;
            gg_ctx_destroy(ctx);
            check(fake.live == 0, s, "eager", kind, k, "%d resources leaked", fake.live);
            if (!reached) break;
        }
}

/* The graph path: create (plans), run (capture, instantiate, launch), run with other outputs (capture, update in
 * place, launch). Nothing a failure leaves is enqueued; a failed update falls back to instantiating. With `device`,
 * the same with a device-selected graph (its selection kernel, conditional node and branches) and runs on the
 * device. */
static void graph_faults(const scenario *s, int device) {
    const char *path = device ? "device graph" : "graph";
    for (int kind = 0; kind < FAKE_KINDS; ++kind)
        for (int k = 1;; ++k) {
            gg_ctx *ctx = faults_make_ctx();
            fake.fail_kind = (fake_kind)kind;
            fake.fail_at = k;
            const int before = fake.injected;
            gg_graph *g = NULL;
            int launches = fake.graph_launches, step = 0;
            gg_status st = block_call_graph(ctx, &s->call, device, &g);
            if (st == GG_SUCCESS) {
                ++step;
                launches = fake.graph_launches;
                st = block_call_run(ctx, g, &s->call, 0, device);
            }
            if (st == GG_SUCCESS) {
                ++step;
                launches = fake.graph_launches;
                st = block_call_run(ctx, g, &s->call, 1, device);
            }
            const int reached = fake.injected > before, hit = reached && !absorbed(s, kind, k);
            injected += hit;
            fake.fail_at = 0;
            if (hit && kind != FAKE_EXEC_UPDATE) {
                const char *msg = gg_last_error(ctx);
                check(st != GG_SUCCESS && st != GG_ERROR_PARTIAL, s, path, kind, k, "status %s",
                      gg_status_string(st));
                check((kind != FAKE_MALLOC && kind != FAKE_HOST_MEMORY) || st == GG_ERROR_OUT_OF_MEMORY, s, path,
                      kind, k, "status %s",
                      gg_status_string(st));
                check(strstr(msg, faults_error_name((fake_kind)kind)) != NULL, s, path, kind, k,
                      "message \"%s\" does not name %s", msg, faults_error_name((fake_kind)kind));
                const char *entry = step == 0 ? "graph_create" : device ? "graph_run_device" : "graph_run";
                check(names_entry(msg, s->call.block, entry), s, path, kind, k,
                      "message \"%s\" does not begin with the call's name", msg);
                check(fake.graph_launches == launches, s, path, kind, k, "a graph was launched");
                check(step > 0 || g == NULL, s, path, kind, k, "a failed create left a graph");
            } else {
                check(st == GG_SUCCESS, s, path, kind, k, "status %s: %s", gg_status_string(st),
                      gg_last_error(ctx));
            }
            check(fake.captures_open == 0, s, path, kind, k, "a stream is left capturing");
            /* usable after: the step that failed, and the rest, succeed now */
            gg_status again = step == 0 ? block_call_graph(ctx, &s->call, device, &g) : GG_SUCCESS;
            if (again == GG_SUCCESS) again = block_call_run(ctx, g, &s->call, step < 2 ? 0 : 1, device);
            if (again == GG_SUCCESS) again = block_call_run(ctx, g, &s->call, 1, device);
            check(again == GG_SUCCESS, s, path, kind, k, "after the fault: %s", gg_last_error(ctx));
            gg_graph_destroy(g);
            gg_ctx_destroy(ctx);
            check(fake.live == 0, s, path, kind, k, "%d resources leaked", fake.live);
            if (!reached) break;
        }
}

/* CUDA and cuBLASLt resources made while planning and capturing (streams and events of a graph, device memory,
 * cuBLASLt descriptors, layouts and preferences, graphs and executables): the k-th one made fails, for every k the
 * path reaches, on the eager path and on the graph path (create, run, run with other outputs; device-selected too).
 * The call fails with a CUDA, cuBLAS or out-of-memory status and a message beginning with its name, launches no graph,
 * leaves no capture open, the same calls succeed next and nothing is left once the context is gone. */
static int resource_injected;
static void resource_check(int ok, const scenario *s, const char *path, int k, const char *what, const char *msg) {
    if (ok) return;
    ++failures;
    printf("FAULT FAIL %s %s%s: CUDA resource #%d: %s: \"%s\"\n", s->name, path,
           faults_device_cc ? " (9.0 device)" : "", k, what, msg);
}

static void resource_faults(const scenario *s, int graph, int device) {
    const char *path = !graph ? "eager" : device ? "device graph" : "graph";
    for (int k = 1;; ++k) {
        gg_ctx *ctx = faults_make_ctx();
        fake.fail_create_at = fake.creates + k;
        const int armed = fake.fail_create_at;
        int launches = fake.graph_launches; /* before the step that runs last */
        gg_graph *g = NULL;
        int step = 0;
        gg_status st = graph ? block_call_graph(ctx, &s->call, device, &g) : block_call_run(ctx, NULL, &s->call, 0, 0);
        for (int out = 0; graph && out < 2 && st == GG_SUCCESS; ++out) {
            ++step;
            launches = fake.graph_launches;
            st = block_call_run(ctx, g, &s->call, out, device);
        }
        const int hit = fake.creates >= armed;
        fake.fail_create_at = 0;
        resource_injected += hit;
        const char *msg = gg_last_error(ctx);
        if (hit) {
            const char *entry = !graph ? "backward" : step == 0 ? "graph_create" : device ? "graph_run_device"
                                                                                      : "graph_run";
            resource_check(st == GG_ERROR_CUDA || st == GG_ERROR_CUBLAS || st == GG_ERROR_OUT_OF_MEMORY, s, path, k,
                           gg_status_string(st), msg);
            resource_check(names_entry(msg, s->call.block, entry), s, path, k, "does not begin with the call", msg);
            resource_check(fake.graph_launches == launches, s, path, k, "a graph was launched", msg);
        } else {
            resource_check(st == GG_SUCCESS, s, path, k, "no fault", msg);
        }
        resource_check(fake.captures_open == 0, s, path, k, "a capture is left open", msg);
        gg_status again = graph && step == 0 ? block_call_graph(ctx, &s->call, device, &g) : GG_SUCCESS;
        if (again == GG_SUCCESS) again = block_call_run(ctx, g, &s->call, 0, device);
        if (again == GG_SUCCESS) again = block_call_run(ctx, g, &s->call, 1, graph ? device : 0);
        resource_check(again == GG_SUCCESS, s, path, k, "the next calls", gg_last_error(ctx));
        gg_graph_destroy(g);
        gg_ctx_destroy(ctx);
        char left[32];
        snprintf(left, sizeof left, "%d resources leaked", fake.live);
        resource_check(fake.live == 0, s, path, k, left, "");
        if (!hit) break;
    }
}

static void every_resource_fault_of_every_block(void **state) {
    (void)state;
    const int before = failures;
    for (faults_device_cc = 0; faults_device_cc <= 90; faults_device_cc += 90)
        for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i) {
            resource_faults(&scenarios[i], 0, 0);
            resource_faults(&scenarios[i], 1, 0);
            resource_faults(&scenarios[i], 1, 1);
        }
    faults_device_cc = 0;
    printf("FAULTS_RESOURCES {\"injected\": %d, \"failures\": %d}\n", resource_injected, failures - before);
    assert_true(resource_injected > 100);
    assert_int_equal(failures, before);
}

static void every_fault_of_every_block(void **state) {
    (void)state;
    /* a device without and with the sm_90a routes */
    for (faults_device_cc = 0; faults_device_cc <= 90; faults_device_cc += 90)
        for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; ++i) {
            eager_faults(&scenarios[i]);
            graph_faults(&scenarios[i], 0);
            graph_faults(&scenarios[i], 1);
        }
    faults_device_cc = 0;
    printf("FAULTS {\"injected\": %d, \"failures\": %d}\n", injected, failures);
    assert_true(injected > 100);
    assert_true(tail_runs >= 2 * FAKE_KINDS); /* the tail's GEMM was among the calls failed, on both devices */
    assert_true(dgelu_runs >= 2 * FAKE_KINDS); /* and G with the DGELU epilogue */
    assert_int_equal(failures, 0);
}

int main(void) {
    setenv("GG_FFN_DGELU", "epilogue", 1); /* block 3 given x's copy: R in G's epilogue (read as each plan builds) */
    const struct CMUnitTest tests[] = {cmocka_unit_test(every_fault_of_every_block),
                                       cmocka_unit_test(every_resource_fault_of_every_block),
                                       cmocka_unit_test(faults_of_steps_optimizers_forwards),
                                       cmocka_unit_test(device_graph_built_after_a_lost_arena)};
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
