//! tools-fs's `config` table: the raw shape a daemon's config file may hold (strict serde) and
//! its validation into [`Settings`]. tools-fs has no settings of its own yet (its caps are the
//! fixed limits of SPEC §10), so the table may hold only what the daemon takes out of every
//! module's table first (`trust`); any other key is an error naming it.

use serde::Deserialize;

/// The `config` table of tools-fs, exactly as the file may write it.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {}

/// One problem in the table; the daemon places it at its file, line and section.
pub use hands_tool::Problem;

/// The validated table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {}

impl RawSettings {
    /// Validates the table; every problem is reported, not just the first.
    pub fn validate(self) -> Result<Settings, Vec<Problem>> {
        Ok(Settings {})
    }
}
