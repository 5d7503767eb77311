//! The plan replayed from the run's own arguments and logged metrics ([`crate::trainer::plan`]:
//! the executor without tensor math, into a temporary run directory), compared folder by folder
//! with what the output folder holds.
//!
//! What the replay is given, and what is inferred:
//! * **Arguments**: the non-default keyword arguments of the run's `training_args.bin`
//!   ([`super::training_args::TrainingArgsFile::kwargs`]), those the executor models
//!   ([`crate::hf::args::modelled`]); the runner-owned ones (`output_dir`, `logging_dir`,
//!   `report_to`, `disable_tqdm`) and the unmodelled rest are left out and listed. An optimizer
//!   the executor does not model is replayed as `adamw_torch`: a plan does no tensor math, and
//!   the optimizer does not change which folders exist.
//! * **Metrics**: every evaluation entry of the newest state's `log_history` (one per
//!   `evaluate()` call and eval set, in order) as [`PlanMetrics::Given`]; evaluations past the
//!   logged ones get assumed values, which is why nothing past the horizon (below) is compared.
//!   Values travel as Python's JSON has them (a NaN `eval_loss` included).
//! * **Data**: the train set's size is inferred from the states: with `GA` the gradient
//!   accumulation steps, a state at `global_step` g with `epoch` e gives `round(g * GA / e)`
//!   batches per epoch (exact without accumulation: HF's epoch is `k + j / batches`); the most
//!   common value over the states wins, times `per_device_train_batch_size` rows. Without any
//!   state past step 0, `max_steps` steps make one epoch. When that size does not reproduce
//!   the run (below), nearby sizes are tried (up to 64): with accumulation, releases from 4.46
//!   size the last update of an epoch by the row count. Eval sets come from the prefixes of the
//!   logged evaluations (`eval_loss` one set, `eval_<name>_loss` a dict of sets), 16 rows each
//!   (their size changes no folder). `EarlyStoppingCallback` comes from `stateful_callbacks`
//!   (4.41+; before, it leaves no trace, and a run it stopped just ends before the plan).
//!   The replay checks its own inference: its `max_steps` and the epoch of every checkpoint
//!   both have must equal the run's, else nothing is compared.
//! * **Horizon**: the newest step the folder knows (its newest state, or its newest checkpoint
//!   name). Plan events after it are not compared; the end-of-train `save_total_limit=1` cleanup
//!   only when the run's end is known (a run directory's `result.json`, or `save_state()`'s
//!   `trainer_state.json`) and the run went as far as the plan.

use crate::formats::pyjson::PyJson;
use crate::hf::profile::Profile;
use crate::trainer::{self, DiskEvent, PlanMetrics};
use crate::world::scenario::{DataSpec, EarlyStoppingSpec, EvalSpec, ModelSpec, Scenario};
use serde_json::{Map, Value as J};
use std::path::PathBuf;

/// What the replay needs from the folder.
pub struct Input<'a> {
    pub profile: &'a Profile,
    pub kwargs: &'a Map<String, J>,
    /// The run's newest state.
    pub state: &'a PyJson,
    /// `(global_step, epoch)` of every state of the run (checkpoints and the newest).
    pub observations: Vec<(u64, f64)>,
    /// The run's end is known (result.json final_state or save_state's trainer_state.json).
    pub finished: bool,
    pub horizon: u64,
    /// The run's HF-named checkpoint folders: (name, step, epoch in its state).
    pub actual: Vec<(String, u64, Option<f64>)>,
    /// The run's error, as result.json records it.
    pub run_error: Option<String>,
}

/// A way the folder deviates from the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Deviation {
    pub kind: &'static str,
    pub folder: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Replayed and compared.
    pub compared: bool,
    /// Why not, when not.
    pub skipped: Option<String>,
    /// What was inferred or left out (plain sentences).
    pub inferred: Vec<String>,
    /// The plan's save steps up to the horizon, and its deletions: (step, folder, why).
    pub saves: Vec<u64>,
    pub deletions: Vec<(u64, String, String)>,
    /// The plan's folders at the horizon.
    pub folders: Vec<String>,
    /// The plan's final `best_model_checkpoint` folder name, and whether the plan has it.
    pub best: Option<(String, bool)>,
    /// The error the plan ends in (`Type: message`).
    pub error: Option<String>,
    pub deviations: Vec<Deviation>,
}

const RUNNER_OWNED: [&str; 4] = ["output_dir", "logging_dir", "report_to", "disable_tqdm"];

fn jnum(v: &PyJson) -> Option<f64> {
    match v {
        PyJson::Int(i) => Some(*i as f64),
        PyJson::Float(f) => Some(*f),
        _ => None,
    }
}

/// The evaluation entries of a log_history: (set name or None, metrics).
fn evaluations(state: &PyJson) -> Result<Vec<(Option<String>, Vec<(String, PyJson)>)>, String> {
    let Some(PyJson::List(h)) = state.get("log_history") else { return Ok(vec![]) };
    let mut out = vec![];
    for e in h {
        let PyJson::Dict(d) = e else { continue };
        let Some(prefix) = d.iter().find_map(|(k, _)| {
            let p = k.strip_suffix("_runtime")?;
            (p == "eval" || p.starts_with("eval_")).then(|| p.to_string())
        }) else {
            continue;
        };
        let set = prefix.strip_prefix("eval_").map(str::to_string);
        let m: Vec<(String, PyJson)> = d
            .iter()
            .filter(|(k, _)| !(k == "epoch" || k == "step" || k == "num_input_tokens_seen" || k.ends_with("_runtime") || k.ends_with("_per_second")))
            .cloned()
            .collect();
        out.push((set, m));
    }
    Ok(out)
}

/// Batches per epoch from the states (see the module doc).
fn batches_per_epoch(obs: &[(u64, f64)], ga: u64) -> Option<u64> {
    let mut counts: Vec<(u64, usize)> = vec![];
    for &(g, e) in obs {
        if g == 0 || e <= 0.0 || !e.is_finite() {
            continue;
        }
        let n = ((g * ga) as f64 / e).round();
        if n < 1.0 || n > 1e9 {
            continue;
        }
        let n = n as u64;
        match counts.iter_mut().find(|(v, _)| *v == n) {
            Some((_, c)) => *c += 1,
            None => counts.push((n, 1)),
        }
    }
    counts.iter().max_by_key(|(v, c)| (*c, *v)).map(|(v, _)| *v)
}

fn get_i64(m: &Map<String, J>, profile: &Profile, k: &str) -> Option<i64> {
    m.get(k).or_else(|| profile.default_of(k)).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh temporary folder (removed by the guard).
struct TempDir(PathBuf);
impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let p = crate::harness::runner::scratch_root().join(format!("ckptspec-inspect-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Replays and compares. Never an error: what cannot be replayed is said in `skipped`.
pub fn replay(input: &Input) -> Outcome {
    let mut out = Outcome::default();
    match run(input, &mut out) {
        Ok(()) => out.compared = true,
        Err(why) => out.skipped = Some(why),
    }
    out
}

fn run(input: &Input, out: &mut Outcome) -> Result<(), String> {
    let p = input.profile;
    // Arguments.
    let mut args = Map::new();
    let mut left_out = vec![];
    for (k, v) in input.kwargs {
        if RUNNER_OWNED.contains(&k.as_str()) {
            continue;
        }
        // `__post_init__` sets do_eval for any eval strategy but "no": derived, not given.
        let evaluates = input.kwargs.get("eval_strategy").or(input.kwargs.get("evaluation_strategy")).and_then(J::as_str).is_some_and(|s| s != "no");
        if k == "do_eval" && v == &J::Bool(true) && evaluates {
            continue;
        }
        if crate::hf::args::is_modelled(k, v) {
            args.insert(k.clone(), v.clone());
        } else if k == "optim" {
            out.inferred.push(format!("optim {v} is replayed as adamw_torch (a plan does no optimizer math; the folders do not depend on it)"));
            args.insert(k.clone(), J::String("adamw_torch".into()));
        } else {
            left_out.push(k.clone());
        }
    }
    if !left_out.is_empty() {
        out.inferred.push(format!("not replayed (the executor does not model them): {}", left_out.join(", ")));
    }

    // Data.
    let ga = get_i64(&args, p, "gradient_accumulation_steps").unwrap_or(1).max(1) as u64;
    let bs = get_i64(&args, p, "per_device_train_batch_size").unwrap_or(8).max(1) as u64;
    let max_steps = get_i64(&args, p, "max_steps").unwrap_or(-1);
    let (batches, how) = match batches_per_epoch(&input.observations, ga) {
        Some(n) => (n, "batches per epoch from global_step and epoch of the states"),
        None if max_steps > 0 => (max_steps as u64 * ga, "no state past step 0: one epoch of max_steps steps assumed"),
        None => return Err("no state past step 0 and no max_steps: the train set's size cannot be inferred".into()),
    };
    let evals = evaluations(input.state)?;
    let mut sets: Vec<Option<String>> = vec![];
    for (s, _) in &evals {
        if !sets.contains(s) {
            sets.push(s.clone());
        }
    }
    let eval = if sets.iter().any(Option::is_some) {
        let mut m = Map::new();
        for s in sets.iter().flatten() {
            m.insert(s.clone(), J::from(16));
        }
        EvalSpec::Named(m)
    } else {
        EvalSpec::Single(16)
    };
    let early = match input.state.get("stateful_callbacks").and_then(|c| c.get("EarlyStoppingCallback")) {
        Some(PyJson::Dict(d)) => {
            let a = PyJson::Dict(d.clone());
            let args = a.get("args");
            let patience = args.and_then(|x| x.get("early_stopping_patience")).and_then(jnum).unwrap_or(1.0) as i64;
            let threshold = args.and_then(|x| x.get("early_stopping_threshold")).and_then(jnum).unwrap_or(0.0);
            out.inferred.push(format!("EarlyStoppingCallback(patience={patience}, threshold={threshold}) from stateful_callbacks"));
            Some(EarlyStoppingSpec { patience, threshold })
        }
        Some(PyJson::List(_)) => return Err("several EarlyStoppingCallbacks in stateful_callbacks: not replayed".into()),
        _ => None,
    };
    let mut sc = Scenario {
        name: "inspect-replay".into(),
        summary: "the run replayed from its own arguments and logged metrics".into(),
        args,
        model: ModelSpec::default(),
        data: DataSpec { train: (batches * bs) as usize, eval },
        metrics: None,
        early_stopping: early,
        finally_calls: vec![],
        tokenizer: false,
        resume: None,
        launch: None,
        signal: None,
        train: true,
        earlier: vec![],
        control: vec![],
    };
    let given: Vec<Vec<(String, PyJson)>> = evals.into_iter().map(|(_, m)| m).collect();

    // Candidate train sizes: the inferred batches times the batch size first; where that does
    // not reproduce the run (with gradient accumulation, some releases size the last update by
    // the row count, not the batch count), every size from batches-GA to batches+GA batches,
    // each with a full last batch first.
    let mut candidates = vec![batches * bs];
    for d in 0..=ga {
        for n in [batches.saturating_sub(d), batches + d] {
            for k in 0..bs {
                let r = (n * bs).saturating_sub(k);
                if n > 0 && r > (n - 1) * bs && !candidates.contains(&r) {
                    candidates.push(r);
                }
            }
        }
    }
    candidates.truncate(MAX_TRIES);
    let tried = candidates.len();
    let mut first_mismatch: Option<String> = None;
    let mut found = None;
    for rows in candidates {
        sc.data.train = rows as usize;
        match attempt(input, &sc, &given, out)? {
            Ok(a) => {
                found = Some((rows, a));
                break;
            }
            Err(m) => {
                first_mismatch.get_or_insert(m);
            }
        }
    }
    let Some((rows, Attempt { tmp, trace, plan_state, cut })) = found else {
        return Err(format!("{} (and no other of {tried} train sizes near it reproduces the run)", first_mismatch.unwrap_or_default()));
    };
    out.inferred.push(format!("{rows} train rows of batch {bs} ({} batches per epoch; {how})", rows.div_ceil(bs)));
    out.inferred.push(format!("{} logged evaluation(s) feed the replay's evaluate() calls", given.len()));
    let plan_out = tmp.0.join("output");

    // The plan's folders at the horizon.
    let h = cut;
    let plan_end = match plan_state.get("global_step").and_then(jnum) {
        Some(g) => g as u64,
        None => 0,
    };
    let stopped_early = input.finished && input.horizon < plan_end;
    if stopped_early && input.run_error.is_none() {
        out.inferred.push(format!(
            "the run ended at step {h}, the replay runs on to step {plan_end}: a callback the replay does not know stopped it (EarlyStoppingCallback before 4.41 leaves no trace); compared up to step {h}"
        ));
    }
    let mut folders: Vec<String> = vec![];
    let mut deleted: Vec<(u64, String, String)> = vec![];
    let mut end_cleanup_skipped = false;
    for ev in &trace.events {
        match ev {
            DiskEvent::Saved { step, folder, .. } if *step <= h => {
                if !folders.contains(folder) {
                    folders.push(folder.clone());
                }
                if !out.saves.contains(step) {
                    out.saves.push(*step);
                }
            }
            DiskEvent::Deleted { step, folder, why } if *step <= h => {
                let end = *why == trainer::DeleteRule::EndOfTrainCleanup;
                if end && (!input.finished || stopped_early) {
                    end_cleanup_skipped = true;
                    continue;
                }
                folders.retain(|f| f != folder);
                deleted.push((*step, folder.clone(), why.to_string()));
            }
            _ => {}
        }
    }
    // A folder the plan left without a save event: a save the replay's error interrupted (as the
    // run's own error may have).
    if let Ok(rd) = std::fs::read_dir(&plan_out) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(step) = super::checkpoint::hf_step(&name) {
                if step <= h && e.path().is_dir() && !folders.contains(&name) && !deleted.iter().any(|(_, f, _)| *f == name) {
                    folders.push(name);
                }
            }
        }
    }
    if end_cleanup_skipped {
        out.inferred.push("the end-of-train save_total_limit=1 cleanup is not compared (the run's end is not known here)".into());
    }
    out.deletions = deleted.clone();
    out.folders = folders.clone();
    if let Some(PyJson::Str(b)) = plan_state.get("best_model_checkpoint") {
        let name = b.rsplit('/').next().unwrap_or(b).to_string();
        let has = plan_out.join(&name).is_dir();
        out.best = Some((name, has));
    }

    // Compare.
    let actual: Vec<&str> = input.actual.iter().map(|(n, _, _)| n.as_str()).collect();
    let limit = input.kwargs.get("save_total_limit").and_then(J::as_i64);
    for f in &folders {
        if actual.contains(&f.as_str()) {
            continue;
        }
        if stopped_early && limit == Some(1) {
            continue; // the run's own end cleanup, at a step the plan does not end on
        }
        out.deviations.push(Deviation {
            kind: "missing",
            folder: Some(f.clone()),
            message: format!("{f} should exist: the run's arguments save it and nothing deletes it by step {h}, but it is not in the folder"),
        });
    }
    for (name, step, _) in &input.actual {
        if folders.contains(name) || *step > h {
            continue;
        }
        let msg = match deleted.iter().find(|(_, f, _)| f == name) {
            Some((s, _, why)) => format!(
                "{name} should have been deleted at step {s} ({why}{}): a crash between a save and its rotation, or another run, left it",
                limit.map(|l| format!(", save_total_limit={l}")).unwrap_or_default()
            ),
            None => format!("{name} is not a checkpoint the run's arguments write (its saves: {}): another run or changed arguments wrote it", list(&out.saves)),
        };
        out.deviations.push(Deviation { kind: if msg.contains("deleted") { "not-rotated" } else { "unexpected" }, folder: Some(name.clone()), message: msg });
    }
    Ok(())
}

/// The most train sizes one replay tries (see the candidates in [`run`]).
const MAX_TRIES: usize = 64;

/// One plan run that reproduces the run's max_steps and epochs.
struct Attempt {
    tmp: TempDir,
    trace: trainer::PlanTrace,
    plan_state: PyJson,
    /// The last step compared.
    cut: u64,
}

/// Runs the plan once. `Err`: the replay cannot be compared at all; `Ok(Err)`: this train size
/// does not reproduce the run (why).
fn attempt(input: &Input, sc: &Scenario, given: &[Vec<(String, PyJson)>], out: &mut Outcome) -> Result<Result<Attempt, String>, String> {
    let tmp = TempDir::new().map_err(|e| format!("temporary folder: {e}"))?;
    let trace = trainer::plan(sc, input.profile, &tmp.0, PlanMetrics::Given(given.to_vec())).map_err(|e| format!("the replay did not run: {e}"))?;
    let result = crate::formats::pyjson::read_file(tmp.0.join("result.json")).map_err(|e| format!("the replay's result.json: {e}"))?;
    out.error = None;
    if let Some(PyJson::Dict(e)) = result.get("error") {
        let g = |k: &str| e.iter().find(|(kk, _)| kk == k).and_then(|(_, v)| if let PyJson::Str(s) = v { Some(s.clone()) } else { None }).unwrap_or_default();
        out.error = Some(format!("{}: {}", g("type"), g("message")));
    }
    let plan_state = result.get("final_state").cloned().unwrap_or(PyJson::Null);
    let kind = |e: &str| e.split(':').next().unwrap_or("").to_string();
    // Steps up to `cut` are compared: the horizon, or the steps before it when the run ended in
    // an error at the horizon that the replay does not reproduce (it may have struck before
    // that step's save).
    let mut cut = input.horizon;
    match (&input.run_error, &out.error) {
        (None, Some(pe)) => return Err(format!("the replay raises {pe}, where the run did not: the arguments as saved do not replay (4.31 writes resolved ratio intervals back into them)")),
        (Some(re), pe) if pe.as_deref().map(kind) != Some(kind(re)) => {
            let note = format!("the run ended in {re}, the replay {}: compared before step {}", pe.as_deref().unwrap_or("without an error"), input.horizon);
            if !out.inferred.contains(&note) {
                out.inferred.push(note);
            }
            cut = input.horizon.saturating_sub(1);
        }
        _ => {}
    }
    // Self-check: the inferred data must reproduce the run's max_steps and epochs.
    let (rm, pm) = (input.state.get("max_steps").and_then(jnum), plan_state.get("max_steps").and_then(jnum));
    if let (Some(a), Some(b)) = (rm, pm) {
        if a != b && b != 0.0 {
            return Ok(Err(format!("the replay's max_steps is {b}, the run's {a}: its arguments or data size were not inferred right")));
        }
    }
    let plan_out = tmp.0.join("output");
    for (name, _, epoch) in &input.actual {
        let Some(e) = epoch else { continue };
        let Ok(PyJson::Dict(d)) = crate::formats::pyjson::read_file(plan_out.join(name).join("trainer_state.json")) else { continue };
        if let Some(pe) = d.iter().find(|(k, _)| k == "epoch").and_then(|(_, v)| jnum(v)) {
            if (pe - e).abs() > 1e-9 * e.abs().max(1.0) {
                return Ok(Err(format!("the replay's {name} is at epoch {pe}, the run's at {e}: the inferred data size does not reproduce the run")));
            }
        }
    }
    Ok(Ok(Attempt { tmp, trace, plan_state, cut }))
}

pub(crate) fn list(v: &[u64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

