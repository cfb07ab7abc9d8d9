//! Integration suites; `common` holds the temp-root fixture and the client helpers.

pub mod common;

mod audit;
#[cfg(target_os = "linux")]
mod bash;
#[cfg(target_os = "linux")]
mod brake_race;
#[cfg(target_os = "linux")]
mod channels;
mod config;
#[cfg(target_os = "linux")]
mod control_socket;
#[cfg(target_os = "linux")]
mod dashboard;
#[cfg(target_os = "linux")]
mod dashboard_browser;
#[cfg(target_os = "linux")]
mod denials;
#[cfg(target_os = "linux")]
mod fail_closed;
#[cfg(target_os = "linux")]
mod faults;
mod fs_tools;
mod gate;
#[cfg(target_os = "linux")]
mod git_planted;
mod git_ssh;
mod git_still;
mod git_tools;
#[cfg(target_os = "linux")]
mod home;
#[cfg(target_os = "linux")]
mod host_replaced;
#[cfg(target_os = "linux")]
mod host_trust;
mod http;
#[cfg(target_os = "linux")]
mod idmap;
mod in_process;
#[cfg(target_os = "linux")]
mod init;
#[cfg(target_os = "linux")]
mod lists;
#[cfg(target_os = "linux")]
mod load;
#[cfg(target_os = "linux")]
mod masking;
#[cfg(target_os = "linux")]
mod needs;
#[cfg(target_os = "linux")]
mod network;
#[cfg(target_os = "linux")]
mod oauth;
#[cfg(target_os = "linux")]
mod outputs;
#[cfg(target_os = "linux")]
mod parked_tell;
mod path_attacks;
mod protocol;
mod quoting;
#[cfg(target_os = "linux")]
mod ready;
#[cfg(target_os = "linux")]
mod reports;
#[cfg(target_os = "linux")]
mod resolve;
#[cfg(target_os = "linux")]
mod run;
#[cfg(target_os = "linux")]
mod runner;
#[cfg(target_os = "linux")]
mod sandbox;
#[cfg(target_os = "linux")]
mod shares;
mod special_files;
#[cfg(target_os = "linux")]
mod stop;
#[cfg(target_os = "linux")]
mod tmux;
#[cfg(target_os = "linux")]
mod trusted;
mod trusted_links;
mod trusted_mounts;
