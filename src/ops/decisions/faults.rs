//! Every fault, injected: for each operation and for each podman call it
//! makes, the operation runs once with that call failing and once with the
//! tool dying right after it (`FakePodman::fail_call`, `crash_after`);
//! then the next command runs, and the state must hold: no container
//! without a record, no record whose container is gone, no second
//! container of a session, no lock held, no intent nor temporary file
//! left, no folder of a container that is not there. Exhaustive, not
//! sampled: each operation is run once first to count its calls.
//!
//! Which containers exist is replayed from the calls the fake answered
//! (`create --name C` makes one, `rm -f ... C` removes it; a call made to
//! fail did nothing), so the fake needs no state of its own.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;
use crate::host::podman::fake::until_crash;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Fail,
    Crash,
}

/// An operation under test: how to make its world (named), the containers
/// that exist before it, and the command itself (also the next command).
struct Case {
    name: &'static str,
    world: fn(&str) -> World,
    before: &'static [&'static str],
    run: fn(&World) -> crate::error::Result<()>,
    /// The next command (None: the same again).
    next: Option<fn(&World) -> crate::error::Result<()>>,
}

const C: &str = "shrooms-web-0a1b2c";

fn ordinary(name: &str) -> World {
    World::new(name, |f| {
        f.on_prefix(&["image", "inspect"], Answer::out(our_image()))
            .on_prefix(&["create"], Answer::ok())
            .on_prefix(&["inspect"], Answer::out(container_state(false)))
            .on_prefix(&["rm"], Answer::ok())
            .on_prefix(&["update"], Answer::ok())
            .on_prefix(&["stop"], Answer::ok())
    })
}

fn caged(name: &str) -> World {
    let w = ordinary(name);
    w.record("web", Some(C));
    w
}

fn uncaged(name: &str) -> World {
    let w = ordinary(name);
    w.record("web", None);
    w
}

fn create(w: &World) -> crate::error::Result<()> {
    match super::super::create::create(&w.ctx, &create_request(w, "web")) {
        Err(e) if e.kind == Kind::Exists => Ok(()),
        other => other.map(drop),
    }
}

fn rm(w: &World) -> crate::error::Result<()> {
    match super::super::rm::rm(&w.ctx, "web") {
        Err(e) if e.kind == Kind::NotFound => Ok(()),
        other => other.map(drop),
    }
}

fn move_to(w: &World, out: bool) -> crate::error::Result<()> {
    let req = super::super::moves::MoveRequest {
        name: "web".into(),
        out,
        ..Default::default()
    };
    match super::super::moves::move_session(&w.ctx, &req) {
        // Out already: the next command has nothing to do.
        Err(e) if out && e.message().contains("is not in a cage") => Ok(()),
        other => other.map(drop),
    }
}

fn limits(w: &World) -> crate::error::Result<()> {
    super::super::limits::limits(
        &w.ctx,
        &super::super::limits::LimitsRequest {
            name: "web".into(),
            asked: crate::settings::LimitsAsked::parse(Some("1g"), None, None).unwrap(),
            ..Default::default()
        },
    )
    .map(drop)
}

fn start(w: &World) -> crate::error::Result<()> {
    super::super::start::start(&w.ctx, "web").map(drop)
}

fn stop(w: &World) -> crate::error::Result<()> {
    super::super::stop::stop(&w.ctx, "web").map(drop)
}

fn startable_world(name: &str) -> World {
    startable(name, false).0
}

const CASES: &[Case] = &[
    Case {
        name: "create",
        world: ordinary,
        before: &[],
        run: create,
        next: None,
    },
    Case {
        name: "rm",
        world: caged,
        before: &[C],
        run: rm,
        // One that leaves the record as it finds it: a record whose
        // container the crashed rm removed must not be left.
        next: Some(|w| match stop(w) {
            Err(e) if e.kind == Kind::NotFound => Ok(()),
            other => other,
        }),
    },
    Case {
        name: "move",
        world: caged,
        before: &[C],
        run: |w| move_to(w, false),
        next: None,
    },
    Case {
        name: "movein",
        world: uncaged,
        before: &[],
        run: |w| move_to(w, false),
        next: None,
    },
    Case {
        name: "moveout",
        world: caged,
        before: &[C],
        run: |w| move_to(w, true),
        next: None,
    },
    Case {
        name: "limits",
        world: caged,
        before: &[C],
        run: limits,
        next: None,
    },
    Case {
        name: "start",
        world: startable_world,
        before: &[C],
        run: start,
        next: None,
    },
    Case {
        name: "stop",
        world: startable_world,
        before: &[C],
        run: stop,
        next: None,
    },
];

/// The containers there after these calls (1-based `failed`: that one did
/// nothing).
fn containers(before: &[&str], calls: &[Vec<String>], failed: Option<usize>) -> BTreeSet<String> {
    let mut there: BTreeSet<String> = before.iter().map(|c| c.to_string()).collect();
    for (i, call) in calls.iter().enumerate() {
        if Some(i + 1) == failed {
            continue;
        }
        match call.first().map(String::as_str) {
            Some("create") => {
                if let Some(at) = call.iter().position(|w| w == "--name") {
                    there.insert(call[at + 1].clone());
                }
            }
            Some("rm") => {
                there.remove(call.last().unwrap());
            }
            _ => {}
        }
    }
    there
}

/// The invariants, said as the first that does not hold.
/// With `pending`, a container an intent left names is the next
/// command's to remove, and the intent may be there.
fn check(w: &World, before: &[&str], failed: Option<usize>, pending: bool) -> Result<(), String> {
    let mut there = containers(before, &w.fake.calls(), failed);
    // A leftover (of no session) is prune's: the next prune removes it.
    let leftover = |c: &str| pending && c.starts_with(LEFTOVER_PREFIX);
    there.retain(|c| !leftover(c));
    let intent = match w.ctx.store.intent("web").map_err(|e| e.message())? {
        None => w.ctx.store.intent(RENAMED).map_err(|e| e.message())?,
        some => some,
    };
    // What a pending intent finishes: the old container of a move, the
    // record of an rm.
    let mut excused = None;
    match (pending, &intent) {
        (true, Some(crate::state::session::Intent::Move { from: Some(f), .. })) => {
            there.remove(f);
        }
        (true, Some(crate::state::session::Intent::Remove { container })) => {
            excused = container.clone()
        }
        (true, Some(crate::state::session::Intent::Rename { old: Some(o), .. })) => {
            there.remove(o);
        }
        _ => {}
    }
    let (records, damaged) = w.ctx.store.list_readable().map_err(|e| e.message())?;
    if !damaged.is_empty() {
        return Err(format!("damaged records: {damaged:?}"));
    }
    let named: Vec<String> = records
        .iter()
        .filter_map(|r| r.cage.as_ref().map(|c| c.container.clone()))
        .collect();
    for c in &there {
        if !named.contains(c) {
            return Err(format!(
                "the container {c} has no record (there: {there:?})"
            ));
        }
    }
    for c in &named {
        if !there.contains(c) && excused.as_ref() != Some(c) {
            return Err(format!("a record names {c}, which is gone"));
        }
    }
    if there.len() > records.len() {
        return Err(format!("a second container: {there:?}"));
    }
    if !pending && !w.ctx.store.intents().is_empty() {
        return Err(format!("intents left: {:?}", w.ctx.store.intents()));
    }
    let held = held_still_by(|| {
        w.ctx.store.lock_held("web").unwrap_or(true)
            || w.ctx.store.lock_held(RENAMED).unwrap_or(true)
    });
    if held {
        return Err("the session's lock is held".into());
    }
    let sessions = w.ctx.settings.state_dir.join("sessions");
    for e in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        if f.contains(".tmp-") {
            return Err(format!("a temporary file is left: {f}"));
        }
    }
    for e in std::fs::read_dir(w.ctx.store.cages_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let f = e.file_name().to_string_lossy().into_owned();
        let of = f.strip_suffix(".env").unwrap_or(&f);
        if !there.contains(of) && !leftover(of) {
            return Err(format!("the cage folder {f} of no container is left"));
        }
    }
    Ok(())
}

/// Run one case with every fault at every call; returns what failed.
fn exhaust(case: &Case) -> Vec<String> {
    let w = (case.world)(&format!("fault-{}-count", case.name));
    w.fake.clear();
    (case.run)(&w).unwrap_or_else(|e| panic!("{}: {}", case.name, e.message()));
    let n = w.fake.count();
    assert!(n > 0, "{} made no podman call", case.name);
    drop(w);
    let mut bad = Vec::new();
    for k in 1..=n {
        for fault in [Fault::Fail, Fault::Crash] {
            let w = (case.world)(&format!("fault-{}-{fault:?}-{k}", case.name));
            w.fake.clear();
            match fault {
                Fault::Fail => w.fake.fail_call(k),
                Fault::Crash => w.fake.crash_after(k),
            }
            let first = until_crash(|| (case.run)(&w));
            let said = |what: &str| format!("{} with call {k} {fault:?}: {what}", case.name);
            // A removal podman failed is tried again (`Podman::rm_force`):
            // the fault, injected once, is then overcome, as podman 4.3's
            // passing "device or resource busy" is.
            let calls = w.fake.calls();
            let overcome = fault == Fault::Fail
                && calls
                    .get(k - 1)
                    .is_some_and(|c| c.first().is_some_and(|w| w == "rm"))
                && calls.get(k - 1) == calls.get(k);
            let fault_felt = if overcome { None } else { Some(fault) };
            match (fault_felt, &first) {
                (None, _) => {}
                (Some(Fault::Fail), Err(())) => bad.push(said("a failure crashed")),
                // (A move whose old container could not be removed warns: the
                // next command removes it.)
                (Some(Fault::Fail), Ok(Ok(())))
                    if !matches!(case.name, "stop" | "limits" | "move" | "moveout") =>
                {
                    bad.push(said("a failed call was not noticed"))
                }
                (Some(Fault::Crash), Ok(_)) => bad.push(said("the crash did not happen")),
                _ => {}
            }
            let failed = (fault_felt == Some(Fault::Fail)).then_some(k);
            bad.extend(then_the_next(&w, case, failed, failed.is_some(), &said));
        }
    }
    bad
}

fn exhaustive(name: &str) {
    let case = CASES
        .iter()
        .chain(MORE_CASES)
        .chain(PRUNE_CASES)
        .find(|c| c.name == name)
        .unwrap();
    // The crash is a panic the test catches: its message is noise.
    let bad = exhaust(case);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_fault_of_create() {
    exhaustive("create");
}

#[test]
fn every_fault_of_rm() {
    exhaustive("rm");
}

#[test]
fn every_fault_of_move_into_a_new_cage() {
    exhaustive("move");
}

#[test]
fn every_fault_of_move_into_a_cage() {
    exhaustive("movein");
}

#[test]
fn every_fault_of_move_out() {
    exhaustive("moveout");
}

#[test]
fn every_fault_of_limits() {
    exhaustive("limits");
}

#[test]
fn every_fault_of_start() {
    exhaustive("start");
}

#[test]
fn every_fault_of_stop() {
    exhaustive("stop");
}

fn described(steps: &[crate::ops::plan::Step]) -> Vec<String> {
    steps.iter().map(|s| s.describe()).collect()
}

/// The plans themselves: the intent first, what cannot be taken back last.
#[test]
fn the_plans_of_rm_and_move() {
    let w = caged("plans");
    let record = w.ctx.store.load("web").unwrap();
    assert_eq!(
        described(&super::super::rm::steps(&record)),
        [
            format!("intent remove {C}"),
            format!("remove container {C}"),
            "remove record web".to_string(),
        ]
    );
    let out = super::super::moves::steps(&record, None, &record.dir, "me".into());
    assert_eq!(
        described(&out),
        [
            format!("intent move {C} -> none"),
            "change record to no cage".to_string(),
            format!("remove container {C} (best effort)"),
            "history".to_string(),
            "done".to_string(),
        ]
    );
    let mut uncaged = record.clone();
    uncaged.cage = None;
    assert_eq!(
        described(&super::super::rm::steps(&uncaged)),
        ["intent remove none", "remove record web"]
    );
}

/// The state folder's identity a plan's create argv carries.
fn labelled_id(argv: &[String]) -> String {
    let prefix = format!("{}=", crate::cage::spec::STATE_LABEL);
    argv.iter()
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap()
        .to_string()
}

fn prepared(w: &World) -> super::super::make::CagePlan {
    super::super::make::prepare(
        &w.ctx,
        w.ctx.host().unwrap(),
        "web",
        &w.project,
        crate::cage::harness::Harness::Claude,
        &Default::default(),
        false,
    )
    .unwrap()
}

#[test]
fn the_plan_of_create() {
    let w = ordinary("plan-create");
    let plan = prepared(&w);
    let c = plan.container.clone();
    // The state folder's first cage: its identity, drawn, is kept by a
    // step (nothing is written before the plan runs).
    assert!(!w.ctx.store.state_id_path().exists());
    let id = labelled_id(&plan.create_argv);
    let record = w.record("web", Some(&c));
    assert_eq!(
        described(&super::super::create::steps(&plan, &record, "me".into())),
        [
            format!("intent create {c}"),
            format!("state id {id}"),
            format!("cage files {c}"),
            format!("create container {c}"),
            "new record web".to_string(),
            "history".to_string(),
            "done".to_string(),
        ]
    );
    let moved = super::super::moves::steps(&record, Some(&plan), &record.dir, "me".into());
    assert_eq!(
        described(&moved),
        [
            format!("intent move {c} -> {c}"),
            format!("state id {id}"),
            format!("cage files {c}"),
            format!("create container {c}"),
            format!("change record to {c}"),
            format!("remove container {c} (best effort)"),
            "history".to_string(),
            "done".to_string(),
        ]
    );
    // Once the state folder has one, no plan keeps another.
    w.ctx.store.state_id().unwrap();
    let steps = described(&prepared(&w).steps());
    assert!(
        steps.iter().all(|s| !s.starts_with("state id")),
        "{steps:?}"
    );
}

/// Two first cages of a state folder made at once (serve creating two
/// sessions on a fresh machine): the one whose id is kept second makes
/// its container with the first one's, and keeps it in its record.
#[test]
fn a_create_that_loses_the_race_for_the_state_id_uses_the_winners() {
    let w = ordinary("state-id-race");
    let plan = prepared(&w);
    let drawn = labelled_id(&plan.create_argv);
    let mut record = w.record("web", None);
    std::fs::remove_file(w.ctx.store.record_path("web")).unwrap();
    record.cage = Some(plan.record());
    let steps = super::super::create::steps(&plan, &record, "me".into());
    // Another create, beside this one, kept its own first.
    let won = "0123456789abcdef0123456789abcdef";
    assert_ne!(drawn, won);
    assert_eq!(w.ctx.store.keep_state_id(won).unwrap(), won);
    w.fake.clear();
    let ran = crate::ops::plan::execute(&w.ctx, w.ctx.host().ok(), steps).unwrap();
    assert_eq!(ran.state_id.as_deref(), Some(won));
    assert_eq!(w.ctx.store.state_id_if_any().unwrap().as_deref(), Some(won));
    let calls = w.fake.calls();
    let made = calls.iter().find(|c| c[0] == "create").unwrap();
    assert_eq!(labelled_id(made), won, "{made:?}");
    let kept = w.ctx.store.load("web").unwrap().cage.unwrap().create_argv;
    assert_eq!(labelled_id(&kept), won, "{kept:?}");
}

/// The writes an operation makes in the state folder, each made to fail by
/// a folder in its way (which fails root too, unlike a mode): the intent's
/// and the record's temporary files (`session::write_atomic`), and the
/// history, appended.
fn blocked_writes(w: &World) -> Vec<(&'static str, PathBuf)> {
    let sessions = w.ctx.settings.state_dir.join("sessions");
    let pid = std::process::id();
    vec![
        ("intent", sessions.join(format!(".web@intent.tmp-{pid}"))),
        ("record", sessions.join(format!(".web.json.tmp-{pid}"))),
        ("history", sessions.join("web.history.jsonl")),
    ]
}

/// Each write of each operation that writes records, failed: the state
/// holds, and the next command works.
#[test]
fn every_failed_write_in_the_state_folder() {
    let mut bad = Vec::new();
    for case in CASES.iter().filter(|c| !matches!(c.name, "start" | "stop")) {
        bad.extend(failed_writes(case, blocked_writes));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A session moved into a sealed cage (`cage move --sealed`): its token is
/// there, and the next command is the same move again (a sealed session
/// moved into a new sealed cage).
fn sealed_world(name: &str) -> World {
    let w = caged(name);
    let token = w.ctx.store.default_sealed_token();
    std::fs::write(&token, "sk-ant-oat01-test\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    w
}

fn move_sealed(w: &World) -> crate::error::Result<()> {
    let req = super::super::moves::MoveRequest {
        name: "web".into(),
        choice: super::super::make::CageChoice {
            sealed: true,
            ..Default::default()
        },
        ..Default::default()
    };
    super::super::moves::move_session(&w.ctx, &req).map(drop)
}

/// Operations with a world of their own, beside `CASES`.
const MORE_CASES: &[Case] = &[Case {
    name: "movesealed",
    world: sealed_world,
    before: &[C],
    run: move_sealed,
    next: None,
}];

#[test]
fn every_fault_of_move_into_a_sealed_cage() {
    let w = sealed_world("sealed-plain");
    move_sealed(&w).unwrap();
    let record = w.ctx.store.load("web").unwrap();
    assert!(record.cage.is_some_and(|c| c.sealed.is_some()));
    drop(w);
    let bad = exhaust(&MORE_CASES[0]);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Run one case with each of its writes in the state folder
/// (`session::write_atomic`, the history's append) failing, and again with
/// the tool dying right after it; returns what failed.
fn exhaust_writes(case: &Case) -> Vec<String> {
    use crate::host::process::crash::{WriteFault, writes};
    let w = (case.world)(&format!("writes-{}-count", case.name));
    let before = writes();
    (case.run)(&w).unwrap_or_else(|e| panic!("{}: {}", case.name, e.message()));
    let n = writes() - before;
    drop(w);
    let mut bad = Vec::new();
    for k in 1..=n {
        for fault in [WriteFault::Fail, WriteFault::Crash] {
            let w = (case.world)(&format!("writes-{}-{fault:?}-{k}", case.name));
            w.fake.clear();
            let said = |what: &str| format!("{} with write {k} {fault:?}: {what}", case.name);
            bad.extend(write_faulted(k, fault, || (case.run)(&w)).map(said));
            let failure = fault == WriteFault::Fail;
            bad.extend(then_the_next(&w, case, None, failure, &said));
        }
    }
    bad
}

/// Run `run` with its `k`th write in the state folder given `fault`; what
/// went wrong in how it ended (a failure that crashed, a crash that did
/// not happen).
fn write_faulted<T>(
    k: usize,
    fault: crate::host::process::crash::WriteFault,
    run: impl FnOnce() -> T,
) -> Option<&'static str> {
    use crate::host::process::crash::{WriteFault, fault_write, no_write_fault};
    fault_write(k, fault);
    let first = until_crash(run);
    no_write_fault();
    match (fault, first) {
        (WriteFault::Fail, Err(())) => Some("a failure crashed"),
        (WriteFault::Crash, Ok(_)) => Some("the crash did not happen"),
        _ => None,
    }
}

/// After a fault (`failed`: the podman call that did nothing; `failure`: a
/// failure, not a crash): what failed changed nothing or was taken back,
/// and the next command repairs, then does its work.
fn then_the_next(
    w: &World,
    case: &Case,
    failed: Option<usize>,
    failure: bool,
    said: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let mut bad = Vec::new();
    if failure && let Err(why) = check(w, case.before, failed, true) {
        bad.push(said(&format!("after the failure: {why}")));
    }
    if let Err(e) = case.next.unwrap_or(case.run)(w) {
        bad.push(said(&format!("the next command failed: {}", e.message())));
    }
    if let Err(why) = check(w, case.before, failed, false) {
        bad.push(said(&format!("after the next command: {why}")));
    }
    bad
}

/// Each write in the state folder of each operation, failed and crashed
/// right after, by its number (the test-only hook in the writes): the
/// state holds, and the next command works.
#[test]
fn every_write_in_the_state_folder_failed_and_crashed_after() {
    let bad: Vec<String> = CASES
        .iter()
        .chain(MORE_CASES)
        .chain(EXEC_CASES)
        .chain(PRUNE_CASES)
        .flat_map(exhaust_writes)
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// One operation with its `i`th write (`blocked_writes`) failing; what
/// went wrong.
fn failed_write(case: &Case, i: usize) -> Vec<String> {
    failed_write_by(case, blocked_writes, i)
}

/// `name` made unique in this process: a world's folder is named for it,
/// and two tests that run at once may try the same case (each removes its
/// world's folder when done).
fn unique(name: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{name}-{n}")
}

/// Run `case` once with each of the writes `blocked` names made to fail;
/// returns what failed.
fn failed_writes(case: &Case, blocked: fn(&World) -> Vec<(&'static str, PathBuf)>) -> Vec<String> {
    let count = blocked(&(case.world)(&unique("write-names"))).len();
    (0..count)
        .flat_map(|i| failed_write_by(case, blocked, i))
        .collect()
}

/// `case` with the `i`th write `blocked` names failing; what went wrong.
fn failed_write_by(
    case: &Case,
    blocked: fn(&World) -> Vec<(&'static str, PathBuf)>,
    i: usize,
) -> Vec<String> {
    let mut bad = Vec::new();
    let w = (case.world)(&unique(&format!("write-{}-{i}", case.name)));
    let (what, path) = blocked(&w).swap_remove(i);
    std::fs::create_dir_all(path.join("in-the-way")).unwrap();
    w.fake.clear();
    let said = |s: &str| format!("{} with its {what} write failing: {s}", case.name);
    let first = until_crash(|| (case.run)(&w)).expect("no crash was asked");
    std::fs::remove_dir_all(&path).unwrap();
    if let Err(why) = check(&w, case.before, None, true) {
        bad.push(said(&format!("after it ({first:?}): {why}")));
    }
    bad.extend(then_the_next(&w, case, None, false, &said));
    bad
}

/// A startable world whose record asks for other limits than its cage was
/// made with: on podman 4.3 a start sets them again (`Step::Update`), as
/// exec's preparation does.
fn startable_with_own_limits(name: &str) -> World {
    let w = startable_world(name);
    let w = w.podman(|f| {
        f.on(&["start", "--", C], Answer::ok())
            .on(&["stop", "--", C], Answer::ok())
            .on_prefix(&["update"], Answer::ok())
            .on_prefix(&["inspect"], Answer::out(running_cage(C)))
            .on_prefix(&["unshare", calls::NSENTER], Answer::ok())
            .on_prefix(
                &["unshare", calls::STAT],
                Answer::out("4 4026532185\n4 4026532185\n65024 77\n65024 77\n"),
            )
    });
    let mut record = w.ctx.store.load("web").unwrap();
    record.cage.as_mut().unwrap().limits = crate::settings::Limits::of("1g", "2", 2048);
    w.ctx.store.save(&record).unwrap();
    w
}

/// `cage limits --net internet` of a running cage: its rules loaded again.
fn limits_net(w: &World) -> crate::error::Result<()> {
    super::super::limits::limits(
        &w.ctx,
        &super::super::limits::LimitsRequest {
            name: "web".into(),
            net: Some(crate::net::netpolicy::NetPolicy::Internet),
            ..Default::default()
        },
    )
    .map(drop)
}

const EXEC_CASES: &[Case] = &[
    // The start of exec's preparation (`decide_start`, the same plan):
    // the intent, `podman start`, `podman update`, the inspect and the
    // rules, each failed and each crashed after.
    Case {
        name: "start-update",
        world: startable_with_own_limits,
        before: &[C],
        run: start,
        next: None,
    },
    Case {
        name: "limits-net",
        world: startable_world,
        before: &[C],
        run: limits_net,
        next: None,
    },
];

fn exec_case(name: &str) -> &'static Case {
    EXEC_CASES.iter().find(|c| c.name == name).unwrap()
}

#[test]
fn every_fault_of_a_start_that_sets_the_limits_again() {
    let bad = exhaust(exec_case("start-update"));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_fault_of_a_new_network_policy_on_a_running_cage() {
    let bad = exhaust(exec_case("limits-net"));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A start's one write in the state folder, its intent, failing: nothing
/// is started, and the next start works.
#[test]
fn a_start_whose_intent_cannot_be_written() {
    let bad = failed_write(exec_case("start-update"), 0);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The plans of a start and of exec's preparation: the intent before
/// `podman start`, the rules before it is done; the turn's marker and
/// watcher before the start, its gateway, env file and socket after.
#[test]
fn the_plans_of_start_and_exec() {
    use super::super::{decide_start, start_facts};
    let w = startable_with_own_limits("plan-start");
    let host = w.ctx.host().unwrap();
    let mut record = w.ctx.store.load("web").unwrap();
    let start = |r: &crate::state::session::Record| {
        decide_start(&start_facts(&w.ctx, r).unwrap(), host).map(|s| described(&s))
    };
    let started = [
        format!("intent start {C}"),
        "settings copies web".to_string(),
        format!("git sync /nonexistent/shrooms-test-git/{C}"),
        "check sources".to_string(),
        format!("start {C}"),
        format!("update {C}"),
        format!("rules {C}"),
        "done".to_string(),
    ];
    assert_eq!(start(&record).unwrap(), started);
    let lock = w.ctx.store.lock("web").unwrap();
    let facts = start_facts(&w.ctx, &record).unwrap();
    let turn = super::super::exec::turn_steps(
        decide_start(&facts, host).unwrap(),
        &record,
        lock.share().unwrap(),
        None,
    );
    let mut expected = vec!["turn marker".to_string(), "watcher".to_string()];
    expected.extend(started.iter().cloned());
    expected.extend(["gateway", "turn env", "socket"].map(String::from));
    assert_eq!(described(&turn), expected);
    drop(turn);
    drop(lock);
    // Its own limits as made: no update. Sealed: no settings copies, the
    // folder remembered untrusted.
    let cage = record.cage.as_mut().unwrap();
    cage.limits = crate::settings::Limits::of("4g", "2", 2048);
    cage.sealed = Some(crate::state::session::SealedRecord {
        token_file: "/t".into(),
        outbox: "/o".into(),
        rules: "sealed v2".into(),
        seccomp_file: "/s".into(),
        seccomp: "0".into(),
        dns: Vec::new(),
    });
    assert_eq!(
        start(&record).unwrap(),
        [
            format!("intent start {C}"),
            format!("git sync /nonexistent/shrooms-test-git/{C}"),
            "remember untrusted".to_string(),
            "check sources".to_string(),
            format!("start {C}"),
            format!("rules {C}"),
            "done".to_string(),
        ]
    );
    // A cage of an earlier shrooms-agent: stopped, then refused; the turn
    // begins nothing for it.
    let cage = record.cage.as_mut().unwrap();
    cage.sealed = None;
    cage.create_argv
        .retain(|a| !a.contains("catatonit") && a != "--entrypoint");
    let refused = start(&record).unwrap();
    assert_eq!(refused[0], format!("stop {C} (best effort)"));
    assert!(refused[1].starts_with("refuse: session web's cage was not started"));
    let lock = w.ctx.store.lock("web").unwrap();
    let facts = start_facts(&w.ctx, &record).unwrap();
    let turn = super::super::exec::turn_steps(
        decide_start(&facts, host).unwrap(),
        &record,
        lock.share().unwrap(),
        None,
    );
    assert_eq!(described(&turn), refused);
    drop(turn);
    drop(lock);
    // Its folder gone: refused, nothing to do.
    std::fs::remove_dir_all(&w.project).unwrap();
    let e = start(&w.ctx.store.load("web").unwrap()).unwrap_err();
    assert!(e.message().contains("is not there"), "{}", e.message());
    // Deciding asked podman nothing.
    assert_eq!(w.fake.calls(), Vec::<Vec<String>>::new());
}

/// The plans of `cage limits`, decided from facts alone.
#[test]
fn the_plans_of_limits_and_stop() {
    use super::super::limits::{LimitsFacts, LimitsRequest, decide};
    let w = caged("plan-limits");
    let record = w.ctx.store.load("web").unwrap();
    let host = w.ctx.host().unwrap();
    fn facts<'a>(
        w: &World,
        record: &'a crate::state::session::Record,
        running: Option<bool>,
        host: crate::error::Result<&'a Host>,
    ) -> LimitsFacts<'a> {
        LimitsFacts {
            record,
            host,
            running,
            enforceable: Ok(()),
            defaults: w.ctx.settings.limits.clone(),
            held: true,
            default_budgets: Default::default(),
            subscription: None,
            who: "me".into(),
            when: 1,
        }
    }
    let facts = |running, host| facts(&w, &record, running, host);
    let memory = LimitsRequest {
        name: "web".into(),
        asked: crate::settings::LimitsAsked::parse(Some("1g"), None, None).unwrap(),
        ..Default::default()
    };
    let plan = |f: &LimitsFacts, req: &LimitsRequest| {
        decide(f, req).map(|(steps, changed)| (described(&steps), changed))
    };
    let (steps, changed) = plan(&facts(Some(true), Ok(host)), &memory).unwrap();
    assert_eq!(
        steps,
        [
            format!("update limits {C}"),
            "set limits web".to_string(),
            "history".to_string()
        ]
    );
    assert_eq!(changed.applied, "now, and again at every start");
    let (steps, changed) = plan(&facts(Some(false), Ok(host)), &memory).unwrap();
    assert_eq!(steps, ["set limits web", "history"]);
    assert_eq!(changed.applied, "at its next start");
    // A new policy: loaded into the running cage, else at its next start.
    let net = LimitsRequest {
        name: "web".into(),
        net: Some(crate::net::netpolicy::NetPolicy::Internet),
        ..Default::default()
    };
    let (steps, changed) = plan(&facts(Some(true), Ok(host)), &net).unwrap();
    assert_eq!(
        steps,
        [
            "set limits web".to_string(),
            format!("new rules {C}"),
            "history".to_string()
        ]
    );
    assert_eq!(changed.net_applied.as_deref(), Some("now"));
    let (steps, changed) = plan(&facts(Some(false), Ok(host)), &net).unwrap();
    assert_eq!(steps, ["set limits web", "history"]);
    assert_eq!(changed.net_applied.as_deref(), Some("at its next start"));
    // A budget alone: no podman needed.
    let tokens = LimitsRequest {
        name: "web".into(),
        tokens: Some(Some(5000)),
        ..Default::default()
    };
    let none = || Err(crate::error::Error::no_podman());
    let (steps, changed) = plan(&facts(None, none()), &tokens).unwrap();
    assert_eq!(steps, ["set limits web", "history"]);
    assert_eq!((changed.applied.as_str(), changed.enforced), ("now", None));
    // Refusals: the memory without podman, nothing asked.
    let e = plan(&facts(None, none()), &memory).unwrap_err();
    assert_eq!(e.kind, Kind::NoPodman);
    let e = plan(&facts(Some(true), Ok(host)), &LimitsRequest::default()).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert!(w.fake.calls().is_empty());
    // A stop: of a cage that runs, one step; of one that does not, none.
    assert_eq!(
        described(&super::super::stop::steps(C, true)),
        [format!("stop {C}")]
    );
    assert!(super::super::stop::steps(C, false).is_empty());
}

/// A start killed right after `podman start` leaves a cage whose rules may
/// not be in: its intent names it, and the next command on the session
/// stops it before anything else (then starts it afresh, rules and all).
#[test]
fn a_start_killed_after_podman_start_is_stopped_by_the_next_command() {
    let w = startable_world("start-killed");
    w.fake.clear();
    w.fake.crash_after(1);
    assert!(until_crash(|| start(&w)).is_err());
    assert_eq!(w.fake.calls(), [vec!["start", "--", C]]);
    assert_eq!(
        w.ctx.store.intent("web").unwrap(),
        Some(crate::state::session::Intent::Start {
            container: C.to_string()
        })
    );
    w.fake.clear();
    start(&w).unwrap();
    let calls = w.fake.calls();
    assert_eq!(calls[0], ["stop", "--", C]);
    assert_eq!(calls[1..], calls::start(C)[..]);
    let notes = w.ctx.take_notes();
    assert!(
        notes[0].contains("an interrupted start of session web's cage was taken back"),
        "{notes:?}"
    );
    assert!(w.ctx.store.intents().is_empty());
}

/// The name `cage rename` gives session web in the cases below.
const RENAMED: &str = "site";

/// A container of this state folder whose session is gone: prune's.
const LEFTOVER_PREFIX: &str = "shrooms-gone-";
const LEFTOVER: &str = "shrooms-gone-0a1b2c";

/// Session web in its cage, and a leftover of this state folder with its
/// env file and folder, both listed by `podman ps`.
fn with_leftover(name: &str) -> World {
    let w = ordinary(name);
    let id = w.ctx.store.state_id().unwrap();
    let ps = serde_json::json!([
        ps_entry(C, "web", Some(&id)),
        ps_entry(LEFTOVER, "gone", Some(&id)),
    ])
    .to_string();
    let w = w.podman(|f| {
        f.on_prefix(&["ps"], Answer::out(ps))
            .on_prefix(&["rm"], Answer::ok())
            .on_prefix(&["inspect"], Answer::out(container_state(false)))
    });
    w.record("web", Some(C));
    std::fs::create_dir_all(w.ctx.store.private_home(LEFTOVER)).unwrap();
    std::fs::write(w.ctx.store.env_file(LEFTOVER), "").unwrap();
    w
}

fn prune(w: &World) -> crate::error::Result<()> {
    let planned = super::super::prune::plan(&w.ctx)?;
    super::super::prune::apply(&w.ctx, &planned).map(drop)
}

/// Session web in its cage, with what follows it on a rename: its
/// history, a received file and its cage's private home.
fn to_rename(name: &str) -> World {
    let w = caged(name);
    super::with_history_and_a_file(&w, "web");
    let home = w.ctx.store.private_home(C);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("todo.json"), "[]").unwrap();
    w
}

fn rename(w: &World) -> crate::error::Result<()> {
    super::super::rename::rename(&w.ctx, &super::rename_request("web", RENAMED)).map(drop)
}

/// After a rename, whole or taken back: the session is under one name,
/// and what it keeps (its received file, its history) is under that one.
fn renamed_whole(w: &World) -> crate::error::Result<()> {
    let names: Vec<&str> = ["web", RENAMED]
        .into_iter()
        .filter(|n| w.ctx.store.exists(n))
        .collect();
    let file = |n: &str| {
        w.ctx
            .store
            .session_uploads(n)
            .join("drop/from-alpha_a/a.txt")
    };
    match names.as_slice() {
        [n] if file(n).is_file() && w.ctx.store.history_path(n).is_file() => Ok(()),
        _ => Err(crate::error::Error::failed(format!(
            "the session is under {names:?}, its file under web: {}, under {RENAMED}: {}",
            file("web").is_file(),
            file(RENAMED).is_file()
        ))),
    }
}

/// The next commands after a rename: one on the old name (which repairs
/// what is left there), then the rename again (taken back, it is done
/// now), else a command on the new name (which repairs what is left).
fn rename_next(w: &World) -> crate::error::Result<()> {
    match stop(w) {
        Err(e) if e.kind == Kind::NotFound => {}
        other => other?,
    }
    renamed_whole(w)?;
    match rename(w) {
        Err(e) if e.kind == Kind::NotFound => {
            super::super::stop::stop(&w.ctx, RENAMED)?;
        }
        other => other?,
    }
    renamed_whole(w)
}

const PRUNE_CASES: &[Case] = &[
    Case {
        name: "prune",
        world: with_leftover,
        before: &[C, LEFTOVER],
        run: prune,
        next: None,
    },
    Case {
        name: "rename",
        world: to_rename,
        before: &[C],
        run: rename,
        next: Some(rename_next),
    },
];

#[test]
fn every_fault_of_prune() {
    exhaustive("prune");
}

#[test]
fn every_fault_of_rename() {
    exhaustive("rename");
}

/// The writes of a rename under the new name, each made to fail: its
/// intent, the record's temporary file, its history (moved there first).
fn blocked_rename_writes(w: &World) -> Vec<(&'static str, PathBuf)> {
    let sessions = w.ctx.settings.state_dir.join("sessions");
    let pid = std::process::id();
    vec![
        (
            "old name's intent",
            sessions.join(format!(".web@intent.tmp-{pid}")),
        ),
        (
            "new name's intent",
            sessions.join(format!(".{RENAMED}@intent.tmp-{pid}")),
        ),
        (
            "new record",
            sessions.join(format!(".{RENAMED}.json.tmp-{pid}")),
        ),
        ("history", sessions.join(format!("{RENAMED}.history.jsonl"))),
    ]
}

/// Prune writes nothing in the state folder but the lock file of the
/// session it looks at, and removes the leftover's files.
fn blocked_prune_writes(w: &World) -> Vec<(&'static str, PathBuf)> {
    let sessions = w.ctx.settings.state_dir.join("sessions");
    vec![("lock", sessions.join("gone.lock"))]
}

#[test]
fn every_failed_write_of_prune_and_rename() {
    let mut bad = Vec::new();
    for (case, blocked) in PRUNE_CASES.iter().zip([
        blocked_prune_writes as fn(&World) -> Vec<(&'static str, PathBuf)>,
        blocked_rename_writes,
    ]) {
        bad.extend(failed_writes(case, blocked));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_plans_of_prune() {
    let w = with_leftover("plan-prune");
    let cages = w.ctx.store.cages_dir();
    let planned = super::super::prune::planned(&w.ctx, None).unwrap();
    assert_eq!(
        planned,
        [
            format!("remove container {LEFTOVER}"),
            format!("remove {}", cages.join(LEFTOVER).display()),
            format!("remove {}", cages.join(format!("{LEFTOVER}.env")).display()),
        ]
    );
    // Only what was asked about is removed.
    let asked = super::super::prune::plan(&w.ctx).unwrap();
    let mut fewer = asked.clone();
    fewer.files.clear();
    assert_eq!(
        super::super::prune::planned(&w.ctx, Some(&fewer)).unwrap(),
        planned[..1]
    );
    // Its session being made (locked), it is no leftover yet.
    let _lock = w.ctx.store.lock("gone").unwrap();
    assert!(
        super::super::prune::planned(&w.ctx, None)
            .unwrap()
            .is_empty()
    );
    drop(_lock);
    // A damaged record: nothing is removed.
    std::fs::write(w.ctx.store.record_path("web"), "{").unwrap();
    let e = super::super::prune::planned(&w.ctx, None).unwrap_err();
    assert!(
        e.message().contains("while a record is damaged"),
        "{}",
        e.message()
    );
}

/// A rename's plan from the calls the fake answered: the new cage's name
/// is the one podman was asked to create.
fn created(w: &World) -> String {
    let calls = w.fake.calls();
    let create = calls.iter().find(|c| c[0] == "create").unwrap();
    create[create.iter().position(|a| a == "--name").unwrap() + 1].clone()
}

#[test]
fn the_plans_of_rename() {
    let w = to_rename("plan-rename");
    let store = &w.ctx.store;
    let req = super::rename_request("web", RENAMED);
    let planned = super::super::rename::planned(&w.ctx, &req).unwrap();
    // The plan is not run: a rename for real makes the same cage (its name
    // from the same state), and shows its name.
    super::super::rename::rename(&w.ctx, &req).unwrap();
    let new = created(&w);
    let moved = |a: PathBuf, b: PathBuf| format!("move {} -> {}", a.display(), b.display());
    let intent = format!("intent rename web -> {RENAMED} ({C} -> {new})");
    let expected = [
        intent.clone(),
        intent,
        moved(store.session_uploads("web"), store.session_uploads(RENAMED)),
        // The state folder's first cage: its identity kept (drawn anew
        // by each plan).
        "state id".to_string(),
        format!("cage files {new}"),
        format!("create container {new}"),
        moved(store.private_home(C), store.private_home(&new)),
        moved(store.history_path("web"), store.history_path(RENAMED)),
        format!("write record {RENAMED}"),
        "remove record web".to_string(),
        format!("remove container {C} (best effort)"),
        "history".to_string(),
        "done".to_string(),
    ];
    let planned: Vec<String> = planned
        .iter()
        .map(|s| match s.starts_with("state id ") {
            true => "state id".to_string(),
            false => s.replace(&new_of(s), &new),
        })
        .collect();
    assert_eq!(planned, expected);
    // Out of a cage: no podman, the folders and the records.
    let w = uncaged("plan-rename-uncaged");
    super::with_history_and_a_file(&w, "web");
    let store = &w.ctx.store;
    assert_eq!(
        super::super::rename::planned(&w.ctx, &req).unwrap(),
        [
            format!("intent rename web -> {RENAMED} (none -> none)"),
            format!("intent rename web -> {RENAMED} (none -> none)"),
            moved(store.session_uploads("web"), store.session_uploads(RENAMED)),
            moved(store.history_path("web"), store.history_path(RENAMED)),
            format!("write record {RENAMED}"),
            "remove record web".to_string(),
            "history".to_string(),
            "done".to_string(),
        ]
    );
    assert!(w.fake.calls().is_empty());
    // A name taken: refused.
    w.record(RENAMED, None);
    let e = super::super::rename::planned(&w.ctx, &req).unwrap_err();
    assert_eq!(e.kind, Kind::Exists);
}

/// The new cage's name in a step's words (its 6 hex digits are drawn
/// afresh each time a cage is planned).
fn new_of(step: &str) -> String {
    let at = step.find(&format!("shrooms-{RENAMED}-")).unwrap_or(0);
    let name: String = step[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if name.starts_with("shrooms-") {
        name
    } else {
        "\u{0}".into()
    }
}

/// A running idle cage is stopped first, after the intents.
#[test]
fn the_plan_of_a_rename_of_a_running_cage_stops_it_after_the_intents() {
    let w = to_rename("plan-rename-running").podman(|f| {
        f.on_prefix(&["inspect"], Answer::out(container_state(true)))
            .on_prefix(&["top"], Answer::out("COMMAND\nsleep infinity\n"))
            .on_prefix(&["image", "inspect"], Answer::out(our_image()))
    });
    let planned =
        super::super::rename::planned(&w.ctx, &super::rename_request("web", RENAMED)).unwrap();
    assert_eq!(planned[2], format!("stop {C}"));
    assert!(planned[0].starts_with("intent") && planned[1].starts_with("intent"));
}

/// Sealed session web with a file in its outbox, and session b of this
/// machine that takes files from it.
fn sending(name: &str) -> World {
    let w = caged(name);
    let outbox = super::super::sealed::outbox_dir(&w.ctx.settings.home, "web");
    std::fs::create_dir_all(&outbox).unwrap();
    std::fs::write(outbox.join("result.txt"), "done\n").unwrap();
    w.ctx
        .store
        .update("web", |r| {
            let cage = r.cage.as_mut().unwrap();
            cage.sealed = Some(crate::state::session::SealedRecord {
                token_file: "/token".into(),
                outbox,
                rules: String::new(),
                seccomp_file: "/seccomp.json".into(),
                seccomp: String::new(),
                dns: Vec::new(),
            });
            Ok(())
        })
        .unwrap();
    w.record("b", None);
    let me = format!("{}/web", w.ctx.settings.machine_name);
    super::super::files::allow(&w.ctx, "b", &me).unwrap();
    w
}

fn send_request(w: &World) -> super::super::outbox::SendRequest {
    super::super::outbox::SendRequest {
        name: "web".into(),
        to: format!("{}/b", w.ctx.settings.machine_name),
        only: None,
    }
}

/// The sends' folders left in the state folder's `tmp/`.
fn sends_left(w: &World) -> Vec<String> {
    std::fs::read_dir(w.ctx.store.tmp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_plan_of_a_send() {
    let w = sending("plan-send");
    let planned = super::super::outbox::planned_send(&w.ctx, &send_request(&w)).unwrap();
    let tmp = w.ctx.store.tmp_dir();
    let words: Vec<&str> = planned
        .iter()
        .map(|s| s.split_once(' ').unwrap().0)
        .collect();
    assert_eq!(words, ["make", "make", "pack", "deliver", "remove"]);
    assert_eq!(planned[0], format!("make {}", tmp.display()));
    let own = tmp.join(format!("send-{}-", std::process::id()));
    assert!(planned[1].starts_with(&format!("make {}", own.display())));
    assert!(planned[2].ends_with(".tar.gz"), "{}", planned[2]);
    assert_eq!(
        planned[3],
        format!("deliver to {}/b", w.ctx.settings.machine_name)
    );
    assert!(planned[4].ends_with("(best effort)"));
    // Refused: an unknown machine, a session that is not sealed.
    let mut req = send_request(&w);
    req.to = "nowhere/b".into();
    let e = super::super::outbox::planned_send(&w.ctx, &req).unwrap_err();
    assert!(
        e.message().contains("there is no machine"),
        "{}",
        e.message()
    );
    req.name = "b".into();
    assert!(super::super::outbox::planned_send(&w.ctx, &req).is_err());
}

/// A send delivered, refused by the receiver, or with its folder in the
/// state folder failing to be made: no folder of it is left; one left by a
/// send that died is removed by the next `cage ls`, which says so.
#[test]
fn every_fault_of_a_send() {
    let w = sending("fault-send");
    let req = send_request(&w);
    // Refused by the receiver: taken back.
    super::super::files::deny(&w.ctx, "b", &format!("{}/web", w.ctx.settings.machine_name))
        .unwrap();
    let e = super::super::outbox::send(&w.ctx, &req).unwrap_err();
    assert_eq!(e.kind, Kind::Forbidden, "{}", e.message());
    assert!(sends_left(&w).is_empty(), "{:?}", sends_left(&w));
    super::super::files::allow(&w.ctx, "b", &format!("{}/web", w.ctx.settings.machine_name))
        .unwrap();
    // The state folder's tmp/ cannot be made: nothing sent, nothing left.
    let tmp = w.ctx.store.tmp_dir();
    std::fs::remove_dir_all(&tmp).unwrap();
    std::fs::write(&tmp, "in the way").unwrap();
    assert!(super::super::outbox::send(&w.ctx, &req).is_err());
    assert!(
        super::super::files::received(&w.ctx, "b")
            .unwrap()
            .files
            .is_empty()
    );
    std::fs::remove_file(&tmp).unwrap();
    // Sent, and its folder gone.
    let sent = super::super::outbox::send(&w.ctx, &req).unwrap();
    assert!(
        sent.result.starts_with("sent web-outbox-"),
        "{}",
        sent.result
    );
    assert!(sends_left(&w).is_empty(), "{:?}", sends_left(&w));
    assert_eq!(
        super::super::files::received(&w.ctx, "b")
            .unwrap()
            .files
            .len(),
        1
    );
    // A send that died (its process is gone) left its folder and archive.
    let dead = tmp.join("send-999999999-0");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("web-outbox.tar.gz"), "half").unwrap();
    let said = crate::ops::plan::repair_all(&w.ctx);
    assert!(
        said.iter().any(
            |l| l.contains("a temporary file of a command that died was removed")
                && l.contains("send-999999999-0")
        ),
        "{said:?}"
    );
    assert!(sends_left(&w).is_empty(), "{:?}", sends_left(&w));
}

#[test]
fn the_plans_of_files_clear() {
    let w = sending("plan-clear");
    let file = super::with_history_and_a_file(&w, "b");
    let folder = file.parent().unwrap().to_path_buf();
    let planned = |f: &str| super::super::files::planned_clear(&w.ctx, "b", "alpha/a", f);
    assert_eq!(
        planned("a.txt").unwrap(),
        [format!("remove {}", file.display())]
    );
    // The note first: one without its file would be listed as a file.
    std::fs::write(folder.join("a.txt.note"), "hi").unwrap();
    assert_eq!(
        planned("a.txt").unwrap(),
        [
            format!("remove {}", folder.join("a.txt.note").display()),
            format!("remove {}", file.display()),
        ]
    );
    assert_eq!(planned("b.txt").unwrap_err().kind, Kind::NotFound);
    // Run: both gone, and it is listed no more.
    let left = super::super::files::clear(&w.ctx, "b", "alpha/a", "a.txt").unwrap();
    assert!(left.files.is_empty());
    assert!(!folder.join("a.txt.note").exists() && !file.exists());
}

/// A drop's plan: one step that stores it; a sender refused is
/// remembered, then refused; a drop refused otherwise writes nothing.
#[test]
fn the_plans_of_a_received_drop() {
    let w = sending("plan-drop");
    let here = w.ctx.settings.machine_name.clone();
    let drop = |from: &'static str| super::super::files::Drop {
        session: "b",
        from_machine: Ok(here.clone()),
        from_session: Some(from),
        caged: None,
        name: "a.txt",
        length: 2,
        note: None,
    };
    let got = super::super::files::receive(&w.ctx, &drop("web"), &mut &b"hi"[..]).unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), b"hi");
    let before = std::fs::read(w.ctx.store.record_path("b")).unwrap();
    // Refused and remembered: the record changes, nothing is stored.
    let e = super::super::files::receive(&w.ctx, &drop("other"), &mut &b"hi"[..]).unwrap_err();
    assert_eq!(e.kind, Kind::Forbidden);
    let record = w.ctx.store.load("b").unwrap();
    assert_ne!(std::fs::read(w.ctx.store.record_path("b")).unwrap(), before);
    assert!(!record.files.allows(&here, "other"));
    // Refused for its note: nothing written at all.
    let before = std::fs::read(w.ctx.store.record_path("b")).unwrap();
    let long = "x".repeat(super::super::files::MAX_NOTE + 1);
    let mut d = drop("web");
    d.note = Some(&long);
    let e = super::super::files::receive(&w.ctx, &d, &mut &b"hi"[..]).unwrap_err();
    assert_eq!(e.kind, Kind::BadInput);
    assert_eq!(std::fs::read(w.ctx.store.record_path("b")).unwrap(), before);
    assert_eq!(
        super::super::files::received(&w.ctx, "b")
            .unwrap()
            .files
            .len(),
        1
    );
}

/// An operation that makes no podman call (`outbox send`, a received drop,
/// `files clear`): its world, the operation, and the next command after a
/// fault.
struct Quiet {
    name: &'static str,
    world: fn(&str) -> World,
    run: fn(&World) -> crate::error::Result<()>,
    next: fn(&World) -> crate::error::Result<()>,
}

/// Run `op` with each of its writes in the state folder failing, and again
/// with the tool dying right after it; after each, the state holds
/// (`quiet_state`), and again after the next command. Returns the number
/// of writes and what failed.
fn exhaust_quiet(op: &Quiet) -> (usize, Vec<String>) {
    use crate::host::process::crash::{WriteFault, writes};
    let w = (op.world)(&format!("quiet-{}-count", op.name));
    let before = writes();
    (op.run)(&w).unwrap_or_else(|e| panic!("{}: {}", op.name, e.message()));
    let n = writes() - before;
    let mut bad: Vec<String> = quiet_state(&w, false).err().into_iter().collect();
    for k in 1..=n {
        for fault in [WriteFault::Fail, WriteFault::Crash] {
            let w = (op.world)(&format!("quiet-{}-{fault:?}-{k}", op.name));
            let said = |what: &str| format!("{} with write {k} {fault:?}: {what}", op.name);
            bad.extend(write_faulted(k, fault, || (op.run)(&w)).map(said));
            if let Err(why) = quiet_state(&w, true) {
                bad.push(said(&format!("after it: {why}")));
            }
            if let Err(e) = (op.next)(&w) {
                bad.push(said(&format!("the next command failed: {}", e.message())));
            }
            let mut after = quiet_state(&w, false);
            // A drop's sweep leaves a partial file whose lock it finds held;
            // a child another test forks holds a copy of every descriptor
            // (the dead drop's too) until its exec, so the sweep may find it
            // held for that moment. The command after removes it then: a
            // partial that no sweep removes still fails.
            if after.as_ref().is_err_and(|why| {
                why.starts_with("a file on its way left") && why.contains(".partial ")
            }) {
                std::thread::sleep(std::time::Duration::from_millis(300));
                if let Err(e) = (op.next)(&w) {
                    bad.push(said(&format!("the command after failed: {}", e.message())));
                }
                after = quiet_state(&w, false);
            }
            if let Err(why) = after {
                bad.push(said(&format!("after the next command: {why}")));
            }
        }
    }
    (n, bad)
}

/// What must hold in the state folder of a world of `sending`: no
/// temporary file of `write_atomic`; no send's folder left but one the
/// fault left, which the repair removes by its rule for a process that
/// died (simulated: the folder renamed to a pid that is no process's);
/// no lock held; nothing hidden listed as received, every file listed
/// whole, no note without its file; right after the fault (`faulted`),
/// files on their way (`.incoming-*.partial`, and a drop's hidden note
/// `.incoming-*.note`) that nobody holds, and a note without its file that
/// is a link to such a hidden note, not listed (the next drop into their
/// folder removes them), and none after the next command; every drop from
/// web with its note; each sender's folder as large as what is listed
/// from it (the sender's bound counts exactly what arrived).
fn quiet_state(w: &World, faulted: bool) -> Result<(), String> {
    let store = &w.ctx.store;
    let sessions = store.sessions_dir();
    for e in std::fs::read_dir(&sessions).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains(".tmp-") {
            return Err(format!("a temporary file left: {name}"));
        }
        if name.ends_with(".lock") && held_still(&e.path()) {
            return Err(format!("the lock {name} is held"));
        }
    }
    let tmp = store.tmp_dir();
    let own = format!("{}{}-", crate::state::session::SEND_TMP, std::process::id());
    for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&own).filter(|_| faulted) else {
            return Err(format!("a send's folder left in {}: {name}", tmp.display()));
        };
        let dead = format!("{}999999999-{rest}", crate::state::session::SEND_TMP);
        std::fs::rename(e.path(), tmp.join(dead)).unwrap();
    }
    store.remove_dead_temporaries();
    if let Some(name) = sends_left(w).first() {
        return Err(format!("the repair left the send's folder {name}"));
    }
    let drops = store.session_uploads("b").join("drop");
    if held_still(&drops.join(".lock")) {
        return Err("the drops' lock is held".into());
    }
    let listed = super::super::files::received(&w.ctx, "b").unwrap().files;
    for folder in std::fs::read_dir(&drops).into_iter().flatten().flatten() {
        if !folder.file_type().unwrap().is_dir() {
            continue;
        }
        let from = folder.file_name().to_string_lossy().replacen('_', "/", 1);
        let from = from.strip_prefix("from-").unwrap().to_string();
        let mut size = 0;
        let hidden: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(".incoming-") && name.ends_with(".note")
            })
            .map(|e| std::os::unix::fs::MetadataExt::ino(&e.metadata().unwrap()))
            .collect();
        for e in std::fs::read_dir(folder.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            size += e.metadata().unwrap().len();
            if name.starts_with(".incoming-") {
                let held = held_still(&e.path());
                if !faulted || held {
                    return Err(format!("a file on its way left: {name} (held: {held})"));
                }
                size -= e.metadata().unwrap().len();
                continue;
            }
            if let Some(file) = name.strip_suffix(".note")
                && !folder.path().join(file).is_file()
            {
                let ino = std::os::unix::fs::MetadataExt::ino(&e.metadata().unwrap());
                if !(faulted && hidden.contains(&ino)) {
                    return Err(format!("the note {name} without its file"));
                }
            }
        }
        let of_it: u64 = listed
            .iter()
            .filter(|f| f.from == from)
            .map(|f| f.size)
            .sum();
        let notes: u64 = std::fs::read_dir(folder.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".note") && !name.starts_with(".incoming-")
            })
            .map(|e| e.metadata().unwrap().len())
            .sum();
        if size != of_it + notes {
            return Err(format!(
                "{from}'s folder holds {size} bytes, {of_it} listed and {notes} of notes"
            ));
        }
    }
    for f in &listed {
        let path = drops
            .join(format!("from-{}", f.from.replacen('/', "_", 1)))
            .join(&f.name);
        let bytes = std::fs::read(&path).unwrap();
        let whole = if f.name.ends_with(".tar.gz") {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut out)
                .is_ok()
        } else {
            bytes == b"hello"
        };
        if f.name.starts_with('.') || f.name.ends_with(".note") || !whole {
            return Err(format!(
                "{} from {} listed, and it is no whole file",
                f.name, f.from
            ));
        }
        // Every drop of a file from web in these worlds has a note. (A
        // `files clear` removes the note first, by design: its file stays
        // listed, and can be cleared again.)
        let noted = path.with_file_name(format!("{}.note", f.name)).is_file();
        if f.from.ends_with("/web") && f.name.ends_with(".txt") && !noted {
            return Err(format!(
                "{} from {} listed without its note",
                f.name, f.from
            ));
        }
    }
    Ok(())
}

/// The lock at `path` held, still, after some 2 s (`held_still_by`).
fn held_still(path: &std::path::Path) -> bool {
    held_still_by(|| crate::state::lock::held(path).unwrap())
}

/// `held` true each time it is asked over some 2 s: another test's
/// process, forked from this one, holds copies of its files until it runs
/// its program, an instant that a busy machine can stretch. A lock that is
/// free is seen at once; only one still held is waited on.
fn held_still_by(held: impl Fn() -> bool) -> bool {
    (0..400).all(|_| {
        let held = held();
        if held {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        held
    })
}

fn quiet_send(w: &World) -> crate::error::Result<()> {
    super::super::outbox::send(&w.ctx, &send_request(w)).map(|_| ())
}

/// A drop of `hello` with a note into session b, from `from` of this
/// machine.
fn quiet_drop(w: &World, from: &str) -> crate::error::Result<super::super::files::Received> {
    let drop = super::super::files::Drop {
        session: "b",
        from_machine: Ok(w.ctx.settings.machine_name.clone()),
        from_session: Some(from),
        caged: None,
        name: "a.txt",
        length: 5,
        note: Some("read me"),
    };
    super::super::files::receive(&w.ctx, &drop, &mut &b"hello"[..])
}

fn quiet_received(w: &World) -> crate::error::Result<()> {
    let got = quiet_drop(w, "web")?;
    assert!(got.note.is_some());
    Ok(())
}

/// A drop from a sender b does not allow: refused, and remembered.
fn quiet_refused(w: &World) -> crate::error::Result<()> {
    match quiet_drop(w, "other") {
        Err(e) if e.kind == Kind::Forbidden => {}
        Err(e) => return Err(e),
        Ok(_) => return Err(crate::error::Error::failed("taken")),
    }
    let refused = w.ctx.store.load("b")?.files.refused;
    assert!(refused.iter().any(|r| r.from.ends_with("/other")));
    Ok(())
}

/// Session b with `alpha/a`'s a.txt and its note.
fn clearing(name: &str) -> World {
    let w = sending(name);
    let file = super::with_history_and_a_file(&w, "b");
    std::fs::write(file.with_file_name("a.txt.note"), "hi").unwrap();
    w
}

fn quiet_clear(w: &World) -> crate::error::Result<()> {
    super::super::files::clear(&w.ctx, "b", "alpha/a", "a.txt").map(|_| ())
}

/// After a `files clear`: the file still listed is cleared; then it is
/// gone, its note with it.
fn quiet_clear_next(w: &World) -> crate::error::Result<()> {
    let listed = super::super::files::received(&w.ctx, "b")?.files;
    if listed.iter().any(|f| f.name == "a.txt") {
        quiet_clear(w)?;
    }
    let folder = w.ctx.store.session_uploads("b").join("drop/from-alpha_a");
    assert!(!folder.join("a.txt").exists() && !folder.join("a.txt.note").exists());
    Ok(())
}

const QUIET: &[Quiet] = &[
    Quiet {
        name: "send",
        world: sending,
        run: quiet_send,
        next: quiet_send,
    },
    Quiet {
        name: "drop",
        world: sending,
        run: quiet_received,
        next: quiet_received,
    },
    Quiet {
        name: "refused-drop",
        world: sending,
        run: quiet_refused,
        next: quiet_refused,
    },
    Quiet {
        name: "clear",
        world: clearing,
        run: quiet_clear,
        next: quiet_clear_next,
    },
];

/// Each write in the state folder of `outbox send`, a received drop (and
/// a refused one, remembered) and `files clear`, failed and crashed right
/// after, by its number: the state holds, and the next command works.
#[test]
fn every_write_of_a_send_a_drop_and_a_clear_failed_and_crashed_after() {
    let mut bad = Vec::new();
    let mut counted = Vec::new();
    for op in QUIET {
        let (n, b) = exhaust_quiet(op);
        counted.push((op.name, n));
        bad.extend(b);
    }
    // send: tmp/, its own folder, the archive, the file on its way, its
    // name, the partial name removed, the folder removed; a drop: the file
    // on its way, its note under its hidden name, the note's name, the
    // file's name, the hidden names removed (the note's, the file's);
    // refused: the record; clear: the note, the file.
    assert_eq!(
        counted,
        [("send", 7), ("drop", 6), ("refused-drop", 1), ("clear", 2)]
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A start writes its settings copies again before it looks at the cage's
/// mount sources: a copies' folder removed by hand is made again, not
/// refused as gone.
#[test]
fn a_start_makes_its_copies_again_before_it_looks_at_its_sources() {
    let w = startable_world("sources-after-copies");
    let mut record = w.ctx.store.load("web").unwrap();
    let cage = record.cage.as_mut().unwrap();
    let copies = w.ctx.store.settings_copy_dir(&cage.container);
    crate::state::session::make_private_dir(&copies).unwrap();
    cage.mount_sources = vec![crate::state::session::MountSource::now(&copies).unwrap()];
    w.ctx.store.save(&record).unwrap();
    std::fs::remove_dir_all(&copies).unwrap();
    start(&w).unwrap();
    assert!(copies.is_dir());
}

/// `cage limits` beside a turn holds no lock: a session moved meanwhile
/// (another cage in its record) is refused as busy, its record unchanged;
/// a step after it that fails puts the budget back.
#[test]
fn limits_set_beside_a_turn_touch_only_their_fields() {
    use crate::ops::plan::{Step, execute};
    let w = startable_world("limits-fields");
    let set = |container: &str| Step::SetLimits {
        session: "web".into(),
        container: container.into(),
        limits: None,
        net: None,
        budgets: crate::ops::acts::limits::Budgets {
            tokens: Some(5),
            usd: None,
        },
    };
    let e = execute(&w.ctx, None, vec![set("shrooms-web-moved")])
        .err()
        .unwrap();
    assert_eq!(e.kind, Kind::Busy, "{}", e.message());
    assert_eq!(w.ctx.store.load("web").unwrap().tokens.budget, None);
    let refused = crate::error::Error::failed("refused");
    let e = execute(&w.ctx, None, vec![set(C), Step::Refuse(refused)])
        .err()
        .unwrap();
    assert_eq!(e.message(), "refused");
    assert_eq!(w.ctx.store.load("web").unwrap().tokens.budget, None);
}
