//! The suite performs each guarantee's attack itself, from inside real
//! cages, rootful and rootless, rather than trusting golden rule texts:
//!
//! - root inside tries to remove the rules with a real `nft` (the host's,
//!   copied into the project with its loader and libraries) and fails; the
//!   same `nft` does remove them where it has CAP_NET_ADMIN, so it runs;
//! - a static probe asks for a user namespace with the system calls
//!   themselves (clone, unshare, clone3), not only through `unshare -U`;
//! - every range a sealed cage refuses is probed from inside, against a
//!   listener on a stand-in address of that range on this machine's `lo`
//!   (scripts/setup-host puts them there), or, where no address of the range
//!   can answer, by the rule's own verdict on a datagram that never leaves
//!   the cage;
//! - links, a hard link and a FIFO planted in a sealed cage's outbox, and
//!   what `outbox pack` and `outbox send` then take out.
//!
//! Traffic stays on this machine: every address sent to is checked to be
//! one of this machine's before the first probe.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use crate::common::*;

/// The probe's source; compiled at test time with `gcc -static` (the test
/// image is a static busybox without a libc).
const PROBE_C: &str = include_str!("attacks/probe.c");

/// Where the host's nft is, and its dynamic loader's name in `ldd`'s list.
const NFT: &str = "/usr/sbin/nft";
const LOADER: &str = "ld-linux-x86-64.so.2";

/// One stand-in address on this machine's `lo` for each IPv4 range a sealed
/// cage refuses that an address on `lo` can stand for (scripts/setup-host
/// adds them; keep the two lists the same). 10.0.0.0/8 is common.rs's
/// LAN_ADDR. 127.0.0.0/8 has none: from a cage it is the cage's own
/// loopback, which a sealed cage may use, and the host's loopback is not
/// routed to from outside it. 224.0.0.0/4 is multicast: see
/// `datagram_ranges`.
const STAND_INS_V4: &[(&str, &str)] = &[
    ("0.0.0.0/8", "0.77.0.1"),
    ("10.0.0.0/8", LAN_ADDR),
    ("100.64.0.0/10", "100.127.77.1"),
    ("169.254.0.0/16", "169.254.77.1"),
    ("172.16.0.0/12", "172.31.77.1"),
    ("192.0.0.0/24", "192.0.0.77"),
    ("192.168.0.0/16", "192.168.77.1"),
    ("198.18.0.0/15", "198.18.77.1"),
    ("240.0.0.0/4", "240.0.0.77"),
];

/// The same for IPv6 (scripts/setup-host). Only a rootless cage can send
/// to them here: slirp4netns (and pasta, in the podman-5 lane) gives it an
/// IPv6 default route and opens the connection from the host, where the
/// address is on `lo`; podman's bridge (CNI's, or the podman-5 lane's,
/// both without an IPv6 subnet) gives a rootful cage no IPv6 route, so the
/// kernel refuses these before any rule sees them. ::/96 (IPv4-compatible)
/// is probed at a LAN address written in it (its `::` and `::1` are the
/// cage's own loopback); fe80::/10 is probed at the bridge's own link-local address
/// (rootful) and ff00::/8 by datagram (`datagram_ranges`).
const STAND_INS_V6: &[(&str, &str)] = &[
    ("::/96", COMPAT_ADDR),
    ("64:ff9b::/96", "64:ff9b::77"),
    ("64:ff9b:1::/48", "64:ff9b:1::77"),
    ("2001::/32", "2001:0:77::1"),
    ("2002::/16", "2002:77::1"),
    ("100::/64", "100::77"),
    ("200::/7", "200::77"),
    ("fc00::/7", "fd77:77::1"),
    ("fec0::/10", "fec0::77"),
];

/// Every address of this machine (`ip -o addr`), without prefix lengths.
fn machine_addresses() -> Vec<String> {
    let out = Command::new("ip").args(["-o", "addr"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().skip(2);
            match f.next() {
                Some("inet") | Some("inet6") => f.next(),
                _ => None,
            }
        })
        .map(|a| a.split('/').next().unwrap().to_string())
        .collect()
}

/// This machine's own IPv4 addresses on its interfaces other than `lo`
/// (its own networks, which a sealed cage refuses whatever their prefix).
pub(crate) fn own_network_addresses() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) != Some(&"lo"))
                .then(|| f.get(3)?.split('/').next().map(str::to_string))
                .flatten()
        })
        .collect()
}

/// The link-local address of the bridge of podman's default network on the
/// host (as podman names it: CNI's cni-podman0 on podman 4.3, the podman-5
/// lane's own shr5br0), if it has one.
fn bridge_link_local(w: &World) -> Option<String> {
    let out = w.podman(&[
        "network",
        "inspect",
        "podman",
        "--format",
        "{{.NetworkInterface}}",
    ]);
    assert!(
        out.status.success(),
        "podman network inspect: {}",
        show_output(&out)
    );
    let bridge = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = Command::new("ip")
        .args(["-o", "-6", "addr", "show", "scope", "link"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1)? == &bridge.as_str()).then(|| f.get(3)?.split('/').next().map(str::to_string))?
    })
}

/// The IPv4 address pasta gives a cage when told none (pasta(1), `-a`:
/// the address of the host's interface with the first default route). In
/// the cage that address is the cage's own and shadows the host's
/// (pasta(1), `--map-guest-addr`): a connection to it stays in the cage,
/// so it cannot stand for the host there.
fn pasta_own_address() -> Option<String> {
    let out = Command::new("ip")
        .args(["-4", "route", "show", "default"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&out.stdout);
    let mut f = routes.lines().next()?.split_whitespace();
    let dev = f.by_ref().skip_while(|w| *w != "dev").nth(1)?.to_string();
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show", "dev", &dev])
        .output()
        .unwrap();
    let addrs = String::from_utf8_lossy(&out.stdout);
    let first = addrs.lines().next()?;
    first
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()
        .map(str::to_string)
}

/// Fail unless every address is this machine's: a probe of a stand-in
/// that scripts/setup-host did not add would go to the network.
pub(crate) fn all_on_this_machine(addrs: &[&str]) {
    let mine = machine_addresses();
    for a in addrs {
        assert!(
            mine.iter().any(|m| m == a),
            "{a} is not an address of this machine: run scripts/setup-host, which adds the \
             stand-in addresses (the test sends to them, and must not send off the machine)"
        );
    }
}

/// A TCP listener on every address of the host, IPv4 and IPv6 (one
/// dual-stack socket, bound before it is returned), answering "hello".
pub(crate) fn listen_everywhere() -> u16 {
    let l = TcpListener::bind("[::]:0").expect("bind [::]:0");
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.write_all(b"hello\n");
        }
    });
    port
}

/// A listener that becomes the world's agent port (config rewritten
/// through `write_config`, so whatever every world's config needs stays).
fn agent_listener(w: &mut World) -> u16 {
    let port = listen_everywhere();
    w.agent_port = port;
    w.write_config("");
    port
}

/// The probe, built as `dir/probe`; its path.
pub fn build_probe(dir: &Path) -> PathBuf {
    let probe = dir.join("probe");
    // The podman-5 lane runs the suite in a tree without gcc: its
    // script builds the probe beforehand and names it here.
    if let Some(built) = std::env::var_os("SHROOMS_TEST_PROBE") {
        fs::copy(&built, &probe).unwrap();
    } else {
        let src = dir.join("probe.c");
        fs::write(&src, PROBE_C).unwrap();
        let out = Command::new("gcc")
            .args(["-static", "-O1", "-o"])
            .arg(&probe)
            .arg(&src)
            .output()
            .expect("gcc (scripts/setup-host installs it)");
        assert!(out.status.success(), "gcc -static: {}", show_output(&out));
        fs::remove_file(&src).unwrap();
    }
    probe
}

/// The probe and a copy of the host's nft with its loader and libraries,
/// made once per test in the world, copied into each project that needs
/// them (a cage sees its project at the same path).
pub(crate) struct Tools {
    dir: PathBuf,
}

impl Tools {
    pub(crate) fn new(w: &World) -> Tools {
        let dir = w.dir("tools");
        build_probe(&dir);
        let ldd = Command::new("ldd").arg(NFT).output().unwrap();
        assert!(ldd.status.success(), "ldd {NFT}: {}", show_output(&ldd));
        let mut files = vec![PathBuf::from(NFT)];
        for l in String::from_utf8_lossy(&ldd.stdout).lines() {
            if let Some(p) = l.split_whitespace().find(|p| p.starts_with('/')) {
                files.push(PathBuf::from(p));
            }
        }
        for f in &files {
            // fs::copy follows links: the loader and libraries are links
            // to versioned files.
            fs::copy(f, dir.join(f.file_name().unwrap())).unwrap();
        }
        assert!(dir.join(LOADER).exists(), "no {LOADER} in ldd {NFT}");
        for e in fs::read_dir(&dir).unwrap() {
            fs::set_permissions(e.unwrap().path(), fs::Permissions::from_mode(0o755)).unwrap();
        }
        w.chown_all();
        Tools { dir }
    }

    /// A copy in `project/tools`; returns that folder.
    pub(crate) fn into(&self, w: &World, project: &Path) -> PathBuf {
        let to = project.join("tools");
        fs::create_dir_all(&to).unwrap();
        for e in fs::read_dir(&self.dir).unwrap() {
            let p = e.unwrap().path();
            fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
        w.chown_all();
        to
    }
}

/// The command line that runs the copied nft by its own loader.
fn nft_command(tools: &Path) -> String {
    let d = tools.display();
    format!("{d}/{LOADER} --library-path {d} {d}/nft")
}

/// A session with its own project folder (holding the tools), made
/// ordinary or sealed.
fn session_with_tools(w: &World, tools: &Tools, base: &str, sealed: bool) -> (String, PathBuf) {
    let name = w.session(base);
    let project = w.dir(&format!("projects/{name}"));
    let t = tools.into(w, &project);
    if sealed {
        let token = w.file(&format!("{name}.token"), "sk-ant-oat01-attack-test\n");
        fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
        w.chown_all();
        w.create(
            &name,
            &project,
            &["--sealed", "--sealed-token", &token.to_string_lossy()],
        );
    } else {
        // Open: it must reach every stand-in, so that the sealed cage's
        // refusals are its rules' doing.
        w.create(&name, &project, &["--net", "open"]);
    }
    (name, t)
}

/// The lines of a probe's output that begin with `prefix` (say "tcp ADDR ").
pub(crate) fn verdict<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

/// Is this TCP verdict a refusal by a rule (at once, not a timeout)? A
/// `reject` on the cage's output hook answers the socket with an ICMP
/// error (ECONNREFUSED) or fails the send itself (EPERM).
pub(crate) fn refused_at_once(v: &str) -> bool {
    let mut f = v.split_whitespace();
    let (Some(e), Some(ms)) = (f.next(), f.next()) else {
        return false;
    };
    matches!(e, "ECONNREFUSED" | "EPERM") && ms.parse::<u64>().is_ok_and(|ms| ms < 2500)
}

// ---- 1. root inside cannot remove the rules ----

/// The ways root inside could try to get rid of a table; and of the egress
/// log's gate, to hold it open for good (docs/network.md, "The egress log").
fn nft_attempts(table: &str) -> Vec<String> {
    let mut a = vec![
        "flush ruleset".to_string(),
        format!("delete table inet {table}"),
        format!("flush table inet {table}"),
        format!("insert rule inet {table} output accept"),
    ];
    if table == "shrooms_egress" {
        a.push(format!("add element inet {table} alive {{ 0 }}"));
    }
    a
}

/// The shell lines that make each attempt with `nft` (a command line) and
/// print `ATTEMPT-OK: ...` or `ATTEMPT-FAILED: ...` with nft's message.
fn attempt_lines(attempts: &[String], nft: &str) -> String {
    attempts
        .iter()
        .map(|a| {
            format!(
                "if out=$({nft} {a} 2>&1); then echo \"ATTEMPT-OK: {a}\"; \
                 else echo \"ATTEMPT-FAILED: {a}: $out\" | tr '\\n' ' '; echo; fi\n"
            )
        })
        .collect()
}

/// The tables a cage has: the egress log's gate, the agent port's, and a
/// sealed cage's own.
fn tables(sealed: bool) -> Vec<&'static str> {
    if sealed {
        vec!["shrooms_egress", "shrooms_agent_port", "shrooms_sealed"]
    } else {
        vec!["shrooms_egress", "shrooms_agent_port"]
    }
}

/// Root inside an ordinary and a sealed cage runs a real nft against the
/// tool's tables (flush the rule set, delete, flush or open up each table)
/// and is refused every time; afterwards the agent port is still closed
/// and, sealed, the LAN stand-in still refused, while the internet stand-in
/// answers. In an ordinary cage root also tries from a user namespace of
/// its own, where it holds every capability. The control: the same nft,
/// the same commands, in a plain container given CAP_NET_ADMIN, succeed.
fn nft_cannot_remove_the_rules(mut w: World) {
    let agent = agent_listener(&mut w);
    let other = listen_everywhere();
    all_on_this_machine(&[HOST_ADDR, LAN_ADDR]);
    let tools = Tools::new(&w);

    // The control, with the capability: the commands are right and nft runs.
    let rules = tools.dir.join("tables.nft");
    fs::write(
        &rules,
        "table inet shrooms_agent_port {\n chain output {\n  type filter hook output priority 0; policy accept;\n  tcp dport 1 reject with tcp reset\n }\n}\n\
         table inet shrooms_sealed {\n chain output {\n  type filter hook output priority 0; policy accept;\n  ip daddr 10.0.0.0/8 reject\n }\n}\n\
         table inet shrooms_egress {\n set alive {\n  type mark\n  flags timeout\n }\n chain output {\n  type filter hook output priority -10; policy accept;\n  meta mark != @alive reject\n }\n}\n",
    )
    .unwrap();
    w.chown_all();
    let nft = nft_command(&tools.dir);
    let mut control = String::new();
    for t in tables(true) {
        for a in nft_attempts(t) {
            // Each attempt on freshly loaded tables (a flush takes both).
            control.push_str(&format!("{nft} -f {}\n", rules.display()));
            control.push_str(&attempt_lines(&[a], &nft));
        }
    }
    let mount = format!("{0}:{0}:ro", tools.dir.display());
    let plain = w.podman(&[
        "run",
        "--rm",
        "--cap-add",
        "NET_ADMIN",
        "-v",
        &mount,
        IMAGE,
        "sh",
        "-c",
        &control,
    ]);
    let plain_out = String::from_utf8_lossy(&plain.stdout);
    let attempts: usize = tables(true).iter().map(|t| nft_attempts(t).len()).sum();
    assert!(
        plain_out.matches("ATTEMPT-OK: ").count() == attempts
            && !plain_out.contains("ATTEMPT-FAILED"),
        "with NET_ADMIN the copied nft must do each attempt, or the test proves nothing:\n{}",
        show_output(&plain)
    );

    for sealed in [false, true] {
        let (name, t) = session_with_tools(&w, &tools, "nft", sealed);
        let nft = nft_command(&t);
        let mut script = format!("{nft} --version\n");
        let mut count = 0;
        for table in tables(sealed) {
            let attempts = nft_attempts(table);
            count += attempts.len();
            script.push_str(&attempt_lines(&attempts, &nft));
            if !sealed {
                // root of a user namespace of its own has every capability
                // there, but the cage's network namespace is not its own.
                // (A sealed cage has no user namespaces: another test.)
                count += attempts.len();
                script.push_str(&attempt_lines(&attempts, &format!("unshare -U -r {nft}")));
            }
        }
        let p = t.join("probe");
        let p = p.display();
        script.push_str(&format!(
            "{p} tcp {HOST_ADDR} {agent}\n{p} tcp {LAN_ADDR} {other}\n{p} tcp {HOST_ADDR} {other}\n"
        ));
        let run = w.sh(&name, &script).ok();
        let out = run.stdout();
        let kind = if sealed { "sealed" } else { "ordinary" };
        assert!(
            out.contains("nftables v"),
            "{kind}: the copied nft does not run:\n{}",
            run.explain()
        );
        assert_eq!(
            out.matches("ATTEMPT-FAILED: ").count(),
            count,
            "{kind}: root inside changed the rules:\n{}",
            run.explain()
        );
        assert!(!out.contains("ATTEMPT-OK"), "{kind}:\n{}", run.explain());
        for l in out.lines().filter(|l| l.starts_with("ATTEMPT-FAILED")) {
            assert!(
                l.contains("Operation not permitted"),
                "{kind}: refused for another reason than permission: {l}\n{}",
                run.explain()
            );
        }
        assert!(
            refused_at_once(verdict(&out, &format!("tcp {HOST_ADDR} "))),
            "{kind}: the agent port is open after the attempts:\n{}",
            run.explain()
        );
        let lan = verdict(&out, &format!("tcp {LAN_ADDR} "));
        if sealed {
            assert!(
                refused_at_once(lan),
                "sealed: the LAN is reachable after the attempts:\n{}",
                run.explain()
            );
        } else {
            assert_eq!(lan, "CONNECTED", "{}", run.explain());
        }
        // The lines are in order: the agent port's verdict first, then the
        // other port on the same address, which answers.
        let last = out
            .lines()
            .rfind(|l| l.starts_with(&format!("tcp {HOST_ADDR} ")))
            .unwrap();
        assert_eq!(
            last,
            format!("tcp {HOST_ADDR} CONNECTED"),
            "{kind}: {}",
            run.explain()
        );
    }
}

#[test]
fn nft_inside_cannot_remove_the_rules() {
    nft_cannot_remove_the_rules(World::new());
}

#[test]
fn nft_inside_cannot_remove_the_rules_rootless() {
    nft_cannot_remove_the_rules(World::rootless());
}

// ---- 2. no user namespaces, asked for with the system calls ----

/// A static probe calls clone(CLONE_NEWUSER), unshare(CLONE_NEWUSER) and
/// clone3(CLONE_NEWUSER) itself: in an ordinary cage, where user
/// namespaces are allowed, each succeeds (the probe works); in a sealed
/// cage each fails. clone and unshare are allowed there only without the
/// flag, so with it they get the profile's default answer, which in
/// podman's default profile (and so in the sealed one) is ENOSYS
/// (`defaultErrnoRet`); EPERM would do as well. clone3 fails with ENOSYS
/// whatever its flags: seccomp cannot look into them, and callers fall
/// back to clone, where the flag is checked.
fn no_user_namespace_by_system_call(w: World) {
    let tools = Tools::new(&w);
    let (plain, pt) = session_with_tools(&w, &tools, "userns", false);
    let run = w
        .sh(&plain, &format!("{} userns", pt.join("probe").display()))
        .ok();
    let out = run.stdout();
    for call in ["clone", "unshare", "clone3"] {
        assert_eq!(
            verdict(&out, &format!("{call} ")),
            "OK",
            "an ordinary cage must allow {call}(CLONE_NEWUSER), or the probe proves nothing:\n{}",
            run.explain()
        );
    }
    let (sealed, st) = session_with_tools(&w, &tools, "userns", true);
    let run = w
        .sh(
            &sealed,
            &format!("{} userns; echo forked-ok", st.join("probe").display()),
        )
        .ok();
    let out = run.stdout();
    for (call, refusals) in [
        ("clone", &["EPERM", "ENOSYS"][..]),
        ("unshare", &["EPERM", "ENOSYS"][..]),
        ("clone3", &["ENOSYS"][..]),
    ] {
        let v = verdict(&out, &format!("{call} "));
        assert!(
            refusals.iter().any(|e| v.starts_with(&format!("{e} "))),
            "a sealed cage: {call}(CLONE_NEWUSER) must fail with one of {refusals:?}:\n{}",
            run.explain()
        );
    }
    assert!(out.contains("forked-ok"), "{}", run.explain());
}

#[test]
fn no_user_namespace_by_system_call_in_a_sealed_cage() {
    no_user_namespace_by_system_call(World::new());
}

#[test]
fn no_user_namespace_by_system_call_in_a_sealed_rootless_cage() {
    no_user_namespace_by_system_call(World::rootless());
}

// ---- 3. every refused range, probed from inside ----

/// Datagrams to ranges no address here can answer for: multicast (IPv4
/// 224.0.0.0/4 and IPv6 ff00::/8). The probe sends them with a time to
/// live of 0, which the kernel drops after the output hook and before the
/// interface: an ordinary cage's send succeeds and nothing leaves it; a
/// sealed cage's `reject` on the output hook fails the send itself (EPERM).
/// IPv6 only where the cage has an IPv6 route (rootless: slirp4netns).
fn datagram_ranges(rootless: bool) -> Vec<&'static str> {
    let mut v = vec!["224.0.0.77", "239.255.77.1"];
    if rootless {
        v.extend(["ff02::77", "ff0e::77"]);
    }
    v
}

/// Every range a sealed cage refuses, probed from an ordinary cage (which
/// reaches each stand-in: the probe works) and a sealed one (refused at
/// once by a rule, not by a timeout), with IPv4-mapped IPv6 addresses
/// tried too; plus the machine's own networks at each of its interface
/// addresses. What cannot be probed here is said at `STAND_INS_V4`,
/// `STAND_INS_V6` and `datagram_ranges`.
fn every_refused_range_is_refused(w: World) {
    let rootless = w.user.is_some();
    let port = listen_everywhere();
    let mut tcp: Vec<String> = STAND_INS_V4.iter().map(|(_, a)| a.to_string()).collect();
    // An IPv4 address written as IPv4-mapped IPv6 goes out as IPv4, and is
    // refused as the IPv4 address it is.
    tcp.push(format!("::ffff:{LAN_ADDR}"));
    tcp.push("::ffff:192.168.77.1".to_string());
    let own = own_network_addresses();
    assert!(
        own.iter().any(|a| a == LINK_ADDR),
        "{LINK_ADDR} is not on shr-lan0: run scripts/setup-host ({own:?})"
    );
    // A pasta cage (rootless, podman-5 lane) holds one of them itself.
    let shadowed = if rootless && rootless_network() == "pasta" {
        pasta_own_address()
    } else {
        None
    };
    tcp.extend(
        own.iter()
            .filter(|a| Some(*a) != shadowed.as_ref())
            .cloned(),
    );
    if rootless {
        tcp.extend(STAND_INS_V6.iter().map(|(_, a)| a.to_string()));
    }
    let mut udp: Vec<String> = datagram_ranges(rootless)
        .iter()
        .map(|a| a.to_string())
        .collect();
    // fe80::/10 at the bridge's own link-local address (rootful). The
    // kernel sends no ICMPv6 error for a link-local packet a rule rejects
    // on the output hook (it routes the error by loopback, which has no
    // link-local route), so a refused connection waits for its timeout:
    // the datagram's EPERM is what shows the rule.
    let link_local = if rootless {
        None
    } else {
        bridge_link_local(&w).map(|ll| format!("{ll}%eth0"))
    };
    if let Some(ll) = &link_local {
        tcp.push(ll.clone());
        udp.push(ll.clone());
    }
    let checked: Vec<&str> = tcp
        .iter()
        .map(|a| {
            let a = a.strip_prefix("::ffff:").unwrap_or(a);
            a.split('%').next().unwrap()
        })
        .collect();
    all_on_this_machine(&checked);

    let tools = Tools::new(&w);
    let script = |t: &Path| {
        let p = t.join("probe");
        let mut s = String::new();
        if link_local.is_some() {
            // netavark (podman 5) returns before the cage's link-local
            // address has passed duplicate address detection (CNI's bridge
            // plugin waits for it: SettleAddresses in containernetworking's
            // pkg/ip); while it is tentative a link-local connection fails
            // with EADDRNOTAVAIL, before any rule (seen in the podman-5 lane).
            s.push_str(
                "i=0; while ip -6 addr show dev eth0 | grep -q tentative && [ $i -lt 100 ]; \
                 do sleep 0.1; i=$((i+1)); done\n",
            );
        }
        for a in &tcp {
            s.push_str(&format!("{} tcp {a} {port}\n", p.display()));
        }
        for a in &udp {
            s.push_str(&format!("{} udp {a} 9\n", p.display()));
        }
        s
    };
    let (plain, pt) = session_with_tools(&w, &tools, "ranges", false);
    let run = w.sh(&plain, &script(&pt)).ok();
    let out = run.stdout();
    for a in &tcp {
        assert_eq!(
            verdict(&out, &format!("tcp {a} ")),
            "CONNECTED",
            "an ordinary cage does not reach {a}, so the sealed probe proves nothing:\n{}",
            run.explain()
        );
    }
    for a in &udp {
        assert_eq!(
            verdict(&out, &format!("udp {a} ")),
            "SENT",
            "{}",
            run.explain()
        );
    }

    let (sealed, st) = session_with_tools(&w, &tools, "ranges", true);
    let run = w.sh(&sealed, &script(&st)).ok();
    let out = run.stdout();
    for a in &tcp {
        let v = verdict(&out, &format!("tcp {a} "));
        if Some(a) == link_local.as_ref() {
            assert_ne!(
                v,
                "CONNECTED",
                "a sealed cage reaches {a}:\n{}",
                run.explain()
            );
            continue;
        }
        assert!(
            refused_at_once(v),
            "a sealed cage is not refused {a} at once by its rules:\n{}",
            run.explain()
        );
    }
    for a in &udp {
        assert_eq!(
            verdict(&out, &format!("udp {a} ")),
            "EPERM",
            "a sealed cage's datagram to {a} was not stopped by its rules:\n{}",
            run.explain()
        );
    }
    // The sealed cage is not cut off: the internet stand-in answers.
    let run = w
        .sh(
            &sealed,
            &format!("{} tcp {HOST_ADDR} {port}", st.join("probe").display()),
        )
        .ok();
    assert_eq!(
        run.stdout().trim(),
        format!("tcp {HOST_ADDR} CONNECTED"),
        "{}",
        run.explain()
    );
}

#[test]
fn every_refused_range_is_refused_from_a_sealed_cage() {
    every_refused_range_is_refused(World::new());
}

#[test]
fn every_refused_range_is_refused_from_a_sealed_rootless_cage() {
    every_refused_range_is_refused(World::rootless());
}

// ---- 4. what leaves a sealed cage's outbox ----

/// Names in a .tar.gz, and the bytes of each regular file.
fn untar(path: &Path) -> Vec<(String, Vec<u8>)> {
    let f = fs::File::open(path).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut out = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let kind = e.header().entry_type();
        assert!(
            kind.is_file(),
            "{name} is in the archive as {kind:?}, not a regular file"
        );
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).unwrap();
        out.push((name, bytes));
    }
    out
}

/// From inside, the sealed cage plants in its outbox a link to a secret
/// file of the machine, to /etc/passwd, to a folder of the machine, a link
/// loop, a link to a folder of the outbox, a FIFO, and a hard link (to a
/// file of the outbox; one to a file outside it is refused by the kernel,
/// and tried). `outbox pack` and `outbox send` finish (the FIFO is not
/// waited on), take the regular files only, follow no link, read nothing
/// outside the outbox, and list each link and the FIFO as left out.
fn planted_links_do_not_leave(w: World) {
    let secret_dir = w.dir("secret");
    let secret = "the-machines-secret-text";
    fs::write(secret_dir.join("key"), secret).unwrap();
    let passwd = fs::read_to_string("/etc/passwd").unwrap();
    let name = w.session("links");
    let project = w.dir(&format!("projects/{name}"));
    fs::write(project.join("project-file"), "project").unwrap();
    let token = w.file("links.token", "sk-ant-oat01-attack-test\n");
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    w.chown_all();
    w.create(
        &name,
        &project,
        &["--sealed", "--sealed-token", &token.to_string_lossy()],
    );
    let script = format!(
        "cd /outbox && mkdir -p sub && echo real > sub/real.txt && \
         ln -s {key} secret-link && ln -s /etc/passwd passwd-link && \
         ln -s {dir} folder-link && ln -s ../loop-b sub/loop-a && ln -s sub/loop-a loop-b && \
         ln -s sub sub-link && mkfifo pipe && ln sub/real.txt hard.txt && \
         (ln {proj}/project-file outside-hard 2>&1 && echo OUTSIDE-HARD-LINKED || echo OUTSIDE-HARD-REFUSED) && \
         ls -la /outbox /outbox/sub",
        key = secret_dir.join("key").display(),
        dir = secret_dir.display(),
        proj = project.display(),
    );
    let run = w.sh(&name, &script).ok();
    assert!(
        run.stdout().contains("OUTSIDE-HARD-REFUSED"),
        "{}",
        run.explain()
    );
    let planted = [
        "secret-link",
        "passwd-link",
        "folder-link",
        "sub/loop-a",
        "loop-b",
        "sub-link",
        "pipe",
    ];
    let check = |files: &[(String, Vec<u8>)], readme: &str, what: &str| {
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        let mut want = vec!["README-UNTRUSTED.txt", "hard.txt", "sub/real.txt"];
        want.sort();
        let mut got = names.clone();
        got.sort();
        assert_eq!(got, want, "{what}: what left the outbox");
        for (n, bytes) in files {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains(secret), "{what}: {n} holds the secret");
            assert!(
                n == "README-UNTRUSTED.txt" || !text.contains(passwd.lines().next().unwrap()),
                "{what}: {n} holds /etc/passwd"
            );
        }
        for p in planted {
            assert!(
                readme.contains(p),
                "{what}: {p} is not listed as left out:\n{readme}"
            );
        }
    };

    // outbox pack, bounded in time: a FIFO opened for reading would block.
    let archive = w.root.join("packed.tar.gz");
    let child = w.spawn_env(
        &[
            "outbox",
            "pack",
            &name,
            "-o",
            &archive.to_string_lossy(),
            "--json",
        ],
        &[],
    );
    let pid = child.id();
    let watchdog = thread::spawn(move || {
        thread::sleep(Duration::from_secs(60));
        // SAFETY: kill(2) on a pid; if it has ended this is at most ESRCH
        // (pids are not reused within the minute on this test machine).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let r = finish("outbox pack", child).ok();
    drop(watchdog);
    let packed = r.json();
    assert_eq!(packed["files"], 2, "{}", r.explain());
    let left: Vec<&str> = packed["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    for p in planted {
        assert!(left.contains(&p), "{p} not left out: {}", r.explain());
    }
    let files = untar(&archive);
    let readme = String::from_utf8_lossy(
        &files
            .iter()
            .find(|(n, _)| n == "README-UNTRUSTED.txt")
            .unwrap()
            .1,
    )
    .into_owned();
    check(&files, &readme, "outbox pack");
    assert_eq!(
        files.iter().find(|(n, _)| n == "hard.txt").unwrap().1,
        b"real\n"
    );

    // outbox send, to a session of this same machine.
    let receiver = w.session("inbox");
    let rdir = w.dir("receiver");
    w.create(&receiver, &rdir, &[]);
    w.write_config("machine_name = \"here\"");
    w.run(&["files", "allow", &receiver, &format!("here/{name}")])
        .ok();
    w.run(&["outbox", "send", &name, &format!("here/{receiver}")])
        .ok();
    let drop_dir = w
        .state
        .join("uploads")
        .join(&receiver)
        .join("drop")
        .join(format!("from-here_{name}"));
    let sent: Vec<PathBuf> = fs::read_dir(&drop_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", drop_dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let files = untar(&sent[0]);
    let readme = String::from_utf8_lossy(
        &files
            .iter()
            .find(|(n, _)| n == "README-UNTRUSTED.txt")
            .unwrap()
            .1,
    )
    .into_owned();
    check(&files, &readme, "outbox send");
    // Nothing of the machine was changed through a link.
    assert_eq!(fs::read_to_string(secret_dir.join("key")).unwrap(), secret);
    assert_eq!(fs::read_to_string("/etc/passwd").unwrap(), passwd);
}

#[test]
fn links_planted_in_the_outbox_do_not_leave() {
    planted_links_do_not_leave(World::new());
}

#[test]
fn links_planted_in_the_outbox_do_not_leave_rootless() {
    planted_links_do_not_leave(World::rootless());
}

// ---- 5. a failing test cleans up what it made ----

/// What a test registers with `World::podman_on_drop` goes when the test
/// fails: a world that made a volume and then panicked leaves no volume
/// (a shared-folder volume left by a failed run failed every later run).
#[test]
fn a_failing_test_leaves_no_volume_behind() {
    let volume = format!("shrooms-it-guard-{}", std::process::id());
    let v = volume.clone();
    let failed = std::panic::catch_unwind(move || {
        let w = World::new();
        w.podman_on_drop(&["volume", "rm", &v]);
        let made = w.podman(&["volume", "create", &v]);
        assert!(made.status.success(), "{}", show_output(&made));
        assert!(w.podman(&["volume", "exists", &v]).status.success());
        panic!("a test failing after it made a volume");
    });
    assert!(failed.is_err());
    let left = podman(None, &["volume", "exists", &volume]);
    if left.status.success() {
        let _ = podman(None, &["volume", "rm", &volume]);
        panic!("the failed test's volume {volume} was left behind");
    }
}
