//! docs/architecture.md's Redis key table against the code: every shared
//! key's row is the one `sluice_contract::key_table::ROWS` renders, in that
//! order, and the docs list no shared key the code does not have.

use sluice_contract::key_table::ROWS;

/// Keys that are not shared, with their one owner: the RLS's counters and
/// the consumer's own pacing and rate keys.
const NOT_SHARED: &[&str] = &["sluice:{<domain>}", "sluice:pace:", "sluice:rates:"];

/// The table's rows (from its first key row on), or why there are none.
fn docs_rows() -> Result<Vec<String>, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let section = text
        .split("\n## Redis keys\n")
        .nth(1)
        .ok_or("docs/architecture.md has no `## Redis keys` section")?;
    Ok(section
        .lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect())
}

#[test]
fn the_docs_key_table_is_the_code_s() {
    let shared: Vec<String> = docs_rows()
        .unwrap()
        .into_iter()
        .filter(|row| {
            let key = row.trim_start_matches("| `");
            !NOT_SHARED.iter().any(|prefix| key.starts_with(prefix))
        })
        .collect();
    let expected: Vec<String> = ROWS.iter().map(|row| row.markdown()).collect();
    assert!(
        shared == expected,
        "docs/architecture.md's shared-key rows differ from contract::key_table; they should read:\n{}",
        expected.join("\n")
    );
}
