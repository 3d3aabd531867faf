/*
 * lt_tb.h — TensorBoard event files (the TensorBoardLogger, lua/lutra/loggers/tensorboard.lua): TFRecord framing of
 * Event protobufs, encoded by protobuf-c from core/src/tb_event.proto and, for the HParams plugin's data,
 * core/src/tb_hparams.proto (both generated into the build's gen/).
 *
 *   lt_tb_writer *w = lt_tb_open(c, "runs/version_0/events.out.tfevents.1700000000.host");
 *   const char *tags[] = { "loss" }; float vals[] = { 0.5f };
 *   lt_tb_scalars(c, w, 10, wall_time, 1, tags, vals);     // one Event with a Summary of simple_values
 *   lt_tb_close(w);
 *
 * A record: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked
 * CRC-32C of the data; mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's record format).
 */
#ifndef LT_TB_H
#define LT_TB_H

#include <stddef.h>
#include <stdint.h>

#include "lt_ctx.h"

typedef struct lt_tb_writer lt_tb_writer;

/* CRC-32C (Castagnoli) of n bytes, continuing from crc (0 to start). */
uint32_t lt_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's masked form of a CRC. */
uint32_t lt_crc32c_mask(uint32_t crc);

/* Creates a new file at path (never an existing file or a symbolic link: a taken name gets ".1", ".2", ...)
 * and writes the first event (file_version "brain.Event:2"); NULL on failure with the message in c->err naming
 * the path. */
lt_tb_writer *lt_tb_open(lt_ctx *c, const char *path, double wall_time);
/* The path of the file lt_tb_open created. */
const char *lt_tb_path(const lt_tb_writer *w);
/* One Event at `step` holding n scalar values (tag, simple_value). */
int lt_tb_scalars(lt_ctx *c, lt_tb_writer *w, int64_t step, double wall_time, int n, const char *const *tags,
                  const float *values);
/* One Event at `step` whose Summary holds one value: `tag` with plugin metadata (plugin_name, n bytes of
 * content) and no scalar, the way TensorBoard's plugins (hparams, ...) store their data. */
int lt_tb_plugin_summary(lt_ctx *c, lt_tb_writer *w, int64_t step, double wall_time, const char *tag,
                         const char *plugin_name, const uint8_t *content, size_t n);

/* A hyper-parameter of the HParams plugin: a name and a number, a string or a boolean. */
typedef enum lt_tb_hparam_kind { LT_TB_HPARAM_NUMBER, LT_TB_HPARAM_STRING, LT_TB_HPARAM_BOOL } lt_tb_hparam_kind;
typedef struct lt_tb_hparam {
  const char *name;
  lt_tb_hparam_kind kind;
  double number;      /* LT_TB_HPARAM_NUMBER */
  const char *string; /* LT_TB_HPARAM_STRING */
  int boolean;        /* LT_TB_HPARAM_BOOL */
} lt_tb_hparam;

/* The three summaries of TensorBoard's HParams plugin, as torch.utils.tensorboard.summary.hparams makes them
 * (core/src/tb_hparams.c): three Events at step 0, tags "_hparams_/experiment" (an HParamInfo per parameter,
 * typed FLOAT64 / STRING / BOOL, and a MetricInfo per metric tag), "_hparams_/session_start_info" (the values)
 * and "_hparams_/session_end_info" (STATUS_SUCCESS); plugin "hparams", content a HParamsPluginData of version 0
 * (core/src/tb_hparams.proto). The metrics' values are scalars of their own (lt_tb_scalars). */
int lt_tb_hparams(lt_ctx *c, lt_tb_writer *w, double wall_time, int n, const lt_tb_hparam *hp, int n_metrics,
                  const char *const *metric_tags);

/* fflush (the file is readable up to here). */
int lt_tb_flush(lt_ctx *c, lt_tb_writer *w);
/* Closes and frees (NULL: nothing). Returns LT_ERR when the last writes failed. */
int lt_tb_close(lt_ctx *c, lt_tb_writer *w);

#endif
