/* block_calls.c - block_calls.h: one block call on the CUDA fakes. */
#include "block_calls.h"

#include <stddef.h>

#define FAKE BLOCK_CALL_FAKE
#define DEVICE_TOKENS BLOCK_CALL_DEVICE_TOKENS

gg_status block_call_run(gg_ctx *ctx, gg_graph *g, const block_case *c, int out, int device) {
    const int o = 20 * out;
    switch (c->block) {
    case 1: {
        gg_tanh_gate_desc d = {c->tokens, c->dim0, c->accumulate};
        gg_tanh_gate_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4 + o), FAKE(5 + o), FAKE(6 + o)};
        if (device) return gg_tanh_gate_graph_run_device(g, &d, DEVICE_TOKENS, &a, NULL);
        return g ? gg_tanh_gate_graph_run(g, &d, &a, NULL) : gg_tanh_gate_backward(ctx, &d, &a, NULL);
    }
    case 2: {
        gg_gelu_ffn_desc d = {c->tokens, c->dim0, c->dim1, c->precision, c->accumulate};
        gg_gelu_ffn_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6), FAKE(7 + o), FAKE(8 + o),
                              FAKE(9 + o), NULL, NULL, NULL, NULL, NULL, NULL};
        if (c->copies)
            a.hidden_states_fp16 = FAKE(40), a.weight1_fp16 = FAKE(41), a.weight2_fp16 = FAKE(42),
            a.gelu_out_fp16 = FAKE(43);
        if (c->copies == 2) a.linear1_out_fp16 = FAKE(44);
        if (device) return gg_gelu_ffn_graph_run_device(g, &d, DEVICE_TOKENS, &a, NULL);
        return g ? gg_gelu_ffn_graph_run(g, &d, &a, NULL) : gg_gelu_ffn_backward(ctx, &d, &a, NULL);
    }
    case 3: {
        gg_mlp_desc d = {c->tokens, c->dim0, c->dim1, c->precision, c->accumulate};
        gg_mlp_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6 + o), FAKE(7 + o), FAKE(8 + o),
                         FAKE(9 + o), FAKE(10 + o), NULL, NULL, NULL, NULL, NULL, NULL};
        if (c->copies)
            a.hidden_states_fp16 = FAKE(40), a.weight1_fp16 = FAKE(41), a.weight2_fp16 = FAKE(42),
            a.intermediate_activated_fp16 = FAKE(43);
        if (c->copies == 2) a.intermediate_fp16 = FAKE(44);
        if (device) return gg_mlp_graph_run_device(g, &d, DEVICE_TOKENS, &a, NULL);
        return g ? gg_mlp_graph_run(g, &d, &a, NULL) : gg_mlp_backward(ctx, &d, &a, NULL);
    }
    default: {
        gg_ssm_gate_desc d = {c->tokens, c->dim0, c->dim1, c->silu, c->accumulate};
        gg_ssm_gate_args a = {FAKE(0), FAKE(1), FAKE(2), FAKE(3), FAKE(4), FAKE(5), FAKE(6 + o), FAKE(7 + o),
                              FAKE(8 + o), FAKE(9 + o)};
        if (device) return gg_ssm_gate_graph_run_device(g, &d, DEVICE_TOKENS, &a, NULL);
        return g ? gg_ssm_gate_graph_run(g, &d, &a, NULL) : gg_ssm_gate_backward(ctx, &d, &a, NULL);
    }
    }
}

gg_status block_call_graph(gg_ctx *ctx, const block_case *c, int device, gg_graph **g) {
    gg_graph_config gc = GG_GRAPH_CONFIG_INIT;
    const int64_t buckets[] = {c->tokens};
    gc.policy = GG_BUCKETS_LIST;
    gc.bucket_tokens = buckets;
    gc.n_buckets = 1;
    gc.allow_padding = device;
    gc.device_select = device;
    gc.execs_per_bucket = 1;
    switch (c->block) {
    case 1: {
        gg_tanh_gate_desc d = {c->tokens, c->dim0, 0};
        return gg_tanh_gate_graph_create(ctx, &d, &gc, g);
    }
    case 2: {
        gg_gelu_ffn_desc d = {c->tokens, c->dim0, c->dim1, c->precision, 0};
        return gg_gelu_ffn_graph_create(ctx, &d, &gc, g);
    }
    case 3: {
        gg_mlp_desc d = {c->tokens, c->dim0, c->dim1, c->precision, 0};
        return gg_mlp_graph_create(ctx, &d, &gc, g);
    }
    default: {
        gg_ssm_gate_desc d = {c->tokens, c->dim0, c->dim1, 0, 0};
        return gg_ssm_gate_graph_create(ctx, &d, &gc, g);
    }
    }
}
