/* prof.c — the profiler's tables (lt_prof.h): exclusive time per action, time per autograd kernel. */
#include "lt_prof.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double lt_prof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define LT_PROF_NAME_(id, name) name,
static const char *const fixed_names[LT_PROF_NFIXED] = { LT_PROF_FIXED_LIST(LT_PROF_NAME_) };
#undef LT_PROF_NAME_

static int add_row(lt_prof *p, const char *name) {
  if (p->nrows == p->cap) {
    int cap = p->cap ? 2 * p->cap : 32;
    lt_prof_row *r = realloc(p->rows, sizeof *r * (size_t)cap);
    if (!r) return -1;
    p->rows = r;
    p->cap = cap;
  }
  lt_prof_row *r = &p->rows[p->nrows];
  memset(r, 0, sizeof *r);
  strncpy(r->name, name, LT_PROF_NAME - 1);
  return p->nrows++;
}

lt_prof *lt_prof_new(void) {
  lt_prof *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  for (int i = 0; i < LT_PROF_NFIXED; i++)
    if (add_row(p, fixed_names[i]) < 0) {
      lt_prof_free(p);
      return NULL;
    }
  return p;
}

void lt_prof_free(lt_prof *p) {
  if (!p) return;
  free(p->rows);
  free(p);
}

int lt_prof_action(lt_prof *p, const char *name) {
  for (int i = 0; i < p->nrows; i++)
    if (strncmp(p->rows[i].name, name, LT_PROF_NAME - 1) == 0) return i;
  return add_row(p, name);
}

/* Charges the time since the last mark to the innermost running action (row 0 when none runs). */
static void charge(lt_prof *p, double now) {
  int d = p->depth < LT_PROF_DEPTH ? p->depth : LT_PROF_DEPTH;
  int row = d > 0 ? p->stack[d - 1] : LT_PROF_OTHER;
  p->rows[row].total += now - p->mark;
  p->mark = now;
}

void lt_prof_start(lt_prof *p) {
  if (p->running) return;
  p->running = 1;
  p->depth = 0;
  p->rows[LT_PROF_OTHER].count++;
  p->mark = lt_prof_now();
}

void lt_prof_stop(lt_prof *p) {
  if (!p->running) return;
  charge(p, lt_prof_now());
  p->running = 0;
  p->depth = 0;
}

void lt_prof_enter(lt_prof *p, int row) {
  if (!p->running || row < 0 || row >= p->nrows) return;
  charge(p, lt_prof_now());
  if (p->depth < LT_PROF_DEPTH) p->stack[p->depth] = row;
  p->depth++;
  p->rows[row].count++;
}

void lt_prof_exit(lt_prof *p) {
  if (!p->running || p->depth == 0) return;
  charge(p, lt_prof_now());
  p->depth--;
}

void lt_prof_reset(lt_prof *p) {
  for (int i = 0; i < p->nrows; i++) p->rows[i].count = 0, p->rows[i].total = 0;
  p->mark = lt_prof_now();
}

void lt_op_prof_init(lt_op_prof *p) { memset(p, 0, sizeof *p); }

void lt_op_prof_add(lt_op_prof *p, const char *op, double seconds) {
  lt_op_row *r = NULL;
  for (int i = 0; i < p->nrows && !r; i++)
    if (p->rows[i].op == op || strcmp(p->rows[i].op, op) == 0) r = &p->rows[i];
  if (!r) {
    if (p->nrows == LT_OP_PROF_MAX) {
      p->dropped++;
      return;
    }
    r = &p->rows[p->nrows++];
    *r = (lt_op_row){ op, 0, 0 };
  }
  r->count++;
  r->total += seconds;
}
