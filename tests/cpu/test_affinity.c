/* test_affinity.c - the choice of CPUs for a GPU's host thread, on hwloc XML topology fixtures (CPU only), and
 * gg_dist_bind_thread's glue around it on a context of the CUDA fakes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "affinity.h"
#include "fake_cuda.h"
#include "gradgraph.h"

static hwloc_topology_t load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", GG_TOPOLOGY_DIR, name);
    hwloc_topology_t t;
    assert_int_equal(hwloc_topology_init(&t), 0);
    assert_int_equal(hwloc_topology_set_xml(t, path), 0);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED); /* keep the fixture's allowed set */
    if (hwloc_topology_load(t) != 0) fail_msg("cannot load %s", path);
    return t;
}

/* The decision for one GPU, as "bind 0-3" or "leave: <why>". */
static void decide(hwloc_topology_t t, const char *bus, char *out, size_t bytes) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    char why[256] = "";
    if (gg_affinity_gpu_cpuset(t, bus, set, why, sizeof why)) {
        char list[64];
        hwloc_bitmap_list_snprintf(list, sizeof list, set);
        snprintf(out, bytes, "bind %s", list);
    } else {
        snprintf(out, bytes, "leave: %s", why);
    }
    hwloc_bitmap_free(set);
}

static void two_sockets_each_gpu_gets_its_socket(void **state) {
    (void)state;
    hwloc_topology_t t = load("two_sockets.xml");
    char d[300];
    decide(t, "0000:17:00.0", d, sizeof d);
    assert_string_equal(d, "bind 0-3");
    decide(t, "0000:65:00.0", d, sizeof d);
    assert_string_equal(d, "bind 4-7");
    hwloc_topology_destroy(t);
}

static void one_socket_leaves_binding_alone(void **state) {
    (void)state;
    hwloc_topology_t t = load("one_socket.xml");
    char d[300];
    decide(t, "0000:65:00.0", d, sizeof d);
    assert_string_equal(d, "leave: every allowed CPU is local to 0000:65:00.0");
    hwloc_topology_destroy(t);
}

static void unknown_gpu_leaves_binding_alone(void **state) {
    (void)state;
    hwloc_topology_t t = load("two_sockets.xml");
    char d[300];
    decide(t, "0000:99:00.0", d, sizeof d);
    assert_string_equal(d, "leave: PCI device 0000:99:00.0 is not in the hwloc topology");
    hwloc_topology_destroy(t);
}

static void restricted_process_gets_the_intersection(void **state) {
    (void)state;
    hwloc_topology_t t = load("two_sockets_restricted.xml"); /* the process may use CPUs 0-5 only */
    char d[300];
    decide(t, "0000:65:00.0", d, sizeof d);
    assert_string_equal(d, "bind 4-5");
    decide(t, "0000:17:00.0", d, sizeof d);
    assert_string_equal(d, "bind 0-3");
    hwloc_topology_destroy(t);
}

static char logged[1024];
static void keep_log(void *user, gg_log_level level, const char *message) {
    (void)user, (void)level;
    snprintf(logged, sizeof logged, "%s", message);
}

/* A context on the CUDA fakes whose messages from INFO up land in `logged`, its GPU on a PCI bus. */
static gg_ctx *logging_ctx(void) {
    fake_reset(1);
    gg_config c = GG_CONFIG_INIT;
    c.autotune = 0;
    c.log_fn = keep_log;
    c.log_level = GG_LOG_INFO;
    gg_ctx *ctx = NULL;
    assert_int_equal(gg_ctx_create(&c, &ctx), GG_SUCCESS);
    logged[0] = '\0';
    fake.pci_bus_id = 1;
    return ctx;
}

/* gg_dist_bind_thread on a context (the CUDA fakes, whose GPU sits on a PCI bus this machine lacks): NULL refused,
 * named; the binding left alone with the reason at INFO; a failed bus-id query named with the call it was in. */
static void bind_thread_says_why_it_leaves_the_binding(void **state) {
    (void)state;
    assert_int_equal(gg_dist_bind_thread(NULL), GG_ERROR_INVALID_ARGUMENT);
    assert_string_equal(gg_last_error(NULL), "gg_dist_bind_thread: ctx is NULL");
    gg_ctx *ctx = logging_ctx();
    assert_int_equal(gg_dist_bind_thread(ctx), GG_SUCCESS);
    if (!strstr(logged, "gg_dist_bind_thread: binding left alone: PCI device 0000:99:00.0 is not in the hwloc "
                        "topology"))
        fail_msg("logged: \"%s\"", logged);
    fake.pci_bus_id = 0;
    assert_int_equal(gg_dist_bind_thread(ctx), GG_ERROR_NO_DEVICE);
    if (strncmp(gg_last_error(ctx), "gg_dist_bind_thread: cudaDeviceGetPCIBusId failed: ", 51) != 0)
        fail_msg("message: \"%s\"", gg_last_error(ctx));
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

/* gg_dist_bind_thread where the GPU's bus is in the topology (hwloc reads tests/data/topology/two_sockets.xml through
 * HWLOC_XMLFILE, the fake GPU on its first socket's bus): it picks that socket's CPUs and binds to them, which on a
 * topology hwloc is told is not this machine's does nothing and succeeds, or fails and is said at WARN; either way the
 * call succeeds and says which. */
static void bind_thread_binds_near_the_gpu(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/two_sockets.xml", GG_TOPOLOGY_DIR);
    setenv("HWLOC_XMLFILE", path, 1);
    gg_ctx *ctx = logging_ctx();
    fake.pci_bus_id_string = "0000:17:00.0";
    assert_int_equal(gg_dist_bind_thread(ctx), GG_SUCCESS);
    fake.pci_bus_id_string = NULL;
    unsetenv("HWLOC_XMLFILE");
    print_message("logged: %s\n", logged);
    if (!strstr(logged, "gg_dist_bind_thread: thread bound to CPUs 0-3 near GPU 0000:17:00.0") &&
        !strstr(logged, "gg_dist_bind_thread: hwloc_set_cpubind failed; binding left alone"))
        fail_msg("logged: \"%s\"", logged);
    gg_ctx_destroy(ctx);
    assert_int_equal(fake.live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_sockets_each_gpu_gets_its_socket),
        cmocka_unit_test(one_socket_leaves_binding_alone),
        cmocka_unit_test(unknown_gpu_leaves_binding_alone),
        cmocka_unit_test(restricted_process_gets_the_intersection),
        cmocka_unit_test(bind_thread_says_why_it_leaves_the_binding),
        cmocka_unit_test(bind_thread_binds_near_the_gpu),
    };
    return cmocka_run_group_tests_name("affinity", tests, NULL, NULL);
}
