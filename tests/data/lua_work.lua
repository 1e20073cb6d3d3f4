-- CPU-heavy Lua for the instrument-mode real-program test: Lua function
-- calls, string building and matching, table inserts and sorts, pcall/error
-- (longjmp in the C VM) when the second argument is "errors": uftrace loses
-- its stack on longjmp, so the run compared with it raises none.
-- Usage: lua lua_work.lua ROUNDS [errors]
local rounds = tonumber(arg and arg[1]) or 30
local raise = arg and arg[2] == "errors"

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function words(i)
  local parts = {}
  for j = 1, 40 do
    parts[#parts + 1] = string.format("w%d_%d", i, j * 7 % 13)
  end
  local s = table.concat(parts, " ")
  local n = 0
  for w in s:gmatch("w%d+_1%d?") do n = n + #w end
  return n + #s:upper():gsub("W", "v")
end

local function tables(i)
  local t = {}
  for j = 1, 300 do t[j] = (j * 7919 + i) % 1000 end
  table.sort(t)
  local m = {}
  for j = 1, #t do m["k" .. t[j]] = j end
  local c = 0
  for _, v in pairs(m) do c = c + v end
  return c
end

local function failing(i)
  local ok = pcall(function() if raise and i % 2 == 0 then error("even") end return i end)
  return ok and 1 or 0
end

local total = 0
for i = 1, rounds do
  total = total + fib(18) + words(i) + tables(i) + failing(i)
end
print("lua total", total)
