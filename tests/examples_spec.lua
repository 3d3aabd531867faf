-- examples_spec: every example in examples/ runs end to end in its short mode (--fast) through the lutra
-- binary ($LUTRA_BIN, set by tests/run), exits 0, and prints what it promises (test accuracy, a text
-- sample, the custom loop's progress, the callback's report).
local skip = require("helpers.puc").needs_luajit("runs the examples through the lutra binary, which embeds LuaJIT")
if skip then describe("examples", function() pending(skip) end) return end
local root = os.getenv("PWD") or "."
local bin = os.getenv("LUTRA_BIN")
  or (root .. "/" .. (os.getenv("LUTRA_BUILD_DIR") or "build") .. "/bin/" .. (os.getenv("LUTRA_CONFIG") or "release")
    .. "/cli/lutra")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local have_bin = exists(bin)
local have_data = exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute("mkdir -p " .. tmpdir) == 0)

-- Runs an example; returns its output (stdout and stderr) and exit status.
local function run(script, args)
  local cmd = string.format("cd %q && %q %s %s 2>&1; echo \"EXIT:$?\"", root, bin, script, args or "")
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local status = tonumber(out:match("EXIT:(%d+)%s*$"))
  return out:gsub("EXIT:%d+%s*$", ""), status
end

local function expect_ok(out, status)
  assert(status == 0, "exit status " .. tostring(status) .. ", output:\n" .. out)
end

local function has(out, text)
  assert(out:find(text, 1, true), ("output does not contain %q:\n%s"):format(text, out))
end

local function it_needs(what, name, fn)
  if not have_bin then return pending(name .. " (the lutra binary " .. bin .. " is not built)") end
  if what == "data" and not have_data then
    return pending(name .. " (Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist)")
  end
  return it(name, fn)
end

describe("examples (--fast)", function()
  it_needs("data", "fashion_mnist.lua trains the MLP, keeps the best checkpoint and prints test accuracy", function()
    local out_dir = tmpdir .. "/fm"
    local out, status = run("examples/fashion_mnist.lua", "--fast --out " .. out_dir)
    expect_ok(out, status)
    has(out, "Fashion-MNIST: 1500 train, 500 validation, 1000 test images; model mlp, 2 epochs, batch 64")
    local acc = tonumber(out:match("test accuracy: (%d%.%d+)"))
    assert(acc and acc > 0.5, "test accuracy " .. tostring(acc) .. "\n" .. out)
    local ckpt = out:match("best checkpoint: (%S+%.ckpt)")
    assert(ckpt and exists(ckpt), "no checkpoint file: " .. tostring(ckpt))
    assert(ckpt:find(out_dir .. "/checkpoints/", 1, true), ckpt)
  end)

  it_needs("data", "fashion_mnist.lua finds models/ when run from another directory", function()
    local cmd = string.format("cd %q && %q %q --fast --epochs 1 --out %q 2>&1; echo \"EXIT:$?\"", tmpdir, bin,
      root .. "/examples/fashion_mnist.lua", tmpdir .. "/fm_elsewhere")
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    assert(out:find("EXIT:0", 1, true), out)
    has(out, "test accuracy: ")
  end)

  it_needs("data", "fashion_mnist.lua --model lenet trains LeNet-5", function()
    local out, status = run("examples/fashion_mnist.lua", "--fast --model lenet --epochs 1 --out " .. tmpdir .. "/fm_lenet")
    expect_ok(out, status)
    has(out, "model lenet, 1 epochs")
    local acc = tonumber(out:match("test accuracy: (%d%.%d+)"))
    assert(acc and acc > 0.3, "test accuracy " .. tostring(acc) .. "\n" .. out)
  end)

  it_needs("data", "fashion_mnist.lua rejects an unknown option with its usage", function()
    local out, status = run("examples/fashion_mnist.lua", "--modle lenet")
    assert.are.equal(2, status)
    has(out, "usage: lutra examples/fashion_mnist.lua")
  end)

  it_needs("data", "image_folder.lua writes an image folder of PNG files and trains a CNN on it", function()
    local out_dir = tmpdir .. "/if"
    local out, status = run("examples/image_folder.lua", "--fast --out " .. out_dir)
    expect_ok(out, status)
    has(out, "wrote 600 PNG files under " .. out_dir .. "/images/{train,val}/<class>/")
    has(out, "ImageFolder: 400 training, 200 validation images, 10 classes (00_T_shirt_top ... 09_Ankle_boot)")
    assert(exists(out_dir .. "/images/train/03_Dress"), "no class folder 03_Dress")
    local acc = tonumber(out:match("validation accuracy: (%d%.%d+)"))
    assert(acc and acc > 0.2, "validation accuracy " .. tostring(acc) .. " (chance: 0.1)\n" .. out)
  end)

  it_needs("", "char_rnn.lua trains with TBPTT on GPL-3 and samples text after the prompt", function()
    local out, status = run("examples/char_rnn.lua", "--fast --out " .. tmpdir .. "/cr")
    expect_ok(out, status)
    has(out, "/usr/share/common-licenses/GPL-3: 8000 characters")
    local ppl, uniform = out:match("perplexity ([%d%.]+) per character %(uniform guessing: (%d+)%)")
    assert(ppl and tonumber(ppl) < tonumber(uniform), "perplexity " .. tostring(ppl) .. "\n" .. out)
    local sample = out:match("%-%-%- sample %(temperature 0%.8%) %-%-%-\n(.*)$")
    assert(sample and sample:sub(1, 4) == "The " and #sample >= 100, "sample: " .. tostring(sample))
  end)

  it_needs("", "char_rnn.lua names a text file it cannot read", function()
    local out, status = run("examples/char_rnn.lua", tmpdir .. "/no_such.txt --fast")
    assert.are.equal(1, status)
    has(out, "char_rnn: cannot read the text: " .. tmpdir .. "/no_such.txt: No such file or directory")
  end)

  -- gpt area: examples/gpt.lua (models/gpt.lua) on the poems of Debian's fortunes package
  it_needs("", "gpt.lua trains the GPT with the Trainer, validates and samples text", function()
    local out, status = run("examples/gpt.lua", "--fast --out " .. tmpdir .. "/gpt")
    expect_ok(out, status)
    has(out, "/usr/share/games/fortunes/songs-poems: 20000 characters")
    local distinct = tonumber(out:match("characters, (%d+) distinct"))
    local val = tonumber(out:match("validation loss ([%d%.]+)"))
    assert(val and val < math.log(distinct), "validation loss " .. tostring(val) .. "\n" .. out)
    local sample = out:match("%-%-%- sample %(temperature 0%.8, top_k 10%) %-%-%-\n(.-)\n%-%-%-\n")
    assert(sample and #sample >= 60, "sample: " .. tostring(sample))
  end)

  it_needs("", "gpt.lua names a text file it cannot read", function()
    local out, status = run("examples/gpt.lua", tmpdir .. "/no_such.txt --fast")
    assert.are.equal(1, status)
    has(out, "gpt: cannot read the text: " .. tmpdir .. "/no_such.txt: No such file or directory")
  end)

  -- the command line the examples share (examples/cli_args.lua): positional arguments and --name value options
  it_needs("", "gpt.lua takes its text from a positional FILE between the options", function()
    local path = tmpdir .. "/short.txt"
    local f = assert(io.open(path, "wb"))
    f:write(("abc "):rep(20))
    f:close()
    local out, status = run("examples/gpt.lua", "--fast " .. path .. " --seed 3")
    assert.are.equal(1, status)
    -- --fast sets block-size 32: the 8 validation characters of 80 are too few
    has(out, "gpt: " .. path .. " is too short: the validation split needs more than 33 characters")
  end)

  it_needs("", "the examples reject a bad option, a non-number and one FILE too many with their usage (exit 2)",
    function()
      local scripts = { -- each with an option that takes a number
        { "char_rnn", "--seed", "usage: lutra examples/char_rnn.lua [FILE] [" },
        { "gpt", "--seed", "usage: lutra examples/gpt.lua [FILE] [" },
        { "callbacks", "--epochs", "usage: lutra examples/callbacks.lua [--epochs N] [--fast]\n" },
        { "custom_loop", "--epochs", "usage: lutra examples/custom_loop.lua [--epochs N] [--fast]\n" },
      }
      for _, s in ipairs(scripts) do
        local script, number, usage = "examples/" .. s[1] .. ".lua", s[2], s[3]
        local out, status = run(script, "--fast --bogus 1")
        assert.are.equal(2, status)
        has(out, usage)
        out, status = run(script, "--fast " .. number .. " x")
        assert.are.equal(2, status)
        has(out, number .. " needs a number\n" .. usage)
        out, status = run(script, "--fast " .. number)
        assert.are.equal(2, status)
        has(out, usage)
        -- char_rnn and gpt take one FILE, the others none
        out, status = run(script, "a.txt --fast" .. (usage:find("[FILE]", 1, true) and " b.txt" or ""))
        assert.are.equal(2, status)
        has(out, usage)
        out, status = run(script, "--fast --help")
        assert.are.equal(0, status)
        has(out, usage)
      end
    end)

  it_needs("", "cli_args.lua fills the positional names in order and keeps the defaults of the rest", function()
    local script = tmpdir .. "/cli_args_probe.lua"
    local f = assert(io.open(script, "wb"))
    f:write(string.format("package.path = %q .. '/?.lua;' .. package.path\n", root), [[
local o = require("examples.cli_args")(arg, "usage: probe", { n = "number", s = "string" }, { fast = true },
  { n = 1, s = "d", dst = "default_dst" }, { "src", "dst" })
print(string.format("src=%s dst=%s n=%s (%s) s=%s fast=%s", o.src, o.dst, o.n, type(o.n), o.s, tostring(o.fast)))
]])
    f:close()
    local out, status = run(script, "in.txt --n 5")
    expect_ok(out, status)
    has(out, "src=in.txt dst=default_dst n=5 (number) s=d fast=nil")
    out, status = run(script, "--fast in.txt --s -x out.txt")
    expect_ok(out, status)
    has(out, "src=in.txt dst=out.txt n=1 (number) s=-x fast=true")
    out, status = run(script, "in.txt out.txt extra.txt")
    assert.are.equal(2, status)
    assert.are.equal("usage: probe\n", out)
  end)

  it_needs("", "gan.lua trains a generator and a discriminator in turn and moves the samples to the target", function()
    local out, status = run("examples/gan.lua", "--fast")
    expect_ok(out, status)
    has(out, "8 epochs, the discriminator trains 2 batch(es) per generator batch")
    local d0, d1, steps = out:match("to the target's: ([%d%.]+) %-> ([%d%.]+) %((%d+) optimizer steps%)")
    assert(d0 and tonumber(d1) < tonumber(d0) / 4, out)
    assert.are.equal(512, tonumber(steps)) -- 8 epochs of 64 batches, one optimizer per batch
  end)

  it_needs("data", "custom_loop.lua runs its own epoch loop in the fit loop's slot", function()
    local out, status = run("examples/custom_loop.lua", "--fast")
    expect_ok(out, status)
    has(out, "epoch 0 batch   5: train_loss")
    has(out, "epoch 1 batch  16: train_loss")
    has(out, "done: 2 epochs, 32 optimizer steps")
  end)

  it_needs("data", "callbacks.lua reports throughput, the best val_acc and a per-class table", function()
    local out, status = run("examples/callbacks.lua", "--fast")
    expect_ok(out, status)
    has(out, "TrainingReport: 203530 parameters, up to 2 epochs")
    has(out, "epoch 1: 1500 samples in")
    assert(out:find("TrainingReport: best val_acc 0%.%d+ at epoch %d"), out)
    has(out, "per-class test accuracy (most confused with):")
    for _, name in ipairs { "T-shirt/top", "Trouser", "Ankle boot" } do has(out, "  " .. name) end
    assert(out:find("test accuracy: 0%.%d+"), out)
  end)

  -- modules area (issue 17): the VAE and its PNG grids, read back by Debian's python3-pil
  it_needs("data", "vae.lua trains the VAE, writes reconstruction and sample grids as PNG and prints the test loss",
    function()
      local out_dir = tmpdir .. "/vae"
      local out, status = run("examples/vae.lua", "--fast --out " .. out_dir)
      expect_ok(out, status)
      has(out, "Fashion-MNIST: 2000 train, 500 test images; VAE 784-400-20, 2 epochs, batch 128")
      local loss = tonumber(out:match("test loss: (%d+%.%d+) per image after 2 epochs"))
      -- an untrained decoder scores ~545 (784 pixels x log 2); two epochs on 2000 images get well below
      assert(loss and loss > 100 and loss < 450, "test loss " .. tostring(loss) .. "\n" .. out)
      local p = assert(io.popen("/usr/bin/python3 -c \"import sys; from PIL import Image; " ..
        "print(*[Image.open(f).size + (Image.open(f).mode,) for f in sys.argv[1:]])\" " ..
        out_dir .. "/reconstruction_2.png " .. out_dir .. "/sample_2.png 2>&1"))
      local sizes = p:read("*a")
      p:close()
      assert.are.equal("(242, 62, 'RGB') (242, 242, 'RGB')\n", sizes)
    end)

  it_needs("", "data_workers.lua trains with batches made in two worker states, the same run for the same seed",
    function()
      local out, status = run("examples/data_workers.lua", "--fast")
      expect_ok(out, status)
      has(out, "worker 1 of 2: seed ")
      has(out, "worker 2 of 2: seed ")
      local acc = tonumber(out:match("done: 2 epochs with 2 workers in [%d.]+ s, val_loss [%d.]+, val_acc ([%d.]+)"))
      assert(acc and acc > 0.9, out)
      -- the same seeds and the same metrics again (the workers' lines may come in another order)
      local function summary(text)
        local lines = {}
        for line in text:gmatch("[^\n]+") do lines[#lines + 1] = (line:gsub("in [%d.]+ s", "")) end
        table.sort(lines)
        return table.concat(lines, "\n")
      end
      assert.are.equal(summary(out), summary((run("examples/data_workers.lua", "--fast"))))
    end)
end)
