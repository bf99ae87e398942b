//! The JSON shapes podman answers with, as far as the tool reads them. Every
//! field is optional or defaulted: podman 4.3 and 5.x differ in what they
//! print (seen on 4.3.1 and 5.4.2), and a missing field must not break
//! a command that does not need it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `podman info --format json`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Info {
    pub host: InfoHost,
    pub store: InfoStore,
    pub version: InfoVersion,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InfoHost {
    pub cgroup_version: String,
    pub cgroup_controllers: Option<Vec<String>>,
    pub security: InfoSecurity,
    /// From podman 4.6 (empty executable when pasta is missing).
    pub pasta: Option<InfoProgram>,
    pub database_backend: String,
    pub oci_runtime: Option<InfoRuntime>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InfoSecurity {
    pub rootless: bool,
    pub seccomp_profile_path: String,
    pub seccomp_enabled: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InfoProgram {
    pub executable: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InfoRuntime {
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InfoStore {
    pub volume_path: String,
    pub graph_root: String,
    pub graph_driver_name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InfoVersion {
    #[serde(rename = "Version")]
    pub version: String,
}

/// One entry of `podman inspect --type container --format json`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ContainerInspect {
    #[serde(rename = "State")]
    pub state: ContainerState,
    /// The program its first process runs (the entrypoint, or the
    /// command's first word).
    #[serde(rename = "Path")]
    pub path: String,
    #[serde(rename = "Mounts")]
    pub mounts: Option<Vec<InspectMount>>,
    #[serde(rename = "NetworkSettings")]
    pub network: NetworkSettings,
    /// The limits podman reports the container has (`cage limits NAME`).
    #[serde(rename = "HostConfig")]
    pub host_config: HostConfig,
    /// The file podman mounts at the cage's /etc/hosts (in its own
    /// storage, outside the cage), where a policy's names are pinned.
    #[serde(rename = "HostsPath")]
    pub hosts_path: String,
}

/// The part of an inspect's `HostConfig` that holds the limits: memory in
/// bytes, CPUs as nano-CPUs or a quota per period (podman sets the latter
/// for `--cpus`), processes; 0 or absent: none.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct HostConfig {
    #[serde(rename = "Memory")]
    pub memory: i64,
    #[serde(rename = "NanoCpus")]
    pub nano_cpus: i64,
    #[serde(rename = "CpuQuota")]
    pub cpu_quota: i64,
    #[serde(rename = "CpuPeriod")]
    pub cpu_period: u64,
    #[serde(rename = "PidsLimit")]
    pub pids_limit: i64,
}

/// One of a container's mounts, as `podman inspect` lists it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct InspectMount {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "Source")]
    pub source: String,
    #[serde(rename = "Destination")]
    pub destination: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct NetworkSettings {
    /// The network namespace podman made for the running container (a
    /// file under `/run/netns` as root, under `$XDG_RUNTIME_DIR/netns`
    /// rootless, where only `podman unshare` sees it); empty when stopped.
    #[serde(rename = "SandboxKey")]
    pub sandbox_key: String,
}

impl ContainerInspect {
    /// The file of the machine its first process runs: the bind mount at
    /// the path it runs. None when that program comes from the image (a
    /// cage made by shrooms-agent before its first process was the
    /// machine's catatonit ran `sleep` from the image's PATH).
    pub fn init_source(&self) -> Option<&str> {
        if !self.path.starts_with('/') {
            return None;
        }
        self.mounts
            .iter()
            .flatten()
            .find(|m| m.kind == "bind" && m.destination == self.path)
            .map(|m| m.source.as_str())
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ContainerState {
    #[serde(rename = "Status")]
    pub status: String,
    #[serde(rename = "Running")]
    pub running: bool,
    #[serde(rename = "Pid")]
    pub pid: i64,
}

/// One entry of `podman ps -a --format json` (4.3 and 5.x alike: `Names` a
/// list, `Labels` a map, `Created` Unix seconds).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PsEntry {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "Names")]
    pub names: Vec<String>,
    #[serde(rename = "Image")]
    pub image: String,
    #[serde(rename = "State")]
    pub state: String,
    #[serde(rename = "Labels")]
    pub labels: Option<BTreeMap<String, String>>,
}

impl PsEntry {
    pub fn name(&self) -> &str {
        self.names.first().map(String::as_str).unwrap_or("")
    }
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }
}

/// One entry of `podman volume inspect --format json`: a plain local volume
/// has `Options: {}`; one defined as a bind has `{"device": "/path", "o":
/// "bind", "type": "none"}` (seen on podman 4.3.1 and 5.4.2).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct VolumeInspect {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "Driver")]
    pub driver: String,
    #[serde(rename = "Mountpoint")]
    pub mountpoint: String,
    #[serde(rename = "Labels")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(rename = "Options")]
    pub options: Option<BTreeMap<String, String>>,
}

/// One entry of `podman image inspect --format json` (written back as
/// read, for the inspect kept between commands).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct ImageInspect {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "Config")]
    pub config: ImageConfig,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct ImageConfig {
    #[serde(rename = "Env")]
    pub env: Option<Vec<String>>,
    #[serde(rename = "Labels")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// When an image sets no PATH, podman gives a container this one.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl ImageInspect {
    /// The image's own PATH (podman's default when it sets none).
    pub fn path(&self) -> String {
        self.config
            .env
            .iter()
            .flatten()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or(DEFAULT_PATH)
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_of_podman_4_3_rootless() {
        let text = r#"{"host":{"cgroupVersion":"v1","cgroupControllers":[],
            "security":{"rootless":true,"seccompProfilePath":"/usr/share/containers/seccomp.json","seccompEnabled":true},
            "ociRuntime":{"name":"runc"}},
            "store":{"volumePath":"/home/u/.local/share/containers/storage/volumes"},
            "version":{"Version":"4.3.1"}}"#;
        let info: Info = serde_json::from_str(text).unwrap();
        assert_eq!(info.version.version, "4.3.1");
        assert!(info.host.security.rootless);
        assert_eq!(info.host.cgroup_version, "v1");
        assert!(info.host.pasta.is_none());
        assert_eq!(
            info.store.volume_path,
            "/home/u/.local/share/containers/storage/volumes"
        );
    }

    #[test]
    fn the_init_is_the_bind_mount_at_the_path_the_container_runs() {
        let text = r#"[{"Path":"/.shrooms-init-abc123","Args":["-P"],
            "Mounts":[{"Type":"bind","Source":"/p","Destination":"/p"},
                      {"Type":"bind","Source":"/usr/libexec/podman/catatonit",
                       "Destination":"/.shrooms-init-abc123","RW":false}],
            "NetworkSettings":{"SandboxKey":"/run/netns/netns-1"},
            "State":{"Running":true,"Pid":42}}]"#;
        let list: Vec<ContainerInspect> = serde_json::from_str(text).unwrap();
        assert_eq!(list[0].init_source(), Some("/usr/libexec/podman/catatonit"));
        assert_eq!(list[0].network.sandbox_key, "/run/netns/netns-1");
        assert_eq!(list[0].state.pid, 42);
        // A cage made before: `sleep infinity` from the image's PATH.
        let old = r#"[{"Path":"sleep","Args":["infinity"],"Mounts":[],"State":{}}]"#;
        let list: Vec<ContainerInspect> = serde_json::from_str(old).unwrap();
        assert_eq!(list[0].init_source(), None);
        // A program of the image's at an absolute path is no init of ours.
        let image = r#"[{"Path":"/bin/sleep","Mounts":[{"Type":"volume","Source":"v","Destination":"/bin/sleep"}]}]"#;
        let list: Vec<ContainerInspect> = serde_json::from_str(image).unwrap();
        assert_eq!(list[0].init_source(), None);
    }

    #[test]
    fn ps_entries() {
        let text = r#"[{"Id":"abc","Names":["shrooms-web-abc123"],"Image":"img","State":"exited",
            "Labels":{"xyz.vpavlin.shrooms.session":"web"},"Created":1700000000}]"#;
        let list: Vec<PsEntry> = serde_json::from_str(text).unwrap();
        assert_eq!(list[0].name(), "shrooms-web-abc123");
        assert_eq!(list[0].label("xyz.vpavlin.shrooms.session"), Some("web"));
    }

    #[test]
    fn image_path() {
        let text = r#"[{"Id":"i","Config":{"Env":["A=1","PATH=/bin:/usr/bin"]}}]"#;
        let list: Vec<ImageInspect> = serde_json::from_str(text).unwrap();
        assert_eq!(list[0].path(), "/bin:/usr/bin");
        let none: ImageInspect = serde_json::from_str(r#"{"Id":"i","Config":{}}"#).unwrap();
        assert_eq!(none.path(), DEFAULT_PATH);
    }
}
