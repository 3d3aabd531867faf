-- conf.lua — LÖVE's configuration for examples/love: a small window, no audio (headless runs under xvfb).
function love.conf(t)
  t.identity = "lutra-catch"
  t.version = "11.4"
  t.window.title = "lutra: catch (the paddle learns online)"
  t.window.width, t.window.height = 480, 360
  t.window.vsync = 0
  t.modules.audio, t.modules.sound, t.modules.joystick = false, false, false
  t.modules.physics, t.modules.video = false, false
end
