//! The status page (`GET /`) rendered by a real headless Chromium (issue
//! #8): the worker table fills from the live API with the workers' ids.
//! With reader tokens the page itself stays open and sends the token it is
//! given on every call. `scripts/test.sh` installs Debian's `chromium` when
//! it is missing.

use std::sync::Arc;
use std::time::Duration;

use scorer_core::clock::{Clock, SystemClock};
use scorer_engine::Engine;
use scorer_engine::config::Config;
use service::{AppState, app};

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_renders_the_live_worker_table() {
    let browser = chromium().expect("chromium is installed (scripts/test.sh installs it)");
    let mut cfg = Config::default();
    cfg.scoring.warmup_ms = 0;
    let clock = Arc::new(SystemClock::new());
    let state = AppState::new(Engine::new(cfg), clock.clone());
    let engine = state.engine.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, app(state)).await });
    let base = format!("http://{addr}");
    let snaps: Vec<_> = ["alpha-1", "beta-2", "gamma-3"]
        .iter()
        .enumerate()
        .map(|(i, id)| serde_json::json!({"worker_id": id, "timestamp_ms": clock.wall_ms(),
            "cpu_usage": 0.2 + 0.3 * i as f64, "queue_depth": i, "rtt_ms_avg": 1.0, "rtt_ms_p99": 5.0 + 10.0 * i as f64,
            "error_rate": 0.0}))
        .collect();
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/telemetry"))
        .json(&serde_json::json!({"snapshots": snaps}))
        .send()
        .await
        .expect("telemetry");
    assert!(r.status().is_success());
    // A config canary on half the keys: the page shows both arms.
    let mut candidate = (*engine.config()).clone();
    candidate.scoring.cpu_high = 0.6;
    let half: scorer_engine::canary::CanaryRequest =
        serde_json::from_value(serde_json::json!({"fraction": 0.5})).expect("a request");
    engine
        .start_canary(candidate, &half, "anonymous", false, clock.monotonic_ms())
        .expect("a canary");
    // Picks before the page loads, each answered, so the share column has
    // counts and every worker is back to 0 outstanding.
    let client = reqwest::Client::new();
    for i in 0..12 {
        let body = serde_json::json!({"key": format!("user:{i}"),
            "candidates": ["alpha-1", "beta-2", "gamma-3"], "seed": i});
        let a: serde_json::Value = client
            .post(format!("{base}/v1/score"))
            .json(&body)
            .send()
            .await
            .expect("score")
            .json()
            .await
            .expect("answer");
        let fb = serde_json::json!({"decision_id": a["decision_id"], "worker_id": a["pick"],
            "latency_ms": 2.0, "success": true});
        let r = client
            .post(format!("{base}/v1/feedback"))
            .json(&fb)
            .send()
            .await
            .expect("feedback");
        assert!(r.status().is_success());
    }
    // An operator drains gamma-3: the page shows it beside the state.
    let drain: scorer_engine::overrides::OverrideRequest =
        serde_json::from_value(serde_json::json!({"kind": "drain", "reason": "disk swap"}))
            .expect("a request");
    engine
        .set_override("gamma-3", &drain, "anonymous", clock.monotonic_ms())
        .expect("gamma-3 is known");
    let profile = std::env::temp_dir().join(format!("scorer-chromium-{}", std::process::id()));
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--virtual-time-budget=4000",
                &format!("--user-data-dir={}", profile.display()),
                "--dump-dom",
                &format!("{base}/"),
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finishes within 60 s")
    .expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    server.abort();
    let dom = String::from_utf8_lossy(&out.stdout);
    for id in ["alpha-1", "beta-2", "gamma-3"] {
        assert!(
            dom.contains(&format!("data-worker=\"{id}\"")),
            "row for {id} missing in\n{dom}"
        );
    }
    assert!(dom.contains("3 workers"), "{dom}");
    let arms = engine.canary().expect("running").arms;
    assert_eq!(arms[0].decisions + arms[1].decisions, 12);
    for a in &arms {
        let shown = format!(
            "{}: {} decisions, {} outcomes",
            a.arm.as_str(),
            a.decisions,
            a.outcomes
        );
        assert!(dom.contains(&shown), "{shown} missing in\n{dom}");
    }
    assert!(dom.contains("scoring.cpu_high"), "{dom}");
    assert!(!dom.contains("<div id=\"meta\">error"), "{dom}");
    // No pick was made: every row shows 0 outstanding.
    for id in ["alpha-1", "beta-2", "gamma-3"] {
        let row = dom
            .split(&format!("data-worker=\"{id}\""))
            .nth(1)
            .and_then(|r| r.split("</tr>").next())
            .unwrap_or_default();
        assert!(row.contains("<td class=\"num\">0</td>"), "{id}: {row}");
    }
    assert!(
        dom.contains("<span class=\"state healthy\">healthy</span>"),
        "{dom}"
    );
    let gamma = dom
        .split("data-worker=\"gamma-3\"")
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        gamma.contains(
            "<span class=\"override drain\" title=\"disk swap · set by anonymous\">drain</span>"
        ),
        "{gamma}"
    );
    for id in ["alpha-1", "beta-2"] {
        let row = dom
            .split(&format!("data-worker=\"{id}\""))
            .nth(1)
            .and_then(|r| r.split("</tr>").next())
            .unwrap_or_default();
        assert!(!row.contains("override"), "{id}: {row}");
    }
    // The page rendered the data: not the placeholder.
    assert!(!dom.contains("loading…"), "still loading:\n{dom}");
    assert!(dom.contains("updated"), "{dom}");
    // Worst final score first: the busiest, slowest worker heads the table.
    let at = |id: &str| {
        dom.find(&format!("data-worker=\"{id}\""))
            .unwrap_or(usize::MAX)
    };
    assert!(
        at("gamma-3") < at("beta-2") && at("beta-2") < at("alpha-1"),
        "rows not worst first:\n{dom}"
    );
    // Every row shows its share of the 12 picks; the shares add up to 100%.
    let shares: Vec<f64> = dom
        .split("<td class=\"num share\">")
        .skip(1)
        .filter_map(|r| r.split('%').next()?.parse().ok())
        .collect();
    assert_eq!(shares.len(), 3, "{dom}");
    assert!(
        (shares.iter().sum::<f64>() - 100.0).abs() < 0.2,
        "{shares:?}"
    );
}

/// The page's `esc` and `TOKEN_KEY` and the functions `names`, cut from
/// the served HTML.
fn page_functions(names: &[&str]) -> String {
    let html = include_str!("../src/http/assets/status.html");
    let mut out = ["const esc = ", "const TOKEN_KEY = "]
        .iter()
        .map(|c| {
            html.lines()
                .find(|l| l.starts_with(c))
                .unwrap_or_else(|| panic!("{c} in the page"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    for name in names {
        let start = html
            .find(&format!("function {name}("))
            .unwrap_or_else(|| panic!("{name} in the page"));
        let end = start + html[start..].find("\n}\n").expect("its end") + 3;
        out.push('\n');
        out.push_str(&html[start..end]);
    }
    out
}

/// What `expr` (over the page's `functions`) evaluates to, as headless
/// Chromium renders it into a `<div>`.
fn evaluate_in_chromium(functions: &[&str], expr: &str) -> String {
    let browser = chromium().expect("chromium is installed (scripts/test.sh installs it)");
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        format!(
            "<html><body><div id=\"out\"></div><script>\n{}\ndocument.getElementById('out').innerHTML = {expr};\n</script></body></html>",
            page_functions(functions)
        ),
    )
    .expect("write page");
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            &format!("--user-data-dir={}", dir.path().join("profile").display()),
            "--dump-dom",
            &format!("file://{}", page.display()),
        ])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    dom.split("<div id=\"out\">")
        .nth(1)
        .and_then(|r| r.split("</div>").next())
        .unwrap_or_else(|| panic!("no output in {dom}"))
        .to_string()
}

#[test]
fn shares_are_over_the_last_refresh_once_picks_happened_since() {
    let expr = "[sharesOf({a: 10, b: 30}, null), sharesOf({a: 15, b: 30}, {a: 10, b: 30}), \
        sharesOf({a: 15, b: 30}, {a: 15, b: 30})].map(r => r.recent + ' ' + r.shares.a + ' ' + r.shares.b).join('|')";
    assert_eq!(
        evaluate_in_chromium(&["sharesOf"], expr),
        "false 25.0% 75.0%|true 100.0% 0.0%|false 33.3% 66.7%"
    );
}

#[test]
fn adjustments_that_cancel_are_not_top_adjustments() {
    let adjs = r#"[{"reason":"model","impact":3.39},{"reason":"model clamp","impact":-3.39},
        {"reason":"CPU 88%","impact":-7.2},{"reason":"queue","impact":-1.5},{"reason":"zero","impact":0}]"#;
    assert_eq!(
        evaluate_in_chromium(&["topAdjustments"], &format!("topAdjustments({adjs})")),
        "CPU 88% (-7.20)<br>queue (-1.50)"
    );
}

#[tokio::test]
async fn with_reader_tokens_the_page_is_served_and_sends_the_token_on_every_call() {
    let mut cfg = Config::default();
    cfg.auth
        .reader
        .insert("dash".into(), "reader-token-0123456789".into());
    let state = AppState::new(Engine::new(cfg), Arc::new(SystemClock::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app(state)).await });
    let client = reqwest::Client::new();
    // The page holds no data: it loads without a token.
    let page = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.expect("html");
    // One fetch() in the page, and it sends the token from sessionStorage
    // as a header, never in the URL.
    assert_eq!(
        html.matches("fetch(").count(),
        1,
        "every call goes through api()"
    );
    assert!(html.contains("fetch(url, {headers: authHeaders()})"));
    assert!(html.contains("{'Authorization': 'Bearer ' + t}"));
    assert!(html.contains("sessionStorage.getItem(TOKEN_KEY)"));
    assert!(!html.contains("localStorage") && !html.contains("token="));
    let input = html
        .lines()
        .find(|l| l.contains("id=\"token\""))
        .expect("the token input");
    assert!(
        !input.contains("name="),
        "a named input could be submitted in a URL: {input}"
    );
    // Its data does need the token, and the 401 says how to give one.
    let r = client
        .get(format!("http://{addr}/v1/workers?limit=1000"))
        .send()
        .await
        .expect("workers");
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.headers()["www-authenticate"], r#"Bearer realm="scorer""#);
    let r = client
        .get(format!("http://{addr}/v1/workers?limit=1000"))
        .bearer_auth("reader-token-0123456789")
        .send()
        .await
        .expect("workers");
    assert_eq!(r.status().as_u16(), 200);
    // Rendered without a token, the page says what it needs.
    let browser = chromium().expect("chromium is installed (scripts/test.sh installs it)");
    let profile = tempfile::tempdir().expect("profile dir");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--virtual-time-budget=2000",
                &format!("--user-data-dir={}", profile.path().display()),
                "--dump-dom",
                &format!("http://{addr}/"),
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finishes within 60 s")
    .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<div id=\"meta\" class=\"refused\">This service needs a reader token (401)"),
        "{dom}"
    );
}

#[test]
fn the_page_sends_the_stored_token_and_says_what_a_refusal_means() {
    let expr = "(() => { const before = JSON.stringify(authHeaders()); \
        sessionStorage.setItem(TOKEN_KEY, 'abc'); \
        return [before, JSON.stringify(authHeaders()), refusalMessage(401, false), \
        refusalMessage(401, true), refusalMessage(429, true, '7')].join('|'); })()";
    let out = evaluate_in_chromium(&["authHeaders", "refusalMessage"], expr);
    let parts: Vec<&str> = out.split('|').collect();
    assert_eq!(parts[0], "{}");
    assert_eq!(parts[1], r#"{"Authorization":"Bearer abc"}"#);
    assert!(parts[2].contains("needs a reader token (401)"), "{out}");
    assert!(parts[3].contains("was refused (401)"), "{out}");
    assert!(parts[4].contains("retry in 7 s"), "{out}");
}
