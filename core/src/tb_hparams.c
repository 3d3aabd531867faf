/* tb_hparams.c — the HParams plugin's three summaries (lt_tb.h: lt_tb_hparams), HParamsPluginData messages of
 * core/src/tb_hparams.proto packed by protobuf-c into the content of a plugin summary (tb_writer.c). */
#include <stdlib.h>

#include "lt_tb.h"
#include "tb_hparams.pb-c.h"

#define PLUGIN_NAME "hparams" /* tensorboard/plugins/hparams/metadata.py: PLUGIN_NAME, PLUGIN_DATA_VERSION */
#define PLUGIN_DATA_VERSION 0

typedef Lutra__Tb__Hparams__HParamsPluginData PluginData;

/* One HParamsPluginData (its `data` set by the caller) as the content of a summary tagged `tag`. */
static int write_plugin_data(lt_ctx *c, lt_tb_writer *w, double wall_time, const char *tag, PluginData *pd) {
  pd->version = PLUGIN_DATA_VERSION;
  size_t n = lutra__tb__hparams__hparams_plugin_data__get_packed_size(pd);
  uint8_t *buf = malloc(n > 0 ? n : 1);
  if (!buf) return lt_fail(c, "TensorBoardLogger: out of memory (%zu bytes of hparams)", n);
  lutra__tb__hparams__hparams_plugin_data__pack(pd, buf);
  int rc = lt_tb_plugin_summary(c, w, 0, wall_time, tag, PLUGIN_NAME, buf, n);
  free(buf);
  return rc;
}

static Lutra__Tb__Hparams__DataType data_type(lt_tb_hparam_kind k) {
  if (k == LT_TB_HPARAM_STRING) return LUTRA__TB__HPARAMS__DATA_TYPE__DATA_TYPE_STRING;
  if (k == LT_TB_HPARAM_BOOL) return LUTRA__TB__HPARAMS__DATA_TYPE__DATA_TYPE_BOOL;
  return LUTRA__TB__HPARAMS__DATA_TYPE__DATA_TYPE_FLOAT64;
}

static void set_value(Lutra__Tb__Hparams__Value *v, const lt_tb_hparam *hp) {
  lutra__tb__hparams__value__init(v);
  if (hp->kind == LT_TB_HPARAM_STRING) {
    v->kind_case = LUTRA__TB__HPARAMS__VALUE__KIND_STRING_VALUE;
    v->string_value = (char *)hp->string;
  } else if (hp->kind == LT_TB_HPARAM_BOOL) {
    v->kind_case = LUTRA__TB__HPARAMS__VALUE__KIND_BOOL_VALUE;
    v->bool_value = hp->boolean != 0;
  } else {
    v->kind_case = LUTRA__TB__HPARAMS__VALUE__KIND_NUMBER_VALUE;
    v->number_value = hp->number;
  }
}

/* A hyper-parameter's messages, and a metric's. */
typedef struct hp_msgs {
  Lutra__Tb__Hparams__HParamInfo info;
  Lutra__Tb__Hparams__Value value;
  Lutra__Tb__Hparams__SessionStartInfo__HparamsEntry entry;
} hp_msgs;
typedef struct metric_msgs {
  Lutra__Tb__Hparams__MetricInfo info;
  Lutra__Tb__Hparams__MetricName name;
} metric_msgs;

int lt_tb_hparams(lt_ctx *c, lt_tb_writer *w, double wall_time, int n, const lt_tb_hparam *hp, int n_metrics,
                  const char *const *metric_tags) {
  if (n < 0 || n_metrics < 0) return lt_fail(c, "TensorBoardLogger: %d hyper-parameters, %d metrics", n, n_metrics);
  /* every message of the three summaries in one block: the messages first (their sizes keep the pointer
   * arrays after them aligned), then the arrays of pointers to them that protobuf-c's repeated fields are */
  size_t un = (size_t)n, um = (size_t)n_metrics;
  size_t bytes = un * (sizeof(hp_msgs) + 2 * sizeof(void *)) + um * (sizeof(metric_msgs) + sizeof(void *));
  char *block = calloc(1, bytes > 0 ? bytes : 1);
  if (!block) return lt_fail(c, "TensorBoardLogger: out of memory (%d hyper-parameters, %d metrics)", n, n_metrics);
  hp_msgs *hm = (hp_msgs *)block;
  metric_msgs *mm = (metric_msgs *)(hm + un);
  Lutra__Tb__Hparams__HParamInfo **info_ptrs = (Lutra__Tb__Hparams__HParamInfo **)(mm + um);
  Lutra__Tb__Hparams__SessionStartInfo__HparamsEntry **entry_ptrs =
      (Lutra__Tb__Hparams__SessionStartInfo__HparamsEntry **)(info_ptrs + un);
  Lutra__Tb__Hparams__MetricInfo **metric_ptrs = (Lutra__Tb__Hparams__MetricInfo **)(entry_ptrs + un);
  for (int i = 0; i < n; i++) {
    hp_msgs *h = &hm[i];
    lutra__tb__hparams__hparam_info__init(&h->info);
    h->info.name = (char *)hp[i].name;
    h->info.type = data_type(hp[i].kind);
    info_ptrs[i] = &h->info;
    set_value(&h->value, &hp[i]);
    lutra__tb__hparams__session_start_info__hparams_entry__init(&h->entry);
    h->entry.key = (char *)hp[i].name;
    h->entry.value = &h->value;
    entry_ptrs[i] = &h->entry;
  }
  for (int i = 0; i < n_metrics; i++) {
    lutra__tb__hparams__metric_name__init(&mm[i].name);
    mm[i].name.tag = (char *)metric_tags[i];
    lutra__tb__hparams__metric_info__init(&mm[i].info);
    mm[i].info.name = &mm[i].name;
    metric_ptrs[i] = &mm[i].info;
  }
  Lutra__Tb__Hparams__Experiment exp = LUTRA__TB__HPARAMS__EXPERIMENT__INIT;
  exp.n_hparam_infos = (size_t)n;
  exp.hparam_infos = info_ptrs;
  exp.n_metric_infos = (size_t)n_metrics;
  exp.metric_infos = metric_ptrs;
  Lutra__Tb__Hparams__SessionStartInfo ssi = LUTRA__TB__HPARAMS__SESSION_START_INFO__INIT;
  ssi.n_hparams = (size_t)n;
  ssi.hparams = entry_ptrs;
  Lutra__Tb__Hparams__SessionEndInfo sei = LUTRA__TB__HPARAMS__SESSION_END_INFO__INIT;
  sei.status = LUTRA__TB__HPARAMS__STATUS__STATUS_SUCCESS;

  /* in the order Lightning's TensorBoardLogger (and torch's add_hparams) writes them */
  PluginData pd = LUTRA__TB__HPARAMS__HPARAMS_PLUGIN_DATA__INIT;
  pd.data_case = LUTRA__TB__HPARAMS__HPARAMS_PLUGIN_DATA__DATA_EXPERIMENT;
  pd.experiment = &exp;
  int rc = write_plugin_data(c, w, wall_time, "_hparams_/experiment", &pd);
  if (rc == LT_OK) {
    pd.data_case = LUTRA__TB__HPARAMS__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO;
    pd.session_start_info = &ssi;
    rc = write_plugin_data(c, w, wall_time, "_hparams_/session_start_info", &pd);
  }
  if (rc == LT_OK) {
    pd.data_case = LUTRA__TB__HPARAMS__HPARAMS_PLUGIN_DATA__DATA_SESSION_END_INFO;
    pd.session_end_info = &sei;
    rc = write_plugin_data(c, w, wall_time, "_hparams_/session_end_info", &pd);
  }
  free(block);
  return rc;
}
