//! Figures the benchmarks and the demo print.

/// The `q` quantile (0..=1) of `values`, the nearest rank rounded: sorts
/// them. `None` when there are none.
pub fn percentile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    values.get(at).copied()
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn the_nearest_rank_rounded() {
        let mut values = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(percentile(&mut values, 0.5), Some(3.0));
        assert_eq!(percentile(&mut values, 1.0), Some(5.0));
        assert_eq!(percentile(&mut values, 0.0), Some(1.0));
        assert_eq!(percentile(&mut values, 0.6), Some(3.0));
        assert_eq!(percentile(&mut [], 0.5), None);
    }
}
