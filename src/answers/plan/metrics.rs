//! Evaluation results a plan is fed, one map per `evaluate()` call (one eval set each), as
//! [`crate::trainer::PlanMetrics::Given`] takes them.
//!
//! Two sources: `--metrics FILE`, one entry per evaluation *round* as HF logs it (a round over
//! named eval sets is split into its per-set calls by their `eval_<name>_` prefixes), and
//! `--metrics-from trainer_state.json`, whose `log_history` evaluation entries are already per
//! call.

use crate::formats::pyjson::{self, PyJson};
use crate::hf::state::is_volatile;
use std::path::Path;

/// One `evaluate()` call's metrics, as Python's JSON has them (NaN and Infinity included).
pub type Call = Vec<(String, PyJson)>;

/// Keys a plan never takes from a metrics entry: where and when it was logged (the executor
/// adds its own), and wall-clock keys.
fn ignored(k: &str) -> bool {
    k == "epoch" || k == "step" || is_volatile(k)
}

/// `--metrics FILE`: a JSON list of objects, one per evaluation round (JSON as Python writes
/// it: `NaN` and `Infinity` are read). `sets`: the named eval sets, in order (empty for one
/// unnamed set).
pub fn load_rounds(path: &Path, sets: &[String]) -> Result<Vec<Call>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read the metrics file: {e}"))?;
    let v = pyjson::loads(&text).map_err(|e| format!("{shown}: not valid JSON: {e}"))?;
    let example = r#"[{"eval_loss": 0.52, "eval_accuracy": 0.81}, {"eval_loss": 0.47, "eval_accuracy": 0.84}]"#;
    let PyJson::List(rounds) = v else {
        return Err(format!("{shown}: must be a JSON list of evaluation results, one object per evaluation round as HF logs them, e.g. {example}"));
    };
    let mut calls = vec![];
    for (i, r) in rounds.iter().enumerate() {
        let PyJson::Dict(entries) = r else {
            return Err(format!("{shown}: entry {} (of {}) is not an object; each entry is one evaluation round's results, e.g. {example}", i + 1, rounds.len()));
        };
        let place = |k: &str| format!("{shown}: entry {}, key {k:?}", i + 1);
        let round: Call = entries.iter().filter(|(k, _)| !ignored(k)).cloned().collect();
        if sets.is_empty() {
            calls.push(round);
            continue;
        }
        let mut per_set: Vec<Call> = vec![vec![]; sets.len()];
        for (k, v) in round {
            // The longest matching set name, so that sets `a` and `a_b` are told apart.
            let owner = sets
                .iter()
                .enumerate()
                .filter(|(_, s)| k.starts_with(&format!("eval_{s}_")))
                .max_by_key(|(_, s)| s.len())
                .map(|(j, _)| j);
            match owner {
                Some(j) => per_set[j].push((k, v)),
                None => {
                    let names: Vec<String> = sets.iter().map(|s| format!("eval_{s}_")).collect();
                    return Err(format!(
                        "{}: belongs to no eval set: with named eval sets each key starts with its set's prefix ({}), as HF logs them",
                        place(&k),
                        names.join(", ")
                    ));
                }
            }
        }
        calls.extend(per_set);
    }
    Ok(calls)
}

/// `--metrics-from trainer_state.json`: the evaluation entries of its `log_history`, in order.
/// An evaluation entry is one with an `eval_`-prefixed key: `evaluate()` always logs
/// `<prefix>_runtime`, so an evaluation of an empty set (no eval loss) is still a call.
pub fn load_trainer_state(path: &Path) -> Result<Vec<Call>, String> {
    let shown = path.display();
    let state = pyjson::read_file(path).map_err(|e| format!("{shown}: cannot read the trainer state: {e}"))?;
    let Some(PyJson::List(history)) = state.get("log_history") else {
        return Err(format!(
            "{shown}: field 'log_history' is missing or not a list; --metrics-from takes a trainer_state.json (from a checkpoint folder, or save_state()'s output_dir)"
        ));
    };
    let mut calls = vec![];
    for (i, e) in history.iter().enumerate() {
        let PyJson::Dict(entries) = e else {
            return Err(format!("{shown}: field 'log_history' entry {} is not an object", i + 1));
        };
        if !entries.iter().any(|(k, _)| k.starts_with("eval_")) {
            continue;
        }
        // trainer_state.json sorts keys; evaluate() logs `<prefix>_loss` before the names
        // compute_metrics returned without the prefix (the usual case), so it goes first again.
        // The order shows only in a KeyError's list of the available metrics.
        let prefix = entries.iter().find_map(|(k, _)| k.strip_suffix("_runtime").filter(|p| p.starts_with("eval")));
        let loss = prefix.map(|p| format!("{p}_loss"));
        let ordered = entries.iter().filter(|(k, _)| Some(k) == loss.as_ref()).chain(entries.iter().filter(|(k, _)| Some(k) != loss.as_ref()));
        calls.push(ordered.filter(|(k, _)| !ignored(k)).cloned().collect());
    }
    Ok(calls)
}
