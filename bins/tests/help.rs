//! The operators' interface: each binary's `--help` is its snapshot
//! (`snapshots/<binary>.help`), and its flags (names, aliases, environment
//! variables, defaults) are those of the binaries as they were before
//! sluice-bins assembled them (`snapshots/<binary>.baseline.help`, printed by
//! the binaries built from main before the move). Order, headings and
//! wording may change; a flag may only gain the aliases listed below, and
//! only the flags listed below are new.
//!
//! After a deliberate change: `SLUICE_UPDATE_SNAPSHOTS=1 cargo test -p
//! sluice-bins --test help` rewrites the snapshots (never the baselines).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A binary's parser, as its `main` builds it.
type Parser = fn() -> clap::Command;

const BINARIES: [(&str, Parser); 3] = [
    ("sluice-rls", sluice_bins::rls::command),
    ("sluice-consumer", sluice_bins::consumer::command),
    ("sluice-allinone", sluice_bins::allinone::command),
];

/// Aliases a flag gained in the move, as `(binary, flag, alias)`: none.
const NEW_ALIASES: [(&str, &str, &str); 0] = [];

/// Flags added since the baseline, as `(binary, flag)`: the consumer's log
/// format, which sluice-rls and sluice-allinone already had (issue 27), and
/// envoyproxy/ratelimit's key layout and metric names (issue 32), trace
/// export (issue 29), the consumer's tokenizers (issue 30) and
/// saturation-aware admission (issue 28).
const NEW_FLAGS: [(&str, &str); 28] = [
    ("sluice-rls", "--redis-max-decisions-per-call"),
    ("sluice-allinone", "--redis-max-decisions-per-call"),
    ("sluice-rls", "--route-in-quota-after-over-quota-ms"),
    ("sluice-allinone", "--route-in-quota-after-over-quota-ms"),
    ("sluice-rls", "--deferral-unclaimed-republish-s"),
    ("sluice-allinone", "--deferral-unclaimed-republish-s"),
    ("sluice-rls", "--route-in-quota-when-saturated"),
    ("sluice-rls", "--saturation-max-age-ms"),
    ("sluice-rls", "--saturation-max-models"),
    ("sluice-allinone", "--route-in-quota-when-saturated"),
    ("sluice-allinone", "--saturation-max-age-ms"),
    ("sluice-allinone", "--saturation-max-models"),
    ("sluice-rls", "--otlp-endpoint"),
    ("sluice-consumer", "--otlp-endpoint"),
    ("sluice-allinone", "--otlp-endpoint"),
    ("sluice-consumer", "--admission-config"),
    ("sluice-allinone", "--admission-config"),
    ("sluice-consumer", "--log-format"),
    ("sluice-rls", "--key-layout"),
    ("sluice-rls", "--cache-key-prefix"),
    ("sluice-rls", "--expiration-jitter-max-s"),
    ("sluice-rls", "--upstream-metrics"),
    ("sluice-rls", "--near-limit-ratio"),
    ("sluice-allinone", "--key-layout"),
    ("sluice-allinone", "--cache-key-prefix"),
    ("sluice-allinone", "--expiration-jitter-max-s"),
    ("sluice-allinone", "--upstream-metrics"),
    ("sluice-allinone", "--near-limit-ratio"),
];

fn snapshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name)
}

/// `--help` as the binary prints it (clap's answer to `--help`: the long
/// layout only where some flag has a long text), with the values of
/// environment variables set where the test runs left out (`[env: NAME=]`).
fn help(command: Parser) -> String {
    let command = command();
    let name = command.get_name().to_string();
    let error = match command.try_get_matches_from([name.as_str(), "--help"]) {
        Ok(_) => panic!("{name} --help parsed as a command line"),
        Err(error) => error,
    };
    assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp);
    without_env_values(&error.render().to_string())
}

fn without_env_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("[env: ") {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let end = tail.find(']').unwrap_or(tail.len());
        let entry = &tail[..end];
        match entry.find('=') {
            Some(eq) => out.push_str(&entry[..=eq]),
            None => out.push_str(entry),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// One flag of a help text: what an operator types or sets.
#[derive(Debug, PartialEq)]
struct Flag {
    env: Option<String>,
    default: Option<String>,
    aliases: Vec<String>,
}

/// The flags of a clap long help, by long name: an entry starts with
/// `  -x, --name` or `      --name`; its description lines are indented more.
fn flags(help: &str) -> BTreeMap<String, Flag> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        let is_entry = (2..=6).contains(&indent) && text.starts_with('-');
        if is_entry {
            let name = text
                .split([',', ' '])
                .find(|word| word.starts_with("--"))
                .unwrap_or(text)
                .to_string();
            entries.push((name, String::new()));
        } else if let Some((_, body)) = entries.last_mut() {
            if indent > 6 {
                body.push(' ');
                body.push_str(text);
            }
        }
    }
    entries
        .into_iter()
        .map(|(name, body)| {
            let flag = Flag {
                env: bracket(&body, "[env: ").map(|env| env.trim_end_matches('=').to_string()),
                default: bracket(&body, "[default: "),
                aliases: bracket(&body, "[alias: ")
                    .or_else(|| bracket(&body, "[aliases: "))
                    .map(|list| list.split(", ").map(str::to_string).collect())
                    .unwrap_or_default(),
            };
            (name, flag)
        })
        .collect()
}

/// The text of `[label...]` in `body`, if there.
fn bracket(body: &str, label: &str) -> Option<String> {
    let start = body.find(label)? + label.len();
    let end = body[start..].find(']')? + start;
    Some(body[start..end].to_string())
}

#[test]
fn each_binary_prints_its_snapshot() {
    let update = std::env::var_os("SLUICE_UPDATE_SNAPSHOTS").is_some();
    for (binary, command) in BINARIES {
        let path = snapshot(&format!("{binary}.help"));
        let now = help(command);
        if update {
            std::fs::write(&path, &now).unwrap();
        }
        let wanted =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            now,
            wanted,
            "{binary} --help differs from {}",
            path.display()
        );
    }
}

#[test]
fn every_flag_keeps_its_name_variable_and_default() {
    for (binary, command) in BINARIES {
        let path = snapshot(&format!("{binary}.baseline.help"));
        let baseline =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (before, mut now) = (flags(&baseline), flags(&help(command)));
        assert!(before.len() > 10, "{binary}: baseline unread: {before:?}");
        for (flag, _, alias) in NEW_ALIASES.iter().filter(|(b, ..)| *b == binary) {
            if let Some(entry) = now.get_mut(*flag) {
                entry.aliases.retain(|a| a != alias);
            }
        }
        for (_, flag) in NEW_FLAGS.iter().filter(|(b, _)| *b == binary) {
            assert!(now.remove(*flag).is_some(), "{binary}: {flag} missing");
        }
        let names = |flags: &BTreeMap<String, Flag>| flags.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&now),
            names(&before),
            "{binary}: flags added or removed"
        );
        for (name, flag) in &before {
            assert_eq!(&now[name], flag, "{binary} {name}");
        }
    }
}

#[test]
fn the_help_parser_reads_what_clap_prints() {
    let help = "Options:\n      --redis-url <URL>\n          Redis [env: SLUICE_REDIS_URL=x] [default: redis://h:1]\n  -c, --config <C>\n          Config [env: C=] [aliases: --conf, --cfg]\n  -h, --help\n          Print help\n";
    let flags = flags(&without_env_values(help));
    assert_eq!(flags.len(), 3);
    assert_eq!(
        flags["--redis-url"],
        Flag {
            env: Some("SLUICE_REDIS_URL".into()),
            default: Some("redis://h:1".into()),
            aliases: vec![],
        }
    );
    assert_eq!(flags["--config"].aliases, ["--conf", "--cfg"]);
    assert_eq!(flags["--help"].env, None);
}
