//! `shrooms-agent mcp`: the shrooms tools, as an MCP server on standard
//! input and output, for a harness in a cage (docs/cages.md, "The shrooms tools
//! inside"). Each tool is one or two requests to the cage's socket
//! (`$SHROOMS_AGENT_PROXY`, /run/shrooms-agent/proxy.sock), which the
//! process holding the turn serves: it names the cage to the receiver and
//! forwards only these requests. This module decides nothing about who may
//! do what; it turns a tool call into the socket's request and its answer
//! into text a model reads.
//!
//! The protocol is the official Rust SDK's (`rmcp`): the handshake, the
//! tools' JSON schemas and the framing are its, so that what Claude Code or
//! another client speaks is met by the reference implementation rather than
//! by ours.

use std::path::{Path, PathBuf};
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The variable every cage carries with its socket's path (`spec::env_plan`).
pub const SOCKET_VAR: &str = "SHROOMS_AGENT_PROXY";

/// The tools, in the order a client lists them.
pub const TOOLS: [&str; 6] = [
    "list_agents",
    "ask_agent",
    "task_status",
    "task_update",
    "task_ack",
    "send_file",
];

/// The only tool a sealed cage's socket lets through: a sealed session
/// finishes the tasks it is given and asks nobody anything.
pub const SEALED_TOOLS: [&str; 1] = ["task_update"];

/// The largest file `send_file` sends: the socket's cap on a drop.
pub const MAX_FILE: u64 = 100 * 1024 * 1024;

/// How long a blocking `ask_agent` may take: the receiving agent holds a
/// blocking send for at most ten minutes, and answers then.
const ASK_WAIT: Duration = Duration::from_secs(11 * 60);
const SEND_FILE_WAIT: Duration = Duration::from_secs(10 * 60);
const SHORT: Duration = Duration::from_secs(30);

/// What the server says of itself at the handshake, for the model.
const INSTRUCTIONS: &str = "The other coding-agent sessions this machine knows of, here and on \
    the machines it names, each called MACHINE/SESSION. list_agents shows them; ask_agent gives \
    one a task and by default waits for its reply; task_status follows a task; task_ack closes a \
    task you gave once you have what you needed; task_update finishes a task given to you; \
    send_file sends a file. They work inside a cage, through its socket to the agent running \
    this turn.";

/// Start the server on standard input and output; it ends when its input
/// does. `sealed` offers only the tool a sealed cage is let use.
pub fn run(sealed: bool, env: &crate::settings::Env) -> Result<()> {
    let socket = env
        .get(SOCKET_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let session = env
        .get("SHROOMS_AGENT_SESSION")
        .cloned()
        .unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::act("starting the MCP server", &e))?;
    runtime.block_on(async move {
        let server = Tools::new(Socket { path: socket }, sealed, session);
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::act("the MCP handshake on standard input", &e))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::act("the MCP server", &e))?;
        Ok(())
    })
}

/// The cage's socket, as the tools reach it.
#[derive(Debug, Clone)]
struct Socket {
    path: Option<PathBuf>,
}

/// One machine, as the socket lists them: this one first.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
struct Machine {
    name: String,
    addr: String,
}

/// The answer to one request: its status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// A request's body and its type.
struct Body {
    content_type: &'static str,
    bytes: Vec<u8>,
}

impl Socket {
    /// Where the socket is, or why the tools cannot work here.
    fn path(&self) -> std::result::Result<&Path, String> {
        let Some(p) = &self.path else {
            return Err(format!(
                "{SOCKET_VAR} is not set: the shrooms tools work only inside a cage, where \
                 they reach other agents through the cage's socket (shrooms-agent cage run)"
            ));
        };
        if !p.exists() {
            return Err(not_served(p, "there is no socket there"));
        }
        Ok(p)
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Body>,
        timeout: Duration,
    ) -> std::result::Result<Answer, String> {
        let socket = self.path()?;
        // reqwest is hyper's client; here over the Unix socket, where the
        // host name is not looked up and only names the request.
        let client = reqwest::Client::builder()
            .unix_socket(socket)
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .map_err(|e| format!("the cage's socket: {e}"))?;
        let mut req = client.request(method, format!("http://cage{path}"));
        if let Some(b) = body {
            req = req.header("Content-Type", b.content_type).body(b.bytes);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                not_served(socket, "nothing answers there")
            } else if e.is_timeout() {
                format!(
                    "no answer through the cage's socket in {}s",
                    timeout.as_secs()
                )
            } else {
                format!("the cage's socket: {e}")
            }
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("reading the answer through the cage's socket: {e}"))?;
        Ok(Answer {
            status,
            body: body.to_vec(),
        })
    }

    /// This machine and the others, from the socket itself.
    async fn machines(&self) -> std::result::Result<Vec<Machine>, String> {
        let a = self
            .request(reqwest::Method::GET, "/machines", None, SHORT)
            .await?;
        if a.status != 200 {
            return Err(refused("the list of machines", "the cage's socket", &a));
        }
        serde_json::from_slice(&a.body)
            .map_err(|e| format!("the cage's socket listed the machines in another form: {e}"))
    }

    /// The machine called `name` (or at that address).
    async fn machine(&self, name: &str) -> std::result::Result<Machine, String> {
        let all = self.machines().await?;
        find_machine(&all, name)
    }
}

fn not_served(socket: &Path, what: &str) -> String {
    format!(
        "the cage's socket {}: {what}. It is served by the shrooms-agent process holding this \
         cage's turn (cage run, cage exec) for as long as the turn runs",
        socket.display()
    )
}

/// The machine named, or at that address; the names known when none is.
fn find_machine(all: &[Machine], name: &str) -> std::result::Result<Machine, String> {
    all.iter()
        .find(|m| m.name == name)
        .or_else(|| all.iter().find(|m| m.addr == name))
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
            format!(
                "no machine called {name:?}; the machines are: {} (list_agents shows their sessions)",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
}

/// What may stand in one path segment as it is; the rest is %-encoded, so
/// that an address such as `[fd00::1]:7387` stays one segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The socket's path to `rest` (which starts with `/`) on machine `m`.
fn peer_path(m: &Machine, rest: &str) -> String {
    format!("/peer/{}{rest}", segment(&m.addr))
}

/// `MACHINE/SESSION`, split.
fn split_to(to: &str) -> std::result::Result<(&str, &str), String> {
    match to.split_once('/') {
        Some((m, s)) if !m.is_empty() && !s.is_empty() && !s.contains('/') => Ok((m, s)),
        _ => Err(format!(
            "{to:?}: want MACHINE/SESSION, as list_agents shows it (e.g. studio/review)"
        )),
    }
}

/// `MACHINE/SESSION:MESSAGE-ID`: the machine, and the task's id there.
fn split_task(task: &str) -> std::result::Result<(&str, &str), String> {
    match task.split_once('/') {
        Some((m, id))
            if !m.is_empty()
                && id
                    .split_once(':')
                    .is_some_and(|(s, i)| !s.is_empty() && !i.is_empty()) =>
        {
            Ok((m, id))
        }
        _ => Err(format!(
            "{task:?}: want MACHINE/SESSION:MESSAGE-ID, as ask_agent returned it"
        )),
    }
}

/// The words of a refusal: the JSON `error` of our serve and socket, else
/// the start of the body.
fn refused(what: &str, from: &str, a: &Answer) -> String {
    let said = serde_json::from_slice::<Value>(&a.body)
        .ok()
        .and_then(|v| {
            v["error"]
                .as_str()
                .map(str::to_string)
                .or_else(|| v["error"]["message"].as_str().map(str::to_string))
        })
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&a.body);
            let text = text.trim();
            if text.is_empty() {
                "(no reason given)".to_string()
            } else {
                text.chars().take(300).collect()
            }
        });
    let reason = reqwest::StatusCode::from_u16(a.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{what}: {from} answered {} {reason}: {said}", a.status)
}

/// A task's state as a person reads it: `TASK_STATE_INPUT_REQUIRED` and
/// `input-required` are both `input-required`.
fn state_word(state: &str) -> String {
    state
        .strip_prefix("TASK_STATE_")
        .unwrap_or(state)
        .to_lowercase()
        .replace('_', "-")
}

/// The texts of a message's parts, one paragraph each.
fn texts(message: &Value) -> Vec<String> {
    message["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A task as a model reads it: `task MACHINE/ID: state`, what the agent
/// running it notes of it, then what the session said.
fn render_task(machine: &str, task: &Value) -> String {
    let id = task["id"].as_str().unwrap_or("?");
    let state = task["status"]["state"].as_str().unwrap_or("unknown");
    let mut out = format!("task {machine}/{id}: {}\n", state_word(state));
    let meta = &task["metadata"];
    if meta["shrooms/queued"].as_bool() == Some(true) {
        out.push_str("(queued: the session is busy and starts it when free)\n");
    }
    if let Some(n) = meta["shrooms/nudges"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!("(reminded {n} times for going quiet)\n"));
    }
    if meta["shrooms/stalled"].as_bool() == Some(true) {
        out.push_str("(stalled: no progress after the reminders; its owner is told)\n");
    }
    if meta["shrooms/acknowledged"].as_bool() == Some(true) {
        out.push_str("(acknowledged)\n");
    }
    for t in texts(&task["status"]["message"]) {
        out.push_str(&format!("\n{t}\n"));
    }
    out
}

/// The task in an A2A answer: `result.task` (SendMessage), the result
/// itself (GetTask), or a bare reply message.
fn answer_text(machine: &str, result: &Value) -> String {
    if result["task"].is_object() {
        return render_task(machine, &result["task"]);
    }
    if result["status"].is_object() {
        return render_task(machine, result);
    }
    let message = if result["message"].is_object() {
        &result["message"]
    } else {
        result
    };
    let t = texts(message);
    if t.is_empty() {
        format!("{machine} answered: {result}")
    } else {
        t.join("\n\n") + "\n"
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AskArgs {
    /// MACHINE/SESSION, as list_agents shows it (e.g. studio/review).
    to: String,
    /// The message: say who you are, what you want, and whether you need a reply.
    text: String,
    /// A few words saying what you ask, shown in lists of tasks; set it on a new task.
    #[serde(default)]
    title: Option<String>,
    /// Only to answer a task that needs input: MACHINE/SESSION:MESSAGE-ID.
    #[serde(default)]
    task: Option<String>,
    /// Wait for the reply, up to ten minutes (default true); false returns the task at once.
    #[serde(default)]
    wait: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct TaskArgs {
    /// MACHINE/SESSION:MESSAGE-ID, as ask_agent returned it.
    task: String,
}

/// Inlined in the schema: a client need not follow a `$ref`.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
enum UpdateState {
    Done,
    Blocked,
    Failed,
}

impl UpdateState {
    fn word(self) -> &'static str {
        match self {
            UpdateState::Done => "done",
            UpdateState::Blocked => "blocked",
            UpdateState::Failed => "failed",
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct UpdateArgs {
    /// The task's id from the message that gave it: SESSION:MESSAGE-ID.
    task: String,
    /// done (with the result), blocked (only to ask the asker what you need to go on), failed.
    state: UpdateState,
    /// What the asker reads: the result, the question, or why it failed.
    summary: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SendFileArgs {
    /// MACHINE/SESSION, as list_agents shows it.
    to: String,
    /// The file, in this cage (relative to the working folder, or absolute).
    path: String,
    /// What it is and what to do with it; the receiver reads it beside the file.
    #[serde(default)]
    note: Option<String>,
}

type Told = std::result::Result<String, String>;

/// The server: the socket and the tools' router.
#[derive(Clone)]
struct Tools {
    socket: Socket,
    /// `$SHROOMS_AGENT_SESSION`: the session this turn is of.
    session: String,
    tool_router: ToolRouter<Tools>,
}

impl Tools {
    fn new(socket: Socket, sealed: bool, session: String) -> Tools {
        let mut tool_router = Self::tool_router();
        if sealed {
            for t in TOOLS.iter().filter(|t| !SEALED_TOOLS.contains(t)) {
                tool_router.remove_route(t);
            }
        }
        Tools {
            socket,
            session,
            tool_router,
        }
    }

    /// A JSON-RPC call of the A2A API on machine `m`, at `rest`.
    async fn a2a(
        &self,
        m: &Machine,
        rest: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Told {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let a = self
            .socket
            .request(
                reqwest::Method::POST,
                &peer_path(m, rest),
                Some(Body {
                    content_type: "application/json",
                    bytes: body.to_string().into_bytes(),
                }),
                timeout,
            )
            .await?;
        let from = format!("machine {}", m.name);
        let v: Value = match serde_json::from_slice(&a.body) {
            Ok(v) if (200..300).contains(&a.status) => v,
            _ => return Err(refused(method, &from, &a)),
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return Err(format!(
                "{method}: {from} answered: {} ({})",
                e["message"].as_str().unwrap_or("an error"),
                e["code"]
            ));
        }
        Ok(answer_text(&m.name, &v["result"]))
    }

    async fn task_call(&self, task: &str, method: &str) -> Told {
        let (machine, id) = split_task(task)?;
        let m = self.socket.machine(machine).await?;
        self.a2a(&m, "/a2a", method, json!({"id": id}), SHORT).await
    }
}

#[tool_router]
impl Tools {
    #[tool(
        description = "List the coding-agent sessions this machine knows of, here and on the other \
        machines, as MACHINE/SESSION with their harness, state and folder."
    )]
    async fn list_agents(&self, Parameters(_): Parameters<NoArgs>) -> Told {
        let machines = self.socket.machines().await?;
        let mut lines = Vec::new();
        let mut away = Vec::new();
        for m in &machines {
            let a = match self
                .socket
                .request(
                    reqwest::Method::GET,
                    &peer_path(m, "/v1/sessions"),
                    None,
                    SHORT,
                )
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    away.push(format!("{}: {e}", m.name));
                    continue;
                }
            };
            if a.status != 200 {
                away.push(refused("its sessions", &format!("machine {}", m.name), &a));
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&a.body) else {
                away.push(format!("{}: its sessions came in another form", m.name));
                continue;
            };
            for s in v["sessions"].as_array().into_iter().flatten() {
                let text = |k: &str| s[k].as_str().unwrap_or("?").to_string();
                lines.push(format!(
                    "{}/{}\t{}, {}, in {}",
                    m.name,
                    text("name"),
                    text("harness"),
                    text("state"),
                    text("dir")
                ));
            }
        }
        let mut out = if lines.is_empty() {
            "no agents found\n".to_string()
        } else {
            lines.join("\n") + "\n"
        };
        for a in away {
            out.push_str(&format!("(left out: {a})\n"));
        }
        Ok(out)
    }

    #[tool(
        description = "Give another agent session (MACHINE/SESSION, from list_agents) a task and, \
        by default, wait up to ten minutes for its reply. The task stays open until that session \
        finishes it (completed, failed) or needs something (input-required: answer with ask_agent \
        and task set). With wait false it returns the task at once, for task_status. Once you have \
        what you needed, close it with task_ack."
    )]
    async fn ask_agent(&self, Parameters(a): Parameters<AskArgs>) -> Told {
        let (machine, session) = split_to(&a.to)?;
        let wait = a.wait.unwrap_or(true);
        let m = self.socket.machine(machine).await?;
        let mut metadata = serde_json::Map::new();
        if let Some(t) = a
            .title
            .as_deref()
            .filter(|t| !t.is_empty() && a.task.is_none())
        {
            metadata.insert("shrooms/title".into(), json!(t));
        }
        let mut message = json!({
            "messageId": message_id(),
            "role": "ROLE_USER",
            "parts": [{"text": a.text}],
            "metadata": metadata,
        });
        if let Some(task) = &a.task {
            let (tm, id) = split_task(task)?;
            if tm != machine || id.split_once(':').map(|(s, _)| s) != Some(session) {
                return Err(format!(
                    "the task {task} is not {}'s: an answer goes to the session that has the task",
                    a.to
                ));
            }
            message["taskId"] = json!(id);
        }
        let params = json!({"message": message, "configuration": {"blocking": wait}});
        let timeout = if wait { ASK_WAIT } else { SHORT };
        self.a2a(
            &m,
            &format!("/a2a/{}", segment(session)),
            "SendMessage",
            params,
            timeout,
        )
        .await
    }

    #[tool(
        description = "Where a task from ask_agent stands (working, completed, failed, \
        input-required, canceled) and its reply so far."
    )]
    async fn task_status(&self, Parameters(a): Parameters<TaskArgs>) -> Told {
        self.task_call(&a.task, "GetTask").await
    }

    #[tool(
        description = "Finish a task another agent gave this session (a message beginning \
        \"[shrooms task ID ...]\"): done with the result; blocked only to ask the asker a question \
        you need answered to go on; failed with why you cannot or will not do it. Until then the \
        task stays open."
    )]
    async fn task_update(&self, Parameters(a): Parameters<UpdateArgs>) -> Told {
        if a.task
            .split_once(':')
            .is_none_or(|(s, i)| s.is_empty() || i.is_empty())
        {
            return Err(format!(
                "{:?}: want SESSION:MESSAGE-ID, the id in the message that gave the task",
                a.task
            ));
        }
        let machines = self.socket.machines().await?;
        // Tasks given to this session are kept by this machine's agent,
        // which the socket lists first.
        let here = machines
            .first()
            .ok_or("the cage's socket listed no machine, not even this one")?;
        let body = json!({
            "state": a.state.word(),
            "summary": a.summary,
            "session": self.session,
        });
        let answer = self
            .socket
            .request(
                reqwest::Method::POST,
                &peer_path(here, &format!("/v1/tasks/{}", segment(&a.task))),
                Some(Body {
                    content_type: "application/json",
                    bytes: body.to_string().into_bytes(),
                }),
                SHORT,
            )
            .await?;
        let from = format!("machine {}", here.name);
        match serde_json::from_slice::<Value>(&answer.body) {
            Ok(v) if (200..300).contains(&answer.status) => Ok(answer_text(&here.name, &v)),
            _ => Err(refused("task_update", &from, &answer)),
        }
    }

    #[tool(
        description = "Close a task you gave another agent, once you have what you needed from it: \
        MACHINE/SESSION:MESSAGE-ID."
    )]
    async fn task_ack(&self, Parameters(a): Parameters<TaskArgs>) -> Told {
        self.task_call(&a.task, "AckTask").await
    }

    #[tool(
        description = "Send a file of this cage to another agent session (MACHINE/SESSION). It \
        keeps it in a folder for files from this session, with your note, if it takes files from \
        this session; if not, the refusal says so. At most 100 MiB."
    )]
    async fn send_file(&self, Parameters(a): Parameters<SendFileArgs>) -> Told {
        let (machine, session) = split_to(&a.to)?;
        let path = PathBuf::from(&a.path);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("{}: not a file's path", a.path))?
            .to_string();
        let shown = a.path.clone();
        let bytes = tokio::task::spawn_blocking(move || read_file(&path, &shown))
            .await
            .map_err(|e| format!("reading {}: {e}", a.path))??;
        let m = self.socket.machine(machine).await?;
        let mut query = format!("name={}", utf8_percent_encode(&name, NON_ALPHANUMERIC));
        if let Some(n) = a.note.as_deref().filter(|n| !n.is_empty()) {
            query.push_str(&format!(
                "&note={}",
                utf8_percent_encode(n, NON_ALPHANUMERIC)
            ));
        }
        let answer = self
            .socket
            .request(
                reqwest::Method::POST,
                &peer_path(
                    &m,
                    &format!("/v1/sessions/{}/drop?{query}", segment(session)),
                ),
                Some(Body {
                    content_type: "application/octet-stream",
                    bytes,
                }),
                SEND_FILE_WAIT,
            )
            .await?;
        let from = format!("machine {}", m.name);
        match serde_json::from_slice::<Value>(&answer.body) {
            Ok(v) if (200..300).contains(&answer.status) => Ok(format!(
                "sent {name} to {}, kept there at {}\n",
                a.to,
                v["path"].as_str().unwrap_or("?")
            )),
            _ => Err(refused("send_file", &from, &answer)),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shrooms", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The file to send, whole: at most [`MAX_FILE`], and a length the
/// receiver needs before the first byte.
fn read_file(path: &Path, shown: &str) -> std::result::Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a file"));
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{shown} is {} MiB; a file may be at most {} MiB",
            meta.len() >> 20,
            MAX_FILE >> 20
        ));
    }
    std::fs::read(path).map_err(|e| format!("{shown}: {e}"))
}

/// A message's id: unique enough among one sender's messages.
fn message_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "mcp-{}-{:09}-{}",
        now.as_secs(),
        now.subsec_nanos(),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines() -> Vec<Machine> {
        vec![
            Machine {
                name: "here".into(),
                addr: "127.0.0.1:7387".into(),
            },
            Machine {
                name: "delta".into(),
                addr: "[fd00::1]:9000".into(),
            },
        ]
    }

    #[test]
    fn machines_by_name_or_address() {
        let all = machines();
        assert_eq!(find_machine(&all, "delta").unwrap().addr, "[fd00::1]:9000");
        assert_eq!(find_machine(&all, "127.0.0.1:7387").unwrap().name, "here");
        assert_eq!(
            find_machine(&all, "nope").unwrap_err(),
            "no machine called \"nope\"; the machines are: here, delta \
             (list_agents shows their sessions)"
        );
    }

    #[test]
    fn an_address_is_one_segment() {
        let all = machines();
        assert_eq!(
            peer_path(&all[1], "/v1/sessions"),
            "/peer/%5Bfd00::1%5D:9000/v1/sessions"
        );
        assert_eq!(
            peer_path(&all[0], "/a2a/web"),
            "/peer/127.0.0.1:7387/a2a/web"
        );
        assert_eq!(segment("a/b?c#d%"), "a%2Fb%3Fc%23d%25");
    }

    #[test]
    fn names_and_task_ids() {
        assert_eq!(split_to("studio/review").unwrap(), ("studio", "review"));
        for bad in ["studio", "/review", "studio/", "a/b/c"] {
            assert!(
                split_to(bad).unwrap_err().contains("want MACHINE/SESSION"),
                "{bad}"
            );
        }
        assert_eq!(
            split_task("studio/review:m1").unwrap(),
            ("studio", "review:m1")
        );
        for bad in ["review:m1", "studio/review", "studio/:m1", "studio/review:"] {
            assert!(split_task(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tasks_as_a_model_reads_them() {
        let t = json!({
            "id": "review:m1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                       "message": {"parts": [{"text": "which branch?"}, {"text": ""}]}},
            "metadata": {"shrooms/queued": true, "shrooms/nudges": 2}
        });
        assert_eq!(
            answer_text("studio", &json!({"task": t})),
            "task studio/review:m1: input-required\n\
             (queued: the session is busy and starts it when free)\n\
             (reminded 2 times for going quiet)\n\
             \nwhich branch?\n"
        );
        // GetTask's result is the task itself; A2A 0.3 spells states in lower case.
        assert_eq!(
            answer_text(
                "studio",
                &json!({"id": "review:m1", "status": {"state": "completed"}})
            ),
            "task studio/review:m1: completed\n"
        );
        assert_eq!(
            answer_text("studio", &json!({"message": {"parts": [{"text": "42"}]}})),
            "42\n"
        );
    }

    #[test]
    fn refusals_in_their_own_words() {
        let a = |status, body: &str| Answer {
            status,
            body: body.as_bytes().to_vec(),
        };
        assert_eq!(
            refused(
                "send_file",
                "machine here",
                &a(403, r#"{"error":"web takes no files from caged sessions"}"#)
            ),
            "send_file: machine here answered 403 Forbidden: web takes no files from caged sessions"
        );
        assert_eq!(
            refused("GetTask", "machine here", &a(404, "")),
            "GetTask: machine here answered 404 Not Found: (no reason given)"
        );
    }

    #[test]
    fn without_a_socket_the_tools_say_where_they_work() {
        let e = Socket { path: None }.path().unwrap_err();
        assert!(e.contains("SHROOMS_AGENT_PROXY is not set"), "{e}");
        let e = Socket {
            path: Some("/nonexistent/proxy.sock".into()),
        }
        .path()
        .unwrap_err();
        assert!(
            e.contains("/nonexistent/proxy.sock: there is no socket there")
                && e.contains("holding this cage's turn"),
            "{e}"
        );
    }

    #[test]
    fn sealed_offers_only_task_update() {
        let names = |t: &Tools| {
            let mut n: Vec<String> = t
                .tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            n.sort();
            n
        };
        let mut all: Vec<String> = TOOLS.iter().map(|s| s.to_string()).collect();
        all.sort();
        assert_eq!(
            names(&Tools::new(Socket { path: None }, false, String::new())),
            all
        );
        assert_eq!(
            names(&Tools::new(Socket { path: None }, true, String::new())),
            vec!["task_update".to_string()]
        );
    }
}
