-- vision/datasets.lua — lt.vision.datasets.ImageFolder: one folder per class, as torchvision 0.14's ImageFolder.
--
--   local ds = lt.vision.datasets.ImageFolder("flowers/train", {transform = lt.vision.transforms.ToTensor()})
--   print(#ds, ds.classes[1], ds.class_to_idx.rose)           -- samples, "daisy", 3 (targets are 1-based)
--   local loader = lt.data.DataLoader(ds, {batch_size = 32, shuffle = true})
--
-- root/<class>/**/<file>: the classes are root's subfolders sorted by name (byte order, as Python's sorted on the
-- names), class i has target i (torchvision's i - 1); the samples are the files under each class folder, walked
-- as torchvision's os.walk (folders sorted by path, files sorted by name), whose name ends (case-insensitively) in
-- one of `extensions` (default .jpg, .jpeg, .png: the formats lutra decodes). ds:get(i) = {image, target}: the
-- image read by `loader` (default: read_image(path, "rgb"), a pixel image) and passed through `transform`, the
-- target through `target_transform`.
local IO = require("lutra.core")._io
local vio = require "lutra.vision.io"
local newproxy = require("lutra._compat").newproxy

local M = {}

M.IMG_EXTENSIONS = { ".jpg", ".jpeg", ".png" }

local function sorted(list)
  table.sort(list)
  return list
end

local function is_dir(path)
  local st = IO.stat(path)
  return st ~= nil and st.type == "dir"
end

local function list(path, fname)
  local names, err = IO.listdir(path)
  if not names then error(string.format("%s: cannot list %s: %s", fname, path, tostring(err)), 4) end
  return names
end

-- dir and the folders under it, following symlinks as torchvision's os.walk(followlinks=True)
local function walk(dir, out, depth)
  out[#out + 1] = dir
  if depth > 64 then error("ImageFolder: folders nested more than 64 deep under " .. dir .. " (a symlink loop?)", 5) end
  for _, n in ipairs(list(dir, "ImageFolder")) do
    if is_dir(dir .. "/" .. n) then walk(dir .. "/" .. n, out, depth + 1) end
  end
  return out
end

local function has_extension(name, extensions)
  local lower = name:lower()
  for _, e in ipairs(extensions) do
    if #lower >= #e and lower:sub(-#e) == e then return true end
  end
  return false
end

local OPTIONS = { transform = "function", target_transform = "function", extensions = "table", loader = "function",
  is_valid_file = "function" }

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return mt ~= nil and mt.__call ~= nil
end

local ImageFolder = {}
ImageFolder.__index = ImageFolder

local fields_of = setmetatable({}, { __mode = "k" })

function ImageFolder.__len(self) return #fields_of[self].samples end
function ImageFolder.__tostring(self)
  local f = fields_of[self]
  return string.format("ImageFolder(%d samples, %d classes, root = %s)", #f.samples, #f.classes, f.root)
end
function ImageFolder:len() return #fields_of[self].samples end

--- ds:get(i): {image, target} of sample i (1-based).
function ImageFolder:get(i)
  local f = fields_of[self]
  local s = f.samples[i]
  if s == nil then error(string.format("ImageFolder:get: index %s out of range 1..%d", tostring(i), #f.samples), 2) end
  local img, target = f.loader(s[1]), s[2]
  if f.transform then img = f.transform(img) end
  if f.target_transform then target = f.target_transform(target) end
  return { img, target }
end

--- lt.vision.datasets.ImageFolder(root[, {transform, target_transform, extensions, loader, is_valid_file}]).
function M.ImageFolder(root, opts)
  if type(root) ~= "string" then error("ImageFolder: root must be a path (string), got " .. type(root), 2) end
  opts = opts or {}
  if type(opts) ~= "table" then error("ImageFolder: expected a table of options, got " .. type(opts), 2) end
  for k, v in pairs(opts) do
    if not OPTIONS[k] then
      error(string.format("ImageFolder: unknown option '%s' (options: extensions, is_valid_file, loader, transform, "
        .. "target_transform)", tostring(k)), 2)
    end
    if (OPTIONS[k] == "function" and not callable(v)) or (OPTIONS[k] == "table" and type(v) ~= "table") then
      error(string.format("ImageFolder: option '%s' must be a %s, got %s", k,
        OPTIONS[k] == "function" and "function (or a transform)" or "list of strings", type(v)), 2)
    end
  end
  if opts.extensions and opts.is_valid_file then
    error("ImageFolder: give extensions or is_valid_file, not both (as torchvision)", 2)
  end
  local extensions = {}
  for i, e in ipairs(opts.extensions or M.IMG_EXTENSIONS) do
    if type(e) ~= "string" then error(string.format("ImageFolder: extensions[%d] must be a string", i), 2) end
    extensions[i] = e:lower()
  end
  root = root:gsub("(.)/+$", "%1")
  if not is_dir(root) then error("ImageFolder: " .. root .. " is not a folder", 2) end

  local classes = {}
  for _, n in ipairs(list(root, "ImageFolder")) do
    if is_dir(root .. "/" .. n) then classes[#classes + 1] = n end
  end
  sorted(classes)
  if #classes == 0 then error("ImageFolder: couldn't find any class folder in " .. root, 2) end
  local class_to_idx = {}
  for i, c in ipairs(classes) do class_to_idx[c] = i end

  local valid = opts.is_valid_file or function(path) return has_extension(path, extensions) end
  local samples, targets, empty = {}, {}, {}
  for i, c in ipairs(classes) do
    local n0 = #samples
    for _, dir in ipairs(sorted(walk(root .. "/" .. c, {}, 0))) do -- sorted(os.walk(...)): by path
      local files = {}
      for _, n in ipairs(list(dir, "ImageFolder")) do
        local p = dir .. "/" .. n
        local st = IO.stat(p)
        if st and st.type ~= "dir" then files[#files + 1] = n end
      end
      for _, n in ipairs(sorted(files)) do
        local p = dir .. "/" .. n
        if valid(p) then
          samples[#samples + 1] = { p, i }
          targets[#targets + 1] = i
        end
      end
    end
    if #samples == n0 then empty[#empty + 1] = c end
  end
  if #empty > 0 then
    local msg = "ImageFolder: found no valid file for the classes " .. table.concat(empty, ", ") .. " in " .. root
    if not opts.is_valid_file then msg = msg .. " (supported extensions: " .. table.concat(extensions, ", ") .. ")" end
    error(msg, 2)
  end

  local fields = { root = root, classes = classes, class_to_idx = class_to_idx, samples = samples, targets = targets,
    imgs = samples, transform = opts.transform, target_transform = opts.target_transform,
    loader = opts.loader or function(path) return vio.read_image(path, "rgb") end }
  setmetatable(fields, { __index = ImageFolder })
  local p = newproxy(true)
  local mt = getmetatable(p)
  mt.__index = fields
  mt.__len = ImageFolder.__len
  mt.__tostring = ImageFolder.__tostring
  fields_of[p] = fields
  return p
end

return require("lutra.names").strict(M, "lt.vision.datasets")
