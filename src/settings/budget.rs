//! `[budget]`: how the model gateway holds a model request past a budget
//! (docs/gateway.md, "Budgets"). Every key is optional; each value is
//! checked as it is read, so a bad one is refused with its key named.

use std::time::Duration;

use serde::Deserialize;

/// How long a request held at a budget waits when the config says nothing:
/// long enough to notice and raise it, short enough that a forgotten
/// session does not hold its cage for a day.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60 * 60);

/// The longest wait taken: past a day a session is not waiting, it is
/// forgotten.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// `[budget]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetTable {
    wait: Option<Wait>,
}

/// The budgets' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSettings {
    /// How long a model request held at a budget waits for it to be
    /// raised before it is refused; zero: refused at once.
    pub wait: Duration,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        BudgetSettings { wait: DEFAULT_WAIT }
    }
}

impl BudgetTable {
    pub fn settings(self) -> BudgetSettings {
        BudgetSettings {
            wait: self.wait.map_or(DEFAULT_WAIT, |Wait(d)| d),
        }
    }
}

/// `wait`: `0`, or a whole number of seconds, minutes or hours (`90s`,
/// `30m`, `2h`), at most a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct Wait(Duration);

impl TryFrom<String> for Wait {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        parse_wait(&text).map(Wait)
    }
}

/// Pure: a wait as written, or why it is not one.
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let scale = match unit {
        "s" => Some(1),
        "m" => Some(60),
        "h" => Some(60 * 60),
        "" if digits == "0" => Some(0),
        _ => None,
    };
    let secs = scale.and_then(|s| {
        (!digits.is_empty())
            .then(|| digits.parse::<u64>().ok())
            .flatten()
            .and_then(|n| n.checked_mul(s))
    });
    match secs.map(Duration::from_secs) {
        Some(d) if d <= MAX_WAIT => Ok(d),
        Some(_) => Err(format!("{t:?} is more than a day (24h), the longest wait")),
        None => Err(format!(
            "{t:?} is not a wait; give 0 (refuse at once) or a whole number of seconds, \
             minutes or hours, like 90s, 30m or 2h"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_as_written() {
        for (text, secs) in [
            ("0", 0),
            ("90s", 90),
            ("30m", 1800),
            ("2h", 7200),
            ("24h", 86400),
        ] {
            assert_eq!(parse_wait(text), Ok(Duration::from_secs(secs)), "{text}");
        }
        for bad in ["", "5", "1.5h", "-1m", "m", "25h", "1d", "10 m", "0x10s"] {
            assert!(parse_wait(bad).is_err(), "{bad}");
        }
    }
}
