/* faults.h - what the two sources of test_faults share: the fake device of the current pass, the context every
 * injection starts from, the fakes' error names and the second test's entry. */
#ifndef GG_TEST_FAULTS_H
#define GG_TEST_FAULTS_H

#include "fake_cuda.h"
#include "gradgraph.h"

/* The fake device of the current pass: 0 (no sm_90a routes) or 90 (an H100/H200: the Hopper kernels' routes). */
extern int faults_device_cc;

/* A context on one fake device of faults_device_cc, plans allowed, autotune off, the fakes' call counts cleared. */
gg_ctx *faults_make_ctx(void);

/* What the fake's failure of `kind` says, as a message must name it. */
const char *faults_error_name(fake_kind kind);

/* test_faults_entry.c: steps, optimizers and forwards (a cmocka test). */
void faults_of_steps_optimizers_forwards(void **state);
/* test_faults_entry.c: a device-selected graph first built after a failed growth lost the scratch arena. */
void device_graph_built_after_a_lost_arena(void **state);

#endif
