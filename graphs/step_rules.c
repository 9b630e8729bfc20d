/* step_rules.c - what a step's calls may be, checked at finalize and by gg_step_set_args, and which earlier call's
 * deferred work a call must wait for in the capture. */
#include "step_internal.h"

#include <stdint.h>

/* ---- the chain's rules ---- */

static int is_param(const gg_block_call *c, int i) {
    return c->info->tensors[i].is_output && c->info->tensors[i].rows != GG_EXT_TOKENS;
}

static int is_act_grad(const gg_block_call *c, int i) {
    return c->info->tensors[i].is_output && c->info->tensors[i].rows == GG_EXT_TOKENS;
}

/* Whether tensors i of a and j of b share a byte (both used; sizes at the calls' tokens). */
static int overlap(const gg_block_call *a, int i, const gg_block_call *b, int j) {
    if (!gg_tensor_used(a, i) || !gg_tensor_used(b, j)) return 0;
    const uintptr_t a0 = (uintptr_t)a->t[i], a1 = a0 + gg_tensor_bytes(a, i);
    const uintptr_t b0 = (uintptr_t)b->t[j], b1 = b0 + gg_tensor_bytes(b, j);
    return a0 < b1 && b0 < a1;
}

/* Checks call `later` against every earlier block call: parameter gradients are written by one call only, and an
 * input that overlaps an earlier call's activation gradient is exactly that tensor. */
gg_status gg_step_check_chain(gg_step *s, const char *fn, int later) {
    const gg_block_call *b = &s->ops[later].call;
    for (int e = 0; e < later; ++e) {
        if (s->ops[e].kind != OP_BLOCK) continue;
        const gg_block_call *a = &s->ops[e].call;
        for (int j = 0; j < b->info->n_tensors; ++j)
            for (int i = 0; i < a->info->n_tensors; ++i) {
                if (!overlap(a, i, b, j)) continue;
                const char *an = a->info->tensors[i].name, *bn = b->info->tensors[j].name;
                if (is_param(a, i) && b->info->tensors[j].is_output)
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's args->%s overlaps call %d's parameter gradient args->%s: the two "
                                   "writes would race (give each call its own gradient and add them in a callback)",
                                   fn, later, bn, e, an);
                if (is_act_grad(a, i) && !b->info->tensors[j].is_output &&
                    (a->t[i] != b->t[j] || gg_tensor_bytes(a, i) != gg_tensor_bytes(b, j)))
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's args->%s overlaps call %d's args->%s without being that tensor "
                                   "(same pointer and shape)",
                                   fn, later, bn, e, an);
            }
    }
    return GG_SUCCESS;
}

/* Whether block call b must wait for the deferred work of the earlier block call a: b writes what a's deferred work
 * reads (a's inputs), or touches a parameter gradient a's deferred work writes. a's activation gradients are complete
 * on the main stream when a's enqueue returns. */
int gg_step_hazard(const gg_block_call *a, const gg_block_call *b) {
    for (int i = 0; i < a->info->n_tensors; ++i)
        for (int j = 0; j < b->info->n_tensors; ++j) {
            if (!overlap(a, i, b, j)) continue;
            if (is_param(a, i)) return 1;
            if (!a->info->tensors[i].is_output && b->info->tensors[j].is_output) return 1;
        }
    return 0;
}

/* Whether [p, p + n) and [q, q + m) share a byte. */
static int bytes_overlap(const void *p, size_t n, const void *q, size_t m) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + m && b < a + n;
}

int gg_step_other_user(const gg_step *s, int producer, const void *p, size_t bytes) {
    if (!p || !bytes) return -1;
    for (int i = 0; i < s->n_ops; ++i) {
        const gg_block_call *c = &s->ops[i].call;
        if (s->ops[i].kind != OP_BLOCK || i == producer) continue;
        for (int t = 0; t < c->info->n_tensors; ++t)
            if (gg_tensor_used(c, t) && bytes_overlap(p, bytes, c->t[t], gg_tensor_bytes(c, t))) return i;
    }
    return -1;
}

/* ---- the gradients a syncing step reduces ---- */

/* gg_step_add_reduce's entries must not overlap a block call's parameter gradient or each other (each would be
 * reduced twice, by collectives that race). */
gg_status gg_step_check_reduce_entries(gg_step *s, const char *fn) {
    for (int r = 0; r < s->n_ops; ++r) {
        const step_op *e = &s->ops[r];
        if (e->kind != OP_REDUCE) continue;
        const size_t bytes = e->count * (size_t)e->elem_bytes;
        for (int i = 0; i < s->n_ops; ++i) {
            const step_op *o = &s->ops[i];
            if (o->kind == OP_REDUCE && i < r &&
                bytes_overlap(e->grad, bytes, o->grad, o->count * (size_t)o->elem_bytes))
                return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                               "%s: call %d's gg_step_add_reduce buffer overlaps call %d's: it would be reduced twice",
                               fn, r, i);
            if (o->kind != OP_BLOCK) continue;
            for (int t = 0; t < o->call.info->n_tensors; ++t)
                if (is_param(&o->call, t) && gg_tensor_used(&o->call, t) &&
                    bytes_overlap(e->grad, bytes, o->call.t[t], gg_tensor_bytes(&o->call, t)))
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's gg_step_add_reduce buffer overlaps call %d's parameter gradient "
                                   "args->%s, which the step reduces already",
                                   fn, r, i, o->call.info->tensors[t].name);
        }
    }
    return GG_SUCCESS;
}

/* In a syncing step no block call reads or writes a gradient an earlier call reduces (an earlier block call's
 * parameter gradient, an earlier gg_step_add_reduce buffer): its reduction, in place on the communication stream, may
 * run beside the call, and beside the call's deferred work, which no bucket waits for. (A write into an earlier
 * call's parameter gradient is refused by gg_step_check_chain already, reduced or not.) */
gg_status gg_step_check_reduced_uses(gg_step *s, const char *fn) {
    for (int r = 0; r < s->n_ops; ++r) {
        const step_op *b = &s->ops[r];
        if (b->kind != OP_BLOCK) continue;
        for (int j = 0; j < b->call.info->n_tensors; ++j) {
            if (!gg_tensor_used(&b->call, j)) continue;
            const void *p = b->call.t[j];
            const size_t bytes = gg_tensor_bytes(&b->call, j);
            const char *bn = b->call.info->tensors[j].name;
            for (int e = 0; e < r; ++e) {
                const step_op *a = &s->ops[e];
                if (a->kind == OP_REDUCE && bytes_overlap(p, bytes, a->grad, a->count * (size_t)a->elem_bytes))
                    return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                   "%s: call %d's args->%s overlaps call %d's gg_step_add_reduce buffer, which the "
                                   "step reduces across the ranks while this call may use it (use reduced "
                                   "gradients in a gradient callback: gg_step_add_gradient_callback)",
                                   fn, r, bn, e);
                if (a->kind != OP_BLOCK) continue;
                for (int t = 0; t < a->call.info->n_tensors; ++t)
                    if (is_param(&a->call, t) && gg_tensor_used(&a->call, t) &&
                        bytes_overlap(p, bytes, a->call.t[t], gg_tensor_bytes(&a->call, t)))
                        return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                                       "%s: call %d's args->%s overlaps call %d's parameter gradient args->%s, which "
                                       "the step reduces across the ranks while this call may use it (use reduced "
                                       "gradients in a gradient callback: gg_step_add_gradient_callback)",
                                       fn, r, bn, e, a->call.info->tensors[t].name);
            }
        }
    }
    return GG_SUCCESS;
}

/* Every gradient the step reduces, in production order (block calls' parameter gradients in table order, then
 * where they were added, the caller's entries); grads NULL: only counts them. */
int gg_step_list_grads(const gg_step *s, gg_reduce_grad *grads) {
    int n = 0;
    for (int i = 0; i < s->n_ops; ++i) {
        const step_op *o = &s->ops[i];
        if (o->kind == OP_REDUCE) {
            if (grads) grads[n] = (gg_reduce_grad){o->grad, o->count, o->elem_bytes, i};
            ++n;
        }
        if (o->kind != OP_BLOCK) continue;
        for (int t = 0; t < o->call.info->n_tensors; ++t) {
            if (!is_param(&o->call, t) || !gg_tensor_used(&o->call, t)) continue;
            if (grads)
                grads[n] = (gg_reduce_grad){o->call.t[t], gg_tensor_elems(&o->call, t),
                                            o->call.info->tensors[t].elem_bytes, i};
            ++n;
        }
    }
    return n;
}

int gg_step_needs_gradients(const step_op *op) {
    return (op->kind == OP_FINAL && op->final.whole_gradients) || (op->kind == OP_CALLBACK && op->after_gradients);
}

int gg_step_has_final_work(const gg_step *s) {
    for (int i = 0; i < s->n_ops; ++i)
        if (s->ops[i].kind == OP_FINAL || gg_step_needs_gradients(&s->ops[i])) return 1;
    return 0;
}

/* Work that needs every gradient final (an optimizer, a gradient callback) comes after every call that makes one: a
 * gradient made later would miss it. Plain callbacks may follow it. */
gg_status gg_step_check_final_last(gg_step *s, const char *fn) {
    int final = -1;
    for (int i = 0; i < s->n_ops; ++i) {
        const op_kind k = s->ops[i].kind;
        if (gg_step_needs_gradients(&s->ops[i]) && final < 0) final = i;
        if (final >= 0 && (k == OP_BLOCK || k == OP_REDUCE))
            return gg_fail(s->ctx, GG_ERROR_INVALID_ARGUMENT,
                           "%s (call %d): a %s after the %s (call %d), which needs every gradient final and would run "
                           "before this one is made: add the %s after every block call and gg_step_add_reduce",
                           fn, i, k == OP_BLOCK ? "block call" : "gg_step_add_reduce",
                           s->ops[final].kind == OP_FINAL ? "optimizer" : "gradient callback", final,
                           s->ops[final].kind == OP_FINAL ? "optimizer" : "gradient callback");
    }
    return GG_SUCCESS;
}
