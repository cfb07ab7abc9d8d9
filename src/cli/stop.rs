//! `hands stop [--release]`: the brake, pulled (or lifted) on every daemon of the state dir
//! through its control socket.

use super::printout::{self, state_dir};
use crate::control;
use crate::control::protocol::{Reply, Request, Via};
use std::path::PathBuf;
use std::process::ExitCode;

/// `hands stop [--release]`: asks every live daemon of the state dir.
pub(super) fn stop_cmd(config: Option<PathBuf>, release: bool) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let (op, req) = if release {
        ("release", Request::Release { via: Via::Terminal, except: None })
    } else {
        ("stop", Request::Stop { via: Via::Terminal, except: None })
    };
    let answers = control::client::request_all(&dir, &req);
    if answers.is_empty() && !release {
        // No daemon runs, but kept tmux sessions (`keep_sessions`) may: they belong to the
        // state dir, and the brake ends them all the same.
        let ended = hands_shell::sessions::end_sessions_in(&dir);
        if !ended.is_empty() {
            let names: Vec<String> = ended.iter().map(|(m, n)| format!("{m}/{n}")).collect();
            printout::out(&format!(
                "hands: no running daemon in {}; ended {} kept tmux session{}: {}",
                dir.display(),
                ended.len(),
                if ended.len() == 1 { "" } else { "s" },
                names.join(", ")
            ));
            return ExitCode::SUCCESS;
        }
    }
    if answers.is_empty() {
        printout::out(&format!(
            "hands: no running daemon found in {} (no live control socket); nothing to {op}. \
             Check --config: it must name the daemon's state_dir",
            dir.display()
        ));
        return ExitCode::from(1);
    }
    let mut failed = false;
    for (path, answer) in answers {
        match answer {
            Ok(Reply::Brake { pid, stopped: false, .. }) => {
                printout::out(&format!("hands: daemon {pid} released: commands run again"));
            }
            Ok(Reply::Brake { pid, stopped: true, ended }) => printout::out(&format!(
                "hands: daemon {pid} stopped: ended {ended} running commands and tmux sessions; \
                 new commands are refused until `hands stop --release`"
            )),
            Ok(other) => {
                failed = true;
                printout::out(&format!("hands: {}: {}", path.display(), quoted_error(&other)));
            }
            Err(e) => {
                failed = true;
                printout::out(&format!("hands: {e}"));
            }
        }
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// A failed reply's error as `hands stop` has always printed it: a JSON string.
fn quoted_error(reply: &Reply) -> String {
    match reply {
        Reply::Failed { error, .. } => serde_json::Value::from(error.as_str()).to_string(),
        _ => "null".into(),
    }
}
