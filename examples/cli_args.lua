-- examples/cli_args.lua — the command-line parsing the example scripts share: `--name value` options of a known
-- type, and `--flag` switches; a wrong option prints the usage on stderr and exits 2, --help prints it and exits 0.
--
--   local opts = require("examples.cli_args")(arg, USAGE, { epochs = "number", out = "string" }, { fast = true },
--     { out = "runs/x" })    -- the defaults
return function(argv, usage, known, flags, defaults)
  local opts = {}
  for k, v in pairs(defaults or {}) do opts[k] = v end
  local i = 1
  while argv[i] do
    local a = argv[i]
    local k = a:match("^%-%-([%w-]+)$")
    if a == "--help" or a == "-h" then print(usage); os.exit(0)
    elseif k and flags[k] then opts[k] = true; i = i + 1
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
