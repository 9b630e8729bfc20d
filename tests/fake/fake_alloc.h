/*
 * fake_alloc.h - the fakes' own host memory: from the real allocator, past the host-memory fault injection of
 * fake_cuda.c (FAKE_HOST_MEMORY), so that only the library's allocations (and the tests') can be failed. Included
 * last by the fakes' sources; every test that links them wraps malloc, calloc, realloc and strdup (GG_FAKED_CUDA).
 */
#ifndef GG_FAKE_ALLOC_H
#define GG_FAKE_ALLOC_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t bytes);
void *__real_calloc(size_t count, size_t bytes);
void *__real_realloc(void *p, size_t bytes);
char *__real_strdup(const char *s);

#define malloc(bytes) __real_malloc(bytes)
#define calloc(count, bytes) __real_calloc(count, bytes)
#define realloc(p, bytes) __real_realloc(p, bytes)
#define strdup(s) __real_strdup(s)

#endif
