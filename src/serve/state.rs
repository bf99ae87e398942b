//! What `serve` knows about the machine, for `GET /v1/harnesses`:
//! it answers from what the process knows, refreshed when a build ends
//! and at most every few seconds otherwise: it never waits on podman
//! inside a request"). A background thread looks again every
//! [`REFRESH`], asks podman about itself only every [`HOST_REFRESH`] (the
//! requests' contexts are given the host it found), and looks at once when
//! poked (a build was started over HTTP).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use super::Base;
use crate::host::Host;
use crate::images::workbench::{self, Stage};

pub const REFRESH: Duration = Duration::from_secs(3);
pub const HOST_REFRESH: Duration = Duration::from_secs(60);

/// Where a shared folder appears inside a cage.
pub const SHARED_IN: &str = "/shared";

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Harnesses {
    pub harnesses: Vec<HarnessInfo>,
    pub cage: CageInfo,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HarnessInfo {
    pub name: &'static str,
    /// The program found (the config's, else on PATH).
    #[schema(value_type = Option<String>)]
    pub program: Option<PathBuf>,
    pub available: bool,
    /// What the apps may offer for it.
    pub caps: Caps,
}

/// What a harness can do, for the apps.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct Caps {
    /// It asks before a tool runs, so a session can be set to approve on
    /// its own (`auto_approve`): Claude Code does; pi has no approvals.
    pub approve: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CageInfo {
    /// Cages can be made here (podman found, `cages` not false).
    pub available: bool,
    /// The machine's image (the config's `image`).
    pub image: String,
    /// The machine's image first, then ours.
    pub images: Vec<String>,
    /// The machine has a nix store to give a cage.
    pub nix: bool,
    /// The machine's sealed token is there.
    pub sealed: bool,
    /// The machine's image is on the machine.
    pub ready: bool,
    /// The machine's image (one of ours) is being built.
    pub building: bool,
    /// The last line of its last build, if that failed.
    pub error: Option<String>,
    /// A shared folder can be offered (podman's volumes).
    pub shared: bool,
    pub shared_in: &'static str,
    /// podman's volume folder on the machine.
    #[schema(value_type = Option<String>)]
    pub shared_root: Option<PathBuf>,
}

struct Known {
    harnesses: Harnesses,
    host: Option<Host>,
    host_at: Instant,
}

pub struct State {
    known: Mutex<Known>,
    poked: Mutex<bool>,
    wake: Condvar,
}

impl State {
    /// Look once now (so the first request has an answer), then start the
    /// thread that looks again until `stop` is set.
    pub fn start(base: Arc<Base>, stop: Arc<AtomicBool>) -> (Arc<State>, thread::JoinHandle<()>) {
        let host = detect(&base);
        let harnesses = look(&base, host.clone());
        let state = Arc::new(State {
            known: Mutex::new(Known {
                harnesses,
                host,
                host_at: Instant::now(),
            }),
            poked: Mutex::new(false),
            wake: Condvar::new(),
        });
        let s = state.clone();
        let handle = thread::Builder::new()
            .name("serve-state".into())
            .spawn(move || s.refresh_loop(&base, &stop))
            .expect("starting the state thread");
        (state, handle)
    }

    pub fn harnesses(&self) -> Harnesses {
        self.lock().harnesses.clone()
    }

    pub fn host(&self) -> Option<Host> {
        self.lock().host.clone()
    }

    /// What a listing takes from the host, without a copy of it.
    pub fn host_facts(&self) -> super::records::HostFacts {
        super::records::HostFacts::of(self.lock().host.as_ref())
    }

    /// Look again now.
    pub fn poke(&self) {
        *self.poked.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refresh_loop(&self, base: &Base, stop: &AtomicBool) {
        loop {
            {
                let mut poked = self.poked.lock().unwrap_or_else(|e| e.into_inner());
                let end = Instant::now() + REFRESH;
                while !*poked && !stop.load(Ordering::SeqCst) {
                    let left = end.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    // Short waits, so a stop is seen soon.
                    let wait = left.min(Duration::from_millis(200));
                    poked = self
                        .wake
                        .wait_timeout(poked, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                *poked = false;
            }
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let (old_host, host_at) = {
                let k = self.lock();
                (k.host.clone(), k.host_at)
            };
            let (host, host_at) = if old_host.is_none() || host_at.elapsed() >= HOST_REFRESH {
                (detect(base), Instant::now())
            } else {
                (old_host, host_at)
            };
            let harnesses = look(base, host.clone());
            let mut k = self.lock();
            k.harnesses = harnesses;
            k.host = host;
            k.host_at = host_at;
        }
    }
}

fn detect(base: &Base) -> Option<Host> {
    Host::detect(&base.settings, &base.env).ok()
}

/// Everything `GET /v1/harnesses` says, looked at now.
fn look(base: &Base, host: Option<Host>) -> Harnesses {
    let s = &base.settings;
    let path = s.path_var.as_deref();
    let harness = |name: &'static str, configured: &Option<PathBuf>| {
        let program = configured
            .clone()
            .or_else(|| crate::settings::find_program(name, path));
        HarnessInfo {
            name,
            available: program.as_ref().is_some_and(|p| p.is_file()),
            program,
            caps: Caps {
                approve: name == "claude",
            },
        }
    };
    let harnesses = vec![
        harness("claude", &s.claude),
        harness("pi", &s.pi),
        harness("codex", &s.codex),
        harness("opencode", &s.opencode),
    ];
    let mut images_offered = vec![s.image.clone()];
    for stage in [Stage::Workbench, Stage::Desktop] {
        let name = workbench::image_name(&s.images_repo, stage);
        if !images_offered.contains(&name) {
            images_offered.push(name);
        }
    }
    let token = s
        .sealed_token
        .clone()
        .unwrap_or_else(|| crate::state::session::Store::new(&s.state_dir).default_sealed_token());
    let (ready, building, error) = match &host {
        None => (false, false, None),
        Some(h) => {
            let ctx = base.context(Some(h.clone()));
            match crate::ops::image::status(&ctx) {
                Ok(report) => report
                    .images
                    .into_iter()
                    .find(|i| i.machine)
                    .map(|i| (i.present, i.building, i.error))
                    .unwrap_or((false, false, None)),
                Err(e) => (false, false, Some(e.message())),
            }
        }
    };
    Harnesses {
        harnesses,
        cage: CageInfo {
            available: host.is_some(),
            image: s.image.clone(),
            images: images_offered,
            nix: s.nix_root.join("store").is_dir(),
            sealed: token.is_file(),
            ready,
            building,
            error,
            shared: host.is_some(),
            shared_in: SHARED_IN,
            shared_root: host.as_ref().and_then(|h| h.volume_path.clone()),
        },
    }
}
