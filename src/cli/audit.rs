//! `hands audit [--follow] [--verify]`: print the audit log, one record a line, or check its
//! hash chain.

use super::printout::{self, state_dir};
use crate::audit;
use std::path::PathBuf;
use std::process::ExitCode;

/// `hands audit [--follow] [--verify]`.
pub(super) fn audit_cmd(config: Option<PathBuf>, follow: bool, verify: bool) -> ExitCode {
    let dir = match state_dir(config) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = audit::path_in(&dir);
    if verify {
        return match audit::verify(&path) {
            Ok(v) => {
                for w in &v.warnings {
                    printout::out(&format!("warning: {w}"));
                }
                match v.broken {
                    Some(b) => {
                        printout::out(&format!(
                            "{}: broken at {b}; {} records before it are intact",
                            path.display(),
                            v.records
                        ));
                        ExitCode::from(1)
                    }
                    None => {
                        printout::out(&format!(
                            "{}: {} records, chain intact",
                            path.display(),
                            v.records
                        ));
                        ExitCode::SUCCESS
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                printout::out(&format!(
                    "hands: there is no audit log at {}: no daemon has served with this \
                     state_dir, or the log was removed",
                    path.display()
                ));
                ExitCode::from(1)
            }
            Err(e) => {
                printout::out(&format!("hands: cannot read the audit log {}: {e}", path.display()));
                ExitCode::from(1)
            }
        };
    }
    match print_audit(&path, follow) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            printout::out(&format!("hands: cannot read the audit log {}: {e}", path.display()));
            ExitCode::from(1)
        }
    }
}

/// Prints every complete record; with `follow`, keeps polling for new ones.
#[expect(clippy::disallowed_methods, reason = "the state dir's audit log, printed for the person")]
fn print_audit(path: &std::path::Path, follow: bool) -> std::io::Result<()> {
    use std::io::{Read, Seek};
    let mut file = loop {
        match std::fs::File::open(path) {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !follow => {
                printout::out(&format!("{}: no records yet", path.display()));
                return Ok(());
            }
            // The daemon creates the log when it starts; wait for it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(e) => return Err(e),
        }
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0u64;
    loop {
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk)?;
        offset += chunk.len() as u64;
        pending.extend_from_slice(&chunk);
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            printout::out(&audit::render(&line[..line.len() - 1]));
        }
        if !follow {
            if !pending.is_empty() {
                printout::out(&audit::render(&pending));
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        if std::fs::metadata(path).is_ok_and(|m| m.len() < offset) {
            // Replaced or truncated by someone: start again from its beginning.
            file = std::fs::File::open(path)?;
            offset = 0;
            pending.clear();
        } else {
            file.seek(std::io::SeekFrom::Start(offset))?;
        }
    }
}
