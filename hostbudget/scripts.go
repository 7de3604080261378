package hostbudget

import "github.com/redis/go-redis/v9"

// A host's budget is one hash, KEYS[1]: field "ban" is the end of its ban
// (Unix ms) and each other field, a window's number (Unix ms / window),
// holds the weight booked in that window. Times are the callers' (see the
// package doc); expiries are set relative to them, so a caller's clock far
// from Redis's cannot make a key vanish early.

// reserveScript books ARGV[3] weight in the first window from max(ARGV[4],
// ban) whose count stays ≤ ARGV[2], the cap of the caller's class (or
// that is empty), not starting after ARGV[5]; the last ARGV[6] ms of a
// window are not booked. A window that holds the start of a tick (ARGV[7]
// ms, 0: none; ticks fall on multiples of it on the callers' clock, which
// is Redis's less ARGV[9] ms) takes ARGV[8] as its cap instead, and a cap
// of 0 books nothing there (opensTick). Windows before the caller's are
// dropped. Reply {1, start} when booked, else {0, the first window start
// past the horizon}. ARGV[1] is the window in ms.
var reserveScript = redis.NewScript(`
local h = KEYS[1]
local window, cap, weight = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local at, horizon, guard = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local tick, tickcap, off = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local ban = tonumber(redis.call('HGET', h, 'ban') or '0')
local current = math.floor(at / window)
local fields = redis.call('HKEYS', h)
for i = 1, #fields do
  local f = fields[i]
  if f ~= 'ban' and tonumber(f) < current then
    redis.call('HDEL', h, f)
  end
end
local t = math.max(at, ban)
local idx = math.floor(t / window)
if t >= (idx + 1) * window - guard then
  idx = idx + 1
  t = idx * window
end
while t <= horizon do
  local used = tonumber(redis.call('HGET', h, string.format('%d', idx)) or '0')
  local c = cap
  if tick > 0 then
    local r = (idx * window - off) % tick
    if r == 0 or r + window > tick then
      c = tickcap
    end
  end
  if c > 0 and (used == 0 or used + weight <= c) then
    if weight > 0 then
      redis.call('HINCRBY', h, string.format('%d', idx), weight)
    end
    local keep = math.max((idx + 2) * window, ban) - at
    if redis.call('PTTL', h) < keep then
      redis.call('PEXPIRE', h, keep)
    end
    return {1, t}
  end
  idx = idx + 1
  t = idx * window
end
return {0, t}
`)

// observeScript raises the count of the window holding ARGV[2] to ARGV[3]
// (never lowers it). ARGV[1] is the window in ms.
var observeScript = redis.NewScript(`
local h = KEYS[1]
local window, at, used = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local idx = math.floor(at / window)
local f = string.format('%d', idx)
if used > tonumber(redis.call('HGET', h, f) or '0') then
  redis.call('HSET', h, f, ARGV[3])
  local keep = (idx + 2) * window - at
  if redis.call('PTTL', h) < keep then
    redis.call('PEXPIRE', h, keep)
  end
end
return 1
`)

// banScript sets the ban's end to ARGV[2] unless a later one is set.
// ARGV[1] is the caller's now, ARGV[3] the window in ms.
var banScript = redis.NewScript(`
local h = KEYS[1]
local at, ban, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if ban > tonumber(redis.call('HGET', h, 'ban') or '0') then
  redis.call('HSET', h, 'ban', ARGV[2])
  local keep = ban - at + 2 * window
  if redis.call('PTTL', h) < keep then
    redis.call('PEXPIRE', h, keep)
  end
end
return 1
`)
