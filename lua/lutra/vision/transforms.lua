-- vision/transforms.lua — lt.vision.transforms: torchvision 0.14's transforms, same names, arguments and numbers.
--
--   local T = lt.vision.transforms
--   local train_tf = T.Compose{ T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ColorJitter{brightness = 0.2},
--                               T.ToTensor(), T.Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}) }
--   local x = train_tf(lt.vision.io.read_image("cat.jpg"))    -- float [3 x 64 x 64]
--
-- Required arguments are positional as in torchvision; the optional ones go in a table of named options (an
-- unknown name is an error). A transform is called as a function, img -> img; the images are those of
-- transforms.F (pixel images until ToTensor, float images after). Random transforms draw from lutra's generator
-- (lt.manual_seed / lt.seed_everything make them reproducible; a DataLoader worker draws from its own).
local lt = require "lutra"
local F = require "lutra.vision.functional"

local T = {}
T.F = F

--- lt.vision.transforms.InterpolationMode: torchvision's names for the interpolation option.
T.InterpolationMode = { NEAREST = "nearest", BILINEAR = "bilinear" }

local function uniform(a, b) return a + (b - a) * lt.rand(1):item() end
local function randint(lo, hi) return lt.randint(lo, hi, { 1 }):item() end -- [lo, hi)

-- the options table of a transform: only the names in `known`, each checked by its type
local function options(name, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: expected a table of options, got %s", name, type(opts)), 4)
  end
  for k, v in pairs(opts) do
    local want = known[k]
    if not want then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (options: %s)", name, tostring(k), table.concat(names, ", ")), 4)
    end
    if want ~= "any" and not want:find(type(v), 1, true) then
      error(string.format("%s: option '%s' must be a %s, got %s", name, k, want, type(v)), 4)
    end
  end
  return opts
end

local function class(name, repr)
  local cls = { name = name }
  cls.__index = cls
  cls.__call = function(self, img) return self:forward(img) end
  cls.__tostring = function(self) return name .. "(" .. (repr and repr(self) or "") .. ")" end
  return cls
end
local function new(cls, fields) return setmetatable(fields, cls) end

local function fmt_list(t)
  if type(t) ~= "table" then return tostring(t) end
  local parts = {}
  for i, v in ipairs(t) do parts[i] = tostring(v) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- a size: an integer, or {h, w} ({s} means s x s); returns {h, w}
local function size_pair(name, size)
  if type(size) == "number" then size = { size, size } end
  if type(size) ~= "table" or (#size ~= 1 and #size ~= 2) then
    error(string.format("%s: size must be an integer or a list {h, w}, got %s", name, tostring(size)), 4)
  end
  local h, w = size[1], size[#size]
  for _, v in ipairs { h, w } do
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 then
      error(string.format("%s: size must be positive integers, got %s", name, fmt_list(size)), 4)
    end
  end
  return { h, w }
end

local function probability(name, p)
  if p == nil then return 0.5 end
  if type(p) == "table" then p = p.p end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(string.format("%s: p must be a probability in [0, 1], got %s", name, tostring(p)), 4)
  end
  return p
end

-- a range given as a number v (centre +- v, or [0, v]) or a pair {min, max}, as torchvision's _check_input
local function range(name, what, v, center, lo_bound, hi_bound)
  if v == nil then return nil end
  local r
  if type(v) == "number" then
    if v < 0 then error(string.format("%s: %s must be non-negative, got %s", name, what, tostring(v)), 4) end
    r = { center - v, center + v }
    if lo_bound and r[1] < lo_bound then r[1] = lo_bound end
  elseif type(v) == "table" and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" then
    r = { v[1], v[2] }
  else
    error(string.format("%s: %s must be a number or a list {min, max}, got %s", name, what, tostring(v)), 4)
  end
  if not (r[1] <= r[2]) or (lo_bound and r[1] < lo_bound) or (hi_bound and r[2] > hi_bound) then
    error(string.format("%s: %s values should be between %s and %s, got %s", name, what, tostring(lo_bound),
      tostring(hi_bound or "inf"), fmt_list(r)), 4)
  end
  if r[1] == center and r[2] == center then return nil end
  return r
end

--- Compose{t1, t2, ...}: applies the transforms in order.
local Compose = class("Compose", function(self)
  local parts = {}
  for i, t in ipairs(self.transforms) do parts[i] = tostring(t) end
  return table.concat(parts, ", ")
end)
function Compose:forward(img)
  for _, t in ipairs(self.transforms) do img = t(img) end
  return img
end
function T.Compose(transforms)
  if type(transforms) ~= "table" then error("Compose: expected a list of transforms", 2) end
  for i, t in ipairs(transforms) do
    local mt = getmetatable(t)
    if type(t) ~= "function" and not (mt and mt.__call) then
      error(string.format("Compose: transform %d is a %s, not callable", i, type(t)), 2)
    end
  end
  return new(Compose, { transforms = transforms })
end

--- Lambda(fn): fn(img) as a transform.
local Lambda = class("Lambda")
function Lambda:forward(img) return self.lambd(img) end
function T.Lambda(fn)
  if type(fn) ~= "function" then error("Lambda: expected a function, got " .. type(fn), 2) end
  return new(Lambda, { lambd = fn })
end

--- ToTensor(): a pixel image as a float image in [0, 1].
local ToTensor = class("ToTensor")
function ToTensor:forward(img) return F.to_tensor(img) end
function T.ToTensor() return new(ToTensor, {}) end

--- ConvertImageDtype([dtype = "float32"]): F.convert_image_dtype (a pixel image to [0, 1] floats of dtype).
local ConvertImageDtype = class("ConvertImageDtype", function(s) return "dtype=" .. s.dtype end)
function ConvertImageDtype:forward(img) return F.convert_image_dtype(img, self.dtype) end
function T.ConvertImageDtype(dtype)
  local want = F._float_dtype(dtype)
  if not want then error("ConvertImageDtype: dtype must be 'float32' or 'float64', got " .. tostring(dtype), 2) end
  return new(ConvertImageDtype, { dtype = want })
end

--- Normalize(mean, std[, {inplace}]): (x - mean) / std per channel.
local Normalize = class("Normalize", function(s) return "mean=" .. fmt_list(s.mean) .. ", std=" .. fmt_list(s.std) end)
function Normalize:forward(x) return F.normalize(x, self.mean, self.std, self.inplace) end
function T.Normalize(mean, std, opts)
  opts = options("Normalize", opts, { inplace = "boolean" })
  if type(mean) ~= "table" or type(std) ~= "table" then error("Normalize: mean and std must be lists of numbers", 2) end
  return new(Normalize, { mean = mean, std = std, inplace = opts.inplace })
end

--- Resize(size[, {interpolation = "bilinear", max_size, antialias = true}]).
local Resize = class("Resize", function(s) return "size=" .. fmt_list(s.size) .. ", interpolation=" .. s.interpolation end)
function Resize:forward(img) return F.resize(img, self.size, self.interpolation, self.max_size) end
function T.Resize(size, opts)
  opts = options("Resize", opts, { interpolation = "string", max_size = "number", antialias = "boolean" })
  if opts.antialias == false then
    error("Resize: antialias = false is not available (lutra resizes as Pillow does, always antialiased)", 2)
  end
  if type(size) ~= "number" and type(size) ~= "table" then error("Resize: size must be an integer or {h, w}", 2) end
  return new(Resize, { size = size, interpolation = opts.interpolation or "bilinear", max_size = opts.max_size })
end

--- CenterCrop(size).
local CenterCrop = class("CenterCrop", function(s) return "size=" .. fmt_list(s.size) end)
function CenterCrop:forward(img) return F.center_crop(img, self.size) end
function T.CenterCrop(size) return new(CenterCrop, { size = size_pair("CenterCrop", size) }) end

--- Pad(padding[, {fill = 0, padding_mode = "constant"}]).
local Pad = class("Pad", function(s) return "padding=" .. fmt_list(s.padding) .. ", padding_mode=" .. s.padding_mode end)
function Pad:forward(img) return F.pad(img, self.padding, self.fill, self.padding_mode) end
function T.Pad(padding, opts)
  opts = options("Pad", opts, { fill = "number table", padding_mode = "string" })
  return new(Pad, { padding = padding, fill = opts.fill or 0, padding_mode = opts.padding_mode or "constant" })
end

--- Grayscale([num_output_channels = 1]).
local Grayscale = class("Grayscale", function(s) return "num_output_channels=" .. s.num_output_channels end)
function Grayscale:forward(img) return F.rgb_to_grayscale(img, self.num_output_channels) end
function T.Grayscale(n)
  if type(n) == "table" then n = options("Grayscale", n, { num_output_channels = "number" }).num_output_channels end
  n = n or 1
  if n ~= 1 and n ~= 3 then error("Grayscale: num_output_channels must be 1 or 3, got " .. tostring(n), 2) end
  return new(Grayscale, { num_output_channels = n })
end

--- RandomHorizontalFlip([p = 0.5]) / RandomVerticalFlip([p = 0.5]).
local RandomHorizontalFlip = class("RandomHorizontalFlip", function(s) return "p=" .. s.p end)
function RandomHorizontalFlip:forward(img)
  if lt.rand(1):item() < self.p then return F.hflip(img) end
  return img
end
function T.RandomHorizontalFlip(p) return new(RandomHorizontalFlip, { p = probability("RandomHorizontalFlip", p) }) end
local RandomVerticalFlip = class("RandomVerticalFlip", function(s) return "p=" .. s.p end)
function RandomVerticalFlip:forward(img)
  if lt.rand(1):item() < self.p then return F.vflip(img) end
  return img
end
function T.RandomVerticalFlip(p) return new(RandomVerticalFlip, { p = probability("RandomVerticalFlip", p) }) end

--- RandomCrop(size[, {padding, pad_if_needed = false, fill = 0, padding_mode = "constant"}]).
local RandomCrop = class("RandomCrop", function(s) return "size=" .. fmt_list(s.size) end)
function RandomCrop.get_params(img, size)
  local h, w = img:size(2), img:size(3)
  local th, tw = size[1], size[2]
  if h < th or w < tw then
    error(string.format("RandomCrop: the crop size {%d, %d} is larger than the image {%d, %d}", th, tw, h, w), 3)
  end
  if h == th and w == tw then return 0, 0, h, w end
  return randint(0, h - th + 1), randint(0, w - tw + 1), th, tw
end
function RandomCrop:forward(img)
  if self.padding then img = F.pad(img, self.padding, self.fill, self.padding_mode) end
  if self.pad_if_needed and img:size(3) < self.size[2] then
    img = F.pad(img, { self.size[2] - img:size(3), 0 }, self.fill, self.padding_mode)
  end
  if self.pad_if_needed and img:size(2) < self.size[1] then
    img = F.pad(img, { 0, self.size[1] - img:size(2) }, self.fill, self.padding_mode)
  end
  local i, j, h, w = RandomCrop.get_params(img, self.size)
  return F.crop(img, i, j, h, w)
end
function T.RandomCrop(size, opts)
  opts = options("RandomCrop", opts, { padding = "number table", pad_if_needed = "boolean", fill = "number table",
    padding_mode = "string" })
  return new(RandomCrop, { size = size_pair("RandomCrop", size), padding = opts.padding,
    pad_if_needed = opts.pad_if_needed or false, fill = opts.fill or 0, padding_mode = opts.padding_mode or "constant" })
end

--- RandomResizedCrop(size[, {scale = {0.08, 1}, ratio = {3/4, 4/3}, interpolation = "bilinear"}]).
local RandomResizedCrop = class("RandomResizedCrop", function(s)
  return "size=" .. fmt_list(s.size) .. ", scale=" .. fmt_list(s.scale) .. ", ratio=" .. fmt_list(s.ratio)
end)
function RandomResizedCrop.get_params(img, scale, ratio)
  local height, width = img:size(2), img:size(3)
  local area = height * width
  local lr1, lr2 = math.log(ratio[1]), math.log(ratio[2])
  for _ = 1, 10 do
    local target_area = area * uniform(scale[1], scale[2])
    local aspect = math.exp(uniform(lr1, lr2))
    local w = F._pyround(math.sqrt(target_area * aspect))
    local h = F._pyround(math.sqrt(target_area / aspect))
    if w > 0 and w <= width and h > 0 and h <= height then
      return randint(0, height - h + 1), randint(0, width - w + 1), h, w
    end
  end
  local in_ratio, w, h = width / height, width, height -- fallback: a central crop
  if in_ratio < math.min(ratio[1], ratio[2]) then h = F._pyround(w / math.min(ratio[1], ratio[2]))
  elseif in_ratio > math.max(ratio[1], ratio[2]) then w = F._pyround(h * math.max(ratio[1], ratio[2])) end
  return math.floor((height - h) / 2), math.floor((width - w) / 2), h, w
end
function RandomResizedCrop:forward(img)
  local i, j, h, w = RandomResizedCrop.get_params(img, self.scale, self.ratio)
  return F.resized_crop(img, i, j, h, w, self.size, self.interpolation)
end
function T.RandomResizedCrop(size, opts)
  opts = options("RandomResizedCrop", opts, { scale = "table", ratio = "table", interpolation = "string",
    antialias = "boolean" })
  local scale, ratio = opts.scale or { 0.08, 1.0 }, opts.ratio or { 3 / 4, 4 / 3 }
  for _, r in ipairs { { "scale", scale }, { "ratio", ratio } } do
    local v = r[2]
    if #v ~= 2 or type(v[1]) ~= "number" or type(v[2]) ~= "number" or not (v[1] > 0 and v[1] <= v[2]) then
      error(string.format("RandomResizedCrop: %s must be a list {min, max} with 0 < min <= max, got %s", r[1],
        fmt_list(v)), 2)
    end
  end
  return new(RandomResizedCrop, { size = size_pair("RandomResizedCrop", size), scale = scale, ratio = ratio,
    interpolation = opts.interpolation or "bilinear" })
end

--- ColorJitter{brightness, contrast, saturation, hue}: each factor drawn uniformly (a number v: [max(0, 1 - v),
--- 1 + v], hue [-v, v]), the four adjustments applied in a random order.
local ColorJitter = class("ColorJitter", function(s)
  return string.format("brightness=%s, contrast=%s, saturation=%s, hue=%s", fmt_list(s.brightness),
    fmt_list(s.contrast), fmt_list(s.saturation), fmt_list(s.hue))
end)
function ColorJitter:forward(img)
  local order = lt.randperm(4)
  local b = self.brightness and uniform(self.brightness[1], self.brightness[2])
  local c = self.contrast and uniform(self.contrast[1], self.contrast[2])
  local s = self.saturation and uniform(self.saturation[1], self.saturation[2])
  local h = self.hue and uniform(self.hue[1], self.hue[2])
  for k = 1, 4 do
    local id = order[k]:item()
    if id == 1 and b then img = F.adjust_brightness(img, b)
    elseif id == 2 and c then img = F.adjust_contrast(img, c)
    elseif id == 3 and s then img = F.adjust_saturation(img, s)
    elseif id == 4 and h then img = F.adjust_hue(img, h) end
  end
  return img
end
function T.ColorJitter(opts)
  opts = options("ColorJitter", opts, { brightness = "number table", contrast = "number table",
    saturation = "number table", hue = "number table" })
  return new(ColorJitter, {
    brightness = range("ColorJitter", "brightness", opts.brightness, 1, 0),
    contrast = range("ColorJitter", "contrast", opts.contrast, 1, 0),
    saturation = range("ColorJitter", "saturation", opts.saturation, 1, 0),
    hue = range("ColorJitter", "hue", opts.hue, 0, -0.5, 0.5),
  })
end

--- RandomRotation(degrees[, {interpolation = "nearest", expand = false, center, fill = 0}]): an angle drawn from
--- [-degrees, degrees] (or {min, max}).
local RandomRotation = class("RandomRotation", function(s) return "degrees=" .. fmt_list(s.degrees) end)
function RandomRotation:forward(img)
  local angle = uniform(self.degrees[1], self.degrees[2])
  return F.rotate(img, angle, self.interpolation, self.expand, self.center, self.fill)
end
function T.RandomRotation(degrees, opts)
  opts = options("RandomRotation", opts, { interpolation = "string", expand = "boolean", center = "table",
    fill = "number table" })
  local d = range("RandomRotation", "degrees", degrees, 0) or { 0, 0 }
  return new(RandomRotation, { degrees = d, interpolation = opts.interpolation or "nearest",
    expand = opts.expand or false, center = opts.center, fill = opts.fill or 0 })
end

--- GaussianBlur(kernel_size[, {sigma = {0.1, 2.0}}]): sigma drawn uniformly from the range (a number: fixed).
local GaussianBlur = class("GaussianBlur", function(s)
  return "kernel_size=" .. fmt_list(s.kernel_size) .. ", sigma=" .. fmt_list(s.sigma)
end)
function GaussianBlur:forward(img)
  local s = uniform(self.sigma[1], self.sigma[2])
  return F.gaussian_blur(img, self.kernel_size, { s, s })
end
function T.GaussianBlur(kernel_size, opts)
  opts = options("GaussianBlur", opts, { sigma = "number table" })
  local ks = size_pair("GaussianBlur", kernel_size)
  if ks[1] % 2 == 0 or ks[2] % 2 == 0 then
    error("GaussianBlur: kernel_size must be odd positive integers, got " .. fmt_list(ks), 2)
  end
  local sigma = opts.sigma or { 0.1, 2.0 }
  if type(sigma) == "number" then sigma = { sigma, sigma } end
  if #sigma ~= 2 or not (type(sigma[1]) == "number" and sigma[1] > 0 and sigma[1] <= sigma[2]) then
    error("GaussianBlur: sigma must be a positive number or a list {min, max}, got " .. fmt_list(sigma), 2)
  end
  return new(GaussianBlur, { kernel_size = ks, sigma = sigma })
end

return require("lutra.names").strict(T, "lt.vision.transforms")
