//! `ckptspec plan`: the plan of every golden scenario, fed the golden run's own evaluation
//! results through the real `--metrics-from` path, predicts what the real HF Trainer left; the
//! seed question (../shared/notes/user-question.md) gets an answer for every profile that agrees
//! with the goldens of its era; bad input is a clear tool error.
use ckptspec::answers::plan::{self, config::Config, Options, Request, VersionPlan};
use ckptspec::formats::pyjson::{self, PyJson};
use ckptspec::hf::behaviors::BestTiming;
use ckptspec::hf::profile::{self, Profile};
use ckptspec::world::scenario::Scenario;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn opts(config: &Path) -> Options {
    Options { config: config.to_path_buf(), hf: vec![], ..Options::default() }
}

fn plan_one(config: &Path, o: &Options, version: &str) -> VersionPlan {
    let cfg = Config::load(config).unwrap_or_else(|e| panic!("{e}"));
    let req = Request::new(&cfg, o).unwrap_or_else(|e| panic!("{e}"));
    plan::plan_version(&cfg, &req, &Profile::get(version).unwrap(), version).unwrap_or_else(|e| panic!("{e}"))
}

fn checkpoint_dirs(out: &Path) -> Vec<String> {
    let mut v: Vec<(u64, String)> = std::fs::read_dir(out)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let num = n.strip_prefix("checkpoint-")?.parse().ok()?;
                    Some((num, n))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

fn step_of(p: &str) -> Option<u64> {
    p.rsplit("checkpoint-").next()?.parse().ok()
}

/// A timeline line: step, kind, learning rate, and an evaluation's metrics (runtimes left out).
type Line = (u64, &'static str, Option<f64>, serde_json::Map<String, serde_json::Value>);

/// The (step, kind, learning_rate, metrics) of each training log and evaluation in a
/// log_history, as the plan's events should list them (the end-of-training summary is the
/// plan's stop event). The metrics show which given evaluation fed which call.
fn history_lines(state: &PyJson) -> Vec<Line> {
    let mut v = vec![];
    if let Some(PyJson::List(h)) = state.get("log_history") {
        for e in h {
            let (PyJson::Dict(d), Some(PyJson::Int(step))) = (e, e.get("step")) else { continue };
            if d.iter().any(|(k, _)| k == "train_loss") {
                continue;
            }
            let kind = if d.iter().any(|(k, _)| k.starts_with("eval_")) { "evaluate" } else { "log" };
            let lr = match e.get("learning_rate") {
                Some(PyJson::Float(x)) => Some(*x),
                Some(PyJson::Int(i)) => Some(*i as f64),
                _ => None,
            };
            let metrics = d
                .iter()
                .filter(|(k, _)| k.starts_with("eval_") && !ckptspec::hf::state::is_volatile(k))
                .map(|(k, x)| (k.clone(), plan::answers::json_value(x)))
                .collect();
            v.push((*step as u64, kind, lr, metrics));
        }
    }
    v
}

/// Compares one plan with its golden run directory; returns the differences.
fn judge(vp: &VersionPlan, golden: &Path, best_names_written_folders: bool, earlier: &BTreeSet<u64>, empty_earlier: &BTreeSet<String>) -> Vec<String> {
    let mut bad = vec![];
    let a = match &vp.outcome {
        Ok(a) => a,
        Err(e) => return vec![format!("not planned: {e}")],
    };
    let result = pyjson::read_file(golden.join("result.json")).unwrap();
    let g_error = match result.get("error") {
        Some(e @ PyJson::Dict(_)) => {
            let s = |k| match e.get(k) {
                Some(PyJson::Str(s)) => s.clone(),
                _ => String::new(),
            };
            Some((s("type"), s("message")))
        }
        _ => None,
    };
    if a.error != g_error {
        bad.push(format!("error: golden {g_error:?}, plan {:?}", a.error));
    }
    // The main process's disk: node 0's with per-node disks (a launch, contract v3 part 2).
    let out = ckptspec::world::launch::main_output(golden);
    // Empty folders do not count (conformance/README.md: git holds none, so a checkout of
    // golden/ has none): a golden folder counts through its files, and an earlier run's empty
    // folder that no save of this run wrote into is left out of the plan's list too.
    let left: Vec<String> = checkpoint_dirs(&out)
        .into_iter()
        .filter(|n| std::fs::read_dir(out.join(n)).is_ok_and(|mut rd| rd.next().is_some()))
        .collect();
    let planned_left: Vec<&String> = a
        .checkpoints_left
        .iter()
        .filter(|n| !empty_earlier.contains(*n) || a.events.iter().any(|e| e.kind == "save" && e.details["folder"] == n.as_str()))
        .collect();
    if planned_left != left.iter().collect::<Vec<_>>() {
        bad.push(format!("checkpoints left: golden {left:?}, plan {:?}", a.checkpoints_left));
    }
    let state = result.get("final_state").filter(|s| **s != PyJson::Null);
    let g_best = match state.and_then(|s| s.get("best_model_checkpoint")) {
        Some(PyJson::Str(p)) => Some(p.rsplit('/').next().unwrap().to_string()),
        _ => None,
    };
    if a.best_checkpoint != g_best {
        bad.push(format!("best checkpoint: golden {g_best:?}, plan {:?}", a.best_checkpoint));
    }
    // Saved: every folder the golden shows was saved: those left, and those a state names as
    // best, except where HF names the evaluating step's folder whether it is written or not
    // (the behavior table's path-based best timing, 4.47-4.49).
    // A checkpoint folder the scenario's `earlier` made before the run (contract v3 part 3 a) is
    // no save of this run.
    let mut seen: BTreeSet<u64> = left.iter().filter_map(|n| step_of(n)).filter(|s| !earlier.contains(s)).collect();
    if best_names_written_folders {
        let mut states: Vec<PyJson> = left.iter().filter_map(|n| pyjson::read_file(out.join(n).join("trainer_state.json")).ok()).collect();
        states.extend(state.cloned());
        for st in &states {
            if let Some(PyJson::Str(p)) = st.get("best_model_checkpoint") {
                seen.extend(step_of(p));
            }
        }
    }
    let saved: BTreeSet<u64> = a.saved_steps.iter().copied().collect();
    if !seen.is_subset(&saved) {
        bad.push(format!("saved: golden shows {seen:?}, plan saved {saved:?}"));
    }
    // Each folder the plan saved and did not leave was deleted by a rule it names, or removed by
    // the damage between a resume's runs.
    let damage: Vec<String> = a.resume.as_ref().map(|r| r.damage.clone()).unwrap_or_default();
    for s in &saved {
        let f = format!("checkpoint-{s}");
        let removed = damage.iter().any(|d| *d == format!("remove output/{f}") || d == "remove output");
        if !a.checkpoints_left.contains(&f) && !removed && !a.events.iter().any(|e| e.kind == "delete" && e.details["folder"] == f.as_str()) {
            bad.push(format!("{f} saved, not left, and no deletion recorded"));
        }
    }
    let first = result.get("first");
    if let (Some(r), Some(first)) = (&a.resume, first) {
        let fst = first.get("final_state").filter(|s| **s != PyJson::Null);
        let int = |k: &str| match fst.and_then(|s| s.get(k)) {
            Some(PyJson::Int(i)) => Some(*i as i64),
            _ => None,
        };
        if !r.ran || r.first_global_step.map(|g| g as i64) != int("global_step") || r.first_max_steps != int("max_steps") {
            bad.push(format!("first run: golden {:?}/{:?}, plan {:?}/{:?} (ran: {})", int("global_step"), int("max_steps"), r.first_global_step, r.first_max_steps, r.ran));
        }
        let g_first_best = match fst.and_then(|s| s.get("best_model_checkpoint")) {
            Some(PyJson::Str(p)) => Some(p.rsplit('/').next().unwrap().to_string()),
            _ => None,
        };
        if r.first_best_checkpoint != g_first_best {
            bad.push(format!("first run's best: golden {g_first_best:?}, plan {:?}", r.first_best_checkpoint));
        }
    } else if a.resume.as_ref().is_some_and(|r| r.ran) {
        bad.push("the plan resumed; the golden first run raised".into());
    }
    if let Some(st) = state {
        let int = |k: &str| match st.get(k) {
            Some(PyJson::Int(i)) => Some(*i as i64),
            _ => None,
        };
        if a.global_step.map(|g| g as i64) != int("global_step") || a.max_steps != int("max_steps") {
            bad.push(format!("steps: golden {:?}/{:?}, plan {:?}/{:?}", int("global_step"), int("max_steps"), a.global_step, a.max_steps));
        }
        let lines = |evs: &[plan::answers::Event]| -> Vec<Line> {
            evs.iter()
                .filter(|e| e.kind == "log" || e.kind == "evaluate")
                .map(|e| {
                    let metrics = e.details.get("metrics").and_then(|m| m.as_object()).cloned().unwrap_or_default();
                    (e.step.unwrap_or(0), e.kind, e.details.get("learning_rate").and_then(|v| v.as_f64()), metrics)
                })
                .collect()
        };
        match (a.events.iter().position(|e| e.kind == "resume"), first.and_then(|f| f.get("final_state"))) {
            // A resume: the plan's first run is the golden first run's whole history; the resumed
            // run's own entries end the golden resumed history, which starts with the checkpoint's
            // (a prefix of the first run's).
            (Some(k), Some(fst)) => {
                let (g_first, g_final) = (history_lines(fst), history_lines(st));
                let (p_first, p_own) = (lines(&a.events[..k]), lines(&a.events[k + 1..]));
                if !same_lines(&g_first, &p_first) {
                    bad.push(format!("first run's timeline: golden {g_first:?}\n  plan {p_first:?}"));
                }
                let cut = g_final.len().checked_sub(p_own.len());
                let ok = cut.is_some_and(|c| same_lines(&g_final[c..], &p_own) && g_first.len() >= c && same_lines(&g_final[..c], &g_first[..c]));
                if !ok {
                    bad.push(format!("resumed timeline: golden {g_final:?}\n  plan's own {p_own:?}"));
                }
            }
            _ => {
                let (golden_lines, plan_lines) = (history_lines(st), lines(&a.events));
                if !same_lines(&golden_lines, &plan_lines) {
                    bad.push(format!("timeline: golden {golden_lines:?}\n  plan {plan_lines:?}"));
                }
            }
        }
    }
    bad
}

fn same_lines(g: &[Line], p: &[Line]) -> bool {
    g.len() == p.len()
        && g.iter().zip(p).all(|(g, p)| {
            g.0 == p.0
                && g.1 == p.1
                && g.3 == p.3
                && match (g.2, p.2) {
                    (Some(x), Some(y)) => ckptspec::harness::diff::floats_close(x, y),
                    (x, y) => x.is_none() && y.is_none(),
                }
        })
}

#[test]
fn every_golden_scenario_is_predicted_by_its_plan_with_the_golden_metrics() {
    let started = std::time::Instant::now();
    let scenarios = Scenario::load_dir(&root().join("conformance/scenarios")).expect("scenario files parse");
    let resumes = scenarios.iter().filter(|(_, s)| s.resume.is_some()).count();
    let versions = profile::supported();
    let work = tempfile::tempdir().unwrap();
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    // One job per profile (its own state files): (golden folders covered, resumes among them
    // whose resumed run ran, failures).
    let per_profile = ckptspec::harness::par::map(versions.len(), jobs, |k| {
        let v = versions[k];
        let p = Profile::get(v).unwrap();
        let state_file = work.path().join(format!("{v}-trainer_state.json"));
        let resumed_file = work.path().join(format!("{v}-resumed-trainer_state.json"));
        let (mut covered, mut resumed, mut failures) = (0usize, 0usize, vec![]);
        for (path, sc) in &scenarios {
            let golden = root().join("golden").join(format!("hf-{v}")).join(&sc.name);
            let Ok(result) = pyjson::read_file(golden.join("result.json")) else {
                failures.push(format!("{} @ {v}: no golden folder", sc.name));
                continue;
            };
            // The golden states, as trainer_state.json files (what save_state() writes): the
            // first run's feeds the first run, the resumed run's the resume (past the
            // evaluations of the checkpoint it loads).
            let as_state = |st: Option<&PyJson>| match st {
                Some(st @ PyJson::Dict(_)) => st.clone(),
                _ => PyJson::Dict(vec![("log_history".into(), PyJson::List(vec![]))]),
            };
            let write = |f: &Path, st: &PyJson| pyjson::write_file(f, st, &pyjson::DumpOptions { indent: Some(2), sort_keys: true, ..Default::default() }, false).unwrap();
            let first = result.get("first");
            let mut o = Options { metrics_from: Some(state_file.clone()), ..opts(path) };
            match first {
                Some(f) => {
                    write(&state_file, &as_state(f.get("final_state")));
                    write(&resumed_file, &as_state(result.get("final_state")));
                    o.resume_metrics_from = Some(resumed_file.clone());
                }
                None => write(&state_file, &as_state(result.get("final_state"))),
            }
            let cfg = Config::load(path).unwrap();
            let req = Request::new(&cfg, &o).unwrap();
            let bad = match plan::plan_version(&cfg, &req, &p, v) {
                Ok(vp) => {
                    if first.is_some() && vp.outcome.as_ref().is_ok_and(|a| a.resume.as_ref().is_some_and(|r| r.ran)) {
                        resumed += 1;
                    }
                    let earlier: BTreeSet<u64> =
                        sc.earlier.iter().filter_map(|e| e.path().split('/').nth(1).and_then(step_of)).collect();
                    // The earlier items that are empty folders (`{"folder": P}` directly in output/).
                    let empty: BTreeSet<String> = sc
                        .earlier
                        .iter()
                        .filter(|e| matches!(e, ckptspec::world::scenario::Earlier::Folder { .. }))
                        .filter_map(|e| e.path().strip_prefix("output/").filter(|n| !n.contains('/')).map(str::to_string))
                        .collect();
                    judge(&vp, &golden, p.best_timing != BestTiming::EveryEvalByPath, &earlier, &empty)
                }
                Err(e) => vec![format!("tool error: {e}")],
            };
            covered += 1;
            if !bad.is_empty() {
                failures.push(format!("{} @ {v}:\n  {}", sc.name, bad.join("\n  ")));
            }
        }
        (covered, resumed, failures)
    });
    let n: usize = per_profile.iter().map(|(c, _, _)| c).sum();
    let r: usize = per_profile.iter().map(|(_, r, _)| r).sum();
    for (v, (c, r, f)) in versions.iter().zip(&per_profile) {
        println!("plan vs golden @ {v}: {c} folders, {r} resumed runs checked, {} differ", f.len());
    }
    let failures: Vec<String> = per_profile.into_iter().flat_map(|(_, _, f)| f).collect();
    println!(
        "plan vs golden: {n} golden folders covered ({} scenarios, {resumes} of them resume, x {} profiles), {r} resumed runs checked against the golden resumed run, {} differ, {:.1}s",
        scenarios.len(),
        versions.len(),
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(n, scenarios.len() * versions.len(), "every scenario of every profile has a golden folder");
    // The resumed runs checked are those whose golden first run succeeded: most of them.
    assert!(r * 2 > resumes * versions.len(), "{r} resumed runs checked of {resumes} resume scenarios x {} profiles", versions.len());
    assert!(failures.is_empty(), "{} plans differ from HF:\n{}", failures.len(), failures.join("\n"));
}

fn seed_config() -> PathBuf {
    root().join("tests/plan/seed-question.yaml")
}

/// The config's keyword arguments in call order (read independently of the plan's loader).
fn seed_keys() -> Vec<String> {
    std::fs::read_to_string(seed_config())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(':'))
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect()
}

/// The version's TrainingArguments fields, from the golden folder the real HF wrote.
fn golden_fields(v: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(format!("golden/hf-{v}/TRAINING_ARGS.json"))).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    meta["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_seed_question_is_answered_for_every_profile_as_the_goldens_of_its_era_show() {
    let cfg = Config::load(&seed_config()).unwrap();
    let req = Request::new(&cfg, &opts(&seed_config())).unwrap();
    let versions = plan::resolve_versions(&["all".to_string()]).unwrap();
    assert_eq!(versions.len(), profile::supported().len());
    let plans = plan::plan_all(&cfg, &req, &versions).unwrap();
    let keys = seed_keys();
    assert!(keys.len() >= 20, "the seed config has its arguments: {keys:?}");
    let mut answers: BTreeSet<String> = BTreeSet::new();
    for vp in &plans {
        let v = vp.hf_version;
        let a = vp.outcome.as_ref().unwrap_or_else(|e| panic!("HF {v}: not planned: {e}"));
        // A keyword the version's TrainingArguments lacks is HF's TypeError, the first in order.
        let fields = golden_fields(v);
        let unknown = keys.iter().find(|k| !fields.contains(k));
        match unknown {
            Some(k) => {
                let (t, m) = a.error.as_ref().unwrap_or_else(|| panic!("HF {v}: {k} is not a field, yet no error"));
                assert_eq!(t, "TypeError", "HF {v}");
                assert!(m.ends_with(&format!("unexpected keyword argument '{k}'")), "HF {v}: {m}");
                // The golden of the old spelling agrees where that is the first unknown key.
                if k == "evaluation_strategy" {
                    let g = pyjson::read_file(root().join(format!("golden/hf-{v}/evaluation-strategy-old-name-saved/result.json"))).unwrap();
                    assert_eq!(g.get("error").and_then(|e| e.get("message")), Some(&PyJson::Str(m.clone())), "HF {v}");
                }
                assert_eq!(a.save_model_needed, None);
                answers.insert("error".into());
            }
            None => {
                assert_eq!(a.error, None, "HF {v}");
                // Whether the last step of a run whose max_steps is not a multiple of save_steps
                // is saved, as the golden final-step-not-multiple of this version shows it.
                let g = root().join(format!("golden/hf-{v}/final-step-not-multiple"));
                let gr = pyjson::read_file(g.join("result.json")).unwrap();
                let Some(PyJson::Int(ms)) = gr.get("final_state").and_then(|s| s.get("max_steps")) else { panic!() };
                let expect_saved = g.join(format!("output/checkpoint-{ms}")).is_dir();
                assert_eq!(a.final_step_saved, Some(expect_saved), "HF {v}");
                assert_eq!(a.global_step, Some(5000), "HF {v}");
                // No load_best: the final weights are the last step's, kept only by its checkpoint.
                assert_eq!(a.save_model_needed, Some(!expect_saved), "HF {v}");
                assert_eq!(a.resume_pick.as_deref(), a.checkpoints_left.last().map(String::as_str), "HF {v}");
                answers.insert(format!("save_model needed: {}", !expect_saved));
                let text = plan::render::answers_text(v, a, vp);
                assert!(text.contains(if expect_saved { "save_model() needed: no" } else { "save_model() needed: YES" }), "{text}");
                assert!(text.contains("tokenizer.save_pretrained"), "{text}");
            }
        }
        // The arguments that do not change checkpoints are named, not dropped silently.
        for name in ["bf16", "optim", "gradient_checkpointing", "eval_accumulation_steps"] {
            if fields.iter().any(|f| f == name) && a.error.is_none() {
                assert!(vp.classified.not_affecting.iter().any(|d| d.name == name), "HF {v}: {name} not listed");
            }
        }
    }
    assert_eq!(answers.len(), 3, "the versions give three distinct answers (needed, not needed, error): {answers:?}");
    let text = plan::text(&plans);
    assert!(text.contains("What differs between the versions"), "{text}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_keyword_the_version_lacks_is_hfs_typeerror_not_a_tool_error() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(d.path(), "c.yaml", "max_steps: 10\nsave_stepz: 5\n");
    let vp = plan_one(&cfg, &opts(&cfg), "5.24.0");
    let a = vp.outcome.unwrap();
    let (t, m) = a.error.unwrap();
    assert_eq!(t, "TypeError");
    assert!(m.contains("'save_stepz'"), "{m}");
    // `eval_strategy` before it existed (4.41): HF takes names as written, so it is the same
    // TypeError the golden shows for another unknown keyword of that version.
    let cfg = write(d.path(), "e.json", r#"{"max_steps": 4, "eval_strategy": "steps", "eval_steps": 2}"#);
    let a = plan_one(&cfg, &opts(&cfg), "4.31.0").outcome.unwrap();
    let g = pyjson::read_file(root().join("golden/hf-4.31.0/eval-on-start/result.json")).unwrap();
    let Some(PyJson::Str(gm)) = g.get("error").and_then(|e| e.get("message")) else { panic!() };
    assert_eq!(a.error, Some(("TypeError".into(), gm.replace("eval_on_start", "eval_strategy"))));
    // ... while a scenario file (format v1 spelling) runs eval_strategy on every version.
    let a = plan_one(&root().join("conformance/scenarios/errors/evaluation-strategy-old-name-saved.json"), &opts(&cfg), "4.31.0").outcome.unwrap();
    assert_eq!(a.error, None);
}

#[test]
fn bad_input_is_a_tool_error_naming_the_file_and_field() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(d.path(), "c.yaml", "max_steps: 10\neval_strategy: steps\neval_steps: 5\n");
    let missing = d.path().join("nope.yaml");
    let e = Config::load(&missing).unwrap_err();
    assert!(e.contains("nope.yaml") && e.contains("cannot read"), "{e}");
    let e = Config::load(&write(d.path(), "list.yaml", "- 1\n- 2\n")).unwrap_err();
    assert!(e.contains("list.yaml") && e.contains("mapping"), "{e}");
    let e = Config::load(&write(d.path(), "bad.json", "{\"max_steps\": ")).unwrap_err();
    assert!(e.contains("bad.json") && e.contains("JSON"), "{e}");
    let c = Config::load(&cfg).unwrap();
    let with = |f: &dyn Fn(&mut Options)| {
        let mut o = opts(&cfg);
        f(&mut o);
        Request::new(&c, &o)
    };
    let m = write(d.path(), "m.json", r#"{"eval_loss": 0.5}"#);
    let e = with(&|o| o.metrics = Some(m.clone())).unwrap_err();
    assert!(e.contains("m.json") && e.contains("list"), "{e}");
    let m2 = write(d.path(), "m2.json", r#"[{"eval_loss": 0.5}, 3]"#);
    let e = with(&|o| o.metrics = Some(m2.clone())).unwrap_err();
    assert!(e.contains("m2.json") && e.contains("entry 2"), "{e}");
    let m3 = write(d.path(), "m3.json", r#"[{"eval_a_loss": 0.5, "eval_c_loss": 1}]"#);
    let e = with(&|o| {
        o.metrics = Some(m3.clone());
        o.eval_rows = Some("a=8,b=4".into());
    })
    .unwrap_err();
    assert!(e.contains("m3.json") && e.contains("eval_c_loss") && e.contains("eval_b_"), "{e}");
    let st = write(d.path(), "trainer_state.json", r#"{"global_step": 3}"#);
    let e = with(&|o| o.metrics_from = Some(st.clone())).unwrap_err();
    assert!(e.contains("trainer_state.json") && e.contains("log_history"), "{e}");
    let e = with(&|o| o.eval_rows = Some("a=x".into())).unwrap_err();
    assert!(e.contains("--eval-rows") && e.contains("\"a\""), "{e}");
    let e = plan::resolve_versions(&["4.99.0".into()]).unwrap_err();
    assert!(e.contains("4.99.0") && e.contains("5.24.0"), "{e}");
    // num_train_epochs without a data size.
    let ep = write(d.path(), "ep.yaml", "num_train_epochs: 2\n");
    let c2 = Config::load(&ep).unwrap();
    let req = Request::new(&c2, &opts(&ep)).unwrap();
    let e = plan::plan_version(&c2, &req, &Profile::get("5.24.0").unwrap(), "5.24.0").unwrap_err();
    assert!(e.contains("--train-rows") && e.contains("--steps-per-epoch"), "{e}");
    // Through the binary: exit 2 and the message.
    let bin = env!("CARGO_BIN_EXE_ckptspec");
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).output().unwrap();
    let out = run(&["plan", cfg.to_str().unwrap(), "--hf", "5.24.0", "--train-rows", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--train-rows"));
    let out = run(&["plan", missing.to_str().unwrap(), "--hf", "5.24.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.yaml"));
}

#[test]
fn every_schedule_a_version_accepts_is_planned() {
    let d = tempfile::tempdir().unwrap();
    for v in [profile::oldest(), profile::newest()] {
        for t in Profile::get(v).unwrap().scheduler_types {
            let cfg = write(d.path(), "s.json", &format!(r#"{{"max_steps": 4, "eval_strategy": "steps", "eval_steps": 2, "lr_scheduler_type": "{t}"}}"#));
            let vp = plan_one(&cfg, &opts(&cfg), v);
            assert!(vp.outcome.is_ok(), "HF {v} {t}: {:?}", vp.outcome.err());
        }
    }
}

#[test]
fn the_not_affecting_table_names_real_arguments_the_executor_does_not_model() {
    let all: BTreeSet<String> = profile::supported().iter().flat_map(|v| golden_fields(v)).collect();
    for (name, reason) in plan::arguments::NOT_AFFECTING {
        assert!(all.contains(*name), "{name} is no TrainingArguments field of any profile");
        assert!(!reason.is_empty());
        // A field modelled for some values only lists the others.
        let partly = ckptspec::hf::args::MODELLED_VALUES.iter().any(|(n, _)| n == name);
        assert!(partly || !ckptspec::hf::args::modelled(name), "{name} is modelled: it must reach the executor");
    }
}

#[test]
fn what_depends_on_assumed_metrics_is_marked_and_given_metrics_make_it_exact() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(
        d.path(),
        "c.json",
        r#"{"max_steps": 10, "eval_strategy": "steps", "eval_steps": 2, "save_steps": 2, "save_total_limit": 1, "load_best_model_at_end": true, "metric_for_best_model": "accuracy"}"#,
    );
    let vp = plan_one(&cfg, &opts(&cfg), "5.24.0");
    let a = vp.outcome.as_ref().unwrap();
    assert!(a.assumed && a.depends_on_assumed.iter().any(|x| x.contains("load_best")), "{:?}", a.depends_on_assumed);
    // Assumed values improve at every evaluation: the last is best.
    assert_eq!(a.best_checkpoint.as_deref(), Some("checkpoint-10"));
    assert!(vp.timeline.contains("eval_accuracy=assumed") && vp.timeline.contains("best_metric=assumed"), "{}", vp.timeline);
    // Given: the best is at step 4 and it is what load_best loads; nothing is assumed.
    let m = write(d.path(), "m.json", r#"[{"eval_loss": 1, "eval_accuracy": 0.5}, {"eval_loss": 1, "eval_accuracy": 0.9}, {"eval_loss": 1, "eval_accuracy": 0.6}, {"eval_loss": 1, "eval_accuracy": 0.7}, {"eval_loss": 1, "eval_accuracy": 0.8}]"#);
    let vp = plan_one(&cfg, &Options { metrics: Some(m), ..opts(&cfg) }, "5.24.0");
    let a = vp.outcome.as_ref().unwrap();
    assert!(!a.assumed && a.assumed_values.is_empty());
    assert_eq!(a.best_checkpoint.as_deref(), Some("checkpoint-4"));
    assert_eq!(a.load_best, plan::answers::LoadBest::Loads("checkpoint-4".into()));
    assert_eq!(a.checkpoints_left, vec!["checkpoint-4"]);
    assert_eq!((a.final_weights_at.as_deref(), a.save_model_needed), (Some("checkpoint-4"), Some(false)));
    assert_eq!(a.resume_pick.as_deref(), Some("checkpoint-4"));
    let j = plan::json::version(&vp);
    assert_eq!(j["best_checkpoint"], "checkpoint-4");
    assert_eq!(j["save_model_needed"], false);
    assert!(j["events"].as_array().unwrap().iter().any(|e| e["kind"] == "delete" && e["details"]["rule"] == "save_total_limit"));
}

#[test]
fn steps_per_epoch_chooses_rows_that_give_that_many_steps() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(d.path(), "c.yaml", "num_train_epochs: 3\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 3\nsave_strategy: epoch\n");
    for v in [profile::oldest(), "4.52.4", profile::newest()] {
        let vp = plan_one(&cfg, &Options { steps_per_epoch: Some(5), ..opts(&cfg) }, v);
        let a = vp.outcome.as_ref().unwrap();
        assert_eq!(a.max_steps, Some(15), "HF {v}: {}", vp.train_note);
        assert_eq!(a.checkpoints_left, vec!["checkpoint-5", "checkpoint-10", "checkpoint-15"], "HF {v}");
        assert!(vp.train_note.contains("60 training rows"), "{}", vp.train_note);
    }
}

#[test]
fn a_training_args_bin_from_a_golden_run_plans_that_run() {
    // Every profile's own training_args.bin of a golden run, planned for that profile with the
    // scenario's data, leaves what the real HF left.
    for v in profile::supported() {
        let g = root().join(format!("golden/hf-{v}/final-step-not-multiple"));
        let bin = g.join("output/checkpoint-4/training_args.bin");
        let o = Options { train_rows: Some(64), ..opts(&bin) };
        let vp = plan_one(&bin, &o, v);
        assert_eq!(vp.config_kind, "training_args.bin");
        let a = vp.outcome.as_ref().unwrap_or_else(|e| panic!("HF {v}: {e}"));
        assert_eq!(a.error, None, "HF {v}");
        assert_eq!(a.checkpoints_left, checkpoint_dirs(&g.join("output")), "HF {v}");
        assert!(vp.config_note.as_deref().is_some_and(|n| n.contains("fits")), "HF {v}: {:?}", vp.config_note);
    }
}

#[test]
fn a_config_plans_the_resume_the_flags_ask_for() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(d.path(), "c.yaml", "max_steps: 8\nsave_steps: 4\nlogging_steps: 2\nsave_total_limit: 2\n");
    // "If I resume with max_steps=12, what is left?"
    let vp = plan_one(&cfg, &Options { resume_max_steps: Some(12), ..opts(&cfg) }, "5.24.0");
    let a = vp.outcome.as_ref().unwrap();
    let r = a.resume.as_ref().expect("the plan resumes");
    assert_eq!((r.from.as_str(), r.checkpoint.as_deref(), r.start_step, r.ran), ("last", Some("checkpoint-8"), Some(8), true));
    assert_eq!(r.first_checkpoints_left, ["checkpoint-4", "checkpoint-8"]);
    assert_eq!((a.error.as_ref(), a.global_step, a.max_steps), (None, Some(12), Some(12)));
    assert_eq!(a.checkpoints_left, ["checkpoint-8", "checkpoint-12"]);
    assert_eq!((a.final_step_saved, a.save_model_needed), (Some(true), Some(false)));
    let text = plan::render::answers_text("5.24.0", a, &vp);
    assert!(text.contains("max_steps=12") && text.contains("resumes from checkpoint-8 at step 8"), "{text}");
    let j = plan::json::version(&vp);
    assert_eq!(j["resume"]["checkpoint"], "checkpoint-8");
    assert_eq!(j["resume"]["first_run"]["global_step"], 8);
    let kinds: Vec<&str> = j["events"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let k = kinds.iter().position(|k| *k == "resume").expect("a resume event");
    assert_eq!(kinds[..k].iter().filter(|k| **k == "save").count(), 2, "{kinds:?}");
    assert_eq!(kinds[k + 1..].iter().filter(|k| **k == "save").count(), 1, "{kinds:?}");
    // An older checkpoint: the resumed run writes checkpoint-8 again.
    let o = Options { resume_from: Some("checkpoint-4".into()), resume_max_steps: Some(12), ..opts(&cfg) };
    let a = plan_one(&cfg, &o, "5.24.0").outcome.unwrap();
    assert_eq!(a.resume.as_ref().unwrap().start_step, Some(4));
    assert_eq!(a.saved_steps, [4, 8, 8, 12]);
    // A checkpoint that is not there: HF's ValueError is the answer.
    let o = Options { resume_from: Some("checkpoint-99".into()), ..opts(&cfg) };
    let a = plan_one(&cfg, &o, "5.24.0").outcome.unwrap();
    assert_eq!(a.error, Some(("ValueError".into(), "Can't find a valid checkpoint at output/checkpoint-99".into())));
    assert_eq!(a.checkpoints_left, ["checkpoint-4", "checkpoint-8"]);
    // Given metrics feed both runs in order: the resumed run's evaluation takes the third round.
    let ev = write(d.path(), "e.yaml", "max_steps: 8\nsave_steps: 4\neval_strategy: steps\neval_steps: 4\nload_best_model_at_end: true\nmetric_for_best_model: accuracy\n");
    let m = write(d.path(), "m.json", r#"[{"eval_loss": 1, "eval_accuracy": 0.9}, {"eval_loss": 1, "eval_accuracy": 0.5}, {"eval_loss": 1, "eval_accuracy": 0.6}]"#);
    let vp = plan_one(&ev, &Options { metrics: Some(m), resume_max_steps: Some(12), ..opts(&ev) }, "5.24.0");
    let a = vp.outcome.as_ref().unwrap();
    assert!(!a.assumed && a.assumed_values.is_empty(), "{:?}", a.assumed_values);
    assert_eq!(a.best_checkpoint.as_deref(), Some("checkpoint-4"));
    assert_eq!(a.load_best, plan::answers::LoadBest::Loads("checkpoint-4".into()));
    assert!(vp.metrics_note.contains("continue the list"), "{}", vp.metrics_note);
    // The tool's own errors.
    let bin = env!("CARGO_BIN_EXE_ckptspec");
    let run = |args: &[&str]| std::process::Command::new(bin).args(args).output().unwrap();
    let c = cfg.to_str().unwrap();
    let out = run(&["plan", c, "--hf", "5.24.0", "--resume-from", "checkpoint-x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--resume-from"));
    let out = run(&["plan", c, "--hf", "5.24.0", "--resume-metrics-from", c]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not resume"));
    let out = run(&["plan", c, "--hf", "5.24.0", "--resume-max-steps", "12"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("resumes from checkpoint-8 at step 8"));
}

/// `--nnodes 2` on a user's config plans the launch of the `distributed/` goldens: what node 1's
/// own disk holds at the end (its rng files only, or a whole checkpoint with save_on_each_node,
/// or 4.37's staging folders) is what real HF left there.
#[test]
fn nnodes_plans_what_each_nodes_disk_holds_as_the_goldens_show() {
    let d = tempfile::tempdir().unwrap();
    for name in ["dist-nodes-node-local", "dist-nodes-save-on-each-node"] {
        let sc = Scenario::load(&root().join(format!("conformance/scenarios/distributed/{name}.json"))).unwrap();
        for v in ["4.31.0", "4.37.2", "4.38.2", "5.24.0"] {
            // A user's config spells use_cpu as the release does (4.31: no_cuda).
            let mut args = sc.args.clone();
            if !Profile::get(v).unwrap().has_field("use_cpu") {
                let on = args.remove("use_cpu").unwrap();
                args.insert("no_cuda".into(), on);
            }
            let cfg = write(d.path(), &format!("{name}-{v}.json"), &serde_json::to_string(&args).unwrap());
            let o = Options { train_rows: Some(64), nnodes: Some(2), nproc_per_node: Some(1), ..opts(&cfg) };
            let a = plan_one(&cfg, &o, v).outcome.unwrap();
            let node1 = root().join(format!("golden/hf-{v}/{name}/node-1/output"));
            let mut want: Vec<(usize, String, Vec<String>)> = vec![];
            for f in std::fs::read_dir(&node1).map(|rd| rd.flatten().collect::<Vec<_>>()).unwrap_or_default() {
                let mut files: Vec<String> = std::fs::read_dir(f.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
                files.sort();
                want.push((1, f.file_name().to_string_lossy().into_owned(), files));
            }
            want.sort_by_key(|(_, f, _)| (step_of(f).unwrap_or(u64::MAX), f.clone()));
            assert_eq!(a.other_nodes, want, "{name} @ {v}");
            assert_eq!(a.checkpoints_left, checkpoint_dirs(&root().join(format!("golden/hf-{v}/{name}/node-0/output"))), "{name} @ {v}");
        }
    }
    // Three nodes are outside the contract: the tool's error, naming the flag.
    let cfg = write(d.path(), "c.json", r#"{"max_steps": 4}"#);
    let cfg_l = Config::load(&cfg).unwrap();
    let e = Request::new(&cfg_l, &Options { nnodes: Some(3), ..opts(&cfg) }).unwrap_err();
    assert_eq!(e, "--nnodes must be 1 or 2, not 3");
}

#[test]
fn a_config_that_meets_a_race_of_real_hf_is_told_so_in_the_releases_that_have_it() {
    // conformance/races.json: where real HF's own processes race, the plan answers the golden's
    // outcome and lists the others. Driven by every distributed scenario and every profile: the
    // plan names a race exactly where the table's conditions hold.
    let dir = root().join("conformance/scenarios/distributed");
    let mut met = BTreeSet::new();
    for v in ["4.37.2", "4.38.2", "4.39.3", "4.49.0", "4.50.3", "4.56.2", "4.57.6"] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let sc = Scenario::load(&e.path()).unwrap();
            let vp = plan_one(&e.path(), &opts(&e.path()), v);
            let names: Vec<&str> = vp.races.iter().map(|r| r.name.as_str()).collect();
            let text = plan::render::section(&vp, None);
            for r in &vp.races {
                met.insert((r.name.clone(), v));
                assert!(text.contains(&format!("RACE in real HF {v} ({}", r.name)) && text.contains(&r.outcomes[1]), "{}\n{text}", sc.name);
            }
            let l = sc.first_launch();
            let shared_nodes = l.nnodes == 2 && l.disks == ckptspec::world::launch::Disks::Shared;
            let each = sc.args.get("save_on_each_node").and_then(|x| x.as_bool()).unwrap_or(false);
            let staging = v == "4.38.2" && shared_nodes && !each;
            assert_eq!(names.contains(&"staging-rename-vs-rmtree"), staging, "{} @ {v}", sc.name);
            if !(v.starts_with("4.50") || v.starts_with("4.56")) {
                assert!(!names.contains(&"best-checkpoint-exists"), "{} @ {v}", sc.name);
            }
        }
    }
    assert!(met.contains(&("staging-rename-vs-rmtree".to_string(), "4.38.2")), "{met:?}");
    assert!(met.contains(&("best-checkpoint-exists".to_string(), "4.50.3")) && met.contains(&("best-checkpoint-exists".to_string(), "4.56.2")), "{met:?}");
}
