//! What every session of this state folder spent today, together: the
//! model gateway's daily budget counts against it (docs/gateway.md, "Daily
//! budget"). One file a day, `spend/YYYY-MM-DD.json` in the state folder,
//! the day this machine's local one; every turn's writer adds each answer's
//! counts to it under the folder's lock (`spend/lock`), so turns at once,
//! in any process, add up. Day files older than [`KEPT_DAYS`] days are
//! removed as a new day's file is made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::error::{Doing, Error, Result};
use crate::state::session::{Usage, make_private_dir, write_atomic};

/// How many days' files are kept: a month of what was spent, to look at.
pub const KEPT_DAYS: u64 = 31;

/// One day's spend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Day {
    /// All of it.
    #[serde(default)]
    pub total: Usage,
    /// By the model the answers named, where it was known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, Usage>,
    /// What the answers cost at list prices, in billionths of a dollar
    /// (`settings::prices::Usd`), as priced when each came (a model without
    /// a price at the table's highest: see `unpriced`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub usd: u64,
    /// The models of answers that had no price (not on a subscription
    /// sign-in): their answers are in `usd` at the price table's highest
    /// prices.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub unpriced: std::collections::BTreeSet<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What an answer cost, as the day keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// At list prices, in billionths of a dollar.
    Usd(u64),
    /// Its model has no price: counted at the price table's highest
    /// prices (in billionths of a dollar), its model named.
    Unpriced(u64),
    /// On a subscription sign-in: no price per token, counted in tokens.
    Subscription,
}

/// The machine's local day now.
pub fn today() -> NaiveDate {
    chrono::Local::now().date_naive()
}

/// The file of `day` in `dir` (the state folder's `spend`).
pub fn day_path(dir: &Path, day: NaiveDate) -> PathBuf {
    dir.join(format!("{}.json", day.format("%Y-%m-%d")))
}

/// The day a file of `dir` is of, if it is a day's file.
fn day_of(name: &str) -> Option<NaiveDate> {
    let stem = name.strip_suffix(".json")?;
    NaiveDate::parse_from_str(stem, "%Y-%m-%d").ok()
}

/// `day`'s spend as its file says; a day without a file spent nothing.
/// Read without the lock: the file is replaced whole (`write_atomic`), so
/// it is always one writer's whole file.
pub fn read(dir: &Path, day: NaiveDate) -> Result<Day> {
    let path = day_path(dir, day);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Day::default()),
        Err(e) => return Err(Error::act(Doing::Read(path), &e)),
    };
    serde_json::from_slice(&text).map_err(|e| {
        Error::act(
            Doing::Read(path),
            &std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })
}

/// Hold `dir`'s lock while `then` runs: what it reads and writes of the day
/// files is no other writer's half.
pub fn locked<T>(dir: &Path, then: impl FnOnce() -> Result<T>) -> Result<T> {
    make_private_dir(dir)?;
    let _held = crate::state::lock::take(&dir.join("lock"))?;
    then()
}

/// Add `usage` (of `model`, where known) to `day`'s file, under `dir`'s
/// lock; `also` runs under it too, once the file is written (the ledger
/// takes what it wrote off what it has yet to write). The first write of
/// a day removes the files older than [`KEPT_DAYS`].
pub fn add(
    dir: &Path,
    day: NaiveDate,
    usage: &Usage,
    model: Option<&str>,
    cost: Cost,
    also: impl FnOnce(),
) -> Result<()> {
    locked(dir, || {
        let path = day_path(dir, day);
        let new_day = !path.exists();
        let mut d = read(dir, day)?;
        d.total.add(usage);
        if let Some(m) = model {
            d.models.entry(m.to_string()).or_default().add(usage);
        }
        match cost {
            Cost::Usd(n) => d.usd = d.usd.saturating_add(n),
            Cost::Unpriced(n) => {
                d.usd = d.usd.saturating_add(n);
                d.unpriced
                    .insert(model.unwrap_or("(model not reported)").to_string());
            }
            Cost::Subscription => {}
        }
        let mut text =
            serde_json::to_vec(&d).map_err(|e| Error::act(Doing::Write(path.clone()), &e))?;
        text.push(b'\n');
        write_atomic(&path, &text, 0o600)?;
        also();
        if new_day {
            prune(dir, day);
        }
        Ok(())
    })
}

/// Remove the day files older than [`KEPT_DAYS`] before `day`. What does
/// not go is left for the next new day: nothing depends on it.
fn prune(dir: &Path, day: NaiveDate) {
    let Some(oldest) = day.checked_sub_days(chrono::Days::new(KEPT_DAYS - 1)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if day_of(&name.to_string_lossy()).is_some_and(|d| d < oldest) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            responses: 1,
            ..Usage::default()
        }
    }

    /// Dollars add up; an unpriced model is named, and its answer counted
    /// at the price it was given; a subscription's answers are tokens alone.
    #[test]
    fn a_days_dollars() {
        let scratch = tempfile::tempdir().unwrap();
        let (dir, d) = (scratch.path().join("spend"), day("2026-12-06"));
        add(&dir, d, &usage(1, 1), Some("a"), Cost::Usd(7), || {}).unwrap();
        add(&dir, d, &usage(1, 1), Some("a"), Cost::Usd(5), || {}).unwrap();
        add(&dir, d, &usage(2, 0), Some("s"), Cost::Subscription, || {}).unwrap();
        let read_back = read(&dir, d).unwrap();
        assert_eq!((read_back.usd, read_back.unpriced.len()), (12, 0));
        assert_eq!(read_back.total.total(), 6);
        add(
            &dir,
            d,
            &usage(1, 0),
            Some("new"),
            Cost::Unpriced(30),
            || {},
        )
        .unwrap();
        let read_back = read(&dir, d).unwrap();
        assert_eq!(read_back.usd, 42);
        assert_eq!(read_back.unpriced.into_iter().collect::<Vec<_>>(), ["new"]);
    }

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    /// Writers at once, each with a lock file of its own open (as two
    /// processes would have: flock(2) locks an open file description), add
    /// up exactly; by model too.
    #[test]
    fn writers_at_once_add_up() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("spend");
        let d = day("2026-12-06");
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        let model = (i % 2 == 0).then_some("m-even");
                        add(&dir, d, &usage(w + 1, i), model, Cost::Subscription, || {}).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let got = read(&dir, d).unwrap();
        assert_eq!(got.total.input_tokens, 50 * (1 + 2 + 3 + 4));
        assert_eq!(got.total.output_tokens, 4 * (0..50).sum::<u64>());
        assert_eq!(got.total.responses, 200);
        assert_eq!(got.models.len(), 1);
        assert_eq!(got.models["m-even"].responses, 100);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(day_path(&dir, d))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// Where [`a_writer_in_a_process_of_its_own`] adds, when it is run as
    /// a process of its own.
    const CHILD_DIR: &str = "SHROOMS_TEST_SPEND_DIR";

    /// Not a test of its own: what [`writers_in_two_processes_add_up`]
    /// runs in each of its processes.
    #[test]
    #[ignore]
    fn a_writer_in_a_process_of_its_own() {
        let Some(dir) = std::env::var_os(CHILD_DIR) else {
            return;
        };
        for i in 0..100u64 {
            add(
                Path::new(&dir),
                day("2026-12-06"),
                &usage(1, i),
                None,
                Cost::Subscription,
                || {},
            )
            .unwrap();
        }
    }

    /// Two processes adding at once add up exactly.
    #[test]
    fn writers_in_two_processes_add_up() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("spend");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "state::spend::tests::a_writer_in_a_process_of_its_own",
                        "--ignored",
                        "--test-threads=1",
                    ])
                    .env(CHILD_DIR, &dir)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let got = read(&dir, day("2026-12-06")).unwrap();
        assert_eq!(got.total.responses, 200);
        assert_eq!(got.total.input_tokens, 200);
        assert_eq!(got.total.output_tokens, 2 * (0..100).sum::<u64>());
    }

    /// A new day starts at zero, the day before kept as it was.
    #[test]
    fn a_new_day_starts_at_zero() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let (d1, d2) = (day("2026-12-06"), day("2026-12-07"));
        assert_eq!(read(&dir, d1).unwrap(), Day::default());
        add(&dir, d1, &usage(10, 5), None, Cost::Subscription, || {}).unwrap();
        assert_eq!(read(&dir, d2).unwrap().total, Usage::default());
        let mut ran = false;
        add(
            &dir,
            d2,
            &usage(1, 1),
            Some("m"),
            Cost::Subscription,
            || ran = true,
        )
        .unwrap();
        assert!(ran);
        assert_eq!(read(&dir, d1).unwrap().total.total(), 15);
        assert_eq!(read(&dir, d2).unwrap().total.total(), 2);
        assert_eq!(
            std::fs::read_to_string(day_path(&dir, d2)).unwrap(),
            "{\"total\":{\"input_tokens\":1,\"output_tokens\":1,\"cache_creation_input_tokens\":0,\
             \"cache_read_input_tokens\":0,\"responses\":1},\"models\":{\"m\":{\"input_tokens\":1,\
             \"output_tokens\":1,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\
             \"responses\":1}}}\n"
        );
        // A file that does not read is an error, not a day that spent nothing.
        std::fs::write(day_path(&dir, d1), "{").unwrap();
        assert!(read(&dir, d1).is_err());
        assert!(add(&dir, d1, &usage(1, 1), None, Cost::Subscription, || {}).is_err());
    }

    /// A new day's first write removes the files of more than
    /// [`KEPT_DAYS`] days before it, and nothing else.
    #[test]
    fn old_days_are_pruned() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        for d in ["2026-10-01", "2026-11-05", "2026-11-06", "2026-12-05"] {
            add(&dir, day(d), &usage(1, 0), None, Cost::Subscription, || {}).unwrap();
        }
        std::fs::write(dir.join("notes.json"), "x").unwrap();
        add(
            &dir,
            day("2026-12-06"),
            &usage(1, 0),
            None,
            Cost::Subscription,
            || {},
        )
        .unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "2026-11-06.json",
                "2026-12-05.json",
                "2026-12-06.json",
                "lock",
                "notes.json"
            ]
        );
    }
}
