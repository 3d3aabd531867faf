-- callbacks/progress.lua — lt.callbacks.ProgressBar: progress of fitting, validation, test and predict.
--
--   lt.Trainer{}                                   -- adds a ProgressBar when stdout is a terminal
--   lt.Trainer{callbacks = {lt.callbacks.ProgressBar{refresh_rate = 5}}}
--   lt.Trainer{enable_progress_bar = false}
--
-- On a terminal: one line per stage, rewritten in place ("\r"), at most every 0.1 s (and every
-- refresh_rate batches), with the batch count n/N, a bar, elapsed time < ETA, it/s and the metrics:
--   Epoch 3:  45%|█████▍      | 450/1000 [00:05<00:06, 88.12it/s, loss=0.512, val_acc=0.871, v_num=0]
-- The training line of each epoch stays on screen; the validation line during fitting is drawn below
-- it and removed when validation ends (the training line then shows the new metrics); the sanity
-- check line is removed; validate/test/predict lines stay.
-- Not a terminal (a pipe, a file): one plain line per epoch when it ends, and one per validate/test/
-- predict run:
--   Epoch 3: 1000/1000 batches [00:05, 192.31it/s, loss=0.512, val_loss=0.401, v_num=0]
-- Metrics: "loss" (the mean training loss over the last 20 batches, from training_step's output), the
-- trainer's progress_bar_metrics (self:log(..., {prog_bar=true})) sorted by name, and "v_num" (the
-- logger's version). Numbers show 3 significant digits (the shorter of 0.000312 and 3.12e-4), the rate too.
-- The terminal line fits the terminal's width: the bar shrinks (40 cells down to 10), then v_num and the
-- rate go, then the bar; only then are metrics left out, whole, from the last, with "…" in their place. At
-- 80 columns:
--   Epoch 3:  45%|█████▍      | 450/1000 [00:05<00:06, loss=0.512, val_acc=0.871]
--
-- Options: refresh_rate (1: redraw at most every n batches), stream (io.stdout), tty (default: the stream
-- is stdout and stdout is a terminal), width (default: the terminal's width, else 100).
local lt = require "lutra"
local cbs = require "lutra.callbacks"

local IO = lt._io
local fmt, concat, floor = string.format, table.concat, math.floor

local ProgressBar = cbs.Callback:extend("ProgressBar")

local OPTIONS = { refresh_rate = "integer", stream = true, tty = "boolean", width = "integer" }
local MIN_INTERVAL = 0.1 -- seconds between redraws on a terminal
local WINDOW = 20        -- batches in the running loss

function ProgressBar:init(opts)
  opts = cbs.check_options("ProgressBar", opts, OPTIONS, 3)
  self.refresh_rate = opts.refresh_rate or 1
  if self.refresh_rate < 1 then error("ProgressBar: option 'refresh_rate' must be >= 1", 3) end
  self.stream = opts.stream or io.stdout
  if io.type(self.stream) ~= "file" and type(self.stream) ~= "table" then
    error("ProgressBar: option 'stream' must be a file (io.stdout) or a table with write/flush", 3)
  end
  if opts.tty ~= nil then self.tty = opts.tty
  else self.tty = self.stream == io.stdout and IO.isatty(1) end
  self._width_opt = opts.width
  self.enabled = true
  self._line = nil     -- the stage being drawn on the current line (terminal mode)
  self._has_train = false
  self._losses, self._loss_i, self._loss_n = {}, 0, 0
end

--- Whether stdout is a terminal (the Trainer's default for enable_progress_bar).
function ProgressBar.stdout_is_terminal()
  return IO.isatty(1)
end

function ProgressBar:enable() self.enabled = true end
function ProgressBar:disable() self.enabled = false end

-- ---- formatting -------------------------------------------------------------------------------------

local function clock(s)
  if s ~= s or s == math.huge or s < 0 then return "?" end
  s = floor(s + 0.5)
  local h, m, sec = floor(s / 3600), floor(s / 60) % 60, s % 60
  if h > 0 then return fmt("%d:%02d:%02d", h, m, sec) end
  return fmt("%02d:%02d", m, sec)
end

local function short_exp(s) return (s:gsub("e%+0*(%d)", "e+%1"):gsub("e%-0*(%d)", "e-%1")) end

-- 3 significant digits (Lightning's .3g), in the shorter of the plain and the scientific form, as tqdm's
-- format_num: 0.512, 3.12e-4 (not 0.000312), 1.23e+5
local function num(v)
  if type(v) ~= "number" then return tostring(v) end
  if v ~= v then return "nan" end
  if v == floor(v) and math.abs(v) < 1e15 then return fmt("%d", v) end
  local g, e = short_exp(fmt("%.3g", v)), short_exp(fmt("%.2e", v))
  if #e < #g then return e end
  return g
end

-- 3 significant digits (88.1it/s, 7.25it/s, 1234it/s), as the metrics: the bar's line is short
local function per(r)
  if r >= 100 then return fmt("%.0f", r) end
  if r >= 10 then return fmt("%.1f", r) end
  return fmt("%.2f", r)
end

local function rate_text(n, dt)
  if dt <= 0 or n == 0 then return "?it/s" end
  local r = n / dt
  if r >= 1 then return per(r) .. "it/s" end
  return per(1 / r) .. "s/it"
end

-- number of characters (UTF-8 code points) of s
local function ulen(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- the first w code points of s
local function utrunc(s, w)
  if ulen(s) <= w then return s end
  local out, k = {}, 0
  for ch in s:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    k = k + 1
    if k > w then break end
    out[k] = ch
  end
  return concat(out)
end

local BLOCKS = { "▏", "▎", "▍", "▌", "▋", "▊", "▉" }
local function bar(frac, width)
  frac = math.max(0, math.min(1, frac))
  local cells = frac * width
  local full = floor(cells)
  local part = floor((cells - full) * 8)
  local s = string.rep("█", full)
  if full < width then
    if part > 0 then s = s .. BLOCKS[part] else s = s .. " " end
    s = s .. string.rep(" ", width - full - 1)
  end
  return s
end

-- s cut to at most w code points at a word boundary (a space or ", "), never inside a name; "…" marks the cut
local function cut_words(s, w)
  if ulen(s) <= w then return s end
  local head = utrunc(s, math.max(0, w - 1))
  local at = head:match("^.*()[ ,]") -- the last boundary
  if at then head = head:sub(1, at - 1):gsub("[ ,]+$", "") end
  return head .. "…"
end

-- The metrics that fit in `room` columns, whole, joined by `sep`: the first k items, then "…" when some are
-- left out (the ellipsis is counted in `room`). Returns the text and k.
local function fit_items(items, sep, room)
  local all = concat(items, sep)
  if ulen(all) <= room then return all, #items end
  for k = #items - 1, 0, -1 do
    local parts = {}
    for i = 1, k do parts[i] = items[i] end
    parts[k + 1] = "…"
    local s = concat(parts, sep)
    if ulen(s) <= room then return s, k end
  end
  return "", 0
end

function ProgressBar:_width()
  if self._width_opt then return self._width_opt end
  local w = self.stream == io.stdout and IO.term_width(1) or nil
  if not w then w = tonumber(os.getenv("COLUMNS")) end
  return w or 100
end

-- ---- metrics ------------------------------------------------------------------------------------------

local function metric_value(v)
  return cbs.to_number(v)
end

--- The metrics shown: {{name, value}...} (loss, the trainer's progress_bar_metrics sorted, v_num).
function ProgressBar:get_metrics(trainer)
  local list = {}
  if self._loss_n > 0 and self._train ~= nil then
    local s = 0
    for i = 1, self._loss_n do s = s + self._losses[i] end
    list[#list + 1] = { "loss", s / self._loss_n }
  end
  local pbm = trainer and trainer.progress_bar_metrics
  if type(pbm) == "table" then
    local keys = {}
    for k in pairs(pbm) do if k ~= "loss" and k ~= "v_num" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = metric_value(pbm[k])
      if v ~= nil then list[#list + 1] = { k, v } end
    end
  end
  local lg = trainer and trainer.logger
  if type(lg) == "table" then
    local ok, v = pcall(function() return lg.version end)
    if ok and v ~= nil then list[#list + 1] = { "v_num", v } end
  end
  return list
end

local function metrics_text(list)
  local parts = {}
  for i, kv in ipairs(list) do parts[i] = kv[1] .. "=" .. num(kv[2]) end
  return concat(parts, ", ")
end

-- ---- stages -------------------------------------------------------------------------------------------

local function total_of(v, idx)
  if type(v) == "table" then v = v[(idx or 0) + 1] end
  if type(v) ~= "number" or v == math.huge or v >= 2 ^ 53 or v < 0 then return nil end
  return v
end

function ProgressBar:_begin(kind, desc, total)
  self._stage = { kind = kind, desc = desc, total = total, n = 0, t0 = IO.now(), last_draw = -1, last_n = 0 }
end

local MAX_BAR, MIN_BAR = 40, 10 -- cells

-- The terminal line in `limit` columns. p: head ("Epoch 3: "), frac (nil: no total, no bar), pct ("45%"),
-- count ("450/1000 [00:05<00:06"), rate ("88.1it/s"), metrics ({"loss=0.512", ...}), vnum ("v_num=0" or nil).
-- When the whole line is too long, what gives way, in this order: the bar shrinks (40 cells down to 10); v_num
-- goes, then the it/s rate; then the bar (the percentage stays); then metrics, whole, from the last, with "…"
-- in their place. A metric's name is never cut; a line too narrow for even one is cut at a word boundary.
local function fit_line(p, limit)
  local function tail(k, rate, vnum)
    local t = { p.count }
    if rate then t[#t + 1] = p.rate end
    for i = 1, k do t[#t + 1] = p.metrics[i] end
    if k < #p.metrics then t[#t + 1] = "…" end
    if vnum and p.vnum then t[#t + 1] = p.vnum end
    return concat(t, ", ") .. "]"
  end
  local n = #p.metrics
  if p.frac then
    local left = p.head .. p.pct .. "|"
    for _, v in ipairs { { true, true }, { true, false }, { false, false } } do
      local t = tail(n, v[1], v[2])
      local bw = math.min(MAX_BAR, limit - ulen(left) - 2 - ulen(t))
      if bw >= MIN_BAR then return left .. bar(p.frac, bw) .. "| " .. t end
    end
  else
    for _, v in ipairs { { true, true }, { true, false } } do
      local t = p.head .. tail(n, v[1], v[2])
      if ulen(t) <= limit then return t end
    end
  end
  local head = p.frac and p.head .. p.pct .. " " or p.head
  local room = limit - ulen(head) - ulen(p.count) - 3 -- ", " and "]"
  local m, k = fit_items(p.metrics, ", ", room)
  if k == 0 and m ~= "…" then return cut_words(head .. tail(0, false, false), limit) end
  local t = p.count .. ", " .. m .. "]"
  if p.frac then -- metrics are left out in any case: the bar comes back if it fits beside those that stay
    local left = p.head .. p.pct .. "|"
    local bw = math.min(MAX_BAR, limit - ulen(left) - 2 - ulen(t))
    if bw >= MIN_BAR then return left .. bar(p.frac, bw) .. "| " .. t end
  end
  return head .. t
end

function ProgressBar:_text(trainer, final)
  local st = self._stage
  local dt = IO.now() - st.t0
  local metrics = self:get_metrics(trainer)
  if not self.tty then
    local m = metrics_text(metrics)
    local count = st.total and fmt("%d/%d batches", st.n, st.total) or fmt("%d batches", st.n)
    local tail = clock(dt) .. ", " .. rate_text(st.n, dt)
    if m ~= "" then tail = tail .. ", " .. m end
    return fmt("%s: %s [%s]", st.desc, count, tail)
  end
  local p = { head = st.desc .. ": ", rate = rate_text(st.n, dt), metrics = {} }
  for _, kv in ipairs(metrics) do
    if kv[1] == "v_num" then p.vnum = "v_num=" .. num(kv[2])
    else p.metrics[#p.metrics + 1] = kv[1] .. "=" .. num(kv[2]) end
  end
  if st.total then
    local eta = st.n > 0 and (st.total - st.n) * dt / st.n or math.huge
    if final then eta = 0 end
    p.count = fmt("%d/%d [%s<%s", st.n, st.total, clock(dt), clock(eta))
    if st.total > 0 then
      p.frac = st.n / st.total
      p.pct = fmt("%3d%%", floor(100 * st.n / st.total))
    end
  else
    p.count = fmt("%dit [%s", st.n, clock(dt))
  end
  return fit_line(p, self:_width() - 1)
end

function ProgressBar:_write(s)
  self.stream:write(s)
  self.stream:flush()
end

function ProgressBar:_draw(trainer, force)
  local st = self._stage
  if not st or not self.tty or not self.enabled then return end
  local t = IO.now()
  if not force then
    if st.n - st.last_n < self.refresh_rate and st.n ~= st.total then return end
    if t - st.last_draw < MIN_INTERVAL and st.n ~= st.total then return end
  end
  st.last_draw, st.last_n = t, st.n
  self:_write("\r" .. self:_text(trainer, st.total ~= nil and st.n >= st.total) .. "\27[K")
  self._line = st
end

-- ends the current terminal line: keep (newline) or erase it
function ProgressBar:_end_line(keep)
  if not self._line then return end
  if keep then self:_write("\n") else self:_write("\r\27[K") end
  self._line = nil
end

-- ---- hooks: fit ---------------------------------------------------------------------------------------

function ProgressBar:on_sanity_check_start(trainer)
  if not self.enabled then return end
  self._saved_train = nil
  self:_begin("sanity", "Sanity Checking", total_of(trainer.num_sanity_val_batches))
  self:_draw(trainer, true)
end

function ProgressBar:on_sanity_check_end()
  if not self.enabled then return end
  self:_end_line(false)
  self._stage = nil
end

function ProgressBar:on_train_epoch_start(trainer)
  if not self.enabled then return end
  self:_end_line(true)
  self._has_train = true
  self:_begin("train", fmt("Epoch %d", trainer.current_epoch or 0), total_of(trainer.num_training_batches))
  self._train = self._stage
  self:_draw(trainer, true)
end

local function loss_of(outputs)
  if outputs == nil then return nil end
  if type(outputs) == "table" and not lt.is_tensor(outputs) then
    local l = rawget(outputs, "loss")
    if l == nil then l = outputs[1] and type(outputs[1]) == "table" and outputs[1].loss end
    outputs = l
  end
  return cbs.to_number(outputs)
end

function ProgressBar:on_train_batch_end(trainer, model, outputs, batch, batch_idx)
  if not self.enabled or not self._train then return end
  local l = loss_of(outputs)
  if l ~= nil then
    self._loss_i = self._loss_i % WINDOW + 1
    self._losses[self._loss_i] = l
    self._loss_n = math.min(self._loss_n + 1, WINDOW)
  end
  self._train.n = (batch_idx or self._train.n) + 1
  if self._stage == self._train then self:_draw(trainer) end
end

function ProgressBar:on_train_epoch_end(trainer)
  if not self.enabled or not self._train then return end
  self._stage = self._train
  if self.tty then
    self:_draw(trainer, true)
    self:_end_line(true)
  else
    self:_write(self:_text(trainer, true) .. "\n")
  end
  self._train = nil
  self._stage = nil
end

function ProgressBar:on_train_end()
  if not self.enabled then return end
  self:_end_line(true)
  self._train, self._stage = nil, nil
end

-- ---- hooks: evaluation ------------------------------------------------------------------------------

local EVAL_DESC = { validation = "Validation", test = "Testing", predict = "Predicting" }

-- The sanity check's total, at its validation's start: the data hooks' loaders (and their counts) arrive
-- after on_sanity_check_start.
function ProgressBar:_sanity_total(trainer)
  local st = self._stage
  if st and st.kind == "sanity" then st.total = total_of(trainer.num_sanity_val_batches) end
end

function ProgressBar:_eval_start(trainer, kind)
  if not self.enabled then return end
  if trainer.sanity_checking then return self:_sanity_total(trainer) end
  local totals = kind == "validation" and trainer.num_val_batches or kind == "test" and trainer.num_test_batches
    or trainer.num_predict_batches
  local total
  if type(totals) == "table" then
    total = 0
    for _, v in ipairs(totals) do
      local t = total_of(v)
      if t == nil then total = nil; break end
      total = total + t
    end
  else
    total = total_of(totals)
  end
  if self._train and self._line == self._train then
    -- keep the training line; draw the evaluation below it
    self:_draw(trainer, true)
    self:_write("\n")
    self._line = nil
    self._below_train = true
  else
    self:_end_line(true)
    self._below_train = false
  end
  self:_begin(kind, EVAL_DESC[kind], total)
  self._eval = self._stage
  self:_draw(trainer, true)
end

function ProgressBar:_eval_batch_end(trainer)
  if not self.enabled or trainer.sanity_checking then
    if self.enabled and self._stage and self._stage.kind == "sanity" then
      self._stage.n = self._stage.n + 1
      self:_draw(trainer)
    end
    return
  end
  if not self._eval then return end
  self._eval.n = self._eval.n + 1
  self:_draw(trainer)
end

function ProgressBar:_eval_end(trainer)
  if not self.enabled or trainer.sanity_checking or not self._eval then return end
  local in_fit = self._train ~= nil
  if self.tty then
    if in_fit then
      self:_end_line(false)
      if self._below_train then self:_write("\27[A") end
      self._stage = self._train
      self._line = self._train
      self:_draw(trainer, true)
    else
      self:_draw(trainer, true)
      self:_end_line(true)
      self._stage = nil
    end
  else
    if not in_fit then self:_write(self:_text(trainer, true) .. "\n") end
    self._stage = self._train
  end
  self._eval = nil
  self._below_train = false
end

function ProgressBar:on_validation_start(trainer) self:_eval_start(trainer, "validation") end
function ProgressBar:on_validation_batch_end(trainer) self:_eval_batch_end(trainer) end
function ProgressBar:on_validation_end(trainer) self:_eval_end(trainer) end
function ProgressBar:on_test_start(trainer) self:_eval_start(trainer, "test") end
function ProgressBar:on_test_batch_end(trainer) self:_eval_batch_end(trainer) end
function ProgressBar:on_test_end(trainer) self:_eval_end(trainer) end
function ProgressBar:on_predict_start(trainer) self:_eval_start(trainer, "predict") end
function ProgressBar:on_predict_batch_end(trainer) self:_eval_batch_end(trainer) end
function ProgressBar:on_predict_end(trainer) self:_eval_end(trainer) end

function ProgressBar:on_exception()
  if self._line then self:_end_line(true) end
  self._stage, self._train, self._eval = nil, nil, nil
end

--- Prints a line without breaking the bar (the bar is redrawn after it).
function ProgressBar:print(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  local had = self._line
  if had then self:_write("\r\27[K") end
  self:_write(concat(parts, "\t") .. "\n")
  if had then
    self._line = nil
    self:_draw(nil, true)
  end
end

-- for lua/lutra/callbacks/rich_progress.lua (the multi-line bar draws the same numbers)
ProgressBar._format = { clock = clock, num = num, rate_text = rate_text, ulen = ulen, utrunc = utrunc,
  total_of = total_of, metrics_text = metrics_text, fit_items = fit_items, EVAL_DESC = EVAL_DESC }

return ProgressBar
