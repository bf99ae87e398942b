//! Network policies (docs/network.md, "Network policy"), attacked from inside real
//! cages, rootful and rootless: one cage is given `open`, then `internet`,
//! then an allow-list with `cage limits --net` while it runs, and each time
//! the sealed cage's probe set runs in it (raw connections to refused
//! addresses, other DNS servers over UDP and TCP, HTTPS to an address not
//! allowed, a port not named, IPv6, UDP, ICMP, no proxy variables, a network
//! namespace of its own). Under `open` everything answers, so each refusal
//! is the policy's doing. A policy change reaches a program already running
//! in the cage within a second.
//!
//! Traffic stays on this machine: every address probed is one of its own
//! (the stand-ins scripts/setup-host puts on `lo`), checked first.

use std::fs;
use std::time::{Duration, Instant};

use crate::attacks::{Tools, all_on_this_machine, listen_everywhere, refused_at_once, verdict};
use crate::common::*;

/// A name the allow-list names, which only the tool's hosts file knows:
/// it resolves to the internet stand-in.
const ALLOWED_NAME: &str = "allowed.shrooms.test";

/// A stand-in of carrier-grade NAT (100.64.0.0/10) and of link-local, on `lo`.
const CGNAT_ADDR: &str = "100.127.77.1";
const LINK_LOCAL_ADDR: &str = "169.254.77.1";
/// A private IPv6 stand-in (fc00::/7), on `lo`.
const V6_ADDR: &str = "fd77:77::1";

/// A listener on the internet stand-in's DNS port for the whole test run,
/// shared by every test that needs one (one socket can hold the port).
pub fn dns_listener() {
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let l = std::net::TcpListener::bind((HOST_ADDR, 53))
            .unwrap_or_else(|e| panic!("cannot listen on {HOST_ADDR}:53 for the tests: {e}"));
        std::thread::spawn(move || for _s in l.incoming() {});
    });
}

/// What the cage tries, one line each: `K <label> <probe's verdict>`.
fn attacks(t: &std::path::Path, port: u16, other: u16, rootless: bool) -> String {
    let p = t.join("probe");
    let p = p.display();
    let mut s = String::new();
    let mut line = |label: &str, cmd: String| {
        s.push_str(&format!("echo \"K {label} $({cmd} 2>&1 | tail -n 1)\"\n"));
    };
    line("internet", format!("{p} tcp {HOST_ADDR} {port}"));
    line("unnamed-port", format!("{p} tcp {HOST_ADDR} {other}"));
    line("lan", format!("{p} tcp {LAN_ADDR} {port}"));
    line("cgnat", format!("{p} tcp {CGNAT_ADDR} {port}"));
    line("link-local", format!("{p} tcp {LINK_LOCAL_ADDR} {port}"));
    line("machine", format!("{p} tcp {LINK_ADDR} {port}"));
    // A network of a routing table of its own (a VPN's).
    line("machine-table", format!("{p} tcp {TABLE_ADDR} {port}"));
    line("mapped", format!("{p} tcp ::ffff:{LAN_ADDR} {port}"));
    line("dns-tcp", format!("{p} tcp {HOST_ADDR} 53"));
    line("dns-udp", format!("{p} udp {HOST_ADDR} 53"));
    line("udp", format!("{p} udp {HOST_ADDR} {port}"));
    line("udp-lan", format!("{p} udp {LAN_ADDR} {port}"));
    // No proxy variable is what lets anything through: without any.
    line("no-env", format!("env -i {p} tcp {LAN_ADDR} {port}"));
    // A network namespace of its own (and a user namespace to be allowed
    // one): nothing in it reaches anything.
    line(
        "own-netns",
        format!(
            "unshare -U -n {p} tcp {HOST_ADDR} {port} || unshare -n {p} tcp {HOST_ADDR} {port} \
             || echo unshare-refused"
        ),
    );
    line(
        "icmp",
        format!("ping -c 1 -W 2 {LAN_ADDR} >/dev/null 2>&1 && echo PING-OK || echo PING-FAILED"),
    );
    if rootless {
        // slirp4netns and pasta give the cage an IPv6 route.
        line("ipv6", format!("{p} tcp {V6_ADDR} {port}"));
        // The LAN written as an IPv4-compatible IPv6 address (::/96).
        line("compat", format!("{p} tcp {COMPAT_ADDR} {port}"));
    }
    line(
        "name",
        format!(
            "nc -w 3 {ALLOWED_NAME} {port} </dev/null >/dev/null 2>&1 && echo CONNECTED || echo NOT-CONNECTED"
        ),
    );
    s
}

/// The attacks that go out unless a policy refuses them (IPv6 besides,
/// rootless).
const ATTACKS: &[&str] = &[
    "internet",
    "unnamed-port",
    "lan",
    "cgnat",
    "link-local",
    "machine",
    "machine-table",
    "mapped",
    "dns-tcp",
    "dns-udp",
    "udp",
    "udp-lan",
    "no-env",
];

/// Under `policy`, the attacks named in `pass` go out and every other one
/// is refused at once by a rule.
fn expect(run: &Run, rootless: bool, policy: &str, pass: &[&str]) {
    let out = run.stdout();
    let ipv6: &[&str] = if rootless { &["ipv6", "compat"] } else { &[] };
    for label in ATTACKS.iter().chain(ipv6).copied() {
        let v = seen(&out, label);
        if pass.contains(&label) {
            assert!(
                passed(v),
                "under {policy}, {label} does not pass (under open, a refusal would prove \
                 nothing):\n{}",
                run.explain()
            );
        } else {
            assert!(
                refused(v),
                "under {policy}, {label} is not refused at once by a rule:\n{}",
                run.explain()
            );
        }
    }
}

/// The verdict of one labelled attack.
fn seen<'a>(out: &'a str, label: &str) -> &'a str {
    verdict(out, &format!("K {label} ")).trim()
}

/// A TCP connection or a datagram that went out.
fn passed(v: &str) -> bool {
    v.ends_with(" CONNECTED") || v.ends_with(" SENT") || v == "PING-OK" || v == "CONNECTED"
}

/// Refused by a rule: a TCP connection at once, a datagram by EPERM.
fn refused(v: &str) -> bool {
    let mut w = v.split_whitespace();
    match (w.next(), w.next()) {
        (Some("tcp"), Some(_)) => refused_at_once(&w.collect::<Vec<_>>().join(" ")),
        (Some("udp"), Some(_)) => v.ends_with(" EPERM"),
        _ => false,
    }
}

fn net_policies_hold(w: World) {
    let rootless = w.user.is_some();
    let port = listen_everywhere();
    let other = listen_everywhere();
    dns_listener();
    let mut addrs = vec![HOST_ADDR, LAN_ADDR, CGNAT_ADDR, LINK_LOCAL_ADDR, LINK_ADDR];
    if rootless {
        addrs.extend([V6_ADDR, COMPAT_ADDR]);
    }
    all_on_this_machine(&addrs);
    // The tool's own hosts file names the allow-list's name.
    let hosts = w.file("hosts", &format!("{HOST_ADDR} {ALLOWED_NAME}\n"));
    w.set_env("SHROOMS_AGENT_HOSTS_FILE", &hosts.to_string_lossy());

    // A name nobody resolves is refused at create, and nothing is made.
    let project = w.dir("projects/net");
    let name = w.session("net");
    let r = w.run(&[
        "cage",
        "create",
        &name,
        "--dir",
        &project.to_string_lossy(),
        "--net",
        "allow:nowhere.shrooms.test",
    ]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    assert!(
        r.stderr().contains("cannot resolve nowhere.shrooms.test"),
        "{}",
        r.explain()
    );
    assert!(w.containers_of(&name).is_empty());
    assert!(!w.record_path(&name).exists());

    let tools = Tools::new(&w);
    let t = Tools::into(&tools, &w, &project);
    w.create(&name, &project, &["--net", "open"]);
    let script = attacks(&t, port, other, rootless);

    // open: everything answers (but what no namespace of its own reaches),
    // so each refusal below is the policy's.
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    expect(
        &run,
        rootless,
        "open",
        &[ATTACKS, &["ipv6", "compat"]].concat(),
    );
    // ICMP: a cage has no CAP_NET_RAW and podman leaves ping sockets
    // closed (net.ipv4.ping_group_range), so it sends none at all here;
    // where it can, the policies must refuse it too.
    let can_ping = seen(&out, "icmp") == "PING-OK";
    assert!(!passed(seen(&out, "own-netns")), "{}", run.explain());

    // internet. A cage runs while a turn or exec does: stopped now, it
    // gets the rules at its next start (a running one: below).
    let r = w
        .run(&["cage", "limits", &name, "--net", "internet", "--json"])
        .ok();
    assert_eq!(
        r.json()["net_applied"],
        "at its next start",
        "{}",
        r.explain()
    );
    assert_eq!(r.json()["net_before"], "open");
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    expect(
        &run,
        rootless,
        "internet",
        &["internet", "unnamed-port", "udp"],
    );
    assert!(!passed(seen(&out, "own-netns")), "{}", run.explain());
    if can_ping {
        assert_eq!(seen(&out, "icmp"), "PING-FAILED", "{}", run.explain());
    }

    // An allow-list of one name and port.
    let allow = format!("allow:{ALLOWED_NAME}:{port}");
    let r = w.run(&["cage", "limits", &name, "--net", &allow]).ok();
    assert!(
        r.stdout().contains(&format!(
            "network policy internet -> {allow} (applied at its next start)"
        )),
        "{}",
        r.explain()
    );
    let run = w.sh(&name, &format!("cat /etc/hosts; {script}")).ok();
    let out = run.stdout();
    assert!(
        out.contains(&format!("{HOST_ADDR}\t{ALLOWED_NAME}")),
        "the name is not pinned in the cage's hosts file:\n{}",
        run.explain()
    );
    assert_eq!(seen(&out, "name"), "CONNECTED", "{}", run.explain());
    expect(&run, rootless, &allow, &["internet"]);
    assert!(!passed(seen(&out, "own-netns")), "{}", run.explain());
    if can_ping {
        assert_eq!(seen(&out, "icmp"), "PING-FAILED", "{}", run.explain());
    }

    // Kept in the record, shown, and loaded again at every start.
    let show = w.run(&["cage", "show", &name, "--json"]).ok().json();
    assert_eq!(show["cage"]["net"], allow.as_str());
    let shown = w.run(&["cage", "show", &name]).ok().stdout();
    assert!(shown.contains(&format!("policy {allow}")), "{shown}");
    let run = w.sh(&name, &script).ok();
    let out = run.stdout();
    assert_eq!(seen(&out, "name"), "CONNECTED", "{}", run.explain());
    assert!(refused(seen(&out, "lan")), "{}", run.explain());

    // Back to open, and a change seen by a program already running in the
    // cage (a turn's): it connects until the policy is internet, then is
    // refused within a second.
    w.run(&["cage", "limits", &name, "--net", "open"]).ok();
    let p = t.join("probe");
    let (log, stop) = (project.join("loop.log"), project.join("loop.stop"));
    // It runs until told to stop (at most some 2 minutes): a loop of a
    // fixed length could end before the change on a slow machine.
    let loop_script = format!(
        "i=0; while [ $i -lt 1200 ] && [ ! -e {} ]; do echo \"T $(cut -d' ' -f1 /proc/uptime) \
         $({} tcp {LAN_ADDR} {port})\" >>{}; sleep 0.1; i=$((i+1)); done",
        stop.display(),
        p.display(),
        log.display()
    );
    let mut child = w.spawn_env(
        &["cage", "exec", &name, "--", "sh", "-c", &loop_script],
        &[],
    );
    wait_until(
        "the loop's first connection",
        Duration::from_secs(20),
        || fs::read_to_string(&log).is_ok_and(|t| t.contains(" CONNECTED")),
    );
    // The loop stamps each line with /proc/uptime, in hundredths of a
    // second, before its probe: a line seen already was stamped at or
    // before this reading, in the same hundredths (the time the change
    // took, taken from the reading after it, can put the start up to a
    // hundredth too early).
    let before = uptime();
    let started = Instant::now();
    let r = w
        .run(&["cage", "limits", &name, "--net", "internet", "--json"])
        .ok();
    assert_eq!(r.json()["net_applied"], "now", "{}", r.explain());
    let done = uptime();
    let took = started.elapsed();
    let lines_of = |text: &str| -> Vec<(f64, String)> {
        text.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("T ")?;
                let (t, v) = rest.split_once(' ')?;
                Some((t.parse().ok()?, v.to_string()))
            })
            .collect()
    };
    // Until it has gone on some two seconds past the change (or ended,
    // which the checks below then tell).
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until
        && child.try_wait().unwrap().is_none()
        && lines_of(&fs::read_to_string(&log).unwrap_or_default())
            .iter()
            .filter(|(t, _)| *t > done + 2.0)
            .count()
            < 3
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    fs::write(&stop, "").unwrap();
    let run = finish("the loop", child);
    let text = fs::read_to_string(&log).unwrap();
    let lines = lines_of(&text);
    assert!(
        lines.iter().any(|(t, v)| *t <= before && passed(v)),
        "the loop never connected before the change:\n{text}\n{}",
        run.explain()
    );
    for (t, v) in &lines {
        if *t > done + 1.0 {
            assert!(
                refused(v),
                "a connection a second after the change ({took:?} to make it) was not \
                 refused:\n{text}\n{}",
                run.explain()
            );
        }
    }
    assert!(
        lines.iter().any(|(t, _)| *t > done + 1.0),
        "the loop ended before a second after the change:\n{text}\n{}",
        run.explain()
    );
}

#[test]
fn net_policies_hold_from_inside() {
    net_policies_hold(World::new());
}

#[test]
fn net_policies_hold_from_inside_rootless() {
    net_policies_hold(World::rootless());
}

/// The default policy of a new cage is `internet` (the LAN refused), the
/// config's `net` changes it, a sealed cage takes no other, and a bad
/// policy is refused with what to write, over the command line and HTTP.
#[test]
fn the_default_policy_and_its_refusals() {
    let w = World::new();
    let l = Listener::any();
    all_on_this_machine(&[HOST_ADDR, LAN_ADDR]);
    let name = w.session("netdef");
    let d = w.dir("netdef");
    w.create(&name, &d, &[]);
    assert_eq!(w.record(&name)["cage"]["net"], "internet");
    let out = w
        .sh(
            &name,
            &format!(
                "{}; {}",
                nc_probe(HOST_ADDR, l.port),
                nc_probe(LAN_ADDR, l.port)
            ),
        )
        .ok()
        .stdout();
    assert!(out.contains(&format!("CONNECTED-{}", l.port)), "{out}");
    assert!(out.contains(&format!("REFUSED-{}", l.port)), "{out}");

    // A move: to the policy given, else the one it had.
    w.run(&["cage", "move", &name, "--net", "open"]).ok();
    assert_eq!(w.record(&name)["cage"]["net"], "open");
    w.run(&["cage", "move", &name]).ok();
    assert_eq!(w.record(&name)["cage"]["net"], "open");
    let out = w.sh(&name, &nc_probe(LAN_ADDR, l.port)).ok().stdout();
    assert!(out.contains(&format!("CONNECTED-{}", l.port)), "{out}");
    w.run(&["cage", "move", &name, "--net", "internet"]).ok();

    let r = w.run(&["cage", "limits", &name, "--net", "closed"]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    assert!(r.stderr().contains("allow:"), "{}", r.explain());
    assert_eq!(w.record(&name)["cage"]["net"], "internet");

    let sealed = w.session("netsealed");
    let sd = w.dir("netsealed");
    let r = w.run(&[
        "cage",
        "create",
        &sealed,
        "--dir",
        &sd.to_string_lossy(),
        "--sealed",
        "--net",
        "open",
    ]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    assert!(
        r.stderr().contains("sealed cage has its own rules"),
        "{}",
        r.explain()
    );
    assert!(!w.record_path(&sealed).exists());

    w.write_config("net = \"open\"\n");
    let open = w.session("netopen");
    let od = w.dir("netopen");
    let r = w
        .run(&[
            "cage",
            "create",
            &open,
            "--dir",
            &od.to_string_lossy(),
            "--dry-run",
        ])
        .ok();
    assert!(r.code() == 0, "{}", r.explain());
    w.create(&open, &od, &[]);
    assert_eq!(w.record(&open)["cage"]["net"], "open");
}

/// Over HTTP: the create body and the limits route set the policy, a bad
/// one is refused naming the field, and the status page shows it.
#[test]
fn policies_over_http_and_on_the_status_page() {
    let w = World::new();
    let s = w.serve_listening("localhost", free_port(), &[], &[]);
    let u = &s.url;
    let name = w.session("nethttp");
    let d = w.dir("nethttp");
    let body = serde_json::json!({
        "name": name,
        "dir": d.to_string_lossy(),
        "cage": {"net": format!("allow:{HOST_ADDR}:8080")},
    });
    let made = post(&format!("{u}/v1/sessions"), &body.to_string())
        .is(201)
        .json();
    assert_eq!(
        made["cage"]["net"],
        format!("allow:{HOST_ADDR}:8080"),
        "{made:#}"
    );
    let page = get(&format!("{u}/")).is(200).body;
    assert!(page.contains(&format!("allow:{HOST_ADDR}:8080")), "{page}");
    let l = post(
        &format!("{u}/v1/sessions/{name}/cage/limits"),
        r#"{"net": "internet"}"#,
    )
    .is(200)
    .json();
    assert_eq!(l["net_before"], format!("allow:{HOST_ADDR}:8080"), "{l:#}");
    assert_eq!(l["net_after"], "internet", "{l:#}");
    assert_eq!(w.record(&name)["cage"]["net"], "internet");
    let r = post(
        &format!("{u}/v1/sessions/{name}/cage/limits"),
        r#"{"net": "closed"}"#,
    )
    .is(400);
    assert!(r.error().starts_with("field \"net\": "), "{r:#?}");
    assert_eq!(r.json()["field"], "net", "{r:#?}");
    assert_eq!(w.record(&name)["cage"]["net"], "internet");
    let history = w.run(&["cage", "history", &name, "--json"]).ok().json();
    let last = history["entries"].as_array().unwrap().last().unwrap()["what"].clone();
    assert_eq!(
        last,
        format!("limits: net allow:{HOST_ADDR}:8080 -> internet"),
        "{history:#}"
    );
}

/// A name of an allow-list never opens a local address, whatever its
/// answer says (DNS rebinding: whoever runs a name's DNS can make it
/// answer with the LAN). The names are the test's own, answered by the
/// tool's hosts file (`SHROOMS_AGENT_HOSTS_FILE`, read before the
/// machine's resolver): nothing is looked up anywhere. A create with names
/// answering private, link-local, CGNAT, the machine's own and IPv6 forms
/// of the LAN is refused, naming each; a name that answered the internet
/// stand-in at create and the LAN at a later start is left out of the
/// rules there, and the start says which; the LAN written as an address
/// stays open.
fn names_never_open_local_addresses(w: World) {
    let port = listen_everywhere();
    all_on_this_machine(&[HOST_ADDR, LAN_ADDR, CGNAT_ADDR, LINK_LOCAL_ADDR, LINK_ADDR]);
    let hosts_text = |rebind: &str| {
        format!(
            "{rebind} rebind.shrooms.test\n\
             {LAN_ADDR} lan.shrooms.test\n\
             {LINK_LOCAL_ADDR} link.shrooms.test\n\
             {CGNAT_ADDR} cgnat.shrooms.test\n\
             {LINK_ADDR} own.shrooms.test\n\
             ::ffff:{LAN_ADDR} mapped.shrooms.test\n\
             {COMPAT_ADDR} compat.shrooms.test\n"
        )
    };
    let hosts = w.file("hosts", &hosts_text(HOST_ADDR));
    w.set_env("SHROOMS_AGENT_HOSTS_FILE", &hosts.to_string_lossy());

    // At create: refused (exit 2), each name and answer said, nothing made.
    let project = w.dir("projects/rebind");
    let name = w.session("rebind");
    let locals = ["lan", "link", "cgnat", "own", "mapped", "compat"];
    let list: Vec<String> = locals
        .iter()
        .map(|n| format!("{n}.shrooms.test:{port}"))
        .collect();
    let r = w.run(&[
        "cage",
        "create",
        &name,
        "--dir",
        &project.to_string_lossy(),
        "--net",
        &format!("allow:rebind.shrooms.test:{port},{}", list.join(",")),
    ]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    for (n, addr) in [
        ("lan", LAN_ADDR.to_string()),
        ("link", LINK_LOCAL_ADDR.to_string()),
        ("cgnat", CGNAT_ADDR.to_string()),
        ("own", LINK_ADDR.to_string()),
        ("mapped", format!("::ffff:{LAN_ADDR}")),
        // As Rust writes it.
        ("compat", "::ac7:4d01".to_string()),
    ] {
        assert!(
            r.stderr()
                .contains(&format!("{n}.shrooms.test resolves to {addr} (")),
            "{n}: {}",
            r.explain()
        );
    }
    assert!(
        !r.stderr().contains("rebind.shrooms.test"),
        "{}",
        r.explain()
    );
    assert!(w.containers_of(&name).is_empty());
    assert!(!w.record_path(&name).exists());

    // The same at `cage limits --net`.
    w.create(&name, &project, &["--net", "open"]);
    let r = w.run(&[
        "cage",
        "limits",
        &name,
        "--net",
        &format!("allow:lan.shrooms.test:{port}"),
    ]);
    assert_eq!(r.code(), 2, "{}", r.explain());
    assert!(
        r.stderr().contains(&format!(
            "lan.shrooms.test resolves to {LAN_ADDR} (private)"
        )),
        "{}",
        r.explain()
    );
    assert_eq!(w.record(&name)["cage"]["net"], "open");

    // A name that answers the internet at create, the LAN at a later
    // start; the LAN written as an address beside it stays open.
    let policy = format!("allow:rebind.shrooms.test:{port},{LAN_ADDR}:{port}");
    w.run(&["cage", "limits", &name, "--net", &policy]).ok();
    let probes = format!(
        "{}; {}",
        nc_probe("rebind.shrooms.test", port),
        nc_probe(LAN_ADDR, port)
    );
    let run = w.sh(&name, &probes).ok();
    assert_eq!(
        run.stdout().matches(&format!("CONNECTED-{port}")).count(),
        2,
        "{}",
        run.explain()
    );
    fs::write(&hosts, hosts_text(CGNAT_ADDR)).unwrap();
    w.chown_all();
    let probes = format!(
        "{}; {}; {}",
        nc_probe("rebind.shrooms.test", port),
        nc_probe(CGNAT_ADDR, port),
        nc_probe(LAN_ADDR, port)
    );
    let run = w.sh(&name, &probes).ok();
    let out = run.stdout();
    assert_eq!(
        out.matches(&format!("REFUSED-{port}")).count(),
        2,
        "the rebound name opened its local answer:\n{}",
        run.explain()
    );
    assert!(
        run.stderr().contains(&format!(
            "allow-list: rebind.shrooms.test resolves to {CGNAT_ADDR} (carrier-grade NAT)"
        )),
        "the start does not say which name:\n{}",
        run.explain()
    );
    assert!(
        out.ends_with(&format!("CONNECTED-{port}\n")),
        "the address written in the policy is not open:\n{}",
        run.explain()
    );
}

#[test]
fn an_allow_listed_name_never_opens_a_local_address() {
    names_never_open_local_addresses(World::new());
}

#[test]
fn an_allow_listed_name_never_opens_a_local_address_rootless() {
    names_never_open_local_addresses(World::rootless());
}
