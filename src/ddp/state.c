/*
 * state.c - what any build answers about a context's data-parallel state (no communicator: the answers of a
 * context that does not sync): rank, size, whether a call reduces during its backward, the data-parallel part of a
 * plan key, and the count of graphs holding NCCL work.
 */
#include "ddp.h"

int gg_tensor_is_param(const gg_block_call *c, int i) {
    const gg_tensor_spec *s = &c->info->tensors[i];
    return s->is_output && s->rows != GG_EXT_TOKENS;
}

int gg_dist_rank(const gg_ctx *ctx) { return ctx && ctx->dist ? ctx->dist->rank : -1; }
int gg_dist_size(const gg_ctx *ctx) { return ctx && ctx->dist ? ctx->dist->size : 0; }
void *gg_dist_comm(const gg_ctx *ctx) {
    if (!ctx || !ctx->dist) return NULL;
    gg_dist *d = ctx->dist;
    pthread_mutex_lock(&d->lock); /* the watchdog or gg_dist_abort may be clearing it */
    void *comm = d->comm;
    pthread_mutex_unlock(&d->lock);
    return comm;
}
int gg_dist_comm_sms(const gg_ctx *ctx) {
    return ctx->dist && ctx->dist->config.overlap ? ctx->dist->config.comm_sms : 0;
}
int gg_dist_overlaps(const gg_ctx *ctx, const gg_block_call *c) {
    return c->sync_grads && ctx->dist && ctx->dist->config.overlap;
}

void gg_dist_hand_down(const gg_ctx *ctx, gg_block_call *c) {
    c->comm_sms = gg_dist_comm_sms(ctx);
    c->pair_split = gg_dist_pair_split(ctx, c, c->info->split_tensors);
}

void gg_dist_graph_holds(gg_ctx *ctx) {
    if (ctx->dist) ctx->dist->graphs_holding++;
}

void gg_dist_graph_released(gg_ctx *ctx) {
    if (ctx->dist) ctx->dist->graphs_holding--;
}

