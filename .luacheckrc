-- .luacheckrc — luacheck's settings for lutra (`luacheck lua models examples tests bench`, run by .ci/run).
std = "luajit"
-- Most code keeps to 120 columns; a line may run to 130 rather than be broken mid-expression.
-- Long string literals (error texts, expected messages) are not broken at all.
max_line_length = 130
max_string_line_length = false
-- Hooks and callbacks have fixed signatures (self, trainer, model, batch, batch_idx, ...): a hook that uses
-- only some of its arguments is the normal case, not a mistake.
unused_args = false

-- the specs run under busted (describe, it, assert.*, spy, ...)
files["tests"] = { std = "+busted" }
-- fuzz_spec is a table with one row per (call, expected message): a row stays on one line
files["tests/fuzz_spec.lua"] = { std = "+busted", max_line_length = false }
-- `not (x >= 0)` is how lutra rejects NaN along with out-of-range numbers (NaN fails every comparison):
-- W581's suggested `x < 0` would let NaN through.
ignore = { "581" }
