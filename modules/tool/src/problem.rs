//! One problem in a module's `config` table, as every module's settings validation reports it:
//! the key, what is wrong and a hint; the daemon's config loader places it at its file, line
//! and section.

use std::fmt;
use std::ops::RangeInclusive;

/// One problem in a module's `config` table: the key under `config` (`push.remote`,
/// `limits.processes`), what is wrong and, when there is something to do, a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
    pub hint: Option<&'static str>,
}

impl Problem {
    pub fn new(
        key: impl Into<String>,
        message: impl Into<String>,
        hint: Option<&'static str>,
    ) -> Problem {
        Problem { key: key.into(), message: message.into(), hint }
    }

    /// `value` of `key` when it lies in `range`, else the problem naming the range (never a
    /// clamp: an out-of-range number is the person's to fix); `hint` says the default.
    pub fn check_range(
        key: &str,
        value: u64,
        range: &RangeInclusive<u64>,
        hint: &'static str,
    ) -> Result<u64, Problem> {
        if range.contains(&value) {
            return Ok(value);
        }
        Err(Problem::new(
            key,
            format!("must be between {} and {}; got {value}", range.start(), range.end()),
            Some(hint),
        ))
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_checked_with_its_bounds_allowed() {
        let r = 1..=10;
        assert_eq!(Problem::check_range("n", 1, &r, "h"), Ok(1));
        assert_eq!(Problem::check_range("n", 10, &r, "h"), Ok(10));
        let Err(p) = Problem::check_range("limits.n", 0, &r, "the default is 5") else {
            panic!("0 accepted in 1..=10")
        };
        assert_eq!(p.to_string(), "limits.n: must be between 1 and 10; got 0");
        assert_eq!(p.hint, Some("the default is 5"));
    }
}
