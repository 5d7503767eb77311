//! The callbacks a scenario gives the Trainer: `EarlyStoppingCallback` (its init-time assertions
//! and `on_evaluate`), enable_jit_checkpoint's `JITCheckpointCallback` with the scenario's
//! signal, and TrainerState's `stateful_callbacks` (which states a save refreshes).

use crate::formats::pyjson::PyJson;
use crate::hf::args::Interval;
use crate::hf::behaviors::CallbackRefresh;
use crate::hf::error::HfError;
use crate::hf::state;
use crate::policy::best;
use super::Trainer;

impl<'a> Trainer<'a> {
    /// The scenario's signal after the callbacks' `on_step_end` of a global step (the world's
    /// callback comes after JITCheckpointCallback, so that one's `on_step_end` has already
    /// passed): with enable_jit_checkpoint's handler, the checkpoint is requested from the next
    /// event on.
    /// The scenario's `control` callback (contract v3 part 3 c) in `on_step_end`, after the
    /// Trainer's own callbacks (DefaultFlowCallback has set its flags for the step).
    pub(super) fn control_on_step_end(&mut self) {
        use crate::world::scenario::ControlFlag::*;
        for c in self.sc.control.iter().filter(|c| c.at_step == self.state.global_step as i64) {
            let flag = match c.set {
                ShouldSave => &mut self.control.should_save,
                ShouldEvaluate => &mut self.control.should_evaluate,
                ShouldLog => &mut self.control.should_log,
                ShouldTrainingStop => &mut self.control.should_training_stop,
                ShouldEpochStop => &mut self.control.should_epoch_stop,
            };
            *flag = true;
        }
    }

    pub(super) fn signal_on_step_end(&mut self) {
        let jit = self.args.is_true("enable_jit_checkpoint");
        if jit && self.sc.signal.is_some_and(|s| s.at_step == self.state.global_step as i64) {
            self.jit_requested = true;
        }
    }

    /// JITCheckpointCallback at `on_step_begin` (`epoch_end`: at `on_epoch_end`, which also
    /// cancels the epoch's own save): a requested checkpoint stops training and is saved now,
    /// by `_save_checkpoint` itself (into `checkpoint-{global_step}`, made first, with a
    /// `checkpoint-is-incomplete.txt` sentinel removed once the save returns).
    pub(super) fn jit_checkpoint_event(&mut self, epoch_end: bool) -> Result<(), HfError> {
        if !self.jit_requested {
            return Ok(());
        }
        self.jit_requested = false;
        if epoch_end {
            self.control.should_save = false;
        }
        self.control.should_training_stop = true;
        let dir = self.output_abs().join(format!("checkpoint-{}", self.state.global_step));
        let sentinel = dir.join("checkpoint-is-incomplete.txt");
        std::fs::create_dir_all(&dir).map_err(|e| super::io_err(&dir, e))?;
        std::fs::write(&sentinel, format!("Checkpoint started at step {} and in progress...", self.state.global_step))
            .map_err(|e| super::io_err(&sentinel, e))?;
        self.save_checkpoint(None)?;
        if sentinel.exists() {
            std::fs::remove_file(&sentinel).map_err(|e| super::io_err(&sentinel, e))?;
        }
        Ok(())
    }

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
    /// The states of the Trainer's current `ExportableState` callbacks: EarlyStoppingCallback
    /// (when there is one), then TrainerControl.
    fn exportable_states(&self) -> Vec<(String, PyJson)> {
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
        v
    }

    /// A fresh `TrainerState(stateful_callbacks=[...])` (Trainer.__init__ and the start of
    /// train()): exactly the current callbacks' states.
    pub(super) fn init_stateful_callbacks(&mut self) {
        self.state.stateful_callbacks = self.exportable_states();
        self.early_counter_saved = self.early_counter;
    }

    /// `_save_checkpoint`'s update of `state.stateful_callbacks` (`which`: the release's): each
    /// current callback's state goes into its slot, `state.stateful_callbacks[name]`. After a
    /// resume the state is the checkpoint's: a slot of a callback the first run did not have
    /// is missing (HF's `KeyError`), and one of a callback the resumed run dropped stays as
    /// stored.
    pub(super) fn refresh_stateful_callbacks(&mut self, which: CallbackRefresh) -> Result<(), HfError> {
        let states = match which {
            CallbackRefresh::Absent => return Ok(()),
            CallbackRefresh::ControlOnly => vec![("TrainerControl".to_string(), state::control_state(&self.control))],
            CallbackRefresh::All => self.exportable_states(),
        };
        for (name, st) in states {
            match self.state.stateful_callbacks.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = st,
                None if which == CallbackRefresh::All => return Err(HfError::new("KeyError", format!("'{name}'"))),
                None => {}
            }
        }
        if which == CallbackRefresh::All {
            self.early_counter_saved = self.early_counter;
        }
        Ok(())
    }
}
