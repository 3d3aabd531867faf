-- vocab_ports_spec.lua — the model and optimizer construction of five pytorch/examples programs (dcgan,
-- siamese_network, super_resolution, mnist_rnn, time_sequence_prediction),
-- written as a PyTorch user ports them: each line of the original is
-- quoted above its lutra form, which keeps PyTorch's positional arguments, tuples as lists, keyword arguments in
-- one table. Each port then trains a step or two on random data of the example's shapes (sizes scaled down), so a
-- regression in any name these programs use breaks a test here.
local lt = require "lutra"

local nn, F, optim, init = lt.nn, lt.F, lt.optim, lt.nn.init
local StepLR = lt.optim.lr_scheduler.StepLR

-- one optimizer step of loss_fn; returns the loss
local function step(optimizer, loss_fn)
  optimizer:zero_grad()
  local loss = loss_fn()
  loss:backward()
  optimizer:step()
  return loss:item()
end

describe("dcgan (pytorch/examples dcgan/main.py)", function()
  -- opt.nz = 100, opt.ngf = opt.ndf = 64 in the example; smaller here, the same layers
  local nz, ngf, ndf, nc = 16, 8, 8, 3

  -- def weights_init(m):
  --     classname = m.__class__.__name__
  --     if classname.find('Conv') != -1: torch.nn.init.normal_(m.weight, 0.0, 0.02)
  --     elif classname.find('BatchNorm') != -1: torch.nn.init.normal_(m.weight, 1.0, 0.02); torch.nn.init.zeros_(m.bias)
  local function weights_init(m)
    local classname = m:class_name()
    if classname:find("Conv") then
      init.normal_(m.weight, 0.0, 0.02)
    elseif classname:find("BatchNorm") then
      init.normal_(m.weight, 1.0, 0.02)
      init.zeros_(m.bias)
    end
  end

  local Generator = nn.Module:extend("Generator")
  function Generator:init(ngpu)
    self.ngpu = ngpu
    self.main = nn.Sequential(
      nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, { bias = false }),       -- nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False)
      nn.BatchNorm2d(ngf * 8),
      nn.ReLU(true),                                                    -- nn.ReLU(True)
      nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ngf * 4),
      nn.ReLU(true),
      nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ngf * 2),
      nn.ReLU(true),
      nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ngf),
      nn.ReLU(true),
      nn.ConvTranspose2d(ngf, nc, 4, 2, 1, { bias = false }),
      nn.Tanh())
  end
  function Generator:forward(input) return self.main(input) end

  local Discriminator = nn.Module:extend("Discriminator")
  function Discriminator:init(ngpu)
    self.ngpu = ngpu
    self.main = nn.Sequential(
      nn.Conv2d(nc, ndf, 4, 2, 1, { bias = false }),                   -- nn.Conv2d(nc, ndf, 4, 2, 1, bias=False)
      nn.LeakyReLU(0.2, { inplace = true }),                            -- nn.LeakyReLU(0.2, inplace=True)
      nn.Conv2d(ndf, ndf * 2, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ndf * 2),
      nn.LeakyReLU(0.2, { inplace = true }),
      nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ndf * 4),
      nn.LeakyReLU(0.2, { inplace = true }),
      nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, { bias = false }),
      nn.BatchNorm2d(ndf * 8),
      nn.LeakyReLU(0.2, { inplace = true }),
      nn.Conv2d(ndf * 8, 1, 4, 1, 0, { bias = false }),
      nn.Sigmoid())
  end
  function Discriminator:forward(input) return self.main(input):view(-1, 1):squeeze(2) end

  it("builds, initialises with weights_init and trains D and G a step with BCELoss and Adam", function()
    lt.manual_seed(1)
    local netG = Generator(1)
    netG:apply(weights_init)
    local netD = Discriminator(1)
    netD:apply(weights_init)
    assert.is_nil(netD.main[1].bias)
    local bn = netD.main[4]
    assert.is_true(math.abs(bn.weight:mean():item() - 1) < 0.05) -- normal_(m.weight, 1.0, 0.02)
    assert.are.equal(0, bn.bias:abs():sum():item())
    assert.is_true(netD.main[1].weight:std():item() < 0.03) -- normal_(m.weight, 0.0, 0.02)

    local criterion = nn.BCELoss()
    -- optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    local optimizerD = optim.Adam(netD:parameters(), { lr = 0.0002, betas = { 0.5, 0.999 } })
    local optimizerG = optim.Adam(netG:parameters(), { lr = 0.0002, betas = { 0.5, 0.999 } })

    local b = 2
    local real = lt.rand(b, nc, 64, 64) * 2 - 1
    local noise = lt.randn(b, nz, 1, 1)
    local fake = netG(noise)
    assert.are.same({ b, nc, 64, 64 }, fake:shape())
    local errD = step(optimizerD, function()
      local errD_real = criterion(netD(real), lt.ones(b))
      local errD_fake = criterion(netD(fake:detach()), lt.zeros(b))
      return errD_real + errD_fake
    end)
    local errG = step(optimizerG, function() return criterion(netD(netG(noise)), lt.ones(b)) end)
    assert.is_true(errD > 0 and errG > 0)
  end)
end)

describe("siamese_network (pytorch/examples siamese_network/main.py)", function()
  local SiameseNetwork = nn.Module:extend("SiameseNetwork")
  function SiameseNetwork:init()
    -- torchvision's resnet18 is not lutra's to provide: its first layers and its pooling stand in for it, with the
    -- example's replacement of conv1:
    -- self.resnet.conv1 = nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
    local conv1 = nn.Conv2d(1, 64, { kernel_size = { 7, 7 }, stride = { 2, 2 }, padding = { 3, 3 }, bias = false })
    self.resnet = nn.Sequential(conv1, nn.BatchNorm2d(64), nn.ReLU(true), nn.MaxPool2d(3, 2, 1),
      nn.AdaptiveAvgPool2d({ 1, 1 }))
    self.fc_in_features = 64
    -- self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 256), nn.ReLU(inplace=True), nn.Linear(256, 1))
    self.fc = nn.Sequential(
      nn.Linear(self.fc_in_features * 2, 256),
      nn.ReLU({ inplace = true }),
      nn.Linear(256, 1))
    self.sigmoid = nn.Sigmoid()
    -- self.resnet.apply(self.init_weights); self.fc.apply(self.init_weights)
    self.resnet:apply(function(m) self:init_weights(m) end)
    self.fc:apply(function(m) self:init_weights(m) end)
  end
  -- if isinstance(m, nn.Linear): torch.nn.init.xavier_uniform_(m.weight); m.bias.data.fill_(0.01)
  function SiameseNetwork:init_weights(m)
    if nn.isinstance(m, nn.Linear) then
      init.xavier_uniform_(m.weight)
      lt.no_grad(function() m.bias:fill_(0.01) end)
    end
  end
  function SiameseNetwork:forward_once(x)
    local output = self.resnet(x)
    return output:view(output:size()[1], -1)                            -- output.view(output.size()[0], -1)
  end
  function SiameseNetwork:forward(input1, input2)
    local output1 = self:forward_once(input1)
    local output2 = self:forward_once(input2)
    local output = lt.cat({ output1, output2 }, 2)                      -- torch.cat((output1, output2), 1)
    output = self.fc(output)
    return self.sigmoid(output)
  end

  it("builds, initialises Linear layers through isinstance, trains with Adadelta + StepLR, scores with view_as",
    function()
      lt.manual_seed(2)
      local model = SiameseNetwork()
      assert.is_true((model.fc[1].bias - 0.01):abs():max():item() < 1e-7) -- init_weights reached the Linear layers
      local optimizer = optim.Adadelta(model:parameters(), { lr = 1.0 }) -- optim.Adadelta(model.parameters(), lr=args.lr)
      local scheduler = StepLR(optimizer, { step_size = 1, gamma = 0.7 }) -- StepLR(optimizer, step_size=1, gamma=args.gamma)
      local criterion = nn.BCELoss()
      local a, b = lt.randn(4, 1, 28, 28), lt.randn(4, 1, 28, 28)
      local targets = lt.tensor { 1, 0, 1, 0 }
      local outputs
      local loss = step(optimizer, function()
        outputs = model(a, b):squeeze()
        return criterion(outputs, targets)
      end)
      scheduler:step()
      assert.is_true(loss > 0)
      assert.is_true(math.abs(optimizer.param_groups[1].lr - 0.7) < 1e-12)
      -- pred = torch.where(outputs > 0.5, 1, 0); correct += pred.eq(targets.view_as(pred)).sum().item()
      local pred = outputs:gt(0.5)
      local correct = pred:eq(targets:view_as(pred)):sum():item()
      assert.is_true(correct >= 0 and correct <= 4)
    end)

  it("the positional forms of the issue: Adadelta(params, 1.0), StepLR(opt, 1, 0.7)", function()
    local p = { lt.randn(3):requires_grad(true) }
    local optimizer = optim.Adadelta(p, 1.0)
    local scheduler = StepLR(optimizer, 1, 0.7)
    scheduler:step()
    assert.is_true(math.abs(optimizer.param_groups[1].lr - 0.7) < 1e-12)
  end)
end)

describe("super_resolution (pytorch/examples super_resolution/model.py, main.py)", function()
  local Net = nn.Module:extend("Net")
  function Net:init(upscale_factor)
    self.relu = nn.ReLU()
    self.conv1 = nn.Conv2d(1, 64, { 5, 5 }, { 1, 1 }, { 2, 2 })         -- nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
    self.conv2 = nn.Conv2d(64, 64, { 3, 3 }, { 1, 1 }, { 1, 1 })
    self.conv3 = nn.Conv2d(64, 32, { 3, 3 }, { 1, 1 }, { 1, 1 })
    self.conv4 = nn.Conv2d(32, upscale_factor ^ 2, { 3, 3 }, { 1, 1 }, { 1, 1 })
    self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
    self:_initialize_weights()
  end
  function Net:forward(x)
    x = self.relu(self.conv1(x))
    x = self.relu(self.conv2(x))
    x = self.relu(self.conv3(x))
    x = self.pixel_shuffle(self.conv4(x))
    return x
  end
  function Net:_initialize_weights()
    init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
    init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
    init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
    init.orthogonal_(self.conv4.weight)
  end

  it("upscales by 3 with PixelShuffle and trains a step with MSELoss and Adam", function()
    lt.manual_seed(3)
    local model = Net(3)                                                -- Net(upscale_factor=opt.upscale_factor)
    local criterion = nn.MSELoss()
    local optimizer = optim.Adam(model:parameters(), { lr = 0.01 })     -- optim.Adam(model.parameters(), lr=opt.lr)
    local input, target = lt.rand(2, 1, 8, 8), lt.rand(2, 1, 24, 24)
    local losses = {}
    for i = 1, 6 do losses[i] = step(optimizer, function() return criterion(model(input), target) end) end
    assert.are.same({ 2, 1, 24, 24 }, model(input):shape())
    assert.is_true(losses[6] < losses[1])
  end)
end)

describe("mnist_rnn (pytorch/examples mnist_rnn/main.py)", function()
  local Net = nn.Module:extend("Net")
  function Net:init()
    self.rnn = nn.LSTM({ input_size = 28, hidden_size = 64, batch_first = true }) -- nn.LSTM(input_size=28, ...)
    self.batchnorm = nn.BatchNorm1d(64)
    self.dropout1 = nn.Dropout2d(0.25)
    self.dropout2 = nn.Dropout2d(0.5)
    self.fc1 = nn.Linear(64, 32)
    self.fc2 = nn.Linear(32, 10)
  end
  function Net:forward(input)
    input = input:reshape(-1, 28, 28)                                  -- input.reshape(-1, 28, 28)
    local output = self.rnn(input)                                      -- output, hidden = self.rnn(input)
    output = output[{ {}, -1 }]                                         -- output[:, -1, :]
    output = self.batchnorm(output)
    output = self.dropout1(output)                                      -- a 2-D input: PyTorch 1.13 warns, drops elements
    output = self.fc1(output)
    output = F.relu(output)
    output = self.dropout2(output)
    output = self.fc2(output)
    output = F.log_softmax(output, 2)                                   -- F.log_softmax(output, dim=1)
    return output
  end

  it("runs as written (Dropout2d on [N, 64]) and trains with Adadelta + StepLR", function()
    lt.manual_seed(4)
    local model = Net()
    local optimizer = optim.Adadelta(model:parameters(), { lr = 1.0 })
    local scheduler = StepLR(optimizer, { step_size = 1, gamma = 0.7 })
    local data = lt.randn(8, 1, 28, 28)
    local target = lt.tensor({ 1, 2, 3, 4, 5, 6, 7, 8 }, "int64")
    model:train()
    local loss = step(optimizer, function() return F.nll_loss(model(data), target) end)
    scheduler:step()
    assert.is_true(loss > 0)
    model:eval()
    local test_loss = F.nll_loss(model(data), target, { reduction = "sum" }):item()
    assert.is_true(test_loss > 0)
    assert.are.same({ 8, 10 }, model(data):shape())
  end)
end)

describe("time_sequence_prediction (pytorch/examples time_sequence_prediction/train.py), float64", function()
  -- the example's sine waves (generate_sine_wave.py, fewer and shorter), its initial weights given by a formula
  -- both sides compute exactly, and torch 1.13's losses: tests/fixtures/time_sequence.json (gen_time_sequence.py)
  local cjson = require "cjson"
  local fh = assert(io.open("tests/fixtures/time_sequence.json", "rb"))
  local fx = cjson.decode(fh:read("*a"))
  fh:close()

  -- class Sequence(nn.Module):
  local Sequence = nn.Module:extend("Sequence")
  --     def __init__(self):
  --         super(Sequence, self).__init__()
  function Sequence:init()
    self.lstm1 = nn.LSTMCell(1, 51)                   -- self.lstm1 = nn.LSTMCell(1, 51)
    self.lstm2 = nn.LSTMCell(51, 51)                  -- self.lstm2 = nn.LSTMCell(51, 51)
    self.linear = nn.Linear(51, 1)                    -- self.linear = nn.Linear(51, 1)
  end
  --     def forward(self, input, future = 0):
  function Sequence:forward(input, future)
    future = future or 0
    local outputs = {}                                                     -- outputs = []
    -- h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
    local h_t = lt.zeros(input:size(1), 51, "float64")
    -- c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
    local c_t = lt.zeros(input:size(1), 51, "float64")
    -- h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
    local h_t2 = lt.zeros(input:size(1), 51, "float64")
    -- c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
    local c_t2 = lt.zeros(input:size(1), 51, "float64")
    local output
    for _, input_t in ipairs(input:split(1, 2)) do                         -- for input_t in input.split(1, dim=1):
      h_t, c_t = self.lstm1(input_t, { h_t, c_t })                         --     h_t, c_t = self.lstm1(input_t, (h_t, c_t))
      h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })                         --     h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
      output = self.linear(h_t2)                                           --     output = self.linear(h_t2)
      outputs[#outputs + 1] = output                                       --     outputs += [output]
    end
    for _ = 1, future do                                                   -- for i in range(future):
      h_t, c_t = self.lstm1(output, { h_t, c_t })                          --     h_t, c_t = self.lstm1(output, (h_t, c_t))
      h_t2, c_t2 = self.lstm2(h_t, { h_t2, c_t2 })                         --     h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
      output = self.linear(h_t2)                                           --     output = self.linear(h_t2)
      outputs[#outputs + 1] = output                                       --     outputs += [output]
    end
    return lt.cat(outputs, 2)                                              -- outputs = torch.cat(outputs, dim=1)
  end

  it("trains with LBFGS in float64 and follows torch 1.13's losses to 1e-10", function()
    local data = lt.tensor(fx.data.data, "float64"):reshape(fx.data.shape)
    local L = data:size(2)
    local input = data:narrow(1, 4, data:size(1) - 3):narrow(2, 1, L - 1)  -- input = torch.from_numpy(data[3:, :-1])
    local target = data:narrow(1, 4, data:size(1) - 3):narrow(2, 2, L - 1) -- target = torch.from_numpy(data[3:, 1:])
    local test_input = data:narrow(1, 1, 3):narrow(2, 1, L - 1)            -- test_input = torch.from_numpy(data[:3, :-1])
    local test_target = data:narrow(1, 1, 3):narrow(2, 2, L - 1)           -- test_target = torch.from_numpy(data[:3, 1:])
    local seq = Sequence()                                                 -- seq = Sequence()
    seq:double()                                                           -- seq.double()
    -- the fixture's initial weights, parameter j (0-based, in PyTorch's named_parameters order) element k
    local named = seq:named_parameters()
    for j, name in ipairs(fx.param_order) do
      local p = assert(named[name], name)
      local w = {}
      for k = 0, p:numel() - 1 do w[k + 1] = ((k * 7919 + (j - 1) * 131) % 1001 - 500) / 3500 end
      lt.no_grad(function() p:copy_(lt.tensor(w, "float64"):reshape(p:shape())) end)
    end
    local criterion = nn.MSELoss()                                         -- criterion = nn.MSELoss()
    local optimizer = optim.LBFGS(seq:parameters(), 0.8)                   -- optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    local closure_losses = {}
    for i = 1, #fx.losses do                                               -- for i in range(opt.steps):
      local function closure()                                             --     def closure():
        optimizer:zero_grad()                                              --         optimizer.zero_grad()
        local out = seq(input)                                             --         out = seq(input)
        local loss = criterion(out, target)                                --         loss = criterion(out, target)
        closure_losses[#closure_losses + 1] = loss:item()
        loss:backward()                                                    --         loss.backward()
        return loss                                                        --         return loss
      end
      local loss = optimizer:step(closure):item()                          --     optimizer.step(closure)
      local pred, test_loss
      lt.no_grad(function()                                                --     with torch.no_grad():
        pred = seq(test_input, fx.future)                                  --         pred = seq(test_input, future=future)
        -- loss = criterion(pred[:, :-future], test_target)
        test_loss = criterion(pred:narrow(2, 1, L - 1), test_target)
      end)
      local function near(what, got, want)
        assert(math.abs(got - want) <= 1e-10 * math.abs(want),
          string.format("step %d %s: lutra %.17g, torch %.17g", i, what, got, want))
      end
      near("loss", loss, fx.losses[i])
      near("test loss", test_loss:item(), fx.test_losses[i])
      assert.are.equal("float64", pred:dtype())
    end
    assert.are.equal(#fx.closure_losses, #closure_losses)
    -- every evaluation inside the steps too: LBFGS's curvature pairs carry the last bits of summation order (BLAS
    -- dgemm against torch's) from one evaluation to the next, to ~1e-9 by the 40th
    for k, want in ipairs(fx.closure_losses) do
      assert(math.abs(closure_losses[k] - want) <= 1e-8 * math.abs(want),
        string.format("closure call %d: lutra %.17g, torch %.17g", k, closure_losses[k], want))
    end
  end)
end)
