/*
 * l_f64.c — which binding functions take float64 tensors: the ones whose kernels are generic over float and
 * double. A float64 tensor given to any other function is refused by l_checktensor through lt_check_no_f64
 * ("<op>: float64 is not supported yet (float32 only)"), so no float32 kernel reads doubles. The names are
 * those the functions pass to l_checktensor; docs/reference/dtypes.md lists the same ones for users.
 */
#include <stdlib.h>
#include <string.h>

#include "l_util.h"

/* sorted (strcmp order) for bsearch */
static const char *const f64_names[] = {
  "__newindex", "cat",     "clone",     "contiguous",    "copy",          "copy_",   "data_ptr",
  "detach",     "dim",     "double",    "dtype",         "expand",        "fill_",   "flatten",
  "float",      "grad_fn", "int64",     "is_contiguous", "is_leaf",       "item",    "long",
  "narrow",     "numel",   "ones_like", "permute",       "requires_grad", "reshape", "select",
  "shape",      "size",    "squeeze",   "stack",         "stride",        "t",       "tensor",
  "tolist",     "totable", "transpose", "type",          "unsqueeze",     "view",    "zero_",
  "zeros_like",
};

static int cmp_name(const void *key, const void *elem) { return strcmp(key, *(const char *const *)elem); }

int l_f64_capable(const char *fname) {
  return bsearch(fname, f64_names, sizeof f64_names / sizeof *f64_names, sizeof *f64_names, cmp_name) != NULL;
}

lt_tensor *l_f64_gate(lua_State *L, lt_tensor *t, const char *fname) {
  if (t && t->dtype == LT_F64 && !l_f64_capable(fname)) {
    lt_check_no_f64(L_CTX(L), fname, t);
    l_error(L);
  }
  return t;
}
