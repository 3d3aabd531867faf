-- vision/init.lua — lt.vision: images as data, after torchvision 0.14 (docs/reference/vision.md).
--
--   local T = lt.vision.transforms
--   local ds = lt.vision.datasets.ImageFolder("pets", {transform = T.Compose{
--     T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize({0.5, 0.5, 0.5}, {0.5, 0.5, 0.5})}})
--   local img = lt.vision.io.read_image("pets/cat/1.jpg")    -- [3 x H x W], values 0..255
--
-- io reads PNG and JPEG files (core/src/vision_decode.c), transforms holds torchvision's transforms and their
-- functional forms (transforms.F, kernels in core/src/vision_*.c), datasets the ImageFolder.
local M = {}
return require("lutra.names").strict(M, "lt.vision", {
  io = "lutra.vision.io",
  transforms = "lutra.vision.transforms",
  datasets = "lutra.vision.datasets",
})
