/*
 * test_idx.c — the IDX reader (core/src/idx.c): plain and gzip files of every type code, every error
 * path with its message text, and the real Fashion-MNIST files when the Debian package is installed.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include "lt_idx.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static int npass, nfail;
static char tmpdir[64];

static void check(int cond, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s - ", cond ? "ok" : "not ok");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (cond) npass++;
  else nfail++;
}

/* rc must be -1 and err must equal (exact != 0) or contain expected. */
static void check_err(int rc, const char *err, const char *expected, int exact, const char *what) {
  int ok = rc == -1 && (exact ? strcmp(err, expected) == 0 : strstr(err, expected) != NULL);
  check(ok, "%s", what);
  if (!ok) printf("#   rc=%d\n#   got:      %s\n#   expected: %s%s\n", rc, err, exact ? "" : "... ", expected);
}

static const char *tpath(const char *name) {
  static char buf[64][256]; /* rotating: a returned path stays valid for 63 more calls */
  static int k;
  char *p = buf[k++ % 64];
  snprintf(p, 256, "%s/%s", tmpdir, name);
  return p;
}

static void write_bytes(const char *path, const void *p, size_t n, int gz) {
  if (gz) {
    gzFile g = gzopen(path, "wb");
    if (n) gzwrite(g, p, (unsigned)n);
    gzclose(g);
  } else {
    FILE *f = fopen(path, "wb");
    if (n) fwrite(p, 1, n, f);
    fclose(f);
  }
}

/* An IDX image: header + data (data given big-endian already) + extra trailing bytes. */
static size_t make_idx(unsigned char *out, int type, int ndims, const unsigned *dims, const void *data,
                       size_t nbytes, size_t trailing) {
  size_t n = 0;
  out[n++] = 0;
  out[n++] = 0;
  out[n++] = (unsigned char)type;
  out[n++] = (unsigned char)ndims;
  for (int i = 0; i < ndims; i++) {
    out[n++] = (unsigned char)(dims[i] >> 24);
    out[n++] = (unsigned char)(dims[i] >> 16);
    out[n++] = (unsigned char)(dims[i] >> 8);
    out[n++] = (unsigned char)dims[i];
  }
  memcpy(out + n, data, nbytes);
  n += nbytes;
  for (size_t i = 0; i < trailing; i++) out[n++] = 0xAB;
  return n;
}

static void be_store(unsigned char *p, const void *v, size_t size) {
  const unsigned char *s = v;
  const uint16_t one = 1;
  int little = *(const unsigned char *)&one == 1;
  for (size_t i = 0; i < size; i++) p[i] = little ? s[size - 1 - i] : s[i];
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_roundtrip_u8(int gz) {
  unsigned char data[2 * 3 * 4], file[256];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 1);
  unsigned dims[3] = {2, 3, 4};
  size_t n = make_idx(file, LT_IDX_U8, 3, dims, data, sizeof data, 0);
  const char *p = tpath(gz ? "u8.idx.gz" : "u8.idx");
  write_bytes(p, file, n, gz);
  lt_idx_data d;
  char err[512] = "";
  int rc = lt_idx_read(p, &d, err, sizeof err);
  check(rc == 0, "%s ubyte file reads (%s)", gz ? "gzip" : "plain", rc ? err : "no error");
  check(rc == 0 && d.type == LT_IDX_U8 && d.ndims == 3 && d.dims[0] == 2 && d.dims[1] == 3 && d.dims[2] == 4 &&
            d.elsize == 1 && d.numel == 24 && d.nbytes == 24,
        "%s ubyte: type, ndims, dims [2 x 3 x 4], sizes", gz ? "gzip" : "plain");
  check(rc == 0 && memcmp(d.data, data, sizeof data) == 0, "%s ubyte: data bytes", gz ? "gzip" : "plain");
  lt_idx_free(&d);
  lt_idx_free(&d);
  check(d.data == NULL, "lt_idx_free is idempotent");
}

static void test_types(int gz) {
  unsigned char file[256], be[64];
  unsigned dims[1] = {3};
  char err[512] = "";
  lt_idx_data d;
  const char *kind = gz ? "gzip" : "plain";

  int8_t s8[3] = {-128, -1, 127};
  size_t n = make_idx(file, LT_IDX_I8, 1, dims, s8, 3, 0);
  write_bytes(tpath("i8.idx"), file, n, gz);
  int rc = lt_idx_read(tpath("i8.idx"), &d, err, sizeof err);
  check(rc == 0 && d.type == LT_IDX_I8 && d.elsize == 1 && memcmp(d.data, s8, 3) == 0, "%s sbyte values", kind);
  lt_idx_free(&d);

  int16_t s16[3] = {-2, 300, -32768};
  for (int i = 0; i < 3; i++) be_store(be + 2 * i, &s16[i], 2);
  n = make_idx(file, LT_IDX_I16, 1, dims, be, 6, 0);
  write_bytes(tpath("i16.idx"), file, n, gz);
  rc = lt_idx_read(tpath("i16.idx"), &d, err, sizeof err);
  check(rc == 0 && d.type == LT_IDX_I16 && d.elsize == 2 && memcmp(d.data, s16, 6) == 0,
        "%s short values (big-endian -> host)", kind);
  lt_idx_free(&d);

  int32_t s32[3] = {-70000, 1, 2147483647};
  for (int i = 0; i < 3; i++) be_store(be + 4 * i, &s32[i], 4);
  n = make_idx(file, LT_IDX_I32, 1, dims, be, 12, 0);
  write_bytes(tpath("i32.idx"), file, n, gz);
  rc = lt_idx_read(tpath("i32.idx"), &d, err, sizeof err);
  check(rc == 0 && d.type == LT_IDX_I32 && d.elsize == 4 && memcmp(d.data, s32, 12) == 0, "%s int values", kind);
  lt_idx_free(&d);

  float f32[3] = {1.5f, -2.25f, 1e-30f};
  for (int i = 0; i < 3; i++) be_store(be + 4 * i, &f32[i], 4);
  n = make_idx(file, LT_IDX_F32, 1, dims, be, 12, 0);
  write_bytes(tpath("f32.idx"), file, n, gz);
  rc = lt_idx_read(tpath("f32.idx"), &d, err, sizeof err);
  check(rc == 0 && d.type == LT_IDX_F32 && memcmp(d.data, f32, 12) == 0, "%s float values", kind);
  lt_idx_free(&d);

  double f64[3] = {3.141592653589793, -0.0, 1e300};
  for (int i = 0; i < 3; i++) be_store(be + 8 * i, &f64[i], 8);
  n = make_idx(file, LT_IDX_F64, 1, dims, be, 24, 0);
  write_bytes(tpath("f64.idx"), file, n, gz);
  rc = lt_idx_read(tpath("f64.idx"), &d, err, sizeof err);
  check(rc == 0 && d.type == LT_IDX_F64 && d.elsize == 8 && memcmp(d.data, f64, 24) == 0, "%s double values",
        kind);
  lt_idx_free(&d);
}

static void test_errors(int gz) {
  unsigned char file[256], data[24] = {0};
  unsigned dims3[3] = {2, 3, 4};
  char err[512], want[512];
  lt_idx_data d;
  const char *kind = gz ? "gzip" : "plain";
  const char *p = tpath(gz ? "bad.idx.gz" : "bad.idx");

  size_t n = make_idx(file, LT_IDX_U8, 3, dims3, data, 24, 0);
  write_bytes(p, file, n - 4, gz);
  snprintf(want, sizeof want, "read_idx: %s: truncated: expected 24 bytes of data, got 20", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: truncated data" : "plain: truncated data");
  check(d.data == NULL && d.nbytes == 0, "%s: failed read leaves the output zeroed", kind);

  write_bytes(p, file, 10, gz);
  snprintf(want, sizeof want, "read_idx: %s: truncated: header needs 16 bytes for 3 dimensions, got 10", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: truncated header" : "plain: truncated header");

  write_bytes(p, file, 3, gz);
  snprintf(want, sizeof want, "read_idx: %s: truncated: header needs 4 bytes, got 3", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: 3-byte file" : "plain: 3-byte file");

  write_bytes(p, file, 0, gz);
  snprintf(want, sizeof want, "read_idx: %s: file is empty", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 0, gz ? "gzip: empty file" : "plain: empty file");

  n = make_idx(file, LT_IDX_U8, 3, dims3, data, 24, 3);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: trailing garbage: 3 bytes after the 24 bytes of data", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: trailing bytes" : "plain: trailing bytes");

  n = make_idx(file, LT_IDX_U8, 3, dims3, data, 24, 0);
  file[0] = 0x01;
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: not an IDX file: bad magic bytes 0x01 0x00 (expected 0x00 0x00)", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: wrong magic" : "plain: wrong magic");

  n = make_idx(file, 0x0A, 3, dims3, data, 24, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: unsupported IDX type code 0x0A", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 0, gz ? "gzip: bad type code" : "plain: bad type code");

  n = make_idx(file, LT_IDX_U8, 0, dims3, data, 24, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: bad number of dimensions 0 (expected 1..8)", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: 0 dims" : "plain: 0 dims");

  unsigned dims9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  n = make_idx(file, LT_IDX_U8, 9, dims9, data, 1, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: bad number of dimensions 9 (expected 1..8)", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: 9 dims" : "plain: 9 dims");

  unsigned dimsz[3] = {2, 0, 4};
  n = make_idx(file, LT_IDX_U8, 3, dimsz, data, 0, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: dimension 2 of 3 has size 0 (must be > 0)", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: zero dim" : "plain: zero dim");

  unsigned dimsneg[1] = {0x80000000u};
  n = make_idx(file, LT_IDX_U8, 1, dimsneg, data, 0, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: dimension 1 of 1 has size -2147483648 (must be > 0)", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, gz ? "gzip: negative dim" : "plain: negative dim");

  /* A header claiming ~4.6e18 bytes must fail as truncated, without trying to allocate that much. */
  unsigned dimsbig[2] = {0x7FFFFFFF, 0x7FFFFFFF};
  n = make_idx(file, LT_IDX_U8, 2, dimsbig, data, 24, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: truncated: expected 4611686014132420609 bytes of data, got 24", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1,
            gz ? "gzip: header claiming 4.6e18 bytes is truncated, no huge allocation"
               : "plain: header claiming 4.6e18 bytes is truncated, no huge allocation");

  unsigned dimsover[3] = {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF};
  n = make_idx(file, LT_IDX_F64, 3, dimsover, data, 24, 0);
  write_bytes(p, file, n, gz);
  snprintf(want, sizeof want, "read_idx: %s: data size overflows", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 0, gz ? "gzip: size overflow" : "plain: size overflow");
}

static void test_gzip_damage(void) {
  /* Data that does not compress, so the compressed stream is long enough to cut and to damage. */
  enum { N = 20000 };
  unsigned char *file = malloc(N + 64), *data = malloc(N);
  uint32_t x = 12345;
  for (int i = 0; i < N; i++) {
    x = x * 1664525u + 1013904223u;
    data[i] = (unsigned char)(x >> 24);
  }
  unsigned dims[2] = {100, 200};
  size_t n = make_idx(file, LT_IDX_U8, 2, dims, data, N, 0);
  const char *p = tpath("dmg.idx.gz");
  write_bytes(p, file, n, 1);
  FILE *f = fopen(p, "rb");
  unsigned char *gzb = malloc(N * 2);
  size_t gzlen = fread(gzb, 1, N * 2, f);
  fclose(f);

  char err[512], want[512];
  lt_idx_data d;
  int rc = lt_idx_read(p, &d, err, sizeof err);
  check(rc == 0 && d.nbytes == N && memcmp(d.data, data, N) == 0, "gzip: 20000 incompressible bytes read back");
  lt_idx_free(&d);

  write_bytes(tpath("cut.idx"), gzb, gzlen / 2, 0); /* raw bytes: a gzip file cut in half */
  rc = lt_idx_read(tpath("cut.idx"), &d, err, sizeof err);
  snprintf(want, sizeof want, "read_idx: %s: truncated: expected 20000 bytes of data, got ", tpath("cut.idx"));
  check_err(rc, err, want, 0, "gzip file cut in half: truncated, with the byte counts");

  write_bytes(tpath("cut.idx"), gzb, gzlen - 4, 0); /* data complete, trailer (CRC, length) cut */
  rc = lt_idx_read(tpath("cut.idx"), &d, err, sizeof err);
  snprintf(want, sizeof want, "read_idx: %s: corrupt gzip data", tpath("cut.idx"));
  check_err(rc, err, want, 0, "gzip file missing its trailer: corrupt gzip data");

  gzb[gzlen / 2] ^= 0x55; /* damage inside the deflate stream */
  write_bytes(tpath("cut.idx"), gzb, gzlen, 0);
  rc = lt_idx_read(tpath("cut.idx"), &d, err, sizeof err);
  check_err(rc, err, want, 0, "gzip file with a damaged byte: corrupt gzip data");
  if (rc == 0) lt_idx_free(&d);
  free(gzb);
  free(file);
  free(data);
}

static void test_missing(void) {
  char err[512], want[512];
  lt_idx_data d;
  const char *p = tpath("no-such-file-idx3-ubyte.gz");
  snprintf(want, sizeof want, "read_idx: %s: cannot open: No such file or directory", p);
  check_err(lt_idx_read(p, &d, err, sizeof err), err, want, 1, "missing file: names the path and the reason");
  snprintf(want, sizeof want, "read_idx: %s: is a directory, not an IDX file", tmpdir);
  check_err(lt_idx_read(tmpdir, &d, err, sizeof err), err, want, 1, "directory: clear error");
  int rc = lt_idx_read(p, &d, NULL, 0);
  check(rc == -1, "a NULL error buffer is allowed");
}

static void test_fashion_mnist(void) {
  const char *root = "/usr/share/datasets/fashion-mnist";
  char img[256], lab[256], err[512];
  snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", root);
  snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", root);
  if (access(img, R_OK) != 0 || access(lab, R_OK) != 0) {
    printf("# skip: Fashion-MNIST not installed at %s (Debian package dataset-fashion-mnist)\n", root);
    return;
  }
  lt_idx_data d, l;
  double t0 = now();
  int rc = lt_idx_read(img, &d, err, sizeof err);
  double dt = now() - t0;
  check(rc == 0, "Fashion-MNIST train images read (%s)", rc ? err : "no error");
  check(rc == 0 && d.type == LT_IDX_U8 && d.ndims == 3 && d.dims[0] == 60000 && d.dims[1] == 28 &&
            d.dims[2] == 28 && d.nbytes == 47040000,
        "Fashion-MNIST train images: ubyte [60000 x 28 x 28]");
  /* speed is measured, not asserted (bench/ holds speed checks): report it */
  printf("# Fashion-MNIST train images (47 MB) loaded in %.3f s\n", dt);
  if (rc == 0) {
    unsigned long long sum = 0;
    int maxv = 0;
    const unsigned char *p = d.data;
    for (size_t i = 0; i < d.nbytes; i++) {
      sum += p[i];
      if (p[i] > maxv) maxv = p[i];
    }
    check(maxv == 255 && sum > 0, "Fashion-MNIST images: pixel values span up to 255 (mean %.2f)",
          (double)sum / (double)d.nbytes);
  }
  lt_idx_free(&d);

  rc = lt_idx_read(lab, &l, err, sizeof err);
  check(rc == 0 && l.type == LT_IDX_U8 && l.ndims == 1 && l.dims[0] == 60000, "Fashion-MNIST train labels: ubyte [60000]");
  if (rc == 0) {
    int counts[256] = {0}, bad = 0;
    const unsigned char *p = l.data;
    for (size_t i = 0; i < l.nbytes; i++) counts[p[i]]++;
    for (int v = 10; v < 256; v++) bad += counts[v];
    int balanced = 1;
    for (int v = 0; v < 10; v++) balanced &= counts[v] == 6000;
    check(bad == 0, "Fashion-MNIST labels: all values in 0..9");
    check(balanced, "Fashion-MNIST labels: 6000 of each class");
  }
  lt_idx_free(&l);

  snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte.gz", root);
  snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte.gz", root);
  rc = lt_idx_read(img, &d, err, sizeof err);
  check(rc == 0 && d.ndims == 3 && d.dims[0] == 10000 && d.dims[1] == 28 && d.dims[2] == 28,
        "Fashion-MNIST test images: [10000 x 28 x 28]");
  lt_idx_free(&d);
  rc = lt_idx_read(lab, &l, err, sizeof err);
  check(rc == 0 && l.ndims == 1 && l.dims[0] == 10000, "Fashion-MNIST test labels: [10000]");
  lt_idx_free(&l);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lt_test_idx_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("not ok - mkdtemp: %s\n0 passed, 1 failed\n", strerror(errno));
    return 1;
  }
  check(lt_idx_type_size(LT_IDX_F64) == 8 && lt_idx_type_size(0x0A) == 0 &&
            strcmp(lt_idx_type_name(LT_IDX_I16), "short") == 0 && lt_idx_type_name(0) == NULL,
        "type size and name tables");
  for (int gz = 0; gz <= 1; gz++) {
    test_roundtrip_u8(gz);
    test_types(gz);
    test_errors(gz);
  }
  test_gzip_damage();
  test_missing();
  test_fashion_mnist();
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
