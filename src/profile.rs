//! Version profiles: every behavioral difference between HF versions is a field here, so the
//! policies read data instead of comparing version strings. Each field says which era of
//! ../shared/notes/hf-checkpoint-behavior.md it comes from; the golden folders judge.

use serde_json::Value;

/// The HF versions this implementation reproduces, newest first.
pub const SUPPORTED: [&str; 2] = ["5.24.0", "4.31.0"];

/// How `greater_is_better` defaults when a metric is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreaterDefault {
    /// `metric not in ["loss", "eval_loss"]` (4.31 - 4.41).
    NotLossName,
    /// `not metric.endswith("loss")` (4.42+).
    NotEndsWithLoss,
}

/// When the best metric is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BestTiming {
    /// Inside `_save_checkpoint`, only when the same call evaluated and saved (4.31 - 4.46).
    OnSaveWithMetrics,
    /// After every training evaluation, `best_global_step` recorded, `best_model_checkpoint` set at
    /// save time if the best step's folder exists (4.50+; with "best" strategy from 5.4).
    EveryEvalByStep,
}

/// How rotation orders checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationOrder {
    /// `(mtime, path)`, no fallback (4.31 - 4.37).
    Mtime,
    /// Numeric (4.38 - 4.51).
    Numeric,
    /// mtime, falling back to numeric when all mtimes lie within 1 s (4.52+).
    MtimeWithNumericFallback,
}

/// How the KeyError for a missing `metric_for_best_model` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingMetricError {
    /// A plain dict lookup: `KeyError('eval_f1')` (4.31 - 4.41).
    PlainKey,
    /// The explanatory texts: short in best tracking, long in the plateau lookup (4.47+).
    Explained,
}

/// Which learning rate a training log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggedLr {
    /// Read at log time, after the per-step scheduler step: the next step's rate (<= 4.50).
    AfterSchedulerStep,
    /// Captured after optimizer.step(), before scheduler.step(): the rate used (4.51+).
    UsedByStep,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub version: &'static str,
    /// TrainingArguments fields and defaults of this version (golden/hf-V/TRAINING_ARGS.json,
    /// written by the generator from the real HF).
    pub fields: Vec<(String, Value)>,
    /// Arguments spelled differently in this version (format v1 name, this version's name).
    pub renames: &'static [(&'static str, &'static str)],
    /// Python class name of `save_strategy` values in messages and the values it accepts.
    pub save_strategy_enum: &'static str,
    pub save_strategy_values: &'static [&'static str],
    pub scheduler_types: &'static [&'static str],
    /// `load_best_model_at_end` checks are skipped for `save_strategy="best"` (4.48+).
    pub load_best_skips_best_strategy: bool,
    /// Text inserted in the strategy-mismatch message (5.4+).
    pub mismatch_extra: &'static str,
    /// "save_steps {S}" has its space (4.35+).
    pub mixing_message_space: bool,
    /// Two ratios passing the scaled multiple test still raise "round multiple" (<= 4.52).
    pub both_ratio_fallthrough: bool,
    /// `warmup_steps < 0` is rejected (5.x).
    pub rejects_negative_warmup: bool,
    /// `warmup_steps` below 1 is a ratio of the total steps (5.x); else warmup_ratio is used.
    pub warmup_steps_ratio: bool,
    pub greater_default: GreaterDefault,
    /// Ratio intervals are written back into the args (4.31) instead of only into the state.
    pub ratio_into_args: bool,
    /// Optimizer steps per epoch round up a last partial accumulation (5.x) or down (4.31).
    pub ceil_update_steps: bool,
    /// A forced save at max_steps for the steps strategy (4.50+).
    pub final_step_save: bool,
    /// A forced evaluation at max_steps for the steps strategy (5.4+).
    pub final_step_eval: bool,
    pub best_timing: BestTiming,
    pub rotation: RotationOrder,
    pub missing_metric: MissingMetricError,
    pub logged_lr: LoggedLr,
    /// `grad_norm` in training logs (4.38+).
    pub logs_grad_norm: bool,
    /// Training `loss` rounded to 4 decimals (<= 4.57) and log `epoch` to 2 (<= 4.39).
    pub round_loss: bool,
    pub round_epoch: bool,
    /// The weights file of a checkpoint.
    pub weights_file: &'static str,
    /// `TrainerState.epoch` starts at 0 (5.3+) instead of None.
    pub epoch_starts_at_zero: bool,
    /// TrainerState fields in this version (sorted when written).
    pub state_has_intervals: bool,
    pub state_has_batch_and_tokens: bool,
    pub state_has_stateful_callbacks: bool,
    pub state_has_best_global_step: bool,
    /// `lr_scheduler_kwargs` reach ReduceLROnPlateau (4.36+).
    pub plateau_kwargs: bool,
    /// The Trainer checks at init that evaluation has an eval_dataset (4.46+) and that "best"
    /// has a metric (4.47+).
    pub init_checks: bool,
    /// EarlyStoppingCallback asserts load_best_model_at_end (<= 4.48).
    pub early_stopping_requires_load_best: bool,
    /// `save_only_model` exists (4.36+); `eval_on_start` exists (4.42+).
    pub train_summary_per_call: bool,
    /// The torch release whose state-dict layouts and archive layout files follow.
    pub torch_layout: crate::optim::TorchLayout,
    pub archive_style: crate::torch_format::ArchiveStyle,
    /// numpy's module in pickles of arrays (`numpy._core.multiarray` from numpy 2).
    pub numpy_core_module: &'static str,
    /// rng_state.pth is written after trainer_state.json (<= 4.35) instead of before.
    pub rng_after_state: bool,
    pub rotation_protection: crate::rotation::Protection,
    /// The end-of-train save_total_limit=1 cleanup uses os.path.samefile (4.32+), which raises
    /// when the best folder is missing.
    pub cleanup_uses_samefile: bool,
    /// config.json's dtype key (`dtype` in 5.x, `torch_dtype` before) and `use_cache: false` (5.x).
    pub config_dtype_key: &'static str,
    pub config_use_cache: bool,
    /// The pickled TrainingArguments of a scenario without arguments (golden/hf-V/TRAINING_ARGS.pkl).
    pub training_args_template: &'static [u8],
    /// HF's weight-decay exclusion also matches norm-named parameters (5.x).
    pub decay_norm_patterns: bool,
    /// How the training sampler is seeded (accelerate's seedable sampler, or a seed drawn from
    /// the global generator).
    pub sampler: crate::sampler::SamplerKind,
    /// `eval_loss` ignores non-finite batch losses when `logging_nan_inf_filter` (5.24).
    pub eval_loss_skips_nonfinite: bool,
    /// A training dataloader of length 0 runs on max_steps with sys.maxsize epochs (5.x), or
    /// counts one update step per epoch (4.31).
    pub empty_dataloader_runs_on_max_steps: bool,
    /// An empty training dataloader yields one `None` batch (accelerate 0.21), which HF's
    /// `_prepare_inputs` rejects with a TypeError.
    pub empty_dataloader_yields_none: bool,
}

impl Profile {
    /// The profile of an HF version, or an error listing the supported ones.
    pub fn get(version: &str) -> Result<Profile, String> {
        match version {
            "5.24.0" => Ok(Profile {
                version: "5.24.0",
                fields: fields(include_str!("../golden/hf-5.24.0/TRAINING_ARGS.json")),
                renames: &[],
                save_strategy_enum: "SaveStrategy",
                save_strategy_values: &["no", "steps", "epoch", "best"],
                scheduler_types: &[
                    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                    "inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
                    "warmup_stable_decay", "greedy",
                ],
                load_best_skips_best_strategy: true,
                mismatch_extra: ", except when --save_strategy=\"best\"",
                mixing_message_space: true,
                both_ratio_fallthrough: false,
                rejects_negative_warmup: true,
                warmup_steps_ratio: true,
                greater_default: GreaterDefault::NotEndsWithLoss,
                ratio_into_args: false,
                ceil_update_steps: true,
                final_step_save: true,
                final_step_eval: true,
                best_timing: BestTiming::EveryEvalByStep,
                rotation: RotationOrder::MtimeWithNumericFallback,
                missing_metric: MissingMetricError::Explained,
                logged_lr: LoggedLr::UsedByStep,
                logs_grad_norm: true,
                round_loss: false,
                round_epoch: false,
                weights_file: "model.safetensors",
                epoch_starts_at_zero: true,
                state_has_intervals: true,
                state_has_batch_and_tokens: true,
                state_has_stateful_callbacks: true,
                state_has_best_global_step: true,
                plateau_kwargs: true,
                init_checks: true,
                early_stopping_requires_load_best: false,
                train_summary_per_call: true,
                torch_layout: crate::optim::TorchLayout::V2_13,
                archive_style: crate::torch_format::ArchiveStyle::Torch2_13,
                numpy_core_module: "numpy._core.multiarray",
                rng_after_state: false,
                rotation_protection: crate::rotation::Protection::ProtectedSet,
                cleanup_uses_samefile: true,
                config_dtype_key: "dtype",
                config_use_cache: true,
                training_args_template: include_bytes!("../golden/hf-5.24.0/TRAINING_ARGS.pkl"),
                decay_norm_patterns: true,
                sampler: crate::sampler::SamplerKind::SeedableEpochSeed,
                eval_loss_skips_nonfinite: true,
                empty_dataloader_runs_on_max_steps: true,
                empty_dataloader_yields_none: false,
            }),
            "4.31.0" => Ok(Profile {
                version: "4.31.0",
                fields: fields(include_str!("../golden/hf-4.31.0/TRAINING_ARGS.json")),
                renames: &[("eval_strategy", "evaluation_strategy")],
                save_strategy_enum: "IntervalStrategy",
                save_strategy_values: &["no", "steps", "epoch"],
                scheduler_types: &[
                    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                    "inverse_sqrt", "reduce_lr_on_plateau",
                ],
                load_best_skips_best_strategy: false,
                mismatch_extra: "",
                mixing_message_space: false,
                both_ratio_fallthrough: true,
                rejects_negative_warmup: false,
                warmup_steps_ratio: false,
                greater_default: GreaterDefault::NotLossName,
                ratio_into_args: true,
                ceil_update_steps: false,
                final_step_save: false,
                final_step_eval: false,
                best_timing: BestTiming::OnSaveWithMetrics,
                rotation: RotationOrder::Mtime,
                missing_metric: MissingMetricError::PlainKey,
                logged_lr: LoggedLr::AfterSchedulerStep,
                logs_grad_norm: false,
                round_loss: true,
                round_epoch: true,
                weights_file: "pytorch_model.bin",
                epoch_starts_at_zero: false,
                state_has_intervals: false,
                state_has_batch_and_tokens: false,
                state_has_stateful_callbacks: false,
                state_has_best_global_step: false,
                plateau_kwargs: false,
                init_checks: false,
                early_stopping_requires_load_best: true,
                train_summary_per_call: false,
                torch_layout: crate::optim::TorchLayout::V2_1,
                archive_style: crate::torch_format::ArchiveStyle::Torch2_1,
                numpy_core_module: "numpy.core.multiarray",
                rng_after_state: true,
                rotation_protection: crate::rotation::Protection::Bubble { guarded: false },
                cleanup_uses_samefile: false,
                config_dtype_key: "torch_dtype",
                config_use_cache: false,
                training_args_template: include_bytes!("../golden/hf-4.31.0/TRAINING_ARGS.pkl"),
                decay_norm_patterns: false,
                sampler: crate::sampler::SamplerKind::GlobalDrawnSeed,
                eval_loss_skips_nonfinite: false,
                empty_dataloader_runs_on_max_steps: false,
                empty_dataloader_yields_none: true,
            }),
            _ => Err(format!("unsupported --hf version {version:?}; supported: {}", SUPPORTED.join(", "))),
        }
    }

    /// The name this version gives a format-v1 argument.
    pub fn spelling<'a>(&self, name: &'a str) -> &'a str {
        self.renames.iter().find(|(v1, _)| *v1 == name).map(|(_, here)| *here).unwrap_or(name)
    }

    pub fn has_field(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, _)| n == name)
    }

    /// The enum class (module, name) HF converts a string argument into, if any.
    pub fn enum_class_of(&self, name: &str) -> Option<(&'static str, &'static str)> {
        match name {
            "eval_strategy" | "evaluation_strategy" | "logging_strategy" => Some(("transformers.trainer_utils", "IntervalStrategy")),
            "save_strategy" => Some(("transformers.trainer_utils", self.save_strategy_enum)),
            "hub_strategy" => Some(("transformers.trainer_utils", "HubStrategy")),
            "lr_scheduler_type" => Some(("transformers.trainer_utils", "SchedulerType")),
            "optim" => Some(("transformers.training_args", "OptimizerNames")),
            _ => None,
        }
    }

    pub fn default_of(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

fn fields(json: &str) -> Vec<(String, Value)> {
    let v: Value = serde_json::from_str(json).expect("golden TRAINING_ARGS.json is valid JSON");
    v["fields"]
        .as_array()
        .expect("fields list")
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["default"].clone()))
        .collect()
}
