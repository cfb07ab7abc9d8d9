//! The commands running now (`bash`, `run`, `os-*`, `hands exec`): a small registry the
//! dashboard reads for "Running now" and stops one command through (its whole tree, as a
//! timeout does). A command is registered while its launcher runs and removed when it ends.

use crate::capture::Tail;
use hands_roots::lock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One running command as the dashboard shows it.
pub struct RunningCommand {
    pub id: u64,
    pub client: String,
    /// The command line (`bash -c` text, or the argv joined by spaces).
    pub command: String,
    /// Seconds since the UNIX epoch.
    pub started: u64,
    /// The end of its output so far (stdout, then stderr).
    pub output: String,
}

struct Entry {
    client: String,
    command: String,
    started: u64,
    out: Arc<Mutex<Tail>>,
    err: Arc<Mutex<Tail>>,
    stop: CancellationToken,
}

/// The commands running now.
#[derive(Default)]
pub struct Registry {
    next: AtomicU64,
    live: Arc<Mutex<BTreeMap<u64, Entry>>>,
}

/// Removes its command from the registry when the run ends, however it ends.
pub struct Registered {
    id: u64,
    live: Arc<Mutex<BTreeMap<u64, Entry>>>,
    /// Cancelled when a person stops this command on the dashboard.
    pub stop: CancellationToken,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.live).remove(&self.id);
    }
}

impl Registry {
    /// Registers a command `client` asked for, whose output goes to `out` and `err`.
    pub fn register(
        &self,
        client: &str,
        command: String,
        out: Arc<Mutex<Tail>>,
        err: Arc<Mutex<Tail>>,
    ) -> Registered {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let client = client.to_string();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let stop = CancellationToken::new();
        lock(&self.live)
            .insert(id, Entry { client, command, started, out, err, stop: stop.clone() });
        Registered { id, live: self.live.clone(), stop }
    }

    /// The commands running now, oldest first.
    pub fn running(&self) -> Vec<RunningCommand> {
        let text = |t: &Mutex<Tail>| {
            let t = lock(t);
            String::from_utf8_lossy(&t.bytes()).into_owned()
        };
        lock(&self.live)
            .iter()
            .map(|(id, e)| {
                let (out, err) = (text(&e.out), text(&e.err));
                let output = match (out.trim_end().is_empty(), err.trim_end().is_empty()) {
                    (_, true) => out,
                    (true, false) => err,
                    (false, false) => format!("{}\n{err}", out.trim_end()),
                };
                RunningCommand {
                    id: *id,
                    client: e.client.clone(),
                    command: e.command.clone(),
                    started: e.started,
                    output: crate::capture::render(output.as_bytes(), output.len() as u64, 4000)
                        .text,
                }
            })
            .collect()
    }

    /// Stops one running command and its whole process tree (TERM, grace, KILL) and waits,
    /// at most `patience`, until it has ended; its command line, or `None` when no such
    /// command runs.
    pub async fn stop(&self, id: u64, patience: Duration) -> Option<String> {
        let (command, stop) = {
            let live = lock(&self.live);
            let e = live.get(&id)?;
            (e.command.clone(), e.stop.clone())
        };
        stop.cancel();
        let until = Instant::now() + patience;
        while lock(&self.live).contains_key(&id) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some(command)
    }
}

/// The command line a person reads for a launcher argv: `bash -c`'s text, else the argv with
/// its argument boundaries ([`crate::allow::show`]: `"a b"` is one argument).
pub fn label(argv: &serde_json::Value) -> String {
    let items: Vec<String> = argv
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    match items.as_slice() {
        [bash, _, _, c, command] if bash == "bash" && c == "-c" => command.clone(),
        _ => crate::allow::show(&items),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bash_command_shows_its_text_and_a_program_its_argv() {
        assert_eq!(
            label(&json!(["bash", "--noprofile", "--norc", "-c", "sleep 5; ls"])),
            "sleep 5; ls"
        );
        assert_eq!(label(&json!(["/usr/bin/rg", "-n", "<x>"])), "/usr/bin/rg -n <x>");
        assert_eq!(label(&json!(["/usr/bin/rg", "a b", ""])), "/usr/bin/rg \"a b\" \"\"");
    }

    #[test]
    fn the_registry_names_the_client_and_forgets_an_ended_command() {
        let reg = Registry::default();
        let tail = || Arc::new(Mutex::new(Tail::new(100)));
        let r = reg.register("ci-bot", "make".into(), tail(), tail());
        let other = reg.register("terminal", "ls".into(), tail(), tail());
        let live = lock(&reg.live);
        let names: Vec<_> =
            live.values().map(|e| (e.client.as_str(), e.command.as_str())).collect();
        assert_eq!(names, [("ci-bot", "make"), ("terminal", "ls")]);
        drop(live);
        drop(r);
        drop(other);
        assert!(lock(&reg.live).is_empty());
    }
}
