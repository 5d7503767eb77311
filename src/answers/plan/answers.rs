//! The answers of a plan, read from the run directory the executor left (its `result.json` and
//! `output/`) and the executor's own record of saves and deletions. Nothing here decides what HF
//! does: every fact comes from the executor's run; this only puts them into words a user asked
//! for (is my last step saved, what does load_best load, do I still need save_model(), what
//! would a resume pick).

use crate::formats::pyjson::{self, PyJson};
use crate::hf::args::{Args, Interval};
use crate::trainer::{DiskEvent, PlanTrace};
use crate::world::scenario::{ModelKind, Scenario};
use serde_json::{Map, Value};
use std::path::Path;

/// What `load_best_model_at_end` does at the end of `train()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadBest {
    /// `load_best_model_at_end` is off.
    Off,
    /// The weights of this checkpoint folder are loaded into the model.
    Loads(String),
    /// On, but no best checkpoint was recorded: nothing is loaded.
    NoBest,
    /// The best checkpoint named is not there: HF warns and keeps the current weights.
    Missing(String),
}

/// One line of the plan's timeline (`--json` `events`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub step: Option<u64>,
    /// log, evaluate, save, best, delete, stop, load_best, error.
    pub kind: &'static str,
    pub details: Map<String, Value>,
}

/// A resume scenario's (or `--resume-from`'s) first run and its resume, as the executor ran
/// them in one run directory (README, "plan"). The other answers are of the end: the resumed
/// run's, as result.json's top level is.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// What was asked: `last` (`resume_from_checkpoint=True`) or `checkpoint-N` (its path).
    pub from: String,
    /// The resumed Trainer's arguments over the first run's (`resume.args`), as written.
    pub args: Vec<(String, Value)>,
    /// The damage applied between the runs, in words, in order.
    pub damage: Vec<String>,
    /// Whether the second `train()` ran (it does when the first run succeeded).
    pub ran: bool,
    /// The first run's outcome.
    pub first_error: Option<(String, String)>,
    pub first_global_step: Option<u64>,
    pub first_max_steps: Option<i64>,
    /// The `checkpoint-N` folders the first run left (before the damage).
    pub first_checkpoints_left: Vec<String>,
    pub first_best_checkpoint: Option<String>,
    /// The folder the resume picked (None: none was found, HF's error says so).
    pub checkpoint: Option<String>,
    /// The step the resumed run's loop started from (None: it raised before).
    pub start_step: Option<u64>,
}

/// The answers for one version.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// HF's exception (type, message), if the config fails in this version.
    pub error: Option<(String, String)>,
    /// Whether the error struck during `train()` (a TrainerState exists) rather than before.
    pub error_in_training: bool,
    pub max_steps: Option<i64>,
    /// The step training ended at.
    pub global_step: Option<u64>,
    pub stop_reason: Option<String>,
    pub events: Vec<Event>,
    /// Every checkpoint save, in order (a step saved twice appears twice).
    pub saved_steps: Vec<u64>,
    /// `checkpoint-N` folders in output_dir at the end, by number (the main process's disk).
    pub checkpoints_left: Vec<String>,
    /// A launch with per-node disks: what each other node's output_dir holds at the end (node,
    /// folder, its files), by node and folder name.
    pub other_nodes: Vec<(usize, String, Vec<String>)>,
    /// The state's `best_model_checkpoint`, as a folder name.
    pub best_checkpoint: Option<String>,
    /// The state's `best_global_step` (4.50+): the step of the best evaluation, saved or not.
    pub best_step: Option<u64>,
    /// Whether the final step was saved as a checkpoint during training (None on error).
    pub final_step_saved: Option<bool>,
    pub load_best: LoadBest,
    /// The checkpoint folder left at the end that holds exactly the model's final weights.
    pub final_weights_at: Option<String>,
    /// None on error; see README ("Is my last step saved?").
    pub save_model_needed: Option<bool>,
    /// What `train(resume_from_checkpoint=True)` would pick in output_dir.
    pub resume_pick: Option<String>,
    /// Files written into output_dir itself (a scenario's `finally` save_model/save_state).
    pub output_files: Vec<String>,
    /// What the Trainer was handed (contract v3's model kinds).
    pub model_kind: ModelKind,
    /// The files of a checkpoint folder (the last one left, else none), by name.
    pub checkpoint_files: Vec<String>,
    /// Every assumed metric value, as (step, key).
    pub assumed_values: Vec<(u64, String)>,
    /// Whether any answer depends on an assumed value of the metric for best model.
    pub assumed: bool,
    /// What depends on the assumed metric values.
    pub depends_on_assumed: Vec<String>,
    /// The first run and the resume, when the plan resumes (None: one `train()` call).
    pub resume: Option<Resume>,
}

/// The number of a folder name as HF's `get_last_checkpoint` reads it (`^checkpoint\-(\d+)$`),
/// [`crate::answers::inspect::checkpoint::hf_step`].
pub fn checkpoint_number(name: &str) -> Option<u64> {
    crate::answers::inspect::checkpoint::hf_step(name)
}

/// HF's `get_last_checkpoint(output_dir)` on the plan's output folder
/// ([`crate::answers::inspect::resume::last_checkpoint`], shared with `ckptspec inspect`).
pub fn get_last_checkpoint(output_dir: &Path) -> Option<String> {
    let entries: Vec<(String, bool)> = std::fs::read_dir(output_dir)
        .map(|rd| rd.flatten().map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir())).collect())
        .unwrap_or_default();
    crate::answers::inspect::resume::last_checkpoint(entries.iter().map(|(n, d)| (n.as_str(), *d))).map(str::to_string)
}

fn checkpoint_folders(output_dir: &Path) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = std::fs::read_dir(output_dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    checkpoint_number(&name).map(|n| (n, name))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The folder name of a recorded checkpoint path (`output/checkpoint-8` -> `checkpoint-8`).
fn folder_of(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// Keys a plan does not show: no model was trained, so losses and gradient norms are not
/// meaningful (the learning rate is).
pub const NOT_MEANINGFUL: &[&str] = &["loss", "grad_norm", "train_loss", "total_flos"];

/// A PyJson value as JSON output: non-finite floats as the strings Python writes for them.
pub fn json_value(v: &PyJson) -> Value {
    match v {
        PyJson::Float(x) if !x.is_finite() => Value::String(pyjson::float_repr(*x)),
        PyJson::List(items) => Value::Array(items.iter().map(json_value).collect()),
        PyJson::Dict(d) => Value::Object(d.iter().map(|(k, x)| (k.clone(), json_value(x))).collect()),
        other => other.to_serde().unwrap_or_else(|_| Value::String(format!("{other:?}"))),
    }
}

/// The value shown for an assumed metric.
pub const ASSUMED: &str = "assumed";

/// Reads the answers from `run_dir` after the executor ran `sc` (with resolved `args`, None when
/// the version rejected them) and recorded `trace`.
pub fn read(run_dir: &Path, trace: &PlanTrace, args: Option<&Args>, sc: &Scenario) -> Result<Answers, String> {
    let result = pyjson::read_file(run_dir.join("result.json")).map_err(|e| format!("the plan's result.json: {e}"))?;
    let error = match result.get("error") {
        Some(PyJson::Dict(_)) => {
            let e = result.get("error").unwrap();
            let s = |k| match e.get(k) {
                Some(PyJson::Str(s)) => s.clone(),
                _ => String::new(),
            };
            Some((s("type"), s("message")))
        }
        _ => None,
    };
    let state = result.get("final_state").filter(|s| **s != PyJson::Null);
    let int = |k: &str| match state.and_then(|s| s.get(k)) {
        Some(PyJson::Int(i)) => Some(*i as i64),
        _ => None,
    };
    let max_steps = int("max_steps");
    let global_step = int("global_step").map(|g| g.max(0) as u64);
    let out = crate::world::launch::main_output(run_dir);
    let checkpoints_left: Vec<String> = checkpoint_folders(&out).into_iter().map(|(_, n)| n).collect();
    let best_checkpoint = match state.and_then(|s| s.get("best_model_checkpoint")) {
        Some(PyJson::Str(p)) => Some(folder_of(p)),
        _ => None,
    };
    let metric_key = args.and_then(|a| a.metric_to_check());
    let assumed = metric_key.as_ref().is_some_and(|k| trace.assumed.iter().any(|(_, a)| a == k));
    let mut saved_steps: Vec<u64> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            DiskEvent::Saved { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    // A save that raised partway (HF <= 4.46 decides the best inside _save_checkpoint, after
    // writing the weights) leaves its folder, unrecorded by the executor's trace. A folder that
    // was there before the run (the scenario's `earlier`) is no save of it.
    let before: Vec<&str> = sc.earlier.iter().filter_map(|e| e.path().strip_prefix("output/")?.split('/').next()).collect();
    let partial: Vec<u64> = match error {
        Some(_) => checkpoints_left
            .iter()
            .filter(|f| !before.contains(&f.as_str()))
            .filter_map(|f| checkpoint_number(f))
            .filter(|n| !saved_steps.contains(n))
            .collect(),
        None => vec![],
    };
    saved_steps.extend(&partial);
    // The last train() call's own saves: after a resume, a folder the first run wrote does not
    // hold the resumed run's weights.
    let split = trace.events.iter().position(|e| *e == DiskEvent::Resumed);
    let last_run_events = &trace.events[split.map_or(0, |k| k + 1)..];
    let mut last_run_saves: Vec<u64> = last_run_events
        .iter()
        .filter_map(|e| match e {
            DiskEvent::Saved { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    last_run_saves.extend(&partial);
    let resume = resume_answers(&result, trace, sc, split);

    let load_best = match args {
        Some(a) if a.load_best_model_at_end => match &best_checkpoint {
            None => LoadBest::NoBest,
            // Loaded before the save_total_limit=1 cleanup, which keeps the best: the folder
            // existed at load time exactly when it is there at the end.
            Some(b) if checkpoints_left.contains(b) => LoadBest::Loads(b.clone()),
            Some(b) => LoadBest::Missing(b.clone()),
        },
        _ => LoadBest::Off,
    };
    let stop_reason = match (error.is_some(), global_step, max_steps) {
        (true, _, _) | (_, None, _) => None,
        (false, Some(g), Some(m)) if g as i64 >= m => Some(format!("max_steps={m} reached")),
        (false, Some(_), _) if sc.early_stopping.is_some() => Some("EarlyStoppingCallback stopped training".to_string()),
        (false, Some(_), _) => Some("the last epoch ended".to_string()),
    };
    let (final_step_saved, final_weights_at, save_model_needed) = match (error.is_some(), global_step) {
        (false, Some(g)) => {
            let last = format!("checkpoint-{g}");
            // A resume that trains no step keeps the weights it loaded from checkpoint-g.
            let loaded_last = resume.as_ref().is_some_and(|r| r.start_step == Some(g) && r.checkpoint.as_deref() == Some(last.as_str()));
            let holds = last_run_saves.contains(&g) || loaded_last;
            let holder = match &load_best {
                LoadBest::Loads(b) => Some(b.clone()),
                _ => (holds && checkpoints_left.contains(&last)).then_some(last),
            };
            (Some(last_run_saves.contains(&g)), holder.clone(), Some(holder.is_none()))
        }
        _ => (None, None, None),
    };
    let mut output_files: Vec<String> = std::fs::read_dir(&out)
        .map(|rd| rd.flatten().filter(|e| e.path().is_file()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    output_files.sort();
    let mut checkpoint_files: Vec<String> = checkpoints_left
        .last()
        .and_then(|c| std::fs::read_dir(out.join(c)).ok())
        .map(|rd| rd.flatten().filter(|e| e.path().is_file()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    checkpoint_files.sort();

    let best_assumed = |v: &PyJson| if assumed { Value::String(ASSUMED.into()) } else { json_value(v) };
    let mut events = timeline_events(&result, state, trace, &best_assumed, &load_best, error.as_ref(), stop_reason.as_deref(), global_step, resume.as_ref());
    for n in &partial {
        let mut d = Map::new();
        d.insert("folder".into(), Value::String(format!("checkpoint-{n}")));
        d.insert("partial".into(), Value::Bool(true));
        let at = events.iter().position(|e| e.kind == "error").unwrap_or(events.len());
        events.insert(at, Event { step: Some(*n), kind: "save", details: d });
    }
    let depends_on_assumed = if assumed { depends_on_metrics(args, sc) } else { vec![] };
    Ok(Answers {
        error_in_training: error.is_some() && state.is_some(),
        error,
        max_steps,
        global_step,
        stop_reason,
        events,
        saved_steps,
        checkpoints_left,
        other_nodes: other_nodes(run_dir),
        best_checkpoint,
        best_step: int("best_global_step").map(|g| g.max(0) as u64),
        final_step_saved,
        load_best,
        final_weights_at,
        save_model_needed,
        resume_pick: get_last_checkpoint(&out),
        output_files,
        model_kind: sc.model.kind,
        checkpoint_files,
        assumed_values: trace.assumed.clone(),
        assumed,
        depends_on_assumed,
        resume,
    })
}

/// What the other nodes' disks hold (`node-K/output`, K >= 1): each folder and its files.
fn other_nodes(run_dir: &Path) -> Vec<(usize, String, Vec<String>)> {
    let mut v = vec![];
    for node in 1.. {
        let out = run_dir.join(format!("node-{node}")).join("output");
        if !run_dir.join(format!("node-{node}")).is_dir() {
            break;
        }
        let mut folders: Vec<String> = std::fs::read_dir(&out)
            .map(|rd| rd.flatten().filter(|e| e.path().is_dir()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        folders.sort_by_key(|f| (checkpoint_number(f).unwrap_or(u64::MAX), f.clone()));
        for f in folders {
            let mut files: Vec<String> = std::fs::read_dir(out.join(&f))
                .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            files.sort();
            v.push((node, f, files));
        }
    }
    v
}

/// The first run and the resume of a plan that resumes, from result.json's `first` and the
/// executor's trace; `split`: the position of [`DiskEvent::Resumed`] in the trace.
fn resume_answers(result: &PyJson, trace: &PlanTrace, sc: &Scenario, split: Option<usize>) -> Option<Resume> {
    let spec = sc.resume.as_ref()?;
    // Without `first`, the first run raised and its outcome is result.json's top level.
    let first = result.get("first").unwrap_or(result);
    let first_error = match first.get("error") {
        Some(e @ PyJson::Dict(_)) => {
            let s = |k| match e.get(k) {
                Some(PyJson::Str(s)) => s.clone(),
                _ => String::new(),
            };
            Some((s("type"), s("message")))
        }
        _ => None,
    };
    let st = first.get("final_state").filter(|s| **s != PyJson::Null);
    let int = |k: &str| match st.and_then(|s| s.get(k)) {
        Some(PyJson::Int(i)) => Some(*i as i64),
        _ => None,
    };
    // The first run's folders: its saves less its deletions (the damage comes after).
    let mut left: Vec<(u64, String)> = vec![];
    for e in &trace.events[..split.unwrap_or(trace.events.len())] {
        match e {
            DiskEvent::Saved { step, folder, .. } if !left.iter().any(|(_, f)| f == folder) => left.push((*step, folder.clone())),
            DiskEvent::Deleted { folder, .. } => left.retain(|(_, f)| f != folder),
            _ => {}
        }
    }
    left.sort();
    let damage = spec
        .damage
        .iter()
        .map(|d| match d {
            crate::world::scenario::Damage::Remove { remove } => format!("remove {remove}"),
            crate::world::scenario::Damage::Truncate { truncate, bytes } => format!("truncate {truncate} to {bytes} bytes"),
            crate::world::scenario::Damage::Reshard { reshard, max_shard_size } => format!("reshard {reshard}'s weights into shards of at most {max_shard_size} bytes"),
        })
        .collect();
    let r = trace.resume.clone().unwrap_or_default();
    Some(Resume {
        from: spec.from.clone(),
        args: spec.args.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        damage,
        ran: trace.resume.is_some(),
        first_error,
        first_global_step: int("global_step").map(|g| g.max(0) as u64),
        first_max_steps: int("max_steps"),
        first_checkpoints_left: left.into_iter().map(|(_, f)| f).collect(),
        first_best_checkpoint: match st.and_then(|s| s.get("best_model_checkpoint")) {
            Some(PyJson::Str(p)) => Some(folder_of(p)),
            _ => None,
        },
        checkpoint: r.checkpoint.as_deref().map(folder_of),
        start_step: r.start_step,
    })
}

/// What the config uses that reads the metric for best model.
fn depends_on_metrics(args: Option<&Args>, sc: &Scenario) -> Vec<String> {
    let Some(a) = args else { return vec![] };
    let m = a.metric_to_check().unwrap_or_default();
    let mut v = vec![format!("which checkpoint is best ({m})")];
    if a.load_best_model_at_end {
        v.push("what load_best_model_at_end loads, hence the final weights".into());
    }
    if a.save_total_limit.is_some() {
        v.push("which folder rotation protects as the best (save_total_limit)".into());
    }
    if a.save_strategy == Interval::Best {
        v.push("which evaluations save (save_strategy=\"best\")".into());
    }
    if sc.early_stopping.is_some() {
        v.push("when early stopping ends training".into());
    }
    if matches!(a.lr_scheduler_type.as_str(), "reduce_lr_on_plateau" | "greedy") {
        v.push(format!("the learning rate ({} steps on {m})", a.lr_scheduler_type));
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn timeline_events(
    result: &PyJson,
    state: Option<&PyJson>,
    trace: &PlanTrace,
    best_value: &dyn Fn(&PyJson) -> Value,
    load_best: &LoadBest,
    error: Option<&(String, String)>,
    stop_reason: Option<&str>,
    global_step: Option<u64>,
    resume: Option<&Resume>,
) -> Vec<Event> {
    let has_best_step = state.and_then(|s| s.get("best_global_step")).is_some();
    let history = |st: Option<&PyJson>| match st.and_then(|s| s.get("log_history")) {
        Some(PyJson::List(h)) => h.clone(),
        _ => vec![],
    };
    let mut prev_best: Option<Map<String, Value>> = None;
    let mut events = match (resume, trace.resume.as_ref()) {
        // Chronological: the first run (its whole history), the resume, then the resumed run's
        // own entries (its log_history starts with the checkpoint's, already shown).
        (Some(r), Some(rt)) => {
            let split = trace.events.iter().position(|e| *e == DiskEvent::Resumed).unwrap_or(trace.events.len());
            let first_state = result.get("first").and_then(|f| f.get("final_state"));
            let assumed = trace.assumed.split_at(rt.assumed_before.min(trace.assumed.len()));
            let mut v = segment(&history(first_state), &trace.events[..split], assumed.0, best_value, has_best_step, &mut prev_best);
            v.push(resume_event(r));
            // Nothing is logged before the loop: a resume that raised there has no entries.
            let own: Vec<PyJson> = match rt.start_step {
                Some(_) => history(state).into_iter().skip(rt.inherited).collect(),
                None => vec![],
            };
            v.extend(segment(&own, &trace.events[split + 1..], assumed.1, best_value, has_best_step, &mut prev_best));
            v
        }
        _ => segment(&history(state), &trace.events, &trace.assumed, best_value, has_best_step, &mut prev_best),
    };
    if let Some(reason) = stop_reason {
        let mut d = Map::new();
        d.insert("reason".into(), Value::String(reason.into()));
        events.push(Event { step: global_step, kind: "stop", details: d });
    }
    match load_best {
        LoadBest::Loads(f) | LoadBest::Missing(f) if error.is_none() => {
            let mut d = Map::new();
            d.insert("folder".into(), Value::String(f.clone()));
            d.insert("loaded".into(), Value::Bool(matches!(load_best, LoadBest::Loads(_))));
            events.push(Event { step: global_step, kind: "load_best", details: d });
        }
        _ => {}
    }
    if let Some((t, m)) = error {
        let mut d = Map::new();
        d.insert("type".into(), Value::String(t.clone()));
        d.insert("message".into(), Value::String(m.clone()));
        events.push(Event { step: global_step, kind: "error", details: d });
    }
    events
}

/// The `resume` event: what the second `train()` was asked and what it picked.
fn resume_event(r: &Resume) -> Event {
    let mut d = Map::new();
    d.insert("from".into(), Value::String(r.from.clone()));
    d.insert("args".into(), Value::Object(r.args.iter().cloned().collect()));
    d.insert("damage".into(), Value::Array(r.damage.iter().cloned().map(Value::String).collect()));
    d.insert("first_run_step".into(), json_u64(r.first_global_step));
    d.insert("checkpoint".into(), r.checkpoint.clone().map(Value::String).unwrap_or(Value::Null));
    d.insert("start_step".into(), json_u64(r.start_step));
    Event { step: r.start_step, kind: "resume", details: d }
}

fn json_u64(v: Option<u64>) -> Value {
    v.map(Value::from).unwrap_or(Value::Null)
}

/// One `train()` call's events: its log_history entries (`hist`) and its saves and deletions
/// (`disk`), per step: the logs and evaluations first, then the saves, the best and deletions.
/// `assumed`: the (step, key) of its assumed metric values.
fn segment(
    hist: &[PyJson],
    disk: &[DiskEvent],
    assumed: &[(u64, String)],
    best_value: &dyn Fn(&PyJson) -> Value,
    has_best_step: bool,
    prev_best: &mut Option<Map<String, Value>>,
) -> Vec<Event> {
    use std::collections::BTreeMap;
    let mut at: BTreeMap<u64, (Vec<Event>, Vec<Event>)> = BTreeMap::new();
    let assumed_at = |step: u64, key: &str| assumed.iter().any(|(s, k)| *s == step && k == key);
    for e in hist {
        let (PyJson::Dict(d), Some(PyJson::Int(step))) = (e, e.get("step")) else { continue };
        let step = (*step).max(0) as u64;
        if d.iter().any(|(k, _)| k == "train_loss") {
            continue; // the end-of-training summary: the stop event stands for it
        }
        let is_eval = d.iter().any(|(k, _)| k.starts_with("eval_"));
        let mut details = Map::new();
        if let Some(ep) = e.get("epoch") {
            details.insert("epoch".into(), json_value(ep));
        }
        let shown = d.iter().filter(|(k, _)| !crate::hf::state::is_log_context(k) && !crate::hf::state::is_volatile(k));
        if is_eval {
            let mut metrics = Map::new();
            for (k, v) in shown {
                let v = if assumed_at(step, k) { Value::String(ASSUMED.into()) } else { json_value(v) };
                metrics.insert(k.clone(), v);
            }
            details.insert("metrics".into(), Value::Object(metrics));
        } else {
            for (k, v) in shown.filter(|(k, _)| !NOT_MEANINGFUL.contains(&k.as_str())) {
                details.insert(k.clone(), json_value(v));
            }
        }
        let kind = if is_eval { "evaluate" } else { "log" };
        at.entry(step).or_default().0.push(Event { step: Some(step), kind, details });
    }
    for ev in disk {
        match ev {
            DiskEvent::Saved { step, folder, best } => {
                let slot = &mut at.entry(*step).or_default().1;
                let mut d = Map::new();
                d.insert("folder".into(), Value::String(folder.clone()));
                slot.push(Event { step: Some(*step), kind: "save", details: d });
                let mut b = Map::new();
                b.insert("best_metric".into(), best.best_metric.as_ref().map(best_value).unwrap_or(Value::Null));
                b.insert(
                    "best_model_checkpoint".into(),
                    best.best_model_checkpoint.as_deref().map(|p| Value::String(folder_of(p))).unwrap_or(Value::Null),
                );
                if has_best_step {
                    b.insert("best_global_step".into(), best.best_global_step.map(Value::from).unwrap_or(Value::Null));
                }
                let tracked = b.values().any(|v| !v.is_null());
                if tracked && prev_best.as_ref() != Some(&b) {
                    slot.push(Event { step: Some(*step), kind: "best", details: b.clone() });
                }
                *prev_best = Some(b);
            }
            DiskEvent::Deleted { step, folder, why } => {
                let mut d = Map::new();
                d.insert("folder".into(), Value::String(folder.clone()));
                d.insert("rule".into(), Value::String(why.to_string()));
                at.entry(*step).or_default().1.push(Event { step: Some(*step), kind: "delete", details: d });
            }
            // The segments are split at it (a resume's `resume` event stands for it).
            DiskEvent::Resumed => {}
        }
    }
    at.into_values().flat_map(|(a, b)| a.into_iter().chain(b)).collect()
}
