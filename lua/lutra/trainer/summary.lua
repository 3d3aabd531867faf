-- lutra.trainer.summary — the model summary table printed at fit start (Lightning's ModelSummary).
--
--   print(require("lutra.trainer.summary").summarize(model))               -- max_depth = 1
--   require("lutra.trainer.summary").summarize(model, {max_depth = 2})
--
--     | Name | Type       | Params | In sizes  | Out sizes
--   -------------------------------------------------------
--   1 | net  | Sequential | 101 K  | [64 x 784] | [64 x 10]
--   -------------------------------------------------------
--   101 K     Trainable params
--   0         Non-trainable params
--   101 K     Total params
--   0.407     Total estimated model params size (MB)
--
-- Rows: the sub-modules of the model table down to max_depth (names are their paths, as in
-- named_parameters), their class (the metatable's __name), and their parameter count. Parameters
-- directly on the model table count in the totals. "In sizes"/"Out sizes" appear when the model has
-- `example_input_array` (a tensor, or a list of arguments for forward): one forward pass is run in
-- eval mode without gradients, with the RNG state put back afterwards (so a run's randomness does not
-- change), recording each listed module's input and output shapes ("?" when not a tensor).
local lt = require "lutra"

local M = {}
local fmt, concat, floor = string.format, table.concat, math.floor
local compat = require "lutra._compat"
local pack, unpack, maxn = compat.pack, compat.unpack, compat.maxn

--- Lightning's get_human_readable_count: 12 -> "12  ", 1234 -> "1.2 K", 101770 -> "101 K".
function M.human_count(n)
  local labels = { " ", "K", "M", "B", "T" }
  local digits = n > 0 and floor(math.log10(n)) + 1 or 1
  local groups = math.min(math.ceil(digits / 3), #labels)
  local x = n * 10 ^ (-3 * (groups - 1))
  if groups < 2 or x >= 100 then
    return fmt("%d %s", floor(x + 1e-9), labels[groups])
  end
  return fmt("%.1f %s", x, labels[groups])
end

local function type_name(m)
  local mt = getmetatable(m)
  if type(mt) == "table" and type(mt.__name) == "string" then return mt.__name end
  if type(m) == "table" and type(rawget(m, "__name")) == "string" then return rawget(m, "__name") end
  return "table"
end

local function shape_of(v)
  if lt.is_tensor(v) then return v:shape_str() end
  if type(v) == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = shape_of(v[i]) end
    if #parts > 0 then return "{" .. concat(parts, ", ") .. "}" end
  end
  return "?"
end

local function param_counts(m)
  local total, trainable = 0, 0
  for _, p in ipairs(lt.nn.parameters(m)) do
    local n = p:numel()
    total = total + n
    if p:requires_grad() then trainable = trainable + n end
  end
  return total, trainable
end

-- Runs one forward with each row's module wrapped to record shapes. Returns {module = {in, out}}.
local function record_shapes(model, rows, example)
  local shapes = {}
  local saved_forward = {}
  for _, r in ipairs(rows) do
    local m = r.module
    local orig = m.forward
    if type(orig) == "function" then
      saved_forward[m] = { raw = rawget(m, "forward") }
      rawset(m, "forward", function(self, ...)
        local out = pack(orig(self, ...))
        local nin = select("#", ...)
        local out_shape = out.n == 1 and shape_of(out[1]) or shape_of({ unpack(out, 1, out.n) })
        shapes[m] = { nin == 1 and shape_of((...)) or shape_of({ ... }), out_shape }
        return unpack(out, 1, out.n)
      end)
    end
  end
  local modules = lt.nn.modules(model)
  local modes = {}
  for i, m in ipairs(modules) do modes[i] = rawget(m, "training") end
  local rng = lt.get_rng_state()
  lt.nn.train(model, false)
  local args = lt.is_tensor(example) and { example } or example
  local ok, err = pcall(lt.no_grad, function()
    local f = model.forward
    if type(f) ~= "function" then error("the model has no forward", 0) end
    return f(model, unpack(args, 1, maxn(args)))
  end)
  lt.set_rng_state(rng)
  for i, m in ipairs(modules) do rawset(m, "training", modes[i]) end
  for m, s in pairs(saved_forward) do rawset(m, "forward", s.raw) end
  if not ok then return nil, err end
  return shapes
end

--- summarize(model[, {max_depth = 1}]) -> the table as a string.
function M.summarize(model, opts)
  opts = require("lutra.utils.check").check_options("summarize", opts, { max_depth = "integer" })
  local max_depth = opts.max_depth or 1
  local rows = {}
  if max_depth ~= 0 then
    local mods, paths = lt.nn.modules(model)
    for i, m in ipairs(mods) do
      local p = paths[i]
      if p ~= nil and m ~= model then
        local depth = select(2, p:gsub("%.", "")) + 1
        if max_depth < 0 or depth <= max_depth then
          local total = param_counts(m)
          rows[#rows + 1] = { module = m, name = p, type = type_name(m), params = total }
        end
      end
    end
  end
  local total, trainable = param_counts(model)

  local example = type(model) == "table" and rawget(model, "example_input_array")
  local shapes
  if example ~= nil and example ~= false and #rows > 0 then
    local s = record_shapes(model, rows, example)
    shapes = s
  end

  local header = { "", "Name", "Type", "Params" }
  if shapes then header[5], header[6] = "In sizes", "Out sizes" end
  local cols = { header }
  for i, r in ipairs(rows) do
    local line = { tostring(i), r.name, r.type, M.human_count(r.params) }
    if shapes then
      local s = shapes[r.module]
      line[5], line[6] = s and s[1] or "?", s and s[2] or "?"
    end
    cols[#cols + 1] = line
  end
  local widths = {}
  for _, line in ipairs(cols) do
    for j, cell in ipairs(line) do widths[j] = math.max(widths[j] or 0, #cell) end
  end
  local out = {}
  local function row_text(line)
    local cells = {}
    for j, cell in ipairs(line) do cells[j] = cell .. string.rep(" ", widths[j] - #cell) end
    return (concat(cells, " | "):gsub("%s+$", ""))
  end
  local head = row_text(header)
  local rule_len = #head
  for i = 2, #cols do rule_len = math.max(rule_len, #row_text(cols[i])) end
  local rule = string.rep("-", rule_len)
  out[#out + 1] = head
  out[#out + 1] = rule
  for i = 2, #cols do out[#out + 1] = row_text(cols[i]) end
  if #cols > 1 then out[#out + 1] = rule end
  local function pad(s) return s .. string.rep(" ", math.max(1, 10 - #s)) end
  out[#out + 1] = pad(M.human_count(trainable)) .. "Trainable params"
  out[#out + 1] = pad(M.human_count(total - trainable)) .. "Non-trainable params"
  out[#out + 1] = pad(M.human_count(total)) .. "Total params"
  out[#out + 1] = pad(fmt("%.3f", total * 4 / 1e6)) .. "Total estimated model params size (MB)"
  return concat(out, "\n")
end

--- Numbers behind the table: {total = n, trainable = n, rows = {{name, type, params}...}}.
function M.counts(model, opts)
  opts = opts or {}
  local max_depth = opts.max_depth or 1
  local rows = {}
  local mods, paths = lt.nn.modules(model)
  for i, m in ipairs(mods) do
    local p = paths[i]
    if p ~= nil and m ~= model then
      local depth = select(2, p:gsub("%.", "")) + 1
      if max_depth < 0 or depth <= max_depth then
        rows[#rows + 1] = { name = p, type = type_name(m), params = (param_counts(m)) }
      end
    end
  end
  local total, trainable = param_counts(model)
  return { total = total, trainable = trainable, rows = rows }
end

return M
