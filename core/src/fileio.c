/*
 * fileio.c — whole-file reads and atomic whole-file writes (temp file, fsync, rename, fsync directory).
 * See lt_fileio.h for the contract.
 */
#include "lt_fileio.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static void set_err(char *err, size_t errlen, const char *op, const char *path, const char *what, const char *what_arg,
                    int errnum) {
  if (!err || errlen == 0) return;
  if (errnum) snprintf(err, errlen, "%s: %s: %s%s: %s", op, path, what, what_arg ? what_arg : "", strerror(errnum));
  else snprintf(err, errlen, "%s: %s: %s%s", op, path, what, what_arg ? what_arg : "");
}

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or an errno value. */
static int write_full(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    size_t n = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Directory part of path ("." when there is none), in a malloc'ed string. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  size_t n = (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = 0;
  return d;
}

/* Removes "<base>.tmp.<pid>" files of path left in its directory by processes that no longer exist (a
 * SIGKILLed save leaves one behind). A pid that is alive (kill(pid, 0) succeeds or says EPERM) is left
 * alone, even if it is a new process that reused the number: never another live process's file. Best
 * effort: any failure only means a stale file stays. */
static void remove_stale_temps(const char *path) {
  char *dir = dir_of(path);
  if (!dir) return;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t blen = strlen(base);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      const char *n = e->d_name;
      if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0) continue;
      const char *digits = n + blen + 5;
      char *end;
      errno = 0;
      long pid = strtol(digits, &end, 10);
      if (*digits < '1' || *digits > '9' || *end || errno || pid <= 0 || pid == (long)getpid() || pid > INT32_MAX)
        continue;
      if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
      size_t dlen = strlen(dir), nlen = strlen(n);
      char *full = malloc(dlen + nlen + 2);
      if (!full) break;
      memcpy(full, dir, dlen);
      full[dlen] = '/';
      memcpy(full + dlen + 1, n, nlen + 1);
      unlink(full);
      free(full);
    }
    closedir(d);
  }
  free(dir);
}

int lt_file_write_atomic(const char *op, const char *path, const lt_chunk *chunks, size_t nchunks, char *err,
                         size_t errlen) {
  if (!op) op = "write";
  if (!path || !*path) {
    set_err(err, errlen, op, "(empty path)", "no file name given", NULL, 0);
    return -1;
  }
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp) {
    set_err(err, errlen, op, path, "out of memory", NULL, 0);
    return -1;
  }
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  remove_stale_temps(path);

  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    set_err(err, errlen, op, path, "cannot create temporary file ", tmp, errno);
    free(tmp);
    return -1;
  }
  int e = 0;
  for (size_t i = 0; i < nchunks && !e; i++)
    if (chunks[i].len > 0) e = write_full(fd, chunks[i].data, chunks[i].len);
  if (e) {
    set_err(err, errlen, op, path, "cannot write temporary file ", tmp, e);
    goto fail_open;
  }
  while (fsync(fd) != 0) {
    if (errno == EINTR) continue;
    set_err(err, errlen, op, path, "cannot fsync temporary file ", tmp, errno);
    goto fail_open;
  }
  if (close(fd) != 0) {
    fd = -1;
    set_err(err, errlen, op, path, "cannot close temporary file ", tmp, errno);
    goto fail_closed;
  }
  fd = -1;
  if (rename(tmp, path) != 0) {
    set_err(err, errlen, op, path, "cannot rename temporary file ", tmp, errno);
    goto fail_closed;
  }
  free(tmp);

  /* Make the rename durable. Some file systems refuse fsync on a directory (EINVAL): nothing to do there. */
  char *dir = dir_of(path);
  if (!dir) {
    set_err(err, errlen, op, path, "written, but out of memory before syncing its directory", NULL, 0);
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    set_err(err, errlen, op, path, "written, but cannot open its directory to sync it: ", dir, errno);
    free(dir);
    return -1;
  }
  int rc = 0;
  while (fsync(dfd) != 0) {
    if (errno == EINTR) continue;
    if (errno != EINVAL && errno != EROFS) {
      set_err(err, errlen, op, path, "written, but cannot fsync its directory ", dir, errno);
      rc = -1;
    }
    break;
  }
  close(dfd);
  free(dir);
  return rc;

fail_open:
  close(fd);
fail_closed:
  unlink(tmp);
  free(tmp);
  return -1;
}

int lt_file_read_all(const char *op, const char *path, void **buf, size_t *len, char *err, size_t errlen) {
  if (!op) op = "read";
  *buf = NULL;
  *len = 0;
  if (!path || !*path) {
    set_err(err, errlen, op, "(empty path)", "no file name given", NULL, 0);
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    set_err(err, errlen, op, path, "cannot open", "", errno);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    set_err(err, errlen, op, path, "cannot stat", "", errno);
    close(fd);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    set_err(err, errlen, op, path, "is a directory, not a file", NULL, 0);
    close(fd);
    return -1;
  }
  /* Start with the size stat reports (plus one byte, so EOF shows without a realloc), grow if the file
   * turns out longer (pipes, /proc, a file being appended to). */
  size_t cap = (S_ISREG(st.st_mode) && st.st_size > 0) ? (size_t)st.st_size + 1 : 65536;
  if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size >= (uintmax_t)SIZE_MAX) {
    set_err(err, errlen, op, path, "file too large for memory", NULL, 0);
    close(fd);
    return -1;
  }
  char *p = malloc(cap + 1);
  if (!p) {
    set_err(err, errlen, op, path, "out of memory reading the file", NULL, 0);
    close(fd);
    return -1;
  }
  size_t n = 0;
  for (;;) {
    if (n == cap) {
      size_t ncap = cap * 2;
      char *q = ncap > cap ? realloc(p, ncap + 1) : NULL;
      if (!q) {
        set_err(err, errlen, op, path, "out of memory reading the file", NULL, 0);
        free(p);
        close(fd);
        return -1;
      }
      p = q;
      cap = ncap;
    }
    size_t want = cap - n;
    if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
    ssize_t r = read(fd, p + n, want);
    if (r < 0) {
      if (errno == EINTR) continue;
      set_err(err, errlen, op, path, "read error", "", errno);
      free(p);
      close(fd);
      return -1;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  p[n] = 0;
  *buf = p;
  *len = n;
  return 0;
}

void lt_file_free(void *buf) { free(buf); }
