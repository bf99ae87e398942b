//! The egress log: every connection a cage opens or is refused, written
//! outside the cage, one JSON line each.
//!
//! The cage's nftables rules (`rules`) carry an NFLOG statement (`log group`,
//! nft(8) "LOG STATEMENT") before each verdict, its prefix naming the verdict
//! and the rule. NFLOG hands the packet to a netlink listener in the same
//! network namespace (nfnetlink_log is per namespace: a cage's log never
//! reaches the machine's, nor another cage's). That listener is a hidden
//! subcommand of this program, started from outside into the cage's network
//! namespace the way the rules are loaded (`nsenter`, through `podman
//! unshare` when podman is rootless, whose user namespace owns the cage's
//! network namespace and so may bind the group). It appends to a file in the
//! state folder, which no cage mounts: root in the cage can neither reach the
//! file nor the listener, and, without NET_ADMIN, neither the rules.
//!
//! Fails closed: every cage's rules begin with a gate (`rules::egress_gate`)
//! that refuses whatever leaves it unless a set holds an element the
//! listener keeps there, renewed every second with a timeout of three,
//! while it can write. A write that fails (a full disk, a quota) takes the
//! element out at once and the listener tries again every second, opening
//! the gate when a write goes through; a listener that dies leaves it to
//! time out. Meanwhile its state is in its name (`/proc/PID/comm`), which
//! takes no disk: `cage show`, the status page and a running turn read it.
//!
//! Bound: allowed connections and refusals are kept in two files, so that a
//! flood of refusals cannot push an allowed connection out of the log. Each
//! is at most `MAX_BYTES` in its current file; past that the file becomes
//! `<file>.1.jsonl` (replacing an older one) and a new one starts, so a
//! session keeps at most four times that.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Doing, Error, Result};
use crate::state::when::now_rfc3339_millis;

/// The NFLOG group the rules send to and the listener binds, in the cage's
/// own network namespace (any number would do: no other listener is there).
pub const GROUP: u16 = 7;

/// The prefix every log statement's text starts with.
const TAG: &str = "shrooms";

/// How large a session's current log file grows before it is rotated.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// The hidden subcommand the listener runs as.
pub const SUBCOMMAND: &str = "egress-listen";

/// How much of each packet the kernel copies to the listener: the IP and
/// transport headers and a DNS question.
const COPY_RANGE: u32 = 512;

/// The nft log statement that goes before a rule's verdict (pure, for the
/// rule sets of `rules`): `rule` names the rule in the log (letters, digits
/// and dashes), `accept` says whether the rule lets the packet through.
/// An accepting rule puts it behind `ct state new` in a rule of its own, so
/// that each connection (each new flow for UDP and ICMP) is logged once; a
/// refusing rule logs each packet it refuses, as each is a new attempt.
pub fn log_statement(rule: &str, accept: bool) -> String {
    let verdict = if accept { "accept" } else { "refuse" };
    format!("log group {GROUP} prefix \"{TAG}:{verdict}:{rule}\"")
}

/// What the prefix a packet was logged with says: allowed or not, and the
/// rule. None for a prefix of anything else.
pub fn parse_prefix(prefix: &str) -> Option<(bool, String)> {
    let mut parts = prefix.trim_end_matches('\0').splitn(3, ':');
    if parts.next()? != TAG {
        return None;
    }
    let allowed = match parts.next()? {
        "accept" => true,
        "refuse" => false,
        _ => return None,
    };
    let rule = parts.next()?;
    let good = !rule.is_empty()
        && rule
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    good.then(|| (allowed, rule.to_string()))
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Line {
    /// When the listener was handed the packet, RFC 3339 in UTC.
    pub time: String,
    pub session: String,
    /// The destination address.
    pub address: String,
    /// The name asked for, where the packet is a DNS question; null otherwise.
    pub name: Option<String>,
    /// The destination port (TCP, UDP); null for ICMP and other protocols.
    pub port: Option<u16>,
    /// tcp, udp, icmp, icmpv6, or the IP protocol number.
    pub protocol: String,
    /// Whether the rule let it through.
    pub allowed: bool,
    /// The rule that decided (agent-port, open, dns, ...).
    pub rule: String,
}

/// Where a packet went, read from its IP header (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub address: IpAddr,
    pub protocol: String,
    pub port: Option<u16>,
    pub name: Option<String>,
}

/// Read the destination of an IPv4 or IPv6 packet: address, protocol, port,
/// and the name of a DNS question sent over UDP.
pub fn destination(packet: &[u8]) -> Option<Destination> {
    let version = packet.first()? >> 4;
    let (address, proto, l4) = match version {
        4 => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            let d: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
            (IpAddr::from(d), *packet.get(9)?, packet.get(ihl..)?)
        }
        6 => {
            let d: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
            (IpAddr::from(d), *packet.get(6)?, packet.get(40..)?)
        }
        _ => return None,
    };
    let port = || l4.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]));
    let (protocol, port) = match proto {
        6 => ("tcp".to_string(), port()),
        17 => ("udp".to_string(), port()),
        1 => ("icmp".to_string(), None),
        58 => ("icmpv6".to_string(), None),
        n => (n.to_string(), None),
    };
    let name = if proto == 17 && port == Some(53) {
        l4.get(8..).and_then(dns_question)
    } else {
        None
    };
    Some(Destination {
        address,
        protocol,
        port,
        name,
    })
}

/// The name of a DNS query's first question (RFC 1035, 4.1), if it is one
/// made of letters, digits, dashes and underscores: whatever else the cage
/// sends is not shown as a name.
pub fn dns_question(msg: &[u8]) -> Option<String> {
    let flags = msg.get(2)?;
    let questions = u16::from_be_bytes([*msg.get(4)?, *msg.get(5)?]);
    if flags & 0x80 != 0 || questions == 0 {
        return None;
    }
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*msg.get(at)?);
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        let label = msg.get(at + 1..at + 1 + len)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += 1 + len;
    }
    let name = labels.join(".");
    (!name.is_empty() && name.len() <= 253).then_some(name)
}

/// The table of the egress log's gate, in every cage (docs/network.md, "The egress
/// log"). Its name says what it is.
pub const EGRESS_TABLE: &str = "shrooms_egress";
/// The set the egress log's listener keeps an element in while it can
/// write (`GATE_TIMEOUT`).
pub const EGRESS_SET: &str = "alive";

pub use crate::state::session::older;

/// A file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    /// A line of `stat -c '%d %i'`.
    pub fn parse(line: &str) -> Option<FileId> {
        let mut w = line.split_whitespace();
        let id = FileId {
            dev: w.next()?.parse().ok()?,
            ino: w.next()?.parse().ok()?,
        };
        w.next().is_none().then_some(id)
    }

    /// A file's, from its metadata (what stat(1)'s `%d %i` print).
    pub fn of(m: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// A log file that rotates at `max` bytes.
pub struct LogFile {
    path: PathBuf,
    max: u64,
    file: std::fs::File,
    size: u64,
}

impl LogFile {
    pub fn open(path: &Path, max: u64) -> std::io::Result<LogFile> {
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_path_buf(),
            max,
            file,
            size,
        })
    }

    /// Append one line, rotating first if it would pass the bound.
    pub fn append(&mut self, line: &Line) -> std::io::Result<()> {
        let mut text = serde_json::to_string(line).map_err(std::io::Error::other)?;
        text.push('\n');
        if self.size > 0 && self.size + text.len() as u64 > self.max {
            std::fs::rename(&self.path, older(&self.path))?;
            self.file = open_append(&self.path)?;
            self.size = 0;
        }
        if let Err(e) = self.file.write_all(text.as_bytes()) {
            // A line cut short by a full disk is taken back whole, so that
            // the next one starts a line of its own (a shorter file needs
            // no room).
            let _ = self.file.set_len(self.size);
            return Err(e);
        }
        self.size += text.len() as u64;
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// A session's log, oldest first: the allowed connections' files and the
/// refusals' (each its rotated file, then its current one), merged by time.
/// Lines that do not read are left out (a line cut by a full disk).
pub fn read(allowed: &Path, refused: &Path) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for log in [allowed, refused] {
        for p in [older(log), log.to_path_buf()] {
            let text = match std::fs::read_to_string(&p) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::act(Doing::Read(p.to_path_buf()), &e)),
            };
            out.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Line>(l).ok()),
            );
        }
    }
    // Stable: lines of one time keep their order within a file. RFC 3339 in
    // UTC to the millisecond sorts as text.
    out.sort_by(|a, b| a.time.cmp(&b.time));
    Ok(out)
}

/// The last `n` refusals of a log, newest first.
pub fn last_refusals(lines: &[Line], n: usize) -> Vec<Line> {
    lines
        .iter()
        .rev()
        .filter(|l| !l.allowed)
        .take(n)
        .cloned()
        .collect()
}

// ---- the listener -----------------------------------------------------------

/// What the listener is told: where to write (allowed connections, and
/// refusals), for which session, and the cage's first process, whose
/// network namespace it must share.
pub struct Listen<'a> {
    pub log: &'a Path,
    pub refused_log: &'a Path,
    pub pid_file: &'a Path,
    pub session: &'a str,
    pub cage_pid: i64,
}

/// How long the gate's element lives unless the listener renews it: what a
/// listener that dies leaves the cage before its network is cut.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the listener renews it, and tries a write again while it
/// cannot write.
const GATE_RENEW: Duration = Duration::from_secs(1);

/// The listener's name (`/proc/PID/comm`) while it writes.
const NAME_UP: &str = "egress-listen";
/// Its name while it cannot write: this and a word for why (a name is at
/// most 15 bytes).
const NAME_DOWN: &str = "egress:";

/// At most this many lines are kept while the log cannot be written (the
/// ones that failed; the gate refuses the rest, unlogged): more are counted
/// in the `lost` line.
const PENDING: usize = 256;

/// The listener (`shrooms-agent egress-listen`), run in the cage's network
/// namespace: bind the NFLOG group, open the gate, say so in the pid file
/// (its pid and the namespace it is in), then write one line per packet
/// and keep the gate open while it can, until the cage's first process is
/// gone or no longer in this namespace.
pub fn listen(a: &Listen<'_>) -> Result<()> {
    use crate::error::EgressProblem;
    let subcommand = SUBCOMMAND;
    let own = netns_id("/proc/self/ns/net")
        .ok_or_else(|| Error::egress(EgressProblem::NoNamespace { subcommand }))?;
    let cage_ns = format!("/proc/{}/ns/net", a.cage_pid);
    if netns_id(&cage_ns) != Some(own) {
        let pid = a.cage_pid;
        return Err(Error::egress(EgressProblem::NotInCage { subcommand, pid }));
    }
    let socket = bind_group()?;
    let mut logs = Logs {
        allowed: LogFile::open(a.log, MAX_BYTES).map_err(|e| {
            Error::act(
                Doing::within(SUBCOMMAND, Doing::At(a.log.to_path_buf())),
                &e,
            )
        })?,
        refused: LogFile::open(a.refused_log, MAX_BYTES).map_err(|e| {
            Error::act(
                Doing::within(SUBCOMMAND, Doing::At(a.refused_log.to_path_buf())),
                &e,
            )
        })?,
        down: None,
    };
    let mut gate = Gate::new().map_err(gate_fail)?;
    set_name(NAME_UP);
    open_first(&mut gate).map_err(gate_fail)?;
    let mut renewed = std::time::Instant::now();
    let ready = format!("{} {} {}\n", std::process::id(), own.0, own.1);
    // What runs now, which a machine that went down does not have.
    crate::state::session::write_atomic_unsynced(a.pid_file, ready.as_bytes(), 0o600)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // Keep the gate open while the log is written; while it is not,
        // try again, and open it once a write goes through.
        if renewed.elapsed() >= GATE_RENEW {
            renewed = std::time::Instant::now();
            if logs.down.is_some() {
                let cut = a.line(String::new(), None, false, "cut".into());
                if logs.retry(cut) {
                    set_name(NAME_UP);
                }
            }
            if logs.down.is_none() {
                gate.set(true).map_err(gate_fail)?;
            }
        }
        let n = match socket.recv(&mut &mut buf[..], 0) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if netns_id(&cage_ns) != Some(own) {
                    break;
                }
                continue;
            }
            // The kernel dropped messages it could not queue (ENOBUFS):
            // the lines lost are said as one.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                let lost = a.line(String::new(), None, false, "lost".into());
                logs.write(lost, &mut gate).map_err(gate_fail)?;
                continue;
            }
            Err(e) => return Err(Error::act(SUBCOMMAND, &e)),
        };
        for (allowed, rule, d) in logged_packets(&buf[..n]) {
            let l = a.line(d.address.to_string(), Some(d), allowed, rule);
            logs.write(l, &mut gate).map_err(gate_fail)?;
        }
    }
    remove_own_pid_file(a.pid_file);
    Ok(())
}

/// The listener's failure to set the gate.
fn gate_fail(e: std::io::Error) -> Error {
    Error::act(Doing::within(SUBCOMMAND, "the egress gate"), &e)
}

impl Listen<'_> {
    /// The log's line for a packet to `address`, with what was read of
    /// where it went (none for what the listener says of the log itself:
    /// `cut`, `lost`).
    fn line(&self, address: String, d: Option<Destination>, allowed: bool, rule: String) -> Line {
        let d = d.unwrap_or(Destination {
            address: IpAddr::from([0u8; 4]),
            protocol: String::new(),
            port: None,
            name: None,
        });
        Line {
            time: now_rfc3339_millis(),
            session: self.session.to_string(),
            address,
            name: d.name,
            port: d.port,
            protocol: d.protocol,
            allowed,
            rule,
        }
    }
}

/// A netlink socket bound to the NFLOG group, each packet handed over at
/// once, its reads timing out so that the listener looks up now and then.
fn bind_group() -> Result<netlink_sys::Socket> {
    use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
    use netlink_packet_netfilter::NetfilterMessage;
    use netlink_packet_netfilter::NetfilterProtoFamily;
    use netlink_packet_netfilter::nflog::{ConfigCmd, ConfigMode, ConfigNla, config_request};
    use netlink_sys::{Socket, constants::NETLINK_NETFILTER};

    let mut socket = Socket::new(NETLINK_NETFILTER).map_err(|e| Error::act(SUBCOMMAND, &e))?;
    socket.bind_auto().map_err(|e| Error::act(SUBCOMMAND, &e))?;
    let _ = socket.set_rx_buf_sz(1 << 20);
    let mut buf = vec![0u8; 1 << 16];
    let nlas = vec![
        ConfigCmd::Bind.into(),
        ConfigMode::new_packet(COPY_RANGE).into(),
        // One packet per message, handed over at once.
        ConfigNla::QThresh(1),
    ];
    let msg = config_request(NetfilterProtoFamily::Unspec, GROUP, nlas);
    let mut out = vec![0; msg.header.length as usize];
    msg.serialize(&mut out[..]);
    socket
        .send(&out, 0)
        .map_err(|e| Error::act(SUBCOMMAND, &e))?;
    let n = socket
        .recv(&mut &mut buf[..], 0)
        .map_err(|e| Error::act(SUBCOMMAND, &e))?;
    match NetlinkMessage::<NetfilterMessage>::deserialize(&buf[..n]) {
        Ok(m) => match m.payload {
            NetlinkPayload::Error(e) if e.code.is_some() => {
                return Err(Error::act(
                    Doing::within(SUBCOMMAND, Doing::BindNflogGroup(GROUP)),
                    &e.to_io(),
                ));
            }
            _ => {}
        },
        Err(e) => return Err(Error::act(SUBCOMMAND, &e)),
    }
    rustix::net::sockopt::set_socket_timeout(
        &socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(Duration::from_millis(500)),
    )
    .map_err(|e| Error::act(SUBCOMMAND, &e))?;
    Ok(socket)
}

/// Open the gate the first time. The rules (and so the gate's set) may be
/// loading beside this start (`ops::load_rules`, as root): a set not there
/// yet is waited for, a while.
fn open_first(gate: &mut Gate) -> std::io::Result<()> {
    let since = std::time::Instant::now();
    loop {
        match gate.set(true) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && since.elapsed() < READY => {
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Pure: the packets logged in what one read from the NFLOG socket
/// brought (`buf`), in order: allowed or not, the rule, where each went.
/// A message whose prefix is not ours, or whose packet cannot be read, is
/// left out.
fn logged_packets(buf: &[u8]) -> Vec<(bool, String, Destination)> {
    use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
    use netlink_packet_netfilter::nflog::{PacketNla, ULogMessage};
    use netlink_packet_netfilter::{NetfilterMessage, NetfilterMessageInner};

    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let Ok(m) = NetlinkMessage::<NetfilterMessage>::deserialize(&buf[at..]) else {
            break;
        };
        let len = m.header.length as usize;
        if let NetlinkPayload::InnerMessage(NetfilterMessage {
            inner: NetfilterMessageInner::ULog(ULogMessage::Packet(nlas)),
            ..
        }) = &m.payload
        {
            let prefix = nlas.iter().find_map(|n| match n {
                PacketNla::Prefix(p) => Some(p.to_string_lossy().into_owned()),
                _ => None,
            });
            let payload = nlas.iter().find_map(|n| match n {
                PacketNla::Payload(p) => Some(p.as_slice()),
                _ => None,
            });
            if let (Some((allowed, rule)), Some(d)) = (
                prefix.as_deref().and_then(parse_prefix),
                payload.and_then(destination),
            ) {
                out.push((allowed, rule, d));
            }
        }
        if len == 0 {
            break;
        }
        at += len;
    }
    out
}

/// The pid file may be a newer listener's already (the cage started
/// again meanwhile): only our own is removed.
fn remove_own_pid_file(pid_file: &Path) {
    let ours = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| parse_pid_file(&t))
        .is_some_and(|(pid, _, _)| pid == std::process::id());
    if ours {
        let _ = std::fs::remove_file(pid_file);
    }
}

/// The listener's two files, and what it keeps while it cannot write.
struct Logs {
    allowed: LogFile,
    refused: LogFile,
    /// Since a write failed: the lines not written yet (at most
    /// `PENDING`), and how many more were lost.
    down: Option<(Vec<Line>, u64)>,
}

impl Logs {
    /// Write a line, or keep it while the log cannot be written; a write
    /// that fails closes the gate (an error: the gate could not be closed,
    /// and the listener ends, which closes it too, by its timeout).
    fn write(&mut self, line: Line, gate: &mut Gate) -> std::io::Result<()> {
        if let Some((pending, lost)) = &mut self.down {
            if pending.len() < PENDING {
                pending.push(line);
            } else {
                *lost += 1;
            }
            return Ok(());
        }
        if let Err(e) = self.file_for(&line).append(&line) {
            gate.set(false)?;
            set_name(&format!("{NAME_DOWN}{}", down_word(&e)));
            self.down = Some((vec![line], 0));
        }
        Ok(())
    }

    /// While down: write `cut` (the line that says the cage's network was
    /// cut until now) and the kept lines; true when all went through and
    /// the log is up again.
    fn retry(&mut self, cut: Line) -> bool {
        let Some((pending, lost)) = self.down.take() else {
            return true;
        };
        let mut lines = vec![cut];
        if lost > 0 {
            lines.push(Line {
                rule: "lost".into(),
                ..lines[0].clone()
            });
        }
        lines.extend(pending.iter().cloned());
        for l in &lines {
            if self.file_for(l).append(l).is_err() {
                // Lines written twice are better than lines lost: try all
                // of them again at the next round.
                self.down = Some((pending, lost));
                return false;
            }
        }
        true
    }
}

impl Logs {
    /// Refusals in their own file; allowed connections, and what the
    /// listener says of the log itself (`cut`, `lost`), in the other.
    fn file_for(&mut self, line: &Line) -> &mut LogFile {
        if line.allowed || line.rule == "cut" || line.rule == "lost" {
            &mut self.allowed
        } else {
            &mut self.refused
        }
    }
}

/// Pure: the word in the listener's name for a write that failed.
pub fn down_word(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "nospc",
        Some(libc::EDQUOT) => "dquot",
        Some(libc::EIO) => "io",
        _ => "error",
    }
}

/// Name this process (`/proc/PID/comm`), which a reader of its state sees
/// without any disk.
fn set_name(name: &str) {
    let _ = std::fs::write("/proc/thread-self/comm", name);
}

/// The egress log's gate, from the listener: the element of
/// `rules::EGRESS_SET` that keeps it open, put there (renewed) or taken
/// out, through nftables' netlink interface in one transaction (a batch).
struct Gate {
    socket: netlink_sys::Socket,
    seq: u32,
}

impl Gate {
    fn new() -> std::io::Result<Gate> {
        let mut socket = netlink_sys::Socket::new(netlink_sys::constants::NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        rustix::net::sockopt::set_socket_timeout(
            &socket,
            rustix::net::sockopt::Timeout::Recv,
            Some(Duration::from_secs(2)),
        )?;
        Ok(Gate { socket, seq: 0 })
    }

    /// Open (the element put there again with a fresh timeout: added if it
    /// is not there, then replaced, as an element's timeout is not renewed
    /// by adding it again) or closed (added if not there, then removed).
    fn set(&mut self, open: bool) -> std::io::Result<()> {
        let msgs = gate_batch(open, self.seq);
        self.seq = self.seq.wrapping_add(msgs.len() as u32);
        let mut out = Vec::new();
        for m in &msgs {
            let mut b = vec![0u8; m.buffer_len()];
            m.serialize(&mut b);
            out.extend(b);
        }
        self.socket.send(&out, 0)?;
        // One answer for each message that asked for one: an
        // acknowledgement, or the error that undid the whole batch.
        let mut waiting = msgs.len() - 2;
        let mut buf = vec![0u8; 8192];
        while waiting > 0 {
            let n = self.socket.recv(&mut &mut buf[..], 0)?;
            let mut at = 0;
            while at < n && waiting > 0 {
                use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
                let m = NetlinkMessage::<netlink_packet_netfilter::NetfilterMessage>::deserialize(
                    &buf[at..n],
                )
                .map_err(std::io::Error::other)?;
                if let NetlinkPayload::Error(e) = &m.payload {
                    if e.code.is_some() {
                        return Err(e.to_io());
                    }
                    waiting -= 1;
                }
                let len = m.header.length as usize;
                if len == 0 {
                    break;
                }
                at += len;
            }
        }
        Ok(())
    }
}

/// Pure: the batch that opens the gate (`open`) or closes it, its messages
/// numbered from `seq`: begin, the element added (if missing), removed,
/// added again with a fresh timeout when opening, end.
fn gate_batch(
    open: bool,
    seq: u32,
) -> Vec<netlink_packet_core::NetlinkMessage<netlink_packet_netfilter::NetfilterMessage>> {
    use netlink_packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_REQUEST, NetlinkMessage};
    use netlink_packet_netfilter::nftables::{
        DataAttribute, ListAttribute, NfTablesMessage, SetElementAttribute, SetElementList,
        SetElementMessage,
    };
    use netlink_packet_netfilter::none::ControlMessage;
    use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};
    /// The nftables subsystem, which a batch names (nfnetlink.h).
    const NFNL_SUBSYS_NFTABLES: u16 = 10;
    let element = |timeout: bool| {
        let mut e = vec![SetElementAttribute::Key(DataAttribute::Value(vec![0; 4]))];
        if timeout {
            e.push(SetElementAttribute::Timeout(GATE_TIMEOUT.as_millis() as u64));
        }
        SetElementMessage {
            attributes: vec![
                SetElementList::Table(EGRESS_TABLE.into()),
                SetElementList::Set(EGRESS_SET.into()),
                SetElementList::Elements(vec![ListAttribute::Element(e)]),
            ],
        }
    };
    let inet = || NetfilterHeader::new(NetfilterProtoFamily::Inet, 0, 0);
    let control = |c: ControlMessage| {
        NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, NFNL_SUBSYS_NFTABLES),
            c,
        )
    };
    let mut inner = vec![
        (
            NetfilterMessage::new(inet(), NfTablesMessage::NewSetElement(element(true))),
            NLM_F_CREATE,
        ),
        (
            NetfilterMessage::new(inet(), NfTablesMessage::DeleteSetElement(element(false))),
            0,
        ),
    ];
    if open {
        inner.push((
            NetfilterMessage::new(inet(), NfTablesMessage::NewSetElement(element(true))),
            NLM_F_CREATE,
        ));
    }
    let mut msgs = vec![(control(ControlMessage::BatchBegin), 0)];
    msgs.extend(inner.into_iter().map(|(m, f)| (m, f | NLM_F_ACK)));
    msgs.push((control(ControlMessage::BatchEnd), 0));
    msgs.into_iter()
        .enumerate()
        .map(|(i, (m, flags))| {
            let mut n = NetlinkMessage::from(m);
            n.header.flags = NLM_F_REQUEST | flags;
            n.header.sequence_number = seq.wrapping_add(i as u32);
            n.finalize();
            n
        })
        .collect()
}

/// A namespace file's device and inode, as `stat -L` gives them.
fn netns_id(path: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// A listener that runs for this namespace, from its pid file: its pid.
/// Pure but for /proc: the pid must be alive and be our listener.
pub fn running(pid_file: &Path, netns: FileId) -> Option<u32> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    let (pid, dev, ino) = parse_pid_file(&text)?;
    if (dev, ino) != (netns.dev, netns.ino) {
        return None;
    }
    // A pid reused by another process (a cage's, whose command line it
    // chose) is read no further than a listener's line could be.
    let cmdline =
        crate::host::bounded::read_file(Path::new(&format!("/proc/{pid}/cmdline")), 64 * 1024)
            .ok()?
            .bytes;
    cmdline
        .split(|b| *b == 0)
        .any(|w| w == SUBCOMMAND.as_bytes())
        .then_some(pid)
}

/// A running cage's egress log, as `cage show`, the session object and
/// the status page give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LogState {
    /// Its listener runs and writes: the cage has its network.
    pub ok: bool,
    /// What is wrong, when it is not: the cage's network is cut until the
    /// log is written again.
    pub problem: Option<String>,
}

/// The state of a running cage's egress log, from its listener's pid file
/// and the listener's name (`/proc/PID/comm`): no disk is written, no
/// podman asked.
pub fn state(pid_file: &Path) -> LogState {
    let listener = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| parse_pid_file(&t))
        .and_then(|(pid, _, _)| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            cmdline
                .split(|b| *b == 0)
                .any(|w| w == SUBCOMMAND.as_bytes())
                .then(|| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok())?
        });
    state_of(listener.as_deref())
}

/// Pure: the state from the listener's name, None when none runs.
pub fn state_of(name: Option<&str>) -> LogState {
    let problem = match name.map(str::trim) {
        None => Some(
            "the egress log's listener is not running, so the cage's network is cut; `cage \
             start` (or the next turn) starts it again"
                .to_string(),
        ),
        Some(n) => n.strip_prefix(NAME_DOWN).map(|word| {
            let why = match word {
                "nospc" => "no space is left on the disk that holds the state folder",
                "dquot" => "the disk quota of the state folder is used up",
                "io" => "the disk that holds the state folder failed a write",
                _ => "a write failed",
            };
            format!(
                "the egress log cannot be written ({why}), so the cage's network is cut until it \
                 can be"
            )
        }),
    };
    LogState {
        ok: problem.is_none(),
        problem,
    }
}

/// `PID DEV INO`: the listener's pid file.
pub fn parse_pid_file(text: &str) -> Option<(u32, u64, u64)> {
    let mut w = text.split_whitespace();
    let r = (
        w.next()?.parse().ok()?,
        w.next()?.parse().ok()?,
        w.next()?.parse().ok()?,
    );
    w.next().is_none().then_some(r)
}

/// How long a listener may take to bind its group.
const READY: Duration = Duration::from_secs(15);

/// How often the listener looks for the gate's set while the rules load
/// beside it, and the start for the listener's PID file: each wait is on
/// the way to the cage's first command (a few tries of a cheap call).
const POLL: Duration = Duration::from_millis(1);

/// Start a cage's listener unless one runs for its namespace already, and
/// wait until it listens, so that nothing the cage does is left out.
/// `program` and `args` enter the namespace and run `SUBCOMMAND`
/// (`Host::egress_listener_argv`); `err_log` takes its errors.
pub fn ensure_listener(
    program: &Path,
    args: &[String],
    pid_file: &Path,
    err_log: &Path,
    netns: FileId,
) -> Result<()> {
    if running(pid_file, netns).is_some() {
        return Ok(());
    }
    let _ = std::fs::remove_file(pid_file);
    crate::host::process::spawn_detached(program, args, err_log, &[])?;
    let deadline = std::time::Instant::now() + READY;
    while std::time::Instant::now() < deadline {
        if running(pid_file, netns).is_some() {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
    let said = crate::host::bounded::read_tail(err_log, 64 * 1024).unwrap_or_default();
    let said = String::from_utf8_lossy(&said);
    let last = said.lines().rev().find(|l| !l.trim().is_empty());
    Err(Error::egress(crate::error::EgressProblem::NotStarted {
        last: last.map(str::to_string),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_statements_and_their_prefixes() {
        assert_eq!(
            log_statement("agent-port", false),
            "log group 7 prefix \"shrooms:refuse:agent-port\""
        );
        assert_eq!(
            log_statement("open", true),
            "log group 7 prefix \"shrooms:accept:open\""
        );
        assert_eq!(
            parse_prefix("shrooms:refuse:agent-port"),
            Some((false, "agent-port".into()))
        );
        assert_eq!(
            parse_prefix("shrooms:accept:open\0"),
            Some((true, "open".into()))
        );
        for bad in [
            "",
            "shrooms",
            "shrooms:accept",
            "shrooms:accept:",
            "shrooms:maybe:open",
            "other:accept:open",
            "shrooms:accept:Open",
            "shrooms:accept:a b",
            "shrooms:refuse:x\"y",
        ] {
            assert_eq!(parse_prefix(bad), None, "{bad}");
        }
        // Every prefix fits the kernel's 127 characters.
        assert!(log_statement(&"x".repeat(100), true).len() < 127 + 30);
    }

    fn ipv4(proto: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 2];
        p.extend(dst);
        p.extend(l4);
        p
    }

    fn dns_query(name: &str) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend(label.as_bytes());
        }
        m.extend([0, 0, 1, 0, 1]);
        m
    }

    #[test]
    fn destinations_of_packets() {
        // A TCP SYN to 203.0.113.7:443.
        let mut tcp = vec![0xc0, 0x01, 0x01, 0xbb];
        tcp.extend([0; 16]);
        let d = destination(&ipv4(6, [203, 0, 113, 7], &tcp)).unwrap();
        assert_eq!(d.address.to_string(), "203.0.113.7");
        assert_eq!(
            (d.protocol.as_str(), d.port, d.name),
            ("tcp", Some(443), None)
        );
        // A DNS question over UDP: its name.
        let mut udp = vec![0xc0, 0x02, 0x00, 0x35, 0, 0, 0, 0];
        udp.extend(dns_query("Example.ORG"));
        let d = destination(&ipv4(17, [10, 0, 2, 3], &udp)).unwrap();
        assert_eq!(d.port, Some(53));
        assert_eq!(d.name.as_deref(), Some("example.org"));
        // ICMP: no port.
        let d = destination(&ipv4(1, [192, 168, 1, 1], &[8, 0, 0, 0])).unwrap();
        assert_eq!((d.protocol.as_str(), d.port), ("icmp", None));
        // IPv6 UDP.
        let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
        v6.extend([0; 16]);
        v6.extend("fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        v6.extend([0x10, 0, 0x1f, 0x90, 0, 8, 0, 0]);
        let d = destination(&v6).unwrap();
        assert_eq!(d.address.to_string(), "fd00::1");
        assert_eq!((d.protocol.as_str(), d.port), ("udp", Some(8080)));
        // Garbage.
        assert_eq!(destination(&[]), None);
        assert_eq!(destination(&[0x45, 0, 0]), None);
        assert_eq!(destination(&[0x25; 40]), None);
    }

    #[test]
    fn only_plain_names_are_taken_from_dns_questions() {
        assert_eq!(
            dns_question(&dns_query("a-b.c_d.io")).as_deref(),
            Some("a-b.c_d.io")
        );
        // An answer, not a question.
        let mut answer = dns_query("example.org");
        answer[2] |= 0x80;
        assert_eq!(dns_question(&answer), None);
        // A name with a control character or a quote is not shown.
        assert_eq!(dns_question(&dns_query("ev\x1bil.org")), None);
        assert_eq!(dns_question(&dns_query("ev\"il.org")), None);
        // Cut short.
        let q = dns_query("example.org");
        assert_eq!(dns_question(&q[..15]), None);
    }

    #[test]
    fn the_json_line_shape() {
        let line = Line {
            time: "2026-12-01T18:00:00.000Z".into(),
            session: "s1".into(),
            address: "203.0.113.7".into(),
            name: None,
            port: Some(443),
            protocol: "tcp".into(),
            allowed: false,
            rule: "agent-port".into(),
        };
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            "{\"time\":\"2026-12-01T18:00:00.000Z\",\"session\":\"s1\",\"address\":\"203.0.113.7\",\
             \"name\":null,\"port\":443,\"protocol\":\"tcp\",\"allowed\":false,\"rule\":\"agent-port\"}"
        );
    }

    #[test]
    fn the_log_rotates_at_its_bound() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let path = dir.join("s1.egress.jsonl");
        assert_eq!(older(&path), dir.join("s1.egress.1.jsonl"));
        let line = |i: usize| Line {
            time: now_rfc3339_millis(),
            session: "s1".into(),
            address: format!("10.0.0.{}", i % 250),
            name: None,
            port: Some(80),
            protocol: "tcp".into(),
            allowed: i.is_multiple_of(2),
            rule: "open".into(),
        };
        let mut log = LogFile::open(&path, 2000).unwrap();
        for i in 0..200 {
            log.append(&line(i)).unwrap();
        }
        let size = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert!(size(&path) <= 2000);
        assert!(size(&older(&path)) <= 2000);
        let all = read(&path, &dir.join("none.jsonl")).unwrap();
        assert!(!all.is_empty() && all.len() < 200);
        assert_eq!(all.last().unwrap().address, "10.0.0.199");
        let refused = last_refusals(&all, 3);
        assert_eq!(refused.len(), 3);
        assert_eq!(refused[0].address, "10.0.0.199");
        assert_eq!(refused[1].address, "10.0.0.197");
        assert!(refused.iter().all(|l| !l.allowed));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_logs_state_from_its_listeners_name() {
        assert_eq!(
            state_of(Some("egress-listen\n")),
            LogState {
                ok: true,
                problem: None
            }
        );
        let down = state_of(Some("egress:nospc\n"));
        assert!(!down.ok);
        assert!(
            down.problem
                .as_deref()
                .unwrap()
                .contains("no space is left"),
            "{down:?}"
        );
        let gone = state_of(None);
        assert!(!gone.ok);
        assert!(gone.problem.unwrap().contains("not running"));
        // Each word fits a process name (15 bytes) after the prefix.
        let e = |n| std::io::Error::from_raw_os_error(n);
        for err in [
            e(libc::ENOSPC),
            e(libc::EDQUOT),
            e(libc::EIO),
            e(libc::EACCES),
        ] {
            let name = format!("{NAME_DOWN}{}", down_word(&err));
            assert!(name.len() <= 15, "{name}");
            assert!(!state_of(Some(&name)).ok);
        }
        assert!(NAME_UP.len() <= 15);
    }

    #[test]
    fn the_gates_batches() {
        use netlink_packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_REQUEST};
        let open = gate_batch(true, 7);
        assert_eq!(open.len(), 5);
        let flags: Vec<u16> = open.iter().map(|m| m.header.flags).collect();
        assert_eq!(
            flags,
            [
                NLM_F_REQUEST,
                NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
                NLM_F_REQUEST | NLM_F_ACK,
                NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK,
                NLM_F_REQUEST
            ]
        );
        let seqs: Vec<u32> = open.iter().map(|m| m.header.sequence_number).collect();
        assert_eq!(seqs, [7, 8, 9, 10, 11]);
        // Batch begin and end (nfnetlink's 0x10, 0x11), then nftables'
        // NEWSETELEM (0x0a0c) and DELSETELEM (0x0a0e).
        let types: Vec<u16> = open.iter().map(|m| m.header.message_type).collect();
        assert_eq!(types, [0x10, 0x0a0c, 0x0a0e, 0x0a0c, 0x11]);
        let mut bytes = vec![0u8; open[1].buffer_len()];
        open[1].serialize(&mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("shrooms_egress") && text.contains("alive"),
            "{text}"
        );
        let closed = gate_batch(false, 0);
        let types: Vec<u16> = closed.iter().map(|m| m.header.message_type).collect();
        assert_eq!(types, [0x10, 0x0a0c, 0x0a0e, 0x11]);
    }

    #[test]
    fn allowed_and_refused_read_back_merged_by_time() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_path_buf();
        let (a, r) = (
            dir.join("s.egress.jsonl"),
            dir.join("s.egress-refused.jsonl"),
        );
        let line = |t: &str, allowed: bool| Line {
            time: format!("2026-12-01T18:00:0{t}.000Z"),
            session: "s".into(),
            address: "203.0.113.7".into(),
            name: None,
            port: Some(443),
            protocol: "tcp".into(),
            allowed,
            rule: if allowed { "default" } else { "private" }.into(),
        };
        let mut logs = Logs {
            allowed: LogFile::open(&a, MAX_BYTES).unwrap(),
            refused: LogFile::open(&r, MAX_BYTES).unwrap(),
            down: None,
        };
        for (t, allowed) in [("1", true), ("2", false), ("3", true), ("4", false)] {
            let l = line(t, allowed);
            logs.file_for(&l).append(&l).unwrap();
        }
        let cut = Line {
            rule: "cut".into(),
            ..line("5", false)
        };
        logs.file_for(&cut).append(&cut).unwrap();
        // A line cut short by a full disk, in the older file: left out.
        std::fs::write(older(&r), "{\"time\":\"2026-12-01T17:00:00.000Z\",\"sess").unwrap();
        let all = read(&a, &r).unwrap();
        let seen: Vec<(String, bool)> = all.iter().map(|l| (l.rule.clone(), l.allowed)).collect();
        assert_eq!(
            seen,
            [
                ("default".to_string(), true),
                ("private".to_string(), false),
                ("default".to_string(), true),
                ("private".to_string(), false),
                ("cut".to_string(), false),
            ]
        );
        // The refusals are in their own file, `cut` with the allowed ones.
        assert_eq!(std::fs::read_to_string(&r).unwrap().lines().count(), 2);
        assert_eq!(std::fs::read_to_string(&a).unwrap().lines().count(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pid_files() {
        assert_eq!(
            parse_pid_file("12 4 4026532185\n"),
            Some((12, 4, 4026532185))
        );
        assert_eq!(parse_pid_file("12 4"), None);
        assert_eq!(parse_pid_file("12 4 5 6"), None);
        assert_eq!(parse_pid_file("x 4 5"), None);
    }
}
