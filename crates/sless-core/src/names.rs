//! Resource names: DNS-1123 labels (RFC 1123 §2.1 as used by Kubernetes).

use crate::{Error, Result};

/// Checks that `value` is a DNS-1123 label: 1–63 characters of `[a-z0-9-]`, starting and
/// ending with a letter or digit. Errors name `field`.
pub fn validate_name(field: &str, value: &str) -> Result<()> {
    let msg = if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > 63 {
        Some("must be at most 63 characters")
    } else if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        Some("must contain only lowercase letters, digits and '-'")
    } else if value.starts_with('-') || value.ends_with('-') {
        Some("must start and end with a letter or digit")
    } else {
        None
    };
    match msg {
        Some(m) => Err(Error::field(field, format!("{m} (a DNS-1123 label), got {value:?}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_labels() {
        for ok in ["a", "hello", "hello-world", "a1", "0", &"a".repeat(63)] {
            assert!(validate_name("name", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_others_naming_the_field() {
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", "é", &"a".repeat(64)] {
            let err = validate_name("name", bad).expect_err(bad);
            assert!(err.to_string().starts_with("name: "), "{err}");
        }
    }
}
