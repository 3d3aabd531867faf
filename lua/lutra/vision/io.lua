-- vision/io.lua — lt.vision.io: image files in, as torchvision.io's read_image and decode_image.
--
--   local img = lt.vision.io.read_image("cat.jpg")            -- [3 x H x W] pixel image, values 0..255
--   local g = lt.vision.io.read_image("cat.jpg", "gray")      -- [1 x H x W]
--
-- PNG (libpng; 16-bit files are reduced to 8 bits, palettes expanded) and JPEG (libjpeg-turbo, baseline and
-- progressive; CMYK files are refused), found by their first bytes, not by the name. The result is a float32
-- pixel image (lt.vision.transforms.F): the 8-bit values as whole numbers, as torchvision's uint8 tensor holds
-- them (lutra has no uint8 dtype). A truncated, damaged or hostile file is an error naming the file.
local core = require "lutra.core"
local F = require "lutra.vision.functional"

local M = {}

--- lt.vision.io.ImageReadMode: the modes of read_image/decode_image, as torchvision's enum.
M.ImageReadMode = { UNCHANGED = "unchanged", GRAY = "gray", GRAY_ALPHA = "gray_alpha", RGB = "rgb",
  RGB_ALPHA = "rgb_alpha" }
local MODES = { unchanged = 0, gray = 1, gray_alpha = 2, rgb = 3, rgb_alpha = 4 }

local function mode_arg(fname, mode)
  mode = mode or "unchanged"
  local m = MODES[mode]
  if not m then
    error(string.format("%s: mode must be 'unchanged', 'gray', 'gray_alpha', 'rgb' or 'rgb_alpha', got %s", fname,
      tostring(mode)), 3)
  end
  return m
end

--- lt.vision.io.decode_image(bytes[, mode = "unchanged"]): a PNG or JPEG file's bytes (a Lua string) as a pixel
--- image [C x H x W] (C = 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA; mode converts, as Pillow's convert).
function M.decode_image(bytes, mode)
  if type(bytes) ~= "string" then error("decode_image: expected the file's bytes as a string, got " .. type(bytes), 2) end
  local m = mode_arg("decode_image", mode)
  local ok, img = pcall(core._images.decode, bytes, m, "decode_image")
  if not ok then error(img, 2) end
  return F.as_pixel_image(img)
end

--- lt.vision.io.read_image(path[, mode = "unchanged"]): the PNG or JPEG file at path as a pixel image.
function M.read_image(path, mode)
  if type(path) ~= "string" then error("read_image: expected a path (string), got " .. type(path), 2) end
  local m = mode_arg("read_image", mode)
  local f, err = io.open(path, "rb")
  if not f then error("read_image: cannot open " .. tostring(err), 2) end
  local bytes = f:read("*a")
  f:close()
  if not bytes then error("read_image: " .. path .. ": could not read the file", 2) end
  local ok, img = pcall(core._images.decode, bytes, m, "read_image: " .. path)
  if not ok then error(img, 2) end
  return F.as_pixel_image(img)
end

return require("lutra.names").strict(M, "lt.vision.io")
