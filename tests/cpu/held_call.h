/* held_call.h - another thread of this process held inside a call on a context, for the tests of what a second
 * thread may do meanwhile: it runs block 1's eager call on the CUDA fakes and is held in the call's first
 * cudaStreamIsCapturing (the fakes' on_is_capturing hook), so that it holds the context, until released. The thread
 * calls no MPI and no other context. One at a time. */
#ifndef GG_TEST_HELD_CALL_H
#define GG_TEST_HELD_CALL_H

#include "gradgraph.h"

/* Starts the thread on ctx and returns once it is inside its call. */
void held_call_begin(gg_ctx *ctx);
/* Releases it, joins it and returns its call's status. */
gg_status held_call_end(void);

#endif
