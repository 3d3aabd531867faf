/*
 * safetensors.c — safetensors checkpoint files: header JSON writer with a whole-file CRC-32, atomic
 * write, and a strict reader (Jansson for the JSON). See lt_safetensors.h for the contract.
 */
#include "lt_safetensors.h"
#include "lt_fileio.h"
#include "lt_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CKSUM_PREFIX "crc32:"
#define FORMAT_KEY "format"
#define FORMAT_VALUE "lutra"
/* How the checksum appears in the raw header; only a real key/value pair can produce these bytes, since
 * inside a JSON string every '"' is escaped. */
#define CKSUM_PATTERN "\"" LT_ST_CHECKSUM_KEY "\":\"" CKSUM_PREFIX

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
  { "BOOL", 1 }, { "U8", 1 },   { "I8", 1 },  { "I16", 2 },     { "U16", 2 },
  { "F16", 2 },  { "BF16", 2 }, { "I32", 4 }, { "U32", 4 },     { "F32", 4 },
  { "F64", 8 },  { "I64", 8 },  { "U64", 8 }, { "F8_E4M3", 1 }, { "F8_E5M2", 1 },
};

/* The table's own copy of a dtype name (so loaded entries never point into freed JSON), or NULL. */
static const char *dtype_lookup(const char *name, size_t *size) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, name) == 0) {
      if (size) *size = dtypes[i].size;
      return dtypes[i].name;
    }
  return NULL;
}

size_t lt_st_dtype_size(const char *dtype) {
  size_t s = 0;
  return dtype_lookup(dtype, &s) ? s : 0;
}

static void fmt_err(char *err, size_t errlen, const char *op, const char *path, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  int n = snprintf(err, errlen, "%s: %s: ", op, path);
  if (n < 0 || (size_t)n >= errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  va_end(ap);
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF), as JSON readers demand. */
static int utf8_valid(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    unsigned c = *s;
    if (c < 0x80) {
      s++;
      continue;
    }
    int n;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return 0;
    for (int i = 1; i <= n; i++) {
      if ((s[i] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    s += n + 1;
  }
  return 1;
}

/* ---- writer ---- */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(b, tmp, (size_t)n);
}

/* A JSON string literal: quotes, backslashes and control characters escaped; UTF-8 passes through. */
static void sb_json_string(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  const char *run = s;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    sb_put(b, run, (size_t)(s - run));
    run = s + 1;
    switch (c) {
      case '"': sb_put(b, "\\\"", 2); break;
      case '\\': sb_put(b, "\\\\", 2); break;
      case '\b': sb_put(b, "\\b", 2); break;
      case '\f': sb_put(b, "\\f", 2); break;
      case '\n': sb_put(b, "\\n", 2); break;
      case '\r': sb_put(b, "\\r", 2); break;
      case '\t': sb_put(b, "\\t", 2); break;
      default: sb_fmt(b, "\\u%04x", c); break;
    }
  }
  sb_put(b, run, (size_t)(s - run));
  sb_put(b, "\"", 1);
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first string that occurs twice, or NULL (also NULL when out of memory: *oom set). */
static const char *find_duplicate(const char **strs, size_t n, int *oom) {
  if (n < 2) return NULL;
  const char **s = malloc(n * sizeof *s);
  if (!s) {
    *oom = 1;
    return NULL;
  }
  memcpy(s, strs, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_str_ptr);
  const char *dup = NULL;
  for (size_t i = 1; i < n && !dup; i++)
    if (strcmp(s[i - 1], s[i]) == 0) dup = s[i];
  free(s);
  return dup;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* A file being written: the 8-byte prefix, the header, the chunks (prefix, header, then the tensors' data). */
typedef struct st_out {
  unsigned char prefix[8];
  sbuf h;
  lt_chunk *chunks;
  size_t nc;
} st_out;

static void st_out_free(st_out *o) {
  free(o->h.p);
  free(o->chunks);
  memset(o, 0, sizeof *o);
}

/* Validates and lays out a file (checksum included) into *o; the chunks point into o and the tensors. */
static int st_build(const char *op, const char *path, const lt_st_tensor *tensors, size_t ntensors,
                    const lt_st_meta *meta, size_t nmeta, st_out *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  if ((ntensors && !tensors) || (nmeta && !meta)) {
    fmt_err(err, errlen, op, path, "NULL tensor or metadata array");
    return -1;
  }

  /* Validate everything before building anything. */
  for (size_t i = 0; i < ntensors; i++) {
    const lt_st_tensor *t = &tensors[i];
    size_t elsize = 0;
    if (!t->name) {
      fmt_err(err, errlen, op, path, "tensor #%zu has no name", i + 1);
      return -1;
    }
    if (strcmp(t->name, "__metadata__") == 0) {
      fmt_err(err, errlen, op, path, "tensor #%zu: the name \"__metadata__\" is reserved", i + 1);
      return -1;
    }
    if (!utf8_valid(t->name)) {
      fmt_err(err, errlen, op, path, "tensor #%zu: name is not valid UTF-8", i + 1);
      return -1;
    }
    if (!dtype_lookup(t->dtype, &elsize)) {
      fmt_err(err, errlen, op, path, "tensor '%s': unknown dtype '%s'", t->name, t->dtype ? t->dtype : "(null)");
      return -1;
    }
    if (t->ndim < 0 || t->ndim > LT_ST_MAX_NDIM || (t->ndim > 0 && !t->shape)) {
      fmt_err(err, errlen, op, path, "tensor '%s': bad number of dimensions %d (expected 0..%d with a shape)", t->name,
              t->ndim, LT_ST_MAX_NDIM);
      return -1;
    }
    uint64_t numel = 1;
    int overflow = 0;
    for (int d = 0; d < t->ndim; d++) {
      if (t->shape[d] < 0) {
        fmt_err(err, errlen, op, path, "tensor '%s': dimension %d has negative size %" PRId64, t->name, d + 1,
                t->shape[d]);
        return -1;
      }
      if (t->shape[d] != 0 && numel > UINT64_MAX / (uint64_t)t->shape[d]) overflow = 1;
      numel *= (uint64_t)t->shape[d];
    }
    if (overflow || numel > SIZE_MAX / elsize || numel * elsize != t->nbytes) {
      fmt_err(err, errlen, op, path,
              "tensor '%s': %zu bytes of data do not match shape and dtype %s (%" PRIu64 " elements of %zu bytes)",
              t->name, t->nbytes, t->dtype, overflow ? UINT64_MAX : numel, elsize);
      return -1;
    }
    if (t->nbytes > 0 && !t->data) {
      fmt_err(err, errlen, op, path, "tensor '%s': data pointer is NULL", t->name);
      return -1;
    }
  }
  for (size_t i = 0; i < nmeta; i++) {
    if (!meta[i].key || !meta[i].value) {
      fmt_err(err, errlen, op, path, "metadata #%zu has a NULL key or value", i + 1);
      return -1;
    }
    if (strcmp(meta[i].key, LT_ST_CHECKSUM_KEY) == 0 || strcmp(meta[i].key, FORMAT_KEY) == 0) {
      fmt_err(err, errlen, op, path, "metadata key \"%s\" is reserved (lutra writes it)", meta[i].key);
      return -1;
    }
    if (!utf8_valid(meta[i].key) || !utf8_valid(meta[i].value)) {
      fmt_err(err, errlen, op, path, "metadata #%zu ('%s'): key or value is not valid UTF-8", i + 1, meta[i].key);
      return -1;
    }
  }
  {
    size_t n = ntensors > nmeta ? ntensors : nmeta;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    int oom = !names;
    const char *dup = NULL, *mdup = NULL;
    if (names) {
      for (size_t i = 0; i < ntensors; i++) names[i] = tensors[i].name;
      dup = find_duplicate(names, ntensors, &oom);
      for (size_t i = 0; i < nmeta; i++) names[i] = meta[i].key;
      if (!dup) mdup = find_duplicate(names, nmeta, &oom);
    }
    if (dup) fmt_err(err, errlen, op, path, "two tensors are named '%s'", dup);
    else if (mdup) fmt_err(err, errlen, op, path, "metadata key '%s' appears twice", mdup);
    else if (oom) fmt_err(err, errlen, op, path, "out of memory");
    free(names);
    if (dup || mdup || oom) return -1;
  }

  /* The header, with the checksum's digits as zeros for now. */
  sbuf h = { 0 };
  sb_str(&h, "{\"__metadata__\":{\"" FORMAT_KEY "\":\"" FORMAT_VALUE "\",");
  for (size_t i = 0; i < nmeta; i++) {
    sb_json_string(&h, meta[i].key);
    sb_put(&h, ":", 1);
    sb_json_string(&h, meta[i].value);
    sb_put(&h, ",", 1);
  }
  sb_str(&h, CKSUM_PATTERN);
  size_t cksum_pos = h.len;
  sb_str(&h, "00000000\"}");
  uint64_t off = 0;
  for (size_t i = 0; i < ntensors; i++) {
    const lt_st_tensor *t = &tensors[i];
    sb_put(&h, ",", 1);
    sb_json_string(&h, t->name);
    sb_str(&h, ":{\"dtype\":");
    sb_json_string(&h, t->dtype);
    sb_str(&h, ",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) sb_fmt(&h, d ? ",%" PRId64 : "%" PRId64, t->shape[d]);
    sb_fmt(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + (uint64_t)t->nbytes);
    off += t->nbytes;
  }
  sb_put(&h, "}", 1);
  while (!h.oom && h.len % 8 != 0) sb_put(&h, " ", 1);
  if (h.oom) {
    free(h.p);
    fmt_err(err, errlen, op, path, "out of memory building the header");
    return -1;
  }
  if (h.len > LT_ST_MAX_HEADER) {
    fmt_err(err, errlen, op, path, "header would be %zu bytes, more than the limit of %" PRIu64, h.len,
            LT_ST_MAX_HEADER);
    free(h.p);
    return -1;
  }

  unsigned char *prefix = o->prefix;
  put_le64(prefix, h.len);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, prefix, 8);
  crc = crc32_z(crc, (const Bytef *)h.p, h.len);
  for (size_t i = 0; i < ntensors; i++)
    if (tensors[i].nbytes) crc = crc32_z(crc, tensors[i].data, tensors[i].nbytes);
  char hex[9];
  snprintf(hex, sizeof hex, "%08lx", (unsigned long)(crc & 0xFFFFFFFFul));
  memcpy(h.p + cksum_pos, hex, 8);

  lt_chunk *chunks = malloc((ntensors + 2) * sizeof *chunks);
  if (!chunks) {
    free(h.p);
    fmt_err(err, errlen, op, path, "out of memory");
    return -1;
  }
  size_t nc = 0;
  o->h = h;
  chunks[nc++] = (lt_chunk){ prefix, 8 };
  chunks[nc++] = (lt_chunk){ o->h.p, o->h.len };
  for (size_t i = 0; i < ntensors; i++)
    if (tensors[i].nbytes) chunks[nc++] = (lt_chunk){ tensors[i].data, tensors[i].nbytes };
  o->chunks = chunks;
  o->nc = nc;
  return 0;
}

int lt_st_save(const char *path, const lt_st_tensor *tensors, size_t ntensors, const lt_st_meta *meta, size_t nmeta,
               char *err, size_t errlen) {
  const char *op = "save";
  if (!path || !*path) {
    fmt_err(err, errlen, op, "(empty path)", "no file name given");
    return -1;
  }
  st_out o;
  if (st_build(op, path, tensors, ntensors, meta, nmeta, &o, err, errlen)) return -1;
  int rc = lt_file_write_atomic(op, path, o.chunks, o.nc, err, errlen);
  st_out_free(&o);
  return rc;
}

int lt_st_save_mem(const char *name, const lt_st_tensor *tensors, size_t ntensors, const lt_st_meta *meta, size_t nmeta,
                   void **out, size_t *outlen, char *err, size_t errlen) {
  const char *op = "save";
  *out = NULL;
  *outlen = 0;
  if (!name) name = "(memory)";
  st_out o;
  if (st_build(op, name, tensors, ntensors, meta, nmeta, &o, err, errlen)) return -1;
  size_t total = 0;
  for (size_t i = 0; i < o.nc; i++) total += o.chunks[i].len;
  char *buf = malloc(total ? total : 1);
  if (!buf) {
    st_out_free(&o);
    fmt_err(err, errlen, op, name, "out of memory (%zu bytes)", total);
    return -1;
  }
  size_t at = 0;
  for (size_t i = 0; i < o.nc; i++) {
    memcpy(buf + at, o.chunks[i].data, o.chunks[i].len);
    at += o.chunks[i].len;
  }
  st_out_free(&o);
  *out = buf;
  *outlen = total;
  return 0;
}

/* ---- reader ---- */

typedef struct st_priv {
  json_t *root;
  int64_t *shapes;
} st_priv;

typedef struct pending {
  const char *name;
  const char *dtype;
  uint64_t begin, end;
  int ndim;
  size_t shape_at;
} pending;

static int cmp_pending(const void *a, const void *b) {
  const pending *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* A non-negative JSON integer, or -1. */
static int64_t json_nonneg(const json_t *v) {
  if (!json_is_integer(v)) return -1;
  json_int_t i = json_integer_value(v);
  return i < 0 ? -1 : (int64_t)i;
}

void lt_st_free(lt_st_file *f) {
  if (!f) return;
  st_priv *p = f->priv;
  if (p) {
    if (p->root) json_decref(p->root);
    free(p->shapes);
    free(p);
  }
  free(f->tensors);
  free(f->meta);
  free(f->buf);
  memset(f, 0, sizeof *f);
}

int lt_st_load_mem(const char *name, const void *vbuf, size_t len, lt_st_file *out, char *err, size_t errlen) {
  const char *op = "load";
  const unsigned char *buf = vbuf;
  memset(out, 0, sizeof *out);
  if (!name) name = "(memory)";
  if (len < 8) {
    fmt_err(err, errlen, op, name, "file too short (%zu bytes): a safetensors file starts with an 8-byte header length",
            len);
    return -1;
  }
  uint64_t hlen = get_le64(buf);
  if (hlen > LT_ST_MAX_HEADER) {
    fmt_err(err, errlen, op, name,
            "header length %" PRIu64 " is absurd (limit %" PRIu64 "): not a safetensors file, or corrupt", hlen,
            LT_ST_MAX_HEADER);
    return -1;
  }
  if (hlen > len - 8) {
    fmt_err(err, errlen, op, name, "truncated: header length %" PRIu64 " runs past the end of the file (%zu bytes)",
            hlen, len);
    return -1;
  }
  const char *hdr = (const char *)buf + 8;
  const unsigned char *data = buf + 8 + hlen;
  uint64_t dlen = len - 8 - hlen;

  json_error_t jerr;
  int oom_parse;
  json_t *root = lt_json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr, &oom_parse);
  if (!root && oom_parse) {
    fmt_err(err, errlen, op, name, "out of memory parsing the header (%" PRIu64 " bytes)", hlen);
    return -1;
  }
  if (!root) {
    fmt_err(err, errlen, op, name, "header is not valid JSON: %s (at byte %d of the header)", jerr.text, jerr.position);
    return -1;
  }
  st_priv *priv = calloc(1, sizeof *priv);
  pending *pend = NULL;
  size_t npend = 0, nshape = 0;
  if (!priv) goto oom;
  priv->root = root;
  out->priv = priv;
  if (!json_is_object(root)) {
    fmt_err(err, errlen, op, name, "header is not a JSON object");
    goto fail;
  }

  /* Pass 1: field checks, metadata, sizes. */
  size_t nkeys = json_object_size(root);
  pend = malloc((nkeys ? nkeys : 1) * sizeof *pend);
  if (!pend) goto oom;
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) {
      if (!json_is_object(val)) {
        fmt_err(err, errlen, op, name, "__metadata__ is not a JSON object");
        goto fail;
      }
      size_t nm = json_object_size(val);
      out->meta = malloc((nm ? nm : 1) * sizeof *out->meta);
      if (!out->meta) goto oom;
      const char *mk;
      json_t *mv;
      json_object_foreach(val, mk, mv) {
        if (!json_is_string(mv)) {
          fmt_err(err, errlen, op, name, "__metadata__ value of '%s' is not a string", mk);
          goto fail;
        }
        out->meta[out->nmeta].key = mk;
        out->meta[out->nmeta].value = json_string_value(mv);
        out->nmeta++;
      }
      continue;
    }
    if (!json_is_object(val)) {
      fmt_err(err, errlen, op, name, "tensor '%s': entry is not a JSON object", key);
      goto fail;
    }
    const char *fk;
    json_t *fv;
    json_object_foreach(val, fk, fv) {
      if (strcmp(fk, "dtype") && strcmp(fk, "shape") && strcmp(fk, "data_offsets")) {
        fmt_err(err, errlen, op, name, "tensor '%s': unknown field '%s'", key, fk);
        goto fail;
      }
    }
    json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
           *jo = json_object_get(val, "data_offsets");
    const char *missing = !jd ? "dtype" : !js ? "shape" : !jo ? "data_offsets" : NULL;
    if (missing) {
      fmt_err(err, errlen, op, name, "tensor '%s': missing field '%s'", key, missing);
      goto fail;
    }
    size_t elsize = 0;
    const char *dt = json_is_string(jd) ? dtype_lookup(json_string_value(jd), &elsize) : NULL;
    if (!json_is_string(jd)) {
      fmt_err(err, errlen, op, name, "tensor '%s': dtype is not a string", key);
      goto fail;
    }
    if (!dt) {
      fmt_err(err, errlen, op, name, "tensor '%s': unknown dtype '%s'", key, json_string_value(jd));
      goto fail;
    }
    if (!json_is_array(js) || json_array_size(js) > LT_ST_MAX_NDIM) {
      fmt_err(err, errlen, op, name, "tensor '%s': shape is not an array of at most %d sizes", key, LT_ST_MAX_NDIM);
      goto fail;
    }
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t d = 0; d < json_array_size(js); d++) {
      int64_t s = json_nonneg(json_array_get(js, d));
      if (s < 0) {
        fmt_err(err, errlen, op, name, "tensor '%s': shape[%zu] is not a non-negative integer", key, d + 1);
        goto fail;
      }
      if (s != 0 && numel > UINT64_MAX / (uint64_t)s) overflow = 1;
      numel *= (uint64_t)s;
    }
    int64_t b, e;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || (b = json_nonneg(json_array_get(jo, 0))) < 0 ||
        (e = json_nonneg(json_array_get(jo, 1))) < 0) {
      fmt_err(err, errlen, op, name, "tensor '%s': data_offsets is not [begin, end] (non-negative integers)", key);
      goto fail;
    }
    if (b > e) {
      fmt_err(err, errlen, op, name, "tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] end before they begin", key,
              b, e);
      goto fail;
    }
    if (overflow || numel > UINT64_MAX / elsize || numel * elsize != (uint64_t)(e - b)) {
      fmt_err(err, errlen, op, name,
              "tensor '%s': shape and dtype %s need %s%" PRIu64 " bytes, data_offsets [%" PRId64 ", %" PRId64
              "] hold %" PRId64,
              key, dt, overflow || numel > UINT64_MAX / elsize ? "more than " : "",
              overflow || numel > UINT64_MAX / elsize ? UINT64_MAX : numel * elsize, b, e, e - b);
      goto fail;
    }
    pend[npend++] = (pending){ key, dt, (uint64_t)b, (uint64_t)e, (int)json_array_size(js), nshape };
    nshape += json_array_size(js);
  }

  /* Pass 2: the data buffer is covered exactly, in order, without overlap. */
  for (size_t i = 0; i < npend; i++)
    if (pend[i].end > dlen) {
      fmt_err(err, errlen, op, name,
              "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end of the data buffer "
              "(%" PRIu64 " bytes): the file is truncated or corrupt",
              pend[i].name, pend[i].begin, pend[i].end, dlen);
      goto fail;
    }
  qsort(pend, npend, sizeof *pend, cmp_pending);
  uint64_t pos = 0;
  for (size_t i = 0; i < npend; i++) {
    if (pend[i].begin < pos) {
      fmt_err(err, errlen, op, name,
              "tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %" PRIu64 ") overlap", pend[i - 1].name,
              pend[i - 1].begin, pend[i - 1].end, pend[i].name, pend[i].begin, pend[i].end);
      goto fail;
    }
    if (pend[i].begin > pos) {
      fmt_err(err, errlen, op, name, "data bytes [%" PRIu64 ", %" PRIu64 ") before tensor '%s' belong to no tensor",
              pos, pend[i].begin, pend[i].name);
      goto fail;
    }
    pos = pend[i].end;
  }
  if (pos != dlen) {
    fmt_err(err, errlen, op, name, "data bytes [%" PRIu64 ", %" PRIu64 ") at the end of the file belong to no tensor",
            pos, dlen);
    goto fail;
  }

  /* Pass 3: the checksum, when the file has one. */
  const char *ck = lt_st_meta_get(out, LT_ST_CHECKSUM_KEY);
  if (ck) {
    size_t plen = strlen(CKSUM_PREFIX);
    int ok = strncmp(ck, CKSUM_PREFIX, plen) == 0 && strlen(ck) == plen + 8;
    for (size_t i = plen; ok && i < plen + 8; i++)
      ok = (ck[i] >= '0' && ck[i] <= '9') || (ck[i] >= 'a' && ck[i] <= 'f');
    if (!ok) {
      fmt_err(err, errlen, op, name, "malformed " LT_ST_CHECKSUM_KEY " '%s' (expected crc32:<8 hex digits>)", ck);
      goto fail;
    }
    /* Find the digits in the raw header: exactly one occurrence of the pattern. */
    const char *at = NULL;
    size_t patlen = strlen(CKSUM_PATTERN), count = 0;
    for (const char *p = hdr; (p = memmem(p, (size_t)hlen - (size_t)(p - hdr), CKSUM_PATTERN, patlen)) != NULL;
         p += patlen) {
      at = p + patlen;
      count++;
    }
    if (count != 1 || (size_t)(at - hdr) + 8 > hlen || memcmp(at, ck + plen, 8) != 0) {
      fmt_err(err, errlen, op, name, LT_ST_CHECKSUM_KEY " is not in the layout lutra writes: cannot verify it");
      goto fail;
    }
    size_t digits = 8 + (size_t)(at - hdr);
    uLong crc = crc32_z(0L, Z_NULL, 0);
    crc = crc32_z(crc, buf, digits);
    crc = crc32_z(crc, (const Bytef *)"00000000", 8);
    crc = crc32_z(crc, buf + digits + 8, len - digits - 8);
    char hex[9];
    snprintf(hex, sizeof hex, "%08lx", (unsigned long)(crc & 0xFFFFFFFFul));
    if (memcmp(hex, ck + plen, 8) != 0) {
      fmt_err(err, errlen, op, name,
              "checksum mismatch: the file says %s, its contents give " CKSUM_PREFIX "%s: "
              "the file is corrupt",
              ck, hex);
      goto fail;
    }
    out->checksum_verified = 1;
  } else {
    /* lutra always writes both keys: one damaged byte must not pass a lutra file off as a foreign one. */
    const char *fmt = lt_st_meta_get(out, FORMAT_KEY);
    if (fmt && strcmp(fmt, FORMAT_VALUE) == 0) {
      fmt_err(err, errlen, op, name,
              "a lutra file (format \"" FORMAT_VALUE "\") without " LT_ST_CHECKSUM_KEY ": the header is damaged");
      goto fail;
    }
  }

  /* Build the result. */
  out->tensors = malloc((npend ? npend : 1) * sizeof *out->tensors);
  priv->shapes = malloc((nshape ? nshape : 1) * sizeof *priv->shapes);
  if (!out->tensors || !priv->shapes) goto oom;
  for (size_t i = 0; i < npend; i++) {
    json_t *js = json_object_get(json_object_get(root, pend[i].name), "shape");
    int64_t *sh = priv->shapes + pend[i].shape_at;
    for (int d = 0; d < pend[i].ndim; d++) sh[d] = json_nonneg(json_array_get(js, (size_t)d));
    out->tensors[i] = (lt_st_tensor){ pend[i].name, pend[i].dtype,        pend[i].ndim,
                                      sh,           data + pend[i].begin, (size_t)(pend[i].end - pend[i].begin) };
  }
  out->ntensors = npend;
  free(pend);
  return 0;

oom:
  fmt_err(err, errlen, op, name, "out of memory reading the header");
fail:
  free(pend);
  if (!out->priv) json_decref(root);
  lt_st_free(out);
  return -1;
}

int lt_st_load(const char *path, lt_st_file *out, char *err, size_t errlen) {
  void *buf;
  size_t len;
  memset(out, 0, sizeof *out);
  if (lt_file_read_all("load", path, &buf, &len, err, errlen) != 0) return -1;
  if (lt_st_load_mem(path, buf, len, out, err, errlen) != 0) {
    lt_file_free(buf);
    return -1;
  }
  out->buf = buf;
  out->buflen = len;
  return 0;
}

const char *lt_st_meta_get(const lt_st_file *f, const char *key) {
  for (size_t i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
  return NULL;
}

const lt_st_tensor *lt_st_find(const lt_st_file *f, const char *name) {
  for (size_t i = 0; i < f->ntensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}
