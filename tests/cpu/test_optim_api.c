/*
 * test_optim_api.c - the optimizer API on a machine without a GPU (the CUDA runtime is the fakes of
 * tests/fake/fake_cuda.c). Every refusal of gg_optim_create, gg_optim_add_param, gg_optim_finalize, the steps and the
 * setters names the function, the parameter and the field, and enqueues nothing; the checks of create and add come
 * before any CUDA call but the host-pointer query (on a context made by hand, with no device). Then, on a context the
 * fakes make: what finalize allocates (one block, freed by destroy or by the context's destroy), which launches a
 * step enqueues with and without the norm pass, what a refused launch returns (GG_ERROR_PARTIAL only once the step
 * counts advance), and the layout arithmetic: chunk tables, moments' alignment, the vector path's conditions.
 * Checkpoints: where a saved state's parts lie, what save and load copy, and every refusal of either.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_cuda.h"
#include "optim.h"

#define assert_message_has(ctx, text)                                                                              \
    do {                                                                                                           \
        const char *msg_ = gg_last_error(ctx);                                                                     \
        if (!strstr(msg_, (text))) fail_msg("message \"%s\" does not contain \"%s\"", msg_, (text));             \
    } while (0)

#define AT(p, bytes) ((void *)((char *)(p) + (bytes)))

/* A context with its configuration and nothing on a device: enough for every check that precedes CUDA. */
static gg_ctx *hand_made_ctx(void) {
    fake_reset(0);
    gg_ctx *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->config = (gg_config)GG_CONFIG_INIT;
    return ctx;
}

static gg_ctx *fake_device_ctx(void) {
    fake_reset(1);
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    memset(fake.calls, 0, sizeof fake.calls);
    fake.enqueued = 0;
    return ctx;
}

static gg_optim *new_optim(gg_ctx *ctx, const gg_optim_config *config) {
    gg_optim *opt = NULL;
    assert_int_equal(gg_optim_create(ctx, config, &opt), GG_SUCCESS);
    assert_non_null(opt);
    return opt;
}

/* Parameter i: its own weights, gradient (fp32) and no copy. */
static gg_optim_param param(int i, int64_t count) {
    return (gg_optim_param){.param = FAKE(3 * i), .grad = FAKE(3 * i + 1), .count = count};
}

static int param_count(const gg_optim *opt) {
    gg_optim_memory mem;
    assert_int_equal(gg_optim_memory_info(opt, &mem), GG_SUCCESS);
    return mem.params;
}

static void create_checks_its_arguments(void **state) {
    (void)state;
    gg_optim *opt = (gg_optim *)FAKE(0);
    assert_int_equal(gg_optim_create(NULL, NULL, &opt), GG_ERROR_INVALID_ARGUMENT);
    assert_null(opt);
    assert_message_has(NULL, "gg_optim_create: ctx is NULL");
    gg_ctx *ctx = hand_made_ctx();
    assert_int_equal(gg_optim_create(ctx, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_create: out is NULL");
    struct {
        gg_optim_config config;
        gg_status status;
        const char *text;
    } bad[] = {
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_VERSION, "config->struct_size"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_VERSION, "config->version"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->kind = 2 is not GG_OPTIM_ADAMW or GG_OPTIM_SGD"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->lr = -0.1 must be finite and >= 0"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->lr = nan"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->beta1 = 1 is not in [0, 1)"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->beta2 = -0.5 is not in [0, 1)"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->eps = inf must be finite and >= 0"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->weight_decay = -0.5 must be finite and >= 0"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->max_grad_norm = -1"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->momentum = -0.9 must be finite and >= 0"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->dampening = 1.5 is not in [0, 1]"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->nesterov needs momentum > 0 and dampening 0"},
        {GG_OPTIM_CONFIG_INIT, GG_ERROR_INVALID_ARGUMENT, "config->nesterov needs momentum > 0 and dampening 0"},
    };
    bad[0].config.struct_size--;
    bad[1].config.version++;
    bad[2].config.kind = (gg_optim_kind)2;
    bad[3].config.lr = -0.1f;
    bad[4].config.lr = NAN;
    bad[5].config.beta1 = 1.0f;
    bad[6].config.beta2 = -0.5f;
    bad[7].config.eps = INFINITY;
    bad[8].config.weight_decay = -0.5f;
    bad[9].config.max_grad_norm = -1.0f;
    for (int i = 10; i <= 13; ++i) bad[i].config.kind = GG_OPTIM_SGD;
    bad[10].config.momentum = -0.9f;
    bad[11].config.dampening = 1.5f;
    bad[12].config.nesterov = 1; /* momentum 0 */
    bad[13].config.nesterov = 1;
    bad[13].config.momentum = 0.9f;
    bad[13].config.dampening = 0.1f;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        opt = (gg_optim *)FAKE(0);
        assert_int_equal(gg_optim_create(ctx, &bad[i].config, &opt), bad[i].status);
        assert_null(opt);
        assert_message_has(ctx, bad[i].text);
    }
    /* the other kind's fields are not checked: an SGD config with AdamW's beta1 out of range is fine */
    gg_optim_config sgd = GG_OPTIM_CONFIG_INIT;
    sgd.kind = GG_OPTIM_SGD;
    sgd.beta1 = 7.0f;
    opt = new_optim(ctx, &sgd);
    assert_ptr_equal(ctx->hooks, &opt->hook); /* destroyed with the context if the caller does not */
    assert_true(opt->config.weight_decay == 0.0f); /* SGD's default */
    gg_optim_destroy(opt);
    assert_null(ctx->hooks);
    opt = new_optim(ctx, NULL);
    assert_true(opt->config.weight_decay == 1e-2f); /* AdamW's default */
    gg_optim_destroy(opt);
    gg_optim_destroy(NULL);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

/* A refused add names the parameter's index and the field, and adds nothing. */
static void add_param_checks_every_field(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_optim *opt = new_optim(ctx, NULL);
    const gg_optim_param p0 = param(0, 1000);
    assert_int_equal(gg_optim_add_param(NULL, &p0), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_add_param: opt is NULL");
    assert_int_equal(gg_optim_add_param(opt, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_add_param (param 0): param is NULL");
    assert_int_equal(gg_optim_add_param(opt, &p0), GG_SUCCESS);

    struct {
        gg_optim_param p;
        gg_status status;
        const char *text;
    } bad[16];
    int n = 0;
    for (int i = 0; i < 16; ++i) bad[i].p = param(1, 1000), bad[i].status = GG_ERROR_INVALID_ARGUMENT;
    bad[n].p.param = NULL, bad[n++].text = "(param 1): param->param is NULL";
    bad[n].p.grad = NULL, bad[n++].text = "(param 1): param->grad is NULL";
    bad[n].p.count = 0, bad[n++].text = "(param 1): param->count = 0 is not in [1, 2^52]";
    bad[n].p.count = -5, bad[n++].text = "(param 1): param->count = -5 is not in [1, 2^52]";
    bad[n].p.grad_dtype = GG_OPTIM_FP16, bad[n++].text = "param->grad_dtype = 1 is not GG_OPTIM_FP32 or GG_OPTIM_BF16";
    bad[n].p.copy = FAKE(5), bad[n++].text = "param->copy_dtype = 0: a copy is GG_OPTIM_FP16 or GG_OPTIM_BF16";
    bad[n].p.param = AT(FAKE(3), 2), bad[n].status = GG_ERROR_MISALIGNED;
    bad[n++].text = "(param 1): param->param (0x400000000002) is not 4-byte aligned";
    bad[n].p.grad = AT(FAKE(4), 2), bad[n].status = GG_ERROR_MISALIGNED;
    bad[n++].text = "param->grad (0x500000000002) is not 4-byte aligned";
    bad[n].p.grad = AT(FAKE(4), 1), bad[n].p.grad_dtype = GG_OPTIM_BF16, bad[n].status = GG_ERROR_MISALIGNED;
    bad[n++].text = "param->grad (0x500000000001) is not 2-byte aligned";
    bad[n].p.copy = AT(FAKE(5), 1), bad[n].p.copy_dtype = GG_OPTIM_BF16, bad[n].status = GG_ERROR_MISALIGNED;
    bad[n++].text = "param->copy (0x600000000001) is not 2-byte aligned";
    /* the parameter's own tensors */
    bad[n].p.grad = AT(bad[n].p.param, 3996), bad[n++].text = "(param 1): param->param overlaps param->grad";
    bad[n].p.copy = AT(bad[n].p.grad, 1998), bad[n].p.copy_dtype = GG_OPTIM_FP16;
    bad[n++].text = "(param 1): param->grad overlaps param->copy";
    /* an earlier parameter's: a write over its weights, its gradient read as weights, a gradient over its weights */
    bad[n].p.param = AT(p0.param, 3000), bad[n++].text = "(param 1): param->param overlaps param 0's param->param";
    bad[n].p.param = (float *)p0.grad, bad[n++].text = "(param 1): param->param overlaps param 0's param->grad";
    bad[n].p.grad = AT(p0.param, 16), bad[n++].text = "(param 1): param->grad overlaps param 0's param->param";
    /* the largest count, far from everything: more chunks than the kernels' int index */
    bad[n].p.count = (int64_t)1 << 52, bad[n].p.param = (float *)((uintptr_t)1 << 60);
    bad[n].p.grad = (const float *)((uintptr_t)1 << 61);
    bad[n++].text = "param->count = 4503599627370496: the parameters would need more than 2^31 - 1 chunks";
    for (int i = 0; i < n; ++i) {
        assert_int_equal(gg_optim_add_param(opt, &bad[i].p), bad[i].status);
        assert_message_has(ctx, "gg_optim_add_param (param 1): ");
        assert_message_has(ctx, bad[i].text);
    }
    /* host memory, named as the blocks name it */
    gg_optim_param host = param(1, 1000);
    host.grad = FAKE(11); /* a pointer the context has not seen yet */
    fake.host_lo = (uintptr_t)host.grad;
    fake.host_hi = fake.host_lo + 16;
    assert_int_equal(gg_optim_add_param(opt, &host), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_add_param (param 1): param->grad (0xc00000000000) is host memory; gradgraph "
                            "needs device memory");
    /* a count larger than the buffer: the copy's last byte (of 1000 fp16) in no device memory */
    host = param(1, 1000);
    host.copy = FAKE(12);
    host.copy_dtype = GG_OPTIM_FP16;
    fake.host_lo = (uintptr_t)host.copy + 1999;
    fake.host_hi = fake.host_lo + 1;
    assert_int_equal(gg_optim_add_param(opt, &host), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_add_param (param 1): the last byte of param->copy's 2000 bytes (");
    assert_message_has(ctx, "is not device memory: the buffer is smaller than the call says");
    fake.host_lo = fake.host_hi = 0;
    assert_int_equal(param_count(opt), 1); /* the refused adds added nothing */

    /* two parameters reading one gradient is fine (nothing writes it); sub-tensors of one buffer at 4-byte offsets */
    gg_optim_param shared = param(1, 1000);
    shared.grad = p0.grad;
    assert_int_equal(gg_optim_add_param(opt, &shared), GG_SUCCESS);
    gg_optim_param sub = {.param = AT(FAKE(10), 4), .grad = AT(FAKE(10), 4 + 4 * 7), .count = 7,
                          .copy = AT(FAKE(10), 4 + 8 * 7), .copy_dtype = GG_OPTIM_BF16, .no_weight_decay = 1};
    assert_int_equal(gg_optim_add_param(opt, &sub), GG_SUCCESS);
    assert_int_equal(param_count(opt), 3);
    gg_optim_memory mem;
    assert_int_equal(gg_optim_memory_info(NULL, &mem), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_memory_info: opt is NULL");
    assert_int_equal(gg_optim_memory_info(opt, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_memory_info: out is NULL");
    assert_int_equal(gg_optim_memory_info(opt, &mem), GG_SUCCESS);
    assert_int_equal(mem.elements, 2007);
    assert_int_equal(mem.state_bytes, 8 * (1000 + 1000 + 8)); /* AdamW: two fp32 moments, 7 rounded up to 8 */
    assert_int_equal(mem.total_bytes, mem.state_bytes + mem.table_bytes);
    gg_optim_destroy(opt);
    assert_null(ctx->hooks);
    assert_int_equal(fake.cuda_calls, fake.pointer_queries); /* no CUDA call but the host-pointer checks' */
    free(ctx);
}

/* Everything but create and add refuses an optimizer that is not finalized, without a CUDA call. */
static void calls_before_finalize_are_refused(void **state) {
    (void)state;
    gg_ctx *ctx = hand_made_ctx();
    gg_optim *opt = new_optim(ctx, NULL);
    const char *expected[] = {
        "gg_optim_step: the optimizer is not finalized (call gg_optim_finalize)",
        "gg_optim_step_params: the optimizer is not finalized",
        "gg_optim_set_lr: the optimizer is not finalized",
        "gg_optim_set_loss_scale: the optimizer is not finalized",
        "gg_optim_device_pointers: the optimizer is not finalized",
        "gg_optim_last_step: the optimizer is not finalized",
        "gg_optim_finalize: the optimizer has no parameter (add them with gg_optim_add_param)",
    };
    gg_optim_device_ptrs ptrs;
    memset(&ptrs, 0x5a, sizeof ptrs); /* a refused call writes nothing: still this after */
    const gg_optim_device_ptrs poisoned = ptrs;
    int found = 0;
    for (int i = 0; i < 7; ++i) {
        gg_status st = GG_SUCCESS;
        switch (i) {
        case 0: st = gg_optim_step(opt, NULL); break;
        case 1: st = gg_optim_step_params(opt, 0, 1, NULL); break;
        case 2: st = gg_optim_set_lr(opt, 0.1f, NULL); break;
        case 3: st = gg_optim_set_loss_scale(opt, 1024.0f, NULL); break;
        case 4: st = gg_optim_device_pointers(opt, &ptrs); break;
        case 5: st = gg_optim_last_step(opt, &found, NULL); break;
        default: st = gg_optim_finalize(opt); break;
        }
        assert_int_equal(st, GG_ERROR_INVALID_ARGUMENT);
        assert_message_has(ctx, expected[i]);
    }
    assert_memory_equal(&ptrs, &poisoned, sizeof ptrs);
    /* and NULL, named */
    assert_int_equal(gg_optim_step(NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_step: opt is NULL");
    assert_int_equal(gg_optim_step_params(NULL, 0, 1, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_step_params: opt is NULL");
    assert_int_equal(gg_optim_finalize(NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_finalize: opt is NULL");
    assert_int_equal(gg_optim_set_lr(NULL, 0.1f, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_set_lr: opt is NULL");
    assert_int_equal(gg_optim_set_loss_scale(NULL, 2.0f, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_set_loss_scale: opt is NULL");
    assert_int_equal(gg_optim_device_pointers(NULL, &ptrs), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_device_pointers: opt is NULL");
    assert_int_equal(gg_optim_device_pointers(opt, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_device_pointers: out is NULL");
    assert_int_equal(gg_optim_last_step(NULL, &found, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_last_step: opt is NULL");
    gg_optim_destroy(opt);
    assert_int_equal(fake.cuda_calls, 0);
    free(ctx);
}

/* Three parameters: 1 element (bf16 gradient, bf16 copy), 3 elements at 4-byte offsets, and 16385 (two chunks). */
static void add_three(gg_optim *opt) {
    const gg_optim_param ps[3] = {
        {.param = FAKE(0), .grad = FAKE(1), .grad_dtype = GG_OPTIM_BF16, .count = 1, .copy = FAKE(2),
         .copy_dtype = GG_OPTIM_BF16, .no_weight_decay = 1},
        {.param = AT(FAKE(3), 4), .grad = AT(FAKE(4), 4), .count = 3},
        {.param = FAKE(6), .grad = FAKE(7), .count = GG_K_OPTIM_CHUNK + 1, .copy = FAKE(8),
         .copy_dtype = GG_OPTIM_FP16},
    };
    for (int i = 0; i < 3; ++i) assert_int_equal(gg_optim_add_param(opt, &ps[i]), GG_SUCCESS);
}

/* On the fakes' device: finalize makes one block; a step is three launches with the norm pass, two without; the
 * setters one each; the refusals after finalize enqueue nothing; destroy (or the context's) frees the block. */
static void finalized_optimizer_enqueues_its_launches(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    const int live = fake.live;
    gg_optim *opt = new_optim(ctx, NULL);
    add_three(opt);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    assert_int_equal(fake.live, live + 1); /* one allocation */
    assert_int_equal(fake.calls[FAKE_MALLOC], 1);
    assert_int_equal(gg_optim_finalize(opt), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_finalize: the optimizer is finalized already");
    gg_optim_param late = param(20, 8);
    assert_int_equal(gg_optim_add_param(opt, &late), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_add_param (param 3): the optimizer is finalized; add every parameter before "
                            "gg_optim_finalize");
    gg_optim_memory mem;
    assert_int_equal(gg_optim_memory_info(opt, &mem), GG_SUCCESS);
    assert_int_equal(mem.params, 3);
    assert_int_equal(mem.state_bytes, 8 * (4 + 4 + GG_K_OPTIM_CHUNK + 4));

    fake.enqueued = 0;
    assert_int_equal(gg_optim_step(opt, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_LAUNCH], 3); /* the sum of squares (check_finite), the total, the update */
    assert_int_equal(fake.enqueued, 3);

    /* refusals after finalize: nothing enqueued */
    fake.enqueued = 0;
    assert_int_equal(gg_optim_step_params(opt, 0, 1, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step_params: refused with the finite check (config->check_finite) on: the "
                            "decision to skip a step needs every gradient before any parameter is updated (use "
                            "gg_optim_step)");
    const float bad_lr[] = {-1.0f, NAN, INFINITY};
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(gg_optim_set_lr(opt, bad_lr[i], NULL), GG_ERROR_INVALID_ARGUMENT);
        assert_message_has(ctx, "gg_optim_set_lr: lr = ");
        assert_message_has(ctx, "must be finite and >= 0");
    }
    const float bad_scale[] = {0.0f, -2.0f, NAN, INFINITY, 1e-45f, 1e38f};
    const char *why[] = {"must be finite and > 0", "must be finite and > 0", "must be finite and > 0",
                         "must be finite and > 0", "its inverse is not a normal fp32 number",
                         "its inverse is not a normal fp32 number"};
    for (int i = 0; i < 6; ++i) {
        assert_int_equal(gg_optim_set_loss_scale(opt, bad_scale[i], NULL), GG_ERROR_INVALID_ARGUMENT);
        assert_message_has(ctx, "gg_optim_set_loss_scale: scale = ");
        assert_message_has(ctx, why[i]);
    }
    int found = 7;
    float norm = 7.0f;
    assert_int_equal(gg_optim_last_step(opt, NULL, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_last_step: found_inf and grad_norm are both NULL");
    assert_int_equal(fake.enqueued, 0);

    assert_int_equal(gg_optim_set_lr(opt, 0.5f, NULL), GG_SUCCESS);
    assert_int_equal(gg_optim_set_loss_scale(opt, 65536.0f, NULL), GG_SUCCESS);
    assert_int_equal(fake.enqueued, 2);
    assert_int_equal(gg_optim_last_step(opt, &found, &norm), GG_SUCCESS); /* the fake device's memory reads 0 */
    assert_int_equal(found, 0);
    assert_true(norm == 0.0f);
    gg_optim_device_ptrs ptrs;
    assert_int_equal(gg_optim_device_pointers(opt, &ptrs), GG_SUCCESS);
    const uintptr_t lo = (uintptr_t)opt->device, hi = lo + opt->layout.total;
    const void *words[] = {ptrs.lr, ptrs.inv_loss_scale, ptrs.steps, ptrs.found_inf, ptrs.grad_norm};
    for (int i = 0; i < 5; ++i) assert_true((uintptr_t)words[i] >= lo && (uintptr_t)words[i] < hi);
    gg_optim_destroy(opt);
    assert_int_equal(fake.live, live);

    /* no check, no clipping: no norm pass, and ranges of parameters may step alone */
    gg_optim_config plain = GG_OPTIM_CONFIG_INIT;
    plain.kind = GG_OPTIM_SGD;
    plain.check_finite = 0;
    opt = new_optim(ctx, &plain);
    add_three(opt);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    assert_int_equal(gg_optim_memory_info(opt, &mem), GG_SUCCESS);
    assert_int_equal(mem.state_bytes, 0); /* plain SGD keeps no state */
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_step(opt, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_LAUNCH], 2);
    assert_int_equal(gg_optim_step_params(opt, 1, 2, NULL), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_LAUNCH], 4);
    fake.enqueued = 0;
    assert_int_equal(gg_optim_step_params(opt, -1, 1, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step_params: first = -1 is not in [0, 3)");
    assert_int_equal(gg_optim_step_params(opt, 3, 1, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step_params: first = 3 is not in [0, 3)");
    assert_int_equal(gg_optim_step_params(opt, 1, 3, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step_params: count = 3 is not in [1, 2] (parameters 1 ..)");
    assert_int_equal(gg_optim_step_params(opt, 0, 0, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step_params: count = 0 is not in [1, 3]");
    assert_int_equal(fake.enqueued, 0);
    gg_optim_destroy(opt);

    /* clipping refuses ranges too, naming the norm */
    gg_optim_config clipped = GG_OPTIM_CONFIG_INIT;
    clipped.check_finite = 0;
    clipped.max_grad_norm = 1.0f;
    opt = new_optim(ctx, &clipped);
    add_three(opt);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    assert_int_equal(gg_optim_step_params(opt, 0, 3, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "refused with clipping (config->max_grad_norm > 0) on: the global norm needs every "
                            "gradient");
    /* left to the context */
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* A refused launch: GG_ERROR_CUDA while nothing the caller sees has changed, GG_ERROR_PARTIAL once the step counts
 * are to advance; the next step succeeds. A failed allocation leaves an optimizer that can only be destroyed. */
static void refused_launches_and_allocations(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    const int live = fake.live;
    gg_optim *opt = new_optim(ctx, NULL);
    add_three(opt);
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    const gg_status expected[3] = {GG_ERROR_CUDA, GG_ERROR_CUDA, GG_ERROR_PARTIAL};
    const char *names[3] = {"gg_optim_step: gg_k_optim_sum_squares failed: cudaErrorLaunchOutOfResources",
                            "gg_optim_step: gg_k_optim_finish failed: cudaErrorLaunchOutOfResources",
                            "gg_optim_step: failed after enqueueing part of the step: the step counts of parameters "
                            "0 .. 2 advance (unless a gradient is not finite) without their update, which did not "
                            "run: GG_ERROR_CUDA"};
    for (int k = 1; k <= 3; ++k) {
        memset(fake.calls, 0, sizeof fake.calls);
        fake.fail_kind = FAKE_LAUNCH;
        fake.fail_at = k;
        assert_int_equal(gg_optim_step(opt, NULL), expected[k - 1]);
        assert_message_has(ctx, names[k - 1]);
        assert_int_equal(fake.calls[FAKE_LAUNCH], k); /* nothing launched after the refused one */
        fake.fail_at = 0;
        assert_int_equal(gg_optim_step(opt, NULL), GG_SUCCESS);
    }
    memset(fake.calls, 0, sizeof fake.calls);
    fake.fail_kind = FAKE_LAUNCH;
    fake.fail_at = 1;
    assert_int_equal(gg_optim_set_lr(opt, 0.1f, NULL), GG_ERROR_CUDA);
    assert_message_has(ctx, "gg_optim_set_lr: gg_k_optim_set_word failed");
    fake.fail_at = 0;
    gg_optim_destroy(opt);
    assert_int_equal(fake.live, live);

    opt = new_optim(ctx, NULL);
    add_three(opt);
    memset(fake.calls, 0, sizeof fake.calls);
    fake.fail_kind = FAKE_MALLOC;
    fake.fail_at = 1;
    assert_int_equal(gg_optim_finalize(opt), GG_ERROR_OUT_OF_MEMORY);
    assert_message_has(ctx, "cudaMalloc");
    fake.fail_at = 0;
    assert_int_equal(gg_optim_finalize(opt), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "the optimizer is finalized already (and failed: destroy it)");
    assert_int_equal(gg_optim_step(opt, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_step: the optimizer is not finalized (gg_optim_finalize failed: destroy it)");
    gg_optim_destroy(opt);
    assert_int_equal(fake.live, live);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* The tables the kernels read: chunks in order (a parameter's consecutive), moments 16-byte aligned one after the
 * other, the vector path only where every pointer allows it. */
static void layout_and_tables(void **state) {
    (void)state;
    assert_int_equal(gg_optim_chunk_count(1), 1);
    assert_int_equal(gg_optim_chunk_count(GG_K_OPTIM_CHUNK), 1);
    assert_int_equal(gg_optim_chunk_count(GG_K_OPTIM_CHUNK + 1), 2);
    assert_int_equal(gg_optim_moment_words(1), 4);
    assert_int_equal(gg_optim_moment_words(8), 8);
    assert_int_equal(gg_optim_moments(GG_OPTIM_ADAMW, 0.0f), 2);
    assert_int_equal(gg_optim_moments(GG_OPTIM_SGD, 0.9f), 1);
    assert_int_equal(gg_optim_moments(GG_OPTIM_SGD, 0.0f), 0);
    const gg_optim_param ps[5] = {
        {.param = FAKE(0), .grad = FAKE(1), .count = 2 * GG_K_OPTIM_CHUNK + 5},             /* vector */
        {.param = AT(FAKE(2), 4), .grad = FAKE(3), .count = 3},                               /* weights at +4 */
        {.param = FAKE(4), .grad = AT(FAKE(5), 8), .grad_dtype = GG_OPTIM_BF16, .count = 9}, /* bf16 at +8: vector */
        {.param = FAKE(6), .grad = AT(FAKE(7), 2), .grad_dtype = GG_OPTIM_BF16, .count = 9}, /* bf16 at +2 */
        {.param = FAKE(8), .grad = FAKE(9), .count = 1, .copy = AT(FAKE(10), 4), .copy_dtype = GG_OPTIM_FP16,
         .no_weight_decay = 1}, /* a copy at +4: 8-byte vectors stay aligned only at multiples of 8 */
    };
    const int vec[5] = {1, 0, 1, 0, 0};
    const int64_t n_chunks = 3 + 1 + 1 + 1 + 1;
    gg_optim_layout l;
    gg_optim_layout_make(ps, 5, n_chunks, 2, &l);
    const size_t parts[] = {l.scalars, l.steps, l.partials, l.params, l.chunks, l.state};
    for (int i = 0; i < 6; ++i) {
        assert_int_equal(parts[i] % 256, 0);
        if (i) assert_true(parts[i] > parts[i - 1]);
    }
    assert_true(l.partials - l.steps >= 5 * sizeof(int64_t));
    assert_true(l.chunks - l.params >= 5 * sizeof(gg_k_optim_param));
    assert_true(l.state - l.chunks >= n_chunks * sizeof(gg_k_optim_chunk));
    assert_int_equal(l.state_bytes, 2 * 4 * (2 * GG_K_OPTIM_CHUNK + 8 + 4 + 12 + 12 + 4));
    assert_int_equal(l.total, l.state + l.state_bytes);
    gg_k_optim_param table[5];
    gg_k_optim_chunk chunks[7];
    int first[6];
    const uintptr_t base = 0x7f0000000000u;
    gg_optim_tables_fill(ps, 5, 2, base, &l, table, chunks, first);
    const int want_first[6] = {0, 3, 4, 5, 6, 7};
    uintptr_t moments = base + l.state;
    for (int i = 0; i < 5; ++i) {
        assert_int_equal(first[i], want_first[i]);
        assert_int_equal(table[i].vec, vec[i]);
        assert_int_equal(table[i].count, ps[i].count);
        assert_ptr_equal(table[i].m, (float *)moments);
        const uintptr_t words = (uintptr_t)gg_optim_moment_words(ps[i].count) * 4;
        assert_ptr_equal(table[i].v, (float *)(moments + words));
        assert_int_equal((uintptr_t)table[i].m % 16, 0);
        assert_int_equal((uintptr_t)table[i].v % 16, 0);
        moments += 2 * words;
        assert_int_equal(table[i].decay, i != 4);
        assert_int_equal(table[i].grad_type, ps[i].grad_dtype == GG_OPTIM_BF16 ? GG_DT_BF16 : GG_DT_F32);
        for (int c = first[i]; c < first[i + 1]; ++c) {
            assert_int_equal(chunks[c].param, i);
            assert_int_equal(chunks[c].index, c - first[i]);
        }
    }
    assert_int_equal(first[5], 7);
    assert_int_equal(table[4].copy_type, GG_DT_F16);
    assert_int_equal(moments, base + l.total);
    /* one moment (SGD with momentum): v absent, m packed */
    gg_optim_layout_make(ps, 5, n_chunks, 1, &l);
    gg_optim_tables_fill(ps, 5, 1, base, &l, table, chunks, first);
    assert_null(table[0].v);
    assert_ptr_equal(table[1].m, (float *)(base + l.state + 4 * (2 * GG_K_OPTIM_CHUNK + 8)));
    gg_optim_layout_make(ps, 5, n_chunks, 0, &l);
    gg_optim_tables_fill(ps, 5, 0, base, &l, table, chunks, first);
    assert_null(table[0].m);
    assert_int_equal(l.state_bytes, 0);
}

/* A saved state's pieces: right after the header and the counts, one after the other, the step counts 8-byte
 * aligned, to the state's end; each moment tensor's device offset is the one the kernels' table holds, and the state
 * keeps its count values (the device pads each tensor to 16 bytes). For 2, 1 and 0 moments. */
static void state_pieces_follow_the_tables(void **state) {
    (void)state;
    /* the check word of a fixed pattern: examples/optim_state.py's test asserts the same value */
    unsigned char pattern[101];
    for (int i = 0; i < 101; ++i) pattern[i] = (unsigned char)(i * 37 % 256);
    assert_int_equal(gg_optim_state_checksum(pattern, sizeof pattern), 0xA66E456581ABE4B8ull);
    const gg_optim_param ps[3] = {
        {.param = FAKE(0), .grad = FAKE(1), .count = GG_K_OPTIM_CHUNK + 5},
        {.param = FAKE(2), .grad = FAKE(3), .count = 3},
        {.param = FAKE(4), .grad = FAKE(5), .count = 1},
    };
    const int64_t elements = GG_K_OPTIM_CHUNK + 9;
    for (int moments = 2; moments >= 0; --moments) {
        gg_optim_layout l;
        gg_optim_layout_make(ps, 3, 4, moments, &l);
        gg_k_optim_param table[3];
        gg_k_optim_chunk chunks[4];
        int first[4];
        gg_optim_tables_fill(ps, 3, moments, 0, &l, table, chunks, first);
        gg_optim_state_piece pieces[8];
        const int n = gg_optim_state_pieces(ps, 3, moments, &l, NULL);
        assert_int_equal(n, 2 + 3 * moments);
        assert_int_equal(gg_optim_state_pieces(ps, 3, moments, &l, pieces), n);
        const size_t size = gg_optim_state_size_of(3, moments, elements);
        assert_int_equal(size, sizeof(gg_optim_state_header) + 3 * 8 + sizeof(gg_k_optim_scalars) + 3 * 8 +
                                   4 * (size_t)moments * (size_t)elements);
        assert_int_equal(pieces[0].saved, sizeof(gg_optim_state_header) + 3 * 8);
        assert_int_equal(pieces[0].device, l.scalars);
        assert_int_equal(pieces[0].bytes, sizeof(gg_k_optim_scalars));
        assert_int_equal(pieces[1].device, l.steps);
        assert_int_equal(pieces[1].saved % 8, 0);
        assert_int_equal(pieces[1].bytes, 3 * sizeof(int64_t));
        for (int k = 1; k < n; ++k) assert_int_equal(pieces[k].saved, pieces[k - 1].saved + pieces[k - 1].bytes);
        assert_int_equal(pieces[n - 1].saved + pieces[n - 1].bytes, size);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < moments; ++j) {
                const gg_optim_state_piece *p = &pieces[2 + i * moments + j];
                assert_int_equal(p->device, (uintptr_t)(j ? table[i].v : table[i].m));
                assert_int_equal(p->bytes, 4 * (size_t)ps[i].count);
            }
    }
}

/* A host buffer for a state, inside what the fakes call host memory. */
static char *state_buffer(size_t bytes) {
    char *b = calloc(1, bytes + 64);
    assert_non_null(b);
    fake.host_lo = (uintptr_t)b;
    fake.host_hi = (uintptr_t)b + bytes + 64;
    return b;
}

static void put_u64(char *at, uint64_t v) { memcpy(at, &v, sizeof v); }

/* The state's check word made anew, after a change (gg_optim_state_checksum). */
static void reseal(char *state, size_t bytes) {
    const uint64_t check = gg_optim_state_checksum(state, bytes);
    memcpy(state + offsetof(gg_optim_state_header, check), &check, sizeof check);
}

/* Loads a changed copy of a good state (its check word made anew, unless `damaged`) and expects the refusal `status`
 * with `text`, nothing copied. */
static void load_refused(gg_optim *opt, gg_ctx *ctx, const char *good, size_t bytes, size_t at, const void *value,
                         size_t value_bytes, size_t load_bytes, gg_status status, const char *text) {
    const uintptr_t host_lo = fake.host_lo, host_hi = fake.host_hi;
    char *bad = state_buffer(bytes + 8);
    memcpy(bad, good, bytes);
    if (value) memcpy(bad + at, value, value_bytes);
    const int damaged = !strcmp(text, "changed or damaged");
    if (!damaged) reseal(bad, bytes);
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_load_state(opt, bad, load_bytes), status);
    assert_message_has(ctx, text);
    assert_int_equal(fake.calls[FAKE_MEMCPY], 0); /* nothing written */
    free(bad);
    fake.host_lo = host_lo, fake.host_hi = host_hi;
}

/* Save and load on the fakes' device: what the state holds on the host (header, counts), which copies each makes,
 * and every refusal: named, with no copy, the buffer or the optimizer's state left as they were. */
static void save_and_load_check_everything(void **state) {
    (void)state;
    gg_ctx *ctx = fake_device_ctx();
    gg_optim *opt = new_optim(ctx, NULL);
    add_three(opt);
    size_t bytes = 0;
    assert_int_equal(gg_optim_state_size(opt, &bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_state_size: the optimizer is not finalized (call gg_optim_finalize)");
    char probe[64];
    assert_int_equal(gg_optim_save_state(opt, probe, sizeof probe), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_save_state: the optimizer is not finalized");
    assert_int_equal(gg_optim_load_state(opt, probe, sizeof probe), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_load_state: the optimizer is not finalized");
    assert_int_equal(gg_optim_finalize(opt), GG_SUCCESS);
    assert_int_equal(gg_optim_state_size(opt, NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_state_size: bytes is NULL");
    assert_int_equal(gg_optim_state_size(opt, &bytes), GG_SUCCESS);
    const int64_t elements = 1 + 3 + GG_K_OPTIM_CHUNK + 1;
    assert_int_equal(bytes, gg_optim_state_size_of(3, 2, elements));
    assert_int_equal(gg_optim_state_size(NULL, &bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_state_size: opt is NULL");

    /* save: refusals write nothing */
    char *good = state_buffer(bytes);
    memset(good, 0x5a, bytes);
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_save_state(NULL, good, bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_save_state: opt is NULL");
    assert_int_equal(gg_optim_save_state(opt, NULL, bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_save_state: buffer is NULL");
    assert_int_equal(gg_optim_save_state(opt, FAKE(30), bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_save_state: buffer (0x");
    assert_message_has(ctx, ") is device memory; a state is saved to and loaded from host memory");
    assert_int_equal(gg_optim_save_state(opt, good, bytes - 1), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "takes");
    assert_int_equal(fake.calls[FAKE_MEMCPY], 0);
    for (size_t i = 0; i < bytes; ++i)
        if ((unsigned char)good[i] != 0x5a) fail_msg("a refused save wrote byte %zu", i);

    /* a failed copy: an error, and no mark, so that the buffer is never loaded */
    fake.fail_kind = FAKE_MEMCPY;
    fake.fail_at = 2;
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_save_state(opt, good, bytes), GG_ERROR_CUDA);
    assert_message_has(ctx, "gg_optim_save_state: cudaMemcpy of the step counts from the device failed");
    fake.fail_at = 0;
    assert_int_equal(gg_optim_load_state(opt, good, bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_load_state: buffer holds no optimizer state (no \"GGOPTIM\" mark");

    /* a save: the header and counts from the host, 8 copies (the words, the step counts, 3 x 2 moments) */
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_save_state(opt, good, bytes + 64), GG_SUCCESS); /* a larger buffer: bytes written */
    assert_int_equal(fake.calls[FAKE_MEMCPY], 8);
    gg_optim_state_header h;
    memcpy(&h, good, sizeof h);
    assert_string_equal(h.mark, "GGOPTIM");
    assert_int_equal(h.format, GG_OPTIM_STATE_FORMAT);
    assert_int_equal(h.kind, GG_OPTIM_ADAMW);
    assert_int_equal(h.moments, 2);
    assert_int_equal(h.params, 3);
    assert_int_equal(h.elements, elements);
    assert_int_equal(h.bytes, bytes);
    uint64_t counts[3];
    memcpy(counts, good + sizeof h, sizeof counts);
    assert_int_equal(counts[0], 1);
    assert_int_equal(counts[1], 3);
    assert_int_equal(counts[2], GG_K_OPTIM_CHUNK + 1);
    gg_optim_state_piece pieces[8];
    assert_int_equal(gg_optim_state_pieces(opt->params, 3, 2, &opt->layout, pieces), 8);
    assert_ptr_equal(fake.sync_copy_from, (char *)opt->device + pieces[7].device); /* param 2's exp_avg_sq, last */
    /* the fakes' copies to the host write zeros: a state holds 1 / the loss scale, never 0 */
    assert_int_equal(gg_optim_state_checksum(good, bytes), h.check); /* the check word the saved bytes fit ... */
    const uint64_t zeros_check = h.check;
    const gg_k_optim_scalars words = {.lr = 1e-3f, .inv_scale = 1.0f, .clip = 1.0f};
    memcpy(good + pieces[0].saved, &words, sizeof words);
    reseal(good, bytes);
    memcpy(&h, good, sizeof h);
    assert_true(h.check != zeros_check); /* ... and that sees the words */

    /* a load: 8 copies */
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_load_state(opt, good, bytes), GG_SUCCESS);
    assert_int_equal(fake.calls[FAKE_MEMCPY], 8);
    /* any alignment (UBSan watches the sanitized build): the same bytes saved at an odd address, and loaded */
    {
        const uintptr_t host_lo = fake.host_lo, host_hi = fake.host_hi;
        char *odd = state_buffer(bytes + 1);
        assert_int_equal(gg_optim_save_state(opt, odd + 1, bytes), GG_SUCCESS);
        memcpy(odd + 1 + pieces[0].saved, &words, sizeof words);
        reseal(odd + 1, bytes);
        assert_memory_equal(odd + 1, good, bytes);
        assert_int_equal(gg_optim_load_state(opt, odd + 1, bytes), GG_SUCCESS);
        free(odd);
        fake.host_lo = host_lo, fake.host_hi = host_hi;
    }

    /* every refusal of a load: named, nothing copied */
    const float nan = NAN, negative = -1.0f, zero = 0.0f, tiny = 1e-40f;
    const unsigned two = 2, format = 2;
    const int64_t minus_one = -1;
    const uint64_t four = 4;
    const size_t words_at = pieces[0].saved, steps_at = pieces[1].saved;
    load_refused(opt, ctx, good, bytes, 0, NULL, 0, sizeof h - 1, GG_ERROR_INVALID_ARGUMENT,
                 "gg_optim_load_state: bytes = 63 is less than a state's header (64 bytes)");
    load_refused(opt, ctx, good, bytes, 0, "GGOPTIX", 8, bytes, GG_ERROR_INVALID_ARGUMENT, "holds no optimizer state");
    load_refused(opt, ctx, good, bytes, offsetof(gg_optim_state_header, format), &format, 4, bytes, GG_ERROR_VERSION,
                 "buffer holds a state of format 2; this gradgraph reads format 1");
    load_refused(opt, ctx, good, bytes, offsetof(gg_optim_state_header, params), &format, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "buffer holds the state of 2 parameters; opt has 3");
    load_refused(opt, ctx, good, bytes, 0, NULL, 0, bytes - 1, GG_ERROR_INVALID_ARGUMENT,
                 "the state says it takes");
    load_refused(opt, ctx, good, bytes, 0, NULL, 0, bytes + 8, GG_ERROR_INVALID_ARGUMENT, "(cut short, or not this "
                 "optimizer's)");
    load_refused(opt, ctx, good, bytes, sizeof h + 8, &four, 8, bytes, GG_ERROR_INVALID_ARGUMENT,
                 "param 1 has 4 elements in the state and 3 in opt");
    load_refused(opt, ctx, good, bytes, words_at + offsetof(gg_k_optim_scalars, lr), &nan, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "the state's learning rate nan is not finite and >= 0");
    load_refused(opt, ctx, good, bytes, words_at + offsetof(gg_k_optim_scalars, lr), &negative, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "the state's learning rate -1 is not finite and >= 0");
    load_refused(opt, ctx, good, bytes, words_at + offsetof(gg_k_optim_scalars, inv_scale), &zero, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "the state's inverse loss scale 0 is not a normal fp32 number > 0");
    load_refused(opt, ctx, good, bytes, words_at + offsetof(gg_k_optim_scalars, inv_scale), &tiny, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "inverse loss scale");
    load_refused(opt, ctx, good, bytes, words_at + offsetof(gg_k_optim_scalars, found_inf), &two, 4, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "the state's found-inf flag is 2, not 0 or 1");
    load_refused(opt, ctx, good, bytes, steps_at + 16, &minus_one, 8, bytes, GG_ERROR_INVALID_ARGUMENT,
                 "param 2's step count in the state is -1, less than 0");
    const unsigned char flipped = 0x01; /* one bit of param 2's exp_avg_sq, the state's last piece */
    load_refused(opt, ctx, good, bytes, pieces[7].saved + 4 * GG_K_OPTIM_CHUNK, &flipped, 1, bytes,
                 GG_ERROR_INVALID_ARGUMENT, "changed or damaged");
    load_refused(opt, ctx, good, bytes, bytes - 1, &flipped, 1, bytes, GG_ERROR_INVALID_ARGUMENT, "changed or damaged");
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_load_state(opt, FAKE(30), bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_load_state: buffer (0x");
    assert_int_equal(gg_optim_load_state(opt, NULL, bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(ctx, "gg_optim_load_state: buffer is NULL");
    assert_int_equal(gg_optim_load_state(NULL, good, bytes), GG_ERROR_INVALID_ARGUMENT);
    assert_message_has(NULL, "gg_optim_load_state: opt is NULL");
    assert_int_equal(fake.calls[FAKE_MEMCPY], 0);

    /* another kind's optimizer over the same parameters */
    gg_optim_config sgd = GG_OPTIM_CONFIG_INIT;
    sgd.kind = GG_OPTIM_SGD;
    sgd.momentum = 0.9f;
    gg_optim *other = new_optim(ctx, &sgd);
    add_three(other);
    assert_int_equal(gg_optim_finalize(other), GG_SUCCESS);
    load_refused(other, ctx, good, bytes, 0, NULL, 0, bytes, GG_ERROR_INVALID_ARGUMENT,
                 "buffer holds the state of AdamW (2 moment tensors a parameter); opt is SGD with momentum (1)");
    gg_optim_destroy(other);

    /* a copy that fails after the first: GG_ERROR_PARTIAL, naming the piece */
    fake.fail_kind = FAKE_MEMCPY;
    fake.fail_at = 4;
    memset(fake.calls, 0, sizeof fake.calls);
    assert_int_equal(gg_optim_load_state(opt, good, bytes), GG_ERROR_PARTIAL);
    assert_message_has(ctx, "gg_optim_load_state: failed after it began to write the state, which is now partly the "
                            "buffer's and partly the optimizer's own: load a state again before the next step: "
                            "GG_ERROR_CUDA: CUDA runtime error: cudaMemcpy of param 0's exp_avg_sq to the device "
                            "failed: cudaErrorLaunchFailure");
    fake.fail_at = 0;
    assert_int_equal(gg_optim_load_state(opt, good, bytes), GG_SUCCESS);
    fake.host_lo = fake.host_hi = 0;
    free(good);
    gg_optim_destroy(opt);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_checks_its_arguments),
        cmocka_unit_test(add_param_checks_every_field),
        cmocka_unit_test(calls_before_finalize_are_refused),
        cmocka_unit_test(finalized_optimizer_enqueues_its_launches),
        cmocka_unit_test(refused_launches_and_allocations),
        cmocka_unit_test(layout_and_tables),
        cmocka_unit_test(state_pieces_follow_the_tables),
        cmocka_unit_test(save_and_load_check_everything),
    };
    return cmocka_run_group_tests_name("optim_api", tests, NULL, NULL);
}
