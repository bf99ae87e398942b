//! Times for people and for programs: text output gives a local date and
//! time or an age ("3 min ago"), never Unix seconds; JSON gives RFC 3339
//! with the offset. The records keep Unix seconds.

use chrono::{DateTime, Local, TimeZone, Utc};

/// Now, in Unix seconds.
pub fn now() -> u64 {
    Utc::now().timestamp().max(0) as u64
}

/// Now, from the same clock, as RFC 3339 in UTC to the millisecond
/// (`2026-11-30T18:05:09.123Z`): a log line's time, where seconds are too
/// coarse to order lines by.
pub fn now_rfc3339_millis() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A moment as this machine's local date and time: `2026-11-30 19:05:09`.
pub fn local(secs: u64) -> String {
    local_in(&Local, secs)
}

pub fn local_in<Tz: TimeZone>(tz: &Tz, secs: u64) -> String
where
    Tz::Offset: std::fmt::Display,
{
    at(tz, secs).format("%Y-%m-%d %H:%M:%S").to_string()
}

/// A moment as RFC 3339 with the local offset: `2026-11-30T19:05:09+01:00`.
pub fn rfc3339(secs: u64) -> String {
    rfc3339_in(&Local, secs)
}

pub fn rfc3339_in<Tz: TimeZone>(tz: &Tz, secs: u64) -> String
where
    Tz::Offset: std::fmt::Display,
{
    at(tz, secs).to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

fn at<Tz: TimeZone>(tz: &Tz, secs: u64) -> DateTime<Tz> {
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    DateTime::<Utc>::from_timestamp(secs, 0)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
        .with_timezone(tz)
}

/// A moment in Unix seconds that JSON output gives as RFC 3339 with the
/// local offset ([`rfc3339`]): kept as seconds for the text's ages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time(pub u64);

impl serde::Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rfc3339(self.0))
    }
}

/// For `#[serde(serialize_with)]` on a field kept in Unix seconds that
/// may be unknown (null): RFC 3339 with the local offset, or null.
pub fn ser_rfc3339_opt<S: serde::Serializer>(secs: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match secs {
        Some(t) => s.serialize_str(&rfc3339(*t)),
        None => s.serialize_none(),
    }
}

/// How long ago `then` was, seen at `now`: `just now`, `3 min ago`,
/// `1 hour ago`, `5 days ago`. A moment after `now` (a clock set back) is
/// `just now`.
pub fn age(then: u64, now: u64) -> String {
    let d = now.saturating_sub(then);
    let (n, one, many) = match d {
        0..60 => return "just now".to_string(),
        60..3600 => (d / 60, "min", "min"),
        3600..86_400 => (d / 3600, "hour", "hours"),
        _ => (d / 86_400, "day", "days"),
    };
    format!("{} ago", count(n, one, many))
}

/// How long something has taken, for a line that is rewritten as it goes:
/// `0 s`, `12 s`, `1 min 12 s`, `1 h 5 min` (the units of [`age`], short,
/// so that the line does not change its length every second).
pub fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// A number and its noun, agreeing: `1 file`, `2 files`, `0 files`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's form: UTC, milliseconds, `Z`, and the same clock as [`now`].
    #[test]
    fn now_as_a_log_line_time() {
        let before = now();
        let t = now_rfc3339_millis();
        let after = now();
        assert_eq!(t.len(), "2026-11-30T18:05:09.123Z".len(), "{t}");
        assert_eq!((&t[10..11], &t[19..20], &t[23..]), ("T", ".", "Z"), "{t}");
        let secs = DateTime::parse_from_rfc3339(&t).unwrap().timestamp() as u64;
        assert!(before <= secs && secs <= after, "{t}");
    }

    #[test]
    fn times_for_people() {
        // 2026-11-30T18:05:09Z
        let t = 1_796_061_909;
        assert_eq!(local_in(&Utc, t), "2026-11-30 18:05:09");
        let cet = chrono::FixedOffset::east_opt(3600).unwrap();
        assert_eq!(local_in(&cet, t), "2026-11-30 19:05:09");
        assert_eq!(rfc3339_in(&Utc, t), "2026-11-30T18:05:09+00:00");
        assert_eq!(rfc3339_in(&cet, t), "2026-11-30T19:05:09+01:00");
        for (d, s) in [
            (0, "just now"),
            (59, "just now"),
            (60, "1 min ago"),
            (3 * 60 + 59, "3 min ago"),
            (3600, "1 hour ago"),
            (2 * 3600 + 5, "2 hours ago"),
            (86_400, "1 day ago"),
            (5 * 86_400, "5 days ago"),
        ] {
            assert_eq!(age(t - d, t), s, "{d}");
        }
        assert_eq!(age(t + 10, t), "just now");
        for (d, s) in [
            (0, "0 s"),
            (59, "59 s"),
            (60, "1 min 0 s"),
            (72, "1 min 12 s"),
            (3599, "59 min 59 s"),
            (3600, "1 h 0 min"),
            (3 * 3600 + 5 * 60 + 9, "3 h 5 min"),
        ] {
            assert_eq!(span(d), s, "{d}");
        }
        assert_eq!(count(1, "file", "files"), "1 file");
        assert_eq!(count(0, "file", "files"), "0 files");
        assert_eq!(count(2, "file", "files"), "2 files");
    }

    /// Every time the JSON outputs give is RFC 3339 with an offset, never
    /// Unix seconds: history's `when`, `files list`'s `refused[].when`,
    /// `image status`'s `building_since` (the session object's own are in
    /// `ops::show`'s test).
    #[test]
    fn json_times_are_rfc3339() {
        let t = 1_796_061_909u64;
        let is_rfc3339 = |v: &serde_json::Value| {
            let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
            let parsed = DateTime::parse_from_rfc3339(s).unwrap();
            assert_eq!(parsed.timestamp(), t as i64, "{s}");
            assert!(s[19..].starts_with(['+', '-']) || s.ends_with('Z'), "{s}");
        };
        is_rfc3339(&serde_json::to_value(Time(t)).unwrap());
        let entry = crate::ops::history::Entry::from(crate::state::session::HistoryEntry {
            when: t,
            who: "me".into(),
            what: "made".into(),
        });
        let v = serde_json::to_value(&entry).unwrap();
        is_rfc3339(&v["when"]);
        assert_eq!(
            v,
            serde_json::json!({"when": rfc3339(t), "who": "me", "what": "made"})
        );
        let mut policy = crate::state::session::FilesPolicy::default();
        policy.remember_refused(t, "m/s".into());
        let list = crate::ops::files::FilesList {
            session: "web".into(),
            files: (&policy).into(),
        };
        is_rfc3339(&serde_json::to_value(&list).unwrap()["refused"][0]["when"]);
        let mut status = crate::images::workbench::ImageStatus {
            name: "img".into(),
            machine: false,
            stage: None,
            present: false,
            current: false,
            building: true,
            building_since: Some(t),
            error: None,
            label: None,
            wanted: None,
        };
        is_rfc3339(&serde_json::to_value(&status).unwrap()["building_since"]);
        status.building_since = None;
        assert!(serde_json::to_value(&status).unwrap()["building_since"].is_null());
    }
}
