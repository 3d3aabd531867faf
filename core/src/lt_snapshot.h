/* lt_snapshot.h — a double buffer of weights that one writer thread publishes and one reader thread copies
 * from, neither waiting for the other, and no copy ever torn (lt.background's load_into;
 * docs/reference/background.md).
 *
 * The two buffers' roles live in one atomic word (which buffer is the latest, which one the reader holds),
 * changed only by compare-and-swap. The writer fills the buffer that is not the latest and not held, then
 * makes it the latest; the reader takes the latest, copies out of it and lets go. When the reader holds the
 * only buffer the writer could fill, the writer skips that publication (the next one goes through): a
 * seqlock would instead make the reader retry without bound and its racing copies are data races.
 * One writer thread and one reader thread at a time; either may be any thread. */
#ifndef LT_SNAPSHOT_H
#define LT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

typedef struct lt_snapshot lt_snapshot;

/* n blocks of nbytes[i] bytes, twice. NULL when out of memory. */
lt_snapshot *lt_snapshot_new(int n, const size_t *nbytes);
void lt_snapshot_free(lt_snapshot *s);
int lt_snapshot_count(const lt_snapshot *s);
size_t lt_snapshot_block_size(const lt_snapshot *s, int i);

/* writer: the buffer to fill (0 or 1), or -1 when the reader holds the only free one (skip this time) */
int lt_snapshot_write_begin(lt_snapshot *s);
/* block i of buffer b (to fill after write_begin, to read after acquire) */
void *lt_snapshot_block(lt_snapshot *s, int b, int i);
/* writer: buffer b (filled) becomes the latest, taken at training step `step` */
void lt_snapshot_publish(lt_snapshot *s, int b, int64_t step);

/* reader: holds the latest buffer and returns it (its step in *step), or -1 when nothing was published yet */
int lt_snapshot_acquire(lt_snapshot *s, int64_t *step);
/* reader: lets go of buffer b */
void lt_snapshot_release(lt_snapshot *s, int b);

#endif
