-- api_rule.lua — the rule a call of lutra's public API must follow, shared by the API walk
-- (tests/api_args_spec.lua) and the API fuzzer (tests/fuzz/api_fuzz.lua): the call works, or it raises an error
-- whose message names the function (one of `names`), and never a Lua runtime error from inside lutra
-- (`attempt to index/call/compare ...`). A crash or a sanitizer report ends the process: the fuzzer's runner
-- sees that.
local M = {}

local function escape(s) return (s:gsub("%p", "%%%0")) end

--- Whether msg (an error message without its "file:line: " position) names the function `name`: as the
--- message's subject ("all: ...", "Linear(3 -> 4): ...", "lt.optim.SGD: ...") or quoted ("bad argument #1 to
--- 'all' (...)", "calling 'add_' on bad self").
function M.names(msg, name)
  local p = escape(name)
  return msg:find("^" .. p .. "[:%s(]") ~= nil or msg:find("'" .. p .. "'") ~= nil
    or msg:find("^[%w_]+%." .. "[%w_.]-" .. p .. "[:%s(]") ~= nil
end

-- The core's op behind a public name that reaches it under another: its message names the core's op. An in-place
-- form (sub_, exp_) is named by its op (sub, exp) with "in place" in the text, so it needs no row here.
local CORE_OP = {
  argmax = "max", argmin = "min",
  max = "maximum", min = "minimum", -- x:max(y), x:min(y): the elementwise forms
}

--- nil when a call's outcome (pcall's ok and error) follows the rule for a function called any of `names`;
--- else the message that breaks it.
function M.violation(ok, err, names)
  if ok then return nil end
  local text = tostring(err)
  local msg = text:gsub("^[^\n]-:%d+: ", "")
  if text:find("attempt to ", 1, true) then return text end
  for _, n in ipairs(names) do
    if M.names(msg, n) or (CORE_OP[n] and M.names(msg, CORE_OP[n])) then return nil end
    local stem = n:match("^(.+)_$")
    if stem and M.names(msg, stem) then return nil end
  end
  return text
end

return M
