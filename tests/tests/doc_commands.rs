//! The command blocks of the user docs that are meant to be run, run: every
//! fenced block whose info string is `sh run` or `python run` (GitHub
//! highlights them as `sh`/`python` and ignores the rest), in document
//! order, in one scratch directory per file, against the workspace's built
//! binaries (`evaluate`, `trainer`, `service`, `agent` and the examples,
//! such as `redis_router`, on `PATH`, `$REPO`
//! the repository, `$PORT` and `$REDIS_PORT` free ports). A block that
//! starts a server leaves its pid in a `*.pid` file of the scratch
//! directory; whatever is still running after the file's last block is
//! stopped. A
//! ```` ```text ```` block right after one is its expected output: each of
//! its lines but `time:` lines (which vary with the machine) must appear in
//! the command's output, in order. So the walk-throughs cannot drift from
//! what the binaries do.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Markdown files whose runnable blocks are run.
const FILES: [&str; 3] = [
    "docs/retraining.md",
    "docs/operations.md",
    "docs/embedding.md",
];

#[derive(Debug)]
struct Block {
    lang: String,
    line: usize,
    code: String,
    expected: Option<String>,
}

/// The runnable blocks of `text`, each with the `text` block after it.
fn runnable_blocks(text: &str) -> Vec<Block> {
    let mut fences: Vec<(String, usize, String)> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut body = String::new();
        for (_, l) in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        fences.push((info.trim().to_string(), i + 1, body));
    }
    let mut out = Vec::new();
    for (k, (info, line, code)) in fences.iter().enumerate() {
        let mut words = info.split_whitespace();
        let (Some(lang), Some("run")) = (words.next(), words.next()) else {
            continue;
        };
        let expected = fences
            .get(k + 1)
            .filter(|(i, l, _)| i == "text" && *l == line + code.lines().count() + 2)
            .map(|(_, _, b)| b.clone());
        out.push(Block {
            lang: lang.to_string(),
            line: *line,
            code: code.clone(),
            expected,
        });
    }
    out
}

/// The lines of `expected` (but `time:` lines) that are not found in
/// `actual` in order: empty when it matches.
fn missing_lines(expected: &str, actual: &str) -> Vec<String> {
    let mut rest = actual.lines();
    let mut missing = Vec::new();
    for want in expected.lines().map(str::trim_end) {
        if want.is_empty() || want.starts_with("time:") {
            continue;
        }
        if !rest.by_ref().any(|got| got.trim_end() == want) {
            missing.push(want.to_string());
            rest = actual.lines();
        }
    }
    missing
}

fn binaries() -> PathBuf {
    // target/<profile>/deps/doc_commands-… → target/<profile>
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf();
    for bin in ["evaluate", "trainer", "service", "agent"] {
        assert!(
            dir.join(bin).is_file(),
            "{} missing: build the workspace's binaries first (cargo build --workspace, or cargo test --workspace)",
            dir.join(bin).display()
        );
    }
    // `cargo test` leaves examples under their hashed names only, and
    // `--all-targets` also builds each as a libtest harness: keep the
    // binaries whose help is the router's own.
    let found = std::fs::read_dir(dir.join("examples"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name == "redis_router" || (name.starts_with("redis_router-") && p.extension().is_none())
        })
        .filter(|p| is_the_router(p))
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    let example = found.unwrap_or_else(|| {
        panic!(
            "{} missing: build the examples first (cargo build --workspace --examples; scripts/test.sh does)",
            dir.join("examples/redis_router").display()
        )
    });
    let link_dir = dir.join("doc-bin");
    let _ = std::fs::create_dir_all(&link_dir);
    let link = link_dir.join("redis_router");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&example, &link).expect("a link to the example");
    dir
}

fn is_the_router(path: &Path) -> bool {
    Command::new(path)
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--service"))
        .unwrap_or(false)
}

#[test]
fn the_scanner_finds_marked_blocks_and_their_outputs() {
    let md = "intro\n```sh run\necho hi\n```\n```text\nhi\n```\n```sh\nnot run\n```\n```python run\nprint(1)\n```\n";
    let b = runnable_blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].lang.as_str(), b[0].line, b[0].code.as_str()),
        ("sh", 2, "echo hi\n")
    );
    assert_eq!(b[0].expected.as_deref(), Some("hi\n"));
    assert_eq!(
        (b[1].lang.as_str(), b[1].expected.as_deref()),
        ("python", None)
    );
    assert!(missing_lines("a\ntime: 3 s\nc\n", "a\nb\nc\n").is_empty());
    assert_eq!(missing_lines("c\na\n", "a\nb\nc\n"), ["a"]);
}

#[test]
fn runnable_doc_blocks_run_and_print_what_the_docs_show() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let repo = std::fs::canonicalize(&repo).expect("repo");
    let bins = binaries();
    let path = format!(
        "{}:{}:{}",
        bins.display(),
        bins.join("doc-bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut failures = Vec::new();
    for file in FILES {
        let text = std::fs::read_to_string(repo.join(file)).expect("docs file");
        let blocks = runnable_blocks(&text);
        assert!(!blocks.is_empty(), "{file} has no `sh run` block");
        let scratch = tempfile::tempdir().expect("scratch dir");
        let (port, redis_port) = (free_port(), free_port());
        for b in &blocks {
            let mut cmd = match b.lang.as_str() {
                "sh" => {
                    let mut c = Command::new("bash");
                    c.args(["-euo", "pipefail", "-c", &b.code]);
                    c
                }
                "python" => {
                    let mut c = Command::new("python3");
                    c.args(["-c", &b.code]);
                    c
                }
                other => panic!("{file}:{}: no runner for `{other} run`", b.line),
            };
            let out = cmd
                .current_dir(scratch.path())
                .env("PATH", &path)
                .env("REPO", &repo)
                .env("PORT", port.to_string())
                .env("REDIS_PORT", redis_port.to_string())
                .output()
                .expect("runner starts");
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                failures.push(format!(
                    "{file}:{}: exit {}\n{}{}",
                    b.line,
                    out.status,
                    stdout,
                    String::from_utf8_lossy(&out.stderr)
                ));
                break;
            }
            if let Some(expected) = &b.expected {
                let missing = missing_lines(expected, &stdout);
                if !missing.is_empty() {
                    failures.push(format!(
                        "{file}:{}: output lacks (in order):\n{}\n--- got:\n{stdout}",
                        b.line,
                        missing.join("\n")
                    ));
                }
            }
        }
        stop_leftovers(scratch.path());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Stops the processes whose pids the blocks left in `dir/*.pid` (a block
/// that failed before its own `kill`), so none outlives the test.
fn stop_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.path().extension().is_some_and(|x| x == "pid")
            && let Ok(pid) = std::fs::read_to_string(e.path())
            && pid.trim().parse::<u32>().is_ok()
        {
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
    }
}
