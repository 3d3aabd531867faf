-- vision/functional.lua — lt.vision.transforms.F: torchvision 0.14's transforms.functional on lutra images.
--
--   local F = lt.vision.transforms.F
--   local img = lt.vision.io.read_image("cat.jpg")           -- pixel image [3 x H x W], values 0..255
--   local x = F.to_tensor(F.center_crop(F.resize(img, 256), 224))   -- float [3 x 224 x 224] in [0, 1]
--
-- Images are float32 or float64 tensors [C x H x W], and every function returns the dtype it is given, as
-- torchvision's tensor functions do (readers return float32, as ToTensor; img:double() makes a float64 image). Two
-- kinds, as torchvision has PIL images and tensors: a *pixel image* (what read_image/decode_image return, and what
-- these functions make of one) holds 8-bit values 0..255 and every function rounds its result to 8 bits the way
-- Pillow does, so the numbers are torchvision's on PIL images, in either dtype; any other float image (after
-- to_tensor, values in [0, 1]) is transformed as torchvision transforms tensors, with no rounding, in its dtype.
-- lutra has no uint8 dtype: a pixel image costs float32's 4 bytes a value, and which kind an image is, is
-- remembered by the tensor object (F.is_pixel_image): a pixel image's clone or arithmetic result is a float image.
-- Pixel offsets (crop's top and left) count from 0 at the top-left corner, as torchvision's; sizes are {h, w}.
-- The kernels are C (core/src/vision_*.c) or whole-tensor ops: no per-pixel Lua.
local lt = require "lutra"
local C = require("lutra.core")._images
local shape_str = require("lutra.utils.check").shape_str

local F = {}

local pixel_images = setmetatable({}, { __mode = "k" })

--- F.is_pixel_image(img): true when img holds 8-bit pixel values (from read_image/decode_image or a function of
--- F applied to one), which the functions round as Pillow does.
function F.is_pixel_image(img) return pixel_images[img] == true end

--- F.as_pixel_image(img): marks a float32 or float64 [C x H x W] tensor of whole numbers 0..255 as a pixel image;
--- returns it.
function F.as_pixel_image(img)
  pixel_images[img] = true
  return img
end

local function like(src, out)
  if pixel_images[src] then pixel_images[out] = true end
  return out
end

local IMAGE_DTYPES = { float32 = true, float64 = true }

local function image_arg(fname, img)
  if not lt.is_tensor(img) then
    error(string.format("%s: expected an image (a float32 or float64 tensor [C x H x W]), got %s", fname, type(img)),
      3)
  end
  if not IMAGE_DTYPES[img:dtype()] then
    error(string.format("%s: expected a float32 or float64 image [C x H x W], got dtype %s", fname, img:dtype()), 3)
  end
  if img:dim() ~= 3 then
    error(string.format("%s: expected an image [C x H x W], got a tensor of shape %s", fname, shape_str(img)), 3)
  end
  return img:size(1), img:size(2), img:size(3)
end

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

local function check_int(fname, what, v, min)
  if not is_int(v) or v < min then
    error(string.format("%s: %s must be an integer >= %d, got %s", fname, what, min, tostring(v)), 4)
  end
  return v
end

-- a size argument: an integer or a list {h, w} (a list of one means both); returns h, w
local function pair(fname, what, v, min)
  if type(v) == "number" then return check_int(fname, what, v, min), v end
  if type(v) == "table" and (#v == 1 or #v == 2) then
    return check_int(fname, what, v[1], min), check_int(fname, what, v[#v], min)
  end
  error(string.format("%s: %s must be an integer or a list {h, w}, got %s", fname, what, tostring(v)), 3)
end

-- Python's round(): halves to even (torchvision computes crop offsets with it)
local function pyround(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end
F._pyround = pyround

local function fill_list(fname, fill, ch)
  fill = fill == nil and 0 or fill
  if type(fill) == "number" then return { fill } end
  if type(fill) == "table" and (#fill == 1 or #fill == ch) then
    for i, v in ipairs(fill) do
      if type(v) ~= "number" then error(string.format("%s: fill[%d] must be a number, got %s", fname, i, type(v)), 4) end
    end
    return fill
  end
  error(string.format("%s: fill must be a number or a list of 1 or %d numbers (one per channel), got %s", fname, ch,
    type(fill) == "table" and "a list of " .. #fill or type(fill)), 4)
end

local INTERPOLATIONS = { bilinear = true, nearest = true }
local function interpolation_arg(fname, v)
  v = v or "bilinear"
  if not INTERPOLATIONS[v] then
    error(string.format("%s: interpolation must be 'bilinear' or 'nearest', got %s", fname, tostring(v)), 4)
  end
  return v
end

--- F.to_tensor(img): a pixel image as a float image in [0, 1] (value / 255), as torchvision's to_tensor: in the
--- default dtype (float64 after lt.set_default_dtype("float64"), as torchvision's torch.get_default_dtype()); a
--- float64 image stays float64.
function F.to_tensor(img)
  image_arg("to_tensor", img)
  local dtype = img:dtype() == "float64" and "float64" or lt.get_default_dtype()
  return img:to(dtype):div(255)
end

local FLOAT_DTYPES = { float32 = "float32", float = "float32", float64 = "float64", double = "float64" }
-- the float dtype a name means (nil = float32, torchvision's default), or nil: for F and ConvertImageDtype
local function float_dtype(dtype) return FLOAT_DTYPES[dtype == nil and "float32" or dtype] end
F._float_dtype = float_dtype

--- F.convert_image_dtype(img[, dtype = "float32"]): img as a float image of dtype (float32 or float64), as
--- torchvision's: a pixel image (torchvision's uint8) divided by 255 in dtype, a float image converted; an image
--- already of dtype is returned as it is.
function F.convert_image_dtype(img, dtype)
  image_arg("convert_image_dtype", img)
  local want = float_dtype(dtype)
  if not want then
    error("convert_image_dtype: dtype must be 'float32' or 'float64' (lutra has no uint8 dtype: a pixel image holds "
      .. "0..255 in a float tensor), got " .. tostring(dtype), 2)
  end
  if F.is_pixel_image(img) then return img:to(want):div(255) end
  if img:dtype() == want then return img end
  return img:to(want)
end

--- F.normalize(x, mean, std[, inplace]): (x[c] - mean[c]) / std[c] per channel of a float image (or a batch
--- [... x C x H x W]).
function F.normalize(x, mean, std, inplace)
  if not lt.is_tensor(x) or not IMAGE_DTYPES[x:dtype()] or x:dim() < 3 then
    error(string.format("normalize: expected a float32 or float64 tensor [... x C x H x W], got %s",
      lt.is_tensor(x) and string.format("dtype %s of shape %s", x:dtype(), shape_str(x)) or type(x)), 2)
  end
  if F.is_pixel_image(x) then
    error("normalize: expected a float image, got a pixel image (values 0..255): apply to_tensor first", 2)
  end
  local ch = x:size(-3)
  local function vec(what, v)
    if type(v) == "number" then v = { v } end
    if type(v) ~= "table" or (#v ~= 1 and #v ~= ch) then
      error(string.format("normalize: %s must hold 1 or %d numbers (one per channel), got %s", what, ch,
        type(v) == "table" and #v .. " numbers" or tostring(v)), 3)
    end
    local out = {}
    for c = 1, ch do out[c] = v[#v == 1 and 1 or c] end
    return out
  end
  local m, s = vec("mean", mean), vec("std", std)
  for c = 1, ch do
    if s[c] == 0 then error(string.format("normalize: std[%d] is 0 (division by zero)", c), 2) end
  end
  local shape = { ch, 1, 1 }
  -- in the image's dtype, as torchvision's torch.as_tensor(mean, dtype=tensor.dtype)
  local mt, st = lt.tensor(m, x:dtype()):view(shape), lt.tensor(s, x:dtype()):view(shape)
  if inplace then return x:sub_(mt):div_(st) end
  return x:sub(mt):div(st)
end

-- torchvision's _compute_resized_output_size: an integer size is the smaller edge
local function resized_size(fname, h, w, size, max_size)
  if type(size) == "number" or (type(size) == "table" and #size == 1) then
    local s = check_int(fname, "size", type(size) == "table" and size[1] or size, 1)
    local short, long = math.min(h, w), math.max(h, w)
    local new_short, new_long = s, math.floor(s * long / short)
    if max_size ~= nil then
      check_int(fname, "max_size", max_size, 1)
      if max_size <= s then
        error(string.format("%s: max_size (%d) must be greater than the requested size (%d)", fname, max_size, s), 3)
      end
      if new_long > max_size then new_short, new_long = math.floor(max_size * new_short / new_long), max_size end
    end
    if w <= h then return new_long, new_short end
    return new_short, new_long
  end
  if max_size ~= nil then
    error(fname .. ": max_size is only for a size given as one integer (the smaller edge)", 3)
  end
  return pair(fname, "size", size, 1)
end

--- F.resize(img, size[, interpolation = "bilinear"[, max_size]]): size {h, w}, or an integer for the smaller edge
--- (the other keeps the aspect ratio, truncated, as torchvision); bilinear filters with antialias as Pillow.
function F.resize(img, size, interpolation, max_size)
  local _, h, w = image_arg("resize", img)
  local oh, ow = resized_size("resize", h, w, size, max_size)
  interpolation = interpolation_arg("resize", interpolation)
  if oh == h and ow == w then return img end
  return like(img, C.resize(img, oh, ow, interpolation == "nearest", F.is_pixel_image(img)))
end

local PAD_MODES = { constant = 0, edge = 1, reflect = 2, symmetric = 3 }

-- torchvision's padding argument: n, {all}, {left/right, top/bottom} or {left, top, right, bottom}
local function padding_arg(fname, padding)
  if type(padding) == "number" then padding = { padding } end
  if type(padding) ~= "table" or not (#padding == 1 or #padding == 2 or #padding == 4) then
    error(string.format("%s: padding must be an integer or a list of 1, 2 or 4 integers, got %s", fname,
      tostring(padding)), 4)
  end
  for i, v in ipairs(padding) do check_int(fname, "padding[" .. i .. "]", v, 0) end
  if #padding == 1 then return padding[1], padding[1], padding[1], padding[1] end
  if #padding == 2 then return padding[1], padding[2], padding[1], padding[2] end
  return padding[1], padding[2], padding[3], padding[4]
end

--- F.pad(img, padding[, fill = 0[, padding_mode = "constant"]]): padding n, {lr, tb} or {left, top, right, bottom};
--- modes constant (fill: a number or one per channel), edge, reflect (mirror without the edge pixel) and symmetric
--- (with it).
function F.pad(img, padding, fill, padding_mode)
  local ch = image_arg("pad", img)
  local l, t, r, b = padding_arg("pad", padding)
  padding_mode = padding_mode or "constant"
  local mode = PAD_MODES[padding_mode]
  if not mode then
    error(string.format("pad: padding_mode must be 'constant', 'edge', 'reflect' or 'symmetric', got %s",
      tostring(padding_mode)), 2)
  end
  return like(img, C.pad(img, l, t, r, b, mode, fill_list("pad", fill, ch)))
end

--- F.crop(img, top, left, height, width): the region whose top-left pixel is (top, left), counted from 0;
--- the parts outside the image are 0, as torchvision on PIL images.
function F.crop(img, top, left, height, width)
  local _, h, w = image_arg("crop", img)
  for _, a in ipairs { { "top", top }, { "left", left } } do
    if not is_int(a[2]) then error(string.format("crop: %s must be an integer, got %s", a[1], tostring(a[2])), 2) end
  end
  check_int("crop", "height", height, 1)
  check_int("crop", "width", width, 1)
  local pl, pt = math.max(0, -left), math.max(0, -top)
  local pr, pb = math.max(0, left + width - w), math.max(0, top + height - h)
  local x = img
  if pl + pt + pr + pb > 0 then x = C.pad(img, pl, pt, pr, pb, 0, { 0 }) end
  return like(img, x:narrow(2, top + pt + 1, height):narrow(3, left + pl + 1, width):contiguous())
end

--- F.center_crop(img, output_size): the centred region of output_size ({h, w} or an integer), padded with 0
--- first where the image is smaller; offsets rounded as torchvision (Python's round, halves to even).
function F.center_crop(img, output_size)
  local _, h, w = image_arg("center_crop", img)
  local ch_, cw = pair("center_crop", "output_size", output_size, 1)
  local x = img
  if ch_ > h or cw > w then
    local pl, pt = math.floor(math.max(0, cw - w) / 2), math.floor(math.max(0, ch_ - h) / 2)
    local pr, pb = math.floor((math.max(0, cw - w) + 1) / 2), math.floor((math.max(0, ch_ - h) + 1) / 2)
    x = like(img, C.pad(img, pl, pt, pr, pb, 0, { 0 }))
    h, w = x:size(2), x:size(3)
    if h == ch_ and w == cw then return x end
  end
  return F.crop(x, pyround((h - ch_) / 2), pyround((w - cw) / 2), ch_, cw)
end

--- F.resized_crop(img, top, left, height, width, size[, interpolation]): crop, then resize to size.
function F.resized_crop(img, top, left, height, width, size, interpolation)
  return F.resize(F.crop(img, top, left, height, width), size, interpolation)
end

--- F.hflip(img) / F.vflip(img): mirrored left-right / top-bottom (any [... x H x W]).
function F.hflip(img)
  image_arg("hflip", img)
  return like(img, img:flip(3))
end
function F.vflip(img)
  image_arg("vflip", img)
  return like(img, img:flip(2))
end

--- F.rgb_to_grayscale(img[, num_output_channels = 1]): Pillow's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16
--- on pixel images, torchvision's 0.2989 R + 0.587 G + 0.114 B on float images; 3 output channels repeat it.
function F.rgb_to_grayscale(img, num_output_channels)
  local ch = image_arg("rgb_to_grayscale", img)
  num_output_channels = num_output_channels or 1
  if num_output_channels ~= 1 and num_output_channels ~= 3 then
    error("rgb_to_grayscale: num_output_channels must be 1 or 3, got " .. tostring(num_output_channels), 2)
  end
  local g
  if ch == 1 then
    g = img
  elseif ch == 3 or ch == 4 then
    local r, gr, b = img:narrow(1, 1, 1), img:narrow(1, 2, 1), img:narrow(1, 3, 1)
    if F.is_pixel_image(img) then
      -- whole numbers below 2^24 throughout: exact in float32, so the same integers as Pillow's
      g = r:mul(19595):add(gr:mul(38470)):add(b:mul(7471)):add(32768):div(65536):floor()
    else
      g = r:mul(0.2989):add(gr:mul(0.587)):add(b:mul(0.114))
    end
  else
    error(string.format("rgb_to_grayscale: expected an image of 1, 3 or 4 channels, got %d", ch), 2)
  end
  if num_output_channels == 3 then g = lt.cat({ g, g, g }, 1) end
  if g == img then g = img:clone() end
  return like(img, g)
end
F.to_grayscale = F.rgb_to_grayscale

-- Pillow's Image.blend(a, b, f) on 8-bit images: a + f (b - a) in float32, clipped and truncated; torchvision's
-- _blend on float images: f b + (1 - f) a clamped to [0, 1]
local function blend(img, degenerate, f)
  if F.is_pixel_image(img) then
    -- in float32 for a float64 pixel image too: Pillow's arithmetic (whole numbers 0..255 convert exactly)
    local a, d = img:float(), degenerate:float()
    return like(img, a:sub(d):mul(f):add(d):clamp(0, 255):floor():to(img:dtype()))
  end
  return img:mul(f):add(degenerate:mul(1 - f)):clamp(0, 1)
end

local function factor_arg(fname, f)
  if type(f) ~= "number" or not (f >= 0) or f == math.huge then
    error(string.format("%s: the factor must be a non-negative number, got %s", fname, tostring(f)), 3)
  end
end

--- F.adjust_brightness(img, f): blended with black (f = 0 black, 1 the image).
function F.adjust_brightness(img, f)
  image_arg("adjust_brightness", img)
  factor_arg("adjust_brightness", f)
  return blend(img, lt.zeros_like(img), f)
end

--- F.adjust_contrast(img, f): blended with the mean of its gray version (rounded for pixel images, as Pillow).
function F.adjust_contrast(img, f)
  local ch = image_arg("adjust_contrast", img)
  factor_arg("adjust_contrast", f)
  local mean = F.rgb_to_grayscale(ch == 1 and img or img:narrow(1, 1, 3)):mean():item()
  if F.is_pixel_image(img) then mean = math.floor(mean + 0.5) end
  return blend(img, lt.full_like(img, mean), f)
end

--- F.adjust_saturation(img, f): blended with its gray version (f = 0 gray, 1 the image).
function F.adjust_saturation(img, f)
  local ch = image_arg("adjust_saturation", img)
  factor_arg("adjust_saturation", f)
  if ch == 1 then return img end
  return blend(img, F.rgb_to_grayscale(img, 3), f)
end

--- F.adjust_hue(img, f): hue moved by f in [-0.5, 0.5] turns (Pillow's 8-bit HSV on pixel images).
function F.adjust_hue(img, f)
  image_arg("adjust_hue", img)
  if type(f) ~= "number" then error("adjust_hue: hue_factor must be a number in [-0.5, 0.5], got " .. type(f), 2) end
  return like(img, C.adjust_hue(img, f, F.is_pixel_image(img)))
end

--- F.rotate(img, angle[, interpolation = "nearest"[, expand = false[, center[, fill = 0]]]]): turned by angle
--- degrees counter-clockwise about center ({x, y}, Pillow's coordinates; default the image's centre), as Pillow's
--- rotate; nearest pixel only.
function F.rotate(img, angle, interpolation, expand, center, fill)
  local ch = image_arg("rotate", img)
  if type(angle) ~= "number" or angle ~= angle or math.abs(angle) == math.huge then
    error("rotate: angle must be a finite number of degrees, got " .. tostring(angle), 2)
  end
  if (interpolation or "nearest") ~= "nearest" then
    error("rotate: interpolation must be 'nearest' (the only one lutra implements), got " .. tostring(interpolation), 2)
  end
  local cx, cy
  if center ~= nil then
    if type(center) ~= "table" or type(center[1]) ~= "number" or type(center[2]) ~= "number" then
      error("rotate: center must be a list {x, y}", 2)
    end
    cx, cy = center[1], center[2]
  end
  return like(img, C.rotate(img, angle, expand == true, cx, cy, fill_list("rotate", fill, ch)))
end

--- F.gaussian_blur(img, kernel_size[, sigma]): kernel_size an odd integer or {kx, ky}; sigma a number or {sx, sy}
--- (default 0.3 ((k - 1) / 2 - 1) + 0.8, as torchvision); reflect padding.
function F.gaussian_blur(img, kernel_size, sigma)
  image_arg("gaussian_blur", img)
  local kx, ky
  if type(kernel_size) == "number" then kx, ky = kernel_size, kernel_size
  elseif type(kernel_size) == "table" then kx, ky = kernel_size[1], kernel_size[#kernel_size]
  end
  for _, k in ipairs { kx, ky } do
    if not is_int(k) or k < 1 or k % 2 == 0 then
      error("gaussian_blur: kernel_size must be odd positive integers, got " .. tostring(k), 2)
    end
  end
  local sx, sy
  if sigma == nil then
    sx, sy = 0.3 * ((kx - 1) * 0.5 - 1) + 0.8, 0.3 * ((ky - 1) * 0.5 - 1) + 0.8
  elseif type(sigma) == "number" then sx, sy = sigma, sigma
  elseif type(sigma) == "table" then sx, sy = sigma[1], sigma[#sigma]
  end
  if type(sx) ~= "number" or type(sy) ~= "number" or not (sx > 0 and sy > 0) then
    error("gaussian_blur: sigma must be positive numbers, got " .. tostring(sigma), 2)
  end
  return like(img, C.gaussian_blur(img, kx, ky, sx, sy, F.is_pixel_image(img)))
end

return require("lutra.names").strict(F, "lt.vision.transforms.F")
