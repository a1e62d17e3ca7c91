//! Times as sless keeps and shows them: UTC with millisecond precision, so that every
//! time in the API (RFC 3339) has the precision the stores keep and a record read back
//! equals the one written.

use chrono::{DateTime, SubsecRound, Utc};

/// Now, to the millisecond.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_has_millisecond_precision() {
        assert_eq!(super::now().timestamp_subsec_nanos() % 1_000_000, 0);
    }
}
