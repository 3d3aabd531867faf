/* test_snapshot.c — the double buffer of lt.background's weights (core/src/snapshot.c): one thread publishes
 * snapshots whose every word is the snapshot's step while another copies out of the latest one as fast as
 * it can. Every copy must be one step's (all words equal, equal to the step acquire reported), steps never go
 * back, and the writer is never blocked: when the reader holds the only free buffer the writer skips.
 * Run in the release and the ASan builds (tests/run --config asan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lt_snapshot.h"

#include "check.h"

#define WORDS 4096 /* per block; two blocks of different sizes */
#define PUBLISHES 20000

typedef struct shared {
  lt_snapshot *s;
  atomic_int done;
  int published, skipped;
} shared;

static void *writer(void *p) {
  shared *sh = p;
  for (int64_t step = 1; step <= PUBLISHES; step++) {
    int b = lt_snapshot_write_begin(sh->s);
    if (b < 0) {
      sh->skipped++;
      continue;
    }
    for (int i = 0; i < 2; i++) {
      int64_t *w = lt_snapshot_block(sh->s, b, i);
      size_t n = lt_snapshot_block_size(sh->s, i) / sizeof *w;
      for (size_t k = 0; k < n; k++) w[k] = step;
    }
    lt_snapshot_publish(sh->s, b, step);
    sh->published++;
  }
  atomic_store(&sh->done, 1);
  return NULL;
}

int main(void) {
  size_t sizes[2] = { WORDS * sizeof(int64_t), (WORDS / 2 + 3) * sizeof(int64_t) };
  lt_snapshot *s = lt_snapshot_new(2, sizes);
  CHECK(s != NULL, "a snapshot of two blocks");
  if (!s) return 1;
  CHECK(lt_snapshot_count(s) == 2, "two blocks");
  CHECK(lt_snapshot_block_size(s, 0) >= sizes[0] && lt_snapshot_block_size(s, 1) >= sizes[1], "block sizes");
  int64_t step = -1;
  CHECK(lt_snapshot_acquire(s, &step) == -1, "nothing to acquire before the first publication");

  /* one thread: the writer skips the buffer the reader holds */
  int b = lt_snapshot_write_begin(s);
  CHECK(b == 0, "the first publication fills buffer 0");
  lt_snapshot_publish(s, b, 1);
  int r = lt_snapshot_acquire(s, &step);
  CHECK(r == 0 && step == 1, "the reader takes the latest (0, step 1)");
  b = lt_snapshot_write_begin(s);
  CHECK(b == 1, "the writer fills the other buffer while the reader holds the latest");
  lt_snapshot_publish(s, b, 2);
  CHECK(lt_snapshot_write_begin(s) == -1, "the writer skips when the reader holds the only free buffer");
  lt_snapshot_release(s, r);
  CHECK(lt_snapshot_write_begin(s) == 0, "after the release the writer may fill it again");
  r = lt_snapshot_acquire(s, &step);
  CHECK(r == 1 && step == 2, "the reader takes the newer one (1, step 2)");
  lt_snapshot_release(s, r);
  lt_snapshot_free(s);

  /* two threads */
  s = lt_snapshot_new(2, sizes);
  shared sh = { s, 0, 0, 0 };
  atomic_init(&sh.done, 0);
  pthread_t th;
  pthread_create(&th, NULL, writer, &sh);
  int64_t *copy = malloc(sizes[0]);
  int torn = 0, wrong_step = 0, backwards = 0, reads = 0;
  int64_t last = 0;
  while (!atomic_load(&sh.done)) {
    r = lt_snapshot_acquire(s, &step);
    if (r < 0) continue;
    memcpy(copy, lt_snapshot_block(s, r, 0), sizes[0]);
    int64_t first1 = *(int64_t *)lt_snapshot_block(s, r, 1);
    lt_snapshot_release(s, r);
    for (size_t k = 1; k < WORDS; k++)
      if (copy[k] != copy[0]) torn++;
    if (copy[0] != step || first1 != step) wrong_step++;
    if (step < last) backwards++;
    last = step;
    reads++;
  }
  pthread_join(th, NULL);
  CHECK(torn == 0, "no torn copy");
  CHECK(wrong_step == 0, "each copy is the step acquire reported, in every block");
  CHECK(backwards == 0, "steps never go back");
  CHECK(sh.published + sh.skipped == PUBLISHES, "every publication either published or skipped");
  CHECK(sh.published > 0 && reads > 0, "both sides made progress");
  r = lt_snapshot_acquire(s, &step);
  CHECK(r >= 0 && step > 0 && step <= PUBLISHES, "the last publication is there after the writer ended");
  lt_snapshot_release(s, r);
  printf("# %d published, %d skipped, %d reads\n", sh.published, sh.skipped, reads);
  free(copy);
  lt_snapshot_free(s);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
