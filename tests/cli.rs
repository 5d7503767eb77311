//! The CLI's contract: HF's errors are results (exit 0), the tool's own errors name the file and
//! field and exit non-zero, and nothing is written half-way for a broken scenario; --help and
//! --version exit 0 on stdout, usage errors (clap's messages) exit 2 on stderr.
use assert_fs::prelude::*;
use std::process::Command;

fn ckptspec(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ckptspec"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("ckptspec runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn run_writes_a_run_directory_like_the_golden_one() {
    let out = assert_fs::TempDir::new().unwrap();
    let dir = out.path().join("run");
    let (code, _, err) = ckptspec(&[
        "run",
        "conformance/scenarios/save/final-step-not-multiple.json",
        "--hf",
        "5.24.0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/hf-5.24.0/final-step-not-multiple");
    let rep = ckptspec::harness::diff::compare_run_dirs(&golden, &dir).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.first());
}

#[test]
fn an_hf_error_is_a_result_with_exit_status_zero() {
    let out = assert_fs::TempDir::new().unwrap();
    let dir = out.path().join("run");
    let (code, _, err) = ckptspec(&[
        "run",
        "conformance/scenarios/errors/unknown-argument.json",
        "--hf",
        "4.31.0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let result = std::fs::read_to_string(dir.join("result.json")).unwrap();
    assert!(result.contains("\"type\": \"TypeError\""), "{result}");
    assert!(result.contains("unexpected keyword argument 'save_step'"), "{result}");
}

#[test]
fn an_unsupported_version_lists_the_supported_ones() {
    let out = assert_fs::TempDir::new().unwrap();
    let (code, _, err) = ckptspec(&[
        "run",
        "conformance/scenarios/save/final-step-not-multiple.json",
        "--hf",
        "4.99.0",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("4.99.0") && err.contains("5.24.0") && err.contains("4.31.0"), "{err}");
}

#[test]
fn a_broken_scenario_names_the_file_and_field_and_writes_nothing() {
    let tmp = assert_fs::TempDir::new().unwrap();
    let cases = [
        ("typo.json", r#"{"name": "typo", "summary": "s", "args": {}, "metrcs": []}"#, "metrcs"),
        ("wrong-name.json", r#"{"name": "other", "summary": "s", "args": {}}"#, "name"),
        ("owned.json", r#"{"name": "owned", "summary": "s", "args": {"output_dir": "x"}}"#, "output_dir"),
        ("not-json.json", r#"{"name": "#, "not-json.json"),
        ("finally.json", r#"{"name": "finally", "summary": "s", "args": {}, "finally": ["push"]}"#, "push"),
    ];
    for (file, text, needle) in cases {
        let f = tmp.child(file);
        f.write_str(text).unwrap();
        let out = tmp.child(format!("out-{file}"));
        let (code, _, err) = ckptspec(&["run", f.path().to_str().unwrap(), "--hf", "5.24.0", "--out", out.path().to_str().unwrap()]);
        assert_ne!(code, 0, "{file}: {err}");
        assert!(err.contains(file), "{file}: message does not name the file: {err}");
        assert!(err.contains(needle), "{file}: message does not name {needle}: {err}");
        assert!(!out.path().join("result.json").exists(), "{file}: a result was written");
    }
}

#[test]
fn a_folder_runs_every_scenario_into_its_own_directory() {
    let tmp = assert_fs::TempDir::new().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios/finally");
    let out = tmp.path().join("all");
    let (code, _, err) = ckptspec(&["run", src.to_str().unwrap(), "--hf", "4.31.0", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for e in std::fs::read_dir(&src).unwrap() {
        let name = e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned();
        assert!(out.join(&name).join("result.json").exists(), "{name}");
    }
}

#[test]
fn another_patch_runs_its_minors_profile_and_says_so() {
    let out = assert_fs::TempDir::new().unwrap();
    let dir = out.path().join("run");
    let args = |hf: &'static str, dir: &std::path::Path| {
        ["run", "conformance/scenarios/save/final-step-not-multiple.json", "--hf", hf, "--out"]
            .into_iter()
            .map(String::from)
            .chain([dir.to_str().unwrap().to_string()])
            .collect::<Vec<_>>()
    };
    let a = args("4.46.1", &dir);
    let (code, _, err) = ckptspec(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err}");
    assert!(err.contains("4.46.1") && err.contains("4.46.3"), "{err}");
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/hf-4.46.3/final-step-not-multiple");
    assert!(ckptspec::harness::diff::compare_run_dirs(&golden, &dir).unwrap().is_clean());

    let b = args("4.30.2", &out.path().join("other"));
    let (code, _, err) = ckptspec(&b.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 2);
    assert!(err.contains("unsupported --hf version \"4.30.2\"") && err.contains("4.31.0") && err.contains("5.24.0"), "{err}");
}

#[test]
fn versions_prints_the_behavior_table() {
    let (code, out, err) = ckptspec(&["versions"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("final_step_save") && out.contains("4.42.0: AnyStrategy"), "{out}");
    assert!(out.contains("torch 2.1.2: 4.31.0"), "{out}");
    let (code, out, _) = ckptspec(&["versions", "--per-release"]);
    assert_eq!(code, 0);
    let header = out.lines().next().unwrap();
    assert_eq!(header.split('\t').count(), 1 + ckptspec::hf::profile::supported().len());
}

/// Every subcommand with the options its `--help` must explain.
const COMMANDS: &[(&str, &[&str])] = &[
    ("conformance", &["--hf", "--only", "--scenarios", "--golden", "--jobs", "--atomic"]),
    ("run", &["PATH", "--hf", "--out", "--atomic"]),
    ("versions", &["--per-release"]),
    ("changes", &["--check", "--golden", "--out"]),
    ("diff", &["EXPECTED", "ACTUAL", "--max"]),
    (
        "plan",
        &["CONFIG", "--hf", "--train-rows", "--eval-rows", "--steps-per-epoch", "--metrics", "--metrics-from", "--json"],
    ),
    ("inspect", &["OUTPUT_DIR", "--json"]),
];

#[test]
fn help_goes_to_stdout_with_exit_status_zero() {
    for flag in ["--help", "-h"] {
        let (code, out, err) = ckptspec(&[flag]);
        assert_eq!(code, 0, "{flag}: {err}");
        for (cmd, _) in COMMANDS {
            assert!(out.contains(cmd), "{flag}: top-level help does not list {cmd}: {out}");
        }
        for (cmd, opts) in COMMANDS {
            let (code, out, err) = ckptspec(&[cmd, flag]);
            assert_eq!(code, 0, "{cmd} {flag}: {err}");
            assert!(!out.trim().is_empty(), "{cmd} {flag}: no help on stdout");
            for o in *opts {
                assert!(out.contains(o), "{cmd} {flag}: help does not mention {o}: {out}");
            }
        }
    }
    // `help CMD` is `CMD --help`; the exit statuses are in the long help.
    let (code, out, _) = ckptspec(&["help", "inspect"]);
    assert_eq!(code, 0);
    assert!(out.contains("OUTPUT_DIR") && out.contains("Exit status"), "{out}");
    for cmd in ["conformance", "diff", "inspect"] {
        let (_, out, _) = ckptspec(&[cmd, "--help"]);
        assert!(out.contains("0 when") && out.contains("1 when") && out.contains("2 on"), "{cmd}: {out}");
    }
}

#[test]
fn version_prints_the_crate_version() {
    for flag in ["--version", "-V"] {
        let (code, out, err) = ckptspec(&[flag]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out.trim_end(), format!("ckptspec {}", env!("CARGO_PKG_VERSION")));
    }
}

#[test]
fn usage_errors_exit_2_with_clap_message_on_stderr_only() {
    let cases: &[(&[&str], &str)] = &[
        // no command
        (&[], "Usage"),
        // unknown command and options
        (&["frobnicate"], "frobnicate"),
        (&["versions", "--bogus"], "--bogus"),
        (&["conformance", "--bogus"], "--bogus"),
        (&["plan", "c.json", "--hf", "5.24.0", "--bogus"], "--bogus"),
        (&["inspect", "out", "--bogus"], "--bogus"),
        // missing required arguments and values
        (&["run", "conformance/scenarios/save/final-step-not-multiple.json", "--out", "/nonexistent/x"], "--hf"),
        (&["run", "--hf", "5.24.0", "--out", "/nonexistent/x"], "PATH"),
        (&["conformance", "--hf"], "--hf"),
        (&["diff", "golden"], "ACTUAL"),
        (&["plan", "c.json"], "--hf"),
        (&["plan", "--hf", "5.24.0"], "CONFIG"),
        (&["inspect"], "OUTPUT_DIR"),
        // bad numbers
        (&["conformance", "--jobs", "many"], "--jobs"),
        (&["diff", "a", "b", "--max", "lots"], "--max"),
        (&["plan", "c.json", "--hf", "5.24.0", "--train-rows", "x"], "--train-rows"),
        (&["plan", "c.json", "--hf", "5.24.0", "--steps-per-epoch", "1.5"], "--steps-per-epoch"),
    ];
    for (args, needle) in cases {
        let (code, out, err) = ckptspec(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: stdout: {out}");
        assert!(err.contains(needle), "{args:?}: stderr does not name {needle}: {err}");
    }
}

#[test]
fn plan_rejects_conflicting_options_before_planning() {
    for (a, b) in [("--metrics", "--metrics-from"), ("--train-rows", "--steps-per-epoch")] {
        let val = if a == "--metrics" { ["m.json", "trainer_state.json"] } else { ["8", "2"] };
        let (code, out, err) = ckptspec(&["plan", "c.json", "--hf", "5.24.0", a, val[0], b, val[1]]);
        assert_eq!(code, 2, "{a} {b}: {err}");
        assert!(out.is_empty(), "{out}");
        // clap's conflict message, not plan's own error
        assert!(err.contains(a) && err.contains(b) && err.contains("cannot be used with"), "{err}");
    }
}

#[test]
fn a_folder_runs_every_scenario_even_after_one_that_cannot_run() {
    // An argument value the Rust trainer does not model yet (5.x's include_num_input_tokens_seen
    // "all") makes one scenario "not yet implemented"; the others of the folder still run.
    let tmp = assert_fs::TempDir::new().unwrap();
    let src = tmp.child("scenarios");
    let ok = |name: &str| format!(r#"{{"name": "{name}", "summary": "s", "args": {{"max_steps": 2, "save_steps": 1}}}}"#);
    src.child("a-first.json").write_str(&ok("a-first")).unwrap();
    let gap = r#"{"name": "b-gap", "summary": "s", "args": {"max_steps": 2, "include_num_input_tokens_seen": "all"}}"#;
    src.child("b-gap.json").write_str(gap).unwrap();
    src.child("c-last.json").write_str(&ok("c-last")).unwrap();
    let out = tmp.path().join("all");
    let (code, _, err) = ckptspec(&["run", src.path().to_str().unwrap(), "--hf", "5.24.0", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(out.join("a-first/result.json").exists() && out.join("c-last/result.json").exists(), "{err}");
    assert!(!out.join("b-gap").exists(), "a scenario that could not run leaves no run directory");
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("1 scenario(s) of ") && lines[0].contains("could not be run"), "{err}");
    assert!(lines[1].starts_with("  b-gap: not yet implemented: argument include_num_input_tokens_seen"), "{err}");
    assert_eq!(lines.len(), 2, "{err}");
}
