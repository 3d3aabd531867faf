-- readme_spec: the README's example must stay true — it is extracted and run (one epoch of 30 batches).
describe("README", function()
  it("its model-table example trains with the Trainer and logs train_loss", function()
    local f = assert(io.open("README.md"))
    local text = f:read("*a")
    f:close()
    local code = text:match("```lua\n(.-)```")
    assert.truthy(code, "README has a ```lua block")
    local patched, n = code:gsub("lt%.Trainer{max_epochs = 2}:fit%(model, loader%)",
      "local trainer = lt.Trainer{max_epochs = 1, limit_train_batches = 30, enable_progress_bar = false,\n" ..
      "  enable_model_summary = false, logger = false, enable_checkpointing = false}\n" ..
      "trainer:fit(model, loader)\nreturn trainer")
    assert.are.equal(1, n, "the README's Trainer line is where the test expects it")
    local chunk = assert(loadstring(patched, "=README.md"))
    local trainer = chunk()
    assert.are.equal(30, trainer.global_step)
    assert.is_number(trainer.callback_metrics.train_loss)
    assert.is_true(trainer.callback_metrics.train_loss < 2.3, "the loss fell below chance level")
  end)
end)
