/*
 * step_api.c - the public adds of step graphs that join a step with another part of the library (include/gradgraph.h,
 * "Step graphs"): each block add hands its desc and args, with the block's table, to gg_step_add_block
 * (graphs/step.c), where the other gg_step_* entry points live; gg_step_add_optimizer hands an optimizer's step to
 * gg_step_add_final.
 */
#include "blocks.h"
#include "src/optim/optim.h"
#include "step.h"
#include "step_reduce.h"

#include <stdlib.h>
#include <string.h>

gg_status gg_step_add_tanh_gate(gg_step *step, const gg_tanh_gate_desc *desc, const gg_tanh_gate_args *args) {
    return gg_step_add_block(step, &gg_tanh_gate_info, "gg_step_add_tanh_gate", desc, args);
}

gg_status gg_step_add_gelu_ffn(gg_step *step, const gg_gelu_ffn_desc *desc, const gg_gelu_ffn_args *args) {
    return gg_step_add_block(step, &gg_gelu_ffn_info, "gg_step_add_gelu_ffn", desc, args);
}

gg_status gg_step_add_mlp(gg_step *step, const gg_mlp_desc *desc, const gg_mlp_args *args) {
    return gg_step_add_block(step, &gg_mlp_info, "gg_step_add_mlp", desc, args);
}

gg_status gg_step_add_ssm_gate(gg_step *step, const gg_ssm_gate_desc *desc, const gg_ssm_gate_args *args) {
    return gg_step_add_block(step, &gg_ssm_gate_info, "gg_step_add_ssm_gate", desc, args);
}

/* An optimizer in a step: which parameters a capture has updated early (as their gradients were reduced). */
typedef struct optimizer_stage {
    gg_optim *opt;
    int n_params;
    unsigned char done[]; /* per parameter, during one capture */
} optimizer_stage;

static void stage_begin(void *user) {
    optimizer_stage *st = user;
    memset(st->done, 0, (size_t)st->n_params);
}

/* A syncing step's gradient is reduced: its parameter's update on the communication stream behind it, when the
 * optimizer updates parameters apart (neither clipping nor the finite check waits for every gradient) and no block
 * call but the gradient's producer touches the weights or their copy (weights tied between calls: that call's reads
 * would run beside the update); such a parameter is updated at the end with the rest. */
static gg_status stage_early(void *user, const gg_step *step, const gg_reduce_grad *grad, cudaStream_t stream) {
    optimizer_stage *st = user;
    if (!gg_optim_updates_apart(st->opt)) return GG_SUCCESS;
    const int p = gg_optim_param_of(st->opt, grad->ptr, grad->count, grad->elem_bytes);
    if (p < 0 || st->done[p]) return GG_SUCCESS;
    const gg_optim_param *param = &st->opt->params[p];
    int reader = gg_step_other_user(step, grad->producer, param->param, (size_t)param->count * sizeof(float));
    if (reader < 0 && param->copy)
        reader = gg_step_other_user(step, grad->producer, param->copy, (size_t)param->count * 2);
    if (reader >= 0) {
        const char *entry = gg_ctx_entry(st->opt->ctx); /* gg_step_run, or gg_step_debug_dot capturing again */
        gg_log(st->opt->ctx, GG_LOG_DEBUG,
               "%s: the optimizer's parameter %d is updated at the end of the step, not as its gradient is reduced: "
               "call %d uses its weights too",
               entry ? entry : "gg_step_run", p, reader);
        return GG_SUCCESS;
    }
    st->done[p] = 1;
    return gg_optim_step_range_captured(st->opt, p, 1, stream);
}

/* Where the step's gradients are final: every parameter not updated early (in the step's capture: a failure there
 * enqueues nothing that runs). */
static gg_status stage_run(void *user, cudaStream_t stream) {
    optimizer_stage *st = user;
    int any = 0;
    for (int i = 0; i < st->n_params; ++i) any |= st->done[i];
    if (!any) return gg_optim_step_captured(st->opt, stream);
    for (int first = 0; first < st->n_params;) {
        if (st->done[first]) {
            ++first;
            continue;
        }
        int end = first;
        while (end < st->n_params && !st->done[end]) ++end;
        GG_TRY(gg_optim_step_range_captured(st->opt, first, end - first, stream));
        first = end;
    }
    return GG_SUCCESS;
}

/* The stage's end (the step destroyed, or the add refused): the optimizer is no longer held by it. */
static void stage_release(void *user) {
    optimizer_stage *st = user;
    st->opt->held_by_steps--;
    free(st);
}

/* A syncing step's finalize: a parameter whose gradient lies in none of the gradients the step reduces would be
 * updated on every rank from that rank's own gradient, the ranks' weights drifting apart: a WARN names it. */
static void stage_synced(void *user, gg_ctx *ctx, const char *fn, const gg_reduce_grad *grads, int n_grads) {
    const optimizer_stage *st = user;
    for (int i = 0; i < st->n_params; ++i) {
        const gg_optim_param *p = &st->opt->params[i];
        const uintptr_t lo = (uintptr_t)p->grad;
        const uintptr_t hi = lo + (uintptr_t)p->count * (p->grad_dtype == GG_OPTIM_FP32 ? 4u : 2u);
        int reduced = 0;
        for (int k = 0; k < n_grads && !reduced; ++k) {
            const uintptr_t g = (uintptr_t)grads[k].ptr;
            reduced = g <= lo && hi <= g + grads[k].count * (size_t)grads[k].elem_bytes;
        }
        if (!reduced)
            gg_log(ctx, GG_LOG_WARN,
                   "%s: the optimizer's parameter %d has a gradient (%p, %lld elements) that the step does not "
                   "reduce (no block call makes it and no gg_step_add_reduce holds it): every rank will update it "
                   "from its own gradient, and the ranks' weights will drift apart",
                   fn, i, p->grad, (long long)p->count);
    }
}

gg_status gg_step_add_optimizer(gg_step *step, gg_optim *opt) {
    const char *fn = "gg_step_add_optimizer";
    const gg_step_final none = {0};
    if (!step) return gg_step_add_final(step, fn, &none); /* its message: step is NULL */
    gg_ctx *ctx = gg_step_context(step);
    if (!opt) return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT, "%s (call %d): opt is NULL", fn, gg_step_call_count(step));
    if (opt->ctx != ctx)
        return gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                       "%s (call %d): opt was made on another context than the step (one context: one stream order)",
                       fn, gg_step_call_count(step));
    /* claimed before the optimizer's state is read or its holders counted: another thread inside the context may be
     * finalizing or destroying it (gg_step_add_final claims again, nested) */
    GG_TRY(gg_ctx_claim(ctx, fn));
    gg_status status = GG_SUCCESS;
    if (opt->finalized != 1)
        status = gg_fail(ctx, GG_ERROR_INVALID_ARGUMENT,
                         "%s (call %d): opt is not finalized (call gg_optim_finalize)", fn, gg_step_call_count(step));
    optimizer_stage *st = status == GG_SUCCESS ? calloc(1, sizeof *st + (size_t)opt->n_params) : NULL;
    if (status == GG_SUCCESS && !st)
        status = gg_fail(ctx, GG_ERROR_OUT_OF_MEMORY, "%s (call %d): out of host memory", fn, gg_step_call_count(step));
    if (status == GG_SUCCESS) {
        st->opt = opt;
        st->n_params = opt->n_params;
        opt->held_by_steps++; /* gg_optim_destroy refuses while a step holds it */
        const gg_step_final final = {stage_run, stage_begin, stage_early, 1, stage_release, st, stage_synced};
        status = gg_step_add_final(step, fn, &final); /* releases st when it fails */
    }
    gg_ctx_release(ctx);
    return status;
}
