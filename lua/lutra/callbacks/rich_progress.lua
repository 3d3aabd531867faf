-- callbacks/rich_progress.lua — lt.callbacks.RichProgressBar: Lightning's RichProgressBar in spirit, a block of
-- lines redrawn in place on a terminal that allows it (docs/reference/callbacks.md):
--
--   Epoch 3/9   ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 450/1000 0:00:05 • 0:00:06 88.1it/s
--   Validation  ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━   3/10   0:00:00 • 0:00:01 61.0it/s
--   loss: 0.512  val_acc: 0.871  v_num: 0
--
-- The training bar, the validation bar below it while validation runs, and the metrics line; each finished
-- epoch's block stays on screen, the next epoch draws a new one. The terminal allows it when the stream is a
-- terminal whose TERM is set and not "dumb"; otherwise it is the ProgressBar (one line, or plain lines when
-- not a terminal). Colours unless NO_COLOR is set or color = false.
local lt = require "lutra"
local cbs = require "lutra.callbacks"
local ProgressBar = require "lutra.callbacks.progress"

local IO = lt._io
local F = ProgressBar._format
local fmt, concat, floor = string.format, table.concat, math.floor

local Rich = ProgressBar:extend("RichProgressBar")

local MIN_INTERVAL = 0.1

--- The options of ProgressBar, and multiline (default: the terminal allows it) and color (default: on unless
--- NO_COLOR).
function Rich:init(opts)
  opts = opts or {}
  local base = {}
  for k, v in pairs(opts) do if k ~= "multiline" and k ~= "color" then base[k] = v end end
  cbs.check_options("RichProgressBar", opts, { refresh_rate = "integer", stream = true, tty = "boolean",
    width = "integer", multiline = "boolean", color = "boolean" }, 3)
  ProgressBar.init(self, base)
  local term = os.getenv("TERM")
  local allows = self.tty and term ~= nil and term ~= "" and term ~= "dumb"
  if opts.multiline ~= nil then self.multiline = opts.multiline and self.tty else self.multiline = allows end
  if opts.color ~= nil then self.color = opts.color else self.color = os.getenv("NO_COLOR") == nil end
  self._drawn = 0
end

local function paint(self, code, s) if self.color then return "\27[" .. code .. "m" .. s .. "\27[0m" end return s end

-- one bar line: description, bar, n/total, elapsed • remaining, rate
function Rich:_row(st, final)
  local dt = IO.now() - st.t0
  local width = self:_width() - 1
  local count = st.total and fmt("%d/%d", st.n, st.total) or fmt("%d", st.n)
  local eta = (st.total and st.n > 0) and (st.total - st.n) * dt / st.n or math.huge
  if final then eta = 0 end
  local tail = fmt(" %s %s • %s %s", count, F.clock(dt), st.total and F.clock(eta) or "-:--", F.rate_text(st.n, dt))
  local head = fmt("%-13s", st.desc)
  local bw = math.min(60, width - F.ulen(head) - F.ulen(tail))
  if bw < 4 then return F.utrunc(head .. tail, width) end
  local frac = st.total and st.total > 0 and math.min(1, st.n / st.total) or 0
  local full = floor(frac * bw + 0.5)
  local done_part = string.rep("━", full)
  local rest = string.rep("━", bw - full)
  return head .. paint(self, frac >= 1 and "32" or "35", done_part) .. paint(self, "90", rest) .. tail
end

function Rich:_lines(trainer, final)
  local lines = {}
  if self._train then lines[#lines + 1] = self:_row(self._train, final and self._stage == self._train) end
  if self._eval then lines[#lines + 1] = self:_row(self._eval, final and self._stage == self._eval) end
  local parts = {}
  for _, kv in ipairs(self:get_metrics(trainer)) do parts[#parts + 1] = kv[1] .. ": " .. F.num(kv[2]) end
  if #parts > 0 and (self._train or self._eval) then
    lines[#lines + 1] = paint(self, "2", (F.fit_items(parts, "  ", self:_width() - 1))) -- whole metrics, "…" for the rest
  end
  return lines
end

-- redraws the block in place: back to its first line, each line cleared and written, leftovers cleared
function Rich:_render(trainer, force, final)
  if not self.multiline then return end
  local t = IO.now()
  if not force and self._last_draw and t - self._last_draw < MIN_INTERVAL then return end
  self._last_draw = t
  local lines = self:_lines(trainer, final)
  local out = { "\r" }
  if self._drawn > 1 then out[#out + 1] = fmt("\27[%dA", self._drawn - 1) end
  for i, l in ipairs(lines) do
    out[#out + 1] = l .. "\27[K"
    if i < #lines then out[#out + 1] = "\n" end
  end
  local extra = self._drawn - #lines
  if extra > 0 then
    for _ = 1, extra do out[#out + 1] = "\n\27[K" end
    out[#out + 1] = fmt("\27[%dA", extra)
  end
  self:_write(concat(out))
  self._drawn = #lines
end

-- leaves the block on screen and moves below it
function Rich:_commit()
  if self._drawn > 0 then self:_write("\n") end
  self._drawn = 0
end

-- erases the block
function Rich:_clear()
  if self._drawn == 0 then return end
  local out = { "\r" }
  if self._drawn > 1 then out[#out + 1] = fmt("\27[%dA", self._drawn - 1) end
  for i = 1, self._drawn do out[#out + 1] = "\27[K" .. (i < self._drawn and "\n" or "") end
  if self._drawn > 1 then out[#out + 1] = fmt("\27[%dA", self._drawn - 1) end
  self:_write(concat(out) .. "\r")
  self._drawn = 0
end

-- ---- hooks (each falls back to ProgressBar's without multi-line output) -----------------------------------

function Rich:on_sanity_check_start(trainer)
  if not self.multiline then return ProgressBar.on_sanity_check_start(self, trainer) end
  if not self.enabled then return end
  self:_begin("sanity", "Sanity Check", F.total_of(trainer.num_sanity_val_batches))
  self._eval = self._stage
  self:_render(trainer, true)
end

function Rich:on_sanity_check_end(trainer)
  if not self.multiline then return ProgressBar.on_sanity_check_end(self, trainer) end
  if not self.enabled then return end
  self:_clear()
  self._eval, self._stage = nil, nil
end

function Rich:on_train_epoch_start(trainer)
  if not self.multiline then return ProgressBar.on_train_epoch_start(self, trainer) end
  if not self.enabled then return end
  self:_commit()
  local max = trainer.max_epochs
  local desc = (max and max > 0 and max < 1e15) and fmt("Epoch %d/%d", trainer.current_epoch, max - 1)
    or fmt("Epoch %d", trainer.current_epoch)
  self:_begin("train", desc, F.total_of(trainer.num_training_batches))
  self._train = self._stage
  self:_render(trainer, true)
end

function Rich:on_train_batch_end(trainer, model, outputs, batch, batch_idx)
  if not self.multiline then return ProgressBar.on_train_batch_end(self, trainer, model, outputs, batch, batch_idx) end
  if not self.enabled or not self._train then return end
  local saved = self._stage
  self._stage = nil -- (ProgressBar's bookkeeping of the loss and the count, without its drawing)
  ProgressBar.on_train_batch_end(self, trainer, model, outputs, batch, batch_idx)
  self._stage = saved
  self:_render(trainer, self._train.n == self._train.total)
end

function Rich:on_train_epoch_end(trainer)
  if not self.multiline then return ProgressBar.on_train_epoch_end(self, trainer) end
  if not self.enabled or not self._train then return end
  self._stage = self._train
  self:_render(trainer, true, true)
  self:_commit()
  self._train, self._stage = nil, nil
end

function Rich:on_train_end(trainer)
  if not self.multiline then return ProgressBar.on_train_end(self, trainer) end
  self:_commit()
  self._train, self._stage = nil, nil
end

function Rich:_eval_start(trainer, kind)
  if not self.multiline then return ProgressBar._eval_start(self, trainer, kind) end
  if not self.enabled then return end
  if trainer.sanity_checking then return self:_sanity_total(trainer) end
  local totals = kind == "validation" and trainer.num_val_batches or kind == "test" and trainer.num_test_batches
    or trainer.num_predict_batches
  local total = 0
  for _, v in ipairs(type(totals) == "table" and totals or { totals }) do
    local t = F.total_of(v)
    if t == nil then total = nil; break end
    total = total + t
  end
  if self._train == nil then self:_commit() end
  self:_begin(kind, F.EVAL_DESC[kind], total)
  self._eval = self._stage
  self:_render(trainer, true)
end

function Rich:_eval_batch_end(trainer)
  if not self.multiline then return ProgressBar._eval_batch_end(self, trainer) end
  if not self.enabled or not self._eval then return end
  self._eval.n = self._eval.n + 1
  self:_render(trainer, self._eval.n == self._eval.total)
end

function Rich:_eval_end(trainer)
  if not self.multiline then return ProgressBar._eval_end(self, trainer) end
  if not self.enabled or trainer.sanity_checking or not self._eval then return end
  if self._train then
    self._eval = nil
    self._stage = self._train
    self:_render(trainer, true)
  else
    self:_render(trainer, true, true)
    self:_commit()
    self._eval, self._stage = nil, nil
  end
end

function Rich:on_exception(trainer)
  if not self.multiline then return ProgressBar.on_exception(self, trainer) end
  self:_commit()
  self._stage, self._train, self._eval = nil, nil, nil
end

function Rich:print(...)
  if not self.multiline then return ProgressBar.print(self, ...) end
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  local had = self._drawn > 0
  self:_clear()
  self:_write(concat(parts, "\t") .. "\n")
  if had then self:_render(nil, true) end
end

return Rich
