//! libgit2's process-global options, set once behind a safe function (decision 0072): the
//! one place outside the launcher's libc calls where the process must promise something to a C
//! library. hands-git calls [`set_process_options`] before its first libgit2 call; nothing
//! else in `hands` links libgit2.

use std::ffi::CString;
use std::sync::Once;

static SET: Once = Once::new();

/// The config levels libgit2 would search outside a repository.
const OUTSIDE: [git2::ConfigLevel; 4] = [
    git2::ConfigLevel::Global,
    git2::ConfigLevel::XDG,
    git2::ConfigLevel::System,
    git2::ConfigLevel::ProgramData,
];

/// Sets libgit2's process-global options for hands, once per process; later calls wait for the
/// first to finish and return. Call it before any libgit2 call that opens a repository, a
/// config or a remote:
///
/// - **No config outside the repository**: an empty search path for the global, XDG, system and
///   ProgramData levels, so nothing outside the roots (a `~/.gitconfig` with includes, helpers
///   or `safe.directory`) steers a tool.
/// - **No owner check**: a root daemon runs commands as `sandbox.run_as`, so the repositories in
///   its roots belong to that user and libgit2's check (git's `safe.directory`) would refuse
///   every one. The check guards against a repository another user planted on the way to a
///   path; here every repository lies under a root the person declared, and no config of it
///   can make a tool run a program (hands-git's `confine.rs`).
/// - **Bounded network waits**: 30 s to connect and 5 min for any one read or write of a push
///   over SSH, so a silent server cannot hold a worker thread forever.
///
/// A failed setting leaves libgit2's default (the repository config scan still applies), so
/// failures are ignored.
pub fn set_process_options() {
    SET.call_once(|| {
        // SAFETY (every call below): libgit2's options are process-global and unsynchronised,
        // so setting one is unsound only while another thread's libgit2 call reads them. The
        // `Once` runs these exactly once, and every other caller of this function blocks until
        // they are done. The only libgit2 user in `hands` is hands-git, which calls this in
        // `Git::new`, before it opens any repository, config or remote; what it may call
        // earlier (the name and signature checks of its settings) reads none of these options.
        for level in OUTSIDE {
            // An empty path means "search nowhere".
            let _ = unsafe { git2::opts::set_search_path(level, "") };
        }
        let _ = unsafe { git2::opts::set_verify_owner_validation(false) };
        let _ = unsafe { git2::opts::set_server_connect_timeout_in_milliseconds(30_000) };
        let _ = unsafe { git2::opts::set_server_timeout_in_milliseconds(300_000) };
    });
}

/// Where libgit2 searches for config at each level outside the repository, after
/// [`set_process_options`] (which this calls first): empty for each, when it took.
pub fn search_paths() -> Vec<(git2::ConfigLevel, Result<CString, git2::Error>)> {
    set_process_options();
    // SAFETY: reading races only with a setting; every setting ran in `set_process_options`,
    // which has finished (the `Once` above), and nothing sets an option after it.
    OUTSIDE
        .into_iter()
        .map(|level| (level, unsafe { git2::opts::get_search_path(level) }))
        .collect()
}
