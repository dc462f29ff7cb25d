//! The shared secrets that authenticate deferred requests (see
//! `sluice_admission::deferral`): read from a file (one per line) or an
//! environment variable (comma-separated). The first signs; all verify.

use sluice_admission::deferral::Secret;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("cannot read the deferral secret file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}, secret {index}: {why}")]
    Invalid {
        origin: String,
        index: usize,
        why: String,
    },
}

/// Secrets from `file` (one per line; blank lines and `#` comments skipped)
/// followed by those in `list` (comma-separated). Empty when neither is set.
pub fn load(file: Option<&Path>, list: Option<&str>) -> Result<Vec<Secret>, SecretsError> {
    let mut secrets = Vec::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| SecretsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        secrets.extend(parse(lines, &path.display().to_string())?);
    }
    if let Some(list) = list {
        let items = list.split(',').map(str::trim).filter(|s| !s.is_empty());
        secrets.extend(parse(items, "SLUICE_DEFERRAL_SECRETS")?);
    }
    Ok(secrets)
}

fn parse<'a>(
    items: impl Iterator<Item = &'a str>,
    origin: &str,
) -> Result<Vec<Secret>, SecretsError> {
    items
        .enumerate()
        .map(|(index, item)| {
            Secret::new(item).map_err(|why| SecretsError::Invalid {
                origin: origin.to_string(),
                index: index + 1,
                why,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_list_with_comments_and_blank_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets");
        let a = "a".repeat(32);
        let b = "b".repeat(40);
        std::fs::write(&path, format!("# current first\n{a}\n\n{b}\n")).unwrap();
        let c = "c".repeat(33);
        let secrets = load(Some(&path), Some(&format!(" {c} ,"))).unwrap();
        assert_eq!(
            secrets,
            vec![
                Secret::new(a).unwrap(),
                Secret::new(b).unwrap(),
                Secret::new(c).unwrap()
            ]
        );
        assert!(load(None, None).unwrap().is_empty());
    }

    #[test]
    fn short_secrets_and_missing_files_say_where() {
        let error = load(None, Some("short")).unwrap_err().to_string();
        assert!(
            error.contains("SLUICE_DEFERRAL_SECRETS, secret 1"),
            "{error}"
        );
        assert!(
            !error.contains("short"),
            "the secret itself is never printed: {error}"
        );
        let error = load(Some(Path::new("/nonexistent/secret")), None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/secret"), "{error}");
    }
}
