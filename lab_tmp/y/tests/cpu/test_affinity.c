/* test_affinity.c - the choice of CPUs for a GPU's host thread, on hwloc XML topology fixtures (CPU only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "affinity.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_sockets_each_gpu_gets_its_socket),
        cmocka_unit_test(one_socket_leaves_binding_alone),
        cmocka_unit_test(unknown_gpu_leaves_binding_alone),
        cmocka_unit_test(restricted_process_gets_the_intersection),
    };
    return cmocka_run_group_tests_name("affinity", tests, NULL, NULL);
}
