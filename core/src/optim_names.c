/* optim_names.c — the names of optimizer kinds, state buffers and scalars (lt_optim.h). Apart from optim.c so
 * that the steps of optim_adaptive.c can name their kind in messages without depending on optim.c. */
#include <string.h>

#include "lt_optim.h"

static const char *const kind_names[LT_OPTIM_NKINDS] = { "SGD",      "Adam",   "AdamW", "RMSprop", "Adagrad",
                                                         "Adadelta", "Adamax", "NAdam", "RAdam",   "ASGD" };
static const char *const buf_names[LT_OPTIM_NBUFS] = { "momentum_buffer", "exp_avg",  "exp_avg_sq", "max_exp_avg_sq",
                                                       "square_avg",      "grad_avg", "sum",        "acc_delta",
                                                       "exp_inf",         "ax" };
static const char *const scalar_names[LT_OPTIM_NSCALARS] = { "mu_product", "eta", "mu" };

const char *lt_optim_kind_name(lt_optim_kind k) { return k < LT_OPTIM_NKINDS ? kind_names[k] : "optimizer"; }
const char *lt_optim_buf_name(lt_optim_buf b) { return b < LT_OPTIM_NBUFS ? buf_names[b] : "?"; }
const char *lt_optim_scalar_name(lt_optim_scalar s) { return s < LT_OPTIM_NSCALARS ? scalar_names[s] : "?"; }

int lt_optim_kind_from_name(const char *name) {
  for (int k = 0; k < LT_OPTIM_NKINDS; k++)
    if (!strcmp(name, kind_names[k])) return k;
  return -1;
}
