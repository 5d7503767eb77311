//! Differential test against the real HF Trainer (opt-in): random scenarios drawn from the
//! argument vocabulary of the catalogue (conformance/scenarios), valid and invalid mixes alike,
//! run through the generator with the real HF of a profile (one python process for all of them) and
//! through the Rust trainer, each pair diffed with `diff::compare_run_dirs`. The model kind (contract
//! v3: regression, module, linear, lora) is drawn from the catalogue's `model` fields too, and so
//! is a launch of several processes (contract v3 part 2: `launch` and `resume.launch`, now and
//! then: the generator runs them under torchrun, 15-30 s per launch shape and phase).
//!
//! ```sh
//! CKPTSPEC_DIFFERENTIAL=1 cargo test --release --test differential -- --nocapture
//! CKPTSPEC_DIFFERENTIAL=1 CKPTSPEC_DIFFERENTIAL_N=300 CKPTSPEC_DIFFERENTIAL_SEED=7 cargo test --release --test differential -- --nocapture
//! ```
//! `CKPTSPEC_DIFFERENTIAL_HF=<version>` picks the profile (default the newest; another patch of a
//! profiled minor runs that minor's profile) and its venv's python (`./dev venvs` makes them all);
//! `CKPTSPEC_PYTHON` overrides the python. `CKPTSPEC_DIFFERENTIAL_KEEP=1` keeps the drawn scenario
//! files and both sides' run directories (the path is printed). `CKPTSPEC_DIFFERENTIAL_DRAW=1` only draws: it prints each
//! scenario's launch and resume (to pick a seed that draws what a short run should cover) and
//! runs nothing.
//! Each disagreeing scenario is written to `target/differential-failures/<version>/<name>.json` (a format
//! v1 scenario file, ready for conformance/scenarios/) with the diff report next to it
//! (`<name>.diff.txt`). Without `CKPTSPEC_DIFFERENTIAL` the test says it was skipped and passes.
mod common;
use ckptspec::harness::diff::{compare_run_dirs, Stage};
use ckptspec::harness::runner;
use ckptspec::hf::profile::Profile;
use ckptspec::trainer::RunError;
use ckptspec::world::scenario::{Scenario, RUNNER_ARGS};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;


use common::Rng;

/// What the catalogue uses: every argument with every value it takes, and the other fields.
#[derive(Default)]
struct Vocabulary {
    args: BTreeMap<String, Vec<Value>>,
    data: Vec<Value>,
    metrics: Vec<Value>,
    early_stopping: Vec<Value>,
    finally: Vec<Value>,
    /// Contract v3, part 1: every `model` of the catalogue (the first run's and `resume.model`).
    models: Vec<Value>,
    /// Contract v2: every `resume.args` override and every `resume.damage` item of the catalogue.
    resume_args: BTreeMap<String, Vec<Value>>,
    damage: Vec<Value>,
    /// Contract v3, part 2: every `launch` and every `resume.launch` of the catalogue.
    launches: Vec<Value>,
    resume_launches: Vec<Value>,
}

fn push_unique(v: &mut Vec<Value>, x: &Value) {
    if !v.contains(x) {
        v.push(x.clone());
    }
}

fn vocabulary(root: &Path) -> Vocabulary {
    let mut voc = Vocabulary::default();
    for (path, _) in Scenario::load_dir(&root.join("conformance/scenarios")).unwrap() {
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (k, v) in raw["args"].as_object().unwrap() {
            push_unique(voc.args.entry(k.clone()).or_default(), v);
        }
        if let Some(r) = raw.get("resume") {
            for (k, v) in r.get("args").and_then(|a| a.as_object()).into_iter().flatten() {
                push_unique(voc.resume_args.entry(k.clone()).or_default(), v);
            }
            for d in r.get("damage").and_then(|d| d.as_array()).into_iter().flatten() {
                push_unique(&mut voc.damage, d);
            }
            if let Some(m) = r.get("model") {
                push_unique(&mut voc.models, m);
            }
            if let Some(l) = r.get("launch") {
                push_unique(&mut voc.resume_launches, l);
            }
        }
        if let Some(l) = raw.get("launch") {
            push_unique(&mut voc.launches, l);
        }
        for (field, list) in [
            ("data", &mut voc.data),
            ("metrics", &mut voc.metrics),
            ("early_stopping", &mut voc.early_stopping),
            ("finally", &mut voc.finally),
            ("model", &mut voc.models),
        ] {
            if let Some(v) = raw.get(field) {
                push_unique(list, v);
            }
        }
    }
    voc
}

/// One random scenario: a few arguments of the catalogue with values it uses, nudged towards
/// evaluating and tracking a metric half the time, with scripted metrics when anything may
/// evaluate.
fn random_scenario(rng: &mut Rng, voc: &Vocabulary, profile: &Profile, name: &str, seed: u64) -> Value {
    let mut args = Map::new();
    let set = |args: &mut Map<String, Value>, k: &str, v: Value| {
        if !RUNNER_ARGS.contains(&k) {
            args.insert(k.to_string(), v);
        }
    };
    let from = |rng: &mut Rng, k: &str| rng.pick(&voc.args[k]).clone();
    if rng.chance(0.7) {
        let v = from(rng, "max_steps");
        set(&mut args, "max_steps", v);
    }
    if rng.chance(0.6) {
        let strategy = if rng.chance(0.8) { json!("steps") } else { json!("epoch") };
        set(&mut args, "eval_strategy", strategy);
        if rng.chance(0.8) {
            let v = from(rng, "eval_steps");
            set(&mut args, "eval_steps", v);
        }
    }
    if rng.chance(0.5) {
        let v = from(rng, "save_steps");
        set(&mut args, "save_steps", v);
    }
    if rng.chance(0.4) {
        let v = from(rng, "metric_for_best_model");
        set(&mut args, "metric_for_best_model", v);
    }
    // Arguments this version knows; one it does not know (HF's TypeError) now and then.
    let (known, unknown): (Vec<&String>, Vec<&String>) = voc.args.keys().partition(|k| profile.has_field(k));
    for _ in 0..1 + rng.below(4) {
        let k = rng.pick(&known).as_str();
        if !args.contains_key(k) {
            let v = from(rng, k);
            set(&mut args, k, v);
        }
    }
    if !unknown.is_empty() && rng.chance(0.05) {
        let k = rng.pick(&unknown).as_str();
        let v = from(rng, k);
        set(&mut args, k, v);
    }
    let mut sc = json!({
        "name": name,
        "summary": format!("random argument mix of the differential test (seed {seed}): does the Rust trainer match HF {}?", profile.version),
        "args": Value::Object(args.clone()),
    });
    if rng.chance(0.15) {
        sc["data"] = rng.pick(&voc.data).clone();
    }
    let evaluates = args.contains_key("eval_strategy") || args.contains_key("eval_steps") || args.contains_key("metric_for_best_model");
    if evaluates && rng.chance(0.85) {
        if rng.chance(0.3) {
            sc["metrics"] = rng.pick(&voc.metrics).clone();
        } else {
            let key = args
                .get("metric_for_best_model")
                .and_then(|m| m.as_str())
                .map(|m| m.trim_start_matches("eval_").to_string())
                .filter(|m| !m.ends_with("loss"))
                .unwrap_or_else(|| "acc".to_string());
            let named: Vec<String> = sc["data"]["eval"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
            let n = rng.below(13);
            let entries: Vec<Value> = (0..n)
                .map(|_| {
                    let one = |rng: &mut Rng| {
                        let mut e = Map::new();
                        e.insert(key.clone(), json!((1 + rng.below(9)) as f64 / 10.0));
                        Value::Object(e)
                    };
                    if named.is_empty() {
                        one(rng)
                    } else {
                        Value::Object(named.iter().map(|s| (s.clone(), one(rng))).collect())
                    }
                })
                .collect();
            sc["metrics"] = Value::Array(entries);
        }
    }
    if rng.chance(0.1) {
        sc["early_stopping"] = rng.pick(&voc.early_stopping).clone();
    }
    if rng.chance(0.15) {
        sc["finally"] = rng.pick(&voc.finally).clone();
    }
    if rng.chance(0.2) {
        sc["tokenizer"] = json!(true);
    }
    if rng.chance(0.35) && !voc.models.is_empty() {
        // The model kind (contract v3): lora's label_names / remove_unused_columns stay as drawn,
        // so the releases' PeftModel errors come up too.
        sc["model"] = rng.pick(&voc.models).clone();
    }
    // A launch of several processes (contract v3 part 2), as the catalogue has them: each costs
    // the generator a torchrun of 15-30 s per launch shape and phase, hence the modest chance.
    // The catalogue's launches are of at most 2 processes (the Rust trainer refuses more) and
    // set use_cpu; a few draws leave it out (from 5.4 every process then trains alone on a
    // machine without a GPU: `LaunchBehaviors::without_use_cpu`).
    let launch = (rng.chance(LAUNCH_CHANCE) && !voc.launches.is_empty()).then(|| rng.pick(&voc.launches).clone());
    if let Some(l) = &launch {
        sc["launch"] = l.clone();
        if rng.chance(0.9) {
            sc["args"]["use_cpu"] = json!(true);
        }
    }
    let per_node = launch.as_ref().is_some_and(|l| l["disks"] == "per-node");
    let world = launch.as_ref().map_or(1, |l| l["nnodes"].as_u64().unwrap_or(1) * l["nproc_per_node"].as_u64().unwrap_or(1));
    // No resume of a launch with per-node disks: the catalogue has none, and a node whose disk
    // cannot resume fails its processes alone, which leaves the launch to the generator's timeout.
    if rng.chance(0.5) && !per_node {
        let lora = sc["model"]["kind"] == "lora";
        sc["resume"] = random_resume(rng, voc, &args, lora, world as usize);
        if rng.chance(0.1) && !voc.models.is_empty() {
            sc["resume"]["model"] = rng.pick(&voc.models).clone();
        }
        // Resumed with another number of processes (2 -> 1, 1 -> 2, as the catalogue does).
        if rng.chance(0.3) && !voc.resume_launches.is_empty() {
            let l = rng.pick(&voc.resume_launches).clone();
            if l["disks"] != "per-node" {
                sc["resume"]["launch"] = l;
                if launch.is_none() && rng.chance(0.9) {
                    sc["args"]["use_cpu"] = json!(true);
                }
            }
        }
    }
    sc
}

/// The chance that a scenario runs under a launch of several processes.
const LAUNCH_CHANCE: f64 = 0.15;

/// A contract-v2 `resume`: from the last checkpoint or from a step of the run, now and then
/// with overrides the catalogue uses and with damage: to the checkpoint resumed from (a file
/// removed or cut, or the folder removed), or a damage item of the catalogue.
fn random_resume(rng: &mut Rng, voc: &Vocabulary, args: &Map<String, Value>, lora: bool, world: usize) -> Value {
    let max = args.get("max_steps").and_then(|v| v.as_i64()).filter(|m| *m > 0).unwrap_or(24);
    let from = if rng.chance(0.5) { "last".to_string() } else { format!("checkpoint-{}", 1 + rng.below(max as usize)) };
    let mut r = json!({"from": from});
    if rng.chance(0.4) && !voc.resume_args.is_empty() {
        let keys: Vec<&String> = voc.resume_args.keys().collect();
        let k = rng.pick(&keys).as_str();
        r["args"] = json!({k: rng.pick(&voc.resume_args[k]).clone()});
    }
    if rng.chance(0.3) {
        let d = if from != "last" && rng.chance(0.7) {
            let weights = if lora { *rng.pick(&["adapter_model.safetensors", "adapter_config.json"]) } else { "model.safetensors" };
            // A launch writes one rng file per process: damage one of them.
            let rng_file = if world > 1 { format!("rng_state_{}.pth", rng.below(world)) } else { "rng_state.pth".to_string() };
            let file = *rng.pick(&["trainer_state.json", "optimizer.pt", "scheduler.pt", rng_file.as_str(), weights, ""]);
            let path = if file.is_empty() { format!("output/{from}") } else { format!("output/{from}/{file}") };
            if !file.is_empty() && rng.chance(0.4) { json!({"truncate": path, "bytes": 100}) } else { json!({"remove": path}) }
        } else if !voc.damage.is_empty() {
            rng.pick(&voc.damage).clone()
        } else {
            json!({"remove": "output"})
        };
        r["damage"] = json!([d]);
    }
    r
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    total: usize,
    structure: usize,
    json_and_error: usize,
    tensors: usize,
    full: usize,
    hf_errors: usize,
    /// Scenarios whose second Trainer ran (HF's result.json has `first`), and with a tokenizer.
    resumed: usize,
    tokenizer: usize,
    /// Contract v3 part 2: scenarios with a launch (first run or resume).
    launched: usize,
    /// Contract v3: the first run's model kind, with counts.
    kinds: BTreeMap<String, usize>,
    /// HF's outcomes: "ok" or the exception type, with counts.
    outcomes: BTreeMap<String, usize>,
    /// The most frequent HF error messages (first 90 characters).
    messages: BTreeMap<String, usize>,
    not_implemented: Vec<String>,
    tool_errors: Vec<String>,
    disagreements: Vec<String>,
}

#[test]
fn rust_trainer_agrees_with_real_hf_on_random_scenarios() {
    if std::env::var("CKPTSPEC_DIFFERENTIAL").map(|v| v.is_empty() || v == "0").unwrap_or(true) {
        println!("differential test skipped: set CKPTSPEC_DIFFERENTIAL=1 (and optionally CKPTSPEC_DIFFERENTIAL_N, default 100) to run it");
        return;
    }
    let t0 = Instant::now();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let n: usize = env_or("CKPTSPEC_DIFFERENTIAL_N", 100);
    let seed: u64 = env_or("CKPTSPEC_DIFFERENTIAL_SEED", 1);
    let asked = std::env::var("CKPTSPEC_DIFFERENTIAL_HF").unwrap_or_else(|_| ckptspec::hf::profile::newest().to_string());
    let resolved = ckptspec::hf::profile::resolve(&asked).unwrap();
    if let Some(note) = resolved.note() {
        println!("{note}");
    }
    let hf = resolved.profile();
    let python = common::hf_python(&root, hf);

    let voc = vocabulary(&root);
    let profile = Profile::get(hf).unwrap();
    // CKPTSPEC_DIFFERENTIAL_KEEP=1 keeps the drawn scenarios and both sides' run directories.
    let keep = std::env::var_os("CKPTSPEC_DIFFERENTIAL_KEEP").is_some();
    let tmp = tempfile::Builder::new().disable_cleanup(keep).tempdir().unwrap();
    if keep {
        println!("keeping {}", tmp.path().display());
    }
    let (sc_dir, hf_dir, rust_dir) = (tmp.path().join("scenarios"), tmp.path().join("hf"), tmp.path().join("rust"));
    std::fs::create_dir_all(&sc_dir).unwrap();
    let mut rng = Rng(seed);
    let mut names = vec![];
    for i in 0..n {
        let name = format!("diff-s{seed}-{i:04}");
        let sc = random_scenario(&mut rng, &voc, &profile, &name, seed);
        std::fs::write(sc_dir.join(format!("{name}.json")), serde_json::to_string_pretty(&sc).unwrap() + "\n").unwrap();
        names.push(name);
        if std::env::var_os("CKPTSPEC_DIFFERENTIAL_DRAW").is_some() {
            println!("{}: launch {} resume {} resume.launch {}", names.last().unwrap(), sc["launch"], sc.get("resume").is_some(), sc["resume"]["launch"]);
        }
    }
    if std::env::var_os("CKPTSPEC_DIFFERENTIAL_DRAW").is_some() {
        return;
    }

    // HF in one python process, in parallel with the Rust runs.
    let log = std::fs::File::create(tmp.path().join("generate.log")).unwrap();
    let mut child = Command::new(&python)
        .arg(root.join("conformance/generate.py"))
        .args(["--hf", hf, "--scenarios"])
        .arg(&sc_dir)
        .arg("--out")
        .arg(&hf_dir)
        .current_dir(&root)
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("the generator starts");

    let mut rust_outcome: BTreeMap<String, Result<(), String>> = BTreeMap::new();
    for name in &names {
        let sc = Scenario::load(&sc_dir.join(format!("{name}.json"))).expect("a generated scenario is a valid file");
        let r = match runner::run_scenario(&sc, &profile, &rust_dir.join(name)) {
            Ok(()) => Ok(()),
            Err(RunError::NotImplemented(w)) => Err(format!("n/i: {w}")),
            Err(e) => Err(format!("tool error: {e}")),
        };
        rust_outcome.insert(name.clone(), r);
    }
    let rust_s = t0.elapsed().as_secs_f64();
    let status = child.wait().unwrap();
    let hf_log = std::fs::read_to_string(tmp.path().join("generate.log")).unwrap_or_default();
    assert!(status.success(), "the generator failed ({status}):\n{hf_log}");

    let failures = root.join("target/differential-failures").join(hf);
    let _ = std::fs::remove_dir_all(&failures);
    std::fs::create_dir_all(&failures).unwrap();
    let mut t = Tally::default();
    for name in &names {
        t.total += 1;
        let raw_sc: Value = serde_json::from_str(&std::fs::read_to_string(sc_dir.join(format!("{name}.json"))).unwrap()).unwrap();
        if raw_sc.get("launch").is_some() || raw_sc["resume"].get("launch").is_some() {
            t.launched += 1;
        }
        let expected = hf_dir.join(name);
        let hf_result = ckptspec::formats::pyjson::read_file(expected.join("result.json")).ok();
        t.resumed += hf_result.as_ref().is_some_and(|r| r.get("first").is_some()) as usize;
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(sc_dir.join(format!("{name}.json"))).unwrap()).unwrap();
        t.tokenizer += (raw.get("tokenizer") == Some(&json!(true))) as usize;
        *t.kinds.entry(raw["model"]["kind"].as_str().unwrap_or("regression").to_string()).or_default() += 1;
        let hf_error = hf_result
            .and_then(|r| r.get("error").cloned())
            .filter(|e| *e != ckptspec::formats::pyjson::PyJson::Null);
        let text = |e: &ckptspec::formats::pyjson::PyJson, k: &str| match e.get(k) {
            Some(ckptspec::formats::pyjson::PyJson::Str(s)) => s.clone(),
            _ => "?".into(),
        };
        match &hf_error {
            Some(e) => {
                t.hf_errors += 1;
                *t.outcomes.entry(text(e, "type")).or_default() += 1;
                let m: String = format!("{}: {}", text(e, "type"), text(e, "message")).chars().take(90).collect();
                *t.messages.entry(m).or_default() += 1;
            }
            None => *t.outcomes.entry("ok".into()).or_default() += 1,
        }
        match &rust_outcome[name] {
            Err(w) if w.starts_with("n/i") => {
                t.not_implemented.push(format!("{name}: {w}"));
                continue;
            }
            Err(w) => {
                t.tool_errors.push(format!("{name}: {w}"));
                std::fs::copy(sc_dir.join(format!("{name}.json")), failures.join(format!("{name}.json"))).unwrap();
                continue;
            }
            Ok(()) => {}
        }
        let rep = compare_run_dirs(&expected, &rust_dir.join(name)).unwrap();
        let clean = |st: Stage| rep.count(st) == 0;
        t.structure += clean(Stage::Structure) as usize;
        t.json_and_error += (clean(Stage::Json) && clean(Stage::Error)) as usize;
        t.tensors += clean(Stage::Tensor) as usize;
        if rep.is_clean() {
            t.full += 1;
        } else {
            let first = rep.first().unwrap();
            t.disagreements.push(format!("{name}: [{}] {first} ({} difference(s))", first.stage.label(), rep.differences.len()));
            std::fs::copy(sc_dir.join(format!("{name}.json")), failures.join(format!("{name}.json"))).unwrap();
            std::fs::write(failures.join(format!("{name}.diff.txt")), rep.render(&expected, &rust_dir.join(name), 200)).unwrap();
        }
    }
    let compared = t.total - t.not_implemented.len() - t.tool_errors.len();
    println!("\ndifferential test: {n} random scenarios (seed {seed}) through HF {hf} and the Rust trainer");
    println!("  HF raised an error in {} of them: {:?}", t.hf_errors, t.outcomes);
    println!("  contract v2: {} with a tokenizer, {} whose first run succeeded and a second Trainer resumed", t.tokenizer, t.resumed);
    println!("  contract v3: model kinds {:?}; {} under a launch of several processes (launch or resume.launch)", t.kinds, t.launched);
    let mut msgs: Vec<(&String, &usize)> = t.messages.iter().collect();
    msgs.sort_by(|a, b| b.1.cmp(a.1));
    for (m, c) in msgs.iter().take(8) {
        println!("    {c:3} x {m}");
    }
    println!("  compared:                       {compared} ({} not implemented in Rust, {} Rust tool errors)", t.not_implemented.len(), t.tool_errors.len());
    println!("  structural agreement:           {}/{compared} (same files and checkpoint folders)", t.structure);
    println!("  JSON and error agreement:       {}/{compared}", t.json_and_error);
    println!("  numeric agreement (tensors):    {}/{compared} (float class rel 1e-5, abs 1e-7)", t.tensors);
    println!("  full agreement:                 {}/{compared}", t.full);
    println!("  time: Rust {rust_s:.1}s, total {:.1}s", t0.elapsed().as_secs_f64());
    for (title, list) in [("not implemented", &t.not_implemented), ("tool errors", &t.tool_errors), ("disagreements (first difference)", &t.disagreements)] {
        if !list.is_empty() {
            println!("\n{title}:");
            for l in list {
                println!("  {l}");
            }
        }
    }
    let bad = t.disagreements.len() + t.tool_errors.len();
    if bad > 0 {
        println!("\nscenario files and diff reports: {}", failures.display());
    }
    assert_eq!(bad, 0, "{bad} of {n} random scenarios disagree with HF {hf}; see {}", failures.display());
}
