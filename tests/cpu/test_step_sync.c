/*
 * test_step_sync.c - step graphs that reduce their gradients across ranks, on the CPU: the CUDA runtime and NCCL
 * are the link-time fakes of tests/fake, the communicator a fake one attached as rank 0 of 2, and fake_nccl's log
 * shows every NCCL call with its arguments and where it stood among the CUDA work. A 3-layer MLP step with a
 * gg_step_add_reduce buffer and a bucket_bytes that splits a weight gradient: finalize agrees with the other ranks
 * outside any capture; the first run captures one NCCL group per bucket, in the layout's order, each piece's pointer,
 * count, type and op exactly as gg_reduce_layout_make packs a gradient list written out here by hand, every call on
 * the communication stream inside the capture, and launches once; a replay issues nothing. gg_step_set_sync(step, 0)
 * runs an exec of its own without collectives, and 1 finds the first exec again. gg_step_run_device refuses a
 * syncing step before capturing anything; gg_dist_detach refuses while a step holds NCCL work. With
 * gg_step_add_optimizer every optimizer launch comes after the last group. In fp16 mode with the operands' fp16
 * copies given, a syncing step converts nothing and reduces the same. Under reduce-scatter each piece goes into this
 * rank's shard of itself (a step's gradients kept whole, gg_dist_reduce's buffer too), and what the ranks cannot
 * share is refused first (gg_dist_reduce's count; a graph's or step's weight gradients, named). With overlap off, a
 * syncing graph reduces after the block's whole backward. A step that fails its own checks still votes (failed) in
 * the ranks' agreement. Every collective of a syncing step's capture,
 * and of syncing block graphs', is ordered by the capture's streams and events against every operation on its bytes
 * (fake_log's vector clocks, the collectives logged among the CUDA work). Then every NCCL call of a syncing run is
 * failed in turn (fake_nccl.h's fault injection), half of the runs with non-blocking calls that return ncclInProgress:
 * GG_ERROR_NCCL naming the call and NCCL's error, the communicator aborted (this rank's part of the reduction is
 * missing) and the message saying so, no capture left open, nothing leaked, the step refused after it (run again where
 * no fault came) and the context usable afterwards. Prints `STEP_SYNC_FAULTS {"injected": n, "failures": m}`. Last,
 * every host allocation and every CUDA resource creation along a syncing step's life (finalize's agreement and
 * reduction layout included) is failed in turn: a failure naming the call, nothing leaked, the context usable after.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ddp.h"
#include "fake_cuda.h"
#include "fake_nccl.h"
#include "fake_order.h"
#include "gradgraph.h"
#include "internal.h"
#include "optim.h"
#include "step_reduce.h"

enum { LAYERS = 3, HIDDEN = 256, FFN = 1024, REDUCE_COUNT = 5000, TOKENS = 512 };
/* 1 MiB weight gradients in pieces of 99968 floats (bucket_bytes rounded down to 256 bytes): three each, the last
 * piece of one gradient sharing a bucket with the next gradient's first */
#define BUCKET_BYTES ((size_t)400000)

static const gg_mlp_desc mlp = {.tokens = 1, .hidden = HIDDEN, .ffn = FFN, .precision = GG_PRECISION_FP32};

/* Layer l's args: its own tensors, grad_output the previous layer's grad_hidden_states (l > 0). */
static gg_mlp_args mlp_args(int l) {
    const int b = 16 * l;
    gg_mlp_args a = {FAKE(b + 0), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5), FAKE(b + 6),
                     FAKE(b + 7), FAKE(b + 8), FAKE(b + 9), FAKE(b + 10), NULL, NULL, NULL, NULL, NULL, NULL};
    if (l > 0) a.grad_output = FAKE(16 * (l - 1) + 6);
    return a;
}
static float *const reduce_buffer = FAKE(100);

/* Block 4 in its syncing graphs: 4096 tokens, its tensors at FAKE(100) .. FAKE(109). */
static const gg_ssm_gate_desc ssm_desc = {.tokens = 4096, .hidden = 768, .expanded = 1536, .use_silu_gate = 1};
static const gg_ssm_gate_args ssm_args = {FAKE(100), FAKE(101), FAKE(102), FAKE(103), FAKE(104),
                                          FAKE(105), FAKE(106), FAKE(107), FAKE(108), FAKE(109)};

static void contains(const char *message, const char *part) {
    if (!strstr(message, part)) fail_msg("\"%s\" does not say \"%s\"", message, part);
}

static void loss_callback(void *user, gg_stream stream, int64_t tokens) { (void)user, (void)stream, (void)tokens; }

/* The fake device of the current group run: 0 (no sm_90a routes) or 90 (an H100/H200: the Hopper kernels' routes). */
static int device_cc;

/* A context on the fakes with a fake communicator attached with dc (cpus left unbound) as `rank` of `size` (*comm:
 * the caller's to destroy; its messages at INFO and above to log, when given). */
static gg_ctx *dist_ctx_sized(ncclComm_t *comm, gg_dist_config dc, int rank, int size, gg_log_fn log) {
    fake_reset(2);
    fake.compute_capability = device_cc;
    fake.plan_ok = 1;
    fake.device_space = 1; /* device memory at addresses as far apart as its sizes: the captures' ranges are real */
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    c.log_fn = log;
    if (log) c.log_level = GG_LOG_INFO;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    fake_nccl_reset(rank, size);
    dc.bind_cpus = 0;
    *comm = fake_nccl_comm();
    assert_int_equal(gg_dist_attach(ctx, *comm, &dc), GG_SUCCESS);
    return ctx;
}

/* The same with buckets of BUCKET_BYTES. */
static gg_ctx *dist_ctx_with(ncclComm_t *comm, gg_dist_config dc, int rank, int size, gg_log_fn log) {
    dc.bucket_bytes = BUCKET_BYTES;
    return dist_ctx_sized(comm, dc, rank, size, log);
}

/* Rank 0 of 2 with buckets of `bytes`. */
static gg_ctx *dist_ctx_buckets(ncclComm_t *comm, gg_dist_config dc, size_t bytes) {
    dc.bucket_bytes = bytes;
    return dist_ctx_sized(comm, dc, 0, 2, NULL);
}

static gg_ctx *dist_ctx_in(ncclComm_t *comm, gg_grad_sync sync, int rank, int size, gg_log_fn log) {
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.sync = sync;
    return dist_ctx_with(comm, dc, rank, size, log);
}

static gg_ctx *dist_ctx_of(ncclComm_t *comm, gg_grad_sync sync, int rank, gg_log_fn log) {
    return dist_ctx_in(comm, sync, rank, 2, log);
}

static gg_ctx *dist_ctx_syncing(ncclComm_t *comm, gg_grad_sync sync) { return dist_ctx_of(comm, sync, 0, NULL); }

static gg_ctx *dist_ctx(ncclComm_t *comm) { return dist_ctx_syncing(comm, GG_SYNC_ALL_REDUCE); }

/* Detaches, destroys the context and the caller's communicator; nothing may be left alive. */
static void end_ctx(gg_ctx *ctx, ncclComm_t comm) {
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    gg_ctx_destroy(ctx);
    if (fake_nccl_is_live(comm)) fake_nccl_destroy(comm);
    assert_int_equal(fake.live, 0);
    assert_int_equal(atomic_load(&fake_nccl.live), 0);
    assert_int_equal(fake.captures_open, 0);
}

/* The caller's own gradient, written in the callback before its gg_step_add_reduce (a memset: its whole range). */
static void write_own_gradient(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)tokens;
    (void)cudaMemsetAsync(reduce_buffer, 0, REDUCE_COUNT * sizeof(float), (cudaStream_t)stream);
}

/* A step of TOKENS rows with no call yet (its sync_gradients as given), which must be made. */
static gg_step *empty_step(gg_ctx *ctx, int sync_gradients) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = TOKENS;
    sc.sync_gradients = sync_gradients;
    gg_step *step = NULL;
    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
    return step;
}

/* The step: the loss callback, the LAYERS MLP calls (calls 1 .. LAYERS), a callback that writes the caller's own
 * gradient, that gradient's gg_step_add_reduce, and the optimizer when given. Not finalized. Made without asserting
 * (*step NULL if it could not be created): the first failure's status. */
static gg_status make_mlp_step(gg_ctx *ctx, int sync_gradients, gg_optim *opt, gg_step **step) {
    gg_step_config sc = GG_STEP_CONFIG_INIT;
    sc.max_tokens = TOKENS;
    sc.sync_gradients = sync_gradients;
    gg_status st = gg_step_create(ctx, &sc, step);
    if (st == GG_SUCCESS) st = gg_step_add_callback(*step, loss_callback, NULL);
    for (int l = 0; l < LAYERS && st == GG_SUCCESS; ++l) {
        const gg_mlp_args a = mlp_args(l);
        st = gg_step_add_mlp(*step, &mlp, &a);
    }
    if (st == GG_SUCCESS) st = gg_step_add_callback(*step, write_own_gradient, NULL);
    if (st == GG_SUCCESS) st = gg_step_add_reduce(*step, reduce_buffer, REDUCE_COUNT, 0);
    if (st == GG_SUCCESS && opt) st = gg_step_add_optimizer(*step, opt);
    return st;
}

/* make_mlp_step, which must succeed. */
static gg_step *mlp_step(gg_ctx *ctx, int sync_gradients, gg_optim *opt) {
    gg_step *step = NULL;
    assert_int_equal(make_mlp_step(ctx, sync_gradients, opt, &step), GG_SUCCESS);
    return step;
}

/* mlp_step syncing, finalized. */
static gg_step *finalized_mlp_step(gg_ctx *ctx, gg_optim *opt) {
    gg_step *step = mlp_step(ctx, 1, opt);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    return step;
}

/* The gradients mlp_step reduces, in the order they are produced, written out from the block's table (dW1, dW2, db1,
 * db2 of each MLP call, produced by that call) rather than taken from the step. */
static int expected_grads(gg_reduce_grad *g) {
    int n = 0;
    for (int l = 0; l < LAYERS; ++l) {
        const gg_mlp_args a = mlp_args(l);
        const int call = 1 + l;
        g[n++] = (gg_reduce_grad){a.grad_weight1, (size_t)FFN * HIDDEN, 4, call};
        g[n++] = (gg_reduce_grad){a.grad_weight2, (size_t)HIDDEN * FFN, 4, call};
        g[n++] = (gg_reduce_grad){a.grad_bias1, FFN, 4, call};
        g[n++] = (gg_reduce_grad){a.grad_bias2, HIDDEN, 4, call};
    }
    g[n++] = (gg_reduce_grad){reduce_buffer, REDUCE_COUNT, 4, 1 + LAYERS + 1};
    return n;
}

static size_t collectives_logged(void) {
    size_t n = 0;
    for (int i = 0; i < fake_nccl.logged; ++i) n += fake_nccl.log[i].what >= FNC_ALL_REDUCE;
    return n;
}

/* The log holds exactly the layout's buckets: per bucket a group start, one in-place collective (mean, fp32) per
 * piece on the communication stream, and a group end, all inside one capture. The collective is an all-reduce at
 * the piece's address and count, or under reduce-scatter one from the piece into this rank's shard of it (a count
 * of the piece's over the ranks). */
static void log_is_the_layout(const gg_ctx *ctx, ncclComm_t comm, const gg_reduce_layout *l,
                              const gg_reduce_grad *g) {
    const int scatter = ctx->dist->config.sync == GG_SYNC_REDUCE_SCATTER, rank = ctx->dist->rank;
    const size_t ranks = (size_t)ctx->dist->size;
    assert_true(fake_nccl.logged <= FAKE_NCCL_LOG);
    int at = 0;
    const int capture = fake.captures;
    for (int b = 0; b < l->n_buckets; ++b) {
        const gg_reduce_bucket *k = &l->buckets[b];
        assert_true(at + k->n + 2 <= fake_nccl.logged);
        const fake_nccl_call *start = &fake_nccl.log[at++];
        assert_int_equal(start->what, FNC_GROUP_START);
        assert_int_equal(start->depth, 1);
        for (int i = k->first; i < k->first + k->n; ++i) {
            const fake_nccl_call *c = &fake_nccl.log[at++];
            const gg_reduce_piece *p = &l->pieces[i];
            const char *expect = (const char *)g[p->grad].ptr + p->offset * 4;
            const size_t count = scatter ? p->count / ranks : p->count;
            assert_int_equal(c->what, scatter ? FNC_REDUCE_SCATTER : FNC_ALL_REDUCE);
            assert_ptr_equal(c->send, expect);
            assert_ptr_equal(c->recv, expect + (scatter ? (size_t)rank * count * 4 : 0)); /* in place */
            assert_int_equal(c->count, count);
            assert_int_equal(c->type, ncclFloat32);
            assert_int_equal(c->op, ncclAvg); /* GG_REDUCE_AVERAGE */
            assert_ptr_equal(c->comm, comm);
            assert_ptr_equal(c->stream, ctx->dist->stream);
            assert_int_equal(c->depth, 1);
            assert_int_equal(c->captures_open, 1);
            assert_int_equal(c->captures, capture);
            assert_int_equal(c->result, ncclSuccess);
        }
        const fake_nccl_call *end = &fake_nccl.log[at++];
        assert_int_equal(end->what, FNC_GROUP_END);
        assert_int_equal(end->depth, 0);
        assert_int_equal(end->captures_open, 1);
        assert_int_equal(end->result, ncclSuccess);
    }
    assert_int_equal(at, fake_nccl.logged);
}

static void reset_counts(void) {
    memset(fake.calls, 0, sizeof fake.calls);
    fake.graph_launches = 0;
    fake.enqueued = 0;
    fake_nccl_clear_log();
}

/* (1) finalize agrees outside any capture; the first run captures the layout's groups; a replay issues nothing.
 * (2) sync off: an exec of its own, no collectives; back on: the first exec. (3) gg_step_run_device refused while
 * syncing. (4) gg_dist_detach refused while the step holds NCCL work. */
static void captures_one_group_per_bucket(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_step *step = mlp_step(ctx, 1, NULL);

    gg_reduce_grad grads[4 * LAYERS + 1];
    const int n_grads = expected_grads(grads);
    gg_reduce_layout layout;
    assert_int_equal(gg_reduce_layout_make(grads, n_grads, BUCKET_BYTES, 0, &layout), 0);
    /* the packing this test is about: several buckets, one gradient cut across two of them */
    assert_true(layout.n_buckets >= 4);
    int split = 0;
    for (int b = 0; b + 1 < layout.n_buckets; ++b) {
        const gg_reduce_piece *last = &layout.pieces[layout.buckets[b].first + layout.buckets[b].n - 1];
        const gg_reduce_piece *next = &layout.pieces[layout.buckets[b + 1].first];
        split += last->grad == next->grad;
    }
    assert_true(split >= 1);
    print_message("%d gradients, %d pieces in %d buckets, %d bucket boundaries inside a gradient\n", n_grads,
                  layout.n_pieces, layout.n_buckets, split);

    /* finalize: the agreements (every rank's checks, the fingerprint: an all-reduce of 4 int32 with min, then the
     * GEMM algorithms), on the communication stream, outside any capture */
    reset_counts();
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    assert_int_equal(fake.captures_open, 0);
    int fingerprint = 0, all_ok = 0, broadcasts = 0;
    for (int i = 0; i < fake_nccl.logged; ++i) {
        const fake_nccl_call *c = &fake_nccl.log[i];
        assert_int_equal(c->captures_open, 0);
        if (c->what == FNC_GROUP_START || c->what == FNC_GROUP_END) continue;
        assert_ptr_equal(c->stream, ctx->dist->stream);
        assert_ptr_equal(c->comm, comm);
        if (c->what == FNC_ALL_REDUCE && c->type == ncclInt32 && c->op == ncclMin) {
            fingerprint += c->count == 4;
            all_ok += c->count == 1;
        }
        broadcasts += c->what == FNC_BROADCAST && c->root == 0;
    }
    assert_int_equal(fingerprint, 1);
    assert_int_equal(all_ok, 2);        /* the step's checks, then the plans made (before adopting rank 0's) */
    assert_true(broadcasts >= 1);       /* rank 0's GEMM algorithms */
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);

    /* the first run: one capture holding exactly the layout's groups, one launch */
    reset_counts();
    const int captures = fake.captures;
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
    assert_int_equal(fake.captures, captures + 1);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 1);
    assert_int_equal(fake.graph_launches, 1);
    log_is_the_layout(ctx, comm, &layout, grads);
    assert_int_equal(collectives_logged(), (size_t)layout.n_pieces);
    assert_ptr_not_equal(ctx->dist->stream, ctx->capture); /* the communication stream is not the captured one */

    /* a replay: no capture, no collective, one launch */
    reset_counts();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake_nccl.logged, 0);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake.graph_launches, 1);

    /* (2) sync off: an exec of its own without collectives, then replayed; back on: the first exec */
    assert_int_equal(gg_step_set_sync(step, 0), GG_SUCCESS);
    reset_counts();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake_nccl.logged, 0);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 1);
    assert_int_equal(fake.calls[FAKE_EXEC_UPDATE], 0);
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
    gg_step_memory mem;
    assert_int_equal(gg_step_memory_info(step, &mem), GG_SUCCESS);
    assert_int_equal(mem.execs, 2);
    assert_int_equal(gg_step_set_sync(step, 1), GG_SUCCESS);
    reset_counts();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake_nccl.logged, 0);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake.calls[FAKE_INSTANTIATE], 0);
    assert_int_equal(fake.calls[FAKE_EXEC_UPDATE], 0);
    assert_int_equal(fake.graph_launches, 1);
    assert_int_equal(gg_step_set_sync(step, 2), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_step_set_sync: sync = 2 is not 0 or 1");

    /* (3) gg_step_run_device on the syncing step: refused, nothing captured or enqueued */
    const int64_t *device_tokens = (const int64_t *)FAKE(300);
    reset_counts();
    assert_int_equal(gg_step_run_device(step, device_tokens, 0, NULL), GG_ERROR_UNSUPPORTED);
    contains(gg_last_error(ctx), "gg_step_run_device: the step reduces gradients across ranks");
    contains(gg_last_error(ctx), "gg_step_set_sync(step, 0)");
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake.enqueued, 0);
    assert_int_equal(fake_nccl.logged, 0);
    /* with sync off it runs: every bucket behind the selection, no collective */
    assert_int_equal(gg_step_set_sync(step, 0), GG_SUCCESS);
    assert_int_equal(gg_step_run_device(step, device_tokens, 0, NULL), GG_SUCCESS);
    assert_true(fake.calls[FAKE_BEGIN_CAPTURE] >= 1);
    assert_int_equal(collectives_logged(), 0);
    assert_int_equal(gg_step_set_sync(step, 1), GG_SUCCESS);

    /* (4) gg_dist_detach refused while the step exists (it holds NCCL work), accepted once it is destroyed */
    assert_int_equal(gg_dist_detach(ctx), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_detach: graphs or steps that captured NCCL work still exist");
    assert_int_equal(gg_dist_size(ctx), 2);
    reset_counts(); /* refused before anything: the step still replays */
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake.graph_launches, 1);
    assert_int_equal(fake_nccl.logged, 0);
    gg_step_destroy(step);
    gg_reduce_layout_free(&layout);
    end_ctx(ctx, comm);
}

/* A run of step refused with status and a message containing text: nothing captured, no NCCL work enqueued. */
static void expect_run_refused(gg_ctx *ctx, gg_step *step, gg_status status, const char *text) {
    reset_counts();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), status);
    contains(gg_last_error(ctx), text);
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    assert_int_equal(fake_nccl.logged, 0);
}

/* A syncing step whose communicator was aborted (gg_dist_abort, the watchdog) refuses to run with GG_ERROR_NCCL saying
 * why, capturing and enqueuing nothing; gg_dist_comm says NULL. */
static void aborted_communicator_refuses_the_run(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_step *step = mlp_step(ctx, 1, NULL);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    assert_non_null(gg_dist_comm(ctx));
    assert_int_equal(gg_dist_abort(ctx), GG_SUCCESS);
    assert_null(gg_dist_comm(ctx));
    expect_run_refused(ctx, step, GG_ERROR_NCCL, "the communicator was aborted: gg_dist_abort was called");
    gg_step_destroy(step);
    end_ctx(ctx, comm);
}

/* A syncing step that never ran holds no NCCL work: detach is accepted, and the step then refuses to sync without
 * its communicator (sync off, it still runs); the same communicator attached again (the same address, other
 * buckets: the ranks have not agreed on this step's layout under it) is refused too. */
static void detach_before_any_run(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_step *step = mlp_step(ctx, 1, NULL);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
    expect_run_refused(ctx, step, GG_ERROR_INVALID_ARGUMENT,
                       "gg_step_run: the step reduces gradients, but the communicator it was finalized with is gone");
    assert_int_equal(gg_step_set_sync(step, 0), GG_SUCCESS);
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    assert_int_equal(fake_nccl.logged, 0);
    gg_dist_config dc = GG_DIST_CONFIG_INIT;
    dc.bind_cpus = 0;
    dc.bucket_bytes = 2 * BUCKET_BYTES;
    assert_int_equal(gg_dist_attach(ctx, comm, &dc), GG_SUCCESS);
    assert_int_equal(gg_step_set_sync(step, 1), GG_SUCCESS);
    expect_run_refused(ctx, step, GG_ERROR_INVALID_ARGUMENT, "the communicator it was finalized with is gone");
    gg_step_destroy(step);
    end_ctx(ctx, comm);
}

/* The kernel launches a capture made after its last NCCL group ended: 0 when it has no group. */
static int launches_after_last_group(int total) {
    for (int i = fake_nccl.logged - 1; i >= 0; --i)
        if (fake_nccl.log[i].what == FNC_GROUP_END) return total - fake_nccl.log[i].launches;
    return -1;
}

/* (5) the optimizer in a syncing step: its launches come after the last bucket's group, and the block calls' all
 * come before it. */
static void optimizer_after_the_reduction(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_optim *opt = NULL;
    assert_int_equal(gg_optim_create(ctx, NULL, &opt), GG_SUCCESS);
    const gg_mlp_args a0 = mlp_args(0);
    const gg_optim_param p = {.param = FAKE(200), .grad = a0.grad_weight1, .count = (int64_t)FFN * HIDDEN};
    assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    gg_step *plain = finalized_mlp_step(ctx, NULL), *with = finalized_mlp_step(ctx, opt);
    int total[2], after[2], at_last_group[2];
    gg_step *steps[2] = {plain, with};
    for (int k = 0; k < 2; ++k) {
        reset_counts();
        assert_int_equal(gg_step_run(steps[k], TOKENS, 0, NULL), GG_SUCCESS);
        assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 1);
        total[k] = fake.calls[FAKE_LAUNCH];
        after[k] = launches_after_last_group(total[k]);
        at_last_group[k] = total[k] - after[k];
    }
    print_message("kernel launches: %d without the optimizer (%d after the last group), %d with it (%d after)\n",
                  total[0], after[0], total[1], after[1]);
    assert_int_equal(after[0], 0);                   /* the last group follows the last producer's work */
    assert_int_equal(at_last_group[1], total[0]);    /* with the optimizer: every block launch before the group */
    assert_true(after[1] >= 2);                      /* the optimizer's own launches (norm, total, update) after */
    assert_int_equal(after[1], total[1] - total[0]); /* and nothing else */
    gg_step_destroy(plain);
    gg_step_destroy(with);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* (6) fp16 mode with the operands' fp16 copies in a syncing step (the weights-first order: dW2, G, R, dW1, dX on one
 * stream, each gradient reduced as it is final): every layer reads its four copies, so no conversion kernel runs
 * (block 3 converts dY inside its column sum), where the same step without copies converts X, act, W1 and W2 of every
 * layer; the collectives are the same. */
static void fp16_copies_in_a_syncing_step(void **state) {
    (void)state;
    size_t collectives[2] = {0, 0};
    int conversions[2] = {0, 0};
    for (int copies = 0; copies < 2; ++copies) {
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx(&comm);
        gg_step *step = empty_step(ctx, 1);
        gg_mlp_desc d = mlp;
        d.precision = GG_PRECISION_FP16;
        for (int l = 0; l < LAYERS; ++l) {
            gg_mlp_args a = mlp_args(l);
            if (copies) { /* past every other fake address of the step */
                a.hidden_states_fp16 = FAKE(300 + 4 * l);
                a.weight1_fp16 = FAKE(301 + 4 * l);
                a.weight2_fp16 = FAKE(302 + 4 * l);
                a.intermediate_activated_fp16 = FAKE(303 + 4 * l);
            }
            assert_int_equal(gg_step_add_mlp(step, &d, &a), GG_SUCCESS);
        }
        assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
        reset_counts();
        const int before = fake_kernel_launches("f32_to_f16");
        assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
        assert_int_equal(fake.captures_open, 0);
        conversions[copies] = fake_kernel_launches("f32_to_f16") - before;
        collectives[copies] = collectives_logged();
        gg_step_destroy(step);
        end_ctx(ctx, comm);
    }
    print_message("syncing fp16 step: %d conversions without copies, %d with; %zu collectives each\n", conversions[0],
                  conversions[1], collectives[1]);
    assert_int_equal(conversions[1], 0);
    assert_true(conversions[0] >= 2 * LAYERS); /* at least X and act per layer (a route may read a weight in fp32) */
    assert_true(collectives[0] > 0);
    assert_int_equal(collectives[1], collectives[0]);
}

/* (5c) A parameter whose gradient the step does not reduce would be updated on each rank from its own gradient:
 * finalizing the syncing step says so in a WARN naming the parameter; parameters whose gradients are the step's, or
 * lie inside a gg_step_add_reduce buffer, are not named; a local step says nothing. A run with sync off and the
 * update on, on a syncing step with an optimizer, WARNs likewise when it is captured; with the update off too (the
 * micro-batches of an accumulation) it says nothing. */
static char sync_warnings[4096];
static void keep_warnings(void *user, gg_log_level level, const char *message) {
    (void)user;
    const size_t used = strlen(sync_warnings);
    if (level == GG_LOG_WARN && used + 2 < sizeof sync_warnings)
        snprintf(sync_warnings + used, sizeof sync_warnings - used, "%s\n", message);
}

static void optimizer_parameter_not_reduced_is_named(void **state) {
    (void)state;
    for (int syncing = 1; syncing >= 0; --syncing) {
        sync_warnings[0] = '\0';
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx_of(&comm, GG_SYNC_ALL_REDUCE, 0, keep_warnings);
        gg_optim *opt = NULL;
        assert_int_equal(gg_optim_create(ctx, NULL, &opt), GG_SUCCESS);
        const gg_mlp_args a0 = mlp_args(0);
        const gg_optim_param params[] = {
            {.param = FAKE(200), .grad = a0.grad_weight1, .count = (int64_t)FFN * HIDDEN}, /* a block call's */
            {.param = FAKE(201), .grad = (char *)reduce_buffer + 400, .count = 1000},       /* inside an add_reduce */
            {.param = FAKE(202), .grad = FAKE(203), .count = 77},                           /* nobody's */
        };
        for (int i = 0; i < 3; ++i) assert_int_equal(gg_optim_add_param(opt, &params[i]), GG_SUCCESS);
        assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
        gg_step *step = mlp_step(ctx, syncing, opt);
        assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
        print_message("%s step's warnings: %s\n", syncing ? "syncing" : "local", sync_warnings);
        char finalized[sizeof sync_warnings];
        memcpy(finalized, sync_warnings, sizeof finalized);
        /* sync off: with the update off nothing is said; with it on, a WARN that the weights would drift apart
         * (syncing steps only) */
        for (int update = 0; update <= 1; ++update) {
            sync_warnings[0] = '\0';
            assert_int_equal(gg_step_set_sync(step, 0), GG_SUCCESS);
            assert_int_equal(gg_step_set_update(step, update), GG_SUCCESS);
            assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
            const int warned = strstr(sync_warnings, "gg_step_run: a run with sync off on a step with an optimizer "
                                                     "updates each rank's weights") != NULL;
            if (warned != (syncing && update))
                fail_msg("%s step, sync off, update %d: \"%s\"", syncing ? "syncing" : "local", update,
                         sync_warnings);
        }
        assert_int_equal(gg_step_set_sync(step, 1), GG_SUCCESS);
        memcpy(sync_warnings, finalized, sizeof finalized);
        if (syncing) {
            if (!strstr(sync_warnings, "gg_step_finalize: the optimizer's parameter 2 has a gradient") ||
                !strstr(sync_warnings, "77 elements) that the step does not reduce") ||
                !strstr(sync_warnings, "the ranks' weights will drift apart"))
                fail_msg("no WARN naming parameter 2: \"%s\"", sync_warnings);
            assert_null(strstr(sync_warnings, "parameter 0 "));
            assert_null(strstr(sync_warnings, "parameter 1 "));
        } else {
            assert_null(strstr(sync_warnings, "does not reduce"));
        }
        gg_step_destroy(step);
        gg_optim_destroy(opt);
        end_ctx(ctx, comm);
    }
}

/* An optimizer that updates parameters apart (neither clipping nor the finite check waits for every gradient). */
static gg_optim *optimizer_updating_apart(gg_ctx *ctx) {
    gg_optim_config oc = GG_OPTIM_CONFIG_INIT;
    oc.check_finite = 0; /* and max_grad_norm 0 */
    gg_optim *opt = NULL;
    assert_int_equal(gg_optim_create(ctx, &oc, &opt), GG_SUCCESS);
    return opt;
}

/* optimizer_updating_apart, finalized, with a parameter for each gradient mlp_step reduces (expected_grads; gradient
 * i's weights at FAKE(200 + i)); *n: how many. */
static gg_optim *optimizer_of_every_gradient(gg_ctx *ctx, int *n) {
    gg_reduce_grad grads[4 * LAYERS + 1];
    *n = expected_grads(grads);
    gg_optim *opt = optimizer_updating_apart(ctx);
    for (int i = 0; i < *n; ++i) {
        const gg_optim_param p = {.param = FAKE(200 + i), .grad = grads[i].ptr, .count = (int64_t)grads[i].count};
        assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
    }
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    return opt;
}

/* The kernel launches of one run of a finalized step (the run's NCCL calls are in fake_nccl's log after it). */
static int launches_of(gg_step *step) {
    reset_counts();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    return fake.calls[FAKE_LAUNCH];
}

/* (5b) an optimizer that updates parameters apart (no clipping, no finite check): each parameter's update is
 * launched right behind the group of the bucket that completes its gradient, before later buckets' groups; the final
 * stage updates only what no bucket completed (here nothing: every parameter's gradient is reduced). */
static void optimizer_updates_each_bucket_as_it_lands(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_reduce_grad grads[4 * LAYERS + 1];
    const int n_grads = expected_grads(grads);
    int n_params = 0;
    gg_optim *opt = optimizer_of_every_gradient(ctx, &n_params);
    assert_int_equal(n_params, n_grads);
    gg_step *plain = finalized_mlp_step(ctx, NULL), *with = finalized_mlp_step(ctx, opt);
    gg_reduce_layout layout;
    assert_int_equal(gg_reduce_layout_make(grads, n_grads, BUCKET_BYTES, 0, &layout), 0);
    /* per bucket, the gradients it completes (their last piece) */
    int completes[256] = {0};
    assert_true(layout.n_buckets <= 256);
    for (int b = 0; b < layout.n_buckets; ++b)
        for (int q = layout.buckets[b].first; q < layout.buckets[b].first + layout.buckets[b].n; ++q) {
            const gg_reduce_piece *piece = &layout.pieces[q];
            completes[b] += piece->offset + piece->count == grads[piece->grad].count;
        }
    /* launches before each group start, without and with the optimizer */
    int before[2][256], total[2];
    gg_step *steps[2] = {plain, with};
    for (int k = 0; k < 2; ++k) {
        total[k] = launches_of(steps[k]);
        int b = 0;
        for (int i = 0; i < fake_nccl.logged; ++i)
            if (fake_nccl.log[i].what == FNC_GROUP_START && b < 256) before[k][b++] = fake_nccl.log[i].launches;
        assert_int_equal(b, layout.n_buckets);
    }
    /* two launches per parameter (the step counts, the update) and each one's before the next bucket's group */
    int updated = 0;
    for (int b = 0; b < layout.n_buckets; ++b) {
        assert_int_equal(before[1][b] - before[0][b], 2 * updated);
        updated += completes[b];
    }
    assert_int_equal(updated, n_grads);
    assert_int_equal(total[1] - total[0], 2 * n_grads);
    print_message("%d buckets; every parameter updated behind the bucket completing its gradient\n", layout.n_buckets);
    gg_reduce_layout_free(&layout);
    gg_step_destroy(plain);
    gg_step_destroy(with);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* ---- (5c) a gradient callback in a syncing step ---- */

/* A step's run at `tokens` with its capture logged: fake_check_races over the log (only_collectives, loud). */
static fake_races races_of_run(gg_step *step, int64_t tokens, int only_collectives, int loud) {
    fake_log_start();
    assert_int_equal(gg_step_run(step, tokens, 0, NULL), GG_SUCCESS);
    fake_log_stop();
    assert_int_equal(fake_log.truncated, 0);
    const fake_races r = fake_check_races(only_collectives, loud);
    fake_log_free();
    return r;
}

/* A gradient callback's (or, as the negative control, a plain callback's) work: a write of every gradient the step
 * reduces, as the caller's own optimizer or clipping would. */
static void write_every_gradient(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)tokens;
    gg_reduce_grad g[4 * LAYERS + 1];
    const int n = expected_grads(g);
    for (int i = 0; i < n; ++i) (void)cudaMemsetAsync(g[i].ptr, 0, g[i].count * 4, (cudaStream_t)stream);
}

/* mlp_step (the optimizer first when opt_first) with write_every_gradient after it, added as a gradient callback or
 * a plain one, then the optimizer when not opt_first; finalized. */
static gg_step *step_writing_gradients(gg_ctx *ctx, int gradient_callback, gg_optim *opt, int opt_first) {
    gg_step *step = mlp_step(ctx, 1, opt_first ? opt : NULL);
    assert_int_equal((gradient_callback ? gg_step_add_gradient_callback : gg_step_add_callback)(
                         step, write_every_gradient, NULL),
                     GG_SUCCESS);
    if (opt && !opt_first) assert_int_equal(gg_step_add_optimizer(step, opt), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    return step;
}

/* The first run's capture logged: the optimizer's update launches (*updates), and whether every one of them was
 * enqueued after the callback's writes. */
static int updates_follow_the_callback(gg_step *step, int *updates) {
    fake_log_start();
    assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
    fake_log_stop();
    const uintptr_t first_grad = (uintptr_t)mlp_args(0).grad_weight1; /* the callback's first write */
    int written_at = -1, first_update = -1;
    *updates = 0;
    for (int i = 0; i < fake_log.n; ++i) {
        const fake_entry *e = &fake_log.entries[i];
        if (e->op == FAKE_OP_MEMSET && e->n_ranges && e->ranges[0].lo == first_grad) written_at = i;
        if (e->op == FAKE_OP_KERNEL && e->kernel && strstr(e->kernel, "update_kernel")) {
            if (first_update < 0) first_update = i;
            ++*updates;
        }
    }
    fake_log_free();
    assert_true(written_at >= 0 && *updates > 0);
    return first_update > written_at;
}

/* A gradient callback (gg_step_add_gradient_callback) runs once every gradient is final and reduced: its writes of
 * every reduced gradient are ordered against every collective and every call's weight-gradient work (0 unordered
 * pairs; the same callback added as a plain one races with them). An optimizer after it updates every parameter
 * there, after its writes, in one launch (none as its bucket is reduced: the callback may change the gradients
 * first); an optimizer before it still updates each parameter as its bucket lands. */
static void gradient_callback_sees_reduced_gradients(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    int races[2];
    for (int gradient_callback = 0; gradient_callback < 2; ++gradient_callback) {
        gg_step *step = step_writing_gradients(ctx, gradient_callback, NULL, 0);
        const fake_races r = races_of_run(step, TOKENS, 0, gradient_callback ? 3 : 0);
        races[gradient_callback] = r.races;
        gg_step_destroy(step);
    }
    int n_grads = 0;
    gg_optim *opt = optimizer_of_every_gradient(ctx, &n_grads);
    int updates_after = 0, updates_before = 0;
    gg_step *after = step_writing_gradients(ctx, 1, opt, 0), *before = step_writing_gradients(ctx, 1, opt, 1);
    assert_true(updates_follow_the_callback(after, &updates_after));
    assert_false(updates_follow_the_callback(before, &updates_before));
    print_message("every reduced gradient written in a gradient callback: %d unordered pairs (%d in a plain "
                  "callback); an optimizer after it: %d update launch(es), all after the callback; before it: %d\n",
                  races[1], races[0], updates_after, updates_before);
    assert_int_equal(races[1], 0);
    assert_true(races[0] > 0);
    assert_int_equal(updates_after, 1);
    assert_int_equal(updates_before, n_grads);
    gg_step_destroy(after);
    gg_step_destroy(before);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* (5e) The micro-batches of an accumulation in one syncing step: with the update off and sync off a run captures
 * neither collectives nor the optimizer; with the update off and sync on, the collectives but no optimizer launch
 * (its early updates left out too); with both on, both. */
static void update_off_in_a_syncing_step(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    int n_grads = 0;
    gg_optim *opt = optimizer_of_every_gradient(ctx, &n_grads);
    gg_step *step = finalized_mlp_step(ctx, opt);
    static const int sync[] = {0, 1, 1}, update[] = {0, 0, 1};
    for (int k = 0; k < 3; ++k) {
        assert_int_equal(gg_step_set_sync(step, sync[k]), GG_SUCCESS);
        assert_int_equal(gg_step_set_update(step, update[k]), GG_SUCCESS);
        reset_counts();
        const int before = fake_kernel_launches("update_kernel");
        assert_int_equal(gg_step_run(step, TOKENS, k == 2, NULL), GG_SUCCESS);
        const int updates = fake_kernel_launches("update_kernel") - before;
        print_message("sync %d, update %d: %zu collectives, %d update launches\n", sync[k], update[k],
                      collectives_logged(), updates);
        assert_int_equal(collectives_logged() > 0, sync[k]);
        assert_int_equal(updates, update[k] ? n_grads : 0); /* apart: one a parameter, as its bucket lands */
    }
    gg_step_destroy(step);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* Communicator calls inside a step's callback, on a syncing and on a local step, are refused and fail the step's run
 * (nothing instantiated or launched): gg_dist_reduce on the handed stream (its collective would be in the step's graph
 * without the step knowing: not counted against detach, not watched, captured with sync off too) and on a stream
 * outside the capture, gg_dist_detach (the step being captured is not counted yet: detach would free the communicator
 * under the capture), gg_dist_alloc and gg_dist_free. The communicator stays attached and the steps run after. */
enum { IN_CALLBACK_REDUCE, IN_CALLBACK_REDUCE_OUTSIDE, IN_CALLBACK_DETACH, IN_CALLBACK_ALLOC, IN_CALLBACK_FREE,
       IN_CALLBACK_CALLS };
static struct {
    gg_ctx *ctx;
    int what;
    cudaStream_t outside;
    gg_status status;
} comm_in_callback;

static void comm_call(void *user, gg_stream stream, int64_t tokens) {
    (void)user, (void)tokens;
    gg_ctx *ctx = comm_in_callback.ctx;
    void *buffer = NULL;
    switch (comm_in_callback.what) {
    case IN_CALLBACK_REDUCE:
        comm_in_callback.status = gg_dist_reduce(ctx, reduce_buffer, REDUCE_COUNT, 0, stream);
        break;
    case IN_CALLBACK_REDUCE_OUTSIDE:
        comm_in_callback.status =
            gg_dist_reduce(ctx, reduce_buffer, REDUCE_COUNT, 0, (gg_stream)comm_in_callback.outside);
        break;
    case IN_CALLBACK_DETACH: comm_in_callback.status = gg_dist_detach(ctx); break;
    case IN_CALLBACK_ALLOC: comm_in_callback.status = gg_dist_alloc(ctx, 1 << 20, &buffer); break;
    case IN_CALLBACK_FREE: comm_in_callback.status = gg_dist_free(ctx, FAKE(101)); break;
    default: break; /* nothing: the step runs */
    }
}

static void communicator_calls_in_a_callback_are_refused(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    comm_in_callback.ctx = ctx;
    assert_int_equal(cudaStreamCreateWithFlags(&comm_in_callback.outside, cudaStreamNonBlocking), cudaSuccess);
    static const char *const fns[IN_CALLBACK_CALLS] = {"gg_dist_reduce", "gg_dist_reduce", "gg_dist_detach",
                                                       "gg_dist_alloc", "gg_dist_free"};
    for (int syncing = 0; syncing < 2; ++syncing)
        for (int what = 0; what < IN_CALLBACK_CALLS; ++what) {
            comm_in_callback.what = what;
            comm_in_callback.status = GG_SUCCESS;
            gg_step *step = mlp_step(ctx, syncing, NULL);
            assert_int_equal(gg_step_add_callback(step, comm_call, NULL), GG_SUCCESS);
            assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
            reset_counts();
            const gg_status st = gg_step_run(step, TOKENS, 0, NULL);
            assert_int_equal(comm_in_callback.status, GG_ERROR_INVALID_ARGUMENT);
            assert_int_equal(st, GG_ERROR_INVALID_ARGUMENT);
            char expected[160];
            snprintf(expected, sizeof expected, "%s: called inside a step graph's callback", fns[what]);
            contains(gg_last_error(ctx), expected);
            contains(gg_last_error(ctx), "nothing was done");
            if (what <= IN_CALLBACK_REDUCE_OUTSIDE) contains(gg_last_error(ctx), "gg_step_add_reduce");
            assert_int_equal(fake.calls[FAKE_INSTANTIATE], 0);
            assert_int_equal(fake.calls[FAKE_GRAPH_LAUNCH], 0);
            assert_int_equal(fake.captures_open, 0);
            assert_int_equal(gg_dist_size(ctx), 2); /* still attached */
            comm_in_callback.what = IN_CALLBACK_CALLS; /* the callback calls nothing now: the step runs */
            assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
            assert_int_equal(fake.graph_launches, 1);
            assert_int_equal(collectives_logged() > 0, syncing);
            gg_step_destroy(step);
        }
    assert_int_equal(cudaStreamDestroy(comm_in_callback.outside), cudaSuccess);
    end_ctx(ctx, comm);
}

/* (6) block 4 data-parallel outside a step: a syncing graph's run (its capture takes the fork-first schedule, dW and
 * the bias sum beside g) reduces the parameter gradients; past its largest bucket with eager_beyond_max the eager path
 * reduces them too and launches no graph. */
static void syncing_ssm_gate_graph_and_past_its_buckets(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_ssm_gate_desc d = ssm_desc;
    const gg_ssm_gate_args a = ssm_args;
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 4096;
    gc.eager_beyond_max = 1;
    gg_graph *g = NULL;
    assert_int_equal(gg_ssm_gate_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
    reset_counts();
    assert_int_equal(gg_ssm_gate_graph_run(g, &d, &a, NULL), GG_SUCCESS);
    assert_int_equal(fake.graph_launches, 1);
    assert_int_equal(fake.calls[FAKE_MATMUL], 2); /* g and dW */
    const size_t in_graph = collectives_logged();
    assert_true(in_graph >= 1);
    d.tokens = 8192;
    reset_counts();
    assert_int_equal(gg_ssm_gate_graph_run(g, &d, &a, NULL), GG_SUCCESS);
    assert_int_equal(fake.graph_launches, 0);
    assert_int_equal(fake.calls[FAKE_MATMUL], 2);
    assert_int_equal(collectives_logged(), in_graph); /* the same gradients, the same buckets */
    /* the call's stream waits for the reductions before it returns: its last wait is on the collectives' stream, after
     * the last of them */
    int last = -1;
    for (int i = 0; i < fake_nccl.logged; ++i)
        if (fake_nccl.log[i].what >= FNC_ALL_REDUCE) last = i;
    assert_true(last >= 0);
    assert_ptr_equal(fake.last_wait_stream, NULL);
    assert_ptr_equal(fake.last_wait_on, fake_nccl.log[last].stream);
    assert_true(fake.last_wait_at > fake_nccl.log[last].enqueued);
    assert_int_equal(fake.captures_open, 0);
    gg_graph_destroy(g);
    end_ctx(ctx, comm);
}

/* (7) rank 1 of 2 adopts rank 0's GEMM algorithms when a syncing graph is made: the broadcast brings other algorithms
 * (the fakes' candidate 2 where this rank planned candidate 0), which the graph's GEMMs then run, with an INFO saying
 * so; algorithms that do not fit here are not adopted (this rank's own run, and a WARN says why). */
static char adopt_log[1024];
static void adopt_logged(void *user, gg_log_level level, const char *message) {
    (void)user;
    if (strstr(message, "GEMM algorithms differed"))
        snprintf(adopt_log, sizeof adopt_log, "%s: %s", level == GG_LOG_WARN ? "WARN" : "INFO", message);
}
static void rank0_algorithms(void *dst, size_t bytes) { /* what the broadcast from rank 0 brings back */
    if (fake_nccl.logged < 1 || fake_nccl.log[fake_nccl.logged - 1].what != FNC_BROADCAST) return;
    const uint32_t tag = FAKE_ALGO_TAG0 + 2;
    static const cublasLtMatmulAlgo_t none;
    for (size_t at = 0; at + sizeof none <= bytes; at += sizeof none) {
        cublasLtMatmulAlgo_t *algo = (cublasLtMatmulAlgo_t *)((char *)dst + at);
        if (memcmp(algo, &none, sizeof none)) /* a GEMM's slot */
            (void)cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &tag, sizeof tag);
    }
}

static void other_ranks_adopt_rank_0s_algorithms(void **state) {
    (void)state;
    for (int fits = 1; fits >= 0; --fits) {
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx_of(&comm, GG_SYNC_ALL_REDUCE, 1, adopt_logged);
        fake.heuristic_count = 4; /* candidates tagged 0..3; without autotune a plan takes the first */
        fake.algo_check_ok = fits;
        adopt_log[0] = '\0';
        fake.on_copy_to_host = rank0_algorithms;
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        static const int64_t bucket[] = {TOKENS};
        gc.policy = GG_BUCKETS_LIST;
        gc.bucket_tokens = bucket;
        gc.n_buckets = 1;
        gg_mlp_desc d = mlp;
        d.tokens = TOKENS;
        const gg_mlp_args a = mlp_args(0);
        gg_graph *g = NULL;
        assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
        fake.on_copy_to_host = NULL;
        memset(fake.algo_runs, 0, sizeof fake.algo_runs);
        assert_int_equal(gg_mlp_graph_run(g, &d, &a, NULL), GG_SUCCESS); /* captures the four GEMMs */
        print_message("%s\n", adopt_log);
        assert_int_equal(fake.algo_runs[fits ? 2 : 0], 4);
        assert_int_equal(fake.algo_runs[fits ? 0 : 2], 0);
        assert_non_null(strstr(adopt_log, fits ? "INFO" : "WARN"));
        assert_non_null(strstr(adopt_log, fits ? "rank 1: 4 of its GEMM algorithms differed from rank 0's; 4 adopted"
                                               : "4 of its GEMM algorithms differed from rank 0's; 0 adopted (the "
                                                 "others are not valid here"));
        gg_graph_destroy(g);
        end_ctx(ctx, comm);
    }
}

/* (5c) the same optimizer with parameters whose gradients the step does not reduce (the caller's own, say), at the
 * front, in the middle and two together at the end: the final stage updates exactly those, one launch pair per run of
 * adjacent ones (3 runs), and every reduced parameter still once, behind its bucket. */
static void optimizer_updates_the_rest_in_runs(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_reduce_grad grads[4 * LAYERS + 1];
    const int n_grads = expected_grads(grads);
    gg_optim *opt = optimizer_updating_apart(ctx);
    int extra = 0;
    const gg_optim_param own = {.param = FAKE(300), .grad = FAKE(301), .count = 1024};
    for (int i = 0; i <= n_grads; ++i) {
        if (i == 0 || i == n_grads / 2 || i == n_grads) { /* the caller's own: front, middle, end (two there) */
            for (int k = 0; k < (i == n_grads ? 2 : 1); ++k, ++extra) {
                gg_optim_param p = own;
                p.param = FAKE(300 + 2 * extra);
                p.grad = FAKE(301 + 2 * extra);
                assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
            }
        }
        if (i == n_grads) break;
        const gg_optim_param p = {.param = FAKE(200 + i), .grad = grads[i].ptr, .count = (int64_t)grads[i].count};
        assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
    }
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    gg_step *plain = finalized_mlp_step(ctx, NULL), *with = finalized_mlp_step(ctx, opt);
    /* a launch pair (the step counts, the update) per reduced parameter, and one per run of the caller's own */
    assert_int_equal(extra, 4);
    assert_int_equal(launches_of(with) - launches_of(plain), 2 * n_grads + 2 * 3);
    gg_step_destroy(plain);
    gg_step_destroy(with);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* A block call that reads or writes a gradient an earlier call reduces (it reads an earlier call's parameter
 * gradient or an earlier gg_step_add_reduce buffer, or writes its dX into that buffer) would use it while its
 * in-place reduction may run: a syncing step's finalize refuses it, naming both calls, and stays open (rebound, it
 * finalizes; rebound to the overlap again, gg_step_set_args refuses it); the same step without reduction finalizes. */
static void uses_of_reduced_gradients_refused(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    for (int overlap = 0; overlap < 3; ++overlap) /* 0: reads dW1 of call 0, 1: reads the buffer, 2: writes it */
        for (int syncing = 0; syncing < 2; ++syncing) {
            gg_step *step = empty_step(ctx, syncing);
            const gg_mlp_args a0 = mlp_args(0), a1 = mlp_args(1);
            gg_mlp_args a2 = mlp_args(2);
            if (overlap == 2) a2.grad_hidden_states = reduce_buffer; /* call 2 reduces it */
            else a2.hidden_states = overlap ? reduce_buffer : a0.grad_weight1; /* call 2 or 0 reduces it */
            assert_int_equal(gg_step_add_mlp(step, &mlp, &a0), GG_SUCCESS);
            assert_int_equal(gg_step_add_callback(step, write_own_gradient, NULL), GG_SUCCESS);
            assert_int_equal(gg_step_add_reduce(step, reduce_buffer, REDUCE_COUNT, 0), GG_SUCCESS);
            assert_int_equal(gg_step_add_mlp(step, &mlp, &a1), GG_SUCCESS);
            assert_int_equal(gg_step_add_mlp(step, &mlp, &a2), GG_SUCCESS);
            reset_counts();
            if (!syncing) {
                assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
                gg_step_destroy(step);
                continue;
            }
            assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
            static const char *const said[] = {
                "gg_step_finalize: call 4's args->hidden_states overlaps call 0's parameter gradient "
                "args->grad_weight1, which the step reduces across the ranks",
                "gg_step_finalize: call 4's args->hidden_states overlaps call 2's gg_step_add_reduce buffer, which "
                "the step reduces across the ranks",
                "gg_step_finalize: call 4's args->grad_hidden_states overlaps call 2's gg_step_add_reduce buffer, "
                "which the step reduces across the ranks"};
            contains(gg_last_error(ctx), said[overlap]);
            contains(gg_last_error(ctx), "gg_step_add_gradient_callback");
            assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
            const gg_mlp_args reads = a2;
            a2 = mlp_args(2);
            assert_int_equal(gg_step_set_args(step, 4, &a2), GG_SUCCESS);
            assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
            /* rebound so again after finalize: refused by gg_step_set_args, the call left as it was */
            assert_int_equal(gg_step_set_args(step, 4, &reads), GG_ERROR_INVALID_ARGUMENT);
            contains(gg_last_error(ctx), overlap == 2 ? "gg_step_set_args: call 4's args->grad_hidden_states overlaps"
                                                      : "gg_step_set_args: call 4's args->hidden_states overlaps");
            assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
            gg_step_destroy(step);
        }
    end_ctx(ctx, comm);
}

/* Gradients far larger than bucket_bytes, whose collectives would take minutes to capture and instantiate in one
 * graph: three MLP calls with 4096 x 4096 weights (64 MiB gradients) in 4 KiB pieces are 98 328 collectives a step
 * (32 776 a call): finalize refuses the step, naming bucket_bytes and the count, before anything is allocated or
 * captured; a syncing graph of one 8192 x 8192 call (131 088) is refused where it is made. With 25 MiB buckets both
 * are made. */
static void too_many_collectives_refused(void **state) {
    (void)state;
    for (int small = 1; small >= 0; --small) {
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx_buckets(&comm, (gg_dist_config)GG_DIST_CONFIG_INIT, small ? 4096 : (size_t)25 << 20);
        gg_step *step = empty_step(ctx, 1);
        const gg_mlp_desc wide = {.tokens = 1, .hidden = 4096, .ffn = 4096, .precision = GG_PRECISION_FP32};
        for (int l = 0; l < LAYERS; ++l) {
            const gg_mlp_args a = mlp_args(l);
            assert_int_equal(gg_step_add_mlp(step, &wide, &a), GG_SUCCESS);
        }
        reset_counts();
        gg_status st = gg_step_finalize(step);
        if (small) {
            assert_int_equal(st, GG_ERROR_UNSUPPORTED);
            contains(gg_last_error(ctx), "gg_step_finalize: the step's gradients in pieces of at most "
                                         "gg_dist_config.bucket_bytes = 4096 take 98328 collectives a step, more than "
                                         "the 65536 one graph may hold: raise bucket_bytes");
            assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
        } else {
            assert_int_equal(st, GG_SUCCESS);
        }
        gg_step_destroy(step);
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gc.max_tokens = TOKENS;
        const gg_mlp_desc big = {.tokens = TOKENS, .hidden = 8192, .ffn = 8192, .precision = GG_PRECISION_FP32};
        gg_graph *g = NULL;
        st = gg_mlp_graph_create(ctx, &big, &gc, &g);
        if (small) {
            assert_int_equal(st, GG_ERROR_UNSUPPORTED);
            contains(gg_last_error(ctx), "gg_mlp_graph_create: the call's gradients in pieces of at most "
                                         "gg_dist_config.bucket_bytes = 4096 take 131088 collectives, more than the "
                                         "65536 one graph may hold");
            assert_null(g);
        } else {
            assert_int_equal(st, GG_SUCCESS);
        }
        gg_graph_destroy(g);
        end_ctx(ctx, comm);
    }
}

/* A step that fails its own checks (here: no block call) still takes part in the ranks' agreement, voting that it
 * failed, so that the other ranks' finalize fails at once instead of waiting for it to the peer deadline; the call
 * keeps its own status and message, the communicator stays, and the step stays open. */
static void a_step_failing_its_checks_still_votes(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx(&comm);
    gg_step *step = empty_step(ctx, 1);
    fake_nccl_clear_log();
    assert_int_equal(gg_step_finalize(step), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_step_finalize: the step has no block call");
    assert_int_equal(fake_nccl.logged, 1); /* the all-ok step alone: no fingerprint, no plans */
    assert_int_equal(fake_nccl.log[0].what, FNC_ALL_REDUCE);
    assert_int_equal(fake_nccl.log[0].count, 1);
    assert_int_equal(gg_dist_check(ctx), GG_SUCCESS);
    const gg_mlp_args a = mlp_args(0);
    assert_int_equal(gg_step_add_mlp(step, &mlp, &a), GG_SUCCESS);
    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
    gg_step_destroy(step);
    end_ctx(ctx, comm);
}

/* (5c) reduce-scatter leaves each rank a shard of each gradient: a syncing step with an optimizer is refused at
 * finalize, naming why, and captures nothing. */
static void optimizer_refused_under_reduce_scatter(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = dist_ctx_syncing(&comm, GG_SYNC_REDUCE_SCATTER);
    gg_optim *opt = NULL;
    assert_int_equal(gg_optim_create(ctx, NULL, &opt), GG_SUCCESS);
    const gg_optim_param p = {.param = FAKE(200), .grad = FAKE(201), .count = 1000};
    assert_int_equal(gg_optim_add_param(opt, &p), GG_SUCCESS);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    gg_step *step = mlp_step(ctx, 1, opt);
    reset_counts();
    assert_int_equal(gg_step_finalize(step), GG_ERROR_UNSUPPORTED);
    contains(gg_last_error(ctx), "an optimizer needs every gradient whole, and the communicator reduce-scatters");
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    gg_step_destroy(step);
    gg_optim_destroy(opt);
    end_ctx(ctx, comm);
}

/* (5d) reduce-scatter, every rank of 2, 4 and 8 (a node of B200s): a syncing step's capture reduce-scatters each
 * gradient whole (the layout made with whole gradients), every piece into this rank's shard of it; rank 1 of 3:
 * gg_dist_reduce refuses a count the ranks cannot share before any NCCL call and reduce-scatters one they can (fp32 and
 * bf16) into its shard, and a syncing graph or step whose weight gradients the ranks cannot share is refused, naming
 * the gradient. */
static void reduce_scatter_shards_each_gradient(void **state) {
    (void)state;
    ncclComm_t comm = NULL;
    gg_ctx *ctx = NULL;
    gg_step *step = NULL;
    for (int size = 2; size <= 8; size *= 2)
        for (int rank = 0; rank < size; ++rank) {
            ctx = dist_ctx_in(&comm, GG_SYNC_REDUCE_SCATTER, rank, size, NULL);
            step = finalized_mlp_step(ctx, NULL);
            gg_reduce_grad grads[4 * LAYERS + 1];
            const int n_grads = expected_grads(grads);
            gg_reduce_layout layout;
            assert_int_equal(gg_reduce_layout_make(grads, n_grads, BUCKET_BYTES, 1, &layout), 0);
            reset_counts();
            assert_int_equal(gg_step_run(step, TOKENS, 0, NULL), GG_SUCCESS);
            log_is_the_layout(ctx, comm, &layout, grads);
            assert_true(collectives_logged() >= (size_t)n_grads); /* every gradient, none cut across buckets */
            gg_reduce_layout_free(&layout);
            gg_step_destroy(step);
            end_ctx(ctx, comm);
        }

    ctx = dist_ctx_in(&comm, GG_SYNC_REDUCE_SCATTER, 1, 3, NULL);
    reset_counts();
    assert_int_equal(gg_dist_reduce(ctx, FAKE(300), 1000, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    contains(gg_last_error(ctx), "gg_dist_reduce: count = 1000 is not divisible by the 3 ranks: reduce-scatter "
                                 "cannot shard it");
    assert_int_equal(fake_nccl.logged, 0);
    assert_int_equal(fake.enqueued, 0);
    for (int bf16 = 0; bf16 <= 1; ++bf16) {
        reset_counts();
        assert_int_equal(gg_dist_reduce(ctx, FAKE(300), 999, bf16, NULL), GG_SUCCESS);
        size_t scatters = 0;
        for (int i = 0; i < fake_nccl.logged; ++i) {
            const fake_nccl_call *c = &fake_nccl.log[i];
            if (c->what < FNC_ALL_REDUCE) continue;
            assert_int_equal(c->what, FNC_REDUCE_SCATTER);
            assert_ptr_equal(c->send, FAKE(300));
            assert_ptr_equal(c->recv, (const char *)FAKE(300) + 333 * (bf16 ? 2 : 4)); /* rank 1's third */
            assert_int_equal(c->count, 333);
            assert_int_equal(c->type, bf16 ? ncclBfloat16 : ncclFloat32);
            assert_int_equal(c->op, ncclAvg);
            ++scatters;
        }
        assert_int_equal(scatters, 1); /* whole: not cut at bucket_bytes */
    }
    /* 1024 x 256 weight gradients do not split in thirds: refused where the graph or the step is made */
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = TOKENS;
    const gg_mlp_desc d = {.tokens = TOKENS, .hidden = HIDDEN, .ffn = FFN, .precision = GG_PRECISION_FP32};
    gg_graph *g = NULL;
    reset_counts();
    assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_ERROR_UNSUPPORTED);
    contains(gg_last_error(ctx), "grad_weight1 has 262144 elements, not divisible by the 3 ranks: reduce-scatter "
                                 "cannot shard it");
    assert_null(g);
    step = mlp_step(ctx, 1, NULL);
    assert_int_equal(gg_step_finalize(step), GG_ERROR_UNSUPPORTED);
    contains(gg_last_error(ctx), "not divisible by the 3 ranks");
    assert_int_equal(fake.calls[FAKE_BEGIN_CAPTURE], 0);
    gg_step_destroy(step);
    end_ctx(ctx, comm);
}

/* ---- (7) every collective ordered against every other access to its buffers ---- */

/* A syncing step's first run, its capture logged with the collectives among the CUDA work: every operation that
 * touches a collective's buffers (a GEMM writing a weight gradient, a column sum at a bias gradient, the callback's
 * write of the caller's gradient) is ordered with it by the capture's streams and events, before it when enqueued
 * before it and after it when enqueued after: a bucket is reduced only once its gradients are final, and nothing
 * touches them while it is. Two layouts: BUCKET_BYTES cuts the weight gradients into pieces, reduced by several
 * collectives; the default 25 MiB puts every layer's gradients into one bucket, which must wait for the weight-
 * gradient branches of every layer, each on its own side stream, not only for the last layer's. (Kernels are seen at
 * their pointer arguments only, so this checks the order of what it sees, not what a kernel reaches past them.) */
static void collectives_ordered_against_their_buffers(void **state) {
    (void)state;
    const size_t layouts[] = {BUCKET_BYTES, (size_t)25 << 20};
    for (int i = 0; i < 2; ++i) {
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx_buckets(&comm, (gg_dist_config)GG_DIST_CONFIG_INIT, layouts[i]);
        gg_step *step = finalized_mlp_step(ctx, NULL);
        const fake_races r = races_of_run(step, TOKENS, 1, 5);
        print_message("buckets of %zu bytes: %d collectives, %d pairs with one on shared bytes, %d unordered\n",
                      layouts[i], r.collectives, r.pairs, r.races);
        assert_true(r.collectives >= LAYERS * 4); /* every gradient reduced (the weights' in several pieces) */
        assert_true(r.pairs >= LAYERS * 4 + 1);   /* each gradient's producer at least, and the caller's write */
        assert_int_equal(r.races, 0);
        gg_step_destroy(step);
        end_ctx(ctx, comm);
    }
}

/* (7b) The same order over the configurations a user picks, every pair of operations on shared bytes this time (slots,
 * workspaces, gradients, the weights, not only the collectives'): 1-3 side streams, the default ring (S + 1 slots) and
 * a single slot, buckets of 4 KiB (one or two pieces a bucket), BUCKET_BYTES and 25 MiB (every call in one bucket),
 * steps of MLP calls in fp32 and in fp16 mode, of block-4 calls, mixed, MLP calls whose last one reads the first one's
 * W1 and block-4 calls whose last one reads the first one's bf16 weight (the copy of an fp32 master the optimizer
 * updates: weights tied between calls, the copy the only tensor shared), each ending with an optimizer that updates
 * each parameter behind the bucket that completes its gradient (its early updates on the communication stream) and
 * whose parameters are the weights the calls read. The optimizer's kernels reach their parameters through a table in
 * device memory, which the fake does not see into: optimizer_reach adds what they touch there (each chunk's parameter:
 * its gradient read, its weights and their copy written) from the optimizer's host tables. */
enum { SWEEP_CALLS = 3, SWEEP_TOKENS = 4096, SWEEP_MAX_GRADS = 4 * SWEEP_CALLS };
typedef enum { SWEEP_MLP_FP32, SWEEP_MLP_FP16, SWEEP_SSM, SWEEP_MIXED, SWEEP_TIED, SWEEP_TIED_SSM } sweep_model;
static const char *const sweep_names[] = {"MLP fp32", "MLP fp16", "block 4", "mixed", "tied W1",
                                          "block 4, tied weight"};

/* The optimizer whose kernels optimizer_reach reads (NULL: none), and the update launches it saw. */
static const gg_optim *reached_optimizer;
static int reached_updates;

/* fake_kernel_reach for reached_optimizer's sum-of-squares and update kernels (arguments: the parameter table, the
 * chunk table at the step's first chunk, ...; one CTA per chunk): the parameters of the chunks the launch covers,
 * their gradients read, their fp32 weights and copies written by the update. */
static void optimizer_reach(fake_entry *e, const char *kernel, void **args, dim3 grid) {
    const gg_optim *o = reached_optimizer;
    const int update = kernel && strstr(kernel, "update_kernel"), sums = kernel && strstr(kernel, "sum_squares");
    if (!o || !(update || sums) || !strstr(kernel, "gg_k_optim_param")) return;
    const gg_k_optim_chunk *table = (const gg_k_optim_chunk *)((const char *)o->device + o->layout.chunks);
    const gg_k_optim_chunk *chunks = *(const gg_k_optim_chunk *const *)args[1];
    const int first = (int)(chunks - table), end = first + (int)grid.x;
    assert_true(first >= 0 && end <= o->n_chunks);
    reached_updates += update != 0;
    for (int i = 0; i < o->n_params; ++i) {
        if (o->chunk_first[i + 1] <= first || o->chunk_first[i] >= end) continue;
        const gg_optim_param *p = &o->params[i];
        const size_t n = (size_t)p->count;
        fake_log_range(e, p->grad, n * (p->grad_dtype == GG_OPTIM_FP32 ? 4 : 2), FAKE_READS);
        if (!update) continue;
        fake_log_range(e, p->param, n * sizeof(float), FAKE_WRITES);
        fake_log_range(e, p->copy, n * 2, FAKE_WRITES);
    }
}

/* Block 4's call l in the sweep: its own tensors at FAKE(400 + 16 l) ... */
static gg_ssm_gate_args sweep_ssm_args(int l) {
    const int b = 400 + 16 * l;
    return (gg_ssm_gate_args){FAKE(b), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4),
                              FAKE(b + 5), FAKE(b + 6), FAKE(b + 7), FAKE(b + 8), FAKE(b + 9)};
}

/* Adds the model's calls to step, and into params what the optimizer updates, as a training step has it: the
 * weights the calls read (an MLP's fp32 weights, and in fp16 mode the fp16 copies the calls read too, rewritten by
 * the update; block 4's bf16 weight as the copy of an fp32 master), the biases apart. Returns how many. */
static int add_sweep_calls(gg_step *step, sweep_model m, gg_optim_param *params) {
    const int tied = m == SWEEP_TIED || m == SWEEP_TIED_SSM;
    int n = 0, mlps = 0;
    for (int l = 0; l < SWEEP_CALLS; ++l) {
        const int ssm = m == SWEEP_SSM || m == SWEEP_TIED_SSM || (m == SWEEP_MIXED && l == 1);
        const int reads_tied = tied && l == SWEEP_CALLS - 1; /* reads call 0's weight, updated as call 0's */
        if (ssm) {
            gg_ssm_gate_args a = sweep_ssm_args(l);
            if (reads_tied) a.weight = sweep_ssm_args(0).weight;
            gg_ssm_gate_desc d = ssm_desc;
            d.tokens = SWEEP_TOKENS;
            assert_int_equal(gg_step_add_ssm_gate(step, &d, &a), GG_SUCCESS);
            if (!reads_tied) {
                params[n] = (gg_optim_param){.param = FAKE(600 + n), .grad = a.grad_weight,
                                             .grad_dtype = GG_OPTIM_BF16, .count = d.hidden * d.expanded,
                                             .copy = (void *)a.weight, .copy_dtype = GG_OPTIM_BF16};
                ++n;
            }
            params[n] = (gg_optim_param){.param = FAKE(600 + n), .grad = a.grad_bias, .grad_dtype = GG_OPTIM_BF16,
                                         .count = d.hidden};
            ++n;
            continue;
        }
        gg_mlp_args a = mlp_args(mlps++); /* chained to the previous MLP call's dX */
        if (reads_tied) a.weight1 = mlp_args(0).weight1;
        gg_mlp_desc d = mlp;
        d.tokens = SWEEP_TOKENS;
        d.precision = m == SWEEP_MLP_FP16 ? GG_PRECISION_FP16 : GG_PRECISION_FP32;
        const void *weights[2] = {a.weight1, a.weight2};
        const void *grads[4] = {a.grad_weight1, a.grad_weight2, a.grad_bias1, a.grad_bias2};
        void *copies[2] = {NULL, NULL};
        if (m == SWEEP_MLP_FP16) { /* the fp16 copies the calls read, which the update writes */
            a.weight1_fp16 = copies[0] = FAKE(700 + 2 * l);
            a.weight2_fp16 = copies[1] = FAKE(701 + 2 * l);
        }
        assert_int_equal(gg_step_add_mlp(step, &d, &a), GG_SUCCESS);
        const int64_t counts[4] = {(int64_t)FFN * HIDDEN, (int64_t)HIDDEN * FFN, FFN, HIDDEN};
        for (int k = 0; k < 4; ++k) {
            if (reads_tied && k == 0) continue; /* the weights of call 0's parameter */
            params[n] = (gg_optim_param){.param = k < 2 ? (float *)weights[k] : FAKE(600 + n), .grad = grads[k],
                                         .count = counts[k]};
            if (k < 2 && copies[k]) params[n].copy = copies[k], params[n].copy_dtype = GG_OPTIM_FP16;
            ++n;
        }
    }
    return n;
}

static void every_syncing_step_configuration_is_ordered(void **state) {
    (void)state;
    const size_t layouts[] = {4096, BUCKET_BYTES, (size_t)25 << 20};
    int configurations = 0, pairs = 0;
    fake_kernel_reach = optimizer_reach;
    reached_updates = 0;
    for (int m = SWEEP_MLP_FP32; m <= SWEEP_TIED_SSM; ++m)
        for (int sides = 1; sides <= 3; ++sides)
            for (int one_slot = 0; one_slot < 2; ++one_slot)
                for (int k = 0; k < 3; ++k) {
                    ncclComm_t comm = NULL;
                    gg_ctx *ctx = dist_ctx_buckets(&comm, (gg_dist_config)GG_DIST_CONFIG_INIT, layouts[k]);
                    gg_step_config sc = GG_STEP_CONFIG_INIT;
                    sc.max_tokens = SWEEP_TOKENS;
                    sc.side_streams = sides;
                    sc.scratch_slots = one_slot;
                    gg_step *step = NULL;
                    assert_int_equal(gg_step_create(ctx, &sc, &step), GG_SUCCESS);
                    gg_optim_param params[SWEEP_MAX_GRADS];
                    const int n = add_sweep_calls(step, (sweep_model)m, params);
                    gg_optim *opt = optimizer_updating_apart(ctx);
                    for (int i = 0; i < n; ++i) assert_int_equal(gg_optim_add_param(opt, &params[i]), GG_SUCCESS);
                    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
                    assert_int_equal(gg_step_add_optimizer(step, opt), GG_SUCCESS);
                    assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
                    reached_optimizer = opt;
                    const fake_races r = races_of_run(step, SWEEP_TOKENS, 0, 3);
                    reached_optimizer = NULL;
                    if (r.races != 0 || r.collectives < n)
                        fail_msg("%s, %d side streams, %s, buckets of %zu bytes: %d collectives, %d unordered pairs "
                                 "of %d", sweep_names[m], sides, one_slot ? "one slot" : "the default ring",
                                 layouts[k], r.collectives, r.races, r.pairs);
                    ++configurations;
                    pairs += r.pairs;
                    gg_step_destroy(step);
                    gg_optim_destroy(opt);
                    end_ctx(ctx, comm);
                }
    fake_kernel_reach = NULL;
    assert_true(reached_updates >= configurations * SWEEP_CALLS); /* the early updates were seen, each a launch */
    print_message("%d syncing step configurations, %d pairs of operations on shared bytes (%d optimizer updates "
                  "seen into), none unordered\n",
                  configurations, pairs, reached_updates);
}

/* (7c) Syncing block graphs (each weight gradient reduced from the block as soon as it is final, gg_dist_grad_ready)
 * over what a user can pick (an eager call enqueues the same work as the capture): every block (the FFN blocks in fp32,
 * TF32 and fp16 mode, at 256, 1024 and 4096 tokens: the few-token routes and the wide ones), buckets of 4 KiB, 400 000
 * bytes and 25 MiB, all-reduce and reduce-scatter (block 1's one-element gradient cannot be sharded), overlap on and
 * off: every pair of operations on shared bytes in the capture ordered. */
enum { BLOCK_CALLS = 1 + 2 * 3 * 3 + 1 };

/* Block call c of the sweep as a graph on ctx, made and run once (its capture): the first failing status. */
static gg_status sweep_block_graph(gg_ctx *ctx, int c) {
    static const gg_precision precisions[] = {GG_PRECISION_FP32, GG_PRECISION_TF32, GG_PRECISION_FP16};
    static const int64_t tokens[] = {256, 1024, 4096};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 4096;
    gg_graph *g = NULL;
    gg_status st;
    if (c == 0) { /* block 1 */
        const gg_tanh_gate_desc d = {.tokens = 4096, .hidden = 1024};
        const gg_tanh_gate_args a = {FAKE(500), FAKE(501), FAKE(502), FAKE(503), FAKE(504), FAKE(505), FAKE(506)};
        st = gg_tanh_gate_graph_create(ctx, &d, &gc, &g);
        if (st == GG_SUCCESS) st = gg_tanh_gate_graph_run(g, &d, &a, NULL);
    } else if (c == BLOCK_CALLS - 1) { /* block 4 */
        st = gg_ssm_gate_graph_create(ctx, &ssm_desc, &gc, &g);
        if (st == GG_SUCCESS) st = gg_ssm_gate_graph_run(g, &ssm_desc, &ssm_args, NULL);
    } else { /* blocks 2 and 3 */
        const int k = c - 1, p = k / 2 % 3, m = k / 6;
        const gg_mlp_args a = mlp_args(0);
        if (k % 2) {
            const gg_mlp_desc d = {.tokens = tokens[m], .hidden = HIDDEN, .ffn = FFN, .precision = precisions[p]};
            st = gg_mlp_graph_create(ctx, &d, &gc, &g);
            if (st == GG_SUCCESS) st = gg_mlp_graph_run(g, &d, &a, NULL);
        } else {
            const gg_gelu_ffn_desc d = {.tokens = tokens[m], .hidden = HIDDEN, .ffn = FFN, .precision = precisions[p]};
            const gg_gelu_ffn_args f = {a.grad_output, a.hidden_states, a.weight1, a.weight2, a.intermediate,
                                        FAKE(510), a.intermediate_activated, a.grad_hidden_states, a.grad_weight1,
                                        a.grad_weight2, NULL, NULL, NULL, NULL, NULL, NULL};
            st = gg_gelu_ffn_graph_create(ctx, &d, &gc, &g);
            if (st == GG_SUCCESS) st = gg_gelu_ffn_graph_run(g, &d, &f, NULL);
        }
    }
    gg_graph_destroy(g);
    return st;
}

static void every_syncing_block_graph_is_ordered(void **state) {
    (void)state;
    const size_t layouts[] = {4096, BUCKET_BYTES, (size_t)25 << 20};
    int graphs = 0, pairs = 0, collectives = 0;
    for (int c = 0; c < BLOCK_CALLS; ++c)
        for (int k = 0; k < 3; ++k)
            for (int sync = GG_SYNC_ALL_REDUCE; sync <= GG_SYNC_REDUCE_SCATTER; ++sync)
                for (int overlap = 0; overlap <= 1; ++overlap) {
                    if (c == 0 && sync == GG_SYNC_REDUCE_SCATTER) continue;
                    gg_dist_config dc = GG_DIST_CONFIG_INIT;
                    dc.sync = (gg_grad_sync)sync;
                    dc.overlap = overlap;
                    ncclComm_t comm = NULL;
                    gg_ctx *ctx = dist_ctx_buckets(&comm, dc, layouts[k]);
                    fake_log_start();
                    const gg_status st = sweep_block_graph(ctx, c);
                    fake_log_stop();
                    if (st != GG_SUCCESS) fail_msg("block graph %d: %s", c, gg_last_error(ctx));
                    assert_int_equal(fake_log.truncated, 0);
                    const fake_races r = fake_check_races(0, 3);
                    fake_log_free();
                    if (r.races != 0 || r.collectives < 1)
                        fail_msg("block graph %d, buckets of %zu bytes, %s, overlap %d: %d collectives, %d unordered "
                                 "pairs of %d", c, layouts[k], sync ? "reduce-scatter" : "all-reduce", overlap,
                                 r.collectives, r.races, r.pairs);
                    ++graphs;
                    pairs += r.pairs;
                    collectives += r.collectives;
                    end_ctx(ctx, comm);
                }
    print_message("%d syncing block graphs, %d collectives, %d pairs of operations on shared bytes, none unordered\n",
                  graphs, collectives, pairs);
}

/* With gg_dist_config.overlap off a syncing graph reduces its weight gradients after the block's whole backward
 * (gg_dist_finish): in an MLP graph's capture every collective comes after the last GEMM and kernel, still ordered
 * against its buffers; with overlap on (the control) dW2's reduction comes before dX's GEMM. */
static void overlap_off_reduces_after_the_backward(void **state) {
    (void)state;
    static const gg_mlp_desc d = {.tokens = 512, .hidden = HIDDEN, .ffn = FFN, .precision = GG_PRECISION_FP32};
    for (int overlap = 0; overlap <= 1; ++overlap) {
        gg_dist_config dc = GG_DIST_CONFIG_INIT;
        dc.overlap = overlap;
        ncclComm_t comm = NULL;
        gg_ctx *ctx = dist_ctx_with(&comm, dc, 0, 2, NULL);
        gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
        gc.max_tokens = 512;
        gg_graph *g = NULL;
        assert_int_equal(gg_mlp_graph_create(ctx, &d, &gc, &g), GG_SUCCESS);
        const gg_mlp_args a = mlp_args(0);
        fake_log_start();
        assert_int_equal(gg_mlp_graph_run(g, &d, &a, NULL), GG_SUCCESS);
        fake_log_stop();
        assert_int_equal(fake_log.truncated, 0);
        int first_collective = -1, collectives = 0, last_compute = -1;
        for (int i = 0; i < fake_log.n; ++i) {
            const fake_op op = fake_log.entries[i].op;
            if (op == FAKE_OP_COLLECTIVE && collectives++ == 0) first_collective = i;
            if (op == FAKE_OP_KERNEL || op == FAKE_OP_MATMUL) last_compute = i;
        }
        const fake_races r = fake_check_races(1, 5);
        fake_log_free();
        assert_true(collectives >= 4); /* dW1, dW2 (in pieces), db1, db2 */
        if (overlap ? first_collective > last_compute : first_collective < last_compute)
            fail_msg("overlap %d: the first collective at %d, the last GEMM or kernel at %d", overlap,
                     first_collective, last_compute);
        assert_int_equal(r.races, 0);
        gg_graph_destroy(g);
        end_ctx(ctx, comm);
    }
}

/* ---- (6) every NCCL call of a syncing run failed in turn ---- */
static int injected, failures;

static void check(int ok, fake_nccl_kind kind, int k, const char *fmt, ...) {
    if (ok) return;
    ++failures;
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("STEP SYNC FAULT FAIL %s #%d: %s\n", fake_nccl_kind_names[kind], k, what);
}

static void every_nccl_fault_in_a_run(void **state) {
    injected = failures = 0; /* each group run's own counts */
    (void)state;
    static const fake_nccl_kind kinds[] = {FN_GROUP_START, FN_ALL_REDUCE, FN_GROUP_END};
    static const char *const names[] = {"ncclGroupStart", "ncclAllReduce", "ncclGroupEnd"};
    for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; ++kk)
        for (int k = 1;; ++k) {
            const fake_nccl_kind kind = kinds[kk];
            ncclComm_t comm = NULL;
            gg_ctx *ctx = dist_ctx(&comm);
            gg_step *step = mlp_step(ctx, 1, NULL);
            assert_int_equal(gg_step_finalize(step), GG_SUCCESS);
            fake_nccl.in_progress_calls = k % 2; /* every other run, group ends return ncclInProgress */
            fake_nccl.fail_kind = kind;
            fake_nccl.fail_at = fake_nccl.calls[kind] + k; /* the k-th call of the run */
            const int live = fake.live;
            const gg_status st = gg_step_run(step, TOKENS, 0, NULL);
            char message[GG_MSG_BYTES];
            snprintf(message, sizeof message, "%s", gg_last_error(ctx));
            const int hit = fake_nccl.injected > 0;
            fake_nccl.fail_at = 0;
            if (hit) {
                ++injected;
                check(st == GG_ERROR_NCCL, kind, k, "status %s: %s", gg_status_string(st), message);
                check(strstr(message, names[kk]) != NULL, kind, k, "\"%s\" does not name %s", message, names[kk]);
                check(strstr(message, ncclGetErrorString(ncclSystemError)) != NULL, kind, k,
                      "\"%s\" does not name NCCL's error", message);
                check(fake.live == live, kind, k, "%d CUDA resources left by the failed run", fake.live - live);
                check(fake.graph_launches == 0, kind, k, "a graph was launched");
                /* this rank's part of the reduction is missing while the others' waits for it: aborted, and said */
                check(gg_dist_comm(ctx) == NULL && strstr(message, "is aborted") != NULL, kind, k,
                      "the communicator was not aborted, or the message does not say so: %s", message);
            } else {
                check(st == GG_SUCCESS, kind, k, "no fault, status %s: %s", gg_status_string(st), message);
            }
            check(fake.captures_open == 0, kind, k, "a stream is left capturing");
            /* after: the same step again (refused after the abort, nothing launched; else it runs), and a step that
             * does not sync */
            const int launches = fake.graph_launches;
            const gg_status again = gg_step_run(step, TOKENS, 0, NULL);
            if (hit)
                check(again == GG_ERROR_NCCL && fake.graph_launches == launches, kind, k,
                      "the step again after the abort: %s, %d graphs launched", gg_status_string(again),
                      fake.graph_launches - launches);
            else
                check(again == GG_SUCCESS, kind, k, "the step again: %s", gg_last_error(ctx));
            gg_step *local = mlp_step(ctx, 0, NULL);
            gg_status lst = gg_step_finalize(local);
            if (lst == GG_SUCCESS) lst = gg_step_run(local, TOKENS, 0, NULL);
            check(lst == GG_SUCCESS, kind, k, "a local step after the fault: %s", gg_last_error(ctx));
            check(fake.captures_open == 0, kind, k, "a stream is left capturing after the runs");
            gg_step_destroy(local);
            gg_step_destroy(step);
            const gg_status detached = gg_dist_detach(ctx);
            check(detached == GG_SUCCESS, kind, k, "detach: %s", gg_last_error(ctx));
            gg_ctx_destroy(ctx);
            if (fake_nccl_is_live(comm)) fake_nccl_destroy(comm);
            check(fake.live == 0, kind, k, "%d CUDA resources leaked", fake.live);
            check(atomic_load(&fake_nccl.live) == 0, kind, k, "%d communicators leaked", atomic_load(&fake_nccl.live));
            if (!hit) break;
        }
    printf("STEP_SYNC_FAULTS {\"device_cc\": %d, \"injected\": %d, \"failures\": %d}\n", device_cc, injected,
           failures);
    assert_true(injected >= 10);
    assert_int_equal(failures, 0);
}

/* A syncing step's whole life without asserting along the way: make_mlp_step, finalize (collective),
 * a run, an accumulating run, destroy. The first failure's status, its message in `message`. */
static gg_status syncing_step_life(gg_ctx *ctx, char *message, size_t bytes) {
    gg_step *step = NULL;
    gg_status st = make_mlp_step(ctx, 1, NULL, &step);
    if (st == GG_SUCCESS) st = gg_step_finalize(step);
    if (st == GG_SUCCESS) st = gg_step_run(step, TOKENS, 0, NULL);
    if (st == GG_SUCCESS) st = gg_step_run(step, TOKENS / 2, 1, NULL);
    if (st != GG_SUCCESS) snprintf(message, bytes, "%s", gg_last_error(ctx));
    gg_step_destroy(step);
    return st;
}

/* The k-th host allocation, then the k-th CUDA resource made, failed along a syncing step's life for every k it
 * reaches (on a context already attached): a failure status whose message begins with the call's name
 * (GG_ERROR_OUT_OF_MEMORY saying so for host memory), no capture left open, the context runs a whole syncing step's
 * life afterwards, and nothing is left once it is destroyed (end_ctx; the plans it keeps are its own until then). */
static void every_host_memory_and_resource_fault_in_a_life(void **state) {
    (void)state;
    int hits[2] = {0, 0}, misses = 0, aborted = 0;
    for (int kind = 0; kind < 2; ++kind)
        for (int k = 1;; ++k) {
            ncclComm_t comm = NULL;
            gg_ctx *ctx = dist_ctx(&comm);
            const int before = fake.injected;
            if (kind == 0) {
                fake.fail_kind = FAKE_HOST_MEMORY;
                fake.fail_at = k;
            } else {
                fake.fail_create_at = fake.creates + k;
            }
            const int armed = fake.fail_create_at;
            char message[GG_MSG_BYTES] = "";
            const gg_status st = syncing_step_life(ctx, message, sizeof message);
            const int hit = kind == 0 ? fake.injected > before : fake.creates >= armed;
            fake.fail_at = fake.fail_create_at = 0;
            hits[kind] += hit;
            const char *what = kind == 0 ? "host memory" : "CUDA resource";
            if (hit) {
                const int ok = strncmp(message, "gg_", 3) == 0 &&
                               (kind == 0 ? st == GG_ERROR_OUT_OF_MEMORY && strstr(message, ": out of host memory")
                                          : st == GG_ERROR_CUDA || st == GG_ERROR_OUT_OF_MEMORY ||
                                                st == GG_ERROR_CUBLAS);
                if (!ok) printf("STEP SYNC FAULT FAIL %s #%d: status %s: %s\n", what, k, gg_status_string(st), message);
                misses += !ok;
            } else if (st != GG_SUCCESS) {
                printf("STEP SYNC FAULT FAIL %s #%d: no fault, status %s: %s\n", what, k, gg_status_string(st),
                       message);
                ++misses;
            }
            if (fake.captures_open != 0) {
                printf("STEP SYNC FAULT FAIL %s #%d: a capture left open\n", what, k);
                ++misses;
            }
            /* A run's failure left this rank's collectives missing: the communicator aborted, and said; a new one
             * for the life after. */
            if (hit && !gg_dist_comm(ctx)) {
                if (!strstr(message, "gg_step_run") || !strstr(message, "the communicator is aborted")) {
                    printf("STEP SYNC FAULT FAIL %s #%d: aborted by another call than a run, or unsaid: %s\n", what,
                           k, message);
                    ++misses;
                }
                assert_int_equal(gg_dist_detach(ctx), GG_SUCCESS);
                gg_dist_config dc = GG_DIST_CONFIG_INIT;
                dc.bucket_bytes = BUCKET_BYTES;
                dc.bind_cpus = 0;
                comm = fake_nccl_comm();
                assert_int_equal(gg_dist_attach(ctx, comm, &dc), GG_SUCCESS);
                ++aborted;
            }
            char again[GG_MSG_BYTES] = "";
            if (syncing_step_life(ctx, again, sizeof again) != GG_SUCCESS) {
                printf("STEP SYNC FAULT FAIL %s #%d: a life after the fault: %s\n", what, k, again);
                ++misses;
            }
            end_ctx(ctx, comm);
            if (!hit) break;
        }
    printf("STEP_SYNC_HOST_FAULTS {\"device_cc\": %d, \"host_memory\": %d, \"cuda_resources\": %d, "
           "\"failures\": %d}\n", device_cc, hits[0], hits[1], misses);
    printf("%d of those faults came in a run, which aborted the communicator\n", aborted);
    assert_true(hits[0] >= 5 && hits[1] >= 5);
    assert_int_equal(misses, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(captures_one_group_per_bucket),
        cmocka_unit_test(detach_before_any_run),
        cmocka_unit_test(aborted_communicator_refuses_the_run),
        cmocka_unit_test(optimizer_after_the_reduction),
        cmocka_unit_test(optimizer_updates_each_bucket_as_it_lands),
        cmocka_unit_test(optimizer_updates_the_rest_in_runs),
        cmocka_unit_test(gradient_callback_sees_reduced_gradients),
        cmocka_unit_test(update_off_in_a_syncing_step),
        cmocka_unit_test(communicator_calls_in_a_callback_are_refused),
        cmocka_unit_test(optimizer_parameter_not_reduced_is_named),
        cmocka_unit_test(syncing_ssm_gate_graph_and_past_its_buckets),
        cmocka_unit_test(other_ranks_adopt_rank_0s_algorithms),
        cmocka_unit_test(uses_of_reduced_gradients_refused),
        cmocka_unit_test(too_many_collectives_refused),
        cmocka_unit_test(a_step_failing_its_checks_still_votes),
        cmocka_unit_test(optimizer_refused_under_reduce_scatter),
        cmocka_unit_test(reduce_scatter_shards_each_gradient),
        cmocka_unit_test(overlap_off_reduces_after_the_backward),
        cmocka_unit_test(fp16_copies_in_a_syncing_step),
        cmocka_unit_test(collectives_ordered_against_their_buffers),
        cmocka_unit_test(every_syncing_step_configuration_is_ordered),
        cmocka_unit_test(every_syncing_block_graph_is_ordered),
        cmocka_unit_test(every_nccl_fault_in_a_run),
        cmocka_unit_test(every_host_memory_and_resource_fault_in_a_life),
    };
    int failed = cmocka_run_group_tests_name("step_sync", tests, NULL, NULL);
    device_cc = 90; /* the same on a device with the sm_90a routes */
    failed += cmocka_run_group_tests_name("step_sync on a 9.0 device", tests, NULL, NULL);
    return failed;
}
