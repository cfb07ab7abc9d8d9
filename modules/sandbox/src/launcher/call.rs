//! The call a sandbox made ready ahead waits for (decision 0077): its init, once the sandbox is
//! built, takes the command's spec from the report channel and checks that it names this very
//! sandbox and that the view is still what was built.

use super::{CHANGED, Cause, Spec, mounts, report};

/// What a sandbox made ready ahead was built with, taken right after its root was built (as
/// root in the sandbox's user namespace).
pub(super) struct Built {
    /// [`mounts::marks`]: what its view showed at each root, protected and masked path.
    pub(super) marks: Vec<Option<(u64, u64, u32)>>,
    /// The protected and masked paths a read-only bind or a mask was attached on
    /// ([`mounts::build_root`]).
    pub(super) walled: Vec<std::path::PathBuf>,
}

/// The call a sandbox made ready ahead runs (decision 0077): its spec, received on the report
/// channel, refused unless it names this very sandbox ([`Spec::sandbox_key`]) and unless the
/// command's view is still what it was once built ([`mounts::marks`]: the host may have taken a
/// mask or a read-only bind off meanwhile). A refusal is [`Cause::Changed`]: the daemon walks
/// the roots again and starts the call in a sandbox of its own.
///
/// A host rename over an entry a mount sits on detaches that mount in every namespace: each
/// walled path must still be a mount's root ([`mounts::unwalled`]; no snapshot can race the
/// build, found by suite::ready under load when the marks alone were compared). The marks
/// catch a root or a folder above a wall moved on the host. The call's are taken as the
/// command's user, so an entry it cannot reach (`None`) is not compared: it is out of the
/// command's reach too.
pub(super) fn wait_for_call(
    ready: &Spec,
    built: &Built,
    reporter: &report::Reporter,
) -> anyhow::Result<Spec> {
    use anyhow::Context;
    let fd = reporter.receive_call().context("no call came for the sandbox made ready")?;
    let (call, _) = Spec::read(fd)?;
    call.validate()?;
    anyhow::ensure!(!call.ready, "the call's spec is one of a sandbox made ready, not a call");
    let (same, key) = (ready.sandbox_key()?, call.sandbox_key()?);
    if same != key {
        let why = "refused to start in the sandbox made ready: the call's spec is of another \
                   sandbox; the daemon starts it in one of its own";
        return Err(report::Failure::new(Cause::Changed, why).into());
    }
    let (now, marks) = (mounts::marks(ready), &built.marks);
    let changed = now.len() != marks.len()
        || now.iter().zip(marks).any(|(now, built)| now.is_some() && now != built)
        || mounts::unwalled(&built.walled).is_some();
    if changed {
        let why = format!(
            "refused to start in the sandbox made ready: a root, protected or masked path is \
             not what it was when the sandbox was built ({CHANGED}: the host replaced or moved \
             it); the daemon walks the roots again and starts the command in a new sandbox"
        );
        return Err(report::Failure::new(Cause::Changed, why).into());
    }
    Ok(call)
}
