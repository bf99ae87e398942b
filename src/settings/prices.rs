//! What model tokens cost (docs/gateway.md, "Budgets"): the list prices of
//! the models the harnesses use, taken on [`TAKEN`] from Anthropic's and
//! OpenAI's pricing pages, in dollars per million tokens; `[prices]` in
//! the config changes them or adds others. A model is priced by its entry
//! in the table, its id or its id without a snapshot's date or `-latest`
//! (`claude-sonnet-4-5-20250929` is priced as `claude-sonnet-4-5`), or by
//! an entry ending in a sign (`corp/`) its id starts with
//! ([`Prices::of`]). A model the table does not know has no price: its
//! spend is unknown, never guessed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// When the built-in prices were taken.
pub const TAKEN: &str = "2025-11-24";

/// An amount of dollars, kept in billionths of a dollar (a price of a
/// thousandth of a dollar per million tokens is one per token), so sums
/// are exact; given in JSON as a number of dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, utoipa::ToSchema)]
#[schema(value_type = f64)]
pub struct Usd(pub u64);

/// Billionths of a dollar in a dollar.
const NANOS: u64 = 1_000_000_000;

impl Usd {
    pub fn cents(c: u64) -> Usd {
        Usd(c.saturating_mul(NANOS / 100))
    }

    pub fn add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / NANOS as f64
    }

    /// A spend as people read it: `$0.0123`, to the hundredth of a cent.
    pub fn spend(self) -> String {
        let tenths_of_cents = (self.0 + 50_000) / 100_000;
        format!(
            "${}.{:04}",
            tenths_of_cents / 10_000,
            tenths_of_cents % 10_000
        )
    }

    /// A budget as given: `$5.00`, to the cent.
    pub fn budget(self) -> String {
        let cents = (self.0 + 5_000_000) / 10_000_000;
        format!("${}.{:02}", cents / 100, cents % 100)
    }

    /// A budget as `cage limits --usd` takes it: `5.00`.
    pub fn plain(self) -> String {
        self.budget().trim_start_matches('$').to_string()
    }
}

impl Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        let dollars = f64::deserialize(d)?;
        if !dollars.is_finite() || dollars < 0.0 || dollars > (u64::MAX / NANOS) as f64 {
            return Err(serde::de::Error::custom(format!(
                "{dollars} is not an amount of dollars"
            )));
        }
        Ok(Usd((dollars * NANOS as f64).round() as u64))
    }
}

/// A model's list prices, in billionths of a dollar per token (a dollar
/// per million tokens is 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

/// Token counts to price: the input that was neither written to nor read
/// from the cache, the output, the cache writes and the cache reads
/// (OpenAI's cached input is its cache read, apart from its input).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

impl Price {
    /// In dollars per million tokens, as the pricing pages give them.
    const fn per_million(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
        Price {
            input: (input * 1000.0 + 0.5) as u64,
            output: (output * 1000.0 + 0.5) as u64,
            cache_write: (cache_write * 1000.0 + 0.5) as u64,
            cache_read: (cache_read * 1000.0 + 0.5) as u64,
        }
    }

    /// What `n` cache writes kept an hour cost beyond their count among
    /// the cache writes ([`Price::cost`] prices every write as a
    /// five-minute one): Anthropic charges an hour's write twice the input
    /// price (its prompt caching page), not the five-minute 1.25.
    pub fn cost_of_hour_writes(&self, n: u64) -> Usd {
        let more = self
            .input
            .saturating_mul(2)
            .saturating_sub(self.cache_write);
        Usd(n.saturating_mul(more))
    }

    pub fn cost(&self, c: &Counts) -> Usd {
        let part = |n: u64, p: u64| n.saturating_mul(p);
        Usd(part(c.input, self.input)
            .saturating_add(part(c.output, self.output))
            .saturating_add(part(c.cache_write, self.cache_write))
            .saturating_add(part(c.cache_read, self.cache_read)))
    }
}

/// Anthropic's (Claude's pricing page: base input, output, 5-minute cache
/// writes, cache hits) and OpenAI's (its API pricing page, standard tier:
/// input, output, cached input; it charges nothing apart for writing the
/// cache, which its answers never report, so a write is priced as input).
const BUILT_IN: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::per_million(5.0, 25.0, 6.25, 0.50)),
    (
        "claude-opus-4-1",
        Price::per_million(15.0, 75.0, 18.75, 1.50),
    ),
    ("claude-opus-4", Price::per_million(15.0, 75.0, 18.75, 1.50)),
    (
        "claude-sonnet-4-5",
        Price::per_million(3.0, 15.0, 3.75, 0.30),
    ),
    ("claude-sonnet-4", Price::per_million(3.0, 15.0, 3.75, 0.30)),
    (
        "claude-3-7-sonnet",
        Price::per_million(3.0, 15.0, 3.75, 0.30),
    ),
    ("claude-haiku-4-5", Price::per_million(1.0, 5.0, 1.25, 0.10)),
    ("claude-3-5-haiku", Price::per_million(0.80, 4.0, 1.0, 0.08)),
    ("claude-3-haiku", Price::per_million(0.25, 1.25, 0.30, 0.03)),
    ("gpt-5.1", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    (
        "gpt-5.1-codex-mini",
        Price::per_million(0.25, 2.0, 0.25, 0.025),
    ),
    ("gpt-5.1-codex", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    (
        "gpt-5.1-codex-max",
        Price::per_million(1.25, 10.0, 1.25, 0.125),
    ),
    ("gpt-5.1-chat", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    ("gpt-5", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    ("gpt-5-chat", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    ("gpt-5-codex", Price::per_million(1.25, 10.0, 1.25, 0.125)),
    ("gpt-5-mini", Price::per_million(0.25, 2.0, 0.25, 0.025)),
    ("gpt-5-nano", Price::per_million(0.05, 0.40, 0.05, 0.005)),
    ("gpt-5-pro", Price::per_million(15.0, 120.0, 15.0, 15.0)),
    ("gpt-4.1", Price::per_million(2.0, 8.0, 2.0, 0.50)),
    ("gpt-4.1-mini", Price::per_million(0.40, 1.60, 0.40, 0.10)),
    ("gpt-4.1-nano", Price::per_million(0.10, 0.40, 0.10, 0.025)),
    ("gpt-4o", Price::per_million(2.50, 10.0, 2.50, 1.25)),
    // The first snapshot, at its own price, with no cached price.
    ("gpt-4o-2024-05-13", Price::per_million(5.0, 15.0, 5.0, 5.0)),
    ("gpt-4o-mini", Price::per_million(0.15, 0.60, 0.15, 0.075)),
    ("o3", Price::per_million(2.0, 8.0, 2.0, 0.50)),
    ("o3-mini", Price::per_million(1.10, 4.40, 1.10, 0.55)),
    ("o3-pro", Price::per_million(20.0, 80.0, 20.0, 20.0)),
    ("o4-mini", Price::per_million(1.10, 4.40, 1.10, 0.275)),
];

/// The price table in force: the built-in one with the config's
/// `[prices]` over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    by_prefix: BTreeMap<String, Price>,
}

impl Default for Prices {
    fn default() -> Self {
        Prices::with(BTreeMap::new())
    }
}

impl Prices {
    /// The built-in table, with `overrides` (the config's) over it.
    pub fn with(overrides: BTreeMap<String, Price>) -> Prices {
        let mut by_prefix: BTreeMap<String, Price> = BUILT_IN
            .iter()
            .map(|(p, price)| (p.to_string(), *price))
            .collect();
        by_prefix.extend(overrides);
        Prices { by_prefix }
    }

    /// The price of a model: the table's entry for its id, or for its id
    /// without a date or `-latest` after it (`claude-sonnet-4-5-20250929`,
    /// `gpt-5-2025-08-07`, `claude-3-5-haiku-latest`), or the longest entry
    /// that ends with a sign (`corp/`) its id starts with; None: no price.
    /// Nothing else after a name is taken as the same model: a variant
    /// (`o3-deep-research`, `gpt-4o-mini-audio-preview`) may cost many times
    /// its base model, and a model not priced is not guessed.
    pub fn of(&self, model: &str) -> Option<Price> {
        // No model id has a space: an answer kept as "MODEL with CHARGE"
        // has a charge no price here counts.
        if model.contains(' ') {
            return None;
        }
        self.by_prefix
            .iter()
            .filter(|(name, _)| {
                model.strip_prefix(name.as_str()).is_some_and(|rest| {
                    rest.is_empty()
                        || same_model(rest)
                        || !name.ends_with(|c: char| c.is_ascii_alphanumeric())
                })
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }

    /// The table's highest price of each kind: what an answer of a model
    /// without a price is counted at in the day's spend, so that the
    /// machine's daily dollar budget counts it, and more, not less.
    pub fn ceiling(&self) -> Price {
        let most = |f: fn(&Price) -> u64| self.by_prefix.values().map(f).max().unwrap_or(0);
        Price {
            input: most(|p| p.input),
            output: most(|p| p.output),
            cache_write: most(|p| p.cache_write),
            cache_read: most(|p| p.cache_read),
        }
    }
}

/// Does what follows a model's name in an id still name that model: a
/// snapshot's date (`-20250929`, `-2025-08-07`) or `-latest`?
fn same_model(rest: &str) -> bool {
    let digits = |t: &str, n: usize| t.len() == n && t.bytes().all(|b| b.is_ascii_digit());
    match rest.strip_prefix('-') {
        Some("latest") => true,
        Some(date) => {
            digits(date, 8)
                || matches!(date.split('-').collect::<Vec<_>>()[..],
                    [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
        }
        None => false,
    }
}

/// `[prices."MODEL"]` as written: dollars per million tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    input: PerMillion,
    output: PerMillion,
    cache_write: PerMillion,
    cache_read: PerMillion,
}

impl PriceEntry {
    pub fn price(&self) -> Price {
        Price {
            input: self.input.0,
            output: self.output.0,
            cache_write: self.cache_write.0,
            cache_read: self.cache_read.0,
        }
    }
}

/// `[prices]` read: the model prefixes and their prices; an empty prefix,
/// which would price every model, is refused.
pub fn overrides(table: BTreeMap<ModelPrefix, PriceEntry>) -> BTreeMap<String, Price> {
    table
        .into_iter()
        .map(|(ModelPrefix(p), e)| (p, e.price()))
        .collect()
}

/// A model id's prefix, as `[prices]` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct ModelPrefix(String);

impl TryFrom<String> for ModelPrefix {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let ok = !text.is_empty()
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:/@".contains(&b));
        if ok {
            Ok(ModelPrefix(text))
        } else {
            Err(format!(
                "{text:?} is not a model id or the start of one (letters, digits and - . _ : / @)"
            ))
        }
    }
}

/// A price in dollars per million tokens: a number from 0, to the
/// thousandth of a dollar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PerMillion(u64);

impl<'de> Deserialize<'de> for PerMillion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PerMillion, D::Error> {
        let v = f64::deserialize(d)?;
        parse_per_million(v)
            .map(PerMillion)
            .map_err(serde::de::Error::custom)
    }
}

/// Pure: dollars per million tokens as billionths of a dollar per token,
/// or why it is not a price.
pub fn parse_per_million(v: f64) -> Result<u64, String> {
    let thousandths = v * 1000.0;
    if !v.is_finite() || !(0.0..=1_000_000.0).contains(&v) {
        return Err(format!(
            "{v} is not a price; give dollars per million tokens, from 0 up to 1000000"
        ));
    }
    if (thousandths - thousandths.round()).abs() > 1e-6 {
        return Err(format!(
            "{v}: give dollars per million tokens to the thousandth of a dollar at most"
        ));
    }
    Ok(thousandths.round() as u64)
}

/// Pure: a dollar budget as given (`5`, `2.50`, `0.3`): a positive amount
/// of dollars with at most cents; `None` for `none`. The error says why.
pub fn parse_usd(text: &str) -> Result<Option<Usd>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let t2 = t.strip_prefix('$').unwrap_or(t);
    let (whole, cents) = t2.split_once('.').unwrap_or((t2, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let read = (!whole.is_empty() && digits(whole) && digits(cents) && cents.len() <= 2)
        .then(|| whole.parse::<u64>().ok())
        .flatten()
        .filter(|_| !t2.ends_with('.'))
        .and_then(|w| {
            let c: u64 = format!("{cents:0<2}").parse().ok()?;
            w.checked_mul(100)?.checked_add(c)
        })
        .filter(|c| *c <= u64::MAX / NANOS);
    match read {
        Some(0) => Err(
            "0 would refuse every model request; give a positive amount of dollars, \
                        or none for no budget"
                .to_string(),
        ),
        Some(c) => Ok(Some(Usd::cents(c))),
        None => Err(format!(
            "{t:?} is not an amount of dollars; give one with at most cents (like 5, 2.50 or \
             0.30), or none for no budget"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Counts {
        Counts {
            input,
            output,
            cache_write,
            cache_read,
        }
    }

    /// The table as the pricing pages give it, in billionths of a dollar
    /// per token.
    #[test]
    fn the_built_in_prices() {
        let p = Prices::default();
        let of = |m: &str| {
            p.of(m)
                .map(|p| (p.input, p.output, p.cache_write, p.cache_read))
        };
        assert_eq!(
            of("claude-opus-4-5-20251101"),
            Some((5000, 25000, 6250, 500))
        );
        assert_eq!(
            of("claude-opus-4-1-20250805"),
            Some((15000, 75000, 18750, 1500))
        );
        assert_eq!(
            of("claude-opus-4-20250514"),
            Some((15000, 75000, 18750, 1500))
        );
        assert_eq!(
            of("claude-sonnet-4-5-20250929"),
            Some((3000, 15000, 3750, 300))
        );
        assert_eq!(of("claude-sonnet-4-5"), Some((3000, 15000, 3750, 300)));
        assert_eq!(
            of("claude-sonnet-4-20250514"),
            Some((3000, 15000, 3750, 300))
        );
        assert_eq!(
            of("claude-3-7-sonnet-20250219"),
            Some((3000, 15000, 3750, 300))
        );
        assert_eq!(
            of("claude-haiku-4-5-20251001"),
            Some((1000, 5000, 1250, 100))
        );
        assert_eq!(of("claude-3-5-haiku-20241022"), Some((800, 4000, 1000, 80)));
        assert_eq!(of("claude-3-haiku-20240307"), Some((250, 1250, 300, 30)));
        assert_eq!(of("gpt-5"), Some((1250, 10000, 1250, 125)));
        assert_eq!(of("gpt-5-2025-08-07"), Some((1250, 10000, 1250, 125)));
        assert_eq!(of("gpt-5-mini-2025-08-07"), Some((250, 2000, 250, 25)));
        assert_eq!(of("gpt-5-nano"), Some((50, 400, 50, 5)));
        assert_eq!(of("gpt-5-codex"), Some((1250, 10000, 1250, 125)));
        assert_eq!(of("gpt-5.1-codex"), Some((1250, 10000, 1250, 125)));
        assert_eq!(of("gpt-5.1-codex-mini"), Some((250, 2000, 250, 25)));
        assert_eq!(of("gpt-5.1-2025-11-13"), Some((1250, 10000, 1250, 125)));
        assert_eq!(of("gpt-4.1-2025-04-14"), Some((2000, 8000, 2000, 500)));
        assert_eq!(of("gpt-4o-2024-08-06"), Some((2500, 10000, 2500, 1250)));
        assert_eq!(of("o3-2025-04-16"), Some((2000, 8000, 2000, 500)));
        assert_eq!(of("o4-mini-2025-04-16"), Some((1100, 4400, 1100, 275)));
        assert_eq!(TAKEN, "2025-11-24");
    }

    /// A model is its name, or its name and a date or `-latest`; a name
    /// ending in a sign is a prefix; an unknown model, or a variant of a
    /// known one, has no price.
    #[test]
    fn models_are_matched_by_their_name() {
        let p = Prices::default();
        assert_eq!(p.of("claude-opus-4-5-20251101"), p.of("claude-opus-4-5"));
        assert_eq!(p.of("claude-3-5-haiku-latest"), p.of("claude-3-5-haiku"));
        assert_ne!(p.of("claude-opus-4-5"), p.of("claude-opus-4"));
        assert_eq!(p.of("gpt-5-mini"), p.of("gpt-5-mini-2025-08-07"));
        assert_ne!(p.of("gpt-5-mini"), p.of("gpt-5"));
        assert_eq!(p.of("gpt-5-chat-latest"), p.of("gpt-5"));
        // A snapshot priced apart from its family.
        assert_eq!(p.of("gpt-4o-2024-05-13").unwrap().input, 5000);
        assert_eq!(p.of("gpt-4o-2024-11-20").unwrap().input, 2500);
        for unknown in [
            // Variants that cost more than the model they start with.
            "o3-deep-research-2025-06-26",
            "o4-mini-deep-research",
            "gpt-4o-mini-audio-preview",
            "gpt-4o-audio-preview-2024-12-17",
            "claude-opus-4-5-x",
            "claude-sonnet-4-5-2025",
            "gpt-5-2025-08-7",
            "claude-mock",
            "claude-opus-45",
            "gpt-50",
            "o3x",
            "o1",
            "",
            "claude",
            "gpt-5x",
            "sonnet",
        ] {
            assert_eq!(p.of(unknown), None, "{unknown}");
        }
        // The config's over the built-in ones, and new ones beside them.
        let mine = Prices::with(BTreeMap::from([
            (
                "claude-sonnet-4-5".to_string(),
                Price::per_million(1.0, 2.0, 3.0, 4.0),
            ),
            (
                "claude-mock".to_string(),
                Price::per_million(3.0, 15.0, 3.75, 0.3),
            ),
            ("corp/".to_string(), Price::per_million(1.0, 1.0, 1.0, 1.0)),
        ]));
        assert_eq!(mine.of("claude-sonnet-4-5-20250929").unwrap().input, 1000);
        assert_eq!(mine.of("claude-sonnet-4-20250514").unwrap().input, 3000);
        assert_eq!(mine.of("claude-mock").unwrap().cache_read, 300);
        assert_eq!(mine.of("corp/big").unwrap().output, 1000);
    }

    /// The ceiling is each kind's highest price in the table in force,
    /// the config's too.
    #[test]
    fn the_ceiling_is_the_highest_of_each() {
        let c = Prices::default().ceiling();
        assert_eq!(
            (c.input, c.output, c.cache_write, c.cache_read),
            (20000, 120000, 20000, 20000)
        );
        let mine = Prices::with(BTreeMap::from([(
            "dear".to_string(),
            Price::per_million(1.0, 200.0, 1.0, 1.0),
        )]));
        assert_eq!(mine.ceiling().output, 200000);
        assert_eq!(mine.ceiling().input, 20000);
    }

    /// Each count at its own price; OpenAI's cached input once, at the
    /// cached price (the meter keeps it as the cache read, apart from the
    /// input).
    #[test]
    fn costs_are_exact() {
        let sonnet = Prices::default().of("claude-sonnet-4-5").unwrap();
        // 101 in, 11 out, 203 written, 307 read: 303000 + 165000 + 761250
        // + 92100 billionths.
        let c = sonnet.cost(&counts(101, 11, 203, 307));
        assert_eq!(c, Usd(1_321_350));
        assert_eq!(c.spend(), "$0.0013");
        assert_eq!(c.dollars(), 0.00132135);
        // gpt-5: 28 uncached, 300 cached, 52 out.
        let gpt = Prices::default().of("gpt-5").unwrap();
        assert_eq!(
            gpt.cost(&counts(28, 52, 0, 300)),
            Usd(28 * 1250 + 52 * 10000 + 300 * 125)
        );
        // A million tokens of output of Opus 4.5: 25 dollars.
        let opus = Prices::default().of("claude-opus-4-5").unwrap();
        assert_eq!(opus.cost(&counts(0, 1_000_000, 0, 0)).spend(), "$25.0000");
        assert_eq!(opus.cost(&counts(0, u64::MAX, 0, 0)), Usd(u64::MAX));
    }

    #[test]
    fn dollars_as_people_read_them() {
        assert_eq!(Usd(0).spend(), "$0.0000");
        assert_eq!(Usd(49_999).spend(), "$0.0000");
        assert_eq!(Usd(50_000).spend(), "$0.0001");
        assert_eq!(Usd(12_345_678_900).spend(), "$12.3457");
        assert_eq!(Usd::cents(250).budget(), "$2.50");
        assert_eq!(Usd::cents(250).plain(), "2.50");
        assert_eq!(Usd::cents(5).budget(), "$0.05");
        assert_eq!(serde_json::to_string(&Usd::cents(250)).unwrap(), "2.5");
        let back: Usd = serde_json::from_str("0.00132135").unwrap();
        assert_eq!(back, Usd(1_321_350));
        assert!(serde_json::from_str::<Usd>("-1").is_err());
    }

    #[test]
    fn dollar_budgets_read() {
        for (text, cents) in [
            ("5", 500),
            ("2.50", 250),
            ("2.5", 250),
            ("0.30", 30),
            ("0.01", 1),
            (" 10 ", 1000),
            ("$3", 300),
            ("1000000", 100_000_000),
        ] {
            assert_eq!(parse_usd(text), Ok(Some(Usd::cents(cents))), "{text}");
        }
        assert_eq!(parse_usd("none"), Ok(None));
        assert_eq!(parse_usd("None"), Ok(None));
        for bad in [
            "0",
            "0.00",
            "-1",
            "1.234",
            "",
            ".5",
            "5.",
            "lots",
            "1e3",
            "1,50",
            "5 $",
            "+5",
            "99999999999999999999",
            "20000000000",
        ] {
            let e = parse_usd(bad).unwrap_err();
            assert!(e.contains("none for no budget"), "{bad}: {e}");
        }
    }

    #[test]
    fn prices_as_written() {
        assert_eq!(parse_per_million(3.0), Ok(3000));
        assert_eq!(parse_per_million(0.30), Ok(300));
        assert_eq!(parse_per_million(0.005), Ok(5));
        assert_eq!(parse_per_million(0.0), Ok(0));
        for bad in [-1.0, 0.0001, f64::NAN, f64::INFINITY, 2e6] {
            assert!(parse_per_million(bad).is_err(), "{bad}");
        }
        assert!(ModelPrefix::try_from(String::new()).is_err());
        assert!(ModelPrefix::try_from("a b".to_string()).is_err());
        assert!(ModelPrefix::try_from("claude-mock".to_string()).is_ok());
    }
}
