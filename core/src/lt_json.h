/*
 * lt_json.h — parsing JSON with Jansson such that an allocation failure is reported as one, never as a
 * parse result.
 *
 *   int oom;
 *   json_error_t jerr;
 *   json_t *root = lt_json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr, &oom);
 *   if (!root) return oom ? "out of memory parsing ..." : jerr.text;
 *
 * Why: when one of Jansson 2.14's allocations fails inside its lexer, the lexer drops the character it
 * was saving and goes on, so json_loadb can succeed with altered content ("global_stp", "fase"), or fail
 * with a syntax error. lt_json_loadb counts the allocations that failed during the parse and refuses any
 * result produced under a failure.
 *
 * The allocator: lt_json_init() (idempotent, called by lt_json_loadb) installs Jansson's allocation
 * functions (json_set_alloc_funcs, process-wide). They ask lutra's failure injection first
 * (lt_alloc_fault_hit, lt_alloc.h), so the allocation-failure sweep reaches Jansson too, and count every
 * failure. The memory itself comes from malloc and goes back with free: Jansson's allocator is
 * process-wide, and a host that uses Jansson itself may free blocks it allocated before lutra installed
 * its functions (or the other way round), so ours must stay malloc-compatible.
 */
#ifndef LT_JSON_H
#define LT_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

void lt_json_init(void);

/* Blocks of Jansson's allocated since lt_json_init and not freed (a leak check for tests; a host's own
 * Jansson blocks count too). */
int64_t lt_json_live_blocks(void);

/* json_loadb; on NULL, *oom says whether an allocation failed (then jerr is meaningless). */
json_t *lt_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *jerr, int *oom);

#endif
