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
  "__newindex",    "abs",       "abs_",   "add",       "backward", "cat",           "clone",     "contiguous",
  "copy",          "copy_",     "cos",    "cos_",      "data_ptr", "detach",        "dim",       "div",
  "double",        "dtype",     "eq",     "exp",       "exp_",     "expand",        "fill_",     "flatten",
  "float",         "ge",        "gelu",   "gelu_",     "grad",     "grad_fn",       "gt",        "int64",
  "is_contiguous", "is_leaf",   "item",   "le",        "linear",   "log",           "log1p",     "log1p_",
  "log_",          "long",      "lt",     "matmul",    "max",      "maximum",       "mean",      "min",
  "minimum",       "mul",       "narrow", "ne",        "neg",      "neg_",          "numel",     "ones_like",
  "param",         "permute",   "pow",    "relu",      "relu_",    "requires_grad", "reshape",   "rsqrt",
  "rsqrt_",        "select",    "shape",  "sigmoid",   "sigmoid_", "sign",          "sign_",     "sin",
  "sin_",          "size",      "sqrt",   "sqrt_",     "square",   "square_",       "squeeze",   "stack",
  "stride",        "sub",       "sum",    "t",         "tanh",     "tanh_",         "tensor",    "tolist",
  "totable",       "transpose", "type",   "unsqueeze", "view",     "zero_",         "zero_grad", "zeros_like",
};

static int cmp_name(const void *key, const void *elem) { return strcmp(key, *(const char *const *)elem); }

int l_f64_capable(const char *fname) {
  return bsearch(fname, f64_names, sizeof f64_names / sizeof *f64_names, sizeof *f64_names, cmp_name) != NULL;
}
