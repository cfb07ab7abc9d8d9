//! `bash`'s `outputs` through the real relay to the real runner: a link frame holds 16 MiB, so a
//! file whose base64 would not fit the answer is refused with that reason while a
//! megabytes-large one and a small one come back with their exact bytes — and the link stays up
//! for the next call (an answer over the frame would have been refused by the relay).

use super::super::common::{Era, Fixture, text_of};
use super::{ALICE, Org, RUNNER_TOKEN, agent_at, call, runner_config, start_runner};
use base64::Engine;
use rmcp::model::ResourceContents;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn outputs_fit_the_link_and_the_link_stays_up() {
    let fx = Fixture::new();
    let org = Org::start_plain(&fx).await;
    let config = runner_config(&fx, &org.url(), None, RUNNER_TOKEN, "local");
    let runner = start_runner(&fx, &config);
    assert!(org.wait_connected(true, Duration::from_secs(20)).await, "{}", runner.text());
    let c = agent_at(org.endpoint("box-1"), ALICE, Era::Legacy, ()).await;
    // 13 MB is about 17.3 MB of base64: more than a frame; 3 MB is 4 MB of it.
    // An answer the relay refuses never arrives: the call would wait, so it is bounded here.
    let first = call(
        &c,
        "bash",
        json!({ "command": "head -c 13000000 /dev/urandom > big.bin; \
                            head -c 3000000 /dev/urandom > mid.bin; echo small > small.txt",
                "outputs": ["big.bin", "mid.bin", "small.txt"] }),
    );
    let r = tokio::time::timeout(Duration::from_secs(60), first)
        .await
        .unwrap_or_else(|_| panic!("no answer within 60 s: {}", runner.text()));
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let s = r.structured_content.clone().unwrap();
    let big = &s["outputs"][0];
    assert_eq!(big["returned"], false, "{s}");
    assert!(big["why"].as_str().unwrap().contains("runner's link"), "{big}");
    let b64 = base64::engine::general_purpose::STANDARD;
    let got: Vec<Vec<u8>> = r
        .content
        .iter()
        .filter_map(|c| c.as_resource())
        .map(|e| match &e.resource {
            ResourceContents::BlobResourceContents { blob, .. } => b64.decode(blob).unwrap(),
            ResourceContents::TextResourceContents { text, .. } => text.as_bytes().to_vec(),
            _ => panic!("an unknown kind of resource"),
        })
        .collect();
    assert_eq!(got.len(), 2, "{}", text_of(&r));
    assert!(got[0] == std::fs::read(fx.root.join("mid.bin")).unwrap(), "mid.bin differs");
    assert_eq!(got[1], b"small\n");
    // The link is still up: the next call answers.
    let r = call(&c, "bash", json!({ "command": "echo still" })).await;
    assert_eq!(r.structured_content.unwrap()["stdout"], "still\n");
    let _ = c.cancel().await;
}
