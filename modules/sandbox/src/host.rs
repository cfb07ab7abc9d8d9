//! The host's own programs, run outside any sandbox: only the version line `hands doctor`
//! reports for tmux and git (`tmux -V`, `git --version`). This is the one spawn on the host
//! besides the launcher's, kept here so that every process `hands` starts is started by this
//! crate (SPEC §11); it runs one program with one flag, no shell, no input and an empty
//! environment, and waits a bounded time.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The first line `program` prints on stdout for `flag` (`-V`, `--version`), trimmed; `None`
/// when it cannot be started or has not ended within `limit` (it is then killed). The caller
/// decides whether the program may be run at all (doctor runs none that lies in a writable
/// root, where a command could have put it).
// The host spawn of a version flag (issue 19 point 8): a fixed flag of a program doctor found
// on a PATH, outside any sandbox because it is the host's version that is asked.
#[allow(clippy::disallowed_methods)]
pub fn version_line(program: &Path, flag: &str, limit: Duration) -> Option<String> {
    let child = std::process::Command::new(program)
        .arg(flag)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let out = crate::probe::wait(child, limit)?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().next().unwrap_or("").trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::version_line;
    use std::path::Path;
    use std::time::{Duration, Instant};

    #[test]
    fn the_first_line_of_a_version_flag_and_none_when_it_cannot_run_or_hangs() {
        let sh = Path::new("/bin/sh");
        let line = version_line(sh, "-c", Duration::from_secs(5));
        // `sh -c` with no command string fails, printing nothing on stdout: an empty line.
        assert!(line.is_some_and(|l| l.is_empty()));
        assert_eq!(
            version_line(Path::new("/nonexistent/tmux"), "-V", Duration::from_secs(1)),
            None
        );
        let git = Path::new("/usr/bin/git");
        if git.exists() {
            let line = version_line(git, "--version", Duration::from_secs(5)).unwrap();
            assert!(line.starts_with("git version "), "{line:?}");
        }
        // A program that does not answer in time is killed and reads as none.
        let start = Instant::now();
        assert_eq!(version_line(Path::new("/bin/sleep"), "30", Duration::from_millis(300)), None);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
