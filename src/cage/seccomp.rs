//! The seccomp profiles of the cages, derived at run time from podman's own
//! default profile, so that they keep whatever podman's packagers allow and
//! refuse, with these changes:
//!
//! - Every cage: the kernel's key management calls (`keyctl`, `add_key`,
//!   `request_key`) answer ENOSYS, as Docker's default profile refuses them
//!   (podman's allows `keyctl`). Keyrings are not namespaced by containers:
//!   a rootful cage without a user namespace of its own reached the host
//!   root's user keyring with `keyctl` (keyrings(7), "User keyrings").
//!   ENOSYS is what the profile answers for every call it does not list,
//!   and what programs that use keyrings take for "no keyrings here".
//! - A sealed cage: CLONE_NEWUSER refused too, which closes the door most
//!   container escapes go through (user namespaces give an unprivileged
//!   process the capabilities that kernel bugs are reached with). `clone`
//!   and `unshare` are allowed only without CLONE_NEWUSER, and `clone3`
//!   answers ENOSYS. clone3 passes its flags in a struct in memory, which
//!   seccomp cannot look into; ENOSYS makes glibc and others fall back to
//!   `clone`, where the flag can be checked.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{Doing, Error, MakeProblem, Result};

/// Where podman's packages put the default profile, in the order looked at.
pub const DEFAULT_PROFILES: [&str; 2] = [
    "/usr/share/containers/seccomp.json",
    "/etc/containers/seccomp.json",
];

/// CLONE_NEWUSER, from linux/sched.h.
pub const CLONE_NEWUSER: u64 = 0x1000_0000;

/// ENOSYS on x86_64 and arm64.
const ENOSYS: u64 = 38;

/// The syscalls whose rules a sealed cage's profile replaces.
const REPLACED: [&str; 3] = ["clone", "clone3", "unshare"];

/// The kernel's key management calls, refused in every cage.
pub const KEYRING_CALLS: [&str; 3] = ["keyctl", "add_key", "request_key"];

/// The first default profile that exists; a clear error if none does.
pub fn default_profile() -> Result<PathBuf> {
    DEFAULT_PROFILES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::make(MakeProblem::NoSeccompDefault {
                looked: DEFAULT_PROFILES.join(", "),
            })
        })
}

/// Read podman's default profile and derive a cage's from it: a sealed
/// cage's, or an ordinary one's.
pub fn profile_from_file(path: &Path, sealed: bool) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::act(Doing::Read(path.to_path_buf()), &e))?;
    derive(&text, sealed).map_err(|e| e.context(Doing::SeccompProfile(path.to_path_buf())))
}

/// Pure: podman's default profile (JSON text) -> the sealed profile.
#[cfg(test)]
pub fn sealed(default_profile: &str) -> Result<String> {
    derive(default_profile, true)
}

/// Pure: podman's default profile (JSON text) -> a cage's profile: the
/// keyring calls refused, and for a sealed cage CLONE_NEWUSER too.
pub fn derive(default_profile: &str, sealed: bool) -> Result<String> {
    let mut profile: Value = serde_json::from_str(default_profile)
        .map_err(|e| Error::act("not a seccomp profile", &e))?;
    let rules = profile
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| Error::make(MakeProblem::NotSeccomp))?;
    // Take the replaced syscalls out of every rule, whatever its condition,
    // so that no other rule can allow them unconditionally.
    let replaced = |s: &str| KEYRING_CALLS.contains(&s) || (sealed && REPLACED.contains(&s));
    for rule in rules.iter_mut() {
        if let Some(names) = rule.get_mut("names").and_then(Value::as_array_mut) {
            names.retain(|n| !n.as_str().is_some_and(replaced));
        }
    }
    rules.retain(|rule| {
        rule.get("names")
            .and_then(Value::as_array)
            .is_none_or(|n| !n.is_empty())
    });
    // Said in a rule of its own rather than left to the default action, so
    // that the answer holds whatever a packager's default is.
    rules.push(json!({
        "names": KEYRING_CALLS,
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": ENOSYS,
        "comment": "shrooms-agent cage: no kernel keyrings (as Docker's default profile)"
    }));
    if !sealed {
        return to_text(&profile);
    }
    let rules = profile
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| Error::make(MakeProblem::NotSeccomp))?;
    let without_newuser = |index: u64| {
        json!([{
            "index": index,
            "value": CLONE_NEWUSER,
            "valueTwo": 0,
            "op": "SCMP_CMP_MASKED_EQ"
        }])
    };
    // clone's flags are its first argument, but its second on s390 and
    // s390x (their clone takes the stack first), as in Docker's and
    // podman's own profiles.
    rules.push(json!({
        "names": ["clone"],
        "action": "SCMP_ACT_ALLOW",
        "args": without_newuser(0),
        "excludes": {"arches": ["s390", "s390x"]},
        "comment": "shrooms-agent sealed cage: clone without CLONE_NEWUSER"
    }));
    rules.push(json!({
        "names": ["clone"],
        "action": "SCMP_ACT_ALLOW",
        "args": without_newuser(1),
        "includes": {"arches": ["s390", "s390x"]},
        "comment": "shrooms-agent sealed cage: clone without CLONE_NEWUSER (s390: flags second)"
    }));
    rules.push(json!({
        "names": ["unshare"],
        "action": "SCMP_ACT_ALLOW",
        "args": without_newuser(0),
        "comment": "shrooms-agent sealed cage: unshare without CLONE_NEWUSER"
    }));
    rules.push(json!({
        "names": ["clone3"],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": ENOSYS,
        "comment": "shrooms-agent sealed cage: clone3 hides its flags; ENOSYS makes callers use clone"
    }));
    to_text(&profile)
}

fn to_text(profile: &Value) -> Result<String> {
    let mut text = serde_json::to_string_pretty(profile)
        .map_err(|e| Error::act("writing the seccomp profile", &e))?;
    text.push('\n');
    Ok(text)
}

/// A short hash of a profile's text, kept in the record so a later version
/// can tell which profile a cage was made with.
pub fn fingerprint(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PODMAN_LIKE: &str = r#"{
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 38,
        "syscalls": [
            {"names": ["read", "clone", "clone3", "setns", "unshare", "write"],
             "action": "SCMP_ACT_ALLOW", "args": [], "includes": {}, "excludes": {}},
            {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
             "includes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"names": ["mount"], "action": "SCMP_ACT_ALLOW",
             "includes": {"caps": ["CAP_SYS_ADMIN"]}}
        ]
    }"#;

    fn rules_for(profile: &Value, name: &str) -> Vec<Value> {
        profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["names"].as_array().unwrap().iter().any(|n| n == name))
            .cloned()
            .collect()
    }

    #[test]
    fn clone_and_unshare_only_without_newuser_and_clone3_enosys() {
        let p: Value = serde_json::from_str(&sealed(PODMAN_LIKE).unwrap()).unwrap();
        // unshare: its flags are its first argument everywhere; clone's
        // are its second on s390 and s390x.
        for (name, index, arches) in [
            ("unshare", 0, None),
            ("clone", 0, Some("excludes")),
            ("clone", 1, Some("includes")),
        ] {
            let rules: Vec<Value> = rules_for(&p, name)
                .into_iter()
                .filter(|r| r["args"][0]["index"] == index)
                .collect();
            assert_eq!(rules.len(), 1, "{name} {index}: {rules:?}");
            assert_eq!(rules[0]["action"], "SCMP_ACT_ALLOW");
            assert_eq!(rules[0]["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
            assert_eq!(rules[0]["args"][0]["value"], CLONE_NEWUSER);
            assert_eq!(rules[0]["args"][0]["valueTwo"], 0);
            if let Some(which) = arches {
                assert_eq!(
                    rules[0][which]["arches"],
                    json!(["s390", "s390x"]),
                    "{name} {index}"
                );
            }
        }
        assert_eq!(rules_for(&p, "clone").len(), 2);
        assert_eq!(rules_for(&p, "unshare").len(), 1);
        let c3 = rules_for(&p, "clone3");
        assert_eq!(c3.len(), 1);
        assert_eq!(c3[0]["action"], "SCMP_ACT_ERRNO");
        assert_eq!(c3[0]["errnoRet"], 38);
        // everything else is kept as it was
        assert_eq!(rules_for(&p, "read").len(), 1);
        assert_eq!(rules_for(&p, "setns").len(), 1);
        assert_eq!(rules_for(&p, "mount").len(), 1);
        assert_eq!(p["defaultAction"], "SCMP_ACT_ERRNO");
        // the rule that only held clone is gone, not left empty
        assert!(
            p["syscalls"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| !r["names"].as_array().unwrap().is_empty())
        );
    }

    #[test]
    fn the_machines_own_profile_derives() {
        // The real file of the installed podman (scripts/test installs it).
        let path = default_profile().expect("podman's seccomp.json: run scripts/test");
        let text = profile_from_file(&path, true).unwrap();
        let p: Value = serde_json::from_str(&text).unwrap();
        // Ours only: one for most arches, one for s390 and s390x.
        assert_eq!(rules_for(&p, "clone").len(), 2);
        assert_eq!(rules_for(&p, "clone3")[0]["action"], "SCMP_ACT_ERRNO");
        // Both profiles: the keyring calls only in our refusing rule
        // (podman's own allows keyctl).
        for sealed in [false, true] {
            let p: Value =
                serde_json::from_str(&profile_from_file(&path, sealed).unwrap()).unwrap();
            for call in KEYRING_CALLS {
                let rules = rules_for(&p, call);
                assert_eq!(rules.len(), 1, "{call}: {rules:?}");
                assert_eq!(rules[0]["action"], "SCMP_ACT_ERRNO", "{call}");
            }
        }
    }

    /// Every cage's profile: the keyring calls refused with ENOSYS, taken
    /// out of every rule that allowed them; an ordinary cage's keeps clone,
    /// clone3 and unshare as podman has them.
    #[test]
    fn keyring_calls_are_refused_in_every_profile() {
        let with_keys = PODMAN_LIKE.replace(
            r#"["read", "clone","#,
            r#"["read", "keyctl", "add_key", "clone","#,
        );
        for sealed in [false, true] {
            let p: Value = serde_json::from_str(&derive(&with_keys, sealed).unwrap()).unwrap();
            for call in KEYRING_CALLS {
                let rules = rules_for(&p, call);
                assert_eq!(rules.len(), 1, "{call}: {rules:?}");
                assert_eq!(rules[0]["action"], "SCMP_ACT_ERRNO");
                assert_eq!(rules[0]["errnoRet"], 38);
            }
            assert_eq!(rules_for(&p, "read").len(), 1);
        }
        let ordinary: Value = serde_json::from_str(&derive(&with_keys, false).unwrap()).unwrap();
        assert_eq!(rules_for(&ordinary, "clone").len(), 2);
        assert_eq!(
            rules_for(&ordinary, "clone3")[0]["action"],
            "SCMP_ACT_ALLOW"
        );
        assert_eq!(
            rules_for(&ordinary, "unshare")[0]["action"],
            "SCMP_ACT_ALLOW"
        );
    }

    #[test]
    fn not_a_profile() {
        assert!(sealed("[]").is_err());
        assert!(sealed("{").is_err());
    }

    #[test]
    fn fingerprints_differ() {
        assert_ne!(fingerprint("a"), fingerprint("b"));
        assert_eq!(fingerprint("a").len(), 12);
    }
}
