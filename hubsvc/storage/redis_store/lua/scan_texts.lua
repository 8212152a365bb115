-- Scan EV_TEXT rows of one channel newest first, at most ARGV[2] rows from ARGV[1] ("+" or an
-- exclusive "(<seq>-0"). ARGV[3]: 'q' = text contains ARGV[4] (ASCII case-insensitive, like
-- SQLite's lower()), 's' = sender is ARGV[4]. Stops after ARGV[5] matches.
-- Returns {exhausted (0/1), last id examined, {id, created_at, ...matches}}.
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', tonumber(ARGV[2]))
local mode, needle, want = ARGV[3], ARGV[4], tonumber(ARGV[5])
if mode == 'q' then needle = string.lower(needle) end
local out, found, last = {}, 0, ''
for n, e in ipairs(entries) do
  last = e[1]
  local f, s, c, x = e[2], '', '', ''
  for j = 1, #f, 2 do
    if f[j] == 's' then s = f[j + 1] elseif f[j] == 'c' then c = f[j + 1] elseif f[j] == 'x' then x = f[j + 1] end
  end
  local hit
  if mode == 's' then hit = (s == needle) else hit = string.find(string.lower(x), needle, 1, true) ~= nil end
  if hit then
    out[#out + 1] = e[1]; out[#out + 1] = c; found = found + 1
    if found >= want then
      return {(n == #entries and #entries < tonumber(ARGV[2])) and 1 or 0, last, out}
    end
  end
end
return {(#entries < tonumber(ARGV[2])) and 1 or 0, last, out}
