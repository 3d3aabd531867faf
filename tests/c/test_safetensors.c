/*
 * test_safetensors.c — checkpoint files (core/src/safetensors.c, core/src/fileio.c): round trip, JSON
 * escaping, every truncation length, every single-byte corruption, hand-made malformed headers with their
 * message texts, writer argument checks, atomic-write failure paths, SIGKILL during writes, and an
 * independent Python reader (tests/safetensors_reader.py) when /usr/bin/python3 exists.
 * Prints "ok - ..." / "not ok - ..." per check and a final "N passed, M failed".
 */
#include "lt_fileio.h"
#include "lt_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int npass, nfail;
static char tmpdir[64];

static void check(int cond, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s - ", cond ? "ok" : "not ok");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  if (cond) npass++;
  else nfail++;
}

/* rc must be -1 and err must equal (exact) or contain expected. */
static void check_err(int rc, const char *err, const char *expected, int exact, const char *what) {
  int ok = rc == -1 && (exact ? strcmp(err, expected) == 0 : strstr(err, expected) != NULL);
  check(ok, "%s", what);
  if (!ok) printf("#   rc=%d\n#   got:      %s\n#   expected: %s%s\n", rc, err, exact ? "" : "... ", expected);
}

/* Whether err is head + "<thread>.<16 hex digits>" + tail: a message that names an atomic write's temporary
 * file "<path>.tmp.<pid>.<thread>.<random>" (core/src/fileio.c); head ends with "<path>.tmp.<pid>.". */
static int is_temp_message(const char *err, const char *head, const char *tail) {
  size_t hl = strlen(head), tl = strlen(tail), el = strlen(err);
  if (el < hl + tl || strncmp(err, head, hl) != 0 || strcmp(err + el - tl, tail) != 0) return 0;
  const char *p = err + hl, *end = err + el - tl;
  if (p >= end || *p < '1' || *p > '9') return 0;
  while (p < end && *p >= '0' && *p <= '9') p++;
  if (p >= end || *p++ != '.') return 0;
  int hex = 0;
  for (; p < end && strchr("0123456789abcdef", *p); p++) hex++;
  return p == end && hex == 16;
}

static void check_temp_err(int rc, const char *err, const char *head, const char *tail, const char *what) {
  int ok = rc == -1 && is_temp_message(err, head, tail);
  check(ok, "%s", what);
  if (!ok) printf("#   rc=%d\n#   got:      %s\n#   expected: %s<thread>.<16 hex>%s\n", rc, err, head, tail);
}

static const char *tpath(const char *name) {
  static char buf[64][256]; /* rotating: a returned path stays valid for 63 more calls */
  static int k;
  char *p = buf[k++ % 64];
  snprintf(p, 256, "%s/%s", tmpdir, name);
  return p;
}

static void write_raw(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

static unsigned char *slurp(const char *path, size_t *len) {
  void *buf;
  char err[512];
  if (lt_file_read_all(NULL, path, &buf, len, err, sizeof err) != 0) return NULL;
  return buf;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

/* Number of directory entries whose name contains ".tmp." */
static int count_tmp_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".tmp.")) n++;
  if (d) closedir(d);
  return n;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- a sample checkpoint ---- */

#define WEIRD_NAME "we\"ird\\ name\n\t\x01 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"
#define LUTRA_DOC "{\"epoch\":3,\"global_step\":1200,\"note\":\"caf\\u00e9 \\\"q\\\"\"}"
#define NOTE_VAL "line1\nline2\t\"quoted\" back\\slash \x1f ctl \xc3\xa9 \xf0\x9f\xa6\xa6"

typedef struct sample {
  float w[12], b[4];
  int64_t step, idx[5];
  double d[2];
  int64_t wshape[2], bshape[1], idxshape[1], eshape[2], dshape[1];
  lt_st_tensor t[6];
  lt_st_meta m[2];
} sample;

static void sample_init(sample *s) {
  for (int i = 0; i < 12; i++) s->w[i] = (float)i * 0.5f - 1.25f;
  for (int i = 0; i < 4; i++) s->b[i] = 1.0f / (float)(i + 3);
  s->step = 1200;
  for (int i = 0; i < 5; i++) s->idx[i] = (int64_t)1 << (10 * i);
  s->d[0] = 3.141592653589793;
  s->d[1] = -1e-300;
  s->wshape[0] = 3, s->wshape[1] = 4;
  s->bshape[0] = 4;
  s->idxshape[0] = 5;
  s->eshape[0] = 0, s->eshape[1] = 3;
  s->dshape[0] = 2;
  s->t[0] = (lt_st_tensor){"state_dict.fc.weight", "F32", 2, s->wshape, s->w, sizeof s->w};
  s->t[1] = (lt_st_tensor){"state_dict.fc.bias", "F32", 1, s->bshape, s->b, sizeof s->b};
  s->t[2] = (lt_st_tensor){"optimizer_states.1.step", "I64", 0, NULL, &s->step, sizeof s->step};
  s->t[3] = (lt_st_tensor){WEIRD_NAME, "I64", 1, s->idxshape, s->idx, sizeof s->idx};
  s->t[4] = (lt_st_tensor){"empty", "F32", 2, s->eshape, NULL, 0};
  s->t[5] = (lt_st_tensor){"doubles", "F64", 1, s->dshape, s->d, sizeof s->d};
  s->m[0] = (lt_st_meta){"lutra", LUTRA_DOC};
  s->m[1] = (lt_st_meta){"note \"k\"", NOTE_VAL};
}

static double tensor_sum(const lt_st_tensor *t) {
  double s = 0;
  size_t es = lt_st_dtype_size(t->dtype);
  for (size_t i = 0; i < t->nbytes / es; i++) {
    if (strcmp(t->dtype, "F32") == 0) {
      float v;
      memcpy(&v, (const char *)t->data + 4 * i, 4);
      s += (double)v;
    } else if (strcmp(t->dtype, "F64") == 0) {
      double v;
      memcpy(&v, (const char *)t->data + 8 * i, 8);
      s += v;
    } else if (strcmp(t->dtype, "I64") == 0) {
      int64_t v;
      memcpy(&v, (const char *)t->data + 8 * i, 8);
      s += (double)v;
    }
  }
  return s;
}

static void test_roundtrip(void) {
  sample s;
  sample_init(&s);
  char err[1024] = "";
  const char *p = tpath("rt.safetensors");
  int rc = lt_st_save(p, s.t, 6, s.m, 2, err, sizeof err);
  check(rc == 0, "save a 6-tensor checkpoint (%s)", rc ? err : "no error");
  check(count_tmp_files(tmpdir) == 0, "no temporary file left after a save");

  size_t len;
  unsigned char *raw = slurp(p, &len);
  uint64_t n = 0;
  for (int i = 7; raw && i >= 0; i--) n = (n << 8) | raw[i];
  check(raw && n % 8 == 0 && raw[8] == '{' && raw[8 + n - 1] != 0 && 8 + n <= len,
        "layout: little-endian header length, multiple of 8, header starts with '{'");
  free(raw);

  lt_st_file f;
  rc = lt_st_load(p, &f, err, sizeof err);
  check(rc == 0, "load it back (%s)", rc ? err : "no error");
  if (rc != 0) return;
  check(f.ntensors == 6 && f.checksum_verified == 1, "6 tensors, checksum present and verified");
  int same = 1;
  for (int i = 0; i < 6 && f.ntensors == 6; i++) {
    const lt_st_tensor *a = &s.t[i], *b = &f.tensors[i];
    same &= strcmp(a->name, b->name) == 0 && strcmp(a->dtype, b->dtype) == 0 && a->ndim == b->ndim &&
            a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
    for (int d = 0; d < a->ndim && same; d++) same &= a->shape[d] == b->shape[d];
  }
  check(same, "names (with quotes, backslash, control chars, UTF-8), dtypes, shapes, bytes survive, in order");
  check(lt_st_find(&f, WEIRD_NAME) == &f.tensors[3] && lt_st_find(&f, "nope") == NULL, "lt_st_find");
  const char *doc = lt_st_meta_get(&f, "lutra"), *note = lt_st_meta_get(&f, "note \"k\"");
  const char *ck = lt_st_meta_get(&f, LT_ST_CHECKSUM_KEY);
  check(doc && strcmp(doc, LUTRA_DOC) == 0 && note && strcmp(note, NOTE_VAL) == 0,
        "metadata values survive (a JSON document, control chars, UTF-8)");
  check(f.nmeta == 4 && ck && strncmp(ck, "crc32:", 6) == 0 && strlen(ck) == 14 &&
            strcmp(lt_st_meta_get(&f, "format"), "lutra") == 0,
        "__metadata__ holds format = lutra and lutra_checksum = crc32:<8 hex>");
  lt_st_free(&f);
  lt_st_free(&f);
  check(f.tensors == NULL && f.buf == NULL, "lt_st_free is idempotent");

  /* Overwrite with different content: the new file replaces the old. */
  s.w[0] = 42.0f;
  rc = lt_st_save(p, s.t, 2, NULL, 0, err, sizeof err);
  rc |= lt_st_load(p, &f, err, sizeof err);
  check(rc == 0 && f.ntensors == 2 && f.nmeta == 2 && ((const float *)s.w)[0] == 42.0f &&
            memcmp(f.tensors[0].data, s.w, sizeof s.w) == 0,
        "overwrite an existing checkpoint (no metadata given: only format and lutra_checksum)");
  lt_st_free(&f);

  rc = lt_st_save(tpath("none.safetensors"), NULL, 0, NULL, 0, err, sizeof err);
  rc |= lt_st_load(tpath("none.safetensors"), &f, err, sizeof err);
  check(rc == 0 && f.ntensors == 0, "a checkpoint with no tensors round-trips");
  lt_st_free(&f);
}

/* ---- the independent reader ---- */

static const char *find_reader(void) {
  static char buf[1024];
  const char *cands[] = {"tests/safetensors_reader.py", "../tests/safetensors_reader.py",
                         "../../tests/safetensors_reader.py", "../../../tests/safetensors_reader.py"};
  /* Next to this source file, when compiled with a path that still resolves. */
  const char *src = __FILE__, *slash = strrchr(src, '/');
  if (slash) {
    snprintf(buf, sizeof buf, "%.*s/../safetensors_reader.py", (int)(slash - src), src);
    if (access(buf, R_OK) == 0) return buf;
  }
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
    if (access(cands[i], R_OK) == 0) return cands[i];
  return NULL;
}

/* Runs the Python reader; returns its exit status (-1 when it could not run) and its stdout. */
static int run_reader(const char *reader, const char *flags, const char *file, char *out, size_t outlen) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' %s '%s' 2>/dev/null", reader, flags, file);
  FILE *pp = popen(cmd, "r");
  if (!pp) return -1;
  size_t n = fread(out, 1, outlen - 1, pp);
  out[n] = 0;
  int st = pclose(pp);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_python_reader(void) {
  const char *reader = find_reader();
  if (access("/usr/bin/python3", X_OK) != 0 || !reader) {
    printf("# skip: independent Python reader (%s)\n", reader ? "no /usr/bin/python3" : "tests/safetensors_reader.py not found");
    return;
  }
  sample s;
  sample_init(&s);
  char err[1024];
  const char *p = tpath("py.safetensors");
  lt_st_save(p, s.t, 6, s.m, 2, err, sizeof err);
  static char out[65536];
  int st = run_reader(reader, "--json --verify-checksum", p, out, sizeof out);
  check(st == 0, "Python reader (json + struct only) accepts the file and verifies the checksum");
  int lines = 0, match = 0;
  char *save = NULL;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    if (!o || lines >= 6) {
      json_decref(o);
      continue;
    }
    const lt_st_tensor *t = &s.t[lines];
    json_t *shape = json_object_get(o, "shape");
    int ok = strcmp(json_string_value(json_object_get(o, "name")), t->name) == 0 &&
             strcmp(json_string_value(json_object_get(o, "dtype")), t->dtype) == 0 &&
             json_array_size(shape) == (size_t)t->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = json_integer_value(json_array_get(shape, (size_t)d)) == t->shape[d];
    double py = json_number_value(json_object_get(o, "sum")), c = tensor_sum(t);
    ok = ok && fabs(py - c) <= 1e-12 * fmax(1.0, fabs(c));
    if (!ok) printf("#   tensor %d: python says %s, C sum %.17g\n", lines, line, c);
    match += ok;
    json_decref(o);
  }
  check(lines == 6 && match == 6, "Python reader: same names, dtypes, shapes and sums as C (%d of 6)", match);

  size_t len;
  unsigned char *raw = slurp(p, &len);
  write_raw(tpath("py_cut.safetensors"), raw, len - 3);
  check(run_reader(reader, "", tpath("py_cut.safetensors"), out, sizeof out) == 1,
        "Python reader rejects a truncated file");
  raw[len - 1] ^= 0x40;
  write_raw(tpath("py_flip.safetensors"), raw, len);
  check(run_reader(reader, "", tpath("py_flip.safetensors"), out, sizeof out) == 0 &&
            run_reader(reader, "--verify-checksum", tpath("py_flip.safetensors"), out, sizeof out) == 1,
        "Python reader: a flipped data byte passes the structure check, fails --verify-checksum");
  free(raw);
}

/* ---- corruption: every truncation, every byte flip ---- */

static void test_truncations_and_flips(void) {
  sample s;
  sample_init(&s);
  char err[1024], prefix[300], p[256];
  snprintf(p, sizeof p, "%s", tpath("tr.safetensors")); /* tpath's buffers rotate: keep a copy */
  lt_st_save(p, s.t, 6, s.m, 2, err, sizeof err);
  size_t len;
  unsigned char *raw = slurp(p, &len);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | raw[i];
  size_t dstart = 8 + (size_t)hlen;
  snprintf(prefix, sizeof prefix, "load: %s: ", p);

  /* Each prefix of the file, in a buffer of exactly that size (so ASan sees any overread). */
  int bad[3] = {0}, total[3] = {0};
  const char *want[3] = {"file too short", "truncated: header length", "run past the end of the data buffer"};
  for (size_t L = 0; L < len; L++) {
    int region = L < 8 ? 0 : L < dstart ? 1 : 2;
    unsigned char *cut = malloc(L ? L : 1);
    memcpy(cut, raw, L);
    lt_st_file f;
    int rc = lt_st_load_mem(p, cut, L, &f, err, sizeof err);
    total[region]++;
    if (rc != -1 || strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want[region])) {
      if (bad[region]++ < 3) printf("#   length %zu: rc=%d %s\n", L, rc, err);
      if (rc == 0) lt_st_free(&f);
    }
    free(cut);
  }
  check(bad[0] == 0, "all %d truncations inside the length prefix: '%s'", total[0], want[0]);
  check(bad[1] == 0, "all %d truncations inside the header: '%s'", total[1], want[1]);
  check(bad[2] == 0, "all %d truncations inside the data: '%s'", total[2], want[2]);

  /* The same through real files and lt_st_load. */
  size_t cuts[4] = {5, 8 + (size_t)hlen / 2, dstart + 3, len - 1};
  int okf = 0;
  for (int i = 0; i < 4; i++) {
    write_raw(tpath("cut.safetensors"), raw, cuts[i]);
    lt_st_file f;
    int rc = lt_st_load(tpath("cut.safetensors"), &f, err, sizeof err);
    okf += rc == -1 && strstr(err, want[i == 0 ? 0 : i == 1 ? 1 : 2]) != NULL;
    if (rc == 0) lt_st_free(&f);
  }
  check(okf == 4, "truncated files on disk: lt_st_load gives the same errors (%d of 4)", okf);
  char msg[2048];
  write_raw(tpath("cut.safetensors"), raw, 3);
  lt_st_file f;
  snprintf(msg, sizeof msg,
           "load: %s: file too short (3 bytes): a safetensors file starts with an 8-byte header length",
           tpath("cut.safetensors"));
  check_err(lt_st_load(tpath("cut.safetensors"), &f, err, sizeof err), err, msg, 1, "3-byte file: exact message");

  /* Every data byte flipped: checksum mismatch. */
  int dbad = 0;
  unsigned char *copy = malloc(len);
  for (size_t i = dstart; i < len; i++) {
    memcpy(copy, raw, len);
    copy[i] ^= 0x01;
    int rc = lt_st_load_mem(p, copy, len, &f, err, sizeof err);
    if (rc != -1 || !strstr(err, "checksum mismatch: the file says crc32:")) {
      if (dbad++ < 3) printf("#   data byte %zu: rc=%d %s\n", i, rc, err);
      if (rc == 0) lt_st_free(&f);
    }
  }
  check(dbad == 0, "each of the %zu data bytes flipped: 'checksum mismatch'", len - dstart);

  /* Every byte of the length prefix and header flipped three ways: always an error, never a crash. */
  int hbad = 0, njson = 0, nsum = 0, nother = 0;
  unsigned char masks[3] = {0x01, 0x20, 0x80};
  for (size_t i = 0; i < dstart; i++)
    for (int m = 0; m < 3; m++) {
      memcpy(copy, raw, len);
      copy[i] ^= masks[m];
      int rc = lt_st_load_mem(p, copy, len, &f, err, sizeof err);
      if (rc != -1) {
        if (hbad++ < 3)
          printf("#   header byte %zu ^ 0x%02x loaded without error: ...%.24s...\n", i, masks[m],
                 (const char *)copy + (i > 12 ? i - 12 : 0));
        lt_st_free(&f);
        continue;
      }
      if (strstr(err, "not valid JSON")) njson++;
      else if (strstr(err, "checksum")) nsum++;
      else nother++;
    }
  check(hbad == 0, "each of the %zu prefix+header bytes flipped (3 ways): an error every time", dstart);
  printf("#   header flips: %d JSON errors, %d validation errors, %d checksum errors\n", njson, nother, nsum);

  /* Random damage: 1-8 bytes set to random values anywhere, sometimes also cut short. */
  int rbad = 0;
  srand(7);
  for (int it = 0; it < 3000; it++) {
    size_t L = rand() % 4 ? len : (size_t)rand() % len;
    unsigned char *cut = malloc(L ? L : 1);
    memcpy(cut, raw, L);
    for (int k = rand() % 8 + 1; k > 0 && L > 0; k--) cut[(size_t)rand() % L] = (unsigned char)rand();
    int rc = lt_st_load_mem(p, cut, L, &f, err, sizeof err);
    if (rc == 0) {
      if (L != len || memcmp(cut, raw, len) != 0) {
        if (rbad++ < 3) printf("#   random damage %d (length %zu of %zu) loaded without error\n", it, L, len);
      }
      lt_st_free(&f);
    } else if (strncmp(err, prefix, strlen(prefix)) != 0) {
      if (rbad++ < 3) printf("#   random damage %d: %s\n", it, err);
    }
    free(cut);
  }
  check(rbad == 0, "3000 random damages (1-8 random bytes, some cut short): each an error naming the file");

  /* Specific header corruptions and their messages. */
  memcpy(copy, raw, len);
  char *dt = memmem(copy + 8, hlen, "\"F64\"", 5);
  dt[3] = '5';
  snprintf(msg, sizeof msg, "load: %s: tensor 'doubles': unknown dtype 'F65'", p);
  check_err(lt_st_load_mem(p, copy, len, &f, err, sizeof err), err, msg, 1, "header flip F64 -> F65: unknown dtype");
  memcpy(copy, raw, len);
  copy[8] = '[';
  snprintf(msg, sizeof msg, "load: %s: header is not valid JSON: ", p);
  check_err(lt_st_load_mem(p, copy, len, &f, err, sizeof err), err, msg, 0, "header flip '{' -> '[': not valid JSON");
  memcpy(copy, raw, len);
  char *nm = memmem(copy + 8, hlen, "state_dict.fc.bias", 18);
  nm[0] = 'S'; /* still valid, still consistent: only the checksum sees it */
  snprintf(msg, sizeof msg, "load: %s: checksum mismatch", p);
  check_err(lt_st_load_mem(p, copy, len, &f, err, sizeof err), err, msg, 0,
            "renamed tensor in the header (valid JSON, consistent): checksum mismatch");
  memcpy(copy, raw, len);
  char *key = memmem(copy + 8, hlen, "\"lutra_checksum\"", 16);
  key[1] = 'm';
  snprintf(msg, sizeof msg, "load: %s: a lutra file (format \"lutra\") without lutra_checksum: the header is damaged", p);
  check_err(lt_st_load_mem(p, copy, len, &f, err, sizeof err), err, msg, 1,
            "header flip lutra_checksum -> mutra_checksum: a lutra file without its checksum");
  memcpy(copy, raw, len);
  copy[7] = 0x7f;
  uint64_t absurd = 0x7f00000000000000ull | hlen;
  snprintf(msg, sizeof msg, "load: %s: header length %llu is absurd (limit 100000000)", p, (unsigned long long)absurd);
  check_err(lt_st_load_mem(p, copy, len, &f, err, sizeof err), err, msg, 0, "huge header length: absurd");
  free(copy);
  free(raw);
}

/* ---- hand-made headers (like files from other tools: no checksum) ---- */

static int load_hdr(const char *hdr, const void *data, size_t dlen, lt_st_file *f, char *err, size_t errlen) {
  size_t hl = strlen(hdr), len = 8 + hl + dlen;
  unsigned char *buf = malloc(len);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, hdr, hl);
  if (dlen) memcpy(buf + 8 + hl, data, dlen);
  int rc = lt_st_load_mem("raw.safetensors", buf, len, f, err, errlen);
  if (rc == 0) lt_st_free(f);
  free(buf);
  return rc;
}

static void test_headers(void) {
  char err[1024];
  lt_st_file f;
  unsigned char data[64];
  for (int i = 0; i < 64; i++) data[i] = (unsigned char)i;

  /* A foreign file: other key order, spaces, no checksum. */
  const char *foreign = "{ \"b\": {\"data_offsets\": [8, 16], \"shape\": [2], \"dtype\": \"F32\"},"
                        "  \"a\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]},"
                        "  \"__metadata__\": {\"format\": \"pt\"} }   ";
  size_t hl = strlen(foreign);
  unsigned char *buf = malloc(8 + hl + 16);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, foreign, hl);
  memcpy(buf + 8 + hl, data, 16);
  int rc = lt_st_load_mem("foreign", buf, 8 + hl + 16, &f, err, sizeof err);
  check(rc == 0 && f.ntensors == 2 && strcmp(f.tensors[0].name, "a") == 0 && f.tensors[1].data == buf + 8 + hl + 8 &&
            f.checksum_verified == 0 && strcmp(lt_st_meta_get(&f, "format"), "pt") == 0,
        "a file from another writer (no checksum, other order) loads; entries sorted by offset (%s)",
        rc ? err : "no error");
  if (rc == 0) lt_st_free(&f);
  free(buf);

  check(load_hdr("{}", NULL, 0, &f, err, sizeof err) == 0, "header {} with no data: an empty file of tensors");

  struct {
    const char *hdr;
    size_t dlen;
    const char *want;
    const char *what;
  } cases[] = {
    {"", 0, "header is not valid JSON: ", "empty header"},
    {"{\"a\":", 0, "header is not valid JSON: ", "cut JSON"},
    {"{\"a\":{}} x", 0, "header is not valid JSON: ", "garbage after the JSON"},
    {"[]", 0, "header is not a JSON object", "header is an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
     "\"data_offsets\":[4,8]}}", 8, "header is not valid JSON: duplicate object key", "duplicate tensor name"},
    {"{\"a\":[1]}", 0, "tensor 'a': entry is not a JSON object", "entry not an object"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing field 'dtype'", "missing dtype"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing field 'shape'", "missing shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': missing field 'data_offsets'", "missing data_offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "tensor 'a': unknown field 'x'",
     "unknown field"},
    {"{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': unknown dtype 'F31'",
     "unknown dtype"},
    {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': dtype is not a string",
     "dtype not a string"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,-1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape[2] is not a non-negative integer", "negative size in shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape[1] is not a non-negative integer", "real number in shape"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4, "tensor 'a': shape is not an array",
     "shape not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
     "tensor 'a': data_offsets is not [begin, end] (non-negative integers)", "one offset"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4,
     "tensor 'a': data_offsets is not [begin, end]", "negative offset"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8,
     "tensor 'a': data_offsets [8, 4] end before they begin", "reversed offsets"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12,
     "tensor 'a': shape and dtype F32 need 8 bytes, data_offsets [0, 12] hold 12", "size mismatch"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape and dtype F32 need more than", "shape product overflows"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
     "\"data_offsets\":[4,12]}}", 12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap", "overlapping tensors"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
     "\"data_offsets\":[8,12]}}", 12, "data bytes [4, 8) before tensor 'b' belong to no tensor", "gap between tensors"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
     "data bytes [0, 4) before tensor 'a' belong to no tensor", "gap at the start"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
     "tensor 'a': data_offsets [0, 16] run past the end of the data buffer (8 bytes): the file is truncated or corrupt",
     "offsets out of range"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
     "data bytes [4, 8) at the end of the file belong to no tensor", "data not covered"},
    {"{\"__metadata__\":[]}", 0, "__metadata__ is not a JSON object", "__metadata__ not an object"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value of 'k' is not a string", "metadata value not a string"},
    {"{\"__metadata__\":{\"lutra_checksum\":\"crc32:xyz\"}}", 0,
     "malformed lutra_checksum 'crc32:xyz' (expected crc32:<8 hex digits>)", "malformed checksum"},
    {"{\"__metadata__\":{\"lutra_checksum\": \"crc32:00000000\"}}", 0,
     "lutra_checksum is not in the layout lutra writes: cannot verify it", "checksum in a foreign layout"},
    {"{\"__metadata__\":{\"lutra_checksum\":\"crc32:00000000\"}}", 0, "checksum mismatch: the file says crc32:00000000",
     "wrong checksum"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"n\":NaN}", 4, "header is not valid JSON",
     "NaN in the header"},
    {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "header is not valid JSON",
     "NUL in a name"},
    {"{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "header is not valid JSON",
     "invalid UTF-8 in a name"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char want[1024];
    snprintf(want, sizeof want, "load: raw.safetensors: %s", cases[i].want);
    int r = load_hdr(cases[i].hdr, data, cases[i].dlen, &f, err, sizeof err);
    char what[256];
    snprintf(what, sizeof what, "malformed header: %s -> '%s'", cases[i].what, cases[i].want);
    check_err(r, err, want, 0, what);
  }

  /* Zero-size tensors at a boundary are fine. */
  check(load_hdr("{\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 data, 4, &f, err, sizeof err) == 0,
        "a zero-size tensor between others is accepted");
}

/* ---- writer argument checks ---- */

static void test_writer_errors(void) {
  sample s;
  sample_init(&s);
  char err[1024], want[1024];
  const char *p = tpath("w.safetensors");
  lt_st_tensor t[2] = {s.t[0], s.t[1]};
  lt_st_meta m[2] = {s.m[0], s.m[1]};

#define WCASE(what_, expect_)                                                      \
  do {                                                                              \
    snprintf(want, sizeof want, "save: %s: %s", p, expect_);                        \
    check_err(lt_st_save(p, t, 2, m, 2, err, sizeof err), err, want, 1, what_);     \
    t[0] = s.t[0], t[1] = s.t[1], m[0] = s.m[0], m[1] = s.m[1];                     \
  } while (0)

  t[1].name = t[0].name;
  WCASE("writer: duplicate tensor name", "two tensors are named 'state_dict.fc.weight'");
  t[1].name = "__metadata__";
  WCASE("writer: tensor named __metadata__", "tensor #2: the name \"__metadata__\" is reserved");
  t[0].dtype = "F31";
  WCASE("writer: unknown dtype", "tensor 'state_dict.fc.weight': unknown dtype 'F31'");
  t[0].nbytes = 44;
  WCASE("writer: nbytes does not match shape",
        "tensor 'state_dict.fc.weight': 44 bytes of data do not match shape and dtype F32 (12 elements of 4 bytes)");
  t[0].data = NULL;
  WCASE("writer: NULL data", "tensor 'state_dict.fc.weight': data pointer is NULL");
  t[0].name = "bad \xc3\x28 utf8";
  WCASE("writer: invalid UTF-8 name", "tensor #1: name is not valid UTF-8");
  t[1].name = NULL;
  WCASE("writer: NULL name", "tensor #2 has no name");
  int64_t neg[2] = {3, -4};
  t[0].shape = neg;
  WCASE("writer: negative dimension", "tensor 'state_dict.fc.weight': dimension 2 has negative size -4");
  t[0].ndim = 65;
  WCASE("writer: too many dimensions",
        "tensor 'state_dict.fc.weight': bad number of dimensions 65 (expected 0..64 with a shape)");
  m[1].key = LT_ST_CHECKSUM_KEY;
  WCASE("writer: reserved metadata key", "metadata key \"lutra_checksum\" is reserved (lutra writes it)");
  m[1].key = "format";
  WCASE("writer: reserved metadata key 'format'", "metadata key \"format\" is reserved (lutra writes it)");
  m[1].key = m[0].key;
  WCASE("writer: duplicate metadata key", "metadata key 'lutra' appears twice");
  m[0].value = "\xed\xa0\x80";  // a UTF-16 surrogate encoded in UTF-8
  WCASE("writer: invalid UTF-8 metadata value", "metadata #1 ('lutra'): key or value is not valid UTF-8");
#undef WCASE
  check(access(p, F_OK) != 0 && count_tmp_files(tmpdir) == 0, "rejected saves create no file");
  check(lt_st_dtype_size("F32") == 4 && lt_st_dtype_size("I64") == 8 && lt_st_dtype_size("BF16") == 2 &&
            lt_st_dtype_size("f32") == 0 && lt_st_dtype_size(NULL) == 0,
        "dtype size table");
}

/* ---- atomic writes ---- */

static void test_atomic(void) {
  sample s;
  sample_init(&s);
  char err[1024], want[1024];
  lt_st_file f;

  const char *p = tpath("no/such/dir/a.safetensors");
  snprintf(want, sizeof want, "save: %s: cannot create temporary file %s.tmp.%ld.", p, p, (long)getpid());
  check_temp_err(lt_st_save(p, s.t, 6, s.m, 2, err, sizeof err), err, want, ": No such file or directory",
                 "save into a missing directory: names the path, the temporary file and strerror");

  p = tpath("isdir.safetensors");
  mkdir(p, 0755);
  snprintf(want, sizeof want, "save: %s: is a directory, not a regular file; nothing was written", p);
  check_err(lt_st_save(p, s.t, 6, s.m, 2, err, sizeof err), err, want, 1, "save over a directory: refused");
  struct stat st;
  check(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && count_tmp_files(tmpdir) == 0,
        "after the refusal: the directory is untouched, no temporary file");
  snprintf(want, sizeof want, "load: %s: is a directory, not a file", p);
  check_err(lt_st_load(p, &f, err, sizeof err), err, want, 1, "load a directory: clear error");
  p = tpath("missing.safetensors");
  snprintf(want, sizeof want, "load: %s: cannot open: No such file or directory", p);
  check_err(lt_st_load(p, &f, err, sizeof err), err, want, 1, "load a missing file: names the path and strerror");

  /* An old checkpoint survives a save that fails to create its temporary file (a directory that cannot be
   * written: tests/c/test_fileio.c) or to write it (below). */
  p = tpath("keep.safetensors");
  lt_st_save(p, s.t, 2, NULL, 0, err, sizeof err);
  size_t olen, nlen;
  unsigned char *old = slurp(p, &olen), *now_;

  /* A save that fails in the middle of writing (file size limit: EFBIG), in a child process. */
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {olen + 100, olen + 100};
    setrlimit(RLIMIT_FSIZE, &rl);
    static float big[16384];
    int64_t shape[1] = {16384};
    lt_st_tensor t = {"big", "F32", 1, shape, big, sizeof big};
    char e[1024], w[1024];
    int rc = lt_st_save(p, &t, 1, NULL, 0, e, sizeof e);
    snprintf(w, sizeof w, "save: %s: cannot write temporary file %s.tmp.%ld.", p, p, (long)getpid());
    _exit(rc == -1 && is_temp_message(e, w, ": File too large") ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a save that fails mid-write (EFBIG) reports 'File too large'");
  now_ = slurp(p, &nlen);
  check(now_ && nlen == olen && memcmp(old, now_, olen) == 0 && count_tmp_files(tmpdir) == 0,
        "... the old checkpoint is intact and the partial temporary file removed");
  free(now_);
  free(old);

  lt_chunk parts[2] = {{"hello ", 6}, {"world", 5}};
  int rc = lt_file_write_atomic(NULL, tpath("plain.txt"), parts, 2, err, sizeof err);
  void *buf = NULL;
  size_t len = 0;
  rc |= lt_file_read_all(NULL, tpath("plain.txt"), &buf, &len, err, sizeof err);
  check(rc == 0 && len == 11 && memcmp(buf, "hello world", 12) == 0, "lt_file_write_atomic / lt_file_read_all round trip (NUL-terminated)");
  lt_file_free(buf);
  rc = lt_file_read_all(NULL, tpath("nope.txt"), &buf, &len, err, sizeof err);
  snprintf(want, sizeof want, "read: %s: cannot open: No such file or directory", tpath("nope.txt"));
  check_err(rc, err, want, 1, "lt_file_read_all default op name 'read'");
  check(buf == NULL && len == 0, "... and leaves buf NULL, len 0");
}

/* ---- SIGKILL during checkpoint writes ---- */

#define KILL_N 262144

static void kill_child(const char *dest, int64_t base) {
  float *w = malloc(KILL_N * sizeof *w);
  int64_t shape[1] = {KILL_N}, step;
  char sval[32], err[1024];
  for (int64_t i = 0;; i++) {
    step = base + i;
    for (int k = 0; k < KILL_N; k++) w[k] = (float)step;
    snprintf(sval, sizeof sval, "%lld", (long long)step);
    lt_st_tensor t[2] = {{"w", "F32", 1, shape, w, KILL_N * sizeof *w}, {"step", "I64", 0, NULL, &step, 8}};
    lt_st_meta m[1] = {{"step", sval}};
    if (lt_st_save(dest, t, 2, m, 1, err, sizeof err) != 0) _exit(3);
  }
}

/* Removes the temporary files "<dest>.tmp.<pid>.*" that the killed process pid left; returns how many. */
static int remove_temps_of(const char *dest, pid_t pid) {
  char prefix[600];
  const char *slash = strrchr(dest, '/');
  snprintf(prefix, sizeof prefix, "%s.tmp.%ld.", slash ? slash + 1 : dest, (long)pid);
  DIR *d = opendir(tmpdir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", tmpdir, e->d_name);
    if (unlink(full) == 0) n++;
  }
  if (d) closedir(d);
  return n;
}

/* 50 kills at random delays (kills 0-9: spread over 0..30 ms; then log-uniform 1 us .. 30 ms, so many land
 * in the first milliseconds of a save). Kills 0-9 each write a fresh destination (the
 * child may die before its first save completes: the file must then be absent, never partial); kills
 * 10-49 share one destination, so each new child overwrites the previous run's checkpoint (it must
 * survive intact, or be replaced by a newer complete one). */
static void test_kill(void) {
  char err[1024], dest[512];
  int bad = 0, absent = 0, stale = 0, same = 0, advanced = 0, ever = 0;
  long long last = -1;
  srand(20240607);
  double t0 = now();
  for (int it = 0; it < 50; it++) {
    snprintf(dest, sizeof dest, "%s", it < 10 ? tpath("fresh.safetensors") : tpath("killed.safetensors"));
    if (it <= 10) { /* a new destination: nothing written yet */
      unlink(dest);
      ever = 0;
      last = -1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) kill_child(dest, (int64_t)it * 1000000);
    useconds_t delay = it < 10 ? (useconds_t)(it * 3000 + rand() % 3000)
                               : (useconds_t)exp(log(30000.0) * rand() / (double)RAND_MAX);
    usleep(delay);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    stale += remove_temps_of(dest, pid);

    lt_st_file f;
    if (access(dest, F_OK) != 0) {
      absent++;
      if (ever) {
        bad++;
        printf("#   kill %d (after %u us): the checkpoint vanished\n", it, (unsigned)delay);
      }
      continue;
    }
    ever = 1;
    if (lt_st_load(dest, &f, err, sizeof err) != 0) {
      bad++;
      printf("#   kill %d (after %u us): %s\n", it, (unsigned)delay, err);
      continue;
    }
    const char *sv = lt_st_meta_get(&f, "step");
    const lt_st_tensor *w = lt_st_find(&f, "w"), *st = lt_st_find(&f, "step");
    long long step = sv ? atoll(sv) : -2;
    int ok = w && st && w->nbytes == KILL_N * sizeof(float);
    int64_t s64 = -3;
    if (st) memcpy(&s64, st->data, 8);
    ok = ok && s64 == step;
    for (size_t k = 0; ok && k < KILL_N; k += 997) {
      float v;
      memcpy(&v, (const char *)w->data + 4 * k, 4);
      ok = v == (float)step;
    }
    if (!ok || step < last) {
      bad++;
      printf("#   kill %d (after %u us): inconsistent checkpoint (step %lld, previous %lld)\n", it, (unsigned)delay,
             step, last);
    }
    if (step == last) same++;
    else advanced++;
    last = step;
    lt_st_free(&f);
  }
  check(bad == 0, "50 SIGKILLs during checkpoint loops: the file is always absent-before-first-write or complete and valid");
  printf("#   kill test: %d absent (killed before the first save completed), %d unchanged, %d newer; "
         "%d stale temp files cleaned; %.2f s\n",
         absent, same, advanced, stale, now() - t0);
}

static void test_speed(void) {
  enum { N = 4 << 20 };  /* 16 MB of float32 */
  float *w = malloc(N * sizeof *w);
  for (int i = 0; i < N; i++) w[i] = (float)i;
  int64_t shape[1] = {N};
  lt_st_tensor t = {"w", "F32", 1, shape, w, N * sizeof *w};
  char err[1024];
  lt_st_file f;
  double t0 = now();
  int rc = lt_st_save(tpath("big.safetensors"), &t, 1, NULL, 0, err, sizeof err);
  double t1 = now();
  rc |= lt_st_load(tpath("big.safetensors"), &f, err, sizeof err);
  double t2 = now();
  check(rc == 0 && f.ntensors == 1 && memcmp(f.tensors[0].data, w, N * sizeof *w) == 0, "16 MB checkpoint round trip");
  printf("#   16 MB checkpoint: save %.3f s (with fsync), load %.3f s\n", t1 - t0, t2 - t1);
  if (rc == 0) lt_st_free(&f);
  free(w);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lt_test_st_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("not ok - mkdtemp: %s\n0 passed, 1 failed\n", strerror(errno));
    return 1;
  }
  test_roundtrip();
  test_python_reader();
  test_truncations_and_flips();
  test_headers();
  test_writer_errors();
  test_atomic();
  test_kill();
  test_speed();
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
