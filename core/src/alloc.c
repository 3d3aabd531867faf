/* alloc.c — size-class cache over a replaceable aligned allocator, with byte accounting. */
#include "lt_alloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NCLASSES 160

typedef struct free_block {
  struct free_block *next;
} free_block;

static void *sys_alloc(void *ud, size_t size, size_t align) {
  (void)ud;
  void *p = NULL;
  if (posix_memalign(&p, align, size ? size : align) != 0) return NULL;
  return p;
}
static void sys_free(void *ud, void *p, size_t size) {
  (void)ud;
  (void)size;
  free(p);
}

/* Process-wide by nature: buffers move between Lua states of one host and between threads. */
static struct {
  pthread_mutex_t lock;
  lt_allocator a;
  free_block *cache[NCLASSES];
  size_t cache_limit;
  lt_alloc_stats st;
} A = { PTHREAD_MUTEX_INITIALIZER, { sys_alloc, sys_free, NULL }, { 0 }, (size_t)512 << 20, { 0 } };

/* Allocation-failure injection (lt_alloc_fault_arm): counts allocations while armed and fails one of them.
 * Atomics, not the lock: the JSON allocator (json.c) asks too, and an unarmed check is one relaxed load. */
static struct {
  uint64_t armed; /* 0: off; otherwise the 1-based allocation (since arming) that fails */
  uint64_t seen;  /* allocations since arming */
} F;

int lt_alloc_fault_hit(void) {
  uint64_t target = __atomic_load_n(&F.armed, __ATOMIC_RELAXED);
  if (!target) return 0;
  uint64_t n = __atomic_add_fetch(&F.seen, 1, __ATOMIC_RELAXED);
  return n == target;
}

void lt_alloc_fault_arm(uint64_t n) {
  __atomic_store_n(&F.seen, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&F.armed, n, __ATOMIC_RELAXED);
}

uint64_t lt_alloc_fault_seen(void) { return __atomic_load_n(&F.seen, __ATOMIC_RELAXED); }

static int floor_log2(size_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

/* Rounds up to the class size and returns the class index (or -1 when too large to cache). */
static int size_class(size_t n, size_t *rounded) {
  if (n <= 1024) {
    size_t c = n == 0 ? 1 : (n + 63) / 64;
    *rounded = c * 64;
    return (int)c - 1; /* 0..15 */
  }
  int k = floor_log2(n);
  size_t step = (size_t)1 << (k - 2);
  size_t r = (n + step - 1) / step * step;
  *rounded = r;
  int k2 = floor_log2(r);
  size_t step2 = (size_t)1 << (k2 - 2);
  int idx = 16 + (k2 - 10) * 4 + (int)(r / step2 - 4);
  return idx < NCLASSES ? idx : -1;
}

void *lt_alloc(size_t nbytes) {
  if (lt_alloc_fault_hit()) return NULL;
  size_t r;
  int cls = size_class(nbytes, &r);
  void *p = NULL;
  pthread_mutex_lock(&A.lock);
  if (cls >= 0 && A.cache[cls]) {
    free_block *b = A.cache[cls];
    A.cache[cls] = b->next;
    A.st.cached_bytes -= r;
    A.st.cache_hits++;
    p = b;
  }
  if (!p) {
    lt_allocator a = A.a;
    pthread_mutex_unlock(&A.lock);
    p = a.alloc(a.ud, r, LT_ALIGN);
    if (!p) return NULL;
    pthread_mutex_lock(&A.lock);
    A.st.system_allocs++;
  }
  A.st.live_bytes += r;
  __atomic_add_fetch(&A.st.total_allocated, r, __ATOMIC_RELAXED); /* read without the lock (lt_alloc_total_allocated) */
  pthread_mutex_unlock(&A.lock);
  return p;
}

void lt_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t r;
  int cls = size_class(nbytes, &r);
  pthread_mutex_lock(&A.lock);
  A.st.live_bytes -= r;
  if (cls >= 0 && A.st.cached_bytes + r <= A.cache_limit) {
    free_block *b = p;
    b->next = A.cache[cls];
    A.cache[cls] = b;
    A.st.cached_bytes += r;
    pthread_mutex_unlock(&A.lock);
    return;
  }
  lt_allocator a = A.a;
  pthread_mutex_unlock(&A.lock);
  a.free(a.ud, p, r);
}

void lt_alloc_get_stats(lt_alloc_stats *s) {
  pthread_mutex_lock(&A.lock);
  *s = A.st;
  pthread_mutex_unlock(&A.lock);
}

uint64_t lt_alloc_total_allocated(void) { return __atomic_load_n(&A.st.total_allocated, __ATOMIC_RELAXED); }

void lt_alloc_set_cache_limit(size_t bytes) {
  pthread_mutex_lock(&A.lock);
  A.cache_limit = bytes;
  int over = A.st.cached_bytes > bytes;
  pthread_mutex_unlock(&A.lock);
  if (over) lt_alloc_trim();
}

void lt_alloc_trim(void) {
  pthread_mutex_lock(&A.lock);
  for (int c = 0; c < NCLASSES; c++) {
    while (A.cache[c]) {
      free_block *b = A.cache[c];
      A.cache[c] = b->next;
      size_t r;
      /* recover the class size from the index: any size in the class rounds to it */
      if (c < 16) r = (size_t)(c + 1) * 64;
      else {
        int k2 = (c - 16) / 4 + 10;
        size_t step2 = (size_t)1 << (k2 - 2);
        r = ((size_t)1 << k2) + (size_t)((c - 16) % 4) * step2;
      }
      A.st.cached_bytes -= r;
      A.a.free(A.a.ud, b, r);
    }
  }
  pthread_mutex_unlock(&A.lock);
}

int lt_alloc_set_allocator(const lt_allocator *a) {
  pthread_mutex_lock(&A.lock);
  if (A.st.live_bytes != 0) {
    pthread_mutex_unlock(&A.lock);
    return -1;
  }
  pthread_mutex_unlock(&A.lock);
  lt_alloc_trim();
  pthread_mutex_lock(&A.lock);
  if (a) A.a = *a;
  else {
    A.a.alloc = sys_alloc;
    A.a.free = sys_free;
    A.a.ud = NULL;
  }
  pthread_mutex_unlock(&A.lock);
  return 0;
}
