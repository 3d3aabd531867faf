-- plugin/lutra_suggest.lua — the commands of examples/nvim (lua/lutra_suggest/init.lua).
--   :LutraTrain      start learning the current buffer in the background
--   :LutraSuggest    show how the text before the cursor goes on
--   :LutraStop       stop the background training
vim.api.nvim_create_user_command("LutraTrain", function() require("lutra_suggest").start(0) end, {})
vim.api.nvim_create_user_command("LutraSuggest", function() require("lutra_suggest").show(20) end, {})
vim.api.nvim_create_user_command("LutraStop", function() require("lutra_suggest").stop() end, {})
