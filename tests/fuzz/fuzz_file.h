/*
 * fuzz_file.h — for fuzz targets whose reader takes a path: the input's bytes as a file that has no name
 * on disk (memfd), reached through /proc/self/fd/N.
 */
#ifndef FUZZ_FILE_H
#define FUZZ_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes n bytes to a fresh memfd; fills path; returns the fd (close it after use), or aborts. */
static int fuzz_file(const void *data, size_t n, char *path, size_t pathlen) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) abort();
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) abort();
    p += w;
    n -= (size_t)w;
  }
  lseek(fd, 0, SEEK_SET);
  snprintf(path, pathlen, "/proc/self/fd/%d", fd);
  return fd;
}

#endif
