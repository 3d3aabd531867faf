-- tests/helpers/ser.lua — a Lua value as Lua source (tables, strings, numbers to 17 digits, booleans): what the
-- multi-process scripts write for the spec to read back with dofile.
local function ser(x)
  if type(x) == "table" then
    local parts = {}
    for k, v in pairs(x) do
      parts[#parts + 1] = "[" .. (type(k) == "string" and string.format("%q", k) or tostring(k)) .. "]=" .. ser(v)
    end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif type(x) == "string" then return string.format("%q", x)
  elseif type(x) == "number" then return string.format("%.17g", x)
  else return tostring(x) end
end

return ser
