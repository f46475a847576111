//! Ollama's `keep_alive`: how long a model stays loaded after a request.
//! A number is seconds, a string a Go duration (`"5m"`, `"1h30m"`, `"0"`);
//! a negative value keeps the model loaded until evicted.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Longest keep-alive taken as a time; longer ones mean "until evicted"
/// (and never overflow an `Instant`).
const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A request's `keep_alive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Until evicted for room (negative values; the server's default).
    Forever,
    /// Unloaded once idle for this long (zero: as soon as the request ends).
    For(Duration),
}

impl KeepAlive {
    /// As the engine takes it: `None` for no timer.
    pub fn duration(self) -> Option<Duration> {
        match self {
            KeepAlive::Forever => None,
            KeepAlive::For(d) => Some(d),
        }
    }

    fn from_seconds(seconds: f64) -> Result<KeepAlive, String> {
        if seconds.is_nan() {
            return Err("keep_alive is not a number".into());
        }
        if seconds < 0.0 {
            return Ok(KeepAlive::Forever);
        }
        match Duration::try_from_secs_f64(seconds) {
            Ok(d) if d <= LONGEST => Ok(KeepAlive::For(d)),
            _ => Ok(KeepAlive::Forever),
        }
    }

    /// A Go duration (`"5m"`, `"1.5h"`, `"2h45m10s"`, `"-1"`, `"0"`), or a
    /// number of seconds written as text.
    fn parse(text: &str) -> Result<KeepAlive, String> {
        let text = text.trim();
        if let Ok(seconds) = text.parse::<f64>() {
            return KeepAlive::from_seconds(seconds);
        }
        let invalid = || {
            format!("invalid keep_alive '{text}': use seconds or a duration such as \"5m\" or \"1h30m\"")
        };
        let (negative, mut rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if rest.is_empty() || rest.len() > 64 {
            return Err(invalid());
        }
        let mut seconds = 0.0;
        while !rest.is_empty() {
            let number_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(invalid)?;
            let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
            rest = &rest[number_end..];
            let unit_end = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_end] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(invalid()),
            };
            seconds += number * scale;
            rest = &rest[unit_end..];
        }
        KeepAlive::from_seconds(if negative { -seconds } else { seconds })
    }
}

/// For `#[serde(default, deserialize_with = "keep_alive")]`: absent and
/// `null` are `None`.
pub fn keep_alive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<KeepAlive>, D::Error> {
    #[derive(Deserialize)]
    #[serde(
        untagged,
        expecting = "keep_alive takes seconds or a duration such as \"5m\""
    )]
    enum Given {
        Seconds(f64),
        Text(String),
    }
    let parsed = match Option::<Given>::deserialize(d)? {
        None => return Ok(None),
        Some(Given::Seconds(seconds)) => KeepAlive::from_seconds(seconds),
        Some(Given::Text(text)) => KeepAlive::parse(&text),
    };
    parsed.map(Some).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_ollama_reads_them() {
        let secs = |s: u64| KeepAlive::For(Duration::from_secs(s));
        assert_eq!(KeepAlive::parse("5m"), Ok(secs(300)));
        assert_eq!(KeepAlive::parse("1h30m"), Ok(secs(5400)));
        assert_eq!(KeepAlive::parse("0"), Ok(secs(0)));
        assert_eq!(KeepAlive::parse("90"), Ok(secs(90)));
        assert_eq!(
            KeepAlive::parse("1.5s"),
            Ok(KeepAlive::For(Duration::from_millis(1500)))
        );
        assert_eq!(KeepAlive::parse("-1"), Ok(KeepAlive::Forever));
        assert_eq!(KeepAlive::parse("-5m"), Ok(KeepAlive::Forever));
        assert_eq!(KeepAlive::parse("1e300"), Ok(KeepAlive::Forever));
        assert_eq!(KeepAlive::from_seconds(0.0), Ok(secs(0)));
        for bad in ["", "5x", "m", "5m3", "1..2s", "NaN"] {
            assert!(KeepAlive::parse(bad).is_err(), "{bad:?}");
        }
    }
}
