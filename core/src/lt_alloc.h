/*
 * lt_alloc.h — the one allocator every tensor buffer goes through.
 *
 * Buffers are 64-byte aligned and rounded up to size classes (64-byte steps up to 1 KiB, then four
 * classes per power of two). Freed buffers go to a per-class cache, so a steady training step makes no
 * malloc. A host may replace the underlying allocator (lutra_set_allocator) while no buffer is alive.
 * The byte counters let the Lua binding give the garbage collector work in proportion to C memory.
 */
#ifndef LT_ALLOC_H
#define LT_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define LT_ALIGN 64

void *lt_alloc(size_t nbytes);        /* NULL on failure; size 0 gives a valid minimal buffer */
void lt_free(void *p, size_t nbytes); /* nbytes: what was asked of lt_alloc */

typedef struct lt_alloc_stats {
  uint64_t live_bytes;      /* handed out and not yet freed (class sizes) */
  uint64_t cached_bytes;    /* held in the cache */
  uint64_t total_allocated; /* monotonic: every lt_alloc's class size (drives GC steps) */
  uint64_t system_allocs;   /* calls that reached the underlying allocator */
  uint64_t cache_hits;
} lt_alloc_stats;

void lt_alloc_get_stats(lt_alloc_stats *s);
uint64_t lt_alloc_total_allocated(void);     /* lock-free read of total_allocated */
void lt_alloc_set_cache_limit(size_t bytes); /* default 512 MiB (tests/c/test_oom: 0, every allocation reaches
                                                 the allocator) */
void lt_alloc_trim(void);                    /* returns every cached buffer to the system */

typedef struct lt_allocator {
  void *(*alloc)(void *ud, size_t size, size_t align);
  void (*free)(void *ud, void *ptr, size_t size);
  void *ud;
} lt_allocator;
int lt_alloc_set_allocator(const lt_allocator *a); /* -1 while buffers are alive */

/* Allocation-failure injection, for tests (the sweep in tests/alloc_fail_spec.lua): after
 * lt_alloc_fault_arm(n), allocations are counted and the n-th one from then (of lt_alloc, cache hits
 * included, and of the JSON allocator, lt_json.h) returns NULL; later ones succeed. n = UINT64_MAX only
 * counts; n = 0 turns it off. lt_alloc_fault_seen() is the count since arming. Process-wide. */
void lt_alloc_fault_arm(uint64_t n);
uint64_t lt_alloc_fault_seen(void);
int lt_alloc_fault_hit(void); /* 1 when the allocation being made must fail (counts it) */

#endif
