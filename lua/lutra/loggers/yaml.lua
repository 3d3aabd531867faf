-- loggers/yaml.lua — hyper-parameters as YAML text: the hparams.yaml of CSVLogger and TensorBoardLogger, and
-- `lutra fit --print_config` (lua/lutra/cli/init.lua).
local lt = require "lutra"
local sorted_keys = require("lutra.utils.check").sorted_keys

local M = {}
local fmt, concat = string.format, table.concat

--- The text of a finite number: an integer as one, else the shortest decimal that reads back as it.
function M.number(v)
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return fmt("%.0f", v) end
  for digits = 15, 16 do
    local s = fmt("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return fmt("%.17g", v)
end

local function yaml_string(s)
  if s:match("^[%w_][%w_%.%-/ ]*$") and not s:match(" $") and not tonumber(s)
    and not ({ ["true"] = 1, ["false"] = 1, ["null"] = 1, ["yes"] = 1, ["no"] = 1, ["on"] = 1, ["off"] = 1,
      ["~"] = 1 })[s:lower()] then
    return s
  end
  return '"' .. s:gsub('[%c"\\]', function(ch)
    return ({ ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t" })[ch] or fmt("\\x%02x", ch:byte())
  end) .. '"'
end

local function yaml_scalar(v)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then return ".nan" end
    if v == math.huge then return ".inf" end
    if v == -math.huge then return "-.inf" end
    return M.number(v)
  elseif tv == "boolean" then return v and "true" or "false"
  elseif tv == "string" then return yaml_string(v)
  elseif lt.is_tensor(v) then
    if v:numel() == 1 then return M.number(v:item()) end
    return yaml_string("tensor " .. v:shape_str())
  end
  return yaml_string(tostring(v))
end

--- YAML text of a table of hyper-parameters (nested tables indented; lists as "- item").
function M.to_yaml(t)
  local out = {}
  local seen = {}
  local function emit(tbl, indent)
    if seen[tbl] then out[#out + 1] = indent .. "# (cycle)"; return end
    seen[tbl] = true
    local n = #tbl
    local is_list = n > 0
    for k in pairs(tbl) do if type(k) ~= "number" or k < 1 or k > n or k ~= math.floor(k) then is_list = false end end
    if is_list then
      for i = 1, n do
        local v = tbl[i]
        if type(v) == "table" and not lt.is_tensor(v) then
          if next(v) == nil then out[#out + 1] = indent .. "- {}"
          else out[#out + 1] = indent .. "-"; emit(v, indent .. "  ") end
        else
          out[#out + 1] = indent .. "- " .. yaml_scalar(v)
        end
      end
    else
      for _, k in ipairs(sorted_keys(tbl)) do
        local v = tbl[k]
        local key = yaml_string(tostring(k))
        if type(v) == "table" and not lt.is_tensor(v) then
          if next(v) == nil then out[#out + 1] = indent .. key .. ": {}"
          else out[#out + 1] = indent .. key .. ":"; emit(v, indent .. "  ") end
        elseif type(v) ~= "function" then -- (functions are not hyper-parameters one can write down)
          out[#out + 1] = indent .. key .. ": " .. yaml_scalar(v)
        end
      end
    end
    seen[tbl] = nil
  end
  emit(t, "")
  if #out == 0 then return "{}\n" end
  return concat(out, "\n") .. "\n"
end

return M
