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

/* The messages of all three summaries, in one allocation each kind (freed together). */
typedef struct hp_msgs {
  Lutra__Tb__Hparams__HParamInfo *infos, **info_ptrs;
  Lutra__Tb__Hparams__MetricInfo *metrics, **metric_ptrs;
  Lutra__Tb__Hparams__MetricName *metric_names;
  Lutra__Tb__Hparams__SessionStartInfo__HparamsEntry *entries, **entry_ptrs;
  Lutra__Tb__Hparams__Value *values;
} hp_msgs;

static void free_msgs(hp_msgs *m) {
  free(m->infos);
  free(m->info_ptrs);
  free(m->metrics);
  free(m->metric_ptrs);
  free(m->metric_names);
  free(m->entries);
  free(m->entry_ptrs);
  free(m->values);
}

static int alloc_msgs(hp_msgs *m, size_t n, size_t nm) {
  size_t a = n > 0 ? n : 1, b = nm > 0 ? nm : 1;
  m->infos = calloc(a, sizeof *m->infos);
  m->info_ptrs = calloc(a, sizeof *m->info_ptrs);
  m->metrics = calloc(b, sizeof *m->metrics);
  m->metric_ptrs = calloc(b, sizeof *m->metric_ptrs);
  m->metric_names = calloc(b, sizeof *m->metric_names);
  m->entries = calloc(a, sizeof *m->entries);
  m->entry_ptrs = calloc(a, sizeof *m->entry_ptrs);
  m->values = calloc(a, sizeof *m->values);
  return m->infos && m->info_ptrs && m->metrics && m->metric_ptrs && m->metric_names && m->entries && m->entry_ptrs &&
         m->values;
}

int lt_tb_hparams(lt_ctx *c, lt_tb_writer *w, double wall_time, int n, const lt_tb_hparam *hp, int n_metrics,
                  const char *const *metric_tags) {
  if (n < 0 || n_metrics < 0) return lt_fail(c, "TensorBoardLogger: %d hyper-parameters, %d metrics", n, n_metrics);
  hp_msgs m = { 0 };
  if (!alloc_msgs(&m, (size_t)n, (size_t)n_metrics)) {
    free_msgs(&m);
    return lt_fail(c, "TensorBoardLogger: out of memory (%d hyper-parameters, %d metrics)", n, n_metrics);
  }
  for (int i = 0; i < n; i++) {
    lutra__tb__hparams__hparam_info__init(&m.infos[i]);
    m.infos[i].name = (char *)hp[i].name;
    m.infos[i].type = data_type(hp[i].kind);
    m.info_ptrs[i] = &m.infos[i];
    set_value(&m.values[i], &hp[i]);
    lutra__tb__hparams__session_start_info__hparams_entry__init(&m.entries[i]);
    m.entries[i].key = (char *)hp[i].name;
    m.entries[i].value = &m.values[i];
    m.entry_ptrs[i] = &m.entries[i];
  }
  for (int i = 0; i < n_metrics; i++) {
    lutra__tb__hparams__metric_name__init(&m.metric_names[i]);
    m.metric_names[i].tag = (char *)metric_tags[i];
    lutra__tb__hparams__metric_info__init(&m.metrics[i]);
    m.metrics[i].name = &m.metric_names[i];
    m.metric_ptrs[i] = &m.metrics[i];
  }
  Lutra__Tb__Hparams__Experiment exp = LUTRA__TB__HPARAMS__EXPERIMENT__INIT;
  exp.n_hparam_infos = (size_t)n;
  exp.hparam_infos = m.info_ptrs;
  exp.n_metric_infos = (size_t)n_metrics;
  exp.metric_infos = m.metric_ptrs;
  Lutra__Tb__Hparams__SessionStartInfo ssi = LUTRA__TB__HPARAMS__SESSION_START_INFO__INIT;
  ssi.n_hparams = (size_t)n;
  ssi.hparams = m.entry_ptrs;
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
  free_msgs(&m);
  return rc;
}
