-- helpers/interactive.lua — busted helper (.busted, every task): the specs' own process is interactive, as the
-- `lutra` binary is, whether busted's stdout is a terminal (busted by hand) or a file (tests/run). A plain
-- interpreter is interactive only with a terminal on stdout (docs/reference/hosts.md), so without this the
-- Trainer's defaults (model summary, progress bar) and warnings would differ between the two ways of running the
-- specs. The rule itself is tested in child processes (tests/hosts_spec.lua), which this does not reach.
require("lutra").set_interactive(true)
