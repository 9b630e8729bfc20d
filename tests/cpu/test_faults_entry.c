/*
 * test_faults_entry.c - fault injection (the fakes of fake_cuda.h, as in test_faults.c) on the entry points beyond
 * the per-block calls: a step graph's life (a 2-layer MLP with a callback between and an optimizer at the end:
 * create, adds, finalize, host-selected runs exact, padded, accumulating and rebound, a device-selected run), an
 * optimizer's (create, add_param, finalize, set_lr, set_loss_scale, step, a checkpoint saved and loaded) and the four
 * forwards. Each path is a
 * list of stages run in order on one context; every call of every kind is failed in turn (the k-th, for every k
 * until the path runs through). The failing stage must return the status include/gradgraph.h documents for it,
 * with a message naming the failed call; a graph run launches nothing; no stream is left capturing; then the path
 * goes on from the failed stage (or, where the header says the object can only be destroyed, it is refused with
 * a message saying so, destroyed, and the whole path runs again) and must succeed; nothing is alive once the
 * context is destroyed. Then, along the same paths, the k-th CUDA or cuBLASLt resource made fails, for every k.
 * Prints `FAULTS_STEP`, `FAULTS_OPTIM`, `FAULTS_FORWARD` and `FAULTS_ENTRY_RESOURCES {"injected": n, "failures": m}`
 * lines for scripts/collect_reliability.py.
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
#include "faults.h"
#include "gradgraph.h"
#include "internal.h"
#include "optim.h" /* a saved state's check word */

void *__real_calloc(size_t count, size_t bytes); /* fake_alloc.h's: the real allocator */

/* What a path works on: the context and the objects its stages make. */
typedef struct world {
    gg_ctx *ctx;
    gg_step *step;
    gg_optim *opt;
    const void *cfg; /* the path's own configuration */
    char *state;     /* the optimizer path's checkpoint, in what the fakes call host memory */
    size_t state_bytes;
} world;

/* A path: its stages, what each one's failure must return, and which failures leave an object to destroy. */
typedef struct path {
    const char *name;
    int n_stages;
    const char *const *stages;                        /* each stage's entry point, for the report */
    gg_status (*run)(world *w, int stage);            /* runs one stage */
    /* the status a fault of `kind`, the nth of its kind in `stage`, must give; GG_SUCCESS: the library absorbs
     * it (a documented fallback) */
    gg_status (*expect)(const world *w, int stage, fake_kind kind, int nth);
    /* after a failure of `stage` that leaves an object that can only be destroyed: a call the object must refuse
     * (GG_ERROR_INVALID_ARGUMENT, "destroy it"); GG_SUCCESS for the other stages */
    gg_status (*refused_after)(world *w, int stage);
    int (*is_graph_run)(int stage);                   /* a graph run: its failures launch nothing */
    void (*reset)(world *w);                          /* destroys what the stages made */
} path;

typedef struct tally {
    int injected, failures;
} tally;

static tally *current;
static const char *current_label; /* the path's configuration, for the report */

static void check(int ok, const path *p, int stage, fake_kind kind, int k, const char *fmt, ...) {
    if (ok) return;
    ++current->failures;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *entry = stage >= 0 && stage < p->n_stages ? p->stages[stage] : "-";
    printf("FAULT FAIL %s %s%s (stage %d, %s): %s #%d: %s\n", p->name, current_label,
           faults_device_cc ? " (9.0 device)" : "", stage, entry, fake_kind_names[kind], k, what);
}

/* Every stage from `from` on; *failed: the stage that failed (n_stages when none). */
static gg_status run_from(const path *p, world *w, int from, int *failed, fake_kind kind, int *hit_stage,
                          int *hit_nth, int *launches, int *enqueued) {
    const int before = fake.injected;
    for (int s = from; s < p->n_stages; ++s) {
        const int calls = fake.calls[kind];
        *launches = fake.graph_launches;
        *enqueued = fake.enqueued;
        const gg_status st = p->run(w, s);
        if (fake.injected > before && *hit_stage < 0) {
            *hit_stage = s;
            *hit_nth = fake.fail_at - calls;
        }
        if (st != GG_SUCCESS) {
            *failed = s;
            return st;
        }
    }
    *failed = p->n_stages;
    return GG_SUCCESS;
}

/* The k-th call of every kind fails in turn, for every k the path reaches. */
static void inject(const path *p, const void *cfg, const char *label) {
    current_label = label;
    for (int kind = 0; kind < FAKE_KINDS; ++kind)
        for (int k = 1;; ++k) {
            world w = {faults_make_ctx(), NULL, NULL, cfg, NULL, 0};
            fake.fail_kind = (fake_kind)kind;
            fake.fail_at = k;
            const int before = fake.injected;
            int failed = 0, hit_stage = -1, nth = 0, launches = 0, enqueued = 0;
            gg_status st = run_from(p, &w, 0, &failed, (fake_kind)kind, &hit_stage, &nth, &launches, &enqueued);
            const int hit = fake.injected > before;
            current->injected += hit;
            fake.fail_at = 0;
            const gg_status want = hit ? p->expect(&w, hit_stage, (fake_kind)kind, nth) : GG_SUCCESS;
            if (want == GG_SUCCESS) {
                check(st == GG_SUCCESS, p, failed, (fake_kind)kind, k, "status %s, expected success: %s",
                      gg_status_string(st), gg_last_error(w.ctx));
            } else {
                const char *msg = gg_last_error(w.ctx);
                check(failed == hit_stage, p, failed, (fake_kind)kind, k, "the fault (stage %d) failed stage %d",
                      hit_stage, failed);
                check(st == want, p, failed, (fake_kind)kind, k, "status %s, expected %s: %s", gg_status_string(st),
                      gg_status_string(want), msg);
                check(strstr(msg, faults_error_name((fake_kind)kind)) != NULL, p, failed, (fake_kind)kind, k,
                      "message \"%s\" does not name %s", msg, faults_error_name((fake_kind)kind));
                if (kind != FAKE_LAUNCH) /* a launch is named by its kernel */
                    check(strstr(msg, fake_kind_names[kind]) != NULL, p, failed, (fake_kind)kind, k,
                          "message \"%s\" does not name %s", msg, fake_kind_names[kind]);
                if (p->is_graph_run(failed))
                    check(fake.graph_launches == launches, p, failed, (fake_kind)kind, k, "a graph was launched");
                if (kind == FAKE_MALLOC || kind == FAKE_HEURISTIC || kind == FAKE_HOST_MEMORY) /* before any enqueue */
                    check(fake.enqueued == enqueued, p, failed, (fake_kind)kind, k, "%d enqueued",
                          fake.enqueued - enqueued);
            }
            check(fake.captures_open == 0, p, failed, (fake_kind)kind, k, "a stream is left capturing");
            /* usable after: go on from the failed stage, or destroy and start again */
            if (st != GG_SUCCESS) {
                int from = failed, dummy = -1, n = 0, l = 0, e = 0;
                const gg_status again = p->refused_after(&w, failed);
                if (again != GG_SUCCESS) {
                    check(again == GG_ERROR_INVALID_ARGUMENT && strstr(gg_last_error(w.ctx), "destroy it"), p,
                          failed, (fake_kind)kind, k, "after a failure that leaves only destroy: %s, \"%s\"",
                          gg_status_string(again), gg_last_error(w.ctx));
                    p->reset(&w);
                    from = 0;
                }
                st = run_from(p, &w, from, &failed, (fake_kind)kind, &dummy, &n, &l, &e);
                check(st == GG_SUCCESS, p, failed, (fake_kind)kind, k, "after the fault: %s", gg_last_error(w.ctx));
            }
            check(fake.captures_open == 0, p, failed, (fake_kind)kind, k, "a stream is left capturing after");
            p->reset(&w);
            gg_ctx_destroy(w.ctx);
            check(fake.live == 0, p, failed, (fake_kind)kind, k, "%d resources leaked", fake.live);
            if (!hit) break;
        }
}

/* The k-th CUDA or cuBLASLt resource made along the path fails (fake.fail_create_at), for every k the path reaches:
 * the stage that makes it fails with a CUDA, cuBLAS or out-of-memory status (or GG_ERROR_PARTIAL, for a call the
 * header allows it) and a message beginning with the stage's entry point, a graph run launches nothing, no stream is
 * left capturing; then the path goes on (or is refused, destroyed and run again) as in inject, and nothing is alive
 * once the context is gone. */
static void inject_resources(const path *p, const void *cfg, const char *label) {
    current_label = label;
    for (int k = 1;; ++k) {
        world w = {faults_make_ctx(), NULL, NULL, cfg, NULL, 0};
        const int armed = fake.fail_create_at = fake.creates + k;
        gg_status st = GG_SUCCESS;
        int failed = p->n_stages, launches = 0;
        for (int s = 0; s < p->n_stages && st == GG_SUCCESS; ++s) {
            launches = fake.graph_launches;
            st = p->run(&w, s);
            if (st != GG_SUCCESS) failed = s;
        }
        const int hit = fake.creates >= armed;
        fake.fail_create_at = 0;
        current->injected += hit;
        const char *msg = gg_last_error(w.ctx);
        if (hit && st != GG_SUCCESS) {
            check(st == GG_ERROR_CUDA || st == GG_ERROR_CUBLAS || st == GG_ERROR_OUT_OF_MEMORY ||
                      st == GG_ERROR_PARTIAL,
                  p, failed, FAKE_MALLOC, k, "a CUDA resource: status %s: %s", gg_status_string(st), msg);
            /* the stage's entry point where its label names one ("gg_step_run 512"), else a public call's name */
            char entry[64];
            snprintf(entry, sizeof entry, "%.*s: ", (int)strcspn(p->stages[failed], " "), p->stages[failed]);
            if (strncmp(entry, "gg_", 3) != 0) snprintf(entry, sizeof entry, "gg_");
            check(strncmp(msg, entry, strlen(entry)) == 0, p, failed, FAKE_MALLOC, k,
                  "a CUDA resource: \"%s\" does not begin with %s", msg, entry);
            if (p->is_graph_run(failed))
                check(fake.graph_launches == launches, p, failed, FAKE_MALLOC, k, "a CUDA resource: a graph was "
                      "launched");
        } else {
            check(st == GG_SUCCESS, p, failed, FAKE_MALLOC, k, "a CUDA resource: %s without its fault: %s",
                  gg_status_string(st), msg);
        }
        check(fake.captures_open == 0, p, failed, FAKE_MALLOC, k, "a CUDA resource: a stream is left capturing");
        if (st != GG_SUCCESS) {
            int from = failed, dummy = -1, n = 0, l = 0, e = 0;
            if (p->refused_after(&w, failed) != GG_SUCCESS) {
                p->reset(&w);
                from = 0;
            }
            st = run_from(p, &w, from, &failed, FAKE_MALLOC, &dummy, &n, &l, &e);
            check(st == GG_SUCCESS, p, failed, FAKE_MALLOC, k, "a CUDA resource: after the fault: %s",
                  gg_last_error(w.ctx));
        }
        p->reset(&w);
        gg_ctx_destroy(w.ctx);
        check(fake.live == 0, p, failed, FAKE_MALLOC, k, "a CUDA resource: %d resources leaked", fake.live);
        if (!hit) break;
    }
}

/* ---- the step graph: a 2-layer MLP with a callback between, and an optimizer ---- */

typedef struct step_cfg {
    const char *name;
    gg_precision precision;
    int with_optimizer;
    int side_streams;
} step_cfg;

static const gg_mlp_desc mlp_shape = {.tokens = 1, .hidden = 256, .ffn = 1024};

/* Layer l's MLP args (set 1: the other activation buffers), grad_output the previous layer's grad_hidden_states. */
static gg_mlp_args mlp_args(int l, int set) {
    const int b = 16 * l;
    gg_mlp_args a = {FAKE(b + 0), FAKE(b + 1), FAKE(b + 2), FAKE(b + 3), FAKE(b + 4), FAKE(b + 5), FAKE(b + 6),
                     FAKE(b + 7), FAKE(b + 8), FAKE(b + 9), FAKE(b + 10), NULL, NULL, NULL, NULL, NULL, NULL};
    if (l > 0) a.grad_output = FAKE(16 * (l - 1) + 6);
    if (set) {
        a.hidden_states = FAKE(200 + 4 * l);
        a.intermediate = FAKE(201 + 4 * l);
        a.intermediate_activated = FAKE(202 + 4 * l);
    }
    return a;
}

static void loss_callback(void *user, gg_stream stream, int64_t tokens) { (void)user, (void)stream, (void)tokens; }

/* The optimizer over both layers' weights (AdamW with clipping and the finite check: three launches a step). */
static gg_status make_optimizer(world *w, int stage) {
    switch (stage) {
    case 0: {
        gg_optim_config oc = GG_OPTIM_CONFIG_INIT;
        oc.max_grad_norm = 1.0f;
        return gg_optim_create(w->ctx, &oc, &w->opt);
    }
    case 1: {
        const gg_optim_param p = {.param = FAKE(2), .grad = FAKE(7), .count = 1024 * 256};
        return gg_optim_add_param(w->opt, &p);
    }
    case 2: {
        const gg_optim_param p = {.param = FAKE(18), .grad = FAKE(23), .count = 1024 * 256, .copy = FAKE(300),
                                  .copy_dtype = GG_OPTIM_BF16};
        return gg_optim_add_param(w->opt, &p);
    }
    default: return gg_optim_finalize(w->opt);
    }
}

static const char *const step_stages[] = {
    "gg_optim_create", "gg_optim_add_param", "gg_optim_add_param", "gg_optim_finalize", "gg_step_create",
    "gg_step_add_mlp", "gg_step_add_callback", "gg_step_add_mlp", "gg_step_add_optimizer", "gg_step_finalize",
    "gg_step_run 512", "gg_step_run 300 (padded)", "gg_step_run 512 accumulate", "gg_step_set_args (rebind)",
    "gg_step_run 512 (rebound)", "gg_step_run_device", "gg_step_run_device (replay)", "gg_step_run 512 (replay)"};
enum { STEP_FINALIZE_OPTIM = 3, STEP_FINALIZE = 9, STEP_FIRST_RUN = 10, STEP_SET_ARGS = 13, STEP_STAGES = 18 };

static gg_status step_stage(world *w, int stage) {
    const step_cfg *c = w->cfg;
    const int64_t *device_tokens = (const int64_t *)FAKE(301);
    if (stage <= STEP_FINALIZE_OPTIM) return c->with_optimizer ? make_optimizer(w, stage) : GG_SUCCESS;
    gg_mlp_desc d = mlp_shape;
    d.precision = c->precision;
    switch (stage) {
    case 4: {
        gg_step_config sc = GG_STEP_CONFIG_INIT;
        sc.max_tokens = 512;
        sc.execs_per_bucket = 1; /* a new key in a bucket updates its exec in place */
        sc.side_streams = c->side_streams;
        return gg_step_create(w->ctx, &sc, &w->step);
    }
    case 5: {
        const gg_mlp_args a = mlp_args(0, 0);
        return gg_step_add_mlp(w->step, &d, &a);
    }
    case 6: return gg_step_add_callback(w->step, loss_callback, NULL);
    case 7: {
        const gg_mlp_args a = mlp_args(1, 0);
        return gg_step_add_mlp(w->step, &d, &a);
    }
    case 8: return c->with_optimizer ? gg_step_add_optimizer(w->step, w->opt) : GG_SUCCESS;
    case STEP_FINALIZE: return gg_step_finalize(w->step);
    case 10: return gg_step_run(w->step, 512, 0, NULL);
    case 11: return gg_step_run(w->step, 300, 0, NULL);
    case 12: return gg_step_run(w->step, 512, 1, NULL);
    case STEP_SET_ARGS:
        for (int l = 0; l < 2; ++l) {
            const gg_mlp_args a = mlp_args(l, 1);
            const gg_status st = gg_step_set_args(w->step, 2 * l, &a); /* calls 0 and 2 (1 is the callback) */
            if (st != GG_SUCCESS) return st;
        }
        return GG_SUCCESS;
    case 14: return gg_step_run(w->step, 512, 0, NULL);
    case 15:
    case 16: return gg_step_run_device(w->step, device_tokens, 0, NULL);
    default: return gg_step_run(w->step, 512, 0, NULL);
    }
}

static gg_status step_expect(const world *w, int stage, fake_kind kind, int nth) {
    (void)w, (void)nth;
    if (kind == FAKE_MALLOC || kind == FAKE_HOST_MEMORY) return GG_ERROR_OUT_OF_MEMORY;
    if (kind == FAKE_HEURISTIC || kind == FAKE_MATMUL) return GG_ERROR_CUBLAS;
    if (kind == FAKE_EXEC_UPDATE && stage >= STEP_FIRST_RUN) return GG_SUCCESS; /* falls back to instantiating */
    return GG_ERROR_CUDA; /* a run's capture, instantiation or launch, the optimizer's launches in it included */
}

static gg_status step_refused_after(world *w, int stage) {
    if (stage == STEP_FINALIZE_OPTIM) return gg_optim_step(w->opt, NULL);
    if (stage == STEP_FINALIZE) return gg_step_run(w->step, 512, 0, NULL);
    return GG_SUCCESS;
}
static int step_is_graph_run(int stage) { return stage >= STEP_FIRST_RUN && stage != STEP_SET_ARGS; }

static void step_reset(world *w) {
    gg_step_destroy(w->step);
    gg_optim_destroy(w->opt);
    w->step = NULL;
    w->opt = NULL;
}

static const path step_path = {"step", STEP_STAGES, step_stages, step_stage, step_expect, step_refused_after,
                               step_is_graph_run, step_reset};

/* ---- the optimizer alone ---- */

typedef struct optim_cfg {
    const char *name;
    gg_optim_kind kind;
    int check_finite;
    float max_grad_norm;
} optim_cfg;

static const char *const optim_stages[] = {
    "gg_optim_create",         "gg_optim_add_param", "gg_optim_add_param",    "gg_optim_finalize",   "gg_optim_set_lr",
    "gg_optim_set_loss_scale", "gg_optim_step",      "gg_optim_step (again)", "gg_optim_save_state", "gg_optim_load_state"};
enum { OPTIM_FINALIZE = 3, OPTIM_FIRST_STEP = 6, OPTIM_SAVE = 8, OPTIM_LOAD = 9, OPTIM_STAGES = 10 };

/* A checkpoint's stages: the state saved into host memory, then loaded back (its device words set first to what a
 * step leaves there: the fakes' copies to the host write zeros, and a zero inverse loss scale is refused). */
static gg_status checkpoint_stage(world *w, int stage) {
    if (!w->state) {
        if (gg_optim_state_size(w->opt, &w->state_bytes) != GG_SUCCESS) return GG_ERROR_INVALID_ARGUMENT;
        w->state = __real_calloc(1, w->state_bytes); /* past the host-memory faults: the library's are injected */
        if (!w->state) return GG_ERROR_OUT_OF_MEMORY;
        fake.host_lo = (uintptr_t)w->state, fake.host_hi = (uintptr_t)w->state + w->state_bytes;
    }
    if (stage == OPTIM_SAVE) return gg_optim_save_state(w->opt, w->state, w->state_bytes);
    const float words[2] = {1e-3f, 1.0f}; /* the learning rate, 1 / the loss scale (docs/optimizer.md's format) */
    memcpy(w->state + 64 + 8 * 2, words, sizeof words);
    const uint64_t check = gg_optim_state_checksum(w->state, w->state_bytes); /* at offset 40 */
    memcpy(w->state + 40, &check, sizeof check);
    return gg_optim_load_state(w->opt, w->state, w->state_bytes);
}

static gg_status optim_stage(world *w, int stage) {
    const optim_cfg *c = w->cfg;
    switch (stage) {
    case 0: {
        gg_optim_config oc = GG_OPTIM_CONFIG_INIT;
        oc.kind = c->kind;
        oc.check_finite = c->check_finite;
        oc.max_grad_norm = c->max_grad_norm;
        if (c->kind == GG_OPTIM_SGD) oc.momentum = 0.9f;
        return gg_optim_create(w->ctx, &oc, &w->opt);
    }
    case 1: {
        const gg_optim_param p = {.param = FAKE(0), .grad = FAKE(1), .count = 1 << 20};
        return gg_optim_add_param(w->opt, &p);
    }
    case 2: {
        const gg_optim_param p = {.param = FAKE(2), .grad = FAKE(3), .grad_dtype = GG_OPTIM_BF16, .count = 4097,
                                  .copy = FAKE(4), .copy_dtype = GG_OPTIM_FP16, .no_weight_decay = 1};
        return gg_optim_add_param(w->opt, &p);
    }
    case OPTIM_FINALIZE: return gg_optim_finalize(w->opt);
    case 4: return gg_optim_set_lr(w->opt, 3e-4f, NULL);
    case 5: return gg_optim_set_loss_scale(w->opt, 1024.0f, NULL);
    case OPTIM_SAVE:
    case OPTIM_LOAD: return checkpoint_stage(w, stage);
    default: return gg_optim_step(w->opt, NULL);
    }
}

/* A step's launches: the sum of squares (with clipping or the finite check), the total and step counts, the
 * update. Only the update's failure comes after something that changes state (the step counts): GG_ERROR_PARTIAL. */
static gg_status optim_expect(const world *w, int stage, fake_kind kind, int nth) {
    const optim_cfg *c = w->cfg;
    if (kind == FAKE_MALLOC || kind == FAKE_HOST_MEMORY) return GG_ERROR_OUT_OF_MEMORY;
    if (kind == FAKE_MEMCPY && stage == OPTIM_LOAD) return GG_ERROR_PARTIAL; /* the state is part old, part new */
    if (kind == FAKE_LAUNCH && stage >= OPTIM_FIRST_STEP) {
        const int launches = c->check_finite || c->max_grad_norm > 0.0f ? 3 : 2;
        return nth == launches ? GG_ERROR_PARTIAL : GG_ERROR_CUDA;
    }
    return GG_ERROR_CUDA;
}

static gg_status optim_refused_after(world *w, int stage) {
    return stage == OPTIM_FINALIZE ? gg_optim_set_lr(w->opt, 1e-3f, NULL) : GG_SUCCESS;
}
static int no_graph_run(int stage) { return (void)stage, 0; }

static void optim_reset(world *w) {
    gg_optim_destroy(w->opt);
    w->opt = NULL;
    free(w->state); /* the real allocator's: free is not wrapped */
    w->state = NULL;
    fake.host_lo = fake.host_hi = 0;
}

static const path optim_path = {"optim", OPTIM_STAGES, optim_stages, optim_stage, optim_expect, optim_refused_after,
                                no_graph_run, optim_reset};

/* ---- the forwards ---- */

typedef struct forward_cfg {
    const char *name;
    int block; /* 1..4 */
    int64_t tokens, dim0, dim1;
    gg_precision precision;
    int silu, tanh_inner;
} forward_cfg;

static const char *const forward_stages[] = {"forward (plans)", "forward (planned)"};

static gg_status forward_stage(world *w, int stage) {
    (void)stage;
    const forward_cfg *c = w->cfg;
    switch (c->block) {
    case 1: {
        const gg_tanh_gate_desc d = {c->tokens, c->dim0, 0};
        const gg_tanh_gate_fwd_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4)};
        return gg_tanh_gate_forward(w->ctx, &d, &a, NULL);
    }
    case 2: {
        const gg_gelu_ffn_desc d = {c->tokens, c->dim0, c->dim1, c->precision, 0};
        const gg_gelu_ffn_fwd_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), c->tanh_inner ? FAKE(5) : NULL,
                                        FAKE(6), NULL, NULL, NULL, NULL, NULL};
        return gg_gelu_ffn_forward(w->ctx, &d, &a, NULL);
    }
    case 3: {
        const gg_mlp_desc d = {c->tokens, c->dim0, c->dim1, c->precision, 0};
        const gg_mlp_fwd_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7),
                                   NULL,    NULL,    NULL,    NULL,    NULL};
        return gg_mlp_forward(w->ctx, &d, &a, NULL);
    }
    default: {
        const gg_ssm_gate_desc d = {c->tokens, c->dim0, c->dim1, c->silu, 0};
        const gg_ssm_gate_fwd_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6)};
        return gg_ssm_gate_forward(w->ctx, &d, &a, NULL);
    }
    }
}

/* Planning faults say what failed and enqueue nothing; once the call enqueues, GG_ERROR_PARTIAL. Blocks 2 and 3
 * first plan their GELU in the first GEMM's epilogue: no algorithm for it (the first heuristic query refused) moves
 * the GELU to gradgraph's kernel, and the call succeeds. */
static gg_status forward_expect(const world *w, int stage, fake_kind kind, int nth) {
    const forward_cfg *c = w->cfg;
    if (kind == FAKE_MALLOC || kind == FAKE_HOST_MEMORY) return GG_ERROR_OUT_OF_MEMORY;
    if (kind == FAKE_HEURISTIC) return (c->block == 2 || c->block == 3) && stage == 0 && nth == 1 ? GG_SUCCESS
                                                                                                  : GG_ERROR_CUBLAS;
    return GG_ERROR_PARTIAL;
}

static gg_status never_refused(world *w, int stage) { return (void)w, (void)stage, GG_SUCCESS; }
static void nothing_to_reset(world *w) { (void)w; }

static const path forward_path = {"forward",     2,           forward_stages, forward_stage, forward_expect,
                                  never_refused, no_graph_run, nothing_to_reset};

static void report(const char *tag, const tally *t) {
    printf("%s {\"injected\": %d, \"failures\": %d}\n", tag, t->injected, t->failures);
}

void faults_of_steps_optimizers_forwards(void **state) {
    (void)state;
    static const step_cfg steps[] = {
        {"mlp fp32 + optimizer", GG_PRECISION_FP32, 1, 2},
        {"mlp fp16 + optimizer, one side stream", GG_PRECISION_FP16, 1, 1},
        {"mlp tf32", GG_PRECISION_TF32, 0, 2},
    };
    static const optim_cfg optims[] = {
        {"adamw clip", GG_OPTIM_ADAMW, 1, 1.0f},
        {"adamw unchecked", GG_OPTIM_ADAMW, 0, 0.0f},
        {"sgd momentum", GG_OPTIM_SGD, 1, 0.0f},
    };
    static const forward_cfg forwards[] = {
        {"tanh_gate", 1, 64, 4096, 0, GG_PRECISION_DEFAULT, 0, 0},
        {"gelu_ffn fp32", 2, 64, 1536, 6144, GG_PRECISION_FP32, 0, 1},
        {"gelu_ffn fp16", 2, 1200, 1536, 6144, GG_PRECISION_FP16, 0, 0},
        {"mlp tf32", 3, 600, 2048, 8192, GG_PRECISION_TF32, 0, 0},
        {"mlp fp16", 3, 256, 2048, 8192, GG_PRECISION_FP16, 0, 0},
        {"ssm_gate silu", 4, 4001, 768, 1536, GG_PRECISION_DEFAULT, 1, 0},
        {"ssm_gate", 4, 64, 768, 1536, GG_PRECISION_DEFAULT, 0, 0},
    };
    tally step = {0, 0}, optim = {0, 0}, forward = {0, 0}, resources = {0, 0};
    /* a device without and with the sm_90a routes */
    for (faults_device_cc = 0; faults_device_cc <= 90; faults_device_cc += 90) {
        current = &step;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i) inject(&step_path, &steps[i], steps[i].name);
        current = &optim;
        for (size_t i = 0; i < sizeof optims / sizeof optims[0]; ++i) inject(&optim_path, &optims[i], optims[i].name);
        current = &forward;
        for (size_t i = 0; i < sizeof forwards / sizeof forwards[0]; ++i)
            inject(&forward_path, &forwards[i], forwards[i].name);
        current = &resources;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i)
            inject_resources(&step_path, &steps[i], steps[i].name);
        for (size_t i = 0; i < sizeof optims / sizeof optims[0]; ++i)
            inject_resources(&optim_path, &optims[i], optims[i].name);
        for (size_t i = 0; i < sizeof forwards / sizeof forwards[0]; ++i)
            inject_resources(&forward_path, &forwards[i], forwards[i].name);
    }
    faults_device_cc = 0;
    report("FAULTS_STEP", &step);
    report("FAULTS_OPTIM", &optim);
    report("FAULTS_FORWARD", &forward);
    report("FAULTS_ENTRY_RESOURCES", &resources);
    assert_true(step.injected > 100);
    assert_true(optim.injected > 10);
    assert_true(forward.injected > 20);
    assert_true(resources.injected > 100);
    assert_int_equal(step.failures + optim.failures + forward.failures + resources.failures, 0);
}

/* A device-selected graph first built after a failed growth lost the context's scratch arena: its buckets' plan
 * lookups make the arena again, growing it bucket by bucket, so the branches captured first would hold addresses in
 * arenas freed before the exec is installed (and replayed from then on). The build is made again on the arena as it
 * ends up: no captured operation touches a freed arena, and the next run replays that exec. */
void device_graph_built_after_a_lost_arena(void **state) {
    (void)state;
    fake_reset(1);
    fake.device_space = 1; /* device memory at addresses as far apart as its sizes: the captures' ranges are real */
    fake.plan_ok = 1;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(NULL, &ctx), GG_SUCCESS);
    const gg_mlp_desc md = {.tokens = 1024, .hidden = 2048, .ffn = 8192};
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    gc.max_tokens = 1024;
    gc.device_select = 1;
    gg_graph *g = NULL;
    assert_int_equal(gg_mlp_graph_create(ctx, &md, &gc, &g), GG_SUCCESS);
    const gg_mlp_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7), FAKE(8), FAKE(9),
                           FAKE(10), NULL, NULL, NULL, NULL, NULL, NULL};
    const int64_t *device_tokens = (const int64_t *)FAKE(20);
    fake_log_start(); /* one build's work, on the arena made at create */
    assert_int_equal(gg_mlp_graph_run_device(g, &md, device_tokens, &a, NULL), GG_SUCCESS);
    fake_log_stop();
    const int one_build = fake_log.n;
    gg_graph_config big = GG_GRAPH_CONFIG_INIT; /* its growth fails at the k-th allocation until the arena is lost */
    big.max_tokens = 16384;
    for (int k = 1; k < 50 && ctx->scratch; ++k) {
        gg_graph *other = NULL;
        fake.fail_kind = FAKE_MALLOC;
        fake.fail_at = fake.calls[FAKE_MALLOC] + k;
        if (gg_mlp_graph_create(ctx, &md, &big, &other) == GG_SUCCESS) gg_graph_destroy(other);
        fake.fail_at = 0;
    }
    assert_null(ctx->scratch);
    void *first_free = NULL; /* where the next allocation starts: arenas made from here on and freed lie above it */
    assert_int_equal(cudaMalloc(&first_free, 1), cudaSuccess);
    assert_int_equal(cudaFree(first_free), cudaSuccess);
    fake_log_start(); /* the exec is built again (the arena moved): the same work, once or more */
    assert_int_equal(gg_mlp_graph_run_device(g, &md, device_tokens, &a, NULL), GG_SUCCESS);
    fake_log_stop();
    const int builds = fake_log.n / one_build;
    assert_int_equal(fake_log.n % one_build, 0);
    int stale = 0; /* in the build that was kept, the last one */
    for (int i = fake_log.n - one_build; i < fake_log.n; ++i)
        for (int r = 0; r < fake_log.entries[i].n_ranges; ++r) {
            const uintptr_t lo = fake_log.entries[i].ranges[r].lo;
            stale += lo >= (uintptr_t)first_free && lo < (uintptr_t)ctx->scratch;
        }
    fake_log_free();
    printf("RESULT device-selected graph built after a lost arena: %d builds, %d captured ranges of the kept one in "
           "freed arenas\n",
           builds, stale);
    assert_int_equal(stale, 0);
    assert_true(builds >= 2); /* the first, made while the arena grew, was not kept */
    const int captures = fake.captures;
    assert_int_equal(gg_mlp_graph_run_device(g, &md, device_tokens, &a, NULL), GG_SUCCESS);
    assert_int_equal(fake.captures, captures); /* the exec built above is replayed */
    gg_graph_destroy(g);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}
