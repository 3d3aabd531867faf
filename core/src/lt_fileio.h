/*
 * lt_fileio.h — whole-file reads and crash-safe (atomic) whole-file writes.
 *
 *   lt_chunk parts[2] = { {hdr, hdr_len}, {data, data_len} };
 *   char err[512];
 *   if (lt_file_write_atomic("save", "ckpt/last.safetensors", parts, 2, err, sizeof err) != 0)
 *     ... err says e.g. "save: ckpt/last.safetensors: cannot create temporary file
 *         ckpt/last.safetensors.tmp.4242.4242.9f86d081884c7d65: No such file or directory"
 *
 *   void *buf; size_t len;
 *   if (lt_file_read_all("load", path, &buf, &len, err, sizeof err) != 0) ...
 *   ... use buf[0 .. len) (buf[len] is a NUL byte, for convenience) ...
 *   lt_file_free(buf);
 *
 * Atomic write. What it replaces: the regular file at <path>, or, when <path> is a symbolic link (a chain of
 * up to 40), the file at the end of the chain: the links stay links and the target is replaced in its own
 * directory (a dangling link's target is created). A directory, FIFO, character or block device or socket at
 * <path> (or at the end of its links) is refused before anything is written: "<op>: <path>: is a FIFO (named
 * pipe), not a regular file; nothing was written".
 * How: the chunks go to a temporary file "<target>.tmp.<pid>.<thread id>.<16 random hex digits>" beside the
 * target, created with O_CREAT|O_EXCL|O_NOFOLLOW (a file or link planted under that name is never written
 * through: another name is tried, up to 16), which is written, given the replaced file's owner (as far as the
 * process may: root keeps owner and group) and permission bits, fsync'ed, closed and renamed over the target;
 * then the directory is fsync'ed so the rename itself is durable. A new file gets 0666 & ~umask; the
 * temporary file of a replaced one is 0600 until it gets the old mode, so the new content is never open to
 * anyone the old file's mode kept out. Two threads (two lua_States) or processes writing one path each rename a whole
 * file of their own: the last rename wins and a reader never sees a mix.
 * On any failure before the rename the temporary file is removed and the old file is untouched; a crash
 * (SIGKILL, power loss) at any moment leaves either the old complete file or the new complete file (plus, at
 * worst, a stale temporary file, which the next atomic write of the same target removes once its pid is no
 * longer alive; another live process's temporary file, or anything not a regular file of this user, is never
 * touched). A hard link to the old file keeps the old content (the name gets a new file).
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
