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
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
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

/* Which kind of file st is, for the refusal message ("is a FIFO (named pipe)"). */
static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

/* Follows symlinks up to this many hops, as the kernel does (its limit is 40). */
#define LINK_HOPS_MAX 40

/* The file a write to path replaces: path itself, or the end of the chain of symbolic links at path, so the
 * links stay links and the file they name gets the new content. The intermediate directories are left to the
 * kernel; only the last component is followed here. On success *target is malloc'ed, *exists says whether it
 * exists, and then *st is its lstat. A directory, FIFO, device or socket is refused: replacing one would
 * destroy it (a device node, a pipe another program reads) and a write would block or go nowhere. */
static int resolve_target(const char *op, const char *path, char **target, struct stat *st, int *exists, char *err,
                          size_t errlen) {
  char *cur = strdup(path);
  if (!cur) goto oom;
  for (int hop = 0;; hop++) {
    if (lstat(cur, st) != 0) {
      if (errno == ENOENT) {
        *exists = 0;
        *target = cur;
        return 0;
      }
      int same = strcmp(cur, path) == 0;
      set_err(err, errlen, op, path, same ? "cannot stat" : "cannot stat ", same ? "" : cur, errno);
      free(cur);
      return -1;
    }
    if (!S_ISLNK(st->st_mode)) break;
    if (hop == LINK_HOPS_MAX) {
      set_err(err, errlen, op, path, "cannot follow its symbolic links", "", ELOOP);
      free(cur);
      return -1;
    }
    /* st_size is the link's length, but /proc-style links say 0: grow until the text fits. */
    size_t cap = st->st_size > 0 ? (size_t)st->st_size + 1 : 256;
    char *link = NULL;
    ssize_t n;
    for (;;) {
      char *grown = realloc(link, cap);
      if (!grown) {
        free(link);
        free(cur);
        goto oom;
      }
      link = grown;
      n = readlink(cur, link, cap);
      if (n < 0 || (size_t)n < cap) break;
      cap *= 2;
    }
    if (n < 0) {
      set_err(err, errlen, op, path, "cannot read the symbolic link ", cur, errno);
      free(link);
      free(cur);
      return -1;
    }
    link[n] = 0;
    char *next;
    if (link[0] == '/' || !strchr(cur, '/')) {
      next = link; /* absolute, or relative to the current directory, which is cur's own */
    } else {
      char *dir = dir_of(cur);
      next = dir ? malloc(strlen(dir) + (size_t)n + 2) : NULL;
      if (next) sprintf(next, "%s/%s", dir, link);
      free(dir);
      free(link);
      if (!next) {
        free(cur);
        goto oom;
      }
    }
    free(cur);
    cur = next;
  }
  if (!S_ISREG(st->st_mode)) {
    char what[64];
    snprintf(what, sizeof what, "is %s", kind_of(st->st_mode));
    if (strcmp(cur, path) == 0) {
      set_err(err, errlen, op, path, what, ", not a regular file; nothing was written", 0);
    } else {
      char where[4200];
      snprintf(where, sizeof where, "%s, which %s, not a regular file; nothing was written", cur, what);
      set_err(err, errlen, op, path, "is a symbolic link to ", where, 0);
    }
    free(cur);
    return -1;
  }
  *exists = 1;
  *target = cur;
  return 0;
oom:
  set_err(err, errlen, op, path, "out of memory", NULL, 0);
  return -1;
}

/* 64 random bits for a temporary name: the kernel's, or (no getrandom) the clock mixed with an address and
 * the attempt number. Unpredictable names are a second line of defence; O_EXCL is the first. */
static uint64_t name_bits(unsigned attempt) {
  uint64_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (uint64_t)(uintptr_t)&ts ^ attempt;
  r ^= r >> 33;
  r *= 0xff51afd7ed558ccdULL;
  return r ^ (r >> 33);
}

/* Creates the temporary file "<target>.tmp.<pid>.<thread>.<16 hex digits>" beside target: O_EXCL, so a file or
 * a symbolic link planted under that name makes the open fail (and a new name is tried) instead of writing
 * through it; the thread id and the random bits keep two threads of one process (two lua_States) apart.
 * Returns the descriptor (and the malloc'ed name in *tmp) or -1 with errno set. */
#define TEMP_TRIES 16
static int open_temp(const char *target, mode_t mode, char **tmp) {
  size_t cap = strlen(target) + 80;
  char *name = malloc(cap);
  if (!name) {
    errno = ENOMEM;
    return -1;
  }
  long tid = (long)syscall(SYS_gettid);
  int fd = -1;
  for (unsigned attempt = 0; attempt < TEMP_TRIES; attempt++) {
    snprintf(name, cap, "%s.tmp.%ld.%ld.%016llx", target, (long)getpid(), tid, (unsigned long long)name_bits(attempt));
    fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || (errno != EEXIST && errno != EINTR)) break;
  }
  *tmp = name;
  return fd;
}

/* Gives the temporary file the replaced file's owner (as far as the process may: root keeps both, others at
 * most the group) and then its permission bits (after the chown, which may clear set-id bits; set-id bits are
 * dropped when the owner could not be kept). A file system without Unix modes (vfat, some network mounts)
 * refuses fchmod with EPERM or ENOTSUP: its mount options decide every file's mode, so that is no failure.
 * Returns 0 or an errno value. */
static int keep_owner_and_mode(int fd, const struct stat *old) {
  mode_t mode = old->st_mode & 07777;
  if (old->st_uid != geteuid() || old->st_gid != getegid()) {
    if (fchown(fd, old->st_uid, old->st_gid) != 0) {
      mode &= ~(mode_t)(S_ISUID | S_ISGID);
      if (fchown(fd, (uid_t)-1, old->st_gid) != 0) { /* not a member of its group: the file stays ours */
      }
    }
  }
  if (fchmod(fd, mode) == 0 || errno == EPERM || errno == ENOTSUP) return 0;
  return errno;
}

/* Removes "<base>.tmp.<pid>[.<anything>]" files of target left in its directory by processes that no longer
 * exist (a SIGKILLed save leaves one behind). A pid that is alive (kill(pid, 0) succeeds or says EPERM) is left
 * alone, even if it is a new process that reused the number: never another live process's file. Only regular
 * files of this user are removed (never a link or someone else's file). Best effort: any failure only means a
 * stale file stays. */
static void remove_stale_temps(const char *target) {
  char *dir = dir_of(target);
  if (!dir) return;
  const char *slash = strrchr(target, '/');
  const char *base = slash ? slash + 1 : target;
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
      if (*digits < '1' || *digits > '9' || (*end && *end != '.') || errno || pid <= 0 || pid == (long)getpid() ||
          pid > INT32_MAX)
        continue;
      if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
      size_t dlen = strlen(dir), nlen = strlen(n);
      char *full = malloc(dlen + nlen + 2);
      if (!full) break;
      memcpy(full, dir, dlen);
      full[dlen] = '/';
      memcpy(full + dlen + 1, n, nlen + 1);
      struct stat st;
      if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) unlink(full);
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
  char *target;
  struct stat old;
  int exists;
  if (resolve_target(op, path, &target, &old, &exists, err, errlen) != 0) return -1;
  remove_stale_temps(target);

  /* A new file gets 0666 & ~umask from open itself; a replaced one starts private (0600) and gets the old
   * file's mode before the rename, so its content is never readable more widely than either file allows. */
  char *tmp = NULL;
  int fd = open_temp(target, exists ? 0600 : 0666, &tmp);
  if (fd < 0) {
    if (tmp) set_err(err, errlen, op, path, "cannot create temporary file ", tmp, errno);
    else set_err(err, errlen, op, path, "out of memory", NULL, 0);
    free(tmp);
    free(target);
    return -1;
  }
  int e = 0;
  for (size_t i = 0; i < nchunks && !e; i++)
    if (chunks[i].len > 0) e = write_full(fd, chunks[i].data, chunks[i].len);
  if (e) {
    set_err(err, errlen, op, path, "cannot write temporary file ", tmp, e);
    goto fail_open;
  }
  if (exists && (e = keep_owner_and_mode(fd, &old)) != 0) {
    set_err(err, errlen, op, path, "cannot give the old file's mode to temporary file ", tmp, e);
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
  if (rename(tmp, target) != 0) {
    set_err(err, errlen, op, path, "cannot rename temporary file ", tmp, errno);
    goto fail_closed;
  }
  free(tmp);

  /* Make the rename durable. Some file systems refuse fsync on a directory (EINVAL): nothing to do there. */
  char *dir = dir_of(target);
  free(target);
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
  free(target);
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
