//! `hands`: the binary. Everything lives in the library (`src/lib.rs`); the command line is
//! `hands::cli`.

fn main() -> std::process::ExitCode {
    hands::cli::run()
}
