//! Why a shell call gave no result. The daemon shows and audits a failure by its variant, never
//! by its text (src/errors.rs): a refusal a layer decided (the brake, `enforce`, one resolution)
//! carries denial feedback and is audited `refused:`; everything else is a plain failure whose
//! message says what went wrong and what to do.

/// What a person's `hands stop` makes of a command it stopped, or one it refuses while it holds.
pub const HALTED: &str = "stopped by `hands stop`: a person ended this daemon's commands; \
                          commands are refused until `hands stop --release` (or a restart)";

/// A shell call's failure (`isError`).
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// `hands stop` holds, or it stopped this command.
    #[error("{HALTED}")]
    Braked,
    /// `sandbox.mode = "enforce"` and the self-test found a guarantee missing: no command runs,
    /// and nobody was asked.
    #[error(
        "refused before anyone was asked: sandbox.mode = \"enforce\" and the sandbox self-test \
         found these guarantees missing: {missing} ({notes}); `hands doctor` shows why and how to \
         fix it. {fix}"
    )]
    Enforce {
        /// The guarantees that do not hold, as the self-test names them.
        missing: String,
        /// Each missing check's note.
        notes: String,
        /// What a person can do: fix the host, or in a container start it with the flags.
        fix: String,
    },
    /// A path was not what the daemon's check saw there (SPEC §3, one resolution), again after
    /// one more walk of the roots.
    #[error("{0}")]
    Changed(String),
    /// The sandbox could not be built or its launcher could not start or be waited on.
    #[error("{0}")]
    Sandbox(String),
    /// A person stopped the command on the dashboard.
    #[error("stopped by a person on the dashboard: the command and its processes were ended")]
    StoppedByPerson,
    /// The client cancelled the call (or went away); the text says at which point.
    #[error("{0}")]
    Cancelled(String),
    /// A tmux tool's argument cannot be used (session name, `ready`/`wait`, timeout).
    #[error(transparent)]
    Arguments(#[from] crate::tmux::ArgError),
    /// The program an argv names is not the one the configuration admitted: not found at load,
    /// or another file now ([`crate::pins::Pins::resolve`]).
    #[error(transparent)]
    Pin(#[from] crate::pins::PinError),
    /// The roots could not be checked completely for what the sandbox must hide or keep
    /// read-only, so no command starts (fail closed; the text says what a person can do).
    #[error(transparent)]
    Masks(std::sync::Arc<hands_sandbox::masks::MaskError>),
    /// Anything else: bad arguments, no such session, a tmux failure, I/O; the text says what
    /// and what to do.
    #[error("{0}")]
    Failed(String),
}

impl ShellError {
    /// Whether a layer decided this (audited `refused:`, with denial feedback), rather than
    /// something going wrong.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ShellError::Braked
                | ShellError::Enforce { .. }
                | ShellError::Changed(_)
                | ShellError::Pin(crate::pins::PinError::Changed { .. })
                | ShellError::Masks(_)
        )
    }

    /// The layer and remedy of the refusals tools-shell names itself (a pinned program missing
    /// or replaced, an incomplete masks walk), for the check before the gate and for the
    /// daemon's `denied` alike; `None` for the others.
    pub fn own_layer(&self) -> Option<(&'static str, &'static str)> {
        use crate::pins::PinError;
        match self {
            ShellError::Pin(PinError::Changed { .. }) => Some((
                "tools-shell (pinned programs)",
                "a person who replaced the program on purpose restarts the daemon, which pins \
                 the new file",
            )),
            ShellError::Pin(PinError::NotFound { .. }) => Some((
                "tools-shell (path)",
                "a person installs the program in the module's PATH (or adds its folder to \
                 tools-shell's `path`) and restarts the daemon",
            )),
            ShellError::Masks(_) => Some((
                "sandbox (masks)",
                "a person does what the message says: commands start again once every root \
                 can be checked completely",
            )),
            _ => None,
        }
    }
}
