-- A mixed Lua workload: strings, tables, sorting, closures and recursion (many
-- functions), for benchmarks/bench_tui.py (the observer's own CPU use) and
-- docs/make_screenshots.py (the flame graph).
-- usage: lua mixed.lua [ROUNDS]   (without ROUNDS it runs until killed)
local rounds = tonumber(arg and arg[1])
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local done = 0
while not rounds or done < rounds do
  local t = {}
  for i = 1, 20000 do t[i] = tostring(i * 7 % 1000) .. "x" end
  table.sort(t)
  local parts = {}
  for w in table.concat(t, ",", 1, 2000):gmatch("[^,]+") do parts[#parts+1] = w:upper() end
  fib(18)
  done = done + 1
end
