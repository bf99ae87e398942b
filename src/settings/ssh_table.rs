//! The config's `[ssh]` table: the machines `--on NAME` reaches over ssh
//! (docs/machines.md, "On another machine"). Only what the config file reads, so that
//! settings need nothing of the ssh client itself (`remote`).

use std::path::PathBuf;

use serde::Deserialize;

/// A machine of `[ssh]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshMachine {
    /// As ssh(1) takes it: `[user@]host`, an alias of ~/.ssh/config, or
    /// `ssh://[user@]host[:port]`.
    pub destination: String,
    /// The program there (default `shrooms-agent`, found on the PATH of a
    /// non-interactive login).
    pub program: String,
    /// An ssh_config(5) file of its own (`ssh -F`).
    pub ssh_config: Option<PathBuf>,
}

/// An `[ssh]` entry: `name = "user@host"`, or a table.
#[derive(Debug)]
pub struct SshEntry(pub SshMachine);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SshTable {
    destination: String,
    program: Option<String>,
    ssh_config: Option<PathBuf>,
}

impl<'de> Deserialize<'de> for SshEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = SshEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "\"user@host\" or { destination = \"user@host\", program = \"shrooms-agent\", ssh_config = \"/path\" }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, d: &str) -> std::result::Result<SshEntry, E> {
                machine(d, None, None).map(SshEntry).map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<SshEntry, A::Error> {
                let t = SshTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                machine(&t.destination, t.program, t.ssh_config)
                    .map(SshEntry)
                    .map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

pub(crate) fn machine(
    destination: &str,
    program: Option<String>,
    ssh_config: Option<PathBuf>,
) -> std::result::Result<SshMachine, String> {
    check_destination(destination)?;
    let program = program.unwrap_or_else(|| "shrooms-agent".into());
    if program.trim().is_empty() || program.chars().any(char::is_control) {
        return Err(format!(
            "program {program:?} is not a program's name or path"
        ));
    }
    if let Some(c) = &ssh_config
        && !c.is_absolute()
    {
        return Err(format!(
            "ssh_config {} is not an absolute path",
            c.display()
        ));
    }
    Ok(SshMachine {
        destination: destination.to_string(),
        program,
        ssh_config,
    })
}

/// A destination ssh takes as one: not an option, no space, no control
/// character.
pub(crate) fn check_destination(d: &str) -> std::result::Result<(), String> {
    if d.is_empty() || d.starts_with('-') || d.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "{d:?} is not an ssh destination: [user@]host, an alias of ~/.ssh/config, or ssh://[user@]host[:port]"
        ));
    }
    Ok(())
}
