-- utils/signatures.lua — PyTorch 1.13's positional arguments of every constructor lutra has, in PyTorch's order:
-- the one table that lets `lt.nn.Conv2d(nc, ndf, 4, 2, 1, {bias = false})`, `lt.optim.SGD(params, 0.1)` and
-- `StepLR(opt, 1, 0.7)` be written as in PyTorch. Everything past these (PyTorch's keyword-only arguments and
-- lutra's own options) goes in the trailing options table; any name can also be given there.
--
-- Module entries: `pos` says how many of the names the module's init takes as leading arguments (the rest reach
-- it in its options table); `no_options`: its init takes those arguments only. PyTorch's deprecated size_average
-- and reduce are listed so that a positional reduction lands in its place; given, they are refused as unknown
-- options (use reduction).
-- device and dtype are left out: lutra's modules are created on the CPU in float32 (Module:to).
local S = {}

local function loss(...) return { pos = 0, ... } end

S.nn = {
  -- layers
  Linear = { pos = 2, "in_features", "out_features", "bias" },
  Conv1d = { pos = 3, "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias",
    "padding_mode" },
  Conv2d = { pos = 3, "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias",
    "padding_mode" },
  ConvTranspose2d = { pos = 3, "in_channels", "out_channels", "kernel_size", "stride", "padding", "output_padding",
    "groups", "bias", "dilation", "padding_mode" },
  Embedding = { pos = 2, "num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type",
    "scale_grad_by_freq", "sparse", "_weight" },
  -- normalisation
  BatchNorm1d = { pos = 1, "num_features", "eps", "momentum", "affine", "track_running_stats" },
  BatchNorm2d = { pos = 1, "num_features", "eps", "momentum", "affine", "track_running_stats" },
  InstanceNorm1d = { pos = 1, "num_features", "eps", "momentum", "affine", "track_running_stats" },
  InstanceNorm2d = { pos = 1, "num_features", "eps", "momentum", "affine", "track_running_stats" },
  LayerNorm = { pos = 1, "normalized_shape", "eps", "elementwise_affine" },
  GroupNorm = { pos = 2, "num_groups", "num_channels", "eps", "affine" },
  -- pooling and resampling
  MaxPool1d = { pos = 1, "kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode" },
  MaxPool2d = { pos = 1, "kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode" },
  AvgPool1d = { pos = 1, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad" },
  AvgPool2d = { pos = 1, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" },
  AdaptiveAvgPool1d = { pos = 1, "output_size" },
  AdaptiveAvgPool2d = { pos = 1, "output_size" },
  AdaptiveMaxPool1d = { pos = 1, "output_size", "return_indices" },
  AdaptiveMaxPool2d = { pos = 1, "output_size", "return_indices" },
  Upsample = { pos = 0, "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor" },
  UpsamplingNearest2d = { pos = 0, "size", "scale_factor" },
  UpsamplingBilinear2d = { pos = 0, "size", "scale_factor" },
  PixelShuffle = { pos = 1, no_options = true, "upscale_factor" },
  PixelUnshuffle = { pos = 1, no_options = true, "downscale_factor" },
  -- dropout
  Dropout = { pos = 0, "p", "inplace" },
  Dropout2d = { pos = 0, "p", "inplace" },
  Dropout3d = { pos = 0, "p", "inplace" },
  -- activations
  ReLU = { pos = 0, "inplace" },
  Tanh = { pos = 0 },
  Sigmoid = { pos = 0 },
  GELU = { pos = 0, "approximate" },
  LeakyReLU = { pos = 0, "negative_slope", "inplace" },
  Softmax = { pos = 1, no_options = true, "dim" },
  LogSoftmax = { pos = 1, no_options = true, "dim" },
  SiLU = { pos = 0, "inplace" },
  Mish = { pos = 0, "inplace" },
  Hardswish = { pos = 0, "inplace" },
  Hardsigmoid = { pos = 0, "inplace" },
  ELU = { pos = 0, "alpha", "inplace" },
  Softplus = { pos = 0, "beta", "threshold" },
  Hardtanh = { pos = 0, "min_val", "max_val", "inplace" },
  PReLU = { pos = 0, "num_parameters", "init" },
  -- shape
  Flatten = { pos = 2, no_options = true, "start_dim", "end_dim" },
  Unflatten = { pos = 2, no_options = true, "dim", "unflattened_size" },
  -- recurrent
  RNN = { pos = 2, "input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout",
    "bidirectional" },
  GRU = { pos = 2, "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional" },
  LSTM = { pos = 2, "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
    "proj_size" },
  RNNCell = { pos = 2, "input_size", "hidden_size", "bias", "nonlinearity" },
  GRUCell = { pos = 2, "input_size", "hidden_size", "bias" },
  LSTMCell = { pos = 2, "input_size", "hidden_size", "bias" },
  -- attention
  MultiheadAttention = { pos = 2, "embed_dim", "num_heads", "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim",
    "vdim", "batch_first" },
  -- losses
  L1Loss = loss("size_average", "reduce", "reduction"),
  MSELoss = loss("size_average", "reduce", "reduction"),
  CrossEntropyLoss = loss("weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"),
  NLLLoss = loss("weight", "size_average", "ignore_index", "reduce", "reduction"),
  BCELoss = loss("weight", "size_average", "reduce", "reduction"),
  BCEWithLogitsLoss = loss("weight", "size_average", "reduce", "reduction", "pos_weight"),
  SmoothL1Loss = loss("size_average", "reduce", "reduction", "beta"),
  HuberLoss = loss("reduction", "delta"),
  KLDivLoss = loss("size_average", "reduce", "reduction", "log_target"),
  CosineEmbeddingLoss = loss("margin", "size_average", "reduce", "reduction"),
  MarginRankingLoss = loss("margin", "size_average", "reduce", "reduction"),
  TripletMarginLoss = loss("margin", "p", "eps", "swap", "size_average", "reduce", "reduction"),
  PoissonNLLLoss = loss("log_input", "full", "size_average", "eps", "reduce", "reduction"),
  GaussianNLLLoss = loss(), -- PyTorch's are keyword-only: full, eps, reduction
}

-- optimizers: after params (PyTorch's foreach, maximize, differentiable ... are keyword-only or not lutra's)
S.optim = {
  SGD = { "lr", "momentum", "dampening", "weight_decay", "nesterov" },
  Adam = { "lr", "betas", "eps", "weight_decay", "amsgrad" },
  AdamW = { "lr", "betas", "eps", "weight_decay", "amsgrad" },
  RMSprop = { "lr", "alpha", "eps", "weight_decay", "momentum", "centered" },
  Adagrad = { "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps" },
  Adadelta = { "lr", "rho", "eps", "weight_decay" },
  Adamax = { "lr", "betas", "eps", "weight_decay" },
  NAdam = { "lr", "betas", "eps", "weight_decay", "momentum_decay" },
  RAdam = { "lr", "betas", "eps", "weight_decay" },
  ASGD = { "lr", "lambd", "alpha", "t0", "weight_decay" },
  LBFGS = { "lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size", "line_search_fn" },
}

-- LR schedulers: after the optimizer (ChainedScheduler's first argument is its list of schedulers)
S.lr_scheduler = {
  StepLR = { "step_size", "gamma", "last_epoch", "verbose" },
  MultiStepLR = { "milestones", "gamma", "last_epoch", "verbose" },
  ExponentialLR = { "gamma", "last_epoch", "verbose" },
  CosineAnnealingLR = { "T_max", "eta_min", "last_epoch", "verbose" },
  LambdaLR = { "lr_lambda", "last_epoch", "verbose" },
  MultiplicativeLR = { "lr_lambda", "last_epoch", "verbose" },
  OneCycleLR = { "max_lr", "total_steps", "epochs", "steps_per_epoch", "pct_start", "anneal_strategy",
    "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase", "last_epoch",
    "verbose" },
  ReduceLROnPlateau = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps",
    "verbose" },
  ConstantLR = { "factor", "total_iters", "last_epoch", "verbose" },
  LinearLR = { "start_factor", "end_factor", "total_iters", "last_epoch", "verbose" },
  PolynomialLR = { "total_iters", "power", "last_epoch", "verbose" },
  CosineAnnealingWarmRestarts = { "T_0", "T_mult", "eta_min", "last_epoch", "verbose" },
  CyclicLR = { "base_lr", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "scale_fn", "scale_mode",
    "cycle_momentum", "base_momentum", "max_momentum", "last_epoch", "verbose" },
  SequentialLR = { "schedulers", "milestones", "last_epoch", "verbose" },
}

return S
