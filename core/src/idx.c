/*
 * idx.c — IDX file reader (MNIST format), gzip or plain, via zlib's gzread. See lt_idx.h.
 */
#include "lt_idx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define OP "read_idx"
#define CHUNK_MAX ((unsigned)1 << 30)      /* gzread takes an unsigned length that must fit an int */
#define FIRST_ALLOC_MAX ((size_t)64 << 20) /* a bogus header cannot make us allocate more up front */

size_t lt_idx_type_size(int code) {
  switch (code) {
    case LT_IDX_U8:
    case LT_IDX_I8: return 1;
    case LT_IDX_I16: return 2;
    case LT_IDX_I32:
    case LT_IDX_F32: return 4;
    case LT_IDX_F64: return 8;
    default: return 0;
  }
}

const char *lt_idx_type_name(int code) {
  switch (code) {
    case LT_IDX_U8: return "ubyte";
    case LT_IDX_I8: return "sbyte";
    case LT_IDX_I16: return "short";
    case LT_IDX_I32: return "int";
    case LT_IDX_F32: return "float";
    case LT_IDX_F64: return "double";
    default: return NULL;
  }
}

void lt_idx_free(lt_idx_data *d) {
  if (!d) return;
  free(d->data);
  d->data = NULL;
  d->nbytes = 0;
  d->numel = 0;
}

/* The message of zlib's last error, without the "<fd:N>: " prefix gzdopen's files carry. */
static const char *gz_msg(gzFile gz, int *errnum) {
  const char *m = gzerror(gz, errnum);
  if (!m) return "unknown error";
  if (m[0] == '<') {
    const char *p = strstr(m, ">: ");
    if (p) m = p + 3;
  }
  return m;
}

/* Reads up to n bytes; returns the count read (short only at end of input), or -1 on a zlib/IO error. */
static long long gz_read_full(gzFile gz, void *buf, size_t n) {
  unsigned char *p = buf;
  size_t got = 0;
  while (got < n) {
    size_t want = n - got;
    if (want > CHUNK_MAX) want = CHUNK_MAX;
    int r = gzread(gz, p + got, (unsigned)want);
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (long long)got;
}

static void swap_bytes(unsigned char *p, size_t numel, size_t elsize) {
  for (size_t i = 0; i < numel; i++, p += elsize)
    for (size_t a = 0, b = elsize - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

static int host_is_big_endian(void) {
  const uint16_t one = 1;
  unsigned char c;
  memcpy(&c, &one, 1);
  return c == 0;
}

/* Formats the gzip/IO error after a failed gzread. */
static void read_error(gzFile gz, const char *path, const char *what, char *err, size_t errlen) {
  int errnum = 0;
  const char *m = gz_msg(gz, &errnum);
  if (errnum == Z_ERRNO) snprintf(err, errlen, OP ": %s: read error in %s: %s", path, what, strerror(errno));
  else snprintf(err, errlen, OP ": %s: corrupt gzip data in %s: %s", path, what, m);
}

int lt_idx_read(const char *path, lt_idx_data *out, char *err, size_t errlen) {
  char dummy[1];
  if (!err || errlen == 0) {
    err = dummy;
    errlen = sizeof dummy;
  }
  memset(out, 0, sizeof *out);
  if (!path || !*path) {
    snprintf(err, errlen, OP ": no file name given");
    return -1;
  }

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, OP ": %s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, OP ": %s: cannot stat: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, OP ": %s: is a directory, not an IDX file", path);
    close(fd);
    return -1;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    snprintf(err, errlen, OP ": %s: cannot open: out of memory", path);
    close(fd);
    return -1;
  }
  gzbuffer(gz, 1u << 20);

  unsigned char *data = NULL;
  unsigned char hdr[4 + 4 * LT_IDX_MAX_DIMS];
  long long got = gz_read_full(gz, hdr, 4);
  if (got < 0) {
    read_error(gz, path, "the header", err, errlen);
    goto fail;
  }
  if (got == 0) {
    snprintf(err, errlen, OP ": %s: file is empty (an IDX file starts with a 4-byte magic number)", path);
    goto fail;
  }
  if (got < 4) {
    snprintf(err, errlen, OP ": %s: truncated: header needs 4 bytes, got %lld", path, got);
    goto fail;
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    snprintf(err, errlen, OP ": %s: not an IDX file: bad magic bytes 0x%02X 0x%02X (expected 0x00 0x00)", path, hdr[0],
             hdr[1]);
    goto fail;
  }
  int type = hdr[2], ndims = hdr[3];
  size_t elsize = lt_idx_type_size(type);
  if (elsize == 0) {
    snprintf(err, errlen,
             OP ": %s: unsupported IDX type code 0x%02X (known: 0x08 ubyte, 0x09 sbyte, 0x0B short, "
                "0x0C int, 0x0D float, 0x0E double)",
             path, (unsigned)type);
    goto fail;
  }
  if (ndims < 1 || ndims > LT_IDX_MAX_DIMS) {
    snprintf(err, errlen, OP ": %s: bad number of dimensions %d (expected 1..%d)", path, ndims, LT_IDX_MAX_DIMS);
    goto fail;
  }
  size_t hdrlen = 4 + 4 * (size_t)ndims;
  got = gz_read_full(gz, hdr + 4, hdrlen - 4);
  if (got < 0) {
    read_error(gz, path, "the header", err, errlen);
    goto fail;
  }
  if ((size_t)got < hdrlen - 4) {
    snprintf(err, errlen, OP ": %s: truncated: header needs %zu bytes for %d dimensions, got %zu", path, hdrlen, ndims,
             4 + (size_t)got);
    goto fail;
  }
  size_t numel = 1;
  for (int i = 0; i < ndims; i++) {
    const unsigned char *b = hdr + 4 + 4 * i;
    uint32_t u = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
    if (u == 0 || u > INT32_MAX) {
      snprintf(err, errlen, OP ": %s: dimension %d of %d has size %lld (must be > 0)", path, i + 1, ndims,
               (long long)(int32_t)u);
      goto fail;
    }
    if (numel > SIZE_MAX / elsize / u) {
      snprintf(err, errlen, OP ": %s: data size overflows (dimension %d of %d is %u)", path, i + 1, ndims, u);
      goto fail;
    }
    out->dims[i] = u;
    numel *= u;
  }
  size_t nbytes = numel * elsize;

  /* A plain (uncompressed) file's size is known: check it before allocating anything. */
  if (gzdirect(gz) && S_ISREG(st.st_mode)) {
    unsigned long long have = (unsigned long long)st.st_size - hdrlen;
    if (have < nbytes) {
      snprintf(err, errlen, OP ": %s: truncated: expected %zu bytes of data, got %llu", path, nbytes, have);
      goto fail;
    }
  }

  /* Read the data in big chunks straight into the result, growing it only as data really arrives, so a
   * corrupt header that claims terabytes fails as "truncated", not as a giant allocation. */
  size_t cap = nbytes < FIRST_ALLOC_MAX ? nbytes : FIRST_ALLOC_MAX, have = 0;
  data = malloc(cap);
  if (!data) {
    snprintf(err, errlen, OP ": %s: out of memory allocating %zu bytes", path, cap);
    goto fail;
  }
  for (;;) {
    long long r = gz_read_full(gz, data + have, cap - have);
    if (r < 0) {
      read_error(gz, path, "the data", err, errlen);
      goto fail;
    }
    have += (size_t)r;
    if (have < cap || cap == nbytes) break;
    size_t ncap = cap > nbytes / 2 ? nbytes : cap * 2;
    unsigned char *nd = realloc(data, ncap);
    if (!nd) {
      snprintf(err, errlen, OP ": %s: out of memory allocating %zu bytes", path, ncap);
      goto fail;
    }
    data = nd;
    cap = ncap;
  }
  if (have < nbytes) {
    snprintf(err, errlen, OP ": %s: truncated: expected %zu bytes of data, got %zu", path, nbytes, have);
    goto fail;
  }

  /* Nothing may follow the data. */
  unsigned char extra[65536];
  unsigned long long trailing = 0;
  for (;;) {
    long long r = gz_read_full(gz, extra, sizeof extra);
    if (r < 0) {
      read_error(gz, path, "the data", err, errlen);
      goto fail;
    }
    if (r == 0) break;
    trailing += (unsigned long long)r;
  }
  if (trailing > 0) {
    snprintf(err, errlen, OP ": %s: trailing garbage: %llu bytes after the %zu bytes of data", path, trailing, nbytes);
    goto fail;
  }
  /* A gzip stream cut short reads as a short count with Z_BUF_ERROR; count checks above caught the data
   * case, this catches a stream cut inside its 8-byte trailer (CRC and length left unchecked). */
  int errnum = 0;
  const char *m = gz_msg(gz, &errnum);
  if (errnum != Z_OK) {
    snprintf(err, errlen, OP ": %s: corrupt gzip data: %s", path, m);
    goto fail;
  }
  if (gzclose(gz) != Z_OK) {
    snprintf(err, errlen, OP ": %s: corrupt gzip data (stream ends early or fails its check)", path);
    gz = NULL;
    goto fail;
  }

  if (elsize > 1 && !host_is_big_endian()) swap_bytes(data, numel, elsize);
  out->type = (lt_idx_type)type;
  out->ndims = ndims;
  out->elsize = elsize;
  out->numel = numel;
  out->nbytes = nbytes;
  out->data = data;
  return 0;

fail:
  free(data);
  if (gz) gzclose(gz);
  memset(out, 0, sizeof *out);
  return -1;
}
