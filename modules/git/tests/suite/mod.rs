//! The suites: each tool's normal path, and every refusal with its allowed neighbour.

mod hardening;
mod push;
mod tools;
