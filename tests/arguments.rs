//! The table of `TrainingArguments` fields (`ckptspec::hf::arguments`): it names every field of
//! every profile once and nothing else, an accepted field is shown by a scenario that sets it
//! in every profile that has the field, the runner's fields are the scenario contract's, and a
//! refused field stops `run` with its reason.
use ckptspec::hf::arguments::{self, Status, ARGUMENTS};
use ckptspec::hf::profile::{self, Profile};
use ckptspec::world::scenario::{Scenario, RUNNER_ARGS};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_table_lists_every_field_of_every_profile_once_and_nothing_else() {
    let mut listed = BTreeSet::new();
    for (name, _) in ARGUMENTS {
        assert!(listed.insert(*name), "{name} is listed twice");
    }
    let mut fields: BTreeSet<String> = BTreeSet::new();
    for v in profile::supported() {
        for (name, _) in &Profile::get(v).unwrap().fields {
            fields.insert(name.clone());
        }
    }
    let fields: BTreeSet<&str> = fields.iter().map(|s| s.as_str()).collect();
    let missing: Vec<_> = fields.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&fields).collect();
    assert!(missing.is_empty(), "fields without a status: {missing:?}");
    assert!(extra.is_empty(), "listed but no profile has them: {extra:?}");
}

#[test]
fn the_runner_fields_are_the_scenario_contracts() {
    let runner: BTreeSet<&str> = ARGUMENTS.iter().filter(|(_, s)| *s == Status::Runner).map(|(n, _)| *n).collect();
    assert_eq!(runner, RUNNER_ARGS.iter().copied().collect());
}

#[test]
fn an_accepted_field_is_set_by_its_scenario_which_has_a_golden_in_every_profile() {
    let scenarios = Scenario::load_dir(&root().join("conformance/scenarios")).unwrap();
    for (name, status) in ARGUMENTS {
        let Status::Accepted { scenario, .. } = status else { continue };
        let (_, sc) = scenarios.iter().find(|(_, s)| s.name == *scenario).unwrap_or_else(|| panic!("{name}: no scenario {scenario}"));
        assert!(sc.args.contains_key(*name), "{scenario} does not set {name}");
        for v in profile::supported() {
            // tests/conformance.rs judges the folder; here only that it exists.
            assert!(root().join("golden").join(format!("hf-{v}")).join(scenario).join("result.json").is_file(), "{scenario}: no golden for {v}");
        }
    }
}

#[test]
fn versions_arguments_prints_each_field_of_the_release_and_the_counts() {
    let out = Command::new(env!("CARGO_BIN_EXE_ckptspec")).args(["versions", "--arguments", "--hf", "4.31.0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let p = Profile::get("4.31.0").unwrap();
    for (name, _) in &p.fields {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name.as_str())).unwrap_or_else(|| panic!("no line for {name}"));
        assert!(line.contains(arguments::status(name).label()), "{line}");
    }
    let total: usize = ["reproduced", "runner", "accepted", "refused", "not yet implemented"]
        .iter()
        .map(|l| text.lines().find_map(|x| x.strip_prefix(&format!("{l}: "))).unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(total, p.fields.len());
    assert!(text.contains("push_to_hub") && text.contains("needs the network"), "a refusal names its reason");
}

#[test]
fn a_refused_field_stops_run_with_its_reason_and_a_default_value_runs() {
    let d = tempfile::tempdir().unwrap();
    let refused = d.path().join("args-hub.json");
    std::fs::write(&refused, r#"{"name": "args-hub", "summary": "push_to_hub=True", "args": {"max_steps": 2, "push_to_hub": true}}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ckptspec"))
        .args(["run", refused.to_str().unwrap(), "--hf", "5.24.0", "--out", d.path().join("o1").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("push_to_hub") && err.contains("needs the network"), "{err}");
    // push_to_hub=False is the default: HF cannot tell it from a field not given.
    let default = d.path().join("args-hub-default.json");
    std::fs::write(&default, r#"{"name": "args-hub-default", "summary": "push_to_hub=False", "args": {"max_steps": 2, "push_to_hub": false}}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ckptspec"))
        .args(["run", default.to_str().unwrap(), "--hf", "5.24.0", "--out", d.path().join("o2").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn accelerator_config_use_configured_state_is_refused_where_the_release_has_it() {
    // 5.24.0 has the key: the refusal names its reason. 4.41.2 lacks it: HF's TypeError is the
    // outcome (result.json), as for any key AcceleratorConfig lacks.
    let d = tempfile::tempdir().unwrap();
    let sc = d.path().join("args-acc-ucs.json");
    std::fs::write(
        &sc,
        r#"{"name": "args-acc-ucs", "summary": "use_configured_state=True", "args": {"max_steps": 2, "accelerator_config": {"use_configured_state": true}}}"#,
    )
    .unwrap();
    let run = |v: &str, out: &str| {
        Command::new(env!("CARGO_BIN_EXE_ckptspec")).args(["run", sc.to_str().unwrap(), "--hf", v, "--out", d.path().join(out).to_str().unwrap()]).output().unwrap()
    };
    let out = run("5.24.0", "new");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("use_configured_state=True") && err.contains("refused"), "{err}");
    let out = run("4.41.2", "old");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = std::fs::read_to_string(d.path().join("old/result.json")).unwrap();
    assert!(result.contains("AcceleratorConfig.__init__() got an unexpected keyword argument 'use_configured_state'"), "{result}");
}

#[test]
fn accelerator_config_sharding_keys_in_a_launch_are_not_run() {
    let d = tempfile::tempdir().unwrap();
    let sc = d.path().join("args-acc-launch.json");
    std::fs::write(
        &sc,
        r#"{"name": "args-acc-launch", "summary": "s", "args": {"max_steps": 2, "use_cpu": true, "accelerator_config": {"use_seedable_sampler": false}}, "launch": {"nproc_per_node": 2}}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ckptspec"))
        .args(["run", sc.to_str().unwrap(), "--hf", "5.24.0", "--out", d.path().join("o").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("use_seedable_sampler=false") && err.contains("launch of 2 processes"), "{err}");
}
