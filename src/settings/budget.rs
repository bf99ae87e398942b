//! `[budget]`: how the model gateway holds a model request past a budget
//! (docs/gateway.md, "Budgets"), and the machine's daily budget
//! (docs/gateway.md, "Daily budget"). Every key is optional; each value is
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
    daily_tokens: Option<DailyTokens>,
    daily_usd: Option<UsdBudget>,
    tokens: Option<TokenBudget>,
    usd: Option<UsdBudget>,
}

/// The budgets' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSettings {
    /// How long a model request held at a budget waits for it to be
    /// raised before it is refused; zero: refused at once.
    pub wait: Duration,
    /// The tokens all sessions of this state folder may spend in a day
    /// (the machine's local day), together; None: no daily budget.
    pub daily_tokens: Option<u64>,
    /// The dollars all sessions of this state folder may spend in a day,
    /// together, at list prices; None: no daily dollar budget.
    pub daily_usd: Option<super::prices::Usd>,
    /// The token budget a new session gets, and `cage limits --reset`
    /// sets back (`tokens`); None: none.
    pub tokens: Option<u64>,
    /// The dollar budget a new session gets, and `cage limits --reset`
    /// sets back (`usd`); None: none.
    pub usd: Option<super::prices::Usd>,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        BudgetSettings {
            wait: DEFAULT_WAIT,
            daily_tokens: None,
            daily_usd: None,
            tokens: None,
            usd: None,
        }
    }
}

impl BudgetTable {
    pub fn settings(self) -> BudgetSettings {
        BudgetSettings {
            wait: self.wait.map_or(DEFAULT_WAIT, |Wait(d)| d),
            daily_tokens: self.daily_tokens.and_then(|DailyTokens(n)| n),
            daily_usd: self.daily_usd.map(|UsdBudget(u)| u),
            tokens: self.tokens.map(|TokenBudget(n)| n),
            usd: self.usd.map(|UsdBudget(u)| u),
        }
    }
}

/// `tokens`: a new session's token budget, a positive whole number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
struct TokenBudget(u64);

impl TryFrom<i64> for TokenBudget {
    type Error = String;
    fn try_from(n: i64) -> Result<Self, String> {
        u64::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .map(TokenBudget)
            .ok_or_else(|| format!("{n} is not a token budget; give a positive whole number"))
    }
}

/// `usd`: a new session's dollar budget, a positive number with at most
/// cents (`5`, `2.50`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "f64")]
struct UsdBudget(super::prices::Usd);

impl TryFrom<f64> for UsdBudget {
    type Error = String;
    fn try_from(v: f64) -> Result<Self, String> {
        let text = if v.is_finite() && v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            v.to_string()
        };
        match super::prices::parse_usd(&text)? {
            Some(u) => Ok(UsdBudget(u)),
            None => Err(format!("{v} is not a dollar budget")),
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

/// `daily_tokens`: a number of tokens as `cage limits --tokens` takes it
/// ([`parse_tokens`]), written as a TOML number (`2000000`) or a string
/// (`"2M"`, `"none"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "NumberOrText")]
struct DailyTokens(Option<u64>);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Int(i64),
    Float(f64),
    Text(String),
}

impl TryFrom<NumberOrText> for DailyTokens {
    type Error = String;
    fn try_from(v: NumberOrText) -> Result<Self, String> {
        let text = match v {
            NumberOrText::Int(n) => n.to_string(),
            // As written: `2.0` is no whole number here.
            NumberOrText::Float(f) => format!("{f:?}"),
            NumberOrText::Text(t) => t,
        };
        parse_tokens(&text).map(DailyTokens)
    }
}

/// Pure: a token budget as written (`cage limits --tokens`, the `tokens`
/// of serve's limits route, `[budget] daily_tokens`): a positive whole
/// number, with `k` (thousands) or `M` (millions) after it if wanted
/// (`5k`, `5M`, `1.5M`), or `none` for no budget; or why it is not one.
pub fn parse_tokens(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match tokens_number(t) {
        Some(0) => Err(
            "0 would refuse every model request; give a positive whole number of \
             tokens, or none for no budget"
                .to_string(),
        ),
        Some(n) => Ok(Some(n)),
        None => Err(format!(
            "{t:?} is not a number of tokens; give a positive whole number (like 2000000, \
             500k or 2M: k for thousands, M for millions), or none for no budget"
        )),
    }
}

/// Pure: `500`, `5k`, `5K`, `5M`, `1.5M` as a whole number of tokens; None
/// for anything else, a fraction of a token, or more than a u64 holds. A
/// lower-case `m` is not taken: in memory sizes it means MiB.
fn tokens_number(t: &str) -> Option<u64> {
    let (digits, scale) = if let Some(d) = t.strip_suffix(['k', 'K']) {
        (d, 1_000u64)
    } else if let Some(d) = t.strip_suffix('M') {
        (d, 1_000_000)
    } else {
        (t, 1)
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || (digits.contains('.') && !all_digits(frac)) {
        return None;
    }
    let mut n = whole.parse::<u64>().ok()?.checked_mul(scale)?;
    // Each digit after the point is worth a tenth of the one before; one
    // worth less than a token is refused.
    let mut worth = scale;
    for d in frac.bytes() {
        if worth % 10 != 0 {
            return None;
        }
        worth /= 10;
        n = n.checked_add(u64::from(d - b'0') * worth)?;
    }
    Some(n)
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

    /// A new session's budgets: tokens a positive whole number, dollars
    /// with at most cents, a whole number of dollars too.
    #[test]
    fn budgets_for_new_sessions() {
        let read = |t: &str| toml::from_str::<BudgetTable>(t).map(BudgetTable::settings);
        let s = read("tokens = 5000\nusd = 2.5").unwrap();
        assert_eq!(s.tokens, Some(5000));
        assert_eq!(s.usd, Some(crate::settings::prices::Usd::cents(250)));
        assert_eq!(read("usd = 5").unwrap().usd.unwrap().plain(), "5.00");
        assert_eq!(read("").unwrap(), BudgetSettings::default());
        for bad in [
            "tokens = 0",
            "tokens = -5",
            "tokens = \"5k\"",
            "usd = 0",
            "usd = 1.234",
            "usd = -1",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }
}
