//! Best-metric tracking: which evaluation counts, how it compares, and what HF raises when the
//! metric is missing. Pure: the executor passes observations in and applies the result.

use crate::formats::pyjson::PyJson;
use crate::hf::behaviors::KeyErrorText;
use crate::hf::error::HfError;
use crate::hf::state::Best;

/// A metric value as numpy's `np.greater` / `np.less` sees it.
pub fn as_f64(v: &PyJson) -> Option<f64> {
    match v {
        PyJson::Int(i) => Some(*i as f64),
        PyJson::Float(x) => Some(*x),
        PyJson::Bool(b) => Some(*b as i64 as f64),
        _ => None,
    }
}

/// Strictly better; NaN is never better (numpy comparison semantics).
pub fn is_better(value: f64, best: f64, greater_is_better: bool) -> bool {
    if greater_is_better {
        value > best
    } else {
        value < best
    }
}

/// `metrics[metric_to_check]`, or the KeyError this version raises at this lookup.
pub fn lookup(metrics: &[(String, PyJson)], key: &str, text: KeyErrorText) -> Result<PyJson, HfError> {
    if let Some((_, v)) = metrics.iter().find(|(k, _)| k == key) {
        return Ok(v.clone());
    }
    let keys: Vec<String> = metrics.iter().map(|(k, _)| crate::formats::pyjson::py_str_repr(k)).collect();
    let head = format!(
        "The `metric_for_best_model` training argument is set to '{key}', which is not found in the evaluation metrics. The available evaluation metrics are: [{}].",
        keys.join(", ")
    );
    Err(match text {
        KeyErrorText::Plain => HfError::key(key),
        KeyErrorText::Short => HfError::key(&format!("{head} Consider changing the `metric_for_best_model` via the TrainingArguments.")),
        KeyErrorText::Long => HfError::key(&format!(
            "{head} Please ensure that the `compute_metrics` function returns a dictionary that includes '{key}' or consider changing the `metric_for_best_model` via the TrainingArguments."
        )),
    })
}

/// The rules of the best-tracking part of TrainerState ([`Best`] is TrainerState's data, in
/// [`crate::hf::state`]; how it changes after an evaluation or a save is decided here).
impl Best {
    /// 4.47+ `_determine_best_metric`, after every training evaluation. Returns whether the
    /// value is a new best; `records_step` is whether the save strategy records the step.
    pub fn after_eval(&mut self, value: &PyJson, greater: bool, step: u64, records_step: bool) -> bool {
        let best = self
            .best_metric
            .get_or_insert(PyJson::Float(if greater { f64::NEG_INFINITY } else { f64::INFINITY }))
            .clone();
        let (v, b) = (as_f64(value).unwrap_or(f64::NAN), as_f64(&best).unwrap_or(f64::NAN));
        if is_better(v, b, greater) {
            self.best_metric = Some(value.clone());
            if records_step {
                self.best_global_step = Some(step);
            }
            true
        } else {
            false
        }
    }

    /// 4.47-4.49 `_determine_best_metric`: a new best makes the evaluating step's folder the
    /// best checkpoint, whether that folder is ever written or not.
    pub fn after_eval_by_path(&mut self, value: &PyJson, greater: bool, folder: &str) -> bool {
        let new = self.after_eval(value, greater, 0, false);
        if new {
            self.best_model_checkpoint = Some(folder.to_string());
        }
        new
    }

    /// <= 4.46 `_save_checkpoint` with metrics: the first tracked value, or a strictly better one,
    /// becomes the best and the folder being written becomes the best checkpoint.
    pub fn on_save_with_metrics(&mut self, value: &PyJson, greater: bool, folder: &str) {
        let take = match (&self.best_metric, &self.best_model_checkpoint) {
            (None, _) | (_, None) => true,
            (Some(b), Some(_)) => {
                is_better(as_f64(value).unwrap_or(f64::NAN), as_f64(b).unwrap_or(f64::NAN), greater)
            }
        };
        if take {
            self.best_metric = Some(value.clone());
            self.best_model_checkpoint = Some(folder.to_string());
        }
    }
}
