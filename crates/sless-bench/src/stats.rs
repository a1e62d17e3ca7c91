//! Percentiles.

use std::time::Duration;

use serde::Serialize;

/// Nearest-rank percentiles of a sample, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile (with few samples: the largest).
    pub p99_ms: f64,
    /// Smallest.
    pub min_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Summary {
    /// From microseconds.
    pub fn of_us(samples: &[u32]) -> Summary {
        let mut v: Vec<f64> = samples.iter().map(|&us| f64::from(us) / 1000.0).collect();
        Summary::of_ms(&mut v)
    }

    /// From durations.
    pub fn of_durations(samples: &[Duration]) -> Summary {
        let mut v: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        Summary::of_ms(&mut v)
    }

    fn of_ms(v: &mut [f64]) -> Summary {
        v.sort_by(f64::total_cmp);
        Summary {
            n: v.len(),
            p50_ms: percentile(v, 50.0),
            p99_ms: percentile(v, 99.0),
            min_ms: v.first().copied().unwrap_or(f64::NAN),
            max_ms: v.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Nearest rank on sorted data; NaN when empty.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let s = Summary::of_us(&(1..=100).map(|i| i * 1000).collect::<Vec<_>>());
        assert_eq!((s.n, s.p50_ms, s.p99_ms, s.min_ms, s.max_ms), (100, 50.0, 99.0, 1.0, 100.0));
        let one = Summary::of_us(&[2500]);
        assert_eq!((one.p50_ms, one.p99_ms), (2.5, 2.5));
        assert!(Summary::of_us(&[]).p50_ms.is_nan());
    }
}
