//! Pure functions from typed values to podman's argument lists (after
//! cross-rs's `docker/shared.rs`): one small function per
//! concern, and golden tests of whole command lines.

use std::path::Path;

use crate::cage::spec::{
    CageSpec, Mount, Network, PASTA_ADDRESS, PASTA_GATEWAY, SEALED_LABEL, SESSION_LABEL, SealedSpec,
};

/// `podman create ...` for a cage, from its `CageSpec`.
pub fn create(spec: &CageSpec) -> Vec<String> {
    let mut a: Vec<String> = vec!["create".into()];
    a.extend(["--name".into(), spec.container.clone()]);
    a.extend([
        "--label".into(),
        format!("{SESSION_LABEL}={}", spec.session),
    ]);
    a.extend(network(spec.network));
    if let Some(s) = &spec.sealed {
        a.extend(sealed(s));
    }
    if let Some(p) = &spec.seccomp_profile {
        a.extend(["--security-opt".into(), format!("seccomp={}", path(p))]);
    }
    if spec.own_userns {
        a.extend(userns());
    }
    // SELinux relabelling of a bind mount would change the labels of the
    // user's own project folder on the machine; the cage is contained by
    // the user namespace instead.
    a.extend(["--security-opt".into(), "label=disable".into()]);
    a.extend(capabilities());
    a.extend(limits(&spec.limits));
    // A stop need not wait: what the session started dies with PID 1, and
    // nothing in a cage is owed a grace period.
    a.extend(["--stop-signal".into(), "SIGKILL".into()]);
    // The first process's PID, written by podman at each start, where a
    // start reads it instead of asking podman again (podman-create(1),
    // `--pidfile`).
    if let Some(p) = &spec.pid_file {
        a.extend(["--pidfile".into(), path(p)]);
    }
    a.extend(init(spec));
    a.extend(["--workdir".into(), path(&spec.workdir)]);
    for m in &spec.mounts {
        let given = spec.own_userns && spec.own.contains(&m.src);
        a.extend(["--mount".into(), mount_given(m, given)]);
    }
    for (volume, dst) in &spec.volumes {
        a.extend([
            "--mount".into(),
            // podman mounts a named volume nosuid,nodev already; said here
            // so that it holds whatever podman's default.
            format!("type=volume,src={volume},dst={},nosuid,nodev", path(dst)),
        ]);
    }
    // `--` ends podman's options: an image named like a flag (`--image
    // --privileged`) is taken as a name, never as an option.
    a.push("--".into());
    // Nothing after the image: the init takes no argument, and starts no
    // program.
    a.push(spec.image.clone());
    a
}

/// The capabilities root inside a cage has: none but the ones below, named
/// one by one, so that a cage gets the same set whatever podman's version
/// or the machine's containers.conf would have given (podman's built-in
/// list and distributions' lists differ, and one seen here granted MKNOD,
/// AUDIT_WRITE and SETFCAP). podman starts from nothing when the drops
/// include ALL, then adds the `--cap-add`s (podman-run(1), `--cap-drop`).
///
/// Left out, on purpose:
/// - NET_ADMIN: root inside could remove the agent-port rule set loaded from
///   outside (docs/cages.md, "The agent port").
/// - NET_RAW: frames sent on an AF_PACKET socket skip nftables' output hook
///   (a raw SYN from a cage reached the agent port, and a sealed cage's LAN,
///   in a review).
/// - MKNOD: a block device node of the machine's disk, made in the project,
///   is a way to its raw blocks for whoever opens it outside.
/// - SETFCAP: a file capability set on a program in the project gives it
///   that capability for whoever runs it on the machine.
/// - AUDIT_WRITE: writing to the kernel's audit log is no business of a cage.
/// - SETPCAP: only moves capabilities between a process's own sets; nothing
///   that installs or runs software needs it.
pub const CAPABILITIES: &[&str] = &[
    // dpkg and tar give files to the users and groups a package names.
    "CHOWN",
    // root reads and writes files whatever their mode (package databases,
    // files of mode 000 such as /etc/shadow, folders of other users).
    "DAC_OVERRIDE",
    // chmod, utime and xattrs on files root does not own (dpkg sets the
    // modes and times of what it unpacks).
    "FOWNER",
    // chown and writes keep a file's set-user-ID and set-group-ID bits
    // (packages ship such programs in the image's own folders; the
    // folders of the machine are mounted nosuid).
    "FSETID",
    // root signals processes of other users in the cage (a package's
    // service, apt's download helper running as `_apt`).
    "KILL",
    // Dropping to another user or group: apt runs its downloads as `_apt`,
    // su and sudo, build tools that run tests as nobody.
    "SETGID",
    "SETUID",
    // Development servers on ports below 1024 inside the cage's own network
    // namespace.
    "NET_BIND_SERVICE",
    // dpkg's --root and build tools chroot into a folder; a chroot stays
    // inside the cage's own mount namespace.
    "SYS_CHROOT",
];

/// `--cap-drop ALL` then one `--cap-add` per capability of [`CAPABILITIES`].
pub fn capabilities() -> Vec<String> {
    let mut a = vec!["--cap-drop".to_string(), "ALL".to_string()];
    for c in CAPABILITIES {
        a.extend(["--cap-add".to_string(), (*c).to_string()]);
    }
    a
}

/// Where a cage's init is mounted: a name of its own right under `/`, as
/// the container's name is (random per container). The path is resolved in
/// the cage's root file system, which the cage can write and which outlives
/// a stop, and runc follows links when it mounts: a link planted at the
/// path, or at a folder above it, would send the mount somewhere a later
/// mount covers, and run what lies there instead. While the cage runs the
/// path is a mount point, which it can neither remove nor rename, and `/`
/// cannot be renamed; an image cannot know the name in advance.
pub fn init_path(container: &str) -> String {
    format!("/.shrooms-init-{container}")
}

/// PID 1 (nothing of the image or of the cage runs before the rules):
/// this program's init (`crate::cage::tools::INIT`: static, not dumpable, it
/// starts nothing and reaps), bind-mounted read-only. No
/// program of the image's (its ENTRYPOINT, a `sleep` on its PATH) and
/// nothing the cage wrote in its own layers runs before the network rules
/// are loaded from outside; the cage's own first program is what `cage
/// exec` starts. No podman `--init` around it (containers.conf `init =
/// true` would add one at a path under `/run`, which a cage can reach).
/// (`--no-healthcheck` is not passed: podman 5.4's `update` then fails with
/// "healthcheck-timeout must be at least 1 second", seen in the podman-5
/// lane; an image's HEALTHCHECK runs through a systemd timer, after the
/// rules are loaded.)
pub fn init(spec: &CageSpec) -> Vec<String> {
    let dst = init_path(&spec.container);
    vec![
        "--init=false".into(),
        "--mount".into(),
        mount(&Mount {
            src: spec.init.clone(),
            dst: dst.clone().into(),
            read_only: true,
        }),
        "--entrypoint".into(),
        dst,
    ]
}

/// What a sealed cage adds (docs/sealed.md, "Sealed cages"): its mark and public
/// resolvers (its seccomp profile, without user namespaces, follows).
pub fn sealed(s: &SealedSpec) -> Vec<String> {
    let mut a = vec!["--label".into(), format!("{SEALED_LABEL}=true")];
    for d in &s.dns {
        a.extend(["--dns".into(), d.clone()]);
    }
    a
}

/// The size of a rootful cage's user namespace: every uid and gid an image
/// may name (`nobody` is 65534), so none of its files is unmapped.
pub const USERNS_SIZE: u32 = 65536;

/// A rootful cage's own user namespace: podman takes a range of uids and
/// gids no other container has from the `containers` entries of
/// /etc/subuid and /etc/subgid (podman-run(1), `--userns=auto`), and root in
/// the cage is the first of them on the machine: an unprivileged uid that
/// owns no file of the machine's, whose set-user-ID programs make no one
/// root, and whose keyrings are not root's.
pub fn userns() -> Vec<String> {
    vec![format!("--userns=auto:size={USERNS_SIZE}")]
}

/// The network options for a mode.
pub fn network(n: Network) -> Vec<String> {
    let value = match n {
        // podman splits pasta's options on commas, so the IPv6 colons are
        // safe (podman PR #16141, 4.4).
        Network::Pasta => format!("pasta:-a,{PASTA_ADDRESS},-g,{PASTA_GATEWAY}"),
        // Said even though it is slirp4netns's own default: podman puts
        // containers.conf's `network_cmd_options` before these, and the
        // last word wins (slirp4netns(1), podman-run(1) `--network`), so no
        // configuration can let the cage reach the host's loopback.
        Network::Slirp4netns => "slirp4netns:allow_host_loopback=false".into(),
        Network::Bridge => "bridge".into(),
    };
    vec!["--network".into(), value]
}

/// The limits, as podman's create and update both take them.
pub fn limits(l: &crate::settings::Limits) -> Vec<String> {
    vec![
        "--memory".into(),
        l.memory.to_string(),
        "--cpus".into(),
        l.cpus.to_string(),
        "--pids-limit".into(),
        l.pids.to_string(),
    ]
}

/// One `--mount` value. podman reads it as a CSV record (podman #13922), so
/// a field holding a comma or a quote is quoted whole, with quotes doubled.
pub fn mount(m: &Mount) -> String {
    mount_given(m, false)
}

/// One `--mount` value; `given`: podman gives the source to the cage's
/// root at each start (`U=true`, podman-run(1), "Chowning Volume Mounts"),
/// for a cage in a user namespace of its own.
fn mount_given(m: &Mount, given: bool) -> String {
    let mut fields = vec![
        "type=bind".to_string(),
        format!("src={}", path(&m.src)),
        format!("dst={}", path(&m.dst)),
    ];
    if m.read_only {
        fields.push("ro=true".into());
    }
    if given {
        fields.push("U=true".into());
    }
    // Every folder of the machine a cage is given (its project, its
    // conversations, its outbox, the programs) is mounted without set-user-ID
    // and device files: a setuid program or a device node the cage leaves
    // there does nothing inside, whoever made it (podman-run(1), `--mount`
    // bind options `nosuid`, `nodev`).
    fields.push("nosuid".into());
    fields.push("nodev".into());
    fields
        .iter()
        .map(|f| {
            if f.contains([',', '"']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A `podman create` argv with the state folder's label added after the
/// session's (`spec::STATE_LABEL`).
pub fn with_state_label(mut argv: Vec<String>, state_id: &str) -> Vec<String> {
    let label = [
        "--label".to_string(),
        format!("{}={state_id}", crate::cage::spec::STATE_LABEL),
    ];
    let at = argv
        .iter()
        .position(|a| a.starts_with(&format!("{SESSION_LABEL}=")))
        .map_or(1.min(argv.len()), |i| i + 1);
    argv.splice(at..at, label);
    argv
}

/// A `podman create` argv made with `with_state_label`, its state label
/// given `state_id` instead (the id another process kept first); one
/// without that label is left as it is.
pub fn relabel_state(argv: &[String], state_id: &str) -> Vec<String> {
    let prefix = format!("{}=", crate::cage::spec::STATE_LABEL);
    let mut argv = argv.to_vec();
    // podman's options only: what follows `--` is the image's command.
    let end = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    for i in 1..end {
        if argv[i - 1] == "--label" && argv[i].starts_with(&prefix) {
            argv[i] = format!("{prefix}{state_id}");
        }
    }
    argv
}

/// `podman update` of a container's limits, all in one call: a podman 5
/// bug reset the limits not passed (podman #24610). `--pids-limit` for
/// update came with podman 4.4.
pub fn update(container: &str, l: &crate::settings::Limits, with_pids: bool) -> Vec<String> {
    let mut a: Vec<String> = vec!["update".into()];
    a.extend([
        "--memory".into(),
        l.memory.to_string(),
        "--cpus".into(),
        l.cpus.to_string(),
    ]);
    if with_pids {
        a.extend(["--pids-limit".into(), l.pids.to_string()]);
    }
    a.extend(["--".into(), container.into()]);
    a
}

/// A podman verb, its options, then `--` and the names it acts on. Every
/// call that names a container, a volume or an image puts `--` before the
/// names, so that a name read from a record or a request is never taken
/// for an option: a record whose `container` was `--all` made `cage rm` run
/// `podman rm -f --ignore --all` (cobra, podman's parser, ends options at
/// `--` in every verb; checked on 4.3 and 5.x).
fn named(words: &[&str], names: &[&str]) -> Vec<String> {
    words
        .iter()
        .copied()
        .chain(std::iter::once("--"))
        .chain(names.iter().copied())
        .map(str::to_string)
        .collect()
}

/// `podman start -- CONTAINER`.
pub fn start(container: &str) -> Vec<String> {
    named(&["start"], &[container])
}

/// `podman stop -- CONTAINER`.
pub fn stop(container: &str) -> Vec<String> {
    named(&["stop"], &[container])
}

/// `podman rm -f --ignore -- CONTAINER`: gone already is not an error.
pub fn rm_force(container: &str) -> Vec<String> {
    named(&["rm", "-f", "--ignore"], &[container])
}

/// `podman inspect --type container --format json -- CONTAINER`.
pub fn inspect_container(container: &str) -> Vec<String> {
    named(
        &["inspect", "--type", "container", "--format", "json"],
        &[container],
    )
}

/// `podman container exists -- CONTAINER`: exit 0 there, 1 not.
pub fn container_exists(container: &str) -> Vec<String> {
    named(&["container", "exists"], &[container])
}

/// `podman top -- CONTAINER args`: its processes' command lines.
pub fn top_args(container: &str) -> Vec<String> {
    named(&["top"], &[container, "args"])
}

/// `podman volume inspect --format json -- VOLUME`.
pub fn volume_inspect(volume: &str) -> Vec<String> {
    named(&["volume", "inspect", "--format", "json"], &[volume])
}

/// `podman volume exists -- VOLUME`: exit 0 there, 1 not.
pub fn volume_exists(volume: &str) -> Vec<String> {
    named(&["volume", "exists"], &[volume])
}

/// `podman volume create --label LABEL -- VOLUME`.
pub fn volume_create(volume: &str, label: &str) -> Vec<String> {
    named(&["volume", "create", "--label", label], &[volume])
}

/// `podman image inspect --format json -- IMAGE`.
pub fn image_inspect(image: &str) -> Vec<String> {
    named(&["image", "inspect", "--format", "json"], &[image])
}

/// `podman image exists -- IMAGE`: exit 0 there, 1 not.
pub fn image_exists(image: &str) -> Vec<String> {
    named(&["image", "exists"], &[image])
}

/// `podman image rm -- IMAGE`.
pub fn image_rm(image: &str) -> Vec<String> {
    named(&["image", "rm"], &[image])
}

/// The words the look for pi prints: it found one, or not.
pub const PI_FOUND: &str = "pi-found";
pub const PI_MISSING: &str = "pi-missing";

/// Is there a `pi` on an image's PATH? Asked of the image itself (by its
/// ID), in a container that is removed at once, has no network, no
/// capabilities and never gains privileges, and pulls nothing. Its own
/// `sh` looks along the image's PATH, as the cage's `podman exec` of `pi`
/// would. The answer is printed rather than given as an exit status, which
/// podman's own failures (125-127) and the runtime's would blur.
pub fn look_for_pi(image_id: &str) -> Vec<String> {
    let script = format!(
        "if command -v pi >/dev/null 2>&1; then echo {PI_FOUND}; else echo {PI_MISSING}; fi"
    );
    [
        "run",
        "--rm",
        "--network",
        "none",
        "--pull",
        "never",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--entrypoint",
        "sh",
        "--",
        image_id,
        "-c",
        &script,
    ]
    .map(str::to_string)
    .to_vec()
}

/// `podman exec` of a command in a cage (`cage exec`).
pub fn exec(
    container: &str,
    workdir: &Path,
    env_file: &Path,
    tty: bool,
    cmd: &[String],
) -> Vec<String> {
    let mut a: Vec<String> = vec!["exec".into(), "-i".into()];
    if tty {
        a.push("-t".into());
    }
    a.extend([
        "-w".into(),
        path(workdir),
        "--env-file".into(),
        path(env_file),
        "--".into(),
        container.into(),
    ]);
    a.extend(cmd.iter().cloned());
    a
}

/// `podman ps` of every cage, as JSON (one call for `cage ls`).
pub fn ps_cages() -> Vec<String> {
    vec![
        "ps".into(),
        "-a".into(),
        "--filter".into(),
        format!("label={SESSION_LABEL}"),
        "--format".into(),
        "json".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Limits;
    use std::path::PathBuf;

    fn spec(network: Network) -> CageSpec {
        CageSpec {
            session: "web".into(),
            container: "shrooms-web-abc123".into(),
            image: "localhost/shrooms-workbench:latest".into(),
            network,
            limits: Limits::of("4g", "2", 2048),
            mounts: vec![
                Mount {
                    src: "/home/u/src/web".into(),
                    dst: "/home/u/src/web".into(),
                    read_only: false,
                },
                Mount {
                    src: "/s/proxy".into(),
                    dst: "/run/shrooms-agent".into(),
                    read_only: true,
                },
            ],
            workdir: PathBuf::from("/home/u/src/web"),
            sealed: None,
            volumes: vec![],
            init: "/usr/libexec/podman/catatonit".into(),
            pid_file: None,
            seccomp_profile: None,
            own_userns: false,
            own: vec!["/home/u/src/web".into(), "/s/proxy".into()],
        }
    }

    /// Owned words, to compare a part of an argument vector with.
    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn golden_shared_volume() {
        let mut s = spec(Network::Bridge);
        s.mounts.clear();
        s.volumes = vec![("shrooms-shared".into(), "/shared".into())];
        let a = create(&s);
        assert!(
            a.ends_with(&words(&[
                "--mount",
                "type=volume,src=shrooms-shared,dst=/shared,nosuid,nodev",
                "--",
                "localhost/shrooms-workbench:latest",
            ])),
            "{a:?}"
        );
    }

    #[test]
    fn golden_state_label() {
        let a = with_state_label(create(&spec(Network::Bridge)), "0123abcd");
        // Given another id: only the label's value changes.
        let other = with_state_label(create(&spec(Network::Bridge)), "4567ef01");
        assert_eq!(relabel_state(&a, "4567ef01"), other);
        assert_eq!(
            relabel_state(&create(&spec(Network::Bridge)), "4567ef01"),
            create(&spec(Network::Bridge))
        );
        assert!(
            a.starts_with(&words(&[
                "create",
                "--name",
                "shrooms-web-abc123",
                "--label",
                "xyz.vpavlin.shrooms.session=web",
                "--label",
                "xyz.vpavlin.shrooms.state=0123abcd",
                "--network",
                "bridge"
            ])),
            "{a:?}"
        );
    }

    #[test]
    fn golden_update() {
        let l = crate::settings::Limits::of("1g", "1.5", 100);
        assert_eq!(
            update("c", &l, true),
            [
                "update",
                "--memory",
                "1g",
                "--cpus",
                "1.5",
                "--pids-limit",
                "100",
                "--",
                "c"
            ]
        );
        assert_eq!(
            update("c", &l, false),
            ["update", "--memory", "1g", "--cpus", "1.5", "--", "c"]
        );
    }

    #[test]
    fn golden_create_sealed() {
        let mut s = spec(Network::Bridge);
        s.mounts.truncate(1);
        s.sealed = Some(SealedSpec {
            dns: vec!["1.1.1.1".into(), "9.9.9.9".into()],
        });
        s.seccomp_profile = Some("/s/cages/c/seccomp.json".into());
        assert_eq!(
            create(&s),
            [
                "create",
                "--name",
                "shrooms-web-abc123",
                "--label",
                "xyz.vpavlin.shrooms.session=web",
                "--network",
                "bridge",
                "--label",
                "xyz.vpavlin.shrooms.sealed=true",
                "--dns",
                "1.1.1.1",
                "--dns",
                "9.9.9.9",
                "--security-opt",
                "seccomp=/s/cages/c/seccomp.json",
                "--security-opt",
                "label=disable",
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CHOWN",
                "--cap-add",
                "DAC_OVERRIDE",
                "--cap-add",
                "FOWNER",
                "--cap-add",
                "FSETID",
                "--cap-add",
                "KILL",
                "--cap-add",
                "SETGID",
                "--cap-add",
                "SETUID",
                "--cap-add",
                "NET_BIND_SERVICE",
                "--cap-add",
                "SYS_CHROOT",
                "--memory",
                "4g",
                "--cpus",
                "2",
                "--pids-limit",
                "2048",
                "--stop-signal",
                "SIGKILL",
                "--init=false",
                "--mount",
                "type=bind,src=/usr/libexec/podman/catatonit,dst=/.shrooms-init-shrooms-web-abc123,ro=true,nosuid,nodev",
                "--entrypoint",
                "/.shrooms-init-shrooms-web-abc123",
                "--workdir",
                "/home/u/src/web",
                "--mount",
                "type=bind,src=/home/u/src/web,dst=/home/u/src/web,nosuid,nodev",
                "--",
                "localhost/shrooms-workbench:latest",
            ]
        );
    }

    #[test]
    fn golden_create_with_pasta() {
        assert_eq!(
            create(&spec(Network::Pasta)),
            [
                "create",
                "--name",
                "shrooms-web-abc123",
                "--label",
                "xyz.vpavlin.shrooms.session=web",
                "--network",
                "pasta:-a,fd5e:ca9e:1::2,-g,fd5e:ca9e:1::1",
                "--security-opt",
                "label=disable",
                "--cap-drop",
                "ALL",
                "--cap-add",
                "CHOWN",
                "--cap-add",
                "DAC_OVERRIDE",
                "--cap-add",
                "FOWNER",
                "--cap-add",
                "FSETID",
                "--cap-add",
                "KILL",
                "--cap-add",
                "SETGID",
                "--cap-add",
                "SETUID",
                "--cap-add",
                "NET_BIND_SERVICE",
                "--cap-add",
                "SYS_CHROOT",
                "--memory",
                "4g",
                "--cpus",
                "2",
                "--pids-limit",
                "2048",
                "--stop-signal",
                "SIGKILL",
                "--init=false",
                "--mount",
                "type=bind,src=/usr/libexec/podman/catatonit,dst=/.shrooms-init-shrooms-web-abc123,ro=true,nosuid,nodev",
                "--entrypoint",
                "/.shrooms-init-shrooms-web-abc123",
                "--workdir",
                "/home/u/src/web",
                "--mount",
                "type=bind,src=/home/u/src/web,dst=/home/u/src/web,nosuid,nodev",
                "--mount",
                "type=bind,src=/s/proxy,dst=/run/shrooms-agent,ro=true,nosuid,nodev",
                "--",
                "localhost/shrooms-workbench:latest",
            ]
        );
    }

    /// Rootful: the cage in a user namespace of its own, its own mounts
    /// given to its root, every cage's seccomp profile; all else as the
    /// same cage's without them.
    #[test]
    fn golden_create_rootful() {
        let plain = create(&spec(Network::Bridge));
        let mut s = spec(Network::Bridge);
        s.own_userns = true;
        s.seccomp_profile = Some("/s/cages/c/seccomp.json".into());
        let mut expected = plain.clone();
        let at = expected.iter().position(|a| a == "bridge").unwrap() + 1;
        expected.splice(
            at..at,
            words(&[
                "--security-opt",
                "seccomp=/s/cages/c/seccomp.json",
                "--userns=auto:size=65536",
            ]),
        );
        for (from, to) in [
            (
                "type=bind,src=/home/u/src/web,dst=/home/u/src/web,nosuid,nodev",
                "type=bind,src=/home/u/src/web,dst=/home/u/src/web,U=true,nosuid,nodev",
            ),
            (
                "type=bind,src=/s/proxy,dst=/run/shrooms-agent,ro=true,nosuid,nodev",
                "type=bind,src=/s/proxy,dst=/run/shrooms-agent,ro=true,U=true,nosuid,nodev",
            ),
        ] {
            let i = expected.iter().position(|a| a == from).unwrap();
            expected[i] = to.to_string();
        }
        assert_eq!(create(&s), expected);
        // Without a user namespace of its own, nothing is given.
        assert!(
            !plain
                .iter()
                .any(|a| a.contains("U=true") || a.starts_with("--userns"))
        );
    }

    /// The PID file podman writes at each start, right after the stop
    /// signal, where the cage's folder in the state folder has it.
    #[test]
    fn golden_pid_file() {
        let mut s = spec(Network::Bridge);
        assert!(!create(&s).contains(&"--pidfile".to_string()));
        s.pid_file = Some("/s/cages/shrooms-web-abc123/pid".into());
        let a = create(&s);
        let at = a.iter().position(|x| x == "--stop-signal").unwrap();
        assert_eq!(
            a[at..at + 4],
            [
                "--stop-signal",
                "SIGKILL",
                "--pidfile",
                "/s/cages/shrooms-web-abc123/pid"
            ]
        );
    }

    #[test]
    fn golden_network_modes() {
        assert_eq!(
            network(Network::Slirp4netns),
            vec!["--network", "slirp4netns:allow_host_loopback=false"]
        );
        assert_eq!(network(Network::Bridge), vec!["--network", "bridge"]);
        let a = create(&spec(Network::Slirp4netns));
        let i = a.iter().position(|x| x == "--network").unwrap();
        assert_eq!(a[i + 1], "slirp4netns:allow_host_loopback=false");
    }

    #[test]
    fn a_comma_in_a_path_is_quoted_for_podmans_csv() {
        let m = Mount {
            src: "/p/a,b\"c".into(),
            dst: "/p/a,b\"c".into(),
            read_only: true,
        };
        assert_eq!(
            mount(&m),
            "type=bind,\"src=/p/a,b\"\"c\",\"dst=/p/a,b\"\"c\",ro=true,nosuid,nodev"
        );
    }

    #[test]
    fn golden_exec() {
        let cmd = vec!["claude".to_string(), "--resume".to_string()];
        assert_eq!(
            exec(
                "shrooms-web-abc123",
                Path::new("/home/u/src/web"),
                Path::new("/s/cages/shrooms-web-abc123.env"),
                true,
                &cmd
            ),
            [
                "exec",
                "-i",
                "-t",
                "-w",
                "/home/u/src/web",
                "--env-file",
                "/s/cages/shrooms-web-abc123.env",
                "--",
                "shrooms-web-abc123",
                "claude",
                "--resume"
            ]
        );
        assert!(!exec("c", Path::new("/"), Path::new("/e"), false, &cmd).contains(&"-t".into()));
    }

    /// A name read from a record or a request is never taken for an
    /// option: `--` comes before it in every call that names something.
    #[test]
    fn golden_calls_that_name_a_container_a_volume_or_an_image() {
        assert_eq!(start("--all"), ["start", "--", "--all"]);
        assert_eq!(stop("--all"), ["stop", "--", "--all"]);
        assert_eq!(rm_force("--all"), ["rm", "-f", "--ignore", "--", "--all"]);
        assert_eq!(
            inspect_container("--all"),
            [
                "inspect",
                "--type",
                "container",
                "--format",
                "json",
                "--",
                "--all"
            ]
        );
        assert_eq!(top_args("--all"), ["top", "--", "--all", "args"]);
        assert_eq!(
            volume_inspect("--all"),
            ["volume", "inspect", "--format", "json", "--", "--all"]
        );
        assert_eq!(
            volume_create("shrooms-shared", "l=true"),
            [
                "volume",
                "create",
                "--label",
                "l=true",
                "--",
                "shrooms-shared"
            ]
        );
        assert_eq!(
            image_inspect("--privileged"),
            ["image", "inspect", "--format", "json", "--", "--privileged"]
        );
        assert_eq!(image_rm("abc"), ["image", "rm", "--", "abc"]);
        assert_eq!(
            look_for_pi("0123abcd"),
            [
                "run",
                "--rm",
                "--network",
                "none",
                "--pull",
                "never",
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
                "--entrypoint",
                "sh",
                "--",
                "0123abcd",
                "-c",
                "if command -v pi >/dev/null 2>&1; then echo pi-found; else echo pi-missing; fi"
            ]
        );
        let mut s = spec(Network::Bridge);
        s.image = "--privileged".into();
        assert!(create(&s).ends_with(&words(&["--", "--privileged"])));
    }

    /// PID 1 is this program's init at a path of the container's own,
    /// never a program looked up on the image's PATH, whatever the image.
    #[test]
    fn the_first_process_is_the_init() {
        let mut s = spec(Network::Slirp4netns);
        s.container = "shrooms-x-0a0b0c".into();
        s.init = "/opt/a,b/catatonit".into();
        let a = create(&s);
        let at = |flag: &str| {
            let i = a.iter().position(|x| x == flag).unwrap();
            a[i + 1].clone()
        };
        assert_eq!(at("--entrypoint"), "/.shrooms-init-shrooms-x-0a0b0c");
        assert!(a.contains(&"--init=false".to_string()));
        assert!(
            a.contains(
                &"type=bind,\"src=/opt/a,b/catatonit\",dst=/.shrooms-init-shrooms-x-0a0b0c,ro=true,nosuid,nodev"
                    .to_string()
            )
        );
        // Nothing after the image.
        let image = a.iter().position(|x| x == &s.image).unwrap();
        assert_eq!(&a[image - 1..], ["--", s.image.as_str()]);
        assert!(!a.iter().any(|x| x == "sleep" || x == "infinity"));
    }

    /// All dropped first, then only the named ones; none of those that
    /// reach the machine or the rules.
    #[test]
    fn capabilities_are_a_fixed_list() {
        let a = create(&spec(Network::Bridge));
        let i = a.iter().position(|x| x == "--cap-drop").unwrap();
        assert_eq!(a[i + 1], "ALL");
        assert_eq!(a.iter().filter(|x| *x == "--cap-drop").count(), 1);
        let added: Vec<&str> = a
            .windows(2)
            .filter(|w| w[0] == "--cap-add")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(added, CAPABILITIES);
        for bad in [
            "MKNOD",
            "SETFCAP",
            "AUDIT_WRITE",
            "NET_RAW",
            "NET_ADMIN",
            "SYS_ADMIN",
            "SETPCAP",
        ] {
            assert!(!added.contains(&bad), "{bad}");
        }
        assert!(
            a.iter()
                .position(|x| x == "--cap-add")
                .is_some_and(|j| j > i)
        );
    }

    /// The `exists` verbs that tell "not there" by exit status, each with
    /// `--` before the name.
    #[test]
    fn golden_exists_calls() {
        assert_eq!(
            container_exists("--all"),
            ["container", "exists", "--", "--all"]
        );
        assert_eq!(volume_exists("--all"), ["volume", "exists", "--", "--all"]);
        assert_eq!(
            image_exists("--privileged"),
            ["image", "exists", "--", "--privileged"]
        );
    }

    #[test]
    fn no_value_of_the_environment_on_the_command_line() {
        let a = create(&spec(Network::Pasta));
        assert!(
            !a.iter()
                .any(|x| x == "--env" || x == "-e" || x.starts_with("--env="))
        );
    }

    /// The protected paths over the project (docs/security.md, "Protected paths"):
    /// right after the project, folders on the way read-write over
    /// themselves before what they hold, read-only; nothing else of the
    /// command line changes.
    #[test]
    fn golden_protected_paths_mounts() {
        let mut s = spec(Network::Bridge);
        let plain = create(&s);
        let protected = [
            ("/home/u/src/web/.claude", true),
            ("/home/u/src/web/.git", false),
            ("/home/u/src/web/.git/config", true),
            ("/home/u/src/web/.git/hooks", true),
        ];
        for (i, (p, ro)) in protected.iter().enumerate() {
            s.mounts.insert(
                1 + i,
                Mount {
                    src: p.into(),
                    dst: p.into(),
                    read_only: *ro,
                },
            );
        }
        let a = create(&s);
        let mounts: Vec<&str> = a
            .windows(2)
            .filter(|w| w[0] == "--mount")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            mounts,
            [
                "type=bind,src=/usr/libexec/podman/catatonit,dst=/.shrooms-init-shrooms-web-abc123,ro=true,nosuid,nodev",
                "type=bind,src=/home/u/src/web,dst=/home/u/src/web,nosuid,nodev",
                "type=bind,src=/home/u/src/web/.claude,dst=/home/u/src/web/.claude,ro=true,nosuid,nodev",
                "type=bind,src=/home/u/src/web/.git,dst=/home/u/src/web/.git,nosuid,nodev",
                "type=bind,src=/home/u/src/web/.git/config,dst=/home/u/src/web/.git/config,ro=true,nosuid,nodev",
                "type=bind,src=/home/u/src/web/.git/hooks,dst=/home/u/src/web/.git/hooks,ro=true,nosuid,nodev",
                "type=bind,src=/s/proxy,dst=/run/shrooms-agent,ro=true,nosuid,nodev",
            ]
        );
        assert_eq!(a.len(), plain.len() + 2 * protected.len());
    }
}
