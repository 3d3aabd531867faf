-- utils/init.lua — lt.utils: images out, as torchvision.utils.
--
--   lt.utils.save_image(samples:view(64, 1, 28, 28), "samples.png", {nrow = 8})   -- an 8 x 8 grid, PNG
--   local grid = lt.utils.make_grid(batch, {nrow = 4, padding = 2, normalize = true})
--
-- make_grid lays out a batch [B x C x H x W] (or a Lua list of [C x H x W] images) row by row, nrow images a
-- row, padding pixels of pad_value between and around them, as torchvision 0.14's make_grid (one-channel
-- images become three channels; a batch of one is returned without padding). save_image writes the grid as an
-- 8-bit PNG through libpng (core/src/image_png.c): value v in [0, 1] becomes floor(v * 255 + 0.5), clamped.
local lt = require "lutra"
local core = require "lutra.core"
local util = require "lutra.utils.check"

local U = {}

local GRID_OPTS = { nrow = "number", padding = "number", normalize = "boolean", value_range = "table",
  scale_each = "boolean", pad_value = "number" }

local function int_opt(where, name, v, min)
  if type(v) ~= "number" or v ~= math.floor(v) or v < min or v > 2 ^ 31 - 1 then
    error(string.format("%s: option '%s' must be an integer >= %d, got %s", where, name, min, tostring(v)), 4)
  end
  return v
end

-- clamps img to [low, high] and maps it to [0, 1], in place (torchvision's norm_ip)
local function norm_ip(img, low, high)
  img:clamp_(low, high)
  img:sub_(low)
  img:div_(math.max(high - low, 1e-5))
end

local function as_batch(where, t)
  if type(t) == "table" and not lt.is_tensor(t) then
    if #t == 0 then error(where .. ": expected a tensor or a non-empty list of tensors, got an empty list", 3) end
    for i, v in ipairs(t) do
      if not lt.is_tensor(v) then error(string.format("%s: list element %d is a %s, expected a tensor", where, i,
          type(v)), 3) end
    end
    local ok, s = pcall(lt.stack, t, 1)
    if not ok then error(where .. ": the images of the list differ in shape (" .. tostring(s) .. ")", 3) end
    t = s
  end
  if not lt.is_tensor(t) then error(where .. ": expected a tensor or a list of tensors, got " .. type(t), 3) end
  if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
    error(where .. ": expected a float32 or float64 tensor, got " .. t:dtype(), 3)
  end
  local n = t:dim()
  if n < 2 or n > 4 then
    error(where .. ": expected an image [H x W], [C x H x W] or a batch [B x C x H x W], got " .. t:shape_str(), 3)
  end
  if n == 2 then t = t:unsqueeze(1) end
  if t:dim() == 3 then
    if t:size(1) == 1 then t = lt.cat({ t, t, t }, 1) end
    t = t:unsqueeze(1)
  end
  if t:size(2) == 1 then t = lt.cat({ t, t, t }, 2) end
  if t:numel() == 0 then error(where .. ": the images are empty (" .. t:shape_str() .. ")", 3) end
  return t
end

local function grid_of(where, tensor, opts)
  local o = util.check_options(where, opts, GRID_OPTS, 3)
  local nrow = int_opt(where, "nrow", o.nrow or 8, 1)
  local padding = int_opt(where, "padding", o.padding or 2, 0)
  local pad_value = o.pad_value or 0
  local range = o.value_range
  if range ~= nil and (#range ~= 2 or type(range[1]) ~= "number" or type(range[2]) ~= "number") then
    error(where .. ": option 'value_range' must be a pair {low, high} of numbers", 3)
  end
  local t = lt.no_grad(as_batch, where, tensor)
  return lt.no_grad(function()
    if o.normalize then
      t = t:clone()
      local function norm_range(img)
        if range then norm_ip(img, range[1], range[2]) else norm_ip(img, img:min():item(), img:max():item()) end
      end
      if o.scale_each then
        for i = 1, t:size(1) do norm_range(t:select(1, i)) end
      else
        norm_range(t)
      end
    end
    if t:size(1) == 1 then return t:squeeze(1) end
    local nmaps, c = t:size(1), t:size(2)
    local xmaps = math.min(nrow, nmaps)
    local ymaps = math.ceil(nmaps / xmaps)
    local h, w = t:size(3) + padding, t:size(4) + padding
    local grid = lt.full({ c, h * ymaps + padding, w * xmaps + padding }, pad_value, t:dtype())
    local k = 1
    for y = 0, ymaps - 1 do
      for x = 0, xmaps - 1 do
        if k > nmaps then break end
        grid:narrow(2, y * h + padding + 1, h - padding):narrow(3, x * w + padding + 1, w - padding):copy_(t:select(1, k))
        k = k + 1
      end
    end
    return grid
  end)
end

--- make_grid(tensor[, {nrow = 8, padding = 2, normalize = false, value_range = nil, scale_each = false,
--- pad_value = 0}]) -> [C x H' x W']
function U.make_grid(tensor, opts) return grid_of("make_grid", tensor, opts) end

--- save_image(tensor, path[, make_grid's options]): the grid as a PNG file (gray, RGB or RGBA by its channels)
function U.save_image(tensor, path, opts)
  if type(path) ~= "string" or path == "" then
    error("save_image: expected a file path (string) as argument 2, got " .. (path == "" and "''" or type(path)), 2)
  end
  local grid = grid_of("save_image", tensor, opts)
  local c = grid:size(1)
  if c ~= 1 and c ~= 3 and c ~= 4 then
    error(string.format("save_image: a PNG holds 1, 3 or 4 channels; the images have %d (grid %s)", c,
      grid:shape_str()), 2)
  end
  return core._write_png(path, grid) -- (a tail call: its errors carry no position in this file)
end

return require("lutra.names").strict(U, "lt.utils")
