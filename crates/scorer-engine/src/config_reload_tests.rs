use super::*;

fn base() -> Config {
    Config::default()
}

#[test]
fn an_unchanged_config_plans_no_change() {
    assert_eq!(plan(&base(), &base(), false).expect("plan"), vec![]);
}

#[test]
fn changes_name_the_key_with_old_and_new_values() {
    let mut new = base();
    new.scoring.cpu_high = 0.8;
    new.telemetry.dead_after_ms = 20_000;
    let changes = plan(&base(), &new, false).expect("plan");
    assert_eq!(
        changes,
        vec![
            ConfigChange {
                key: "scoring.cpu_high".into(),
                old: Value::from(base().scoring.cpu_high),
                new: Value::from(0.8),
            },
            ConfigChange {
                key: "telemetry.dead_after_ms".into(),
                old: Value::from(10_000),
                new: Value::from(20_000),
            },
        ]
    );
}

#[test]
fn a_weight_within_the_step_passes_and_beyond_it_is_refused() {
    let old = base();
    let w = old.scoring.cpu_max_deduct;
    assert!(w >= 1.0, "the test assumes a weight of at least one point");
    let mut ok = base();
    ok.scoring.cpu_max_deduct = w * 1.25;
    assert_eq!(plan(&old, &ok, false).expect("exact step").len(), 1);
    let mut too_far = base();
    too_far.scoring.cpu_max_deduct = w * 1.26;
    match plan(&old, &too_far, false) {
        Err(ReloadError::StepTooLarge {
            key,
            old: o,
            new: n,
            max_step,
            ..
        }) => {
            assert_eq!(key, "scoring.cpu_max_deduct");
            assert_eq!((o, n), (w, w * 1.26));
            assert!((max_step - 0.25 * w).abs() < 1e-12);
        }
        other => panic!("expected StepTooLarge, got {other:?}"),
    }
    assert!(plan(&old, &too_far, true).is_ok(), "force waives the step");
}

#[test]
fn a_weight_at_zero_may_move_by_the_floor() {
    let mut old = base();
    old.scoring.queue_deduct = 0.0;
    let mut new = old.clone();
    new.scoring.queue_deduct = 0.25;
    assert!(plan(&old, &new, false).is_ok());
    new.scoring.queue_deduct = 0.3;
    assert!(matches!(
        plan(&old, &new, false),
        Err(ReloadError::StepTooLarge { .. })
    ));
}

#[test]
fn the_model_blend_is_a_weight() {
    let mut new = base();
    new.model.blend_model = 0.0;
    new.model.blend_rule = 1.0;
    // 0.7 → 0 is a step of 0.7 > 0.25 × max(0.7, 1).
    assert!(matches!(
        plan(&base(), &new, false),
        Err(ReloadError::StepTooLarge { key, .. }) if key == "model.blend_model"
    ));
}

#[test]
fn the_current_step_applies_not_the_new_one() {
    let mut new = base();
    new.reload.max_weight_step = 100.0;
    new.scoring.cpu_max_deduct = base().scoring.cpu_max_deduct * 1.5;
    assert!(matches!(
        plan(&base(), &new, false),
        Err(ReloadError::StepTooLarge { .. })
    ));
}

#[test]
fn the_step_limit_rises_by_one_step_per_reload_and_falls_freely() {
    // Found by a fresh-eyes run: reload 1 raised the limit to 100 without
    // force, reload 2 then moved a weight 2 → 10, also without force.
    let mut raised = base();
    raised.reload.max_weight_step = 100.0;
    match plan(&base(), &raised, false) {
        Err(ReloadError::StepTooLarge { key, old, new, .. }) => {
            assert_eq!(key, STEP_LIMIT_KEY);
            assert_eq!((old, new), (0.25, 100.0));
        }
        other => panic!("expected StepTooLarge, got {other:?}"),
    }
    assert!(plan(&base(), &raised, true).is_ok(), "force waives it");
    // One step: 0.25 + 0.25 × max(0.25, 1).
    let mut one_step = base();
    one_step.reload.max_weight_step = 0.5;
    assert!(plan(&base(), &one_step, false).is_ok());
    let mut too_far = base();
    too_far.reload.max_weight_step = 0.51;
    assert!(matches!(
        plan(&base(), &too_far, false),
        Err(ReloadError::StepTooLarge { .. })
    ));
    // Lowering a large limit is always allowed.
    let mut lowered = base();
    lowered.reload.max_weight_step = 0.01;
    assert!(plan(&raised, &lowered, false).is_ok());
}

#[test]
fn start_up_keys_refuse_the_whole_reload() {
    let mut new = base();
    new.server.listen = "127.0.0.1:9999".into();
    new.log.max_rows += 1;
    new.scoring.cpu_high = 0.8;
    match plan(&base(), &new, true) {
        Err(ReloadError::RestartRequired { keys }) => {
            assert_eq!(keys, vec!["log.max_rows", "server.listen"]);
        }
        other => panic!("expected RestartRequired, got {other:?}"),
    }
}

#[test]
fn new_certificate_paths_reload_but_turning_tls_on_or_off_needs_a_restart() {
    let with_tls = |cert: &str| {
        let mut c = base();
        c.server.tls.cert_path = Some(cert.into());
        c.server.tls.key_path = Some("server.key".into());
        c
    };
    assert!(plan(&with_tls("a.crt"), &with_tls("b.crt"), false).is_ok());
    for (old, new) in [(base(), with_tls("a.crt")), (with_tls("a.crt"), base())] {
        match plan(&old, &new, true) {
            Err(ReloadError::RestartRequired { keys }) => {
                assert_eq!(keys, vec!["server.tls.cert_path"]);
            }
            other => panic!("expected RestartRequired, got {other:?}"),
        }
    }
}

#[test]
fn an_invalid_config_is_refused_before_anything_else() {
    let mut new = base();
    new.telemetry.ewma_alpha = f64::NAN;
    new.server.listen = "127.0.0.1:9999".into();
    assert!(matches!(
        plan(&base(), &new, true),
        Err(ReloadError::Invalid(ConfigError::Invalid { key, .. })) if key == "telemetry.ewma_alpha"
    ));
    let mut step = base();
    step.reload.max_weight_step = 0.0;
    assert!(matches!(
        plan(&base(), &step, false),
        Err(ReloadError::Invalid(ConfigError::Invalid { key, .. })) if key == "reload.max_weight_step"
    ));
}

#[test]
fn the_admin_token_is_redacted() {
    let mut new = base();
    new.admin.token = Some("s3cret-s3cret-s3cret".into());
    let changes = plan(&base(), &new, false).expect("plan");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].key, "admin.token");
    assert_eq!(changes[0].old, Value::Null);
    assert_eq!(changes[0].new, Value::from("<redacted>"));
}

#[test]
fn role_tokens_are_redacted_in_changes_and_the_config_view() {
    let mut new = base();
    new.auth
        .router
        .insert("edge-1".into(), "r0uter-t0ken-r0uter".into());
    let changes = plan(&base(), &new, false).expect("plan: tokens rotate on reload");
    let added = changes
        .iter()
        .find(|c| c.key == "auth.router.edge-1")
        .expect("the new token is a change");
    assert_eq!(added.new, Value::from("<redacted>"));
    assert!(
        !serde_json::to_string(&changes)
            .unwrap()
            .contains("r0uter-t0ken")
    );
    let mut view = serde_json::to_value(&new).unwrap();
    redact_secrets(&mut view);
    assert_eq!(view["auth"]["router"]["edge-1"], "<redacted>");
    assert!(!view.to_string().contains("r0uter-t0ken"));
    assert!(is_secret("auth.reader.x") && !is_secret("authority") && !is_secret("auth"));
}

#[test]
fn weights_and_restart_keys_are_classified() {
    for k in [
        "scoring.cpu_max_deduct",
        "scoring.rtt_points_per_ratio",
        "scoring.compacting_factor",
        "scoring.disk_io_write_weight",
        "freshness.stale_max_deduct",
        "model.scale",
    ] {
        assert!(is_weight(k), "{k}");
    }
    for k in [
        "scoring.cpu_high",
        "scoring.queue_high_watermark",
        "model.budget_us",
        "penalty.cooldown_ms",
    ] {
        assert!(!is_weight(k), "{k}");
    }
    assert!(needs_restart("log.dir"));
    assert!(needs_restart("server.listen"));
    assert!(!needs_restart("server.max_candidates"));
    assert!(!needs_restart("logx.dir"));
}

#[test]
fn every_numeric_scoring_key_is_a_weight_or_a_threshold() {
    // Guards the name-based rule: a new `[scoring]` key must fall in one
    // class on purpose. Thresholds are listed here.
    let thresholds = [
        "cpu_high",
        "cpu_step",
        "rtt_p99_baseline_ms",
        "error_rate_floor",
        "queue_high_watermark",
        "mem_available_low",
        "disk_io_await_high_ms",
        "net_loss_high",
        "cache_hit_low",
        "memtable_high_bytes",
        "warmup_ms",
    ];
    let v = serde_json::to_value(base().scoring).expect("json");
    for (k, _) in v.as_object().expect("object") {
        let key = format!("scoring.{k}");
        assert!(
            is_weight(&key) != thresholds.contains(&k.as_str()),
            "`{key}` must be exactly one of weight or threshold"
        );
    }
}
