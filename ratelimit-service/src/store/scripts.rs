//! Lua scripts run by the Redis store.

/// One rate-limit decision, atomically, in one round trip.
///
/// KEYS[i]  counter keys of the decision (one hash slot: they share the domain tag)
/// ARGV[1]  "1" = all-or-nothing, "0" = increment everything
/// then four ARGVs per key, at ARGV[2 + 4*(i-1)] ..:
///   hits      integer; > 0 charge, 0 check only, < 0 refund
///   limit     requests per unit
///   enforced  "1" normal limit, "0" shadow mode (never blocks)
///   ttl       seconds to keep a counter this decision creates
///
/// Returns { applied (0|1), before_1, ..., before_n }: each counter's value
/// before the decision. The rule is the same as `store::decide` and the memory
/// store's; `redis_store_matches_rule` in the tests keeps them in step.
pub const DECIDE: &str = r#"
local n = #KEYS
local before = redis.call('MGET', unpack(KEYS))
local blocked = false
for i = 1, n do
  local value = tonumber(before[i]) or 0
  before[i] = value
  local base = 2 + 4 * (i - 1)
  local hits = tonumber(ARGV[base])
  local limit = tonumber(ARGV[base + 1])
  if ARGV[base + 2] == '1' then
    if (hits > 0 and value + hits > limit) or (hits == 0 and value >= limit) then
      blocked = true
    end
  end
end
if ARGV[1] == '1' and blocked then
  return { 0, unpack(before) }
end
for i = 1, n do
  local base = 2 + 4 * (i - 1)
  local hits = tonumber(ARGV[base])
  if hits > 0 then
    redis.call('INCRBY', KEYS[i], hits)
    if before[i] == 0 then
      redis.call('EXPIRE', KEYS[i], ARGV[base + 3])
    end
  elseif hits < 0 and before[i] > 0 then
    local after = before[i] + hits
    if after < 0 then after = 0 end
    redis.call('SET', KEYS[i], after, 'KEEPTTL')
  end
end
return { 1, unpack(before) }
"#;
