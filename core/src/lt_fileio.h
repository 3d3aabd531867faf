/*
 * lt_fileio.h — whole-file reads and crash-safe (atomic) whole-file writes.
 *
 *   lt_chunk parts[2] = { {hdr, hdr_len}, {data, data_len} };
 *   char err[512];
 *   if (lt_file_write_atomic("save", "ckpt/last.safetensors", parts, 2, err, sizeof err) != 0)
 *     ... err says e.g. "save: ckpt/last.safetensors: cannot create temporary file
 *         ckpt/last.safetensors.tmp.4242: No such file or directory"
 *
 *   void *buf; size_t len;
 *   if (lt_file_read_all("load", path, &buf, &len, err, sizeof err) != 0) ...
 *   ... use buf[0 .. len) (buf[len] is a NUL byte, for convenience) ...
 *   lt_file_free(buf);
 *
 * Atomic write: the chunks go to "<path>.tmp.<pid>" in the same directory, which is fsync'ed, closed
 * and renamed over <path>; then the directory is fsync'ed so the rename itself is durable. On any failure
 * before the rename the temporary file is removed and an existing <path> is left untouched; a crash
 * (SIGKILL, power loss) at any moment leaves either the old complete file or the new complete file (plus,
 * at worst, a stale "<path>.tmp.<pid>", which the next atomic write of the same path removes once that
 * pid is no longer alive; another live process's temp file is never touched). The new file gets mode
 * 0666 & ~umask.
 *
 * Both functions return 0 on success and -1 on failure, with a message "<op>: <path>: <what>: <strerror>"
 * in err (op defaults to "write" / "read" when NULL). No globals, no printing; memory via malloc.
 */
#ifndef LT_FILEIO_H
#define LT_FILEIO_H

#include <stddef.h>

typedef struct lt_chunk {
  const void *data;
  size_t len;
} lt_chunk;

int lt_file_write_atomic(const char *op, const char *path, const lt_chunk *chunks, size_t nchunks, char *err,
                         size_t errlen);

/* Reads a regular file whole into a malloc'ed buffer of len + 1 bytes (buf[len] = 0). Free with
 * lt_file_free. On failure *buf is NULL and *len is 0. */
int lt_file_read_all(const char *op, const char *path, void **buf, size_t *len, char *err, size_t errlen);

void lt_file_free(void *buf);

#endif
