-- lutra.cli — the config CLI, LightningCLI's idea for lutra (docs/reference/cli.md):
--
--   lutra fit CONFIG.lua [--trainer.K V] [--model.K V] [--data.K V] [--ckpt_path P] [--print_config] [--help]
--   lutra validate|test|predict CONFIG.lua ...
--
-- CONFIG.lua returns {model = <model table>, data = <lt.DataModule, a table with *_dataloader methods, or
-- nil (the model's own hooks)>, trainer = {Trainer options}}. An override is typed by what it overrides: a
-- Trainer option by the option table (lt.Trainer._option_list, the table the Trainer checks its options
-- with), a model or data field by its current value. core/cli/main.c runs M.main(command, args).
local lt = require "lutra"
local util = require "lutra.utils.check"

local M = {}

local fmt = string.format

local COMMANDS = { fit = true, validate = true, test = true, predict = true }
local SECTIONS = { "trainer", "model", "data" }

local function usage(cmd)
  return fmt("usage: lutra %s CONFIG.lua [--trainer.KEY VALUE] [--model.KEY VALUE] [--data.KEY VALUE] " ..
    "[--ckpt_path PATH] [--print_config] [--help]\n", cmd)
end

-- A CLI error: the message and the usage on stderr, exit status 1, no traceback.
local function fail(msg) error({ lutra_cli = true, msg = msg }, 0) end

-- the fields of a model or datamodule that the command line may set: numbers, strings, booleans
local function settable_fields(obj)
  local fields = {}
  if type(obj) ~= "table" then return fields end
  for k, v in pairs(obj) do
    local tv = type(v)
    if type(k) == "string" and k:sub(1, 1) ~= "_" and k ~= "trainer" and
      (tv == "number" or tv == "string" or tv == "boolean") then
      fields[k] = v
    end
  end
  return fields
end

local function type_of(v)
  if type(v) == "number" then return v == math.floor(v) and "integer" or "number" end
  return type(v)
end

-- text -> value of the wanted type ("integer", "number", "boolean", "string", "boolean|integer"), or nil and
-- what is wrong
local function parse_value(text, want)
  local alts = {}
  for ty in want:gmatch("[^|]+") do alts[#alts + 1] = ty end
  for _, ty in ipairs(alts) do
    if ty == "boolean" then
      if text == "true" then return true end
      if text == "false" then return false end
    elseif ty == "integer" then
      local n = tonumber(text)
      if n and n == math.floor(n) then return n end
    elseif ty == "number" then
      local n = tonumber(text)
      if n then return n end
    elseif ty == "string" then
      return text
    end
  end
  return nil, fmt("expects %s, got '%s'", table.concat(alts, " or "), text)
end

-- " (did you mean 'x'?)" for the known name nearest to `name`, when one is near enough (util.closest)
local function did_you_mean(name, known)
  local best = util.closest(name, known)
  return best and fmt(" (did you mean '%s'?)", best) or ""
end

local function load_config(path)
  if path == nil then fail("no CONFIG.lua given") end
  local chunk, err = loadfile(path)
  if not chunk then fail(fmt("cannot load the config %s: %s", path, err)) end
  local ok, cfg = pcall(chunk)
  if not ok then error(fmt("the config %s raised: %s", path, tostring(cfg)), 0) end
  if type(cfg) ~= "table" then fail(fmt("the config %s must return a table {model=, data=, trainer=}, got %s", path,
    type(cfg))) end
  for k in pairs(cfg) do
    if k ~= "model" and k ~= "data" and k ~= "trainer" then
      fail(fmt("the config %s: unknown key '%s'%s (known keys: data, model, trainer)", path, tostring(k),
        did_you_mean(tostring(k), SECTIONS)))
    end
  end
  if type(cfg.model) ~= "table" then fail(fmt("the config %s has no model (model = <model table>)", path)) end
  if cfg.trainer ~= nil and type(cfg.trainer) ~= "table" then
    fail(fmt("the config %s: trainer must be a table of Trainer options, got %s", path, type(cfg.trainer)))
  end
  if cfg.data ~= nil and type(cfg.data) ~= "table" then
    fail(fmt("the config %s: data must be a lt.DataModule or a table with *_dataloader methods, got %s", path,
      type(cfg.data)))
  end
  return cfg
end

local function trainer_options()
  local by_name, names = {}, {}
  for _, o in ipairs(lt.Trainer._option_list()) do by_name[o.name] = o; names[#names + 1] = o.name end
  return by_name, names
end

-- --help: one line per option, with its type and default (the config's values for model and data)
local function help_text(cmd, cfg)
  local lines = { usage(cmd), "Trainer options (--trainer.KEY VALUE; default, type):" }
  local tcfg = cfg and cfg.trainer or {}
  for _, o in ipairs(lt.Trainer._option_list()) do
    local cur = tcfg[o.name]
    local shown = o.default
    if cur ~= nil and type(cur) ~= "table" then shown = fmt("%s (config; default %s)", tostring(cur), o.default) end
    lines[#lines + 1] = fmt("  --trainer.%-34s %-16s default %s: %s", o.name, o.type == "table" and "(config only)"
      or o.type:upper(), shown, o.help)
  end
  for _, sec in ipairs { "model", "data" } do
    local fields = settable_fields(cfg and cfg[sec])
    local keys = util.sorted_keys(fields)
    lines[#lines + 1] = ""
    lines[#lines + 1] = fmt("%s options (--%s.KEY VALUE; the config's fields, typed by their value):",
      sec == "model" and "Model" or "Data", sec)
    if #keys == 0 then lines[#lines + 1] = "  (none)" end
    for _, k in ipairs(keys) do
      local v = fields[k]
      lines[#lines + 1] = fmt("  --%s.%-36s %-16s default %s", sec, k, type_of(v):upper(),
        type(v) == "string" and fmt("%q", v) or tostring(v))
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Other options:"
  lines[#lines + 1] = "  --ckpt_path PATH                          a checkpoint (fit: resume from it; the others: " ..
    'its weights, or "best", "last")'
  lines[#lines + 1] = "  --print_config                            print the resolved config (YAML) and exit"
  lines[#lines + 1] = "  --help, -h                                this help"
  return table.concat(lines, "\n") .. "\n"
end

-- args -> {config=, overrides = {{section, key, text}...}, ckpt_path=, print_config=, help=}
local function parse_args(args)
  local r = { overrides = {} }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--help" or a == "-h" then
      r.help = true
    elseif a == "--print_config" then
      r.print_config = true
    elseif a:sub(1, 2) == "--" then
      local body = a:sub(3)
      local key, val = body:match("^([^=]+)=(.*)$")
      key = key or body
      if val == nil then
        val = args[i + 1]
        if val == nil then fail(fmt("option --%s needs a value", key)) end
        i = i + 1
      end
      if key == "ckpt_path" then
        r.ckpt_path = val
      else
        local sec, k = key:match("^(%a+)%.(.+)$")
        if sec == nil or (sec ~= "trainer" and sec ~= "model" and sec ~= "data") then
          fail(fmt("unknown option --%s%s (options are --trainer.KEY, --model.KEY, --data.KEY, --ckpt_path, " ..
            "--print_config, --help)", key, did_you_mean(sec or key, { "trainer", "model", "data", "ckpt_path",
            "print_config", "help" })))
        end
        r.overrides[#r.overrides + 1] = { sec, k, val }
      end
    elseif r.config == nil then
      r.config = a
    else
      fail(fmt("more than one config given (%s, %s)", r.config, a))
    end
    i = i + 1
  end
  return r
end

-- the overrides into cfg (trainer options typed by the option table; model/data fields by their value)
local function apply_overrides(cfg, overrides)
  local topts, tnames = trainer_options()
  cfg.trainer = cfg.trainer or {}
  for _, ov in ipairs(overrides) do
    local sec, k, text = ov[1], ov[2], ov[3]
    if sec == "trainer" then
      local o = topts[k]
      if o == nil then
        fail(fmt("unknown Trainer option --trainer.%s%s", k, did_you_mean(k, tnames)))
      end
      if o.type == "table" then fail(fmt("--trainer.%s cannot be set from the command line (set it in the config)", k)) end
      local v, err = parse_value(text, o.type)
      if v == nil then fail(fmt("--trainer.%s %s", k, err)) end
      local bad = o.check(v)
      if bad then fail(fmt("--trainer.%s %s, got %s", k, bad, text)) end
      cfg.trainer[k] = v
    else
      local obj = cfg[sec]
      if obj == nil then fail(fmt("--%s.%s: the config has no %s", sec, k, sec)) end
      local fields = settable_fields(obj)
      local cur = fields[k]
      if cur == nil then
        local names = util.sorted_keys(fields)
        fail(fmt("unknown %s option --%s.%s%s (known: %s)", sec, sec, k, did_you_mean(k, names),
          #names > 0 and table.concat(names, ", ") or "none"))
      end
      local want = type_of(cur)
      if want == "integer" then want = "number" end -- a field holding 2 may be given 0.5
      local v, err = parse_value(text, want)
      if v == nil then fail(fmt("--%s.%s %s (its value in the config is %s)", sec, k, err, tostring(cur))) end
      obj[k] = v
    end
  end
end

-- v as a YAML scalar, quoted as the loggers' to_yaml quotes it
local function scalar(v) return (require("lutra.loggers").to_yaml({ x = v }):match("^x: (.-)\n$")) end

-- The trainer section of --print_config: every option in the documented order with the value the Trainer runs
-- with (lt.Trainer._resolve_options: the config's, the command line's, else the default), as LightningCLI prints
-- the whole resolved config. An option with no value to write down prints null and its default's meaning; the
-- callbacks by name, a logger object by its tostring.
local function trainer_yaml(tcfg)
  local resolved = lt.Trainer._resolve_options(tcfg)
  local lines = {}
  for _, o in ipairs(lt.Trainer._option_list()) do
    local v = resolved[o.name]
    if v == nil then
      lines[#lines + 1] = fmt("%s: null%s", o.name, o.default ~= "nil" and "  # default " .. o.default or "")
    elseif o.name == "callbacks" then
      local list = (next(v) ~= nil and v[1] == nil) and { v } or v -- (one callback, as the Trainer takes it)
      local state_key = require("lutra.callbacks").state_key
      if #list == 0 then lines[#lines + 1] = "callbacks: []" else lines[#lines + 1] = "callbacks:" end
      for _, cb in ipairs(list) do lines[#lines + 1] = "  - " .. scalar(state_key(cb)) end
    elseif type(v) == "table" then -- a logger or a list of them
      local list = type(v.log_metrics) == "function" and { v } or v
      lines[#lines + 1] = o.name .. ":"
      for _, l in ipairs(list) do lines[#lines + 1] = "  - " .. scalar(tostring(l)) end
    else
      lines[#lines + 1] = o.name .. ": " .. scalar(v)
    end
  end
  return lines
end

local function config_yaml(cmd, cfg, ckpt_path)
  local to_yaml = require("lutra.loggers").to_yaml
  local out = { "# lutra " .. cmd }
  for _, sec in ipairs(SECTIONS) do
    out[#out + 1] = sec .. ":"
    local lines = {}
    if sec == "trainer" then
      lines = trainer_yaml(cfg.trainer)
    else
      for line in to_yaml(settable_fields(cfg[sec])):gmatch("[^\n]+") do lines[#lines + 1] = line end
    end
    for _, line in ipairs(lines) do out[#out + 1] = "  " .. line end
  end
  out[#out + 1] = "ckpt_path: " .. (ckpt_path and scalar(ckpt_path) or "null")
  return table.concat(out, "\n") .. "\n"
end

local function print_results(results)
  for i, r in ipairs(results or {}) do
    local keys = util.sorted_keys(r)
    if #results > 1 then io.stdout:write(fmt("dataloader %d:\n", i - 1)) end
    for _, k in ipairs(keys) do io.stdout:write(fmt("%s %.6g\n", k, r[k])) end
  end
end

local function run(cmd, args)
  local r = parse_args(args)
  if r.help then
    local cfg = r.config and load_config(r.config) or nil
    io.stdout:write(help_text(cmd, cfg))
    return 0
  end
  local cfg = load_config(r.config)
  apply_overrides(cfg, r.overrides)
  if r.print_config then
    io.stdout:write(config_yaml(cmd, cfg, r.ckpt_path))
    return 0
  end
  local trainer = lt.Trainer(cfg.trainer)
  local opts = { ckpt_path = r.ckpt_path }
  if cfg.data ~= nil then opts.datamodule = cfg.data end
  if cmd == "fit" then
    trainer:fit(cfg.model, opts)
  else
    local res = trainer[cmd](trainer, cfg.model, opts)
    if cmd ~= "predict" then print_results(res) end
  end
  return 0
end

--- core/cli/main.c: `lutra fit|validate|test|predict ...` -> the exit status (0 ok, 1 a usage error; a run's
--- error raises, and the binary prints it with its traceback and exits 1).
function M.main(cmd, args)
  if not COMMANDS[cmd] then
    io.stderr:write(fmt("lutra: unknown command '%s' (fit, validate, test, predict)\n", tostring(cmd)))
    return 1
  end
  local ok, res = pcall(run, cmd, args)
  if ok then return res end
  if type(res) == "table" and res.lutra_cli then
    io.stderr:write(fmt("lutra %s: %s\n", cmd, res.msg), usage(cmd))
    return 1
  end
  error(res, 0)
end

M._parse_value = parse_value
return M
