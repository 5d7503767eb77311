//! What a batch holds when it reaches the model, and which label names the Trainer knows:
//! `__init__`'s `label_names` default (`find_labels` of the model's class), the signature columns
//! `_set_signature_columns_if_needed` reads for `remove_unused_columns`, and the errors
//! `_prepare_inputs` and the forward call raise when the columns kept do not fit.
//!
//! The world's batches have the columns `input_x` and `labels`. The world's own models take both
//! (`forward(input_x, labels=None, **kwargs)`); a peft `PeftModel` takes `(*args, **kwargs)`, so
//! releases that inspect the wrapper rather than its base model find no labels and keep no column.

use crate::formats::pyjson::PyJson;
use crate::hf::error::HfError;
use crate::world::scenario::ModelKind;
use super::Trainer;

/// The forward parameters of the world's models (`LinearModel.forward` and the others).
const WORLD_FORWARD: [&str; 3] = ["input_x", "labels", "kwargs"];
/// `PeftModel.forward(*args, **kwargs)`.
const PEFT_FORWARD: [&str; 2] = ["args", "kwargs"];

impl<'a> Trainer<'a> {
    /// The class whose forward the Trainer inspects is the peft wrapper's own.
    fn inspects_wrapper(&self, of_base_from: bool) -> bool {
        self.sc.model.kind == ModelKind::Lora && !of_base_from
    }

    /// `self.label_names`: the argument, else `find_labels` of the inspected class (parameters
    /// containing "label": `labels` for the world's models, none for `PeftModel`).
    pub(super) fn label_names(&self) -> Vec<String> {
        match &self.args.label_names {
            Some(l) => l.clone(),
            None if self.inspects_wrapper(self.profile.peft_label_names_of_base) => vec![],
            None => vec!["labels".into()],
        }
    }

    /// `remove_unused_columns` before the first batch: the columns kept are those in the inspected
    /// forward's signature plus `label`, `label_ids` and the label names. No column left is
    /// `_prepare_inputs`' ValueError; labels without `input_x` is the forward call's TypeError.
    pub(super) fn check_batch_columns(&self) -> Result<(), HfError> {
        if !self.args.remove_unused_columns {
            return Ok(());
        }
        let forward: &[&str] = if self.inspects_wrapper(self.profile.peft_forward_columns_of_base) { &PEFT_FORWARD } else { &WORLD_FORWARD };
        let mut signature: Vec<String> = forward.iter().map(|s| s.to_string()).collect();
        // `list(set(["label", "label_ids"] + self.label_names))`: a set's order (the generator
        // runs with PYTHONHASHSEED=0); the message lists it only when no label name is given.
        let mut extra = vec!["label".to_string(), "label_ids".to_string()];
        for l in self.label_names() {
            if !extra.contains(&l) {
                extra.push(l);
            }
        }
        signature.extend(extra);
        let kept: Vec<&str> = ["input_x", "labels"].into_iter().filter(|c| signature.iter().any(|s| s == c)).collect();
        if kept.is_empty() {
            return Err(HfError::value(format!(
                "The batch received was empty, your model won't be able to train on it. Double-check that your training dataset contains keys expected by the model: {}.",
                signature.join(",")
            )));
        }
        if !kept.contains(&"input_x") {
            let class = match self.sc.model.kind {
                ModelKind::Module => "RegressionModule",
                ModelKind::Linear | ModelKind::Lora => "LinearModel",
                ModelKind::Regression => "RegressionModel",
            };
            return Err(HfError::new("TypeError", format!("{class}.forward() missing 1 required positional argument: 'input_x'")));
        }
        Ok(())
    }

    /// `prediction_step`'s `has_labels`: an evaluation computes a loss (and calls
    /// compute_metrics) only when the batch carries every label name and there is one.
    pub(super) fn evaluation_has_labels(&self) -> bool {
        let names = self.label_names();
        // The world's batches hold `labels` (a run whose columns drop them stopped at its first
        // training batch already).
        !names.is_empty() && names.iter().all(|n| n == "labels")
    }

    /// `if args.gradient_checkpointing: self.model.gradient_checkpointing_enable(...)`, early in
    /// `_inner_training_loop` (after the fresh TrainerState, before its fields are filled): the
    /// world's PreTrainedModels do not declare support (ValueError; a peft model asks its base),
    /// a plain module has no such method (AttributeError).
    pub(super) fn enable_gradient_checkpointing(&self) -> Result<(), HfError> {
        if !self.args.gradient_checkpointing {
            return Ok(());
        }
        let word = self.profile.checkpointing_word;
        Err(match self.sc.model.kind {
            ModelKind::Regression => HfError::value(format!("RegressionModel does not support {word} checkpointing.")),
            // A PeftModel hands the call to its base model, the linear kind.
            ModelKind::Linear | ModelKind::Lora => HfError::value(format!("LinearModel does not support {word} checkpointing.")),
            ModelKind::Module => HfError::new("AttributeError", "'RegressionModule' object has no attribute 'gradient_checkpointing_enable'"),
        })
    }

    /// `label_smoothing_factor != 0`: `compute_loss` pops the labels and feeds the model's
    /// output and the world's float labels to the LabelSmoother, whose `gather` takes only
    /// integer indices: torch's RuntimeError at the first training step (its wording is the
    /// torch line's). Only the regression kind's path is modelled.
    pub(super) fn check_label_smoothing(&self) -> Result<(), HfError> {
        if self.args.label_smoothing_factor == 0.0 {
            return Ok(());
        }
        match self.sc.model.kind {
            ModelKind::Regression => Err(HfError::new("RuntimeError", self.profile.torch_layout.gather_index_dtype_error)),
            _ => Err(HfError::not_modelled("label_smoothing_factor with this model kind")),
        }
    }
}

/// The arguments that reach for the model's main input (`main_input_name`, "input_ids" for the
/// world's models), which the world's batches do not hold, and the model's input embeddings,
/// which the world's models do not expose. Only the regression kind's answers are golden-checked;
/// the other kinds stop as not implemented.
impl<'a> Trainer<'a> {
    /// `train()` first of all: `if self.neftune_noise_alpha is not None: self.model =
    /// self._activate_neftune(self.model)`, which calls `get_input_embeddings()`: a
    /// PreTrainedModel without embeddings raises NotImplementedError (`neftune_error`).
    pub(super) fn activate_neftune(&self) -> Result<(), HfError> {
        if self.args.neftune_noise_alpha.is_none() {
            return Ok(());
        }
        match self.sc.model.kind {
            ModelKind::Regression => Err(HfError::new("NotImplementedError", self.profile.neftune_error.replace("{}", "RegressionModel"))),
            _ => Err(HfError::not_modelled("neftune_noise_alpha with this model kind")),
        }
    }

    /// `get_train_dataloader` → `_get_train_sampler`, first in `_inner_training_loop`: with
    /// `group_by_length` (5.2+: `train_sampling_strategy="group_by_length"`) a LengthGroupedSampler, which measures rows by their `input_ids` (the
    /// world's dataset is no `datasets.Dataset`, so `length_column_name` is not read).
    pub(super) fn check_train_sampler(&self) -> Result<(), HfError> {
        if !self.args.group_by_length && self.args.train_sampling_strategy.as_deref() != Some("group_by_length") {
            return Ok(());
        }
        Err(HfError::value("Can only automatically infer lengths for datasets whose items are dictionaries with an 'input_ids' key."))
    }

    /// torch's `DataLoader.__init__` checks on the arguments HF hands it (the training
    /// DataLoader is the first made, at the start of train()): persistent workers and a
    /// multiprocessing context need worker processes. With workers, a persistent one keeps its
    /// iterator (no `_base_seed` draw per epoch or evaluation: not modelled), and a context other
    /// than "fork" re-imports the dataset's class in the workers (the generator's local class
    /// cannot be pickled: not modelled); "fork" loads as workers always do here.
    pub(super) fn check_dataloader_workers(&self) -> Result<(), HfError> {
        let no_workers = matches!(self.args.field("dataloader_num_workers"), None | Some(PyJson::Int(0)));
        let persistent = self.args.is_true("dataloader_persistent_workers");
        let context = self.args.field("dataloader_multiprocessing_context").filter(|v| **v != PyJson::Null);
        if persistent && no_workers {
            return Err(HfError::value("persistent_workers option needs num_workers > 0"));
        }
        if context.is_some() && no_workers {
            return Err(HfError::value("multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got num_workers=0"));
        }
        // What is not modelled is the generator's draws (and spawn's pickling of the world's
        // dataset): a plan, which predicts no random state, runs on.
        if persistent && self.numerics {
            return Err(HfError::not_modelled("dataloader_persistent_workers with worker processes (a persistent iterator draws no _base_seed per epoch)"));
        }
        if let (Some(c), true) = (context, self.numerics) {
            if *c != PyJson::Str("fork".into()) {
                return Err(HfError::not_modelled("dataloader_multiprocessing_context other than \"fork\" with worker processes"));
            }
        }
        Ok(())
    }

    /// bf16/fp16 where the release trains with them here: accelerate's CPU autocast, which
    /// leaves the regression model's arithmetic (element-wise ops, MSE in float32) as it is; the
    /// kinds with a `nn.Linear` would compute it in half precision (not modelled).
    pub(super) fn check_autocast(&self) -> Result<(), HfError> {
        if (self.args.bf16 || self.args.fp16) && self.sc.model.kind != ModelKind::Regression {
            return Err(HfError::not_modelled("bf16/fp16 autocast with this model kind"));
        }
        Ok(())
    }

    /// `eval_do_concat_batches=False` with a compute_metrics: the loop hands per-batch lists on,
    /// and HF raises `AttributeError: 'list' object has no attribute 'reshape'` (5.24.0, found by
    /// the differential test); where and in which releases is not golden-checked yet, so the
    /// executor stops as not implemented. Without compute_metrics it changes nothing
    /// (args-eval-do-concat-batches).
    pub(super) fn check_eval_concat(&self) -> Result<(), HfError> {
        if self.args.eval_do_concat_batches || self.sc.metrics.is_none() || self.args.prediction_loss_only {
            return Ok(());
        }
        Err(HfError::not_modelled("eval_do_concat_batches=False with a compute_metrics (HF 5.24.0 raises AttributeError at the evaluation)"))
    }

    /// `evaluation_loop` with `include_inputs_for_metrics` (or `"inputs"` in
    /// `include_for_metrics`): every batch's `inputs[main_input_name]`, a KeyError at the first
    /// batch (after the forward; nothing is written before it).
    pub(super) fn check_eval_inputs(&self, rows: usize) -> Result<(), HfError> {
        if !self.args.include_inputs_for_metrics || rows == 0 {
            return Ok(());
        }
        match self.sc.model.kind {
            ModelKind::Regression => Err(HfError::new("KeyError", "'input_ids'")),
            _ => Err(HfError::not_modelled("include_inputs_for_metrics with this model kind")),
        }
    }
}
