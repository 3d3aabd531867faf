/* tb_writer.c — TensorBoard event files: TFRecord framing and the Event protobuf through protobuf-c (lt_tb.h). */
#include "lt_tb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "tb_event.pb-c.h"

/* How many names lt_tb_open tries: the given one, then ".1" ... */
#define TB_NAME_TRIES 100

struct lt_tb_writer {
  FILE *f;
  char path[512];
};

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* Castagnoli, reflected */
    crc_table[i] = c;
  }
  crc_ready = 1;
}

uint32_t lt_crc32c(uint32_t crc, const void *data, size_t n) {
  if (!crc_ready) crc_init(); /* (idempotent: two threads racing write the same table) */
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t lt_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_u64(uint8_t *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}
static void put_u32(uint8_t *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

/* One TFRecord holding the packed event. */
static int write_event(lt_ctx *c, lt_tb_writer *w, const Lutra__Tb__Event *ev) {
  size_t n = lutra__tb__event__get_packed_size(ev);
  uint8_t *buf = malloc(n + 16);
  if (!buf) return lt_fail(c, "TensorBoardLogger: out of memory (%zu bytes for an event)", n + 16);
  uint8_t head[12];
  put_u64(head, (uint64_t)n);
  put_u32(head + 8, lt_crc32c_mask(lt_crc32c(0, head, 8)));
  lutra__tb__event__pack(ev, buf);
  uint8_t tail[4];
  put_u32(tail, lt_crc32c_mask(lt_crc32c(0, buf, n)));
  int ok = fwrite(head, 1, 12, w->f) == 12 && fwrite(buf, 1, n, w->f) == n && fwrite(tail, 1, 4, w->f) == 4;
  free(buf);
  if (!ok) return lt_fail(c, "TensorBoardLogger: cannot write %s: %s", w->path, strerror(errno));
  return LT_OK;
}

lt_tb_writer *lt_tb_open(lt_ctx *c, const char *path, double wall_time) {
  lt_tb_writer *w = calloc(1, sizeof *w);
  if (!w) {
    lt_fail(c, "TensorBoardLogger: out of memory");
    return NULL;
  }
  /* A new file, never one that is there: O_EXCL so a file or a symbolic link planted under the predictable
   * name (a shared log directory) is not written through, O_NOFOLLOW for a link at the name itself. A name
   * taken (two loggers of one directory in one second) gets ".1", ".2", ... as TensorBoard reads every file
   * whose name holds "tfevents". */
  int fd = -1;
  for (int k = 0; k < TB_NAME_TRIES; k++) {
    int len =
        k == 0 ? snprintf(w->path, sizeof w->path, "%s", path) : snprintf(w->path, sizeof w->path, "%s.%d", path, k);
    if (len < 0 || (size_t)len >= sizeof w->path) {
      lt_fail(c, "TensorBoardLogger: the event file's path is longer than %zu bytes: %s", sizeof w->path - 1, path);
      free(w);
      return NULL;
    }
    fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) break;
  }
  w->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!w->f) {
    lt_fail(c, "TensorBoardLogger: cannot create %s: %s", w->path, strerror(errno));
    if (fd >= 0) close(fd);
    free(w);
    return NULL;
  }
  Lutra__Tb__Event ev = LUTRA__TB__EVENT__INIT;
  ev.wall_time = wall_time;
  ev.what_case = LUTRA__TB__EVENT__WHAT_FILE_VERSION;
  ev.file_version = (char *)"brain.Event:2";
  if (write_event(c, w, &ev) != LT_OK || lt_tb_flush(c, w) != LT_OK) {
    fclose(w->f);
    free(w);
    return NULL;
  }
  return w;
}

const char *lt_tb_path(const lt_tb_writer *w) { return w->path; }

int lt_tb_scalars(lt_ctx *c, lt_tb_writer *w, int64_t step, double wall_time, int n, const char *const *tags,
                  const float *values) {
  if (n <= 0) return LT_OK;
  Lutra__Tb__Summary__Value *vals = calloc((size_t)n, sizeof *vals);
  Lutra__Tb__Summary__Value **ptrs = calloc((size_t)n, sizeof *ptrs);
  if (!vals || !ptrs) {
    free(vals);
    free(ptrs);
    return lt_fail(c, "TensorBoardLogger: out of memory (%d values)", n);
  }
  for (int i = 0; i < n; i++) {
    lutra__tb__summary__value__init(&vals[i]);
    vals[i].tag = (char *)tags[i];
    vals[i].value_case = LUTRA__TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    vals[i].simple_value = values[i];
    ptrs[i] = &vals[i];
  }
  Lutra__Tb__Summary sum = LUTRA__TB__SUMMARY__INIT;
  sum.n_value = (size_t)n;
  sum.value = ptrs;
  Lutra__Tb__Event ev = LUTRA__TB__EVENT__INIT;
  ev.wall_time = wall_time;
  ev.step = step;
  ev.what_case = LUTRA__TB__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  int rc = write_event(c, w, &ev);
  free(vals);
  free(ptrs);
  return rc;
}

int lt_tb_plugin_summary(lt_ctx *c, lt_tb_writer *w, int64_t step, double wall_time, const char *tag,
                         const char *plugin_name, const uint8_t *content, size_t n) {
  Lutra__Tb__SummaryMetadata__PluginData pd = LUTRA__TB__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  pd.plugin_name = (char *)plugin_name;
  pd.content.data = (uint8_t *)content;
  pd.content.len = n;
  Lutra__Tb__SummaryMetadata meta = LUTRA__TB__SUMMARY_METADATA__INIT;
  meta.plugin_data = &pd;
  Lutra__Tb__Summary__Value val = LUTRA__TB__SUMMARY__VALUE__INIT;
  val.tag = (char *)tag;
  val.metadata = &meta; /* no value of its own: the plugin's data is all of it */
  Lutra__Tb__Summary__Value *ptr = &val;
  Lutra__Tb__Summary sum = LUTRA__TB__SUMMARY__INIT;
  sum.n_value = 1;
  sum.value = &ptr;
  Lutra__Tb__Event ev = LUTRA__TB__EVENT__INIT;
  ev.wall_time = wall_time;
  ev.step = step;
  ev.what_case = LUTRA__TB__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  return write_event(c, w, &ev);
}

int lt_tb_flush(lt_ctx *c, lt_tb_writer *w) {
  if (fflush(w->f) != 0) return lt_fail(c, "TensorBoardLogger: cannot write %s: %s", w->path, strerror(errno));
  return LT_OK;
}

int lt_tb_close(lt_ctx *c, lt_tb_writer *w) {
  if (!w) return LT_OK;
  int bad = fclose(w->f) != 0;
  int rc = bad ? lt_fail(c, "TensorBoardLogger: cannot write %s: %s", w->path, strerror(errno)) : LT_OK;
  free(w);
  return rc;
}
