//! Stop strings in streamed text: text that could still become a stop string is
//! held back until it is clear whether it does, so the user never sees part of a
//! stop string and the output ends exactly before the first one.

/// Scans streamed text for the earliest of several stop strings.
#[derive(Debug, Clone, Default)]
pub struct StopStringMatcher {
    stops: Vec<String>,
    pending: String,
}

/// What to emit after pushing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopScan {
    /// Text that is safe to show now.
    pub emit: String,
    /// Whether a stop string was found (generation should end).
    pub stopped: bool,
}

impl StopStringMatcher {
    /// A matcher for the given stop strings (empty ones are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopStringMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
        }
    }

    /// Adds streamed text; returns what may be shown and whether a stop was hit.
    pub fn push(&mut self, text: &str) -> StopScan {
        self.pending.push_str(text);
        if let Some(at) = self.earliest_stop() {
            let emit = self.pending[..at].to_string();
            self.pending.clear();
            return StopScan {
                emit,
                stopped: true,
            };
        }
        let keep = self.longest_partial_suffix();
        let cut = self.pending.len() - keep;
        let emit = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        StopScan {
            emit,
            stopped: false,
        }
    }

    /// The held-back text, when the stream ends without a stop.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    fn earliest_stop(&self) -> Option<usize> {
        self.stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min()
    }

    /// Length of the longest suffix of the pending text that is a proper prefix of
    /// some stop string, on a character boundary.
    fn longest_partial_suffix(&self) -> usize {
        let mut best = 0;
        for stop in &self.stops {
            for (idx, _) in self.pending.char_indices() {
                let suffix = &self.pending[idx..];
                if suffix.len() < stop.len() && stop.starts_with(suffix) {
                    best = best.max(suffix.len());
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(stops: &[&str]) -> StopStringMatcher {
        StopStringMatcher::new(&stops.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn holds_back_partial_stop_and_cuts_at_stop() {
        let mut m = matcher(&["</end>"]);
        assert_eq!(
            m.push("hello </"),
            StopScan {
                emit: "hello ".into(),
                stopped: false
            }
        );
        assert_eq!(
            m.push("en"),
            StopScan {
                emit: "".into(),
                stopped: false
            }
        );
        assert_eq!(
            m.push("d> more"),
            StopScan {
                emit: "".into(),
                stopped: true
            }
        );
    }

    #[test]
    fn releases_text_that_turns_out_not_to_stop() {
        let mut m = matcher(&["STOP"]);
        assert_eq!(m.push("ST").emit, "");
        assert_eq!(m.push("ay").emit, "STay");
        assert_eq!(m.push("S").emit, "");
        assert_eq!(m.finish(), "S");
    }

    #[test]
    fn earliest_of_several_stops_wins() {
        let mut m = matcher(&["bb", "a"]);
        let scan = m.push("xxbbya");
        assert_eq!(
            scan,
            StopScan {
                emit: "xx".into(),
                stopped: true
            }
        );
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let mut m = matcher(&["é!"]);
        assert_eq!(m.push("café").emit, "caf");
        assert_eq!(m.push("?").emit, "é?");
    }

    #[test]
    fn no_stops_passes_everything() {
        let mut m = matcher(&[]);
        assert_eq!(
            m.push("abc"),
            StopScan {
                emit: "abc".into(),
                stopped: false
            }
        );
    }
}
