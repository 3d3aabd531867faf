/* snapshot.c — see lt_snapshot.h. */
#include "lt_snapshot.h"

#include <stdatomic.h>
#include <stdlib.h>

/* the word: bits 0-1 the latest buffer, bits 2-3 the held one; NONE for neither */
enum { NONE = 3 };
#define LATEST(w) ((w)&3u)
#define HELD(w) (((w) >> 2) & 3u)
#define WORD(latest, held) ((unsigned)(latest) | ((unsigned)(held) << 2))

struct lt_snapshot {
  _Atomic unsigned word;
  int n;
  size_t *offset; /* n + 1 offsets into each buffer */
  unsigned char *buf[2];
  int64_t step[2]; /* written before the publishing CAS, read after the acquiring one */
};

lt_snapshot *lt_snapshot_new(int n, const size_t *nbytes) {
  lt_snapshot *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->n = n;
  s->offset = malloc(sizeof(size_t) * (size_t)(n + 1));
  if (!s->offset) goto fail;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    s->offset[i] = total;
    total += (nbytes[i] + 63) & ~(size_t)63; /* each block on its own cache lines */
  }
  s->offset[n] = total;
  for (int b = 0; b < 2; b++) {
    s->buf[b] = malloc(total ? total : 1);
    if (!s->buf[b]) goto fail;
  }
  atomic_init(&s->word, WORD(NONE, NONE));
  return s;
fail:
  lt_snapshot_free(s);
  return NULL;
}

void lt_snapshot_free(lt_snapshot *s) {
  if (!s) return;
  free(s->buf[0]);
  free(s->buf[1]);
  free(s->offset);
  free(s);
}

int lt_snapshot_count(const lt_snapshot *s) { return s->n; }

size_t lt_snapshot_block_size(const lt_snapshot *s, int i) { return s->offset[i + 1] - s->offset[i]; }

void *lt_snapshot_block(lt_snapshot *s, int b, int i) { return s->buf[b] + s->offset[i]; }

int lt_snapshot_write_begin(lt_snapshot *s) {
  /* Only the writer changes the latest buffer, and the reader only ever takes the latest: the buffer
   * chosen here cannot become held while the writer fills it. */
  unsigned w = atomic_load_explicit(&s->word, memory_order_acquire);
  unsigned b = LATEST(w) == NONE ? 0 : 1 - LATEST(w);
  return HELD(w) == b ? -1 : (int)b;
}

void lt_snapshot_publish(lt_snapshot *s, int b, int64_t step) {
  s->step[b] = step;
  unsigned w = atomic_load_explicit(&s->word, memory_order_relaxed);
  /* release: the buffer's bytes and step are visible to the reader that acquires it */
  while (!atomic_compare_exchange_weak_explicit(&s->word, &w, WORD(b, HELD(w)), memory_order_release,
                                                memory_order_relaxed)) {}
}

int lt_snapshot_acquire(lt_snapshot *s, int64_t *step) {
  unsigned w = atomic_load_explicit(&s->word, memory_order_acquire);
  for (;;) {
    if (LATEST(w) == NONE) return -1;
    if (atomic_compare_exchange_weak_explicit(&s->word, &w, WORD(LATEST(w), LATEST(w)), memory_order_acquire,
                                              memory_order_acquire))
      break;
  }
  int b = (int)LATEST(w);
  if (step) *step = s->step[b];
  return b;
}

void lt_snapshot_release(lt_snapshot *s, int b) {
  (void)b;
  unsigned w = atomic_load_explicit(&s->word, memory_order_relaxed);
  /* release: the reader's copy out of the buffer is done before the writer may fill it again */
  while (!atomic_compare_exchange_weak_explicit(&s->word, &w, WORD(LATEST(w), NONE), memory_order_release,
                                                memory_order_relaxed)) {}
}
