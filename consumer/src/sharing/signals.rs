//! Capacity signals of a model server, read from its Prometheus `/metrics`:
//! requests waiting, requests running and KV-cache usage, as vLLM and
//! SGLang export them (sluice-llm-sim's GPU model exports vLLM's names).
//!
//! | signal | vLLM | SGLang |
//! |---|---|---|
//! | waiting | `vllm:num_requests_waiting` | `sglang:num_queue_reqs` |
//! | running | `vllm:num_requests_running` | `sglang:num_running_reqs` |
//! | KV cache (0..1) | `vllm:kv_cache_usage_perc`, older `vllm:gpu_cache_usage_perc` | `sglang:token_usage` |
//!
//! A server may export several series of one metric (vLLM's `engine`,
//! SGLang's data-parallel ranks, or several models): the series whose
//! `model_name` label is the asked model are taken; when none is, all of
//! them. Counts are summed over the series taken, the KV-cache usage is the
//! highest (the fullest engine is the one that queues).
//!
//! The parser is written here rather than taken from a crate: the
//! `prometheus-parse` crate would bring `regex` and `chrono` into the
//! consumer for three gauges; this one reads only the lines of the metrics
//! above (strictly: a malformed one is an error) and skips the rest, so a
//! server's unrelated, newer syntax cannot break the signal.

use bytes::Bytes;
use http::header::ACCEPT;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use sluice_openai::model_server::{sglang, vllm, MODEL_NAME_LABEL};
use std::time::Duration;

/// The load of one model at one server, at the time of the scrape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacitySignal {
    /// Requests queued at the server, not yet running.
    pub waiting: f64,
    /// Requests in the running batch.
    pub running: f64,
    /// Fraction of the KV cache in use (0..=1), when the server exports it.
    pub kv_cache_usage: Option<f64>,
}

/// Metric names of one server kind.
struct Names {
    waiting: &'static str,
    running: &'static str,
    /// Tried in order.
    kv_cache_usage: &'static [&'static str],
}

const VLLM: Names = Names {
    waiting: vllm::NUM_REQUESTS_WAITING,
    running: vllm::NUM_REQUESTS_RUNNING,
    kv_cache_usage: &[vllm::KV_CACHE_USAGE_PERC, vllm::GPU_CACHE_USAGE_PERC],
};

const SGLANG: Names = Names {
    waiting: sglang::NUM_QUEUE_REQS,
    running: sglang::NUM_RUNNING_REQS,
    kv_cache_usage: &[sglang::TOKEN_USAGE],
};

/// Where vLLM, SGLang and llm-sim serve their metrics, under the API's base URL.
pub const METRICS_PATH: &str = "/metrics";

/// The metrics URL of a backend whose API is at `base` (e.g. a consumer
/// backend target's `base`, `http://vllm:8000`).
pub fn metrics_url(base: &str) -> String {
    format!("{}{METRICS_PATH}", base.trim_end_matches('/'))
}

/// Largest `/metrics` answer read (vLLM's is tens of KiB).
pub const MAX_METRICS_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("invalid metrics URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot build the metrics client: {0}")]
    Client(String),
    #[error("scraping {url} timed out after {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("scraping {url} failed: {reason}")]
    Http { url: String, reason: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: StatusCode },
    #[error("the metrics of {url} are not UTF-8")]
    NotUtf8 { url: String },
    #[error("metrics line {line}: {reason}")]
    Parse { line: usize, reason: String },
    #[error(
        "no queue metrics found (neither vLLM's vllm:num_requests_waiting and \
         vllm:num_requests_running nor SGLang's sglang:num_queue_reqs and sglang:num_running_reqs)"
    )]
    NoSignal,
}

/// Reads a model's [`CapacitySignal`] from Prometheus text (the text format
/// 0.0.4 or OpenMetrics).
pub fn parse(text: &str, model: &str) -> Result<CapacitySignal, SignalError> {
    let samples = Samples::read(text)?;
    for names in [&VLLM, &SGLANG] {
        let (Some(waiting), Some(running)) = (
            samples.select(names.waiting, model),
            samples.select(names.running, model),
        ) else {
            continue;
        };
        let kv_cache_usage = names
            .kv_cache_usage
            .iter()
            .find_map(|name| samples.select(name, model))
            .and_then(|series| {
                series
                    .iter()
                    .copied()
                    .filter(|v| v.is_finite())
                    .reduce(f64::max)
            })
            .map(|usage| usage.clamp(0.0, 1.0));
        return Ok(CapacitySignal {
            waiting: sum(&waiting),
            running: sum(&running),
            kv_cache_usage,
        });
    }
    Err(SignalError::NoSignal)
}

fn sum(values: &[f64]) -> f64 {
    values.iter().filter(|v| v.is_finite()).sum()
}

/// One sample of a wanted metric.
#[derive(Debug, PartialEq)]
struct Sample {
    name: String,
    model: Option<String>,
    value: f64,
}

/// The samples of the metrics a [`CapacitySignal`] is made of.
struct Samples(Vec<Sample>);

impl Samples {
    fn read(text: &str) -> Result<Self, SignalError> {
        let mut samples = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let name_end = line
                .find(|c: char| c == '{' || c.is_ascii_whitespace())
                .unwrap_or(line.len());
            let name = &line[..name_end];
            if !is_wanted(name) {
                continue;
            }
            let sample =
                parse_sample(name, &line[name_end..]).map_err(|reason| SignalError::Parse {
                    line: index + 1,
                    reason,
                })?;
            samples.push(sample);
        }
        Ok(Samples(samples))
    }

    /// The values of `name`'s series for `model`, or of all its series when
    /// none is labelled with `model`; `None` when the metric is absent.
    fn select(&self, name: &str, model: &str) -> Option<Vec<f64>> {
        let series: Vec<&Sample> = self.0.iter().filter(|s| s.name == name).collect();
        if series.is_empty() {
            return None;
        }
        let of_model: Vec<f64> = series
            .iter()
            .filter(|s| s.model.as_deref() == Some(model))
            .map(|s| s.value)
            .collect();
        if of_model.is_empty() {
            Some(series.iter().map(|s| s.value).collect())
        } else {
            Some(of_model)
        }
    }
}

fn is_wanted(name: &str) -> bool {
    [&VLLM, &SGLANG].iter().any(|names| {
        name == names.waiting || name == names.running || names.kv_cache_usage.contains(&name)
    })
}

/// Parses `{labels} value [timestamp]` (labels optional) after a metric name.
fn parse_sample(name: &str, rest: &str) -> Result<Sample, String> {
    let (model, rest) = match rest.strip_prefix('{') {
        Some(labels) => {
            let (labels, rest) = parse_labels(labels)?;
            let model = labels
                .into_iter()
                .find(|(key, _)| key == MODEL_NAME_LABEL)
                .map(|(_, value)| value);
            (model, rest)
        }
        None => (None, rest),
    };
    let value = rest
        .split_ascii_whitespace()
        .next()
        .ok_or_else(|| format!("{name} has no value"))?;
    Ok(Sample {
        name: name.to_string(),
        model,
        value: parse_value(value).ok_or_else(|| format!("{name} has a bad value {value:?}"))?,
    })
}

/// A sample's labels, `(name, value)` in order.
type Labels = Vec<(String, String)>;

/// Parses `key="value",…}` (after the `{`); returns the labels and what
/// follows the `}`.
fn parse_labels(text: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| "a label without '='".to_string())?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad label name {key:?}"));
        }
        let quoted = rest[eq + 1..]
            .trim_start()
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key} has no quoted value"))?;
        let (value, after) = unescape_label_value(quoted)
            .ok_or_else(|| format!("label {key} has an unterminated value"))?;
        labels.push((key.to_string(), value));
        rest = after.trim_start();
        if let Some(after_comma) = rest.strip_prefix(',') {
            rest = after_comma.trim_start();
        } else if !rest.starts_with('}') {
            return Err(format!("expected ',' or '}}' after label {key}"));
        }
    }
}

/// Reads a label value up to its closing quote (`\\`, `\"` and `\n` are the
/// escapes); returns it and what follows the quote.
fn unescape_label_value(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            other => value.push(other),
        }
    }
    None
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse::<f64>().ok(),
    }
}

type MetricsClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Scrapes model servers' `/metrics` (HTTP or HTTPS), each scrape bounded
/// by a timeout and [`MAX_METRICS_BYTES`]. Cheap to clone; keep one.
#[derive(Clone)]
pub struct SignalReader {
    client: MetricsClient,
    timeout: Duration,
}

impl SignalReader {
    /// `timeout` bounds each whole scrape (connect, answer, body).
    pub fn new(timeout: Duration) -> Result<Self, SignalError> {
        let client =
            crate::call::http_client::pooled(Some(timeout)).map_err(SignalError::Client)?;
        Ok(Self { client, timeout })
    }

    /// Scrapes `metrics_url` (e.g. `http://vllm:8000/metrics`) and reads
    /// `model`'s signal from it.
    pub async fn read(
        &self,
        metrics_url: &str,
        model: &str,
    ) -> Result<CapacitySignal, SignalError> {
        let text = self.scrape(metrics_url).await?;
        parse(&text, model)
    }

    /// The text of `metrics_url`.
    pub async fn scrape(&self, metrics_url: &str) -> Result<String, SignalError> {
        let uri: Uri =
            metrics_url
                .parse()
                .map_err(|e: http::uri::InvalidUri| SignalError::InvalidUrl {
                    url: metrics_url.to_string(),
                    reason: e.to_string(),
                })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(SignalError::InvalidUrl {
                url: metrics_url.to_string(),
                reason: "expected http:// or https://".into(),
            });
        }
        let request = Request::get(uri)
            .header(ACCEPT, "text/plain;version=0.0.4;q=1,*/*;q=0.1")
            .body(Empty::new())
            .map_err(|e| SignalError::InvalidUrl {
                url: metrics_url.to_string(),
                reason: e.to_string(),
            })?;
        let http_error = |reason: String| SignalError::Http {
            url: metrics_url.to_string(),
            reason,
        };
        let fetch = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| http_error(e.to_string()))?;
            if !response.status().is_success() {
                return Err(SignalError::Status {
                    url: metrics_url.to_string(),
                    status: response.status(),
                });
            }
            Limited::new(response.into_body(), MAX_METRICS_BYTES)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .map_err(|e| http_error(e.to_string()))
        };
        let body = tokio::time::timeout(self.timeout, fetch)
            .await
            .map_err(|_| SignalError::Timeout {
                url: metrics_url.to_string(),
                timeout: self.timeout,
            })??;
        String::from_utf8(body.to_vec()).map_err(|_| SignalError::NotUtf8 {
            url: metrics_url.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM 0.6 (V0 engine): `gpu_cache_usage_perc`, one series per model.
    const VLLM_V0: &str = r#"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="False",gpu_memory_utilization="0.9",num_cpu_blocks="2048",num_gpu_blocks="7224",sliding_window="None",swap_space_bytes="4294967296"} 1.0
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.8421052631578947
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 57.0
vllm:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 57.0
vllm:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.62
"#;

    /// vLLM 0.10 (V1 engine): `kv_cache_usage_perc`, an `engine` label,
    /// two data-parallel engines.
    const VLLM_V1_TWO_ENGINES: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 5.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-0.6B"} 7.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-0.6B"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.31
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.97
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.2345e+06
"#;

    /// SGLang (its documented sample, with the newer rank labels).
    const SGLANG: &str = r#"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.28
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 162.0
# HELP sglang:num_used_tokens The number of used tokens
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct"} 123859.0
# HELP sglang:gen_throughput The generate throughput (token/s)
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 86.50814177726902
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 2826.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
"#;

    const LLAMA: &str = "meta-llama/Llama-3.1-8B-Instruct";

    #[test]
    fn reads_vllm_v0() {
        assert_eq!(
            parse(VLLM_V0, LLAMA).unwrap(),
            CapacitySignal {
                waiting: 3.0,
                running: 12.0,
                kv_cache_usage: Some(0.8421052631578947),
            }
        );
    }

    #[test]
    fn reads_vllm_v1_summing_engines_and_taking_the_fullest_cache() {
        assert_eq!(
            parse(VLLM_V1_TWO_ENGINES, "Qwen/Qwen3-0.6B").unwrap(),
            CapacitySignal {
                waiting: 4.0,
                running: 12.0,
                kv_cache_usage: Some(0.97),
            }
        );
    }

    #[test]
    fn reads_sglang() {
        assert_eq!(
            parse(SGLANG, LLAMA).unwrap(),
            CapacitySignal {
                waiting: 2826.0,
                running: 162.0,
                kv_cache_usage: Some(0.28),
            }
        );
    }

    #[test]
    fn another_models_name_falls_back_to_every_series() {
        // The server calls its model by a path; the consumer by an alias.
        let signal = parse(VLLM_V1_TWO_ENGINES, "qwen").unwrap();
        assert_eq!((signal.waiting, signal.running), (4.0, 12.0));
        // Two models on one server: only the asked one's series.
        let two = "vllm:num_requests_waiting{model_name=\"a\"} 1\n\
                   vllm:num_requests_waiting{model_name=\"b\"} 10\n\
                   vllm:num_requests_running{model_name=\"a\"} 2\n\
                   vllm:num_requests_running{model_name=\"b\"} 20\n";
        let a = parse(two, "a").unwrap();
        assert_eq!((a.waiting, a.running, a.kv_cache_usage), (1.0, 2.0, None));
        let neither = parse(two, "c").unwrap();
        assert_eq!((neither.waiting, neither.running), (11.0, 22.0));
    }

    #[test]
    fn labels_with_escapes_timestamps_and_special_values() {
        let text = "vllm:num_requests_waiting{model_name=\"a \\\"b\\\" \\\\ c\",x=\"}{,\"} 2 1700000000000\n\
                    vllm:num_requests_running{model_name=\"a \\\"b\\\" \\\\ c\"} NaN\n\
                    vllm:kv_cache_usage_perc{ model_name = \"a \\\"b\\\" \\\\ c\" , } 1.5e0\n\
                    # EOF\n";
        let signal = parse(text, "a \"b\" \\ c").unwrap();
        assert_eq!(signal.waiting, 2.0);
        // NaN counts nothing; the cache clamps to 1.
        assert_eq!(signal.running, 0.0);
        assert_eq!(signal.kv_cache_usage, Some(1.0));
        // Unlabelled series.
        let bare = "vllm:num_requests_waiting 3\nvllm:num_requests_running 4\n";
        assert_eq!(parse(bare, "m").unwrap().waiting, 3.0);
    }

    #[test]
    fn malformed_wanted_lines_are_errors_other_lines_are_skipped() {
        for bad in [
            "vllm:num_requests_waiting{model_name=\"a} 1",
            "vllm:num_requests_waiting{model_name=a} 1",
            "vllm:num_requests_waiting{model_name=\"a\" x=\"b\"} 1",
            "vllm:num_requests_waiting{=\"a\"} 1",
            "vllm:num_requests_waiting{model_name=\"a\"}",
            "vllm:num_requests_waiting many",
        ] {
            let text = format!("vllm:num_requests_running 1\n{bad}\n");
            match parse(&text, "a") {
                Err(SignalError::Parse { line: 2, .. }) => {}
                other => panic!("{bad}: {other:?}"),
            }
        }
        let odd = "{\"odd.metric\", foo=\"bar\"} 1\nsomething else entirely\n\
                   vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n";
        assert!(parse(odd, "a").is_ok());
    }

    #[test]
    fn no_queue_metrics_is_an_error() {
        assert!(matches!(
            parse("# nothing\nprocess_cpu_seconds_total 3\n", "m"),
            Err(SignalError::NoSignal)
        ));
        // Waiting without running is no signal either.
        assert!(matches!(
            parse("vllm:num_requests_waiting 3\n", "m"),
            Err(SignalError::NoSignal)
        ));
        assert!(SignalError::NoSignal
            .to_string()
            .contains("vllm:num_requests_waiting"));
    }

    #[test]
    fn metrics_url_of_a_base() {
        assert_eq!(metrics_url("http://vllm:8000"), "http://vllm:8000/metrics");
        assert_eq!(metrics_url("http://vllm:8000/"), "http://vllm:8000/metrics");
    }

    #[tokio::test]
    async fn bad_urls_and_unreachable_servers_are_clear_errors() {
        let reader = SignalReader::new(Duration::from_millis(500)).unwrap();
        assert!(matches!(
            reader.read("ftp://x/metrics", "m").await,
            Err(SignalError::InvalidUrl { .. })
        ));
        assert!(matches!(
            reader.read("not a url", "m").await,
            Err(SignalError::InvalidUrl { .. })
        ));
        // A port nobody listens on: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = format!("http://127.0.0.1:{port}/metrics");
        assert!(matches!(
            reader.read(&url, "m").await,
            Err(SignalError::Http { .. } | SignalError::Timeout { .. })
        ));
    }
}
