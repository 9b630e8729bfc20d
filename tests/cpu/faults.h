/* faults.h - what the two sources of test_faults share: the fakes' error names and the second test's entry. */
#ifndef GG_TEST_FAULTS_H
#define GG_TEST_FAULTS_H

#include "fake_cuda.h"

/* What the fake's failure of `kind` says, as a message must name it. */
const char *faults_error_name(fake_kind kind);

/* test_faults_entry.c: steps, optimizers and forwards (a cmocka test). */
void faults_of_steps_optimizers_forwards(void **state);

#endif
