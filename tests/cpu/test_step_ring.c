/*
 * test_step_ring.c - the scratch ring of step graphs (graphs/step_capture.c) on the CUDA fakes: block calls that may
 * run at the same time never share a scratch slot. Every capture of steps of 4 to 12 MLP and SSM-gate calls (each kind
 * alone and mixed), with 1 to 3 side streams and 1 to 4 slots, at every bucket, is logged by fake_cuda (fake_log: each
 * enqueued operation with its stream, event records and waits, the device ranges of GEMMs, memsets and copies, and the
 * pointer arguments of kernels), and cut into block calls by step_capture.c's test hook. The happens-before relation of
 * the captured graph is built as stream capture makes it: program order on each stream, and an edge from an event's
 * last record to each wait on it. Then every pair of operations of two different block calls that touch the same slot
 * (its scratch bytes or its reduction counters) must be ordered. Also checked: each call touches no slot but its own
 * (block index mod K), every slot is used, and every stream in the capture joined it through a recorded event. The
 * negative control drops the slot wait (gg_step_test.skip_slot_wait) and must find violations. Every capture is also
 * checked for races over all the bytes it touches, slots or not (fake_order.h: two operations on the same bytes, one
 * writing, neither before the other), which the negative control makes too. What the fake cannot see: where a kernel
 * reaches from the pointers it is handed (a kernel's use of a slot is found by its pointer arguments falling in the
 * slot). Prints `RING_PROOF {"steps": n, "captures": c, "pairs_checked": m, "violations": 0,
 * "negative_control_violations": k, ..., "race_pairs": p, "races": 0, "negative_control_races": q}`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_cuda.h"
#include "fake_order.h"
#include "gradgraph.h"
#include "internal.h"
#include "step.h"

enum { MAX_LAYERS = 12, MAX_STREAMS = 16, MAX_SLOTS = 8, MAX_TOKENS = 1024, HIDDEN = 256, FFN = 1024,
       EXPANDED = 512 };
#define TENSOR_BYTES ((size_t)MAX_TOKENS * FFN * 4) /* the largest tensor of either block */

typedef enum { KIND_MLP, KIND_SSM } kind;

static struct {
    int steps, captures;
    long pairs, violations, negative_violations;
    long race_pairs, races, negative_races; /* fake_order.h's check of every pair on shared bytes, one writing */
    long kernel_uses, gemm_uses, other_uses; /* slot-touching operations seen, by what the fake read them from */
    long dgelu_gemms;                        /* GEMMs with the DGELU epilogue captured */
} totals;

/* ---- the step ---- */

static void *device(void **owned, int *n) {
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, TENSOR_BYTES), cudaSuccess);
    owned[(*n)++] = p;
    return p;
}

static int current_block = -1;
static void before_block(int block) {
    current_block = block;
    fake_log_mark(block);
}

/* Layer l's kind in pattern p: 0 all MLP, 1 all SSM gate, 2 alternating. */
static kind kind_of(int pattern, int l) { return pattern == 2 ? (kind)(l % 2) : (kind)pattern; }

typedef struct built {
    gg_ctx *ctx;
    gg_step *step;
    void *owned[MAX_LAYERS * 16]; /* an MLP given every fp16 copy: 16 tensors */
    int n_owned;
} built;

/* On the default fake device only: with the sm_90a routes (fake.compute_capability = 90), gemm_f32w's last argument
 * is a 56-byte struct, and the fake's scan of a class argument (FAKE_CLASS_SCAN bytes) reads past it into stale
 * stack words, which under AddressSanitizer's frame layout now and then point into another call's slot: a false
 * race. */
static void build(built *b, int layers, int pattern, int sides, int slots) {
    memset(b, 0, sizeof *b);
    fake_reset(1);
    fake.plan_ok = 1;
    fake.device_space = 1;
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    assert_int_equal(gg_ctx_create(&c, &b->ctx), GG_SUCCESS);
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.min_tokens = 128;
    sc.max_tokens = MAX_TOKENS;
    sc.side_streams = sides;
    sc.scratch_slots = slots;
    assert_int_equal(gg_step_create(b->ctx, &sc, &b->step), GG_SUCCESS);
    void *prev_grad = NULL; /* the previous call's activation gradient, when it is an MLP's */
    for (int l = 0; l < layers; ++l) {
        void **o = b->owned;
        int *n = &b->n_owned;
        if (kind_of(pattern, l) == KIND_MLP) {
            /* fp32 and fp16 modes in turn (fp16 adds the inputs' copies to the slot); every fourth layer gives every
             * fp16 copy, x's too, so that G writes R in its DGELU epilogue (GG_FFN_DGELU=epilogue, main) and
             * grad_bias1 is summed over R on the side stream */
            const gg_mlp_desc d = {.tokens = 1, .hidden = HIDDEN, .ffn = FFN,
                                   .precision = l % 4 < 2 ? GG_PRECISION_FP32 : GG_PRECISION_FP16};
            gg_mlp_args a = {prev_grad ? prev_grad : device(o, n), device(o, n), device(o, n), device(o, n),
                             device(o, n), device(o, n), device(o, n), device(o, n), device(o, n), device(o, n),
                             device(o, n), NULL, NULL, NULL, NULL, NULL, NULL};
            if (l % 4 == 3) {
                a.hidden_states_fp16 = device(o, n), a.weight1_fp16 = device(o, n), a.weight2_fp16 = device(o, n);
                a.intermediate_activated_fp16 = device(o, n), a.intermediate_fp16 = device(o, n);
            }
            assert_int_equal(gg_step_add_mlp(b->step, &d, &a), GG_SUCCESS);
            prev_grad = a.grad_hidden_states;
        } else {
            const gg_ssm_gate_desc d = {.tokens = 1, .hidden = HIDDEN, .expanded = EXPANDED,
                                        .use_silu_gate = l % 3 != 0};
            const gg_ssm_gate_args a = {device(o, n), device(o, n), device(o, n), device(o, n), device(o, n),
                                        device(o, n), device(o, n), device(o, n), device(o, n), device(o, n)};
            assert_int_equal(gg_step_add_ssm_gate(b->step, &d, &a), GG_SUCCESS);
            prev_grad = NULL;
        }
    }
    assert_int_equal(gg_step_finalize(b->step), GG_SUCCESS);
}

static void destroy(built *b) {
    gg_step_destroy(b->step);
    for (int i = 0; i < b->n_owned; ++i) assert_int_equal(cudaFree(b->owned[i]), cudaSuccess);
    gg_ctx_destroy(b->ctx);
    assert_int_equal(fake.live, 0);
    assert_int_equal(fake.captures_open, 0);
}

/* ---- the happens-before relation of one logged capture ---- */

typedef struct op_clock {
    int stream, call;
    unsigned slots; /* bit k: touches slot k */
    int clock[MAX_STREAMS];
    int entry;
} op_clock;

typedef struct region {
    uintptr_t lo[2], hi[2]; /* scratch, counters */
} region;

static unsigned slots_touched(const fake_entry *e, const region *r, int K) {
    unsigned m = 0;
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < e->n_ranges; ++i)
            for (int part = 0; part < 2; ++part)
                if (e->ranges[i].lo < r[k].hi[part] && r[k].lo[part] < e->ranges[i].hi) m |= 1u << k;
    return m;
}

static int stream_index(cudaStream_t *streams, int *n, cudaStream_t s) {
    for (int i = 0; i < *n; ++i)
        if (streams[i] == s) return i;
    assert_true(*n < MAX_STREAMS);
    streams[*n] = s;
    return (*n)++;
}

typedef struct recorded {
    cudaEvent_t event;
    int clock[MAX_STREAMS];
} recorded;

/* Checks the log of one capture; returns its violations (printed when `loud`). */
static long check_capture(const gg_step *step, unsigned *used, int loud) {
    region r[MAX_SLOTS];
    int K = 0;
    for (int k = 0; k < MAX_SLOTS && (k == 0 || k < K); ++k) {
        void *scratch, *counter;
        size_t bytes, counter_bytes;
        K = gg_step_slot_region(step, k, &scratch, &bytes, &counter, &counter_bytes);
        r[k] = (region){{(uintptr_t)scratch, (uintptr_t)counter},
                        {(uintptr_t)scratch + bytes, (uintptr_t)counter + counter_bytes}};
    }
    assert_int_equal(fake_log.truncated, 0);
    assert_int_equal(fake_log.unknown_kernels, 0);
    const int n = fake_log.n;
    op_clock *ops = calloc((size_t)n, sizeof *ops);
    recorded *events = calloc((size_t)n, sizeof *events);
    assert_non_null(ops);
    assert_non_null(events);
    cudaStream_t streams[MAX_STREAMS];
    int n_streams = 0, n_ops = 0, n_events = 0, call = -1;
    int clock[MAX_STREAMS][MAX_STREAMS] = {{0}};
    int joined[MAX_STREAMS] = {0};
    for (int i = 0; i < n; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        if (e->op == FAKE_OP_MARK) {
            call = e->mark;
            continue;
        }
        const int s = stream_index(streams, &n_streams, e->stream);
        if (s == 0) joined[s] = 1; /* the capture's origin: its first operation's stream */
        if (e->op == FAKE_OP_WAIT) {
            int found = -1;
            for (int k = n_events - 1; k >= 0 && found < 0; --k)
                if (events[k].event == e->event) found = k;
            if (found < 0) fail_msg("entry %d waits for an event never recorded in the capture", i);
            for (int t = 0; t < MAX_STREAMS; ++t)
                if (events[found].clock[t] > clock[s][t]) clock[s][t] = events[found].clock[t];
            joined[s] = 1;
            continue;
        }
        if (!joined[s]) fail_msg("entry %d: stream %d works in the capture without having joined it", i, s);
        clock[s][s]++;
        if (e->op == FAKE_OP_RECORD) {
            events[n_events].event = e->event;
            memcpy(events[n_events].clock, clock[s], sizeof clock[s]);
            n_events++;
            continue;
        }
        op_clock *o = &ops[n_ops++];
        o->stream = s;
        o->call = call;
        o->entry = i;
        o->slots = slots_touched(e, r, K);
        memcpy(o->clock, clock[s], sizeof clock[s]);
        *used |= o->slots;
        if (o->slots) {
            if (e->op == FAKE_OP_KERNEL) totals.kernel_uses++;
            else if (e->op == FAKE_OP_MATMUL) totals.gemm_uses++;
            else totals.other_uses++;
        }
        if (o->slots && call < 0) fail_msg("entry %d touches a slot outside any block call", i);
        if (o->slots & ~(1u << (call % K)))
            fail_msg("entry %d of call %d (%s) touches slots 0x%x, not only its own (%d)", i, call,
                     e->kernel ? e->kernel : "not a kernel", o->slots, call % K);
    }
    long violations = 0;
    for (int a = 0; a < n_ops; ++a) {
        if (!ops[a].slots) continue;
        for (int b = a + 1; b < n_ops; ++b) {
            if (!(ops[a].slots & ops[b].slots) || ops[a].call == ops[b].call) continue;
            totals.pairs++;
            const int s = ops[a].stream;
            if (ops[a].clock[s] <= ops[b].clock[s]) continue; /* a happens before b */
            violations++;
            if (loud && violations <= 5) {
                const fake_entry *ea = &fake_log.entries[ops[a].entry], *eb = &fake_log.entries[ops[b].entry];
                print_message("unordered: call %d (entry %d, stream %d, %s) and call %d (entry %d, stream %d, %s) "
                              "share slot mask 0x%x\n",
                              ops[a].call, ops[a].entry, ops[a].stream, ea->kernel ? ea->kernel : "not a kernel",
                              ops[b].call, ops[b].entry, ops[b].stream, eb->kernel ? eb->kernel : "not a kernel",
                              ops[a].slots & ops[b].slots);
            }
        }
    }
    free(ops);
    free(events);
    return violations;
}

/* Runs every bucket (plain, then accumulating) of the step, each a new capture, checking each; returns the
 * violations. Every slot a call is given (min(K, layers) of them) must be seen in use. */
static long run_and_check(built *b, int layers, int loud) {
    long violations = 0;
    unsigned used = 0;
    const int64_t buckets[] = {128, 256, 512, 1024};
    for (int acc = 0; acc < 2; ++acc)
        for (size_t i = 0; i < sizeof buckets / sizeof buckets[0]; ++i) {
            fake_log_start();
            current_block = -1;
            const int captures = fake.captures;
            assert_int_equal(gg_step_run(b->step, buckets[i], acc, NULL), GG_SUCCESS);
            fake_log_stop();
            assert_int_equal(fake.captures, captures + 1);
            assert_int_equal(current_block, layers - 1);
            violations += check_capture(b->step, &used, loud);
            /* and every pair of operations on the same bytes, one writing, across the whole step */
            const fake_races r = fake_check_races(0, loud ? 3 : 0);
            totals.race_pairs += r.pairs;
            if (gg_step_test.skip_slot_wait) totals.negative_races += r.races;
            else totals.races += r.races;
            violations += r.races;
            totals.captures++;
        }
    fake_log_free();
    void *scratch, *counter;
    size_t bytes, counter_bytes;
    const int K = gg_step_slot_region(b->step, 0, &scratch, &bytes, &counter, &counter_bytes);
    const int given = layers < K ? layers : K;
    assert_int_equal(used, (1u << given) - 1);
    return violations;
}

static void concurrent_calls_never_share_a_slot(void **state) {
    (void)state;
    gg_step_test.before_block = before_block;
    const int layer_counts[] = {4, 7, 12};
    for (size_t li = 0; li < sizeof layer_counts / sizeof layer_counts[0]; ++li)
        for (int pattern = 0; pattern < 3; ++pattern)
            for (int sides = 1; sides <= 3; ++sides)
                for (int slots = 1; slots <= 4; ++slots) {
                    built b;
                    build(&b, layer_counts[li], pattern, sides, slots);
                    const long v = run_and_check(&b, layer_counts[li], 1);
                    totals.dgelu_gemms += fake.dgelu_matmuls;
                    if (v)
                        print_message("%d layers, pattern %d, %d side streams, %d slots: %ld violations\n",
                                      layer_counts[li], pattern, sides, slots, v);
                    totals.violations += v;
                    totals.steps++;
                    destroy(&b);
                }
    gg_step_test.before_block = NULL;
    assert_int_equal(totals.violations, 0);
    assert_int_equal(totals.races, 0);
    assert_true(totals.pairs > 0 && totals.race_pairs > 0);
    assert_true(totals.dgelu_gemms > 0);
}

/* Without the slot wait the same checker finds calls that race on a slot, in every configuration tried. */
static void negative_control_finds_races(void **state) {
    (void)state;
    gg_step_test.before_block = before_block;
    gg_step_test.skip_slot_wait = 1;
    const int configs[][3] = {{0, 1, 1}, {0, 2, 2}, {0, 2, 3}, {1, 2, 3}, {2, 3, 2}, {0, 3, 4}};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; ++i) {
        built b;
        build(&b, 8, configs[i][0], configs[i][1], configs[i][2]);
        const long v = run_and_check(&b, 8, 0);
        print_message("negative control: pattern %d, %d side streams, %d slots: %ld violations\n", configs[i][0],
                      configs[i][1], configs[i][2], v);
        assert_true(v > 0);
        totals.negative_violations += v;
        destroy(&b);
    }
    gg_step_test.skip_slot_wait = 0;
    gg_step_test.before_block = NULL;
}

/* ---- gradgraph's eager calls inside a callback ---- */

/* A callback may run gradgraph's eager calls (a forward before the next layers, a block the step does not hold):
 * they use the context's scratch arena, which is slot 0, and its second GEMM workspace, which is side stream 0's,
 * while the weight-gradient work of the step's earlier calls may still be running there. Each such call first has its
 * stream wait for that work. Checked on steps of an fp16 MLP and a block-4 call, then a callback running an fp16
 * forward, an fp16 or fp32 backward, on the stream it is handed or on one it forks, with 1-3 side streams: every pair
 * of operations on shared bytes ordered; without the wait (gg_step_test.skip_callback_join) the check finds races
 * wherever the earlier work can still be running (with one side stream, block 4's call joins it before the callback).
 */
enum { CB_TOKENS = 1024, CB_GRADS = 6 };
typedef enum {
    CB_FORWARD_FP16, CB_BACKWARD_FP16, CB_BACKWARD_FP32, CB_FORWARD_FP16_FORKED, CB_KINDS,
    CB_WRITE_GRADIENTS = CB_KINDS /* not an eager call: a write of every parameter gradient of the step's calls */
} cb_kind;
static const char *const cb_names[] = {"an fp16 forward", "an fp16 backward", "an fp32 backward",
                                       "an fp16 forward on a forked stream"};

typedef struct cb_state {
    gg_ctx *ctx;
    cb_kind kind;
    gg_mlp_fwd_args fwd;
    gg_mlp_args bwd;
    cudaStream_t fork;
    cudaEvent_t forked, joined;
    void *grads[CB_GRADS]; /* the step's calls' parameter gradients */
    gg_status status;
} cb_state;

static gg_mlp_desc cb_desc(const cb_state *c, int64_t rows) {
    const gg_precision p = c->kind == CB_BACKWARD_FP32 ? GG_PRECISION_FP32 : GG_PRECISION_FP16;
    return (gg_mlp_desc){.tokens = rows, .hidden = HIDDEN, .ffn = FFN, .precision = p};
}

/* The callback's (or, before the step, the planning) call: forward or backward, on `stream`. */
static gg_status cb_call(const cb_state *c, int64_t rows, gg_stream stream) {
    const gg_mlp_desc d = cb_desc(c, rows);
    const int forward = c->kind == CB_FORWARD_FP16 || c->kind == CB_FORWARD_FP16_FORKED;
    return forward ? gg_mlp_forward(c->ctx, &d, &c->fwd, stream) : gg_mlp_backward(c->ctx, &d, &c->bwd, stream);
}

static void eager_callback(void *user, gg_stream stream, int64_t rows) {
    cb_state *c = user;
    if (c->kind == CB_WRITE_GRADIENTS) { /* what an optimizer of the caller's, or a clipping pass, would do */
        for (int i = 0; i < CB_GRADS; ++i)
            if (cudaMemsetAsync(c->grads[i], 0, TENSOR_BYTES, (cudaStream_t)stream) != cudaSuccess)
                c->status = GG_ERROR_CUDA;
        return;
    }
    if (c->kind != CB_FORWARD_FP16_FORKED) {
        c->status = cb_call(c, rows, stream);
        return;
    }
    cudaEventRecord(c->forked, (cudaStream_t)stream);
    cudaStreamWaitEvent(c->fork, c->forked, 0);
    c->status = cb_call(c, rows, (gg_stream)c->fork);
    cudaEventRecord(c->joined, c->fork);
    cudaStreamWaitEvent((cudaStream_t)stream, c->joined, 0);
}

/* The races of one capture: a step of an fp16 MLP call and a block-4 call, then the callback (a gradient callback
 * when after_gradients). */
static int callback_races(cb_kind kind, int sides, int after_gradients) {
    fake_reset(1);
    fake.plan_ok = 1;
    fake.device_space = 1;
    void *owned[48];
    int n = 0;
    cb_state c = {.kind = kind};
    gg_config config = GG_CONFIG_INIT;
    config.autotune = 0;
    assert_int_equal(gg_ctx_create(&config, &c.ctx), GG_SUCCESS);
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.min_tokens = sc.max_tokens = CB_TOKENS;
    sc.side_streams = sides;
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(c.ctx, &sc, &step), GG_SUCCESS);
    const gg_mlp_desc mlp = {.tokens = 1, .hidden = HIDDEN, .ffn = FFN, .precision = GG_PRECISION_FP16};
    gg_mlp_args a = {device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                     device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                     device(owned, &n), NULL, NULL, NULL, NULL, NULL, NULL};
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a), GG_SUCCESS);
    const gg_ssm_gate_desc ssm = {.tokens = 1, .hidden = HIDDEN, .expanded = EXPANDED, .use_silu_gate = 1};
    const gg_ssm_gate_args s = {device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                                device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                                device(owned, &n), device(owned, &n)};
    assert_int_equal(gg_step_add_ssm_gate(step, &ssm, &s), GG_SUCCESS);
    void *const grads[CB_GRADS] = {a.grad_weight1, a.grad_bias1, a.grad_weight2, a.grad_bias2, s.grad_weight,
                                   s.grad_bias};
    memcpy(c.grads, grads, sizeof grads);
    c.fwd = (gg_mlp_fwd_args){.hidden_states = device(owned, &n), .weight1 = device(owned, &n),
                              .bias1 = device(owned, &n), .weight2 = device(owned, &n), .bias2 = device(owned, &n),
                              .intermediate = device(owned, &n), .intermediate_activated = device(owned, &n),
                              .output = device(owned, &n)};
    c.bwd = (gg_mlp_args){device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                          device(owned, &n), device(owned, &n), device(owned, &n), device(owned, &n),
                          device(owned, &n), device(owned, &n), device(owned, &n), NULL, NULL, NULL, NULL, NULL, NULL};
    if (kind != CB_WRITE_GRADIENTS) assert_int_equal(cb_call(&c, CB_TOKENS, NULL), GG_SUCCESS); /* planned first */
    assert_int_equal(cudaStreamCreateWithFlags(&c.fork, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&c.forked, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&c.joined, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal((after_gradients ? gg_step_add_gradient_callback : gg_step_add_callback)(step, eager_callback, &c),
                     GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    fake_log_start();
    assert_int_equal(gg_step_run(step, CB_TOKENS, 0, NULL), GG_SUCCESS);
    fake_log_stop();
    assert_int_equal(c.status, GG_SUCCESS);
    assert_int_equal(fake_log.truncated, 0);
    const fake_races r = fake_check_races(0, 0);
    fake_log_free();
    gg_step_destroy(step);
    cudaEventDestroy(c.forked);
    cudaEventDestroy(c.joined);
    cudaStreamDestroy(c.fork);
    for (int i = 0; i < n; ++i) assert_int_equal(cudaFree(owned[i]), cudaSuccess);
    gg_ctx_destroy(c.ctx);
    assert_int_equal(fake.live, 0);
    return r.races;
}

static void eager_calls_in_callbacks_wait_for_earlier_work(void **state) {
    (void)state;
    for (int kind = 0; kind < CB_KINDS; ++kind)
        for (int sides = 1; sides <= 3; ++sides) {
            const int races = callback_races((cb_kind)kind, sides, 0);
            gg_step_test.skip_callback_join = 1;
            const int unjoined = callback_races((cb_kind)kind, sides, 0);
            gg_step_test.skip_callback_join = 0;
            print_message("%s in a callback, %d side streams: %d races (%d without the wait)\n", cb_names[kind],
                          sides, races, unjoined);
            assert_int_equal(races, 0);
            if (sides > 1) assert_true(unjoined > 0); /* with one, block 4's join of its chain orders them already */
        }
}

/* A gradient callback (gg_step_add_gradient_callback) runs once every earlier call's weight-gradient work is joined:
 * one that writes every parameter gradient of the step (an optimizer of the caller's, clipping) races with nothing,
 * with 1-3 side streams, where the same callback added as a plain one races with that work; an eager call inside a
 * gradient callback needs no wait of its own. */
static void gradient_callbacks_run_after_every_gradient(void **state) {
    (void)state;
    for (int sides = 1; sides <= 3; ++sides) {
        const int races = callback_races(CB_WRITE_GRADIENTS, sides, 1);
        const int plain = callback_races(CB_WRITE_GRADIENTS, sides, 0);
        gg_step_test.skip_callback_join = 1;
        const int eager = callback_races(CB_BACKWARD_FP16, sides, 1);
        gg_step_test.skip_callback_join = 0;
        print_message("the parameter gradients written in a gradient callback, %d side streams: %d races (%d in a "
                      "plain callback); an fp16 backward there without its own wait: %d races\n",
                      sides, races, plain, eager);
        assert_int_equal(races, 0);
        assert_true(plain > 0);
        assert_int_equal(eager, 0);
    }
}

int main(void) {
    setenv("GG_FFN_DGELU", "epilogue", 1); /* read as each plan is built */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_calls_never_share_a_slot),
        cmocka_unit_test(negative_control_finds_races),
        cmocka_unit_test(eager_calls_in_callbacks_wait_for_earlier_work),
        cmocka_unit_test(gradient_callbacks_run_after_every_gradient),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("RING_PROOF {\"steps\": %d, \"captures\": %d, \"pairs_checked\": %ld, \"violations\": %ld, "
           "\"negative_control_violations\": %ld, \"slot_uses\": {\"kernel\": %ld, \"gemm\": %ld, \"other\": %ld}, "
           "\"race_pairs\": %ld, \"races\": %ld, \"negative_control_races\": %ld, \"dgelu_gemms\": %ld}\n",
           totals.steps, totals.captures, totals.pairs, totals.violations, totals.negative_violations,
           totals.kernel_uses, totals.gemm_uses, totals.other_uses, totals.race_pairs, totals.races,
           totals.negative_races, totals.dgelu_gemms);
    return failed;
}
