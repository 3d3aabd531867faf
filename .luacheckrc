std = "luajit"
max_line_length = 120
unused_args = false
files["tests"] = { std = "+busted" }
files["tests/dist"] = { std = "+busted" }
max_string_line_length = false
