//! serve's live view of the cages: the state of every container carrying
//! the session label, from one `podman ps` at start and `podman events`
//! after it, so that `GET /v1/sessions` and `GET /v1/sessions/{name}` make
//! no podman call and never wait on podman. When the events stream ends
//! (podman upgraded, its event log rotated), a fresh `podman ps` and a new
//! stream follow. What changes a cage still goes through the operations;
//! the routes that do so note the state they saw, so the view has it even
//! before podman's event arrives.
//!
//! The events are asked `--since` a second before the `ps`, so that none
//! falls between the two: one replayed from before the `ps` is applied in
//! order and leaves the state of the latest. They are filtered by type,
//! and by the session label here, not with podman's `--filter label=KEY`:
//! podman 4.3's events match a label filter only with a value (seen on
//! 4.3.1: `--filter label=KEY` printed nothing). `--format json` prints one
//! object a line, `Name`, `Status`, `Type` and `Attributes` (the labels)
//! on 4.3 and 5.x alike (podman-events(1)); 5.x adds fields, left unread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;

use crate::cage::spec::SESSION_LABEL;
use crate::host::podman::Podman;
use crate::state::when::now;

/// How long after the events stream ends the view is loaded again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

#[derive(Default)]
struct View {
    /// Container name to podman's state (as `podman ps` says it).
    states: HashMap<String, String>,
    /// Container name to what its labels and image say, for the leftovers
    /// (containers of no session here) that `GET /v1/sessions` lists.
    owners: HashMap<String, Owner>,
    /// A `podman ps` has answered.
    ready: bool,
}

/// What a container's labels and image say of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Owner {
    session: String,
    image: String,
    state_folder: Option<String>,
}

#[derive(Default)]
pub struct Live {
    view: Mutex<View>,
    /// Counts the view's changes, so that an answer built from it (the
    /// listing's) knows when it is out of date.
    changes: AtomicU64,
}

/// One line of `podman events --format json`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "Status")]
    pub status: String,
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "Attributes")]
    pub attributes: Option<HashMap<String, String>>,
    #[serde(rename = "Image")]
    pub image: String,
}

impl Event {
    /// What its labels say of its container (the events carry them as
    /// attributes).
    fn owner(&self) -> Owner {
        let label = |k: &str| self.attributes.as_ref().and_then(|a| a.get(k)).cloned();
        Owner {
            session: label(SESSION_LABEL).unwrap_or_default(),
            image: self.image.clone(),
            state_folder: label(crate::cage::spec::STATE_LABEL),
        }
    }
}

/// What an event does to a container's state.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    State(&'static str),
    Gone,
    /// Renamed: the event names it by its new name only, so the view is
    /// loaded again.
    Reload,
    None,
}

/// Pure: an event's change, in `podman ps`'s words for the states. Events
/// that leave the state as it was (exec, attach, mount, cleanup, kill: a
/// `died` follows) change nothing.
pub fn change(e: &Event) -> Change {
    if e.kind != "container"
        || e.name.is_empty()
        || !e
            .attributes
            .as_ref()
            .is_some_and(|a| a.contains_key(SESSION_LABEL))
    {
        return Change::None;
    }
    match e.status.as_str() {
        "create" => Change::State("created"),
        "init" => Change::State("initialized"),
        "start" | "restart" | "unpause" | "restore" => Change::State("running"),
        "pause" => Change::State("paused"),
        "died" | "exited" | "stop" | "checkpoint" => Change::State("exited"),
        "remove" => Change::Gone,
        "rename" => Change::Reload,
        _ => Change::None,
    }
}

impl Live {
    /// Load the view now (so the first request has it), then follow
    /// podman's events on a thread of its own, for as long as serve runs.
    /// The events process ends with that thread, that is with serve
    /// (`die_with_parent`).
    pub fn start(podman: Podman, stop: Arc<AtomicBool>) -> Arc<Live> {
        let live = Arc::new(Live::default());
        let mut since = now().saturating_sub(1);
        live.load(&podman);
        let l = live.clone();
        let started = std::thread::Builder::new()
            .name("serve-live".into())
            .spawn(move || {
                loop {
                    l.follow(&podman, since);
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(AGAIN_AFTER);
                    since = now().saturating_sub(1);
                    l.load(&podman);
                }
            });
        if started.is_err() {
            // No thread, no live view: the routes ask podman instead.
            live.change().ready = false;
        }
        live
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The view, to be changed: counted as a change.
    fn change(&self) -> std::sync::MutexGuard<'_, View> {
        let v = self.lock();
        self.changes.fetch_add(1, Ordering::SeqCst);
        v
    }

    /// How many times the view changed so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// One `podman ps`: the view, whole. On failure, the view is not
    /// ready (the routes ask podman) until the next load.
    fn load(&self, podman: &Podman) {
        match podman.ps_cages() {
            Ok(entries) => {
                let states = entries
                    .iter()
                    .map(|e| (e.name().to_string(), e.state.clone()))
                    .collect();
                let owners = entries
                    .iter()
                    .map(|e| {
                        let owner = Owner {
                            session: e.label(SESSION_LABEL).unwrap_or("").to_string(),
                            image: e.image.clone(),
                            state_folder: e
                                .label(crate::cage::spec::STATE_LABEL)
                                .map(str::to_string),
                        };
                        (e.name().to_string(), owner)
                    })
                    .collect();
                let mut v = self.change();
                v.states = states;
                v.owners = owners;
                v.ready = true;
            }
            Err(e) => {
                eprintln!("shrooms-agent serve: podman ps for the live view: {e}");
                self.change().ready = false;
            }
        }
    }

    /// Follow `podman events` until its stream ends.
    fn follow(&self, podman: &Podman, since: u64) {
        let args: Vec<String> = [
            "events",
            "--since",
            &since.to_string(),
            "--filter",
            "type=container",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let process = podman.process(&args).die_with_parent();
        let r = process.stream(&mut |line| {
            // stderr is joined to stdout: a line that is no event is skipped.
            if let Ok(e) = serde_json::from_str::<Event>(line) {
                if change(&e) == Change::Reload {
                    self.load(podman);
                } else {
                    self.apply(&e);
                }
            }
        });
        if let Err(e) = r {
            eprintln!("shrooms-agent serve: podman events: {e}");
        }
    }

    fn apply(&self, e: &Event) {
        match change(e) {
            Change::State(s) => {
                let mut v = self.change();
                v.states.insert(e.name.clone(), s.to_string());
                v.owners.insert(e.name.clone(), e.owner());
            }
            Change::Gone => self.forget(&e.name),
            Change::Reload | Change::None => {}
        }
    }

    /// Has the view been loaded?
    pub fn ready(&self) -> bool {
        self.lock().ready
    }

    /// A container's state: None when podman has no such container.
    pub fn state(&self, container: &str) -> Option<String> {
        self.lock().states.get(container).cloned()
    }

    /// A state an operation just saw.
    pub fn note(&self, container: &str, state: &str) {
        let mut v = self.lock();
        if v.states.get(container).map(String::as_str) != Some(state) {
            self.changes.fetch_add(1, Ordering::SeqCst);
            v.states.insert(container.to_string(), state.to_string());
        }
    }

    /// A container an operation just removed.
    pub fn forget(&self, container: &str) {
        let mut v = self.change();
        v.states.remove(container);
        v.owners.remove(container);
    }

    /// The containers that carry the session label and belong to none of
    /// `records`, as `cage ls` lists them (by name here).
    pub fn leftovers(
        &self,
        records: &[crate::state::session::Record],
    ) -> Vec<crate::ops::listing::Leftover> {
        let v = self.lock();
        let ours: std::collections::HashSet<&str> = records
            .iter()
            .filter_map(|r| r.cage.as_ref().map(|c| c.container.as_str()))
            .collect();
        let mut out: Vec<_> = v
            .states
            .iter()
            .filter(|(name, _)| !ours.contains(name.as_str()))
            .map(|(name, state)| {
                let owner = v.owners.get(name).cloned().unwrap_or_default();
                crate::ops::listing::Leftover {
                    container: name.clone(),
                    session: owner.session,
                    image: owner.image,
                    state: state.clone(),
                    state_folder: owner.state_folder,
                }
            })
            .collect();
        out.sort_by(|a, b| a.container.cmp(&b.container));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        serde_json::from_str(line).unwrap()
    }

    /// Lines as podman 4.3.1 printed them (seen), and one in 5.x's shape
    /// (lowercase `time` and `timeNano` added).
    #[test]
    fn events_change_the_state() {
        let ours =
            r#""Attributes":{"io.buildah.version":"1.28.2","xyz.vpavlin.shrooms.session":"web"}"#;
        let line = |status: &str| {
            format!(
                r#"{{"ID":"3c16","Image":"localhost/x:latest","Name":"shrooms-web-0a1b2c","Status":"{status}","Time":"2026-11-30T17:36:35.4Z","Type":"container",{ours}}}"#
            )
        };
        assert_eq!(change(&event(&line("create"))), Change::State("created"));
        assert_eq!(change(&event(&line("start"))), Change::State("running"));
        assert_eq!(change(&event(&line("died"))), Change::State("exited"));
        assert_eq!(change(&event(&line("remove"))), Change::Gone);
        assert_eq!(change(&event(&line("rename"))), Change::Reload);
        assert_eq!(change(&event(&line("exec"))), Change::None);
        assert_eq!(change(&event(&line("cleanup"))), Change::None);
        let five = format!(
            r#"{{"ID":"3c16","Image":"x","Name":"shrooms-web-0a1b2c","Status":"died","Type":"container","time":1764524195,"timeNano":1764524195000000000,"ContainerExitCode":137,{ours}}}"#
        );
        assert_eq!(change(&event(&five)), Change::State("exited"));
        // Not ours: no session label.
        let other = r#"{"Name":"web","Status":"start","Type":"container","Attributes":{"a":"b"}}"#;
        assert_eq!(change(&event(other)), Change::None);
        // Not a container's.
        let image = r#"{"Name":"x","Status":"remove","Type":"image","Attributes":{"xyz.vpavlin.shrooms.session":"web"}}"#;
        assert_eq!(change(&event(image)), Change::None);
    }

    #[test]
    fn the_view_follows_the_events() {
        let live = Live::default();
        let e = |status: &str| Event {
            name: "c".into(),
            status: status.into(),
            kind: "container".into(),
            attributes: Some([(SESSION_LABEL.to_string(), "s".to_string())].into()),
            image: "img".into(),
        };
        live.apply(&e("create"));
        assert_eq!(live.state("c").as_deref(), Some("created"));
        live.apply(&e("start"));
        live.apply(&e("exec"));
        assert_eq!(live.state("c").as_deref(), Some("running"));
        live.apply(&e("died"));
        assert_eq!(live.state("c").as_deref(), Some("exited"));
        // No record owns it: a leftover, its labels from the events.
        assert_eq!(
            live.leftovers(&[]),
            [crate::ops::listing::Leftover {
                container: "c".into(),
                session: "s".into(),
                image: "img".into(),
                state: "exited".into(),
                state_folder: None,
            }]
        );
        let mut r = crate::state::session::sample_record("s");
        r.cage = Some(crate::state::session::sample_cage("c"));
        assert_eq!(live.leftovers(&[r]), []);
        live.apply(&e("remove"));
        assert_eq!(live.state("c"), None);
        assert_eq!(live.leftovers(&[]), []);
    }
}
