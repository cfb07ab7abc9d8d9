//! Asking a person (SPEC §6): when the policy says `ask`, a call runs only after a person says
//! yes — through the client (a 2026-07-28 input-required result, or a 2025-era elicitation
//! request) or, for a client that can do neither, at a terminal with `hands approvals approve
//! ID`. Anything but an explicit allow refuses. Standing permissions: *session* (held by the
//! connection, see `ask.rs`) and *always* (this file's `always.json`, surviving restarts).
//!
//! The channel follows what the client declared ([`Reach`]), in either era: a request is never
//! sent for a capability the client did not declare. Form elicitation: the form (input-required
//! in 2026-07-28, `elicitation/create` before). URL elicitation only: the action is parked and
//! the client is pointed at its dashboard entry. Nothing: the action is parked for `hands
//! approvals` and the dashboard.
//!
//! The input-required round trip keeps no state in the daemon but a set of spent nonces (and,
//! for a URL-only client, the parked action its retry waits for): the `requestState` carries
//! `{nonce, digest of the exact action, expiry}`, sealed with rmcp's HMAC codec under a key
//! that never leaves this process and bound to the client's identity. On the retry the seal,
//! the expiry, the nonce (single use) and the digest are checked; a different action asks again.

use crate::lock::lock;
use rmcp::model::{
    ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequiredResult, InputResponses, RequestStateCodec,
    SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// The key of the approval request inside `inputRequests`.
const INPUT_KEY: &str = "approval";
/// The choices a person is offered, as the form's enum values.
pub const CHOICES: [&str; 4] = ["allow_once", "allow_session", "allow_always", "reject"];

/// How a client can reach its person, by what it declared (SPEC §6): the gate never sends a
/// request for a capability the client did not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Form elicitation (an `elicitation` capability with `form`, or with neither mode: the
    /// 2025-06-18 spelling, which meant form).
    Form,
    /// Only URL elicitation: the client can open the action's dashboard entry for its person.
    Url,
    /// No elicitation: the person answers at `hands approvals` or on the dashboard.
    Nobody,
}

impl Reach {
    pub fn of(caps: Option<&ClientCapabilities>) -> Reach {
        match caps.and_then(|c| c.elicitation.as_ref()) {
            Some(e) if e.form.is_some() || e.url.is_none() => Reach::Form,
            Some(_) => Reach::Url,
            None => Reach::Nobody,
        }
    }
}

/// What a person chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Once,
    Session,
    Always,
}

/// How the person was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Client,
    Terminal,
    /// The person's dashboard (`src/dashboard`), which answers parked actions with any choice.
    Dashboard,
}

/// One action waiting at the gate, described exactly.
#[derive(Debug, Clone)]
pub struct Action {
    pub client: String,
    pub module: String,
    pub tool: String,
    pub class: String,
    pub arguments: Value,
    /// A confirm-listed program (SPEC §4.4): the answer allows this one run only.
    pub confirm: bool,
}

impl Action {
    /// A digest of everything that identifies the action: changing any argument changes it.
    pub fn digest(&self) -> String {
        use sha2::Digest;
        let text = json!([self.client, self.module, self.tool, self.class, self.arguments]);
        hex::encode(sha2::Sha256::digest(text.to_string().as_bytes()))
    }

    /// The exact action in words a person can judge: tool, module, and the arguments that
    /// matter (command, argv, cwd, repo, branch, path), then all of them.
    ///
    /// Every part is rendered by [`crate::shown::shown`] (control, escape and bidirectional
    /// characters visibly escaped); a description that needed it says so on its second line.
    pub fn describe(&self) -> String {
        let mut escaped = false;
        let mut show = |t: &str| {
            let s = crate::shown::shown(t);
            escaped |= s.escaped;
            s.text
        };
        let head = format!(
            "{} wants to run `{}` ({} class) of {}",
            show(&self.client),
            show(&self.tool),
            show(&self.class),
            show(&self.module)
        );
        let mut s = String::new();
        if self.confirm {
            s.push_str(
                "\n  confirm-listed: a yes allows this one run only (no session or always \
                 permission covers it)",
            );
        }
        for key in ["command", "argv", "binary", "cwd", "repo", "branch", "path", "session", "text"]
        {
            if let Some(v) = self.arguments.get(key) {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                s.push_str(&format!("\n  {key}: {}", show(&v)));
            }
        }
        s.push_str(&format!("\n  arguments: {}", show(&self.arguments.to_string())));
        let note = if escaped { format!("\n  {}", crate::shown::NOTE) } else { String::new() };
        format!("{head}{note}{s}")
    }
}

/// The gate's answer after asking.
#[derive(Debug)]
pub enum Asked {
    Allowed(Choice, Channel),
    /// Refused, and by whom: a person through a channel, or nobody (`None`: no answer in time,
    /// a state that is invalid, expired or spent, a malformed answer) — the gate fails closed.
    Refused(String, Option<Channel>),
    /// Return this to the client; it retries with the answer.
    InputRequired(InputRequiredResult),
    /// A URL-only client's retry: wait for the person's answer to this parked action
    /// ([`Approvals::await_parked`]).
    Parked(String),
}

/// What `requestState` carries (sealed).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    nonce: String,
    digest: String,
    expires: u64,
    /// The parked action a URL-only client's person answers on the dashboard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parked: Option<String>,
}

/// A standing *always* permission.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Standing {
    pub id: String,
    pub client: String,
    pub module: String,
    pub tool: String,
    /// The version of hands (and so of the module) it was given for; another asks again.
    pub version: String,
    pub granted: u64,
}

/// A person's answer to a parked action: the choice (`None`: denied) and where it was made.
type Answer = (Option<Choice>, Channel);

/// An action parked for a person at a terminal (or on the dashboard).
pub struct Parked {
    pub id: String,
    pub action: String,
    pub expires: u64,
    detail: Action,
    /// The person's choice (`None`: denied) and where they made it.
    answer: oneshot::Sender<Answer>,
}

/// A parked action with its parts, as the dashboard shows it.
pub struct Pending {
    pub id: String,
    pub expires: u64,
    pub action: Action,
}

/// A parked action as `hands approvals list` shows it (`action`), with its parts for the
/// dashboard of another daemon of the state dir.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedView {
    pub id: String,
    pub action: String,
    pub expires: u64,
    pub client: String,
    pub module: String,
    pub tool: String,
    pub class: String,
    pub arguments: Value,
    pub confirm: bool,
}

impl Pending {
    /// A parked action another daemon reported over the control socket (`ParkedView`).
    pub fn from_view(v: &Value) -> Option<Pending> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Pending {
            id: s("id")?,
            expires: v.get("expires").and_then(Value::as_u64)?,
            action: Action {
                client: s("client")?,
                module: s("module")?,
                tool: s("tool")?,
                class: s("class")?,
                arguments: v.get("arguments").cloned().unwrap_or(Value::Null),
                confirm: v.get("confirm").and_then(Value::as_bool).unwrap_or(false),
            },
        })
    }
}

/// A person's choice by its name on the dashboard and the control socket: `Some(None)` is
/// reject, `None` an unknown name.
pub fn choice_named(name: &str) -> Option<Option<Choice>> {
    match name {
        "once" => Some(Some(Choice::Once)),
        "session" => Some(Some(Choice::Session)),
        "always" => Some(Some(Choice::Always)),
        "reject" => Some(None),
        _ => None,
    }
}

pub struct Approvals {
    codec: RequestStateCodec,
    /// Session permissions granted under an older epoch are void (`revoke --all`).
    epoch: std::sync::atomic::AtomicU64,
    spent: Mutex<HashMap<String, Instant>>,
    parked: Mutex<BTreeMap<String, Parked>>,
    /// The answers of actions parked for a URL-only 2026-07-28 client: its retry takes the
    /// receiver and waits on it (the call that parked has already returned).
    detached: Mutex<HashMap<String, oneshot::Receiver<Answer>>>,
    always_path: PathBuf,
    timeout: Duration,
    /// The dashboard's base URL (`http://ADDR/`), once it serves: a parked action's entry is
    /// `<base>#<id>`.
    dashboard: std::sync::OnceLock<String>,
}

/// The URL elicitation that points a client's person at the action's dashboard entry.
pub fn url_params(a: &Action, url: String, id: &str) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!(
            "hands needs a person's approval; decide on the dashboard (approval {id}).\n{}",
            a.describe()
        ),
        url,
        elicitation_id: id.to_string(),
    }
}

/// The version a standing permission is bound to.
pub fn module_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Random bytes from the kernel, hex-encoded.
fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(hex::encode(buf))
}

/// Reads the standing *always* permissions (a missing file is none).
pub fn read_always(path: &Path) -> anyhow::Result<Vec<Standing>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!("{} is not valid ({e}); a person can remove it", path.display())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

/// Replaces the standing permissions atomically (temp file, fsync, rename), under a lock file
/// shared with `hands approvals revoke`.
pub fn update_always(
    path: &Path,
    f: impl FnOnce(&mut Vec<Standing>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let lock_path = path.with_extension("lock");
    let lock_file = std::fs::File::create(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::LockExclusive)
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let mut all = read_always(path)?;
    f(&mut all)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let text = serde_json::to_string_pretty(&all).context("cannot encode the permissions")?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

impl Approvals {
    pub fn new(state_dir: &Path, timeout: Duration) -> anyhow::Result<Approvals> {
        use anyhow::Context;
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("cannot create {}", state_dir.display()))?;
        let key = random_hex(32).context("cannot read /dev/urandom for the approval key")?;
        let codec = RequestStateCodec::try_new(key.into_bytes())
            .map_err(|e| anyhow::anyhow!("cannot make the approval seal: {e}"))?;
        Ok(Approvals {
            codec,
            epoch: Default::default(),
            spent: Mutex::new(HashMap::new()),
            parked: Mutex::new(BTreeMap::new()),
            detached: Mutex::new(HashMap::new()),
            always_path: state_dir.join("approvals.json"),
            timeout,
            dashboard: std::sync::OnceLock::new(),
        })
    }

    /// Records the dashboard's base URL (`http://ADDR/`), once it listens.
    pub fn set_dashboard(&self, base: String) {
        let _ = self.dashboard.set(base);
    }

    /// The dashboard's entry for a parked action, when the dashboard serves.
    pub fn dashboard_entry(&self, id: &str) -> Option<String> {
        self.dashboard.get().map(|base| format!("{base}#{id}"))
    }

    /// The current session epoch: a session permission holds only while it is unchanged.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Ends every session permission of every connection (`hands approvals revoke --all`).
    pub fn revoke_sessions(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a standing *always* permission covers this client, module and tool at this
    /// version. An unreadable file covers nothing (fails closed).
    pub fn always_allows(&self, a: &Action) -> bool {
        read_always(&self.always_path).unwrap_or_default().iter().any(|s| {
            s.client == a.client
                && s.module == a.module
                && s.tool == a.tool
                && s.version == module_version()
        })
    }

    /// Records an *always* permission.
    pub fn grant_always(&self, a: &Action) -> anyhow::Result<()> {
        let id = format!("p-{}", random_hex(6)?);
        update_always(&self.always_path, |all| {
            all.retain(|s| !(s.client == a.client && s.module == a.module && s.tool == a.tool));
            all.push(Standing {
                id,
                client: a.client.clone(),
                module: a.module.clone(),
                tool: a.tool.clone(),
                version: module_version().to_string(),
                granted: now(),
            });
            Ok(())
        })
    }

    /// The form a person answers: one choice among [`CHOICES`].
    fn request(&self, a: &Action) -> Result<ElicitRequestParams, String> {
        let schema = json!({
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": CHOICES,
                    "enumNames": ["Allow once", "Allow for this session", "Always for this client", "Reject"],
                }
            },
            "required": ["decision"],
        });
        let Value::Object(schema) = schema else { return Err("schema".into()) };
        let requested_schema = ElicitationSchema::from_json_schema(schema)
            .map_err(|e| format!("cannot build the approval form: {e}"))?;
        Ok(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("hands needs a person's approval.\n{}", a.describe()),
            requested_schema,
        })
    }

    /// Reads a person's answer: only `accept` with an allow choice allows.
    /// An answer that came through the client: a person's choice, or a person's refusal (decline,
    /// cancel, reject); an answer that is none of these was decided by nobody.
    fn person_said(result: &ElicitResult) -> Asked {
        match Self::read_answer(result) {
            Ok(choice) => Asked::Allowed(choice, Channel::Client),
            Err(why) => {
                let person =
                    matches!(result.action, ElicitationAction::Decline | ElicitationAction::Cancel)
                        || result.content.as_ref().and_then(|c| c.get("decision"))
                            == Some(&Value::from("reject"));
                Asked::Refused(why, person.then_some(Channel::Client))
            }
        }
    }

    fn read_answer(result: &ElicitResult) -> Result<Choice, String> {
        match result.action {
            ElicitationAction::Accept => {}
            ElicitationAction::Decline => return Err("the person declined".into()),
            ElicitationAction::Cancel => return Err("the person cancelled".into()),
            _ => return Err("the answer is not accept".into()),
        }
        let decision =
            result.content.as_ref().and_then(|c| c.get("decision")).and_then(Value::as_str);
        match decision {
            Some("allow_once") => Ok(Choice::Once),
            Some("allow_session") => Ok(Choice::Session),
            Some("allow_always") => Ok(Choice::Always),
            Some("reject") => Err("the person rejected it".into()),
            other => Err(format!("the answer is not one of the choices ({other:?})")),
        }
    }

    /// The first round of a 2026-07-28 client: the form plus the sealed state.
    pub fn input_required(&self, a: &Action) -> Result<InputRequiredResult, String> {
        self.sealed_request(a, self.request(a)?, None)
    }

    /// The first round of a 2026-07-28 client that declared only URL elicitation: the action
    /// is parked (the dashboard and `hands approvals` show it), and the client is asked to open
    /// its dashboard entry; the retry waits for the person's answer there. `None` when the
    /// dashboard does not serve: the caller parks the call itself.
    pub fn input_required_url(&self, a: &Action) -> Option<Result<InputRequiredResult, String>> {
        self.dashboard.get()?;
        Some(self.url_round(a))
    }

    fn url_round(&self, a: &Action) -> Result<InputRequiredResult, String> {
        let (id, rx) = self.enter(a)?;
        let Some(url) = self.dashboard_entry(&id) else {
            lock(&self.parked).remove(&id);
            return Err("the dashboard does not serve".into());
        };
        // The client may never retry: `prune` drops the action once its time is up.
        lock(&self.detached).insert(id.clone(), rx);
        let params = url_params(a, url, &id);
        self.sealed_request(a, params, Some(id))
    }

    /// An input-required result asking `params`, with the sealed state of this action.
    fn sealed_request(
        &self,
        a: &Action,
        params: ElicitRequestParams,
        parked: Option<String>,
    ) -> Result<InputRequiredResult, String> {
        let nonce = random_hex(16).map_err(|e| format!("cannot make a nonce: {e}"))?;
        let expires = now() + self.timeout.as_secs();
        let sealed = Sealed { nonce, digest: a.digest(), expires, parked };
        let opts = SealOptions::new().associated_data(a.client.as_bytes()).ttl(self.timeout);
        let state = self
            .codec
            .seal_json_with(&sealed, &opts)
            .map_err(|e| format!("cannot seal the request state: {e}"))?;
        let req = InputRequest::Elicitation(ElicitRequest::new(params));
        let mut requests = BTreeMap::new();
        requests.insert(INPUT_KEY.to_string(), req);
        Ok(InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// The retry of a 2026-07-28 client: checks the echoed state and reads the answer. A
    /// state for a different action asks again.
    pub fn redeem(&self, a: &Action, state: &str, responses: Option<&InputResponses>) -> Asked {
        let refuse = |why: String| Asked::Refused(why, None);
        let sealed: Sealed = match self.codec.open_json_with(state, a.client.as_bytes()) {
            Ok(s) => s,
            Err(e) => return refuse(format!("the approval state is not valid ({e})")),
        };
        if sealed.expires < now() {
            return refuse("the approval expired".into());
        }
        if sealed.digest != a.digest() {
            // Approved (or not) for other arguments: this action needs its own answer, asked
            // the way the first one was.
            let again =
                if sealed.parked.is_some() { self.url_round(a) } else { self.input_required(a) };
            return match again {
                Ok(r) => Asked::InputRequired(r),
                Err(e) => refuse(e),
            };
        }
        {
            let mut spent = lock(&self.spent);
            let now = Instant::now();
            spent.retain(|_, until| *until > now);
            if spent.contains_key(&sealed.nonce) {
                return refuse("this approval was already used".into());
            }
            spent.insert(sealed.nonce, now + self.timeout + Duration::from_secs(60));
        }
        if let Some(id) = sealed.parked {
            // The person answers on the dashboard (or at a terminal); the client's answer to
            // the URL request only says whether it opened the page, and decides nothing.
            return Asked::Parked(id);
        }
        let Some(answer) = responses.and_then(|r| r.get(INPUT_KEY)) else {
            return refuse("the retry carries no answer to the approval request".into());
        };
        match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(r) => Self::person_said(&r),
            Err(e) => refuse(format!("the answer is malformed ({e})")),
        }
    }

    /// A 2025-era client that declared elicitation: ask it and wait.
    pub async fn elicit(&self, a: &Action, peer: &rmcp::Peer<rmcp::RoleServer>) -> Asked {
        let params = match self.request(a) {
            Ok(p) => p,
            Err(e) => return Asked::Refused(e, None),
        };
        match peer.create_elicitation_with_timeout(params, Some(self.timeout)).await {
            Ok(r) => Self::person_said(&r),
            Err(e) => Asked::Refused(format!("no answer from the person ({e})"), None),
        }
    }

    /// A client that can do neither: park the action until a person answers at a terminal
    /// (or on the dashboard), or the approval timeout passes.
    pub async fn park(&self, a: &Action) -> Asked {
        self.park_then(a, |_| {}).await
    }

    /// [`Approvals::park`], calling `parked` with the id once the action waits under it (to
    /// point a URL-elicitation client at the dashboard's entry).
    pub async fn park_then(&self, a: &Action, parked: impl FnOnce(&str)) -> Asked {
        let (id, rx) = match self.enter(a) {
            Ok(entered) => entered,
            Err(e) => return Asked::Refused(e, None),
        };
        parked(&id);
        self.wait(&id, rx, self.timeout).await
    }

    /// Parks the action under a new id (the daemon's stderr names it); the receiver gets the
    /// person's answer.
    fn enter(&self, a: &Action) -> Result<(String, oneshot::Receiver<Answer>), String> {
        self.prune();
        let id =
            random_hex(4).map(|h| format!("a-{h}")).map_err(|e| format!("cannot park: {e}"))?;
        let (tx, rx) = oneshot::channel();
        let expires = now() + self.timeout.as_secs();
        lock(&self.parked).insert(
            id.clone(),
            Parked { id: id.clone(), action: a.describe(), expires, detail: a.clone(), answer: tx },
        );
        let page = self
            .dashboard_entry(&id)
            .map(|u| format!(", or answer it on the dashboard at {u}"))
            .unwrap_or_default();
        tracing::warn!(
            "approval needed ({id}): {}\n  a person can run `hands approvals approve {id}` or \
             `hands approvals deny {id}` within {} s{page}",
            a.describe(),
            self.timeout.as_secs()
        );
        Ok((id, rx))
    }

    /// Drops actions parked for a URL-only client whose time is up and that nobody retried.
    fn prune(&self) {
        let now = now();
        let mut detached = lock(&self.detached);
        if detached.is_empty() {
            return;
        }
        let mut parked = lock(&self.parked);
        let over: Vec<String> = detached
            .keys()
            .filter(|id| parked.get(*id).is_none_or(|p| p.expires <= now))
            .cloned()
            .collect();
        for id in over {
            detached.remove(&id);
            parked.remove(&id);
        }
    }

    /// The retry of a URL-only 2026-07-28 client: waits (for what is left of the approval
    /// timeout) for the person's answer to the action parked in its first round.
    pub async fn await_parked(&self, id: &str) -> Asked {
        let rx = lock(&self.detached).remove(id);
        let left = lock(&self.parked).get(id).map(|p| p.expires.saturating_sub(now()));
        match (rx, left) {
            (Some(rx), Some(left)) => self.wait(id, rx, Duration::from_secs(left.max(1))).await,
            (Some(rx), None) => self.wait(id, rx, Duration::from_secs(1)).await,
            _ => Asked::Refused(
                format!("approval {id} is no longer waiting (expired, or already answered)"),
                None,
            ),
        }
    }

    /// Waits for a person's answer to the action parked under `id`, then unparks it.
    async fn wait(&self, id: &str, rx: oneshot::Receiver<Answer>, timeout: Duration) -> Asked {
        let answer = tokio::time::timeout(timeout, rx).await;
        lock(&self.parked).remove(id);
        match answer {
            Ok(Ok((Some(choice), via))) => Asked::Allowed(choice, via),
            Ok(Ok((None, via))) => {
                let place =
                    if via == Channel::Dashboard { "on the dashboard" } else { "at a terminal" };
                Asked::Refused(format!("a person denied it {place} (approval {id})"), Some(via))
            }
            _ => Asked::Refused(
                format!(
                    "no person approved it within {} s (approval {id}); the client cannot ask \
                     a person itself, so a person must run `hands approvals approve {id}` in a \
                     terminal (or answer on the dashboard) while the call waits — retry the \
                     call and approve it then",
                    self.timeout.as_secs()
                ),
                None,
            ),
        }
    }

    /// Answers a parked action (`hands approvals approve|deny ID`, or the dashboard) with a
    /// person's choice (`None` denies), made through `via`. A
    /// parked action's client cannot ask its person, so the dashboard may answer it with any
    /// of the four choices; a session or always choice binds that client, as if it had asked.
    pub fn answer_as(&self, id: &str, choice: Option<Choice>, via: Channel) -> Result<(), String> {
        let parked = lock(&self.parked).remove(id);
        match parked {
            Some(p) => p
                .answer
                .send((choice, via))
                .map_err(|_| format!("approval {id} is no longer waiting")),
            None => {
                Err(format!("no action is waiting under {id}; `hands approvals list` shows them"))
            }
        }
    }

    /// The parked actions with their parts, oldest id order.
    pub fn pending(&self) -> Vec<Pending> {
        self.prune();
        lock(&self.parked)
            .values()
            .map(|p| Pending { id: p.id.clone(), expires: p.expires, action: p.detail.clone() })
            .collect()
    }

    /// The parked actions.
    pub fn parked(&self) -> Vec<ParkedView> {
        self.prune();
        lock(&self.parked)
            .values()
            .map(|p| ParkedView {
                id: p.id.clone(),
                action: p.action.clone(),
                expires: p.expires,
                client: p.detail.client.clone(),
                module: p.detail.module.clone(),
                tool: p.detail.tool.clone(),
                class: p.detail.class.clone(),
                arguments: p.detail.arguments.clone(),
                confirm: p.detail.confirm,
            })
            .collect()
    }
}

/// The approval key's seal for the test-only conformance tools (`src/conformance_tools.rs`):
/// their own round trips use the same codec, key, client binding and lifetime as the gate's.
#[cfg(feature = "conformance-tools")]
impl Approvals {
    pub fn seal_for<T: Serialize>(&self, client: &str, value: &T) -> Result<String, String> {
        let opts = SealOptions::new().associated_data(client.as_bytes()).ttl(self.timeout);
        (self.codec.seal_json_with(value, &opts)).map_err(|e| format!("cannot seal the state: {e}"))
    }

    pub fn open_for<T: serde::de::DeserializeOwned>(
        &self,
        client: &str,
        state: &str,
    ) -> Result<T, String> {
        (self.codec.open_json_with(state, client.as_bytes()))
            .map_err(|e| format!("the request state is not valid ({e})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(cmd: &str) -> Action {
        Action {
            client: "stdio".into(),
            module: "tools-shell".into(),
            tool: "bash".into(),
            class: "external".into(),
            arguments: json!({ "command": cmd }),
            confirm: false,
        }
    }

    fn accept(decision: &str) -> InputResponses {
        let mut r = InputResponses::new();
        r.insert(
            INPUT_KEY.into(),
            json!({ "action": "accept", "content": { "decision": decision } }),
        );
        r
    }

    fn state_of(r: &InputRequiredResult) -> String {
        r.request_state.clone().unwrap()
    }

    #[test]
    fn a_sealed_state_is_single_use_and_bound_to_the_action_and_client() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = action("ls");
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&a, &state, Some(&accept("allow_once"))),
            Asked::Allowed(Choice::Once, _)
        ));
        // Replayed.
        assert!(matches!(ap.redeem(&a, &state, Some(&accept("allow_once"))), Asked::Refused(..)));
        // Another action with this state asks again.
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&action("rm -rf /"), &state, Some(&accept("allow_once"))),
            Asked::InputRequired(_)
        ));
        // Another client cannot use it.
        let mut other = action("ls");
        other.client = "other".into();
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(
            ap.redeem(&other, &state, Some(&accept("allow_once"))),
            Asked::Refused(..)
        ));
        // Tampered.
        let mut t = state_of(&ap.input_required(&a).unwrap());
        let last = t.pop().unwrap();
        t.push(if last == 'A' { 'B' } else { 'A' });
        assert!(matches!(ap.redeem(&a, &t, Some(&accept("allow_once"))), Asked::Refused(..)));
    }

    #[test]
    fn only_an_explicit_allow_allows() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = action("ls");
        let answers = [
            json!({ "action": "decline" }),
            json!({ "action": "cancel" }),
            json!({ "action": "accept", "content": { "decision": "reject" } }),
            json!({ "action": "accept", "content": { "decision": "yes please" } }),
            json!({ "action": "accept" }),
            json!("garbage"),
        ];
        for answer in answers {
            let state = state_of(&ap.input_required(&a).unwrap());
            let mut r = InputResponses::new();
            r.insert(INPUT_KEY.into(), answer.clone());
            assert!(matches!(ap.redeem(&a, &state, Some(&r)), Asked::Refused(..)), "{answer}");
        }
        let state = state_of(&ap.input_required(&a).unwrap());
        assert!(matches!(ap.redeem(&a, &state, None), Asked::Refused(..)));
    }

    #[test]
    fn always_permissions_persist_and_are_bound_to_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let ap = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        let a = action("ls");
        assert!(!ap.always_allows(&a));
        ap.grant_always(&a).unwrap();
        let again = Approvals::new(dir.path(), Duration::from_secs(60)).unwrap();
        assert!(again.always_allows(&a));
        update_always(&again.always_path, |all| {
            all[0].version = "0.0.1-older".into();
            Ok(())
        })
        .unwrap();
        assert!(!again.always_allows(&a));
    }
}
