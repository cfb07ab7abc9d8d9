//! `bash`'s `outputs` through the real binary and rmcp's client: the files a command made come
//! back as embedded resources (text as text, anything else as a base64 blob with its exact
//! bytes), whatever the exit code and on timeout; a call naming too many is refused before the
//! command runs; one over the budget, a link the command planted to a file outside the roots,
//! a secret file and a FIFO are refused one by one while the others still come back, and no
//! refused file's content is in the answer.

use super::common::{CANARY, Client, Era, Fixture, text_of};
use base64::Engine;
use rmcp::model::{CallToolResult, ResourceContents};
use serde_json::{Value, json};
use std::time::Duration;

const SECRET: &str = "hunter2-hands-outputs-secret";

async fn start(fx: &Fixture) -> Client {
    let config = fx.config(
        "[daemon]\nstate_dir = \"{state}\"\n\n[[builtins]]\nid = \"tools-shell\"\n\
         grants = [\"filesystem\", \"spawn\"]\nfilesystem = [{ path = \"{root}\", write = true }]\n\
         config = { trust = { external = \"allow\" } }\n",
    );
    Client::start_with_env(fx, &config, Era::Legacy, &[]).await
}

/// A `bash` call that must come back (within 60 s: nothing may block) and succeed.
async fn bash(c: &Client, args: Value) -> CallToolResult {
    let call = c.call("bash", args.clone());
    let r = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .unwrap_or_else(|_| panic!("bash {args} did not answer within 60 s"));
    assert_ne!(r.is_error, Some(true), "bash {args} failed: {}", text_of(&r));
    r
}

/// The result's embedded resources: (uri, mime, bytes, carried as text).
fn resources(r: &CallToolResult) -> Vec<(String, String, Vec<u8>, bool)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    r.content
        .iter()
        .filter_map(|c| c.as_resource())
        .map(|e| match &e.resource {
            ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                (uri.clone(), mime_type.clone().unwrap(), text.as_bytes().to_vec(), true)
            }
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                (uri.clone(), mime_type.clone().unwrap(), b64.decode(blob).unwrap(), false)
            }
            _ => panic!("an unknown kind of resource: {e:?}"),
        })
        .collect()
}

/// The structured `outputs` entry of `path`.
fn entry<'a>(r: &'a CallToolResult, path: &str) -> &'a Value {
    let s = r.structured_content.as_ref().unwrap();
    let all = s["outputs"].as_array().unwrap_or_else(|| panic!("no outputs in {s}"));
    all.iter().find(|o| o["path"] == path).unwrap_or_else(|| panic!("no {path} in {s}"))
}

/// Everything the client received, as one string (text, structured content, resources).
fn everything(r: &CallToolResult) -> String {
    let mut all = serde_json::to_string(r).unwrap();
    for (_, _, bytes, _) in resources(r) {
        all.push_str(&String::from_utf8_lossy(&bytes));
    }
    all
}

/// Every byte value, with a PNG's signature in front.
fn png_ish() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend(0..=255u8);
    b.extend((0..=255u8).rev());
    b
}

#[tokio::test]
async fn text_and_binary_outputs_come_back_as_resources_with_their_exact_bytes() {
    let fx = Fixture::new();
    let png = png_ish();
    let src = fx.write("src.bin", "");
    std::fs::write(&src, &png).unwrap();
    fx.write("sub/.keep", "");
    let c = start(&fx).await;
    // A failing command still returns its report; relative paths are in its cwd.
    let r = bash(
        &c,
        json!({
            "command": "echo all passed | tr a-z A-Z > report.txt; printf '{\"ok\":true}' > r.json; \
                        cp ../src.bin shot.png; exit 3",
            "cwd": "sub",
            "outputs": ["report.txt", "r.json", "shot.png", &format!("{}/src.bin", fx.root.display())],
        }),
    )
    .await;
    let s = r.structured_content.clone().unwrap();
    assert_eq!(s["exit_code"], 3, "{s}");
    let got = resources(&r);
    let sub = fx.root.join("sub");
    let want = [
        (
            format!("file://{}/report.txt", sub.display()),
            "text/plain",
            b"ALL PASSED\n".to_vec(),
            true,
        ),
        (
            format!("file://{}/r.json", sub.display()),
            "application/json",
            b"{\"ok\":true}".to_vec(),
            true,
        ),
        (format!("file://{}/shot.png", sub.display()), "image/png", png.clone(), false),
        (
            format!("file://{}/src.bin", fx.root.display()),
            "application/octet-stream",
            png.clone(),
            false,
        ),
    ];
    assert_eq!(got.len(), 4, "{}", text_of(&r));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, g.1.as_str(), &g.2, g.3), (&w.0, w.1, &w.2, w.3));
    }
    let shot = entry(&r, "shot.png");
    assert_eq!(shot["returned"], true, "{shot}");
    assert_eq!(shot["bytes"], png.len(), "{shot}");
    assert_eq!(shot["mime"], "image/png", "{shot}");
    // The text mirror says what came back, for clients that read only the text.
    assert!(text_of(&r).contains("output shot.png: returned below as file://"), "{}", text_of(&r));
    // A command stopped by its timeout still returns what it wrote.
    let r = bash(
        &c,
        json!({ "command": "echo partial > log.txt; sleep 30", "timeout_secs": 1,
                "outputs": ["log.txt"] }),
    )
    .await;
    assert_eq!(r.structured_content.as_ref().unwrap()["timed_out"], true);
    assert_eq!(resources(&r)[0].2, b"partial\n");
    // The audit keeps the call, never the files' content.
    c.stop().await;
    let audit = serde_json::to_string(&fx.audit_records()).unwrap();
    assert!(audit.contains("report.txt") && !audit.contains("ALL PASSED"), "{audit}");
    fx.assert_canary();
}

#[tokio::test]
async fn more_than_eight_outputs_or_one_outside_the_roots_are_refused_before_anything_runs() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let nine: Vec<String> = (0..9).map(|i| format!("f{i}.txt")).collect();
    let r = c.call("bash", json!({ "command": "touch ran-9", "outputs": nine })).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("more than the 8"), "{}", text_of(&r));
    assert!(!fx.root.join("ran-9").exists(), "the command ran");
    let outside = format!("{}/canary.txt", fx.outside.display());
    for bad in [outside.as_str(), "../outside/canary.txt", ""] {
        let r = c.call("bash", json!({ "command": "touch ran-bad", "outputs": [bad] })).await;
        assert_eq!(r.is_error, Some(true), "{bad}: {}", text_of(&r));
        assert!(text_of(&r).contains("nothing ran"), "{}", text_of(&r));
        assert!(!everything(&r).contains(CANARY.trim_end()), "{}", text_of(&r));
    }
    assert!(!fx.root.join("ran-bad").exists(), "the command ran");
    // Eight run, and the ones that are not there are said to be missing.
    let eight: Vec<String> = (0..8).map(|i| format!("f{i}.txt")).collect();
    let r = bash(&c, json!({ "command": "touch ran-8 f0.txt", "outputs": eight })).await;
    assert!(fx.root.join("ran-8").exists());
    assert_eq!(resources(&r).len(), 1, "{}", text_of(&r));
    let missing = entry(&r, "f7.txt");
    assert_eq!(missing["returned"], false);
    assert!(missing["why"].as_str().unwrap().contains("does not exist"), "{missing}");
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn an_output_over_the_budget_is_refused_while_the_others_come_back() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let big = 21 * 1024 * 1024;
    let r = bash(
        &c,
        json!({ "command": format!("head -c {big} /dev/zero > big.bin; echo small > small.txt"),
                "outputs": ["big.bin", "small.txt"] }),
    )
    .await;
    let refused = entry(&r, "big.bin");
    assert_eq!(refused["returned"], false, "{refused}");
    assert_eq!(refused["bytes"], big, "{refused}");
    let why = refused["why"].as_str().unwrap();
    assert!(why.contains("20 MiB") && why.contains("compress"), "{why}");
    let got = resources(&r);
    assert_eq!(got.len(), 1, "{}", text_of(&r));
    assert_eq!(got[0].2, b"small\n");
    c.stop().await;
}

#[tokio::test]
async fn a_link_the_command_plants_to_a_file_outside_the_roots_is_refused() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let canary = fx.outside.join("canary.txt");
    let r = bash(
        &c,
        json!({
            "command": format!(
                "ln -s {} abs-link.txt; ln -s ../outside/canary.txt rel-link.txt; \
                 echo fine > fine.txt; ln -s fine.txt in-root-link.txt",
                canary.display()
            ),
            "outputs": ["abs-link.txt", "rel-link.txt", "in-root-link.txt"],
        }),
    )
    .await;
    for p in ["abs-link.txt", "rel-link.txt"] {
        let e = entry(&r, p);
        assert_eq!(e["returned"], false, "{e}");
        assert!(e["why"].as_str().unwrap().contains("leaves root"), "{e}");
    }
    // The positive control: a link that stays in the root is followed, as `read` follows it.
    let got = resources(&r);
    assert_eq!(got.len(), 1, "{}", text_of(&r));
    assert_eq!(got[0].0, format!("file://{}/fine.txt", fx.root.display()));
    assert_eq!(got[0].2, b"fine\n");
    assert!(!everything(&r).contains(CANARY.trim_end()), "the canary leaked: {}", text_of(&r));
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn secret_files_are_refused_as_read_refuses_them() {
    let fx = Fixture::new();
    fx.write(".env", &format!("TOKEN={SECRET}\n"));
    fx.write(".env.example", "TOKEN=example-value\n");
    let c = start(&fx).await;
    let r = bash(
        &c,
        json!({ "command": format!("mkdir -p app; echo 'KEY={SECRET}' > app/.env.local; \
                                    ln -s .env env-link.txt"),
                "outputs": [".env", "app/.env.local", "env-link.txt", ".env.example"] }),
    )
    .await;
    for p in [".env", "app/.env.local", "env-link.txt"] {
        let e = entry(&r, p);
        assert_eq!(e["returned"], false, "{e}");
        assert!(e["why"].as_str().unwrap().contains("secret"), "{e}");
    }
    let got = resources(&r);
    assert_eq!(got.len(), 1, "{}", text_of(&r));
    assert_eq!(got[0].2, b"TOKEN=example-value\n");
    assert!(!everything(&r).contains(SECRET), "the secret leaked: {}", text_of(&r));
    c.stop().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_fifo_a_folder_or_a_device_among_the_outputs_is_refused_without_blocking() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    // The command makes the FIFO and leaves nobody writing it: a read would wait forever.
    let r = bash(
        &c,
        json!({ "command": "mkfifo pipe && echo made; mkdir -p dir; echo ok > ok.txt",
                "outputs": ["pipe", "dir", "ok.txt"] }),
    )
    .await;
    let s = r.structured_content.as_ref().unwrap();
    assert!(s["stdout"].as_str().unwrap().contains("made"), "{s}");
    assert!(entry(&r, "pipe")["why"].as_str().unwrap().contains("FIFO"), "{s}");
    assert!(entry(&r, "dir")["why"].as_str().unwrap().contains("directory"), "{s}");
    let got = resources(&r);
    assert_eq!(got.len(), 1, "{}", text_of(&r));
    assert_eq!(got[0].2, b"ok\n");
    // The daemon serves on.
    let again = bash(&c, json!({ "command": "echo again" })).await;
    assert!(resources(&again).is_empty());
    c.stop().await;
}

/// A command still running beside the reads (a tmux session in the same sandbox) swaps an
/// output between a file in the root and a link to the canary outside, over and over: each read
/// resolves once and reads what it resolved, so it returns the file or refuses the link, and
/// never the canary.
#[tokio::test]
async fn an_output_swapped_for_a_link_while_it_is_read_never_leaks_what_the_link_names() {
    let fx = Fixture::new();
    let c = start(&fx).await;
    let canary = fx.outside.join("canary.txt");
    let swap = format!(
        "while :; do ln -sfn {} l.tmp && mv -fT l.tmp swap.txt; \
         echo inside > f.tmp && mv -fT f.tmp swap.txt; done",
        canary.display()
    );
    c.ok("tmux_start", json!({ "command": swap, "name": "swapper" })).await;
    let (mut returned, mut refused) = (0, 0);
    for _ in 0..30 {
        let r = bash(&c, json!({ "command": "true", "outputs": ["swap.txt"] })).await;
        assert!(!everything(&r).contains(CANARY.trim_end()), "leaked: {}", text_of(&r));
        match resources(&r).first() {
            Some(got) => {
                assert_eq!(got.2, b"inside\n");
                returned += 1;
            }
            None => refused += 1,
        }
    }
    c.ok("tmux_kill", json!({ "session": "swapper" })).await;
    // The positive control: the file itself comes back while it is there.
    assert!(returned > 0, "never returned ({refused} refused)");
    c.stop().await;
    fx.assert_canary();
}
