-- lutra.checkpoint — checkpoint files (safetensors + JSON metadata), lt.save / lt.load, and the trainer's
-- checkpoint contents (dump / restore).
--
--   local ckpt = require "lutra.checkpoint"
--   ckpt.write("run/epoch=3.ckpt", { epoch = 3, state_dict = model_sd, optimizer_states = {...}, ... })
--   local t = ckpt.read("run/epoch=3.ckpt")            -- the same table back (tensors are fresh copies)
--   lt.save("weights.safetensors", model)               -- weights alone (or a {name = tensor} table)
--   local sd = lt.load("weights.safetensors")           -- {name = tensor}
--   lt.load("weights.safetensors", model)               -- into the model; errors name the parameter
--
-- File layout: one safetensors file (any safetensors reader opens it). Every tensor found anywhere in the
-- checkpoint table is a safetensors tensor named by its path of keys joined with "." —
-- `state_dict.<param name>`, `optimizer_states.<i>.state.<param id>.exp_avg` — and the rest of the table
-- is one JSON document in __metadata__ under the key "lutra", where each tensor is replaced by
-- {"$tensor": "<name>"}. The C layer adds "format": "lutra" and "lutra_checksum" (CRC-32 of the whole
-- file) and writes atomically (temp file, fsync, rename, fsync of the directory).
--
-- JSON encoding of Lua values (decoded back to the same values): numbers with the shortest of 15..17
-- significant digits that reads back exactly, non-finite numbers as {"$float": "inf" | "-inf" | "nan"};
-- a table whose keys are exactly 1..n is an array; any other table an object with its keys sorted,
-- where an integer key n is written "#n" and a string key starting with "#" or "$" gets one more "#" in
-- front. Functions, userdata (other than tensors), cycles and float keys are errors naming the path.
-- Decoding uses lua-cjson (a maintained C parser); encoding is here because cjson 2.1 writes numbers
-- with at most 14 digits, which would not restore a learning rate bit for bit.
local lt = require "lutra"
local cjson = require "cjson"

local C = lt._io
local M = {}

local fmt, concat = string.format, table.concat
local floor, huge = math.floor, math.huge

M.FORMAT_VERSION = 1

-- ---- JSON encoding ------------------------------------------------------------------------------

local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ["\b"] = "\\b",
  ["\f"] = "\\f" }
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(ch) return ESC[ch] or fmt("\\u%04x", ch:byte()) end) .. '"'
end

local function number_text(v)
  if v ~= v then return '{"$float":"nan"}' end
  if v == huge then return '{"$float":"inf"}' end
  if v == -huge then return '{"$float":"-inf"}' end
  if v == floor(v) and v > -2 ^ 53 and v < 2 ^ 53 then return fmt("%.0f", v) end
  for digits = 15, 17 do
    local s = fmt("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return fmt("%.17g", v)
end

local function key_text(k, path)
  if type(k) == "number" then
    if k ~= floor(k) or k ~= k or k == huge or k == -huge then
      error(fmt("checkpoint: cannot save %s: key %s is not an integer or a string", path, tostring(k)), 0)
    end
    return quote("#" .. fmt("%.0f", k))
  elseif type(k) == "string" then
    local c = k:sub(1, 1)
    if c == "#" or c == "$" then return quote("#" .. k) end
    return quote(k)
  end
  error(fmt("checkpoint: cannot save %s: a key of type %s (keys are strings or integers)", path, type(k)), 0)
end

local function join(path, k)
  local ks = type(k) == "number" and fmt("%.0f", k) or tostring(k)
  if path == "" then return ks end
  return path .. "." .. ks
end

local function is_array(t)
  local n = 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k ~= floor(k) then return false end
    n = n + 1
  end
  return n > 0 and n == #t and t[n] ~= nil
end

-- Encodes v as JSON; on_tensor(t, name) is called for each tensor and returns nothing.
local function encode(v, on_tensor)
  local out, active = {}, {}
  local function enc(x, path)
    local tx = type(x)
    if tx == "nil" then out[#out + 1] = "null"
    elseif tx == "boolean" then out[#out + 1] = x and "true" or "false"
    elseif tx == "number" then out[#out + 1] = number_text(x)
    elseif tx == "string" then out[#out + 1] = quote(x)
    elseif lt.is_tensor(x) then
      if not on_tensor then error(fmt("checkpoint: cannot save %s: a tensor where only plain values are allowed", path), 0) end
      on_tensor(x, path)
      out[#out + 1] = '{"$tensor":' .. quote(path) .. "}"
    elseif tx == "table" then
      if active[x] then error(fmt("checkpoint: cannot save %s: the table contains itself (a cycle)", path), 0) end
      active[x] = true
      if is_array(x) then
        out[#out + 1] = "["
        for i = 1, #x do
          if i > 1 then out[#out + 1] = "," end
          enc(x[i], join(path, i))
        end
        out[#out + 1] = "]"
      else
        local keys = {}
        for k in pairs(x) do keys[#keys + 1] = k end
        table.sort(keys, function(a, b)
          local ta, tb = type(a), type(b)
          if ta ~= tb then return ta == "number" end
          return a < b
        end)
        out[#out + 1] = "{"
        for i, k in ipairs(keys) do
          if i > 1 then out[#out + 1] = "," end
          out[#out + 1] = key_text(k, join(path, k))
          out[#out + 1] = ":"
          enc(x[k], join(path, k))
        end
        out[#out + 1] = "}"
      end
      active[x] = nil
    else
      error(fmt("checkpoint: cannot save %s: a %s (checkpoints hold tensors, numbers, strings, booleans and tables)",
        path == "" and "the checkpoint" or path, tx), 0)
    end
  end
  enc(v, "")
  return concat(out)
end
M.encode = encode

-- ---- JSON decoding ------------------------------------------------------------------------------

local FLOATS = { nan = 0 / 0, inf = huge, ["-inf"] = -huge }

-- Restores what encode changed; tensors[name] gives the tensor for a placeholder. what names the file.
local function restore(v, tensors, what)
  if v == cjson.null then return nil end
  if type(v) ~= "table" then return v end
  local tname, fname = v["$tensor"], v["$float"]
  if tname ~= nil and next(v, next(v)) == nil then
    local t = tensors and tensors[tname]
    if not t then error(fmt("%s: the metadata refers to tensor '%s', which the file does not hold", what, tostring(tname)), 0) end
    return t
  end
  if fname ~= nil and next(v, next(v)) == nil then
    local x = FLOATS[fname]
    if not x then error(fmt("%s: the metadata holds an unknown float '%s'", what, tostring(fname)), 0) end
    return x
  end
  local r = {}
  for k, x in pairs(v) do
    local key = k
    if type(k) == "string" and k:sub(1, 1) == "#" then
      local rest = k:sub(2)
      if rest:match("^%-?%d+$") then key = tonumber(rest) else key = rest end
    end
    r[key] = restore(x, tensors, what)
  end
  return r
end

--- decode(json_text[, tensors, what]) -> value (the inverse of encode).
function M.decode(text, tensors, what)
  what = what or "checkpoint"
  local ok, v = pcall(cjson.decode, text)
  if not ok then error(fmt("%s: the 'lutra' metadata is not valid JSON (%s)", what, tostring(v)), 0) end
  return restore(v, tensors, what)
end

-- ---- files --------------------------------------------------------------------------------------

--- write(path, tbl): tbl's tensors (anywhere inside) as safetensors tensors, the rest as JSON. Atomic.
function M.write(path, tbl)
  if type(path) ~= "string" then error("save: expected a file path (string), got " .. type(path), 2) end
  if type(tbl) ~= "table" then error("save: " .. path .. ": expected a table to save, got " .. type(tbl), 2) end
  local names, tensors, seen = {}, {}, {}
  local ok, doc = pcall(encode, tbl, function(t, name)
    if seen[name] then error(fmt("checkpoint: cannot save: two tensors named '%s'", name), 0) end
    seen[name] = true
    names[#names + 1] = name
    tensors[#tensors + 1] = t
  end)
  if not ok then error("save: " .. path .. ": " .. tostring(doc):gsub("^checkpoint: ", ""), 2) end
  C.save(path, names, tensors, { lutra = doc })
end

--- read(path) -> tbl, info. info = {lutra = true|false, names = {...}, tensors = {name = tensor},
--- checksum_verified}. A safetensors file from another writer (no "lutra" metadata) gives tbl = nil.
function M.read(path)
  if type(path) ~= "string" then error("load: expected a file path (string), got " .. type(path), 2) end
  local names, tensors, meta, verified = C.load(path)
  local info = { names = names, tensors = tensors, meta = meta, checksum_verified = verified, lutra = false }
  local doc = meta.lutra
  if doc == nil then return nil, info end
  info.lutra = true
  local v = M.decode(doc, tensors, "load: " .. path)
  if type(v) ~= "table" then error("load: " .. path .. ": the 'lutra' metadata is not a JSON object", 2) end
  return v, info
end

-- ---- lt.save / lt.load ---------------------------------------------------------------------------

local function model_state_dict(model)
  local f = rawget(model, "state_dict") or (getmetatable(model) and model.state_dict)
  if type(f) == "function" then return (f(model)) end
  return (lt.nn.state_dict(model))
end

local function is_state_dict(t)
  if next(t) == nil then return false end
  for k, v in pairs(t) do
    if type(k) ~= "string" or not lt.is_tensor(v) then return false end
  end
  return true
end

--- lt.save(path, model_or_state_dict): the weights alone, as a checkpoint with only `state_dict`.
function M.save(path, obj)
  if type(path) ~= "string" then error("lt.save: expected a file path (string) as argument 1, got " .. type(path), 2) end
  if type(obj) ~= "table" then
    error("lt.save: expected a model or a state dict {name = tensor} as argument 2, got " .. type(obj), 2)
  end
  local sd = is_state_dict(obj) and obj or model_state_dict(obj)
  local ok, err = pcall(M.write, path, { state_dict = sd, lutra_version = lt.version })
  if not ok then error("lt.save: " .. tostring(err), 2) end
  return path
end

--- The {name = tensor} state dict stored in path: a lutra checkpoint's `state_dict`, or every tensor of
--- a safetensors file from another writer.
function M.load_state_dict_file(path)
  local v, info = M.read(path)
  if v == nil then return info.tensors end
  if type(v.state_dict) ~= "table" then
    error("load: " .. path .. ": the checkpoint holds no model weights (no state_dict)", 0)
  end
  return v.state_dict
end

--- lt.load(path[, model]): returns the state dict {name = tensor}; with a model, loads it (strictly: names
--- and shapes must match) and returns the model.
function M.load(path, model)
  if type(path) ~= "string" then error("lt.load: expected a file path (string) as argument 1, got " .. type(path), 2) end
  local ok, sd = pcall(M.load_state_dict_file, path)
  if not ok then error("lt.load: " .. tostring(sd), 2) end
  if model == nil then return sd end
  if type(model) ~= "table" then error("lt.load: expected a model table as argument 2, got " .. type(model), 2) end
  local f = rawget(model, "load_state_dict") or (getmetatable(model) and model.load_state_dict)
  local ok2, err = pcall(function()
    if type(f) == "function" then f(model, sd) else lt.nn.load_state_dict(model, sd) end
  end)
  if not ok2 then
    error(fmt("lt.load: %s does not match the model: %s", path, tostring(err):gsub("^[^:]*:%d+: ", "")), 2)
  end
  return model, sd
end

return M
