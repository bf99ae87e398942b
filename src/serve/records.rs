//! The records, held in memory, and `GET /v1/sessions`'s answer built
//! once per change rather than at each request.
//!
//! The sessions folder is watched with inotify(7). The watch is read at
//! each listing, without waiting (the descriptor is non-blocking): the
//! kernel queues an event before the write, rename or removal that caused
//! it returns, so a change made by the CLI behind serve's back is counted
//! by the first listing asked after it, with no thread in between. A
//! change read from the watch makes the next listing read the records
//! again; a change of the live view of the cages (podman's events) or of
//! what serve knows of podman builds the answer again from the records in
//! memory. A watch that cannot be made (or that the kernel dropped: the
//! folder removed, its queue overflowed) leaves serve reading the records
//! at each listing, as without this layer.
//!
//! What holds a session (its lock, flock(2)) is not a file's change when
//! its holder ends: the kernel lets go of the lock as the file is closed,
//! just after the close's event. A session shown busy is therefore asked
//! again at each listing (one open and one flock for each such session);
//! a session becomes busy only by writing in its lock file (its holder
//! writes what it is, [`crate::state::session::SessionLock::note`]), which is a
//! change the watch sees.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use rustix::fs::inotify;

use super::live::Live;
use crate::error::Result;
use crate::ops;
use crate::state::session::{Damaged, Record, Store};

/// What else a listing is made of: podman's volume folder and whether its
/// limits are enforced, as serve knows them now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostFacts {
    pub volumes: Option<PathBuf>,
    pub limits_enforced: Option<bool>,
}

impl HostFacts {
    pub fn of(host: Option<&crate::host::Host>) -> HostFacts {
        HostFacts {
            volumes: host.and_then(|h| h.volume_path.clone()),
            limits_enforced: host.map(crate::host::enforces_limits),
        }
    }
}

/// The records read at `changes` (the watch's count then).
#[derive(Clone)]
struct Loaded {
    changes: u64,
    records: Arc<Vec<Record>>,
    damaged: Arc<Vec<Damaged>>,
}

/// A listing's answer, and what it was built from.
struct Built {
    changes: u64,
    live: u64,
    host: HostFacts,
    /// The sessions it shows busy.
    busy: Vec<String>,
    /// The egress log of each running cage it shows, as it showed it: its
    /// listener's state changes with no file changed.
    egress: Vec<(String, crate::net::egress::LogState)>,
    body: Bytes,
}

pub struct Records {
    store: Store,
    /// The sessions folder's watch; None where none could be made.
    watch: Option<Mutex<OwnedFd>>,
    /// The watch was dropped by the kernel: no listing is kept any more.
    lost: AtomicBool,
    /// Changes read from the watch so far.
    changes: AtomicU64,
    loaded: Mutex<Option<Loaded>>,
    built: Mutex<Option<Built>>,
    /// Held while an answer is built: the requests that find none wait
    /// for the one being built, without a thread each, rather than each
    /// building its own (50 clients at once made 50 copies of the
    /// listing, on 50 blocking threads).
    building: tokio::sync::Mutex<()>,
}

impl Records {
    /// Watch the sessions folder of `store` (made if it is not there yet,
    /// as the first session would make it).
    pub fn new(store: Store) -> Records {
        let dir = store.sessions_dir();
        let watch = crate::state::session::make_private_dir(&dir)
            .ok()
            .and_then(|()| watch(&dir).ok())
            .map(Mutex::new);
        if watch.is_none() {
            eprintln!(
                "shrooms-agent serve: {} cannot be watched: the records are read at each listing",
                dir.display()
            );
        }
        Records {
            store,
            watch,
            lost: AtomicBool::new(false),
            changes: AtomicU64::new(0),
            loaded: Mutex::new(None),
            built: Mutex::new(None),
            building: tokio::sync::Mutex::new(()),
        }
    }

    /// Does it keep an answer? (Else the caller builds one each time.)
    pub fn keeps(&self) -> bool {
        self.watch.is_some() && !self.lost.load(Ordering::SeqCst)
    }

    /// Read what the watch has queued, without waiting: each event that
    /// can change a listing counts as a change.
    fn drain(&self) {
        let Some(watch) = &self.watch else { return };
        let fd = watch.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&*fd, &mut buf);
        let mut changed = false;
        loop {
            match reader.next() {
                Ok(e) => {
                    let flags = e.events();
                    if flags.intersects(
                        inotify::ReadFlags::IGNORED
                            | inotify::ReadFlags::QUEUE_OVERFLOW
                            | inotify::ReadFlags::DELETE_SELF
                            | inotify::ReadFlags::MOVE_SELF
                            | inotify::ReadFlags::UNMOUNT,
                    ) {
                        // Events may have been lost, or there is no
                        // folder to watch any more.
                        self.lost.store(true, Ordering::SeqCst);
                        changed = true;
                    } else if counts(e.file_name().and_then(|n| n.to_str().ok())) {
                        changed = true;
                    }
                }
                Err(rustix::io::Errno::INTR) => continue,
                // AGAIN: nothing more queued. Anything else: the watch is
                // no use any more.
                Err(rustix::io::Errno::AGAIN) => break,
                Err(_) => {
                    self.lost.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
        if changed {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The listing's answer kept, when nothing it was built from changed
    /// since; None when it is to be built ([`Records::build`], which reads
    /// files: on a blocking thread). Costs a read of the watch, plus a
    /// lock probe per session it shows busy.
    pub fn kept(&self, live: &Live, host: &HostFacts) -> Option<Bytes> {
        if !self.keeps() {
            return None;
        }
        self.drain();
        let changes = self.changes.load(Ordering::SeqCst);
        let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        let b = built.as_ref()?;
        let same = b.changes == changes
            && b.live == live.changes()
            && &b.host == host
            && !self.lost.load(Ordering::SeqCst);
        if !same {
            return None;
        }
        // A holder that ended leaves no event behind it (see above).
        for name in &b.busy {
            if !self.store.lock_held(name).unwrap_or(false) {
                return None;
            }
        }
        for (name, shown) in &b.egress {
            if &crate::net::egress::state(&self.store.egress_pid_path(name)) != shown {
                return None;
            }
        }
        Some(b.body.clone())
    }

    /// The records as they are now: those in memory, unless the watch has
    /// told of a change since they were read (or there is no watch).
    fn records(&self) -> Result<Loaded> {
        self.drain();
        let changes = self.changes.load(Ordering::SeqCst);
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = loaded.as_ref()
            && l.changes == changes
            && self.keeps()
        {
            return Ok(l.clone());
        }
        // Read after the count is taken: a change made while they are read
        // is counted at the next drain, and read again then.
        let (records, damaged) = self.store.list_readable()?;
        let l = Loaded {
            changes,
            records: Arc::new(records),
            damaged: Arc::new(damaged),
        };
        *loaded = Some(l.clone());
        Ok(l)
    }

    /// The turn to build the answer: taken (waited for) before
    /// [`Records::build`] by a request that found none kept.
    pub async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.building.lock().await
    }

    /// Build the listing's answer (reading the records if they changed),
    /// and keep it for the next listings. Blocking: the files are read,
    /// each session's lock is probed.
    pub fn build(&self, live: &Live, host: &HostFacts) -> Result<Bytes> {
        if let Some(body) = self.kept(live, host) {
            // Built by another request while this one waited.
            return Ok(body);
        }
        let live_changes = live.changes();
        let Loaded {
            changes,
            records,
            damaged,
        } = self.records()?;
        let mut sessions = Vec::with_capacity(records.len());
        let mut busy = Vec::new();
        let mut egress = Vec::new();
        for r in records.iter() {
            let s = session(&self.store, live, host, r)?;
            if s.busy.is_some() {
                busy.push(r.name.clone());
            }
            if let Some(state) = s.cage.as_ref().and_then(|c| c.egress_log.clone()) {
                egress.push((r.name.clone(), state));
            }
            sessions.push(s);
        }
        let leftovers = live.leftovers(&records);
        let listing = ops::listing::Listing {
            sessions,
            leftovers,
            damaged: (*damaged).clone(),
        };
        let body = Bytes::from(super::reply::Response::json(200, &listing).body);
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        *built = Some(Built {
            changes,
            live: live_changes,
            host: host.clone(),
            busy,
            egress,
            body: body.clone(),
        });
        Ok(body)
    }
}

/// Does a change to this file of the sessions folder change a listing? A
/// session's history, its egress log's lines (a cage writes them as fast
/// as it sends) and its record's own lock do not appear in it; anything
/// else (a record, a session's lock, the egress listener's pid file, a
/// file not known) may.
fn counts(file: Option<&str>) -> bool {
    match file {
        Some(f) => {
            let log =
                f.ends_with(".jsonl") && (f.contains(".egress.") || f.contains(".egress-refused."));
            !(f.ends_with(".history.jsonl") || f.ends_with("@record.lock") || log)
        }
        None => true,
    }
}

fn watch(dir: &std::path::Path) -> rustix::io::Result<OwnedFd> {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    inotify::add_watch(
        &fd,
        dir,
        inotify::WatchFlags::CREATE
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MODIFY
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::ATTRIB
            | inotify::WatchFlags::DELETE_SELF
            | inotify::WatchFlags::MOVE_SELF
            | inotify::WatchFlags::ONLYDIR,
    )?;
    Ok(fd)
}

/// `cage show --json` of a record, its state from the live view: no podman
/// call.
pub fn session(
    store: &Store,
    live: &Live,
    host: &HostFacts,
    record: &Record,
) -> Result<ops::session_object::Session> {
    let seen = match &record.cage {
        None => ops::session_object::Seen::missing(),
        Some(cage) => live
            .state(&cage.container)
            .map_or_else(ops::session_object::Seen::missing, |s| {
                ops::session_object::Seen::of_ps(&s)
            }),
    };
    let shared_path = ops::listing::shared_path(host.volumes.as_deref(), record);
    let busy = store.busy(&record.name)?;
    Ok(ops::session_object::with_egress_log(
        store,
        ops::session_object::Session::new(
            record.clone(),
            seen,
            shared_path,
            busy,
            host.limits_enforced,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The names of the sessions a listing's answer shows busy.
    fn shown_busy(body: &[u8]) -> HashSet<String> {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !s["busy"].is_null())
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn names(body: &[u8]) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn listing(r: &Records, live: &Live) -> Bytes {
        let host = HostFacts::default();
        r.kept(live, &host)
            .unwrap_or_else(|| r.build(live, &host).unwrap())
    }

    /// Records written, changed, locked and removed behind its back (as
    /// the CLI does) show in the next listing; nothing changed, the same
    /// answer is given again without being built.
    #[test]
    fn the_egress_logs_lines_do_not_change_a_listing() {
        for f in [
            "s.egress.jsonl",
            "s.egress.1.jsonl",
            "s.egress-refused.jsonl",
            "s.egress-refused.1.jsonl",
            "s.history.jsonl",
            "s@record.lock",
        ] {
            assert!(!counts(Some(f)), "{f}");
        }
        for f in ["s.json", "s.lock", "s.egress.pid", "s@intent"] {
            assert!(counts(Some(f)), "{f}");
        }
        assert!(counts(None));
    }

    #[test]
    fn a_change_behind_its_back_shows_in_the_next_listing() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let store = Store::new(&root);
        let r = Records::new(store.clone());
        assert!(r.keeps(), "no watch");
        let live = Live::default();
        assert!(names(&listing(&r, &live)).is_empty());

        store
            .save(&crate::state::session::sample_record("a"))
            .unwrap();
        assert_eq!(names(&listing(&r, &live)), ["a"]);
        let first = listing(&r, &live);
        assert_eq!(first.as_ptr(), listing(&r, &live).as_ptr(), "built again");

        let mut b = crate::state::session::sample_record("b");
        b.starred = true;
        store.save(&b).unwrap();
        let body = listing(&r, &live);
        assert_eq!(names(&body), ["a", "b"]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["sessions"][1]["starred"], true);
        store
            .update("b", |rec| {
                rec.starred = false;
                Ok(())
            })
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&listing(&r, &live)).unwrap();
        assert_eq!(v["sessions"][1]["starred"], false);

        // Taken: busy at once; let go (no event of its own): free at once.
        let lock = store.lock("a").unwrap();
        lock.note("create");
        assert_eq!(
            shown_busy(&listing(&r, &live)),
            HashSet::from(["a".to_string()])
        );
        drop(lock);
        assert!(shown_busy(&listing(&r, &live)).is_empty());

        // A change of the cages' view builds it again.
        let before = listing(&r, &live);
        live.forget("nothing");
        assert_ne!(before.as_ptr(), listing(&r, &live).as_ptr());

        store.remove("a").unwrap();
        assert_eq!(names(&listing(&r, &live)), ["b"]);
        // A record written in place (an editor's save), damaged.
        std::fs::write(store.record_path("b"), "{").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&listing(&r, &live)).unwrap();
        assert_eq!(v["sessions"].as_array().unwrap().len(), 0);
        assert_eq!(v["damaged"][0]["name"], "b");

        // The folder gone: no answer kept, each listing reads again. The
        // kernel says a watched folder is gone (IN_DELETE_SELF, inotify(7))
        // once its inode is let go, which a loaded machine may do a moment
        // after the removal: the next listings see it.
        std::fs::remove_dir_all(store.sessions_dir()).unwrap();
        assert!(names(&listing(&r, &live)).is_empty());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while r.keeps() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(names(&listing(&r, &live)).is_empty());
        }
        assert!(!r.keeps());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
