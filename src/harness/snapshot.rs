//! A normalized, spec-like view of a run directory: what happened at each step (logged,
//! evaluated, saved, best changed), which checkpoints are left at the end, the best checkpoint,
//! or the error. Built from the run directory's own data only (no policy is consulted), so it
//! can describe a golden folder; deterministic (wall-clock keys are left out, loss-like floats
//! rounded to 5 significant digits, scripted values shown exactly).
//!
//! Sources: `result.json` (error, `final_state` and its `log_history`), the `checkpoint-N`
//! folders under `output/` and each one's `trainer_state.json`. A checkpoint counts as saved
//! when its folder is left at the end or when any trainer_state.json names it as
//! `best_model_checkpoint`; a deletion is inferred as "saved but not present at the end" (when
//! it happened is not recorded, and a checkpoint deleted without ever being named is not seen).
use crate::formats::pyjson::{self, PyJson};
use crate::harness::diff::is_float_math;
use crate::hf::state::is_volatile;
use crate::policy::rotation::step_of;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

pub const HEADER: &str = "\
Read from the run directory alone: logs and evaluations from final_state.log_history; saves
are the checkpoint-N folders left in output/ plus any checkpoint a trainer_state.json names as
best_model_checkpoint; a deletion is inferred as \"saved but not present at the end\" (when it
happened is not recorded; a checkpoint deleted without ever being named is not visible); best
changes come from each saved checkpoint's trainer_state.json. Runtimes and throughputs are
omitted; float-math values (losses, lr, grad_norm, best_metric) are rounded to 5 significant digits.";

/// A float rounded to 5 significant digits, printed as Python would print that value.
pub fn round5(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return pyjson::float_repr(x);
    }
    let r: f64 = format!("{x:.4e}").parse().unwrap_or(x);
    pyjson::float_repr(r)
}

fn show(key: &str, v: &PyJson) -> String {
    match v {
        PyJson::Float(x) if is_float_math(key) => round5(*x),
        PyJson::Float(x) => pyjson::float_repr(*x),
        PyJson::Str(s) => format!("{s:?}"),
        other => pyjson::dumps(other, &pyjson::DumpOptions::default()).unwrap_or_else(|_| format!("{other:?}")),
    }
}

fn fields(entry: &[(String, PyJson)], skip: &[&str]) -> String {
    entry
        .iter()
        .filter(|(k, _)| !is_volatile(k) && !skip.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", show(k, v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn num(v: Option<&PyJson>) -> Option<f64> {
    match v? {
        PyJson::Int(i) => Some(*i as f64),
        PyJson::Float(f) => Some(*f),
        _ => None,
    }
}

fn short(v: Option<&PyJson>) -> String {
    match v {
        None => "-".into(),
        Some(v) => show("", v),
    }
}

/// The best-tracking fields of a state, as one line (`None` when nothing is tracked yet).
fn best_line(state: &PyJson) -> Option<String> {
    let metric = state.get("best_metric").filter(|v| **v != PyJson::Null);
    let ckpt = state.get("best_model_checkpoint").filter(|v| **v != PyJson::Null);
    let step = state.get("best_global_step").filter(|v| **v != PyJson::Null);
    if metric.is_none() && ckpt.is_none() && step.is_none() {
        return None;
    }
    // Rounded like the other float-math values: a loss's last bits depend on the CPU (the same
    // torch rounds differently on another machine); a scripted metric has fewer digits.
    let mut s = match metric {
        Some(PyJson::Float(x)) => format!("best_metric={}", round5(*x)),
        other => format!("best_metric={}", short(other)),
    };
    if state.get("best_global_step").is_some() {
        write!(s, " best_global_step={}", short(step)).unwrap();
    }
    write!(s, " best_model_checkpoint={}", short(ckpt)).unwrap();
    Some(s)
}

fn list_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).filter(|e| e.path().is_file()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn checkpoint_name(p: &str) -> Option<String> {
    step_of(p).map(|s| format!("checkpoint-{s}"))
}

/// The header of a view whose saves and deletions come from the executor's own record.
pub const TRACED_HEADER: &str = "\
Logs and evaluations from final_state.log_history; saves, deletions (and the rule that deleted)
and the best right after each save come from the Rust reference trainer run on the same
scenario, whose run directory equals this one (tests/conformance.rs). Runtimes and throughputs
are omitted; float-math values (losses, lr, grad_norm, best_metric) are rounded to 5 significant digits.";

/// The view of a run directory (`result.json` + `output/`). `title` heads it (e.g.
/// `"best-epoch-strategy @ HF 5.24.0"`).
pub fn run_dir_view(run_dir: &Path, title: &str) -> Result<String, String> {
    view(run_dir, title, None)
}

/// [`run_dir_view`] with the saves and deletions the executor recorded for this scenario.
pub fn run_dir_view_traced(run_dir: &Path, title: &str, events: &[crate::trainer::DiskEvent]) -> Result<String, String> {
    view(run_dir, title, Some(events))
}

/// A run's error as one line, `Type: message`, or `none` (both runs of a resumed scenario).
fn error_text(error: Option<&PyJson>) -> String {
    match error {
        Some(PyJson::Null) | None => "none".to_string(),
        Some(e) => format!("{}: {}", short_str(e.get("type")), short_str(e.get("message"))),
    }
}

fn view(run_dir: &Path, title: &str, events: Option<&[crate::trainer::DiskEvent]>) -> Result<String, String> {
    let result = pyjson::read_file(run_dir.join("result.json")).map_err(|e| e.to_string())?;
    // The main process's output (node 0's disk in a launch with per-node disks).
    let out = crate::world::launch::main_output(run_dir);
    let mut s = String::new();
    writeln!(s, "{title}").unwrap();
    for line in (if events.is_some() { TRACED_HEADER } else { HEADER }).lines() {
        writeln!(s, "# {line}").unwrap();
    }
    writeln!(s).unwrap();

    // Contract v2: a resumed scenario's first run, in one line; the rest is the resumed run's
    // (its state carries on the log history of the checkpoint it resumed from).
    if let Some(first) = result.get("first") {
        let err = error_text(first.get("error"));
        let st = first.get("final_state");
        writeln!(
            s,
            "first run: error: {err}; stopped at global_step={} of max_steps={}",
            short(st.and_then(|st| st.get("global_step"))),
            short(st.and_then(|st| st.get("max_steps")))
        )
        .unwrap();
        writeln!(s, "then train(resume_from_checkpoint=...); from here on, the resumed run:").unwrap();
    }

    // The outcome.
    writeln!(s, "error: {}", error_text(result.get("error"))).unwrap();
    let state = match result.get("final_state") {
        Some(PyJson::Null) | None => {
            writeln!(s, "final_state: null (no Trainer was built)").unwrap();
            writeln!(s, "\nat the end:").unwrap();
            write_left(&mut s, &out);
            return Ok(s);
        }
        Some(st) => st,
    };
    writeln!(
        s,
        "stopped at: global_step={} of max_steps={}, epoch={} of num_train_epochs={}",
        short(state.get("global_step")),
        short(state.get("max_steps")),
        short(state.get("epoch")),
        short(state.get("num_train_epochs"))
    )
    .unwrap();
    let intervals: Vec<String> = ["logging_steps", "eval_steps", "save_steps"]
        .iter()
        .filter_map(|k| state.get(k).map(|v| format!("{k}={}", show(k, v))))
        .collect();
    if !intervals.is_empty() {
        writeln!(s, "intervals in the state: {}", intervals.join(" ")).unwrap();
    }

    // Checkpoints: left at the end, and their states.
    let mut left: BTreeMap<u64, String> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(&out) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() && name.starts_with("checkpoint-") && holds_a_file(&e.path()) {
                if let Some(step) = step_of(&name) {
                    left.insert(step, name);
                }
            }
        }
    }
    let mut ck_states: BTreeMap<u64, PyJson> = BTreeMap::new();
    for (step, name) in &left {
        if let Ok(st) = pyjson::read_file(out.join(name).join("trainer_state.json")) {
            ck_states.insert(*step, st);
        }
    }
    // Checkpoints named anywhere: saved at some point.
    let mut named: BTreeSet<u64> = BTreeSet::new();
    for st in ck_states.values().chain(std::iter::once(state)) {
        if let Some(PyJson::Str(p)) = st.get("best_model_checkpoint") {
            if let Some(step) = step_of(p) {
                named.insert(step);
            }
        }
    }

    // Events per step.
    #[derive(Default)]
    struct At {
        epoch: Option<f64>,
        lines: Vec<String>,
        /// The end-of-training summary, after the step's saves.
        last: Vec<String>,
    }
    let mut at: BTreeMap<u64, At> = BTreeMap::new();
    let mut other: Vec<String> = vec![];
    if let Some(PyJson::List(hist)) = state.get("log_history") {
        for e in hist {
            let PyJson::Dict(d) = e else { continue };
            let step = match e.get("step") {
                Some(PyJson::Int(i)) if *i >= 0 => *i as u64,
                _ => {
                    other.push(fields(d, &[]));
                    continue;
                }
            };
            let slot = at.entry(step).or_default();
            if slot.epoch.is_none() {
                slot.epoch = num(e.get("epoch"));
            }
            let kind = if d.iter().any(|(k, _)| k == "train_loss") {
                "train end"
            } else if d.iter().any(|(k, _)| k.starts_with("eval_") && !is_volatile(k)) {
                "evaluate"
            } else if d.iter().any(|(k, _)| k == "loss") {
                "log"
            } else {
                "entry"
            };
            let line = format!("{kind:<10}{}", fields(d, &["epoch", "step"]));
            if kind == "train end" {
                slot.last.push(line);
            } else {
                slot.lines.push(line);
            }
        }
    }
    let mut prev_best: Option<String> = None;
    let saved: BTreeSet<u64> = match events {
        Some(_) => BTreeSet::new(),
        None => left.keys().copied().chain(named.iter().copied()).collect(),
    };
    // After a resume, the second Trainer's saves and deletions say so: both runs may write the
    // same checkpoint-N.
    let mut resumed = "";
    for ev in events.unwrap_or(&[]) {
        use crate::trainer::DiskEvent;
        match ev {
            DiskEvent::Resumed => resumed = " (resumed run)",
            DiskEvent::Saved { step, folder, best } => {
                let slot = at.entry(*step).or_default();
                slot.lines.push(format!("{:<10}{folder}{resumed}", "save"));
                let opt = |v: Option<PyJson>| v.unwrap_or(PyJson::Null);
                let mut d = vec![
                    ("best_metric".to_string(), opt(best.best_metric.clone())),
                    ("best_model_checkpoint".to_string(), opt(best.best_model_checkpoint.clone().map(PyJson::Str))),
                ];
                if state.get("best_global_step").is_some() {
                    d.push(("best_global_step".to_string(), opt(best.best_global_step.map(|s| PyJson::Int(s as i128)))));
                }
                let b = best_line(&PyJson::Dict(d));
                if b.is_some() && b != prev_best {
                    slot.lines.push(format!("{:<10}{}", "best", b.clone().unwrap()));
                }
                prev_best = b;
            }
            DiskEvent::Deleted { step, folder, why } => {
                at.entry(*step).or_default().lines.push(format!("{:<10}{folder} ({why}){resumed}", "delete"));
            }
        }
    }
    for step in &saved {
        let slot = at.entry(*step).or_default();
        let name = format!("checkpoint-{step}");
        if left.contains_key(step) {
            slot.lines.push(format!("{:<10}{name}", "save"));
            if let Some(st) = ck_states.get(step) {
                if slot.epoch.is_none() {
                    slot.epoch = num(st.get("epoch"));
                }
                let b = best_line(st);
                if b.is_some() && b != prev_best {
                    slot.lines.push(format!("{:<10}{}", "best", b.clone().unwrap()));
                }
                prev_best = b;
            } else {
                slot.lines.push(format!("{:<10}(no readable trainer_state.json)", ""));
            }
        } else {
            slot.lines.push(format!("{:<10}{name} (inferred: named as best_model_checkpoint, not present at the end)", "save"));
            slot.lines.push(format!("{:<10}{name} (inferred: saved but not present at the end)", "deleted"));
        }
    }

    writeln!(s, "\ntimeline:").unwrap();
    if at.is_empty() {
        writeln!(s, "  (nothing logged, evaluated or saved)").unwrap();
    }
    for (step, slot) in &at {
        match slot.epoch {
            Some(ep) => writeln!(s, "  step {step} (epoch {}):", pyjson::float_repr(ep)).unwrap(),
            None => writeln!(s, "  step {step}:").unwrap(),
        }
        for l in slot.lines.iter().chain(&slot.last) {
            writeln!(s, "    {}", l.trim_end()).unwrap();
        }
    }
    for o in &other {
        writeln!(s, "  (no step) {o}").unwrap();
    }

    writeln!(s, "\nat the end:").unwrap();
    match best_line(state) {
        Some(b) => writeln!(s, "  best: {b}").unwrap(),
        None => writeln!(s, "  best: none tracked").unwrap(),
    }
    if let Some(PyJson::Dict(cbs)) = state.get("stateful_callbacks") {
        for (name, cb) in cbs {
            if name == "TrainerControl" {
                continue;
            }
            if let Some(PyJson::Dict(attrs)) = cb.get("attributes") {
                writeln!(s, "  {name}: {}", fields(attrs, &[])).unwrap();
            }
        }
    }
    let ckpt_left: Vec<&String> = left.values().collect();
    if let Some(b) = state.get("best_model_checkpoint").and_then(|b| match b {
        PyJson::Str(p) => checkpoint_name(p),
        _ => None,
    }) {
        if !ckpt_left.contains(&&b) {
            writeln!(s, "  best checkpoint {b} is not present at the end").unwrap();
        }
    }
    write_left(&mut s, &out);
    Ok(s)
}

fn short_str(v: Option<&PyJson>) -> String {
    match v {
        Some(PyJson::Str(x)) => x.clone(),
        other => short(other),
    }
}

/// Whether a folder holds a file, at any depth. Empty folders do not count (as in the diff,
/// conformance/README.md): git holds none, so a checkout of golden/ has none, and a view that
/// listed them would differ between the generator's folder and a clone.
fn holds_a_file(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| rd.flatten().any(|e| if e.path().is_dir() { holds_a_file(&e.path()) } else { true }))
}

/// The checkpoints and other files left in output/.
fn write_left(s: &mut String, out: &Path) {
    let mut ckpts: Vec<(u64, String)> = vec![];
    let mut files: Vec<String> = vec![];
    let mut dirs: Vec<String> = vec![];
    if let Ok(rd) = std::fs::read_dir(out) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                if !holds_a_file(&e.path()) {
                    continue;
                }
                match step_of(&name).filter(|_| name.starts_with("checkpoint-")) {
                    Some(st) => ckpts.push((st, name)),
                    None => dirs.push(name),
                }
            } else {
                files.push(name);
            }
        }
    }
    ckpts.sort();
    files.sort();
    dirs.sort();
    if ckpts.is_empty() {
        writeln!(s, "  checkpoints left: none").unwrap();
    } else {
        writeln!(s, "  checkpoints left: {}", ckpts.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ")).unwrap();
        let mut groups: Vec<(Vec<String>, Vec<&str>)> = vec![];
        for (_, n) in &ckpts {
            let f = list_files(&out.join(n));
            match groups.iter_mut().find(|(g, _)| *g == f) {
                Some((_, names)) => names.push(n),
                None => groups.push((f, vec![n])),
            }
        }
        for (f, names) in groups {
            let who = if names.len() == ckpts.len() { "each holds".to_string() } else { format!("{} hold(s)", names.join(", ")) };
            writeln!(s, "    {who}: {}", f.join(" ")).unwrap();
        }
    }
    let non_empty_dirs: Vec<&String> = dirs.iter().filter(|d| !list_files(&out.join(d)).is_empty()).collect();
    if !files.is_empty() || !non_empty_dirs.is_empty() {
        let mut all: Vec<String> = files.clone();
        all.extend(non_empty_dirs.iter().map(|d| format!("{d}/")));
        writeln!(s, "  other files in output/: {}", all.join(" ")).unwrap();
    }
}
