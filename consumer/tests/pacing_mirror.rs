//! The pacing scripts and their Rust mirrors (`pacing::gcra::check`, and
//! `gcra::correct` for the usage correction after a call) held equal on
//! random rates, bursts, token costs, corrections, clock steps, factors,
//! overrides and expiries, against a real redis-server: decisions and stored
//! state are compared step by step. Replay a failure with the seed it prints:
//! `SLUICE_PACING_SEED=<seed> cargo test -p sluice-consumer --test pacing_mirror`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use sluice_consumer::gcra::{self, DimensionInput, Stored};
use sluice_consumer::keys::{BucketId, Dimension};
use sluice_consumer::{decision_from_reply, Scope};
use sluice_consumer::{Pacer, PacingConfig, Rates};
use sluice_redis::RedisConn;
use sluice_testkit::RedisServer;
use std::collections::HashMap;

const T0: u64 = 1_700_000_000_000;
/// The first scenario's seed; scenario `n` runs `SEED + n`.
const SEED: u64 = 0x51CE_9ACE_D00D_F00D;
const SCENARIOS: u64 = 60;
/// The catch-up rule's slack, in whole ms.
const CATCH_UP: u64 = gcra::CATCH_UP_MS as u64;
const STEPS: usize = 200;

/// xorshift64: small, fixed, reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.next(items.len() as u64) as usize]
    }
    /// A rate per second, from very slow to fast, some with long fractions.
    fn rate(&mut self, scale: f64) -> f64 {
        match self.next(4) {
            0 => self.pick(&[0.5, 1.0, 3.0, 7.0, 16.0, 20.0, 250.0]) * scale,
            1 => (1 + self.next(100_000)) as f64 / 1000.0 * scale,
            2 => scale / (1 + self.next(7)) as f64,
            _ => (1 + self.next(1000)) as f64 * scale / 3.0,
        }
    }
}

fn random_rates(rng: &mut Rng) -> Rates {
    Rates {
        requests_per_second: match rng.next(6) {
            0 => None,
            1 => Some(0.0),
            _ => Some(rng.rate(1.0)),
        },
        tokens_per_second: match rng.next(3) {
            0 => None,
            _ => Some(rng.rate(100.0)),
        },
    }
}

fn random_config(rng: &mut Rng, model: &str) -> PacingConfig {
    let mut model_rates = HashMap::new();
    if rng.chance(30) {
        model_rates.insert(model.to_string(), random_rates(rng));
    }
    PacingConfig {
        default_rates: random_rates(rng),
        model_rates,
        request_burst: match rng.next(3) {
            0 => 1.0,
            1 => (1 + rng.next(5)) as f64,
            _ => 1.0 + rng.next(1000) as f64 / 250.0,
        },
        token_burst: match rng.next(3) {
            0 => 0.0,
            1 => rng.next(5000) as f64,
            _ => rng.next(100_000) as f64 / 7.0,
        },
        paused_recheck_ms: rng.pick(&[0, 1, 250, 1000, 1777]),
    }
}

/// How often each case came up, over all scenarios: the test asserts that
/// each did, so a change to the generators cannot quietly skip one.
#[derive(Debug, Default)]
struct Seen {
    admitted: u32,
    waited_for_requests: u32,
    waited_for_tokens: u32,
    paused: u32,
    rescaled_while_waiting: u32,
    caught_up: u32,
    empty_bucket: u32,
    corrected_up: u32,
    corrected_down: u32,
    correction_left_alone: u32,
}

/// One scenario: a bucket of its own, `STEPS` checks.
struct Scenario<'a> {
    seen: &'a mut Seen,
    seed: u64,
    rng: Rng,
    pacer: Pacer,
    conn: RedisConn,
    bucket: BucketId,
    tenant: String,
    model: String,
    config: &'a PacingConfig,
    now: u64,
    last_wait: u64,
    /// What the mirror says each dimension's key holds.
    state: [Option<Stored>; 2],
}

const DIMENSIONS: [Dimension; 2] = [Dimension::Requests, Dimension::Tokens];

impl Scenario<'_> {
    /// `what` a step does, with the clock and the mirror's state it starts
    /// from.
    fn describe(&self, what: std::fmt::Arguments) -> String {
        format!("{what} now {} state {:?}", self.now, self.state)
    }

    fn context(&self, step: usize, what: &str) -> String {
        format!(
            "seed {:#x} step {step}: {what} (replay: SLUICE_PACING_SEED={:#x}); config {:?}",
            self.seed, self.seed, self.config
        )
    }

    /// The script's result equals the mirror's.
    fn agree<T: PartialEq + std::fmt::Debug>(
        &self,
        (step, what): (usize, &str),
        script: T,
        mirror: T,
        mirror_state: &dyn std::fmt::Debug,
    ) {
        let context = self.context(step, what);
        assert_eq!(script, mirror, "{context}; mirror {mirror_state:?}");
    }

    /// A runtime change through the pacer's API, or a value only a person
    /// (or a bug) would write.
    async fn change_rates(&mut self) {
        let dimension = self.rng.pick(&DIMENSIONS);
        let scope = if self.rng.chance(50) {
            Scope::Column { model: &self.model }
        } else {
            Scope::Bucket {
                tenant: &self.tenant,
                model: &self.model,
            }
        };
        let scale = match dimension {
            Dimension::Requests => 1.0,
            Dimension::Tokens => 100.0,
        };
        match self.rng.next(8) {
            0 => self.pacer.set_rate(scope, dimension, None).await.unwrap(),
            1 => self
                .pacer
                .set_rate(scope, dimension, Some(0.0))
                .await
                .unwrap(),
            2 | 3 => {
                let rate = self.rng.rate(scale);
                self.pacer
                    .set_rate(scope, dimension, Some(rate))
                    .await
                    .unwrap()
            }
            4 => self.pacer.clear_rate(scope, dimension).await.unwrap(),
            5 => {
                let factor = self.rng.pick(&[0.0, 0.37, 0.5, 1.0, 2.0, 10.0, 1000.0]);
                self.pacer
                    .set_model_factor(&self.model, factor)
                    .await
                    .unwrap()
            }
            6 => self.pacer.clear_model_factor(&self.model).await.unwrap(),
            _ => self.corrupt_override().await,
        }
    }

    /// A field of the column's hash that is not a number: the script reads
    /// it as unset.
    async fn corrupt_override(&mut self) {
        let tenant = sluice_consumer::keys::sanitize(&self.tenant);
        let field = match self.rng.next(5) {
            0 => "factor".to_string(),
            1 => "rps:*".to_string(),
            2 => "tps:*".to_string(),
            3 => format!("rps:{tenant}"),
            _ => format!("tps:{tenant}"),
        };
        let value = self.rng.pick(&["", "fast", "1 2", " 7 "]);
        let _: () = redis::cmd("HSET")
            .arg(self.bucket.rates_key())
            .arg(field)
            .arg(value)
            .query_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// The key of one dimension expires (the test's clock is simulated, so
    /// Redis never expires them by itself: see `verify_state`).
    async fn expire(&mut self) {
        let i = self.rng.next(2) as usize;
        let _: () = redis::cmd("DEL")
            .arg(self.bucket.pace_key(DIMENSIONS[i]))
            .query_async(&mut self.conn)
            .await
            .unwrap();
        self.state[i] = None;
    }

    /// Forward by a little (the catch-up rule), exactly the last wait, about
    /// the last wait, a while, a long while; sometimes back (clock skew).
    fn advance_clock(&mut self) {
        let jitter = 1 + self.rng.next(2 * CATCH_UP + 2);
        self.now = match self.rng.next(8) {
            0 => self.now,
            1 => self.now + 1 + self.rng.next(CATCH_UP),
            2 => self.now + self.last_wait,
            3 => (self.now + self.last_wait + jitter).saturating_sub(CATCH_UP + 1),
            4 => self.now + self.rng.next(200),
            5 => self.now + self.rng.next(10_000),
            6 => self.now + self.rng.next(600_000),
            _ => self.now.saturating_sub(self.rng.next(50)),
        };
    }

    fn tokens(&mut self) -> u64 {
        match self.rng.next(5) {
            0 => 0,
            1 => 1 + self.rng.next(50),
            2 => self.rng.next(5000),
            3 => self.rng.next(100_000),
            _ => self.rng.next(3_000_000),
        }
    }

    async fn step(&mut self, step: usize) {
        if self.rng.chance(12) {
            self.change_rates().await;
        }
        if self.rng.chance(4) {
            self.expire().await;
        }
        self.advance_clock();
        let tokens = self.tokens();
        let rates = self
            .pacer
            .effective_rates(&self.tenant, &self.model)
            .await
            .unwrap();
        let input = |i: usize, rate, cost, burst| DimensionInput {
            rate,
            cost,
            burst,
            stored: self.state[i],
        };
        let mirror = gcra::check(
            self.now as f64,
            [
                input(0, rates.requests_per_second, 1.0, self.config.request_burst),
                input(
                    1,
                    rates.tokens_per_second,
                    tokens as f64,
                    self.config.token_burst,
                ),
            ],
            self.config.paused_recheck_ms,
        );
        let what = self.describe(format_args!("tokens {tokens} rates {rates:?}"));
        let script = self
            .pacer
            .check(&self.bucket, tokens, Some(self.now))
            .await
            .unwrap();
        let expected = decision_from_reply(&mirror.reply).unwrap();
        self.agree((step, &what), script, expected, &mirror);
        self.note(&mirror, tokens);
        self.last_wait = match mirror.reply {
            [0, wait, _] => wait.max(0) as u64,
            _ => 0,
        };
        for (i, write) in mirror.writes.iter().enumerate() {
            if let Some(write) = write {
                self.state[i] = Some(write.stored);
            }
        }
        self.verify_state(step, &what, &mirror.writes).await;
        if self.rng.chance(30) {
            self.correct(step, rates.tokens_per_second).await;
        }
    }

    /// A call's answer came: its real usage differs from the estimate by a
    /// random amount, either way.
    async fn correct(&mut self, step: usize, rate: Option<f64>) {
        self.advance_clock();
        let magnitude = self.tokens() as i64;
        let delta = if self.rng.chance(50) {
            magnitude
        } else {
            -magnitude
        };
        let what = self.describe(format_args!("correction delta {delta} rate {rate:?}"));
        let mirror = gcra::correct(self.now as f64, rate, self.state[1], delta as f64);
        let written = self
            .pacer
            .correct(&self.bucket, delta, Some(self.now))
            .await
            .unwrap();
        self.agree((step, &what), written, mirror.is_some(), &mirror);
        match mirror {
            Some(_) if delta > 0 => self.seen.corrected_up += 1,
            Some(_) => self.seen.corrected_down += 1,
            None => self.seen.correction_left_alone += 1,
        }
        if let Some(write) = mirror {
            self.state[1] = Some(write.stored);
        }
        self.verify_state(step, &what, &[None, mirror]).await;
    }

    fn note(&mut self, mirror: &gcra::Checked, tokens: u64) {
        let seen = &mut *self.seen;
        match mirror.reply {
            [1, ..] => seen.admitted += 1,
            [_, _, 1] => seen.waited_for_requests += 1,
            [_, _, 2] => seen.waited_for_tokens += 1,
            _ => seen.paused += 1,
        }
        if mirror.reply[0] == 0 && mirror.writes.iter().any(Option::is_some) {
            seen.rescaled_while_waiting += 1;
        }
        let now = self.now as f64;
        let late =
            |s: &Option<Stored>| s.is_some_and(|s| s.tat < now && s.tat > now - gcra::CATCH_UP_MS);
        if late(&self.state[0]) || (tokens > 0 && late(&self.state[1])) {
            seen.caught_up += 1;
        }
        if self.state.iter().all(Option::is_none) {
            seen.empty_bucket += 1;
        }
    }

    /// Both keys hold what the mirror says; a key written now has the
    /// mirror's `PX` (less the real time since), and is then made
    /// persistent so that real time never expires it under the simulated
    /// clock.
    async fn verify_state(&mut self, step: usize, what: &str, writes: &[Option<gcra::Write>; 2]) {
        for (i, dimension) in DIMENSIONS.iter().enumerate() {
            let key = self.bucket.pace_key(*dimension);
            let (text, pttl): (Option<String>, i64) = redis::pipe()
                .get(&key)
                .pttl(&key)
                .query_async(&mut self.conn)
                .await
                .unwrap();
            let stored = text.as_deref().map(|t| {
                Stored::parse(t)
                    .unwrap_or_else(|| panic!("{}: bad value {t:?}", self.context(step, what)))
            });
            let bits = |s: Option<Stored>| s.map(|s| (s.tat.to_bits(), s.interval.to_bits()));
            assert_eq!(
                bits(stored),
                bits(self.state[i]),
                "{}: {dimension:?} key {text:?}, mirror {:?}",
                self.context(step, what),
                self.state[i]
            );
            if let Some(write) = writes[i] {
                assert!(
                    pttl <= write.px && pttl > write.px - 500,
                    "{}: {dimension:?} PTTL {pttl}, mirror PX {}",
                    self.context(step, what),
                    write.px
                );
                let _: () = redis::cmd("PERSIST")
                    .arg(&key)
                    .query_async(&mut self.conn)
                    .await
                    .unwrap();
            }
        }
    }
}

async fn run_scenario(redis: &RedisServer, seed: u64, seen: &mut Seen) {
    let mut rng = Rng::new(seed);
    let tenant = format!("tenant {}", rng.next(1000));
    let model = format!("model/{seed:x}");
    let config = random_config(&mut rng, &model);
    let pacer = Pacer::new(common::conn(redis), config.clone(), None).unwrap();
    let mut scenario = Scenario {
        seen,
        seed,
        rng,
        pacer,
        conn: common::conn(redis),
        bucket: BucketId::new(&tenant, &model),
        tenant,
        model,
        config: &config,
        now: T0,
        last_wait: 0,
        state: [None, None],
    };
    for step in 0..STEPS {
        scenario.step(step).await;
    }
}

#[tokio::test]
async fn the_rust_mirror_matches_the_script() {
    let redis = RedisServer::start().unwrap();
    let replay = std::env::var("SLUICE_PACING_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok());
    let seeds: Vec<u64> = match replay {
        Some(seed) => vec![seed],
        None => (0..SCENARIOS).map(|n| SEED.wrapping_add(n)).collect(),
    };
    let mut seen = Seen::default();
    for seed in &seeds {
        run_scenario(&redis, *seed, &mut seen).await;
    }
    println!("{seen:?}");
    if replay.is_none() {
        let counts = [
            seen.admitted,
            seen.waited_for_requests,
            seen.waited_for_tokens,
            seen.paused,
            seen.rescaled_while_waiting,
            seen.caught_up,
            seen.empty_bucket,
            seen.corrected_up,
            seen.corrected_down,
            seen.correction_left_alone,
        ];
        assert!(counts.iter().all(|&n| n >= 10), "a case too rare: {seen:?}");
    }
}
