//! Lua scripts run by the Redis store.

/// Rate-limit decisions, each atomically, in one round trip.
///
/// One call carries one decision or several (decisions that arrived
/// together, `store::coalesce`); they are decided one after the other, each on
/// the counters as the earlier ones left them.
///
/// KEYS     the counter keys of every decision, decision after decision (one
///          hash slot in a Redis Cluster: a cluster call carries one decision
///          whose keys share the domain tag)
/// ARGV[1]  number of decisions; then per decision:
///   mode   "1" = all-or-nothing, "0" = increment everything
///   n      its number of keys (the next n of KEYS)
///   then four ARGVs per key:
///     hits      integer; > 0 charge, 0 check only, < 0 refund
///     limit     requests per unit
///     enforced  "1" normal limit, "0" shadow mode (never blocks)
///     ttl       seconds to keep a counter this decision creates
///
/// Returns, per decision in order, { applied (0|1), before_1, ..., before_n }:
/// whether it was applied and each counter's value before it. The rule is
/// the same as `store::decide` and the memory store's;
/// `redis_store_matches_rule` in the tests keeps them in step.
pub const DECIDE: &str = r#"
local out = {}
local key = 0
local arg = 2
for _ = 1, tonumber(ARGV[1]) do
  local all_or_nothing = ARGV[arg] == '1'
  local n = tonumber(ARGV[arg + 1])
  arg = arg + 2
  local keys = {}
  for i = 1, n do keys[i] = KEYS[key + i] end
  local before = redis.call('MGET', unpack(keys))
  local blocked = false
  for i = 1, n do
    local value = tonumber(before[i]) or 0
    before[i] = value
    local base = arg + 4 * (i - 1)
    if ARGV[base + 2] == '1' then
      local hits = tonumber(ARGV[base])
      local limit = tonumber(ARGV[base + 1])
      if (hits > 0 and value + hits > limit) or (hits == 0 and value >= limit) then
        blocked = true
      end
    end
  end
  local applied = not (all_or_nothing and blocked)
  out[#out + 1] = applied and 1 or 0
  for i = 1, n do
    out[#out + 1] = before[i]
    if applied then
      local base = arg + 4 * (i - 1)
      local hits = tonumber(ARGV[base])
      if hits > 0 then
        redis.call('INCRBY', keys[i], hits)
        if before[i] == 0 then
          redis.call('EXPIRE', keys[i], ARGV[base + 3])
        end
      elseif hits < 0 and before[i] > 0 then
        local after = before[i] + hits
        if after < 0 then after = 0 end
        redis.call('SET', keys[i], after, 'KEEPTTL')
      end
    end
  end
  key = key + n
  arg = arg + 4 * n
end
return out
"#;
