-- examples/cli_args.lua — the command-line parsing the example scripts share: `--name value` options of a known
-- type, `--flag` switches and positional arguments (any word not starting with "-", given to the listed names in
-- order); a wrong option or one positional too many prints the usage on stderr and exits 2, --help prints it and
-- exits 0.
--
--   local opts = require("examples.cli_args")(arg, USAGE, { epochs = "number", out = "string" }, { fast = true },
--     { out = "runs/x", file = "in.txt" },    -- the defaults
--     { "file" })                              -- the positional arguments' names (optional)
return function(argv, usage, known, flags, defaults, positional)
  local opts = {}
  for k, v in pairs(defaults or {}) do opts[k] = v end
  positional = positional or {}
  local n_positional = 0
  local i = 1
  while argv[i] do
    local a = argv[i]
    local k = a:match("^%-%-([%w-]+)$")
    if a == "--help" or a == "-h" then print(usage); os.exit(0)
    elseif k and flags[k] then opts[k] = true; i = i + 1
    elseif not a:match("^%-") then
      n_positional = n_positional + 1
      local name = positional[n_positional]
      if not name then io.stderr:write(usage, "\n"); os.exit(2) end
      opts[name] = a
      i = i + 1
    else
      if not k or not known[k] or argv[i + 1] == nil then io.stderr:write(usage, "\n"); os.exit(2) end
      local v = argv[i + 1]
      if known[k] == "number" then
        v = tonumber(v)
        if not v then io.stderr:write("--", k, " needs a number\n", usage, "\n"); os.exit(2) end
      end
      opts[k] = v
      i = i + 2
    end
  end
  return opts
end
