/* json.c — Jansson with failure-counting allocation functions; see lt_json.h for why. */
#include "lt_json.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "lt_alloc.h"

static uint64_t failures; /* allocations of Jansson's that returned NULL, ever (atomic) */
static int64_t live;      /* blocks allocated by json_alloc and not yet freed (atomic) */

/* Inside lt_json_loadb, the first failed allocation makes every later one of the same parse fail too.
 * Jansson 2.14's lexer ignores a failed append to its token buffer: a string token can lose its closing
 * quote, and lex_scan_string then copies past the end of both buffers (a heap overflow, found by the
 * allocation-failure sweep). The copy's own buffer is allocated first, so failing it ends the parse
 * before the overrun. Thread-local: the parse runs on the caller's thread, and another thread's use of
 * Jansson must not be affected. */
static _Thread_local int parsing, failing;

static void *json_alloc(size_t size) {
  void *p = (failing || lt_alloc_fault_hit()) ? NULL : malloc(size);
  if (!p) {
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    if (parsing) failing = 1;
  } else {
    __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
  }
  return p;
}

static void json_release(void *p) {
  if (p) __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
  free(p);
}

static void install(void) { json_set_alloc_funcs(json_alloc, json_release); }

int64_t lt_json_live_blocks(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }

void lt_json_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, install);
}

json_t *lt_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *jerr, int *oom) {
  lt_json_init();
  uint64_t before = __atomic_load_n(&failures, __ATOMIC_RELAXED);
  parsing = 1;
  json_t *root = json_loadb(buf, len, flags, jerr);
  parsing = failing = 0;
  /* any failure during the parse (in another thread too: then this refusal is only cautious) */
  *oom = __atomic_load_n(&failures, __ATOMIC_RELAXED) != before;
  if (*oom && root) {
    json_decref(root);
    root = NULL;
  }
  return root;
}
