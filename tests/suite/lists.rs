//! `deny` and `confirm` hold where programs run, and allowed programs are what the configuration
//! admitted (issue 37 points 1 and 3; decisions 0067 and 0068), through the real binary. With
//! `rm` denied no route deletes the victim — `rg --pre`, `sed e`, `tar --checkpoint-action`,
//! `split --filter`, `git grep -O`, `zip -TT`, `sort --compress-program=sh`, a kubeconfig's exec
//! plugin through `os-kubectl-get`, `ld.so /usr/bin/rm` under `allow = ["*"]`, a `git log
//! --output` planting a `core.fsmonitor` — while the same route running an allowed program
//! works (the positive controls). Confirm-listed shells (`rbash`, `busybox ash`, the `sh` that
//! `sort` and `sed` start) run only in a run a person confirmed. A path folder a module can write
//! is refused by `check` when tools-shell offers only allowlisted programs; a program replaced
//! after the configuration was loaded is refused by the daemon and, when the swap comes while a
//! person is asked, by the launcher. The canary outside the roots stays unchanged throughout.

use super::channels::parked_id;
use super::common::{Fixture, Person, own, own_tree, text_of};
use super::gate::approvals;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

type Conn = RunningService<RoleClient, Person>;

const VICTIM: &str = "VICTIM: must not be deleted\n";

/// A folder beside the root (no module reaches it) for stand-ins, on the module's path.
fn bin(fx: &Fixture) -> PathBuf {
    let bin = fx.root.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    bin
}

fn exe(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A `kubectl` stand-in that does what kubectl does with `--kubeconfig`: it runs the user's
/// exec credential plugin (`command` and `args`, no shell) before it answers. Perl, since `sh`
/// is confirm-listed by default.
fn kubectl(fx: &Fixture) {
    exe(
        &bin(fx).join("kubectl"),
        "#!/usr/bin/perl\nmy ($kc, @rest);\nwhile (defined(my $a = shift @ARGV)) {\n\
         if ($a eq '--kubeconfig') { $kc = shift @ARGV } else { push @rest, $a } }\n\
         if ($kc) { open(my $f, '<', $kc) or die \"cannot read $kc\\n\"; local $/; my $t = <$f>;\n\
         my ($cmd) = $t =~ /command:\\s*(\\S+)/; my ($args) = $t =~ /args:\\s*\\[([^\\]]*)\\]/;\n\
         my @args = map { s/^\\s*\"?|\"?\\s*$//gr } split(/,/, $args // '');\n\
         if (system($cmd, @args) != 0) { print STDERR \"getting credentials: exec: $cmd failed\\n\"; exit 1 } }\n\
         print \"kubectl @rest\\n\";\n",
    );
}

fn config(fx: &Fixture, commands: &str, bash: bool) -> PathBuf {
    kubectl(fx);
    fx.config(&format!(
        "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
         [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
         filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
         config = {{ path = \"{}:/usr/bin:/bin\", bash = {bash}, trust = {{ external = \"allow\" }}, \
         commands = {{ {commands} }}, tools = [{{ bin = \"kubectl\", args = [\"get\"], \
         description = \"Read Kubernetes objects.\" }}] }}\n",
        bin(fx).display()
    ))
}

async fn connect(fx: &Fixture, config: &Path, person: Person) -> Conn {
    let mut cmd = fx.command(&["serve", "--config", config.to_str().unwrap()]);
    cmd.stderr(std::process::Stdio::inherit());
    person.serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
}

async fn call(c: &Conn, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args)).await.unwrap()
}

async fn run(c: &Conn, argv: &[&str]) -> CallToolResult {
    call(c, "run", json!({ "argv": argv })).await
}

/// The victim, the files the routes read, and a repository with a commit whose message is a
/// git config naming the denied program as `core.fsmonitor`.
fn plant(fx: &Fixture) {
    fx.write("victim", VICTIM);
    fx.write("one.txt", "one\n");
    let repo = fx.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("target.txt"), "VICTIM\n").unwrap();
    let home = &fx.home;
    super::common::host_git(home, &repo, &["init", "-q"]);
    super::common::host_git(home, &repo, &["add", "target.txt"]);
    let msg = format!("[core]\n\tfsmonitor = rm -f {}/victim", fx.root.display());
    super::common::host_git(home, &repo, &["commit", "-qm", &msg]);
    own_tree(&repo);
}

fn made(fx: &Fixture, name: &str) -> bool {
    fx.root.join(name).exists()
}

fn assert_victim(fx: &Fixture, how: &str) {
    let v = std::fs::read_to_string(fx.root.join("victim"));
    assert_eq!(v.as_deref().ok(), Some(VICTIM), "{how} deleted the victim");
    assert!(fx.root.join("repo/target.txt").exists(), "{how} deleted repo/target.txt");
}

fn kubeconfig(fx: &Fixture, name: &str, command: &str, arg: &str) -> String {
    let text = format!(
        "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    exec:\n      \
         apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      \
         args: [\"{arg}\"]\n"
    );
    fx.write(name, &text).display().to_string()
}

fn sort_input(fx: &Fixture, name: &str, line: &str) -> String {
    fx.write(name, &format!("{line}\n").repeat(3000)).display().to_string()
}

#[tokio::test]
async fn a_denied_program_runs_by_no_route() {
    let fx = Fixture::new();
    plant(&fx);
    let config = config(&fx, "allow = [\"*\"], deny = [\"rm\"], confirm = []", false);
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let root = fx.root.display().to_string();
    let home = super::common::sandbox_home(&fx).display().to_string();
    let evil_kc = kubeconfig(&fx, "evil.yaml", "rm", &format!("{root}/victim"));
    let good_kc = kubeconfig(&fx, "good.yaml", "touch", &format!("{root}/made-kube"));
    let evil_sort = sort_input(&fx, "evil-sort.txt", &format!("rm -f {root}/victim"));
    let good_sort = sort_input(&fx, "good-sort.txt", &format!("touch {root}/made-sort"));
    let rg = which("rg");
    // (the attack, the same route running an allowed program, what that one makes)
    let mut routes: Vec<(Vec<String>, Vec<String>, &str)> = vec![
        (
            argv(&["sed", "-n", "1e rm victim", "one.txt"]),
            argv(&["sed", "-n", "1e touch made-sed", "one.txt"]),
            "made-sed",
        ),
        (
            argv(&[
                "tar",
                "-cf",
                "/tmp/a.tar",
                "--checkpoint=1",
                "--checkpoint-action=exec=rm victim",
                "one.txt",
            ]),
            argv(&[
                "tar",
                "-cf",
                "/tmp/b.tar",
                "--checkpoint=1",
                "--checkpoint-action=exec=touch made-tar",
                "one.txt",
            ]),
            "made-tar",
        ),
        (
            argv(&["split", "--filter=rm victim", "one.txt"]),
            argv(&["split", "--filter=touch made-split", "one.txt"]),
            "made-split",
        ),
        (
            argv(&["zip", "-T", "-TT", "rm victim", "/tmp/a.zip", "one.txt"]),
            argv(&["zip", "-T", "-TT", "touch made-zip", "/tmp/b.zip", "one.txt"]),
            "made-zip",
        ),
        (
            argv(&["sort", "-S", "4K", "--compress-program=sh", &evil_sort]),
            argv(&["sort", "-S", "4K", "--compress-program=sh", &good_sort]),
            "made-sort",
        ),
        (
            argv(&["ld.so", "/usr/bin/rm", "victim"]),
            argv(&["ld.so", "/usr/bin/touch", "made-ldso"]),
            "made-ldso",
        ),
    ];
    if rg {
        routes.push((
            argv(&["rg", "--pre", "rm", "VICTIM", "victim"]),
            argv(&["rg", "--pre", "cat", "one", "one.txt"]),
            "",
        ));
    } else {
        skipped("rg --pre", "ripgrep");
    }
    for (attack, control, mark) in &routes {
        let r = call(&c, "run", json!({ "argv": attack })).await;
        assert_victim(&fx, &format!("{attack:?} ({})", text_of(&r)));
        let r = call(&c, "run", json!({ "argv": control })).await;
        let ran = if mark.is_empty() {
            r.structured_content.as_ref().is_some_and(|s| s["exit_code"] == 0)
        } else {
            made(&fx, mark)
        };
        assert!(ran, "positive control {control:?} did not run: {}", text_of(&r));
    }
    // git: `grep -O` opens the matches in the pager it is given; `log --output` writes a file
    // anywhere the command may, here a config whose fsmonitor is the denied program.
    let r = run(&c, &["git", "-C", "repo", "grep", "--open-files-in-pager=rm", "VICTIM"]).await;
    assert_victim(&fx, &format!("git grep -O ({})", text_of(&r)));
    let r = run(&c, &["git", "-C", "repo", "grep", "--open-files-in-pager=cat", "VICTIM"]).await;
    assert!(text_of(&r).contains("VICTIM"), "positive control git grep -O cat: {}", text_of(&r));
    let out = format!("--output={home}/.gitconfig");
    let r = run(&c, &["git", "-C", "repo", "log", "-1", "--format=%B", &out]).await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let r = run(&c, &["git", "-C", "repo", "status"]).await;
    assert_victim(&fx, &format!("git log --output then git status ({})", text_of(&r)));
    let log = format!("--output={root}/log.txt");
    run(&c, &["git", "-C", "repo", "log", "-1", "--format=%B", &log]).await;
    let written = std::fs::read_to_string(fx.root.join("log.txt")).unwrap_or_default();
    assert!(written.contains("fsmonitor"), "positive control git log --output: {written:?}");
    // A kubeconfig's exec credential plugin, through the example config's "read-only" tool.
    let r = call(&c, "os-kubectl-get", json!({ "args": ["pods", "--kubeconfig", evil_kc] })).await;
    assert_victim(&fx, &format!("os-kubectl-get with an exec plugin ({})", text_of(&r)));
    let r = call(&c, "os-kubectl-get", json!({ "args": ["pods", "--kubeconfig", good_kc] })).await;
    assert!(made(&fx, "made-kube"), "positive control kubectl plugin: {}", text_of(&r));
    // `rm` itself, and a multi-call binary that can be rm: refused by the policy.
    for attack in [&["rm", "victim"][..], &["busybox", "rm", "victim"]] {
        let r = run(&c, attack).await;
        assert!(text_of(&r).contains("commands.deny"), "{attack:?}: {}", text_of(&r));
        assert_victim(&fx, &format!("{attack:?}"));
    }
    let _ = c.cancel().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_denied_program_is_not_in_a_bash_run_and_shells_are() {
    let fx = Fixture::new();
    fx.write("victim", VICTIM);
    fx.write("repo/target.txt", "x");
    let config = config(&fx, "allow = [\"kubectl get\"], deny = [\"rm\"]", true);
    let c = connect(&fx, &config, Person::new(None, true)).await;
    let cmd = "rm victim; busybox rm victim; /usr/bin/ld.so /usr/bin/rm victim; \
               sh -c 'touch made-sh'; dash -c 'touch made-dash'; touch made-touch";
    let r = call(&c, "bash", json!({ "command": cmd })).await;
    assert_victim(&fx, &format!("bash ({})", text_of(&r)));
    // The result says which program was missing and why, not only "Permission denied".
    let denied = &r.structured_content.as_ref().unwrap()["denied"];
    let said = denied
        .as_array()
        .is_some_and(|d| d.iter().any(|x| x["what"] == "rm" && x["layer"] == "commands.deny"));
    assert!(said, "{denied}");
    let misleading = denied
        .as_array()
        .is_some_and(|d| d.iter().any(|x| x["what"].as_str().is_some_and(|w| w.ends_with("/rm"))));
    assert!(!misleading, "rm's file reported as a denied path: {denied}");
    // Confirm-listed shells are there in a bash run (the tool is a shell: decision 0067).
    for m in ["made-sh", "made-dash", "made-touch"] {
        assert!(made(&fx, m), "{m}: {}", text_of(&r));
    }
    let _ = c.cancel().await;
    fx.assert_canary();
}

#[tokio::test]
async fn a_confirm_listed_program_runs_only_in_a_run_a_person_confirmed() {
    let fx = Fixture::new();
    plant(&fx);
    let config = config(&fx, "allow = [\"*\"]", false);
    let person = Person::new(None, true);
    let c = connect(&fx, &config, person.clone()).await;
    let root = fx.root.display().to_string();
    let sort = sort_input(&fx, "sort.txt", &format!("touch {root}/made-sort"));
    // A shell under another name, and one inside a multi-call binary: a person is asked, and a
    // no is a no.
    let mut shells = vec![(vec!["rbash", "-c", "touch made-rbash"], "made-rbash")];
    if which("busybox") {
        shells.push((vec!["busybox", "ash", "-c", "touch made-bb"], "made-bb"));
    } else {
        skipped("busybox ash", "busybox");
    }
    for (attack, mark) in shells {
        let asked = person.times_asked();
        let r = run(&c, &attack).await;
        assert_eq!(
            person.times_asked(),
            asked + 1,
            "{attack:?} ran without asking: {}",
            text_of(&r)
        );
        assert!(!made(&fx, mark), "{attack:?}: {}", text_of(&r));
    }
    // Programs that start `sh` themselves: no person was asked, so there is no sh.
    let asked = person.times_asked();
    let r = run(&c, &["sort", "-S", "4K", "--compress-program=sh", &sort]).await;
    assert!(!made(&fx, "made-sort"), "sort ran sh unconfirmed: {}", text_of(&r));
    let r = run(&c, &["sed", "-n", "1e touch made-sed", "one.txt"]).await;
    assert!(!made(&fx, "made-sed"), "sed ran sh unconfirmed: {}", text_of(&r));
    assert_eq!(person.times_asked(), asked, "sort and sed are not confirm-listed");
    // Positive control: the person says yes, and the shell runs.
    person.set(Some("allow_once"));
    let r = run(&c, &["rbash", "-c", "touch made-rbash"]).await;
    assert!(made(&fx, "made-rbash"), "a confirmed run: {}", text_of(&r));
    let _ = c.cancel().await;
    assert_victim(&fx, "the confirm test");
    fx.assert_canary();
}

/// A path folder a module's file tool can write: refused by `check` without `bash`; with `bash`
/// a warning. Positive control: the same folder in a read-only root.
#[test]
fn a_path_folder_any_module_can_write_is_refused_without_bash() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("bin")).unwrap();
    exe(&fx.root.join("bin/mytool"), "#!/usr/bin/perl\nprint \"mine\\n\";\n");
    let text = |fs_write: bool, bash: bool| {
        format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n\n\
             [[builtins]]\nid = \"tools-fs\"\ngrants = [\"filesystem\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = {fs_write} }}]\n\n\
             [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\" }}]\n\
             config = {{ path = \"{{root}}/bin:/usr/bin:/bin\", bash = {bash}, \
             commands = {{ allow = [\"mytool\"] }} }}\n"
        )
    };
    let check = |t: String| {
        let config = fx.config(&t);
        let out =
            fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, out) = check(text(true, false));
    assert!(!ok && out.contains("config.path") && out.contains("tools-fs"), "{out}");
    let (ok, out) = check(text(false, false));
    assert!(ok, "a read-only root: {out}");
    let (ok, out) = check(text(true, true));
    assert!(ok, "with bash it is a warning: {out}");
    let config = fx.config(&text(true, true));
    let out = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.contains("bin") && out.contains("tools-fs") && out.contains("under an allowed name"),
        "{out}"
    );
    fx.assert_canary();
}

/// A program replaced after the configuration was loaded is refused: by the daemon's check, and
/// by the launcher when the swap comes while a person is being asked. Positive control: the
/// program as loaded runs.
#[tokio::test]
async fn an_allowed_program_replaced_after_loading_is_refused() {
    let fx = Fixture::new();
    let tool = bin(&fx).join("mytool");
    exe(&tool, "#!/usr/bin/perl\nprint \"the person's tool\\n\";\n");
    let evil = format!(
        "#!/usr/bin/perl\nopen(my $f, '>', '{}/replaced-ran'); print \"agent\\n\";\n",
        fx.root.display()
    );
    let swap = || {
        let new = tool.with_file_name("mytool.new");
        exe(&new, &evil);
        std::fs::rename(&new, &tool).unwrap();
    };
    let text = |external: &str| {
        format!(
            "[daemon]\nstate_dir = \"{{state}}\"\n\n[trust]\napproval_timeout_secs = 30\n\n\
             [[builtins]]\nid = \"tools-shell\"\ngrants = [\"filesystem\", \"spawn\"]\n\
             filesystem = [{{ path = \"{{root}}\", write = true }}]\n\
             config = {{ path = \"{}:/usr/bin:/bin\", bash = false, \
             trust = {{ external = \"{external}\" }}, commands = {{ allow = [\"mytool\"] }} }}\n",
            bin(&fx).display()
        )
    };
    // The daemon's check.
    let config = fx.config(&text("allow"));
    let c = connect(&fx, &config, Person::new(None, false)).await;
    let r = run(&c, &["mytool"]).await;
    assert!(text_of(&r).contains("the person's tool"), "positive control: {}", text_of(&r));
    swap();
    let r = run(&c, &["mytool"]).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("not the one the configuration admitted"), "{}", text_of(&r));
    // A refusal, said as one: its layer in `denied`, and `refused:` in the audit log.
    let denied = r.structured_content.as_ref().map(|v| v["denied"].to_string());
    assert!(
        denied.as_deref().is_some_and(|d| d.contains("tools-shell (pinned programs)")),
        "{denied:?}"
    );
    let last = fx.audit_records().into_iter().rev().find(|r| r["tool"] == "run").unwrap();
    assert!(last["outcome"].as_str().unwrap().starts_with("refused: "), "{last}");
    assert!(!made(&fx, "replaced-ran"));
    let _ = c.cancel().await;
    // The launcher's: checked, then swapped while the call waits for a person.
    exe(&tool, "#!/usr/bin/perl\nprint \"the person's tool\\n\";\n");
    let config = fx.config(&text("ask"));
    let c = std::sync::Arc::new(connect(&fx, &config, Person::new(None, false)).await);
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { run(&c, &["mytool"]).await })
    };
    let (id, _) = parked_id(&fx, &config, "mytool").await;
    swap();
    assert!(approvals(&fx, &config, &["approve", &id]).0);
    let r = waiting.await.unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("not the file the configuration admitted"), "{}", text_of(&r));
    let last = fx.audit_records().into_iter().rev().find(|r| r["tool"] == "run").unwrap();
    assert!(last["outcome"].as_str().unwrap().starts_with("refused: "), "{last}");
    assert!(!made(&fx, "replaced-ran"));
    fx.assert_canary();
    if super::common::is_root() {
        own(&fx.root);
    }
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Says on stderr that a route was not tried because `package` is missing (CI installs it).
fn skipped(route: &str, package: &str) {
    use std::io::Write;
    let uid = rustix::process::geteuid().as_raw();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {route} as uid {uid}: {package} is not installed on this machine"
    );
}

fn which(bin: &str) -> bool {
    ["/usr/bin", "/bin"].iter().any(|d| Path::new(d).join(bin).exists())
}

/// `hands doctor` names, for each allowed entry, the options known to run or write other things;
/// an entry with none listed gets no such line.
#[test]
fn doctor_names_what_each_allowed_program_can_run_or_write() {
    let fx = Fixture::new();
    let config =
        config(&fx, "allow = [\"rg\", \"git log\", \"sort\", \"kubectl get\", \"true\"]", false);
    let out = fx.std_command(&["doctor", "--config", config.to_str().unwrap()]).output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    for (bin, option) in [
        ("rg", "--pre"),
        ("git", "--output"),
        ("git", "--upload-pack"),
        ("sort", "--compress-program"),
        ("kubectl", "--kubeconfig"),
    ] {
        let line = out.lines().find(|l| l.contains(&format!("admits `{bin}`, whose own options")));
        assert!(line.is_some_and(|l| l.contains(option)), "{bin} {option}: {out}");
    }
    assert!(!out.contains("admits `true`, whose own options"), "{out}");
}

/// A `needs.write` onto a folder of tools-shell's path (outside the roots) is refused before
/// anyone is asked: what one run planted there would run in every later one. Positive control:
/// a folder beside it is put to a person.
#[tokio::test]
async fn a_widening_onto_a_path_folder_is_refused_before_asking() {
    let fx = Fixture::new();
    let config = config(&fx, "allow = [\"kubectl get\"]", true);
    let bin = bin(&fx);
    let other = fx.root.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    if super::common::is_root() {
        own(&bin);
        own(&other);
    }
    let c = std::sync::Arc::new(connect(&fx, &config, Person::new(None, false)).await);
    let plant = format!("printf '#!/usr/bin/perl\\n' > {}/kubectl", bin.display());
    let r = call(&c, "bash", json!({ "command": plant, "needs": { "write": [bin] } })).await;
    assert_eq!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("tools-shell's path"), "{}", text_of(&r));
    let asked = approvals(&fx, &config, &["list"]).1;
    assert!(asked.contains("no action is waiting"), "a person was asked: {asked}");
    assert!(std::fs::read_to_string(bin.join("kubectl")).unwrap().contains("kubectl @rest"));
    // The neighbour is asked about (and refused here).
    let waiting = {
        let (c, other) = (c.clone(), other.clone());
        tokio::spawn(async move {
            call(&c, "bash", json!({ "command": "echo widened", "needs": { "write": [other] } }))
                .await
        })
    };
    let (id, _) = parked_id(&fx, &config, "widened").await;
    assert!(approvals(&fx, &config, &["deny", &id]).0);
    let _ = waiting.await.unwrap();
    fx.assert_canary();
}

/// The `bash` tool runs bash: a `deny` naming its file (under any name) is a startup error, not
/// a tool that always fails. Positive control: the same `deny` without the tool.
#[test]
fn denying_the_shell_the_bash_tool_runs_is_refused_at_startup() {
    let fx = Fixture::new();
    for (bash, refused) in [(true, true), (false, false)] {
        let config = config(&fx, "allow = [\"kubectl get\"], deny = [\"bash\"]", bash);
        let out =
            fx.std_command(&["check", "--config", config.to_str().unwrap()]).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(!out.status.success(), refused, "bash = {bash}: {text}");
        assert_eq!(text.contains("which the `bash` tool runs"), refused, "{text}");
    }
    fx.assert_canary();
}
