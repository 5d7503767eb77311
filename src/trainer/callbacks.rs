//! The callbacks a scenario gives the Trainer: `EarlyStoppingCallback` (its init-time assertions
//! and `on_evaluate`), and TrainerState's `stateful_callbacks` (which states a save refreshes).

use crate::formats::pyjson::PyJson;
use crate::hf::args::Interval;
use crate::hf::behaviors::CallbackRefresh;
use crate::hf::error::HfError;
use crate::hf::state;
use crate::policy::best;
use super::Trainer;

impl<'a> Trainer<'a> {
    pub(super) fn early_stopping_checks(&self, _patience: i64) -> Result<(), HfError> {
        let a = &self.args;
        if self.profile.early_stopping_requires_load_best && !a.load_best_model_at_end {
            return Err(HfError::new("AssertionError", "EarlyStoppingCallback requires load_best_model_at_end = True"));
        }
        if a.metric_for_best_model.is_none() {
            let text = if self.profile.early_stopping_requires_load_best {
                "EarlyStoppingCallback requires metric_for_best_model is defined"
            } else {
                "EarlyStoppingCallback requires metric_for_best_model to be defined"
            };
            return Err(HfError::new("AssertionError", text));
        }
        if a.eval_strategy == Interval::No {
            return Err(HfError::new("AssertionError", "EarlyStoppingCallback requires IntervalStrategy of steps or epoch"));
        }
        Ok(())
    }

    /// EarlyStoppingCallback.on_evaluate: compares with the best as it stands before this
    /// evaluation's own update.
    pub(super) fn early_stopping_on_evaluate(&mut self, metrics: &[(String, PyJson)]) -> Result<(), HfError> {
        let Some((patience, threshold)) = self.early_params() else { return Ok(()) };
        let Some(key) = self.args.metric_to_check() else { return Ok(()) };
        let Some((_, v)) = metrics.iter().find(|(k, _)| *k == key) else { return Ok(()) };
        let v = best::as_f64(v).unwrap_or(f64::NAN);
        let greater = self.args.greater_is_better.unwrap_or(true);
        let better = match self.state.best.best_metric.as_ref().and_then(best::as_f64) {
            None => true,
            Some(b) => best::is_better(v, b, greater) && (v - b).abs() > threshold,
        };
        if self.state.best.best_metric.is_none() || better {
            self.early_counter = 0;
        } else {
            self.early_counter += 1;
        }
        if self.early_counter >= patience {
            self.control.should_training_stop = true;
        }
        Ok(())
    }

    /// The EarlyStoppingCallback's (patience, threshold): the scenario's, or those a resume
    /// restored from the checkpoint.
    fn early_params(&self) -> Option<(i64, f64)> {
        let es = self.sc.early_stopping.as_ref()?;
        Some(self.early_restored.unwrap_or((es.patience, es.threshold)))
    }

    /// `_load_callback_state` (`restore_callback_states_from_checkpoint`), right after a resume
    /// loads trainer_state.json: each stored state whose callback class the Trainer has becomes
    /// a new callback built from the stored `args`, with the stored `attributes` set (the
    /// EarlyStoppingCallback's patience counter). TrainerControl's flags are restored too, but
    /// `on_train_begin` / `on_step_begin` reset each of them before it is read.
    pub(super) fn restore_callback_states(&mut self) {
        if self.sc.early_stopping.is_none() {
            return;
        }
        let Some((_, PyJson::Dict(stored))) = self.state.stateful_callbacks.iter().find(|(k, _)| k == "EarlyStoppingCallback") else { return };
        let get = |section: &str, key: &str| match stored.iter().find(|(k, _)| k == section) {
            Some((_, PyJson::Dict(d))) => d.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
            _ => None,
        };
        let (Some(PyJson::Int(patience)), Some(threshold)) = (get("args", "early_stopping_patience"), get("args", "early_stopping_threshold")) else { return };
        let threshold = match threshold {
            PyJson::Float(t) => t,
            PyJson::Int(t) => t as f64,
            _ => return,
        };
        self.early_restored = Some((patience as i64, threshold));
        if let Some(PyJson::Int(c)) = get("attributes", "early_stopping_patience_counter") {
            self.early_counter = c as i64;
        }
    }

    /// Refreshes `stateful_callbacks`: every exportable callback, or (`ControlOnly`) only
    /// TrainerControl, the others keeping the state they had at the last full refresh.
    pub(super) fn refresh_stateful_callbacks(&mut self, which: CallbackRefresh) {
        if which == CallbackRefresh::ControlOnly {
            let control = state::control_state(&self.control);
            if let Some(slot) = self.state.stateful_callbacks.iter_mut().find(|(k, _)| k == "TrainerControl") {
                slot.1 = control;
            }
            return;
        }
        let mut v = vec![];
        if let Some((patience, threshold)) = self.early_params() {
            v.push((
                "EarlyStoppingCallback".to_string(),
                PyJson::Dict(vec![
                    (
                        "args".into(),
                        PyJson::Dict(vec![
                            ("early_stopping_patience".into(), PyJson::Int(patience as i128)),
                            ("early_stopping_threshold".into(), PyJson::Float(threshold)),
                        ]),
                    ),
                    (
                        "attributes".into(),
                        PyJson::Dict(vec![("early_stopping_patience_counter".into(), PyJson::Int(self.early_counter as i128))]),
                    ),
                ]),
            ));
        }
        v.push(("TrainerControl".to_string(), state::control_state(&self.control)));
        self.state.stateful_callbacks = v;
        self.early_counter_saved = self.early_counter;
    }
}
