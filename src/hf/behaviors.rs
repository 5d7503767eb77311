//! HF's checkpoint history as data: every behavior that differs between releases, declared once
//! with the release of each change. Three tables: the transformers releases ([`Behaviors`]), the
//! resume path ([`ResumeBehaviors`]) and the torch releases ([`TorchLayout`], keyed by a
//! profile's torch line). `ckptspec versions` prints them; a profile is derived from them
//! ([`crate::hf::profile`]). The value types of the rows come first.
//!
//! ../shared/notes/hf-checkpoint-behavior.md maps the eras; the golden folders judge.

use crate::hf::version::{behaviors, Version};

/// What becomes of a staging folder on a disk whose processes do not save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagingElsewhere {
    /// Renamed to `checkpoint-N` like the main one.
    Renamed,
    /// Left as `tmp-checkpoint-N`.
    Left,
    /// Deleted by the node's first process.
    Removed,
}

/// The world a launch forms without `use_cpu=True` on a machine without a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithoutUseCpu {
    /// accelerate's `PartialState` sees `WORLD_SIZE > 1` and forms the gloo world (`MULTI_CPU`)
    /// whatever `cpu` says: the run is the use_cpu=True run; only training_args.bin tells them apart.
    Gloo,
    /// accelerate 1.13's `_prepare_backend` asks for `cpu` before `MULTI_CPU`: without it the
    /// backend is None, and every process trains alone as process 0 of a world of 1 (torch's
    /// group of all of them is formed and left unused), writing one process's files.
    EveryProcessAlone,
}

/// Where a launch of several processes takes its training order from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchSampler {
    /// As one process does ([`SamplerKind`] of the release).
    AsOneProcess,
    /// accelerate 0.21-0.23 give the `RandomSampler` a `torch.Generator()` of its own (torch's
    /// default seed) that runs on from epoch to epoch (and one more `randperm` each time an
    /// epoch exhausts the sampler); no seed drawn from the global generator.
    OwnGenerator,
    /// accelerate 0.24's `SeedableRandomSampler` without a generator seeds each epoch with its
    /// own epoch counter, which the Trainer's `set_epoch` does not reach through the sharded
    /// batch sampler: `randperm(n)` of seed 0 every epoch.
    EpochZeroSeed,
    /// The torch `RandomSampler` draws its seed from the global generator each epoch
    /// ([`SamplerKind::GlobalDrawnSeed`]), even where one process gets a seedable sampler
    /// (accelerate 0.27-0.28 replace it only in one process).
    GlobalDrawnSeed,
}

/// When a resume batches with the `train_batch_size` the checkpoint's trainer_state.json records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBatchSize {
    Never,
    Always,
    /// Only with `auto_find_batch_size` (the batch size it may have halved to).
    WithAutoFindBatchSize,
}

/// How `greater_is_better` defaults when a metric is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreaterDefault {
    /// `metric not in ["loss", "eval_loss"]`.
    NotLossName,
    /// `not metric.endswith("loss")`.
    NotEndsWithLoss,
}

/// When the best metric is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BestTiming {
    /// Inside `_save_checkpoint`, only when the same call evaluated and saved.
    OnSaveWithMetrics,
    /// `_determine_best_metric` after every training evaluation; `best_model_checkpoint` is the
    /// path of the evaluating step's folder, written or not.
    EveryEvalByPath,
    /// After every training evaluation, `best_global_step` recorded, `best_model_checkpoint` set
    /// at save time if the best step's folder exists.
    EveryEvalByStep,
}

/// Where a forced save at `max_steps` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalSave {
    /// No forced save: the last step is saved only when it is a save step.
    Never,
    /// Any `save_strategy` but "no" (the epoch strategy then saves the last step twice).
    AnyStrategy,
    /// Any but "no" and "best".
    NotBest,
    /// Only `save_strategy="steps"`.
    StepsOnly,
}

/// How rotation orders checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationOrder {
    /// `(mtime, path)`, no fallback.
    Mtime,
    /// Numeric.
    Numeric,
    /// mtime, falling back to numeric when all mtimes lie within 1 s.
    MtimeWithNumericFallback,
}

/// How the KeyError for a missing `metric_for_best_model` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyErrorText {
    /// A plain dict lookup: `KeyError('eval_f1')`.
    Plain,
    /// "... Consider changing the `metric_for_best_model` via the TrainingArguments."
    Short,
    /// "... Please ensure that the `compute_metrics` function returns a dictionary that includes ..."
    Long,
}

/// Which learning rate a training log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggedLr {
    /// Read at log time, after the per-step scheduler step: the next step's rate.
    AfterSchedulerStep,
    /// Captured after optimizer.step(), before scheduler.step(): the rate used.
    UsedByStep,
}

/// When `train()` creates the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerCreated {
    /// Before the new TrainerState (which then gets max_steps, intervals, batch size).
    BeforeState,
    /// After the state's intervals and batch size, before its max_steps and epochs.
    AfterIntervals,
    /// After the whole state.
    AfterState,
}

/// How the training loop fetches the batches of one optimizer update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefetch {
    /// Batch by batch.
    None,
    /// `get_batch_samples` per update; the last of `steps // GA + 1` updates takes
    /// `num_examples % GA` batches (or GA when 0).
    ExamplesRemainder,
    /// The same with `steps_in_epoch % GA`, and `steps // GA + (remainder < GA)` updates.
    BatchesRemainder,
}

/// How gradient accumulation scales a micro-batch's loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaLoss {
    /// Divided by GA for backward and in the logged loss (accelerate's GA plugin).
    Divided,
    /// Not divided (the model takes `num_items_in_batch`).
    Undivided,
    /// Divided for backward only (accelerate's plugin is back; the logged loss is not).
    GradsDivided,
    /// Divided in the logged loss only (4.46: the model's `**kwargs` is not named
    /// `loss_kwargs`, so no `num_items_in_batch`, and no GA plugin).
    LogDivided,
}

/// The order of `TrainingArguments.__post_init__`'s checks where it changed: where `optim` is
/// converted (with the fp16 device check and, until 5.1, the tf32 check right after it), where
/// `accelerator_config` is converted (a dict or a JSON file's path into an `AcceleratorConfig`;
/// its errors: an unknown key's TypeError, a missing file's FileNotFoundError, a file's unknown
/// keys' ValueError) and where the prefetch check stands. One value per layout, so that the
/// restructured `__post_init__` of 5.2 is one change, not one per check it moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostInitOrder {
    /// `optim` late (after the load_best_model_at_end checks, just before warmup_ratio);
    /// `accelerator_config` after the tf32 and warmup checks, before the `debug` conversion; the
    /// prefetch check among the last.
    AcceleratorAfterWarmupChecks,
    /// As before, but `accelerator_config` right after the `optim` conversion (before the tf32
    /// and warmup checks).
    AcceleratorAfterOptim,
    /// 5.2's restructured `__post_init__`: `optim` right after `lr_scheduler_type`, before the
    /// load_best_model_at_end checks; then `_validate_args` (the interval, scheduler and warmup
    /// checks, the prefetch check last), then `accelerator_config`, then the tf32 check.
    ValidateArgs,
}

impl PostInitOrder {
    /// `optim` (and the checks right after it) before the load_best_model_at_end checks.
    pub fn optim_early(self) -> bool {
        self == PostInitOrder::ValidateArgs
    }
}

/// What `Trainer.create_accelerator_and_postprocess` does with `accelerator_config`'s
/// `gradient_accumulation_kwargs` (a dict; `num_steps` with `gradient_accumulation_steps > 1` is
/// a ValueError in every release that has the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaKwargs {
    /// accelerate's `GradientAccumulationPlugin(**kwargs)`, the dict itself completed with
    /// `num_steps` (default `gradient_accumulation_steps`) and `sync_with_dataloader=False` (the
    /// pickled arguments show both): a key the plugin lacks is its TypeError, and `num_steps`
    /// is accelerate's: `backward` divides the loss by it and `accumulate` skips the optimizer
    /// step at all but every `num_steps`-th batch (the scheduler still steps, the gradients are
    /// still zeroed).
    Plugin,
    /// `num_steps` becomes `args.gradient_accumulation_steps`; no plugin is built (the other
    /// keys are ignored, an unknown one too).
    IntoArgs,
    /// As `IntoArgs`, and the plugin is built again with the dict, `num_steps` (default
    /// `gradient_accumulation_steps`) written into it.
    IntoArgsAndPlugin,
    /// As `IntoArgsAndPlugin` with `num_steps` set to 1 in the dict ("the Trainer handles GAS
    /// itself").
    IntoArgsAndPluginOfOne,
}

/// How `TrainingArguments` validates `warmup_steps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmupCheck {
    None,
    /// "warmup_steps must be either 0 or > 1" (an int, not 1).
    ZeroOrAboveOne,
    /// "warmup_steps must be of type int and must be 0 or a positive integer."
    NonNegativeInt,
    /// "warmup_steps must be an integer or a float" (negative values).
    NonNegative,
    /// "Got warmup_steps = .., Expected value warmup_steps >= 0".
    NonNegativeExplained,
}

/// Which exportable callbacks a save refreshes in `stateful_callbacks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackRefresh {
    /// No `stateful_callbacks` in the state.
    Absent,
    /// Only `TrainerControl`; the others keep their Trainer-init snapshot.
    ControlOnly,
    /// Every `ExportableState` callback.
    All,
}

/// How the best checkpoint is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// The best is bubbled to second-to-last; `save_total_limit=1` keeps 2 when the best is not
    /// the newest. `guarded`: a best missing from the list is skipped (4.35+) instead of raising
    /// `ValueError: '<path>' is not in list`. (5.2 rewrote this as "protect the newest and the
    /// best, delete the oldest others down to max(limit, protected)": the same deletions, so it is
    /// not a behavior change.)
    Bubble { guarded: bool },
}

/// How the training sampler is seeded (named after the mechanism, not the version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerKind {
    /// accelerate's `SeedableRandomSampler`: epoch `e` is `randperm(n)` of a generator seeded
    /// with `(data_seed or seed) + e`. Used by transformers 5.24.0 / accelerate 1.15.0.
    SeedableEpochSeed,
    /// accelerate 0.25's `SeedableRandomSampler`, which the Trainer does not `set_epoch`: it
    /// counts its own epochs and, from the second iteration on, adds the epoch to the seed its
    /// generator was last seeded with, so epoch `e` uses `seed + e (e + 1) / 2` (42, 43, 45,
    /// 48, ...). `data_seed` is ignored. Used by transformers 4.36.2 / accelerate 0.25.0.
    SeedableCumulativeSeed,
    /// torch `RandomSampler` without generator: each epoch's permutation comes from a generator
    /// seeded by an int64 drawn from the global torch generator. Used by transformers 4.31.0 /
    /// accelerate 0.21.0 (which ignores `data_seed`).
    GlobalDrawnSeed,
}

/// How a resumed `train()` passes over the epochs its checkpoint already trained (HF's
/// "Skip the first epochs_trained epochs to get the random state of the dataloader at the right
/// point"; see `ResumeBehaviors::skip_trained_epochs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochSkip {
    /// `for _ in train_dataloader: break`: a DataLoader iterator (its `_base_seed` draw) and one
    /// batch (a torch `RandomSampler` draws its seed).
    FirstBatch,
    /// `_ = list(sampler)`: the sampler alone (a torch `RandomSampler` draws its seed; no
    /// DataLoader iterator).
    WholeSampler,
    /// Nothing: the sampler's epoch is set directly.
    None,
}

/// How HF calls `torch.load` on a checkpoint file it reads back. It decides what a file whose
/// pickle calls a global off torch's allow-list (`posix.system`: code) does to a resume: with
/// `weights_only=True` torch refuses it (`UnpicklingError: Weights only load failed`), the
/// resume fails and nothing runs; with `weights_only=False` pickle imports and calls the global
/// while loading, so the code runs before HF sees what the file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorchLoad {
    /// `torch.load(path)` without `weights_only`: the torch release's default decides
    /// ([`TorchLayout::load_weights_only_default`]).
    TorchDefault,
    /// `torch.load(path, weights_only=True)`.
    WeightsOnly,
}

impl TorchLoad {
    /// Whether the load is weights-only under a torch release whose default is `torch_default`.
    pub fn weights_only(self, torch_default: bool) -> bool {
        match self {
            TorchLoad::TorchDefault => torch_default,
            TorchLoad::WeightsOnly => true,
        }
    }
}

behaviors! {
    /// Every HF behavior that differs between transformers releases, as one release has it.
    struct Behaviors;
    /// Arguments spelled differently (format v1 name, this version's name).
    renames: &'static [(&'static str, &'static str)] = ["4.31.0" => &[("eval_strategy", "evaluation_strategy"), ("use_cpu", "no_cuda")], "4.32.0" => &[("eval_strategy", "evaluation_strategy")], "4.41.0" => &[]];
    /// `load_best_model_at_end` checks are skipped for `save_strategy="best"`.
    load_best_skips_best_strategy: bool = ["4.31.0" => false, "4.48.0" => true];
    /// Text inserted in the strategy-mismatch message.
    mismatch_extra: &'static str = ["4.31.0" => "", "5.4.0" => ", except when --save_strategy=\"best\""];
    /// "save_steps {S}" has its space in the steps-mixing message.
    mixing_message_space: bool = ["4.31.0" => false, "4.35.0" => true];
    /// Two ratios passing the scaled multiple test still raise "round multiple".
    both_ratio_fallthrough: bool = ["4.31.0" => true, "4.53.0" => false];
    /// How `warmup_steps` is validated.
    warmup_check: WarmupCheck = [
        "4.31.0" => WarmupCheck::None,
        "4.42.0" => WarmupCheck::ZeroOrAboveOne,
        "4.44.0" => WarmupCheck::NonNegativeInt,
        "5.0.0" => WarmupCheck::NonNegative,
        "5.23.0" => WarmupCheck::NonNegativeExplained,
    ];
    /// `warmup_steps` below 1 is a ratio of the total steps, and a given `warmup_ratio` overrides
    /// it (else: warmup_ratio in [0, 1] is used when warmup_steps is 0).
    warmup_steps_ratio: bool = ["4.31.0" => false, "5.0.0" => true];
    /// How `greater_is_better` defaults.
    greater_default: GreaterDefault = ["4.31.0" => GreaterDefault::NotLossName, "4.42.0" => GreaterDefault::NotEndsWithLoss];
    /// Ratio intervals are written back into the args instead of only into the state.
    ratio_into_args: bool = ["4.31.0" => true, "4.32.0" => false];
    /// Optimizer steps per epoch round up a last partial accumulation (else down).
    ceil_update_steps: bool = ["4.31.0" => false, "4.52.0" => true];
    /// How the training loop fetches the batches of one optimizer update.
    ga_prefetch: Prefetch = ["4.31.0" => Prefetch::None, "4.46.0" => Prefetch::ExamplesRemainder, "4.52.0" => Prefetch::BatchesRemainder];
    /// The optimizer steps at every GA-th batch of the epoch and at its last batch (else at every
    /// GA-th batch since train start, a partial window carrying into the next epoch).
    ga_sync_per_epoch: bool = ["4.31.0" => false, "4.47.0" => true];
    /// How a micro-batch's loss is scaled by gradient accumulation (this model accepts loss
    /// kwargs and ignores `num_items_in_batch`).
    ga_loss: GaLoss = [
        "4.31.0" => GaLoss::Divided,
        "4.46.0" => GaLoss::LogDivided,
        "4.47.0" => GaLoss::Undivided,
        "5.2.0" => GaLoss::GradsDivided,
        "5.5.0" => GaLoss::Undivided,
    ];
    /// Where a forced save at max_steps applies.
    final_step_save: FinalSave = ["4.31.0" => FinalSave::Never, "4.42.0" => FinalSave::AnyStrategy, "4.47.0" => FinalSave::NotBest, "4.50.0" => FinalSave::StepsOnly];
    /// A forced evaluation at max_steps for the steps strategy.
    final_step_eval: bool = ["4.31.0" => false, "5.4.0" => true];
    /// When the best metric is decided.
    best_timing: BestTiming = ["4.31.0" => BestTiming::OnSaveWithMetrics, "4.47.0" => BestTiming::EveryEvalByPath, "4.50.0" => BestTiming::EveryEvalByStep];
    /// `save_strategy="best"` records the best step (and so a best checkpoint).
    best_strategy_records_step: bool = ["4.31.0" => false, "5.4.0" => true];
    /// How rotation orders checkpoints.
    rotation: RotationOrder = ["4.31.0" => RotationOrder::Mtime, "4.38.0" => RotationOrder::Numeric, "4.52.0" => RotationOrder::MtimeWithNumericFallback];
    /// How rotation protects the best checkpoint.
    rotation_protection: Protection = ["4.31.0" => Protection::Bubble { guarded: false }, "4.35.0" => Protection::Bubble { guarded: true }];
    /// The KeyError for a missing metric in best tracking.
    missing_metric_best: KeyErrorText = ["4.31.0" => KeyErrorText::Plain, "4.42.0" => KeyErrorText::Short, "4.46.0" => KeyErrorText::Long, "4.47.0" => KeyErrorText::Short];
    /// The KeyError for a missing metric in the ReduceLROnPlateau lookup.
    missing_metric_plateau: KeyErrorText = ["4.31.0" => KeyErrorText::Plain, "4.42.0" => KeyErrorText::Short, "4.46.0" => KeyErrorText::Long];
    /// Which learning rate a training log shows.
    logged_lr: LoggedLr = ["4.31.0" => LoggedLr::AfterSchedulerStep, "4.51.0" => LoggedLr::UsedByStep];
    /// `grad_norm` in training logs.
    logs_grad_norm: bool = ["4.31.0" => false, "4.38.0" => true];
    /// Without clipping (`max_grad_norm` 0), the norm is still measured, through
    /// `clip_grad_norm_(max_norm=inf)`.
    grad_norm_without_clipping: bool = ["4.31.0" => false, "5.3.0" => true];
    /// Where `_inner_training_loop` enables gradient checkpointing (an error there leaves the
    /// state as far as it was filled): 4.32-5.2 after the state's intervals and batch size.
    gradient_checkpointing_enabled: SchedulerCreated = ["4.31.0" => SchedulerCreated::AfterIntervals, "5.3.0" => SchedulerCreated::BeforeState];
    /// The word in `{Model} does not support {word} checkpointing.` (`gradient_checkpointing`
    /// with a model that does not declare support).
    checkpointing_word: &'static str = ["4.31.0" => "gradient", "5.23.0" => "activation"];
    /// `use_cpu=True` also sets `dataloader_pin_memory = False` in `__post_init__`.
    use_cpu_unpins_memory: bool = ["4.31.0" => false, "4.36.0" => true];
    /// `get_scheduler` passes `lr_scheduler_kwargs` on to `get_inverse_sqrt_schedule` (before,
    /// it drops them: a given `timescale` changes nothing, an unknown key raises nothing).
    inverse_sqrt_takes_kwargs: bool = ["4.31.0" => false, "5.4.0" => true];
    /// polynomial's `lr_end` check says "must be be smaller" (the typo fixed in 4.40).
    polynomial_lr_end_typo: bool = ["4.31.0" => true, "4.40.0" => false];
    /// `get_inverse_sqrt_schedule`'s timescale without warmup: `num_warmup_steps` (0, so the
    /// schedule divides by zero), from 4.39 `num_warmup_steps or 10_000`.
    inverse_sqrt_timescale_fallback: Option<i64> = ["4.31.0" => None, "4.39.0" => Some(10_000)];
    /// `fp16` (or `fp16_full_eval`) on a device that is not CUDA: `__post_init__`'s ValueError,
    /// right after the optim conversion, naming the devices the release supports (4.41 dropped
    /// the check: fp16 trains with CPU autocast).
    fp16_cpu_error: Option<&'static str> = [
        "4.31.0" => Some("FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation (`--fp16_full_eval`) can only be used on CUDA devices."),
        "4.32.0" => Some("FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation (`--fp16_full_eval`) can only be used on CUDA or NPU devices."),
        "4.34.0" => Some("FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation (`--fp16_full_eval`) can only be used on CUDA or NPU devices or certain XPU devices (with IPEX)."),
        "4.40.0" => Some("FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half precision evaluation (`--fp16_full_eval`) can only be used on CUDA or MLU devices or NPU devices or certain XPU devices (with IPEX)."),
        "4.41.0" => None,
    ];
    /// `bf16` (or `bf16_full_eval`) without `use_cpu` on a machine without a bf16 GPU: before
    /// 4.52 it trains with CPU autocast; after, `__post_init__` (5.2+: `_validate_args`) raises.
    bf16_cpu_error: Option<&'static str> = [
        "4.31.0" => None,
        "4.52.0" => Some("Your setup doesn't support bf16/gpu."),
        "5.0.0" => Some("Your setup doesn't support bf16/gpu. You need to assign use_cpu if you want to train the model on CPU"),
        "5.2.0" => Some("Your setup doesn't support bf16/gpu. You need to assign use_cpu if you want to train the model on CPU."),
    ];
    /// `Trainer.__init__`: bf16 with `half_precision_backend="auto"` on a CPU device sets the
    /// argument to "cpu_amp" (training_args.bin holds it); 4.31-4.34 only with sharded_ddp.
    bf16_sets_cpu_amp: bool = ["4.31.0" => false, "4.35.0" => true];
    /// `__post_init__` appends "inputs" to `include_for_metrics` when the deprecated
    /// `include_inputs_for_metrics` is set (4.46 added the list).
    include_inputs_appends: bool = ["4.31.0" => false, "4.46.0" => true];
    /// `__post_init__` turns `include_num_input_tokens_seen=True` into "all" (4.57 added the
    /// "non_padding" mode).
    tokens_seen_true_is_all: bool = ["4.31.0" => false, "4.57.0" => true];
    /// jit_mode_eval: the traced and frozen model is then called by `prediction_step` with one
    /// more argument than its traced `forward(input_x, labels)` takes (4.57 passes
    /// `num_items_in_batch`): a RuntimeError at the first evaluation. Before 4.57 the traced
    /// model evaluates as the model does. (5.0 removed the argument.)
    jit_eval_call_fails: bool = ["4.31.0" => false, "4.57.0" => true];
    /// use_legacy_prediction_loop: `prediction_loop` repeats each batch's loss by the
    /// DataLoader's `batch_size`, which accelerate's prepared loader (a batch sampler) leaves
    /// None: `TypeError` from torch's `repeat()` at the first evaluation, until 4.47 took the
    /// batch size from the arguments.
    legacy_prediction_loop_fails: bool = ["4.31.0" => true, "4.47.0" => false];
    /// `_load_best_model` where the best checkpoint holds no full weights file: sharded weights
    /// load through `load_sharded_checkpoint` when their index is one the release looks for:
    /// `pytorch_model.bin.index.json` only, until 4.41 looks for `model.safetensors.index.json`
    /// too; else HF warns "Could not locate the best model" and the last weights stay.
    best_model_reads_safetensors_index: bool = ["4.31.0" => false, "4.41.0" => true];
    /// The worker count `dataloader_prefetch_factor`'s error names ("... when
    /// --dataloader_num_workers > N."): 5.2 corrected it to 0.
    prefetch_factor_message_workers: u8 = ["4.31.0" => 1, "5.2.0" => 0];
    /// `gradient_checkpointing` and `gradient_checkpointing_kwargs` are deprecated aliases of
    /// `activation_checkpointing(_kwargs)` (5.23): `__post_init__` copies an old name given into
    /// the new one left unset, then mirrors the new into the old; both default to False/None.
    checkpointing_aliases: bool = ["4.31.0" => false, "5.23.0" => true];
    /// A bitsandbytes optimizer (`paged_adamw_32bit`, ...) without bitsandbytes installed: the
    /// error `create_optimizer` raises (type, message).
    bnb_missing_error: (&'static str, &'static str) = [
        "4.31.0" => ("ValueError", "Trainer tried to instantiate bnb optimizer but bnb is not installed!"),
        "4.45.0" => ("ValueError", "Trainer tried to instantiate bnb optimizer but `bitsandbytes` is not installed!"),
        "5.0.0" => ("ImportError", "You need to install `bitsandbytes` in order to use bitsandbytes optimizers: `pip install -U bitsandbytes`"),
    ];
    /// `neftune_noise_alpha` (4.35+): `train()` asks the model for its input embeddings, which a
    /// PreTrainedModel without them answers with NotImplementedError, its message from 4.54 on
    /// naming the class (`{}`).
    neftune_error: &'static str = [
        "4.31.0" => "",
        "4.54.0" => "`get_input_embeddings` not auto‑handled for {}; please override in the subclass.",
    ];
    /// When `train()` creates the optimizer (whose constructor checks lr, betas and eps) relative
    /// to filling its TrainerState: 5.1-5.2 create it before the state and the scheduler after.
    optimizer_created: SchedulerCreated = ["4.31.0" => SchedulerCreated::BeforeState, "5.3.0" => SchedulerCreated::AfterState];
    /// When `train()` creates the scheduler relative to filling its TrainerState (an error there
    /// leaves the state as far as it was filled).
    scheduler_created: SchedulerCreated = [
        "4.31.0" => SchedulerCreated::BeforeState,
        "5.1.0" => SchedulerCreated::AfterIntervals,
        "5.3.0" => SchedulerCreated::AfterState,
    ];
    /// Training `loss` rounded to 4 decimals.
    round_loss: bool = ["4.31.0" => true, "5.0.0" => false];
    /// Log `epoch` rounded to 2 decimals.
    round_epoch: bool = ["4.31.0" => true, "4.40.0" => false];
    /// `TrainerState.epoch` starts at 0 instead of None.
    epoch_starts_at_zero: bool = ["4.31.0" => false, "5.3.0" => true];
    /// TrainerState has `logging_steps`, `eval_steps`, `save_steps`.
    state_has_intervals: bool = ["4.31.0" => false, "4.32.0" => true];
    /// TrainerState has `train_batch_size` and `num_input_tokens_seen`.
    state_has_batch_and_tokens: bool = ["4.31.0" => false, "4.36.0" => true];
    /// TrainerState's `stateful_callbacks`, and which callbacks a save refreshes.
    stateful_callbacks: CallbackRefresh = ["4.31.0" => CallbackRefresh::Absent, "4.41.0" => CallbackRefresh::ControlOnly, "4.45.0" => CallbackRefresh::All];
    /// TrainerState has `best_global_step`.
    state_has_best_global_step: bool = ["4.31.0" => false, "4.50.0" => true];
    /// `lr_scheduler_kwargs` reach the schedulers.
    plateau_kwargs: bool = ["4.31.0" => false, "4.36.0" => true];
    /// `AcceleratorConfig`'s fields (dataclass order; `accelerator_config` is 4.38+, before it
    /// TrainingArguments' TypeError): 4.40 added gradient_accumulation_kwargs, 4.41 non_blocking,
    /// 4.42 use_configured_state (a key a release lacks is AcceleratorConfig's TypeError).
    accelerator_config_keys: &'static [&'static str] = [
        "4.31.0" => &[],
        "4.38.0" => &["split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler"],
        "4.40.0" => &["split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler", "gradient_accumulation_kwargs"],
        "4.41.0" => &["split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler", "non_blocking", "gradient_accumulation_kwargs"],
        "4.42.0" => &["split_batches", "dispatch_batches", "even_batches", "use_seedable_sampler", "non_blocking", "gradient_accumulation_kwargs", "use_configured_state"],
    ];
    /// A dict `accelerator_config` stays a dict in TrainingArguments (training_args.bin pickles it
    /// as given) and becomes an `AcceleratorConfig` only in `Trainer.__init__`, where an unknown
    /// key raises; 4.39 converts it in `__post_init__` (a JSON file's path is converted there in
    /// every release).
    accelerator_dict_kept: bool = ["4.31.0" => false, "4.38.0" => true, "4.39.0" => false];
    /// The order of `__post_init__`'s optim, accelerator_config, tf32 and prefetch checks.
    post_init_order: PostInitOrder = [
        "4.31.0" => PostInitOrder::AcceleratorAfterWarmupChecks,
        "4.46.0" => PostInitOrder::AcceleratorAfterOptim,
        "5.2.0" => PostInitOrder::ValidateArgs,
    ];
    /// What `gradient_accumulation_kwargs` does (the key is 4.40+).
    gradient_accumulation_kwargs: GaKwargs = [
        "4.31.0" => GaKwargs::Plugin,
        "4.46.0" => GaKwargs::IntoArgs,
        "5.2.0" => GaKwargs::IntoArgsAndPlugin,
        "5.5.0" => GaKwargs::IntoArgsAndPluginOfOne,
    ];
    /// `Trainer.__init__` builds its Accelerator (`create_accelerator_and_postprocess`, whose
    /// errors are `accelerator_config`'s) before its argument checks (batch_eval_metrics, the
    /// eval_dataset, the best metric: `_validate_args`); before, after them.
    accelerator_before_init_checks: bool = ["4.31.0" => false, "5.2.0" => true];
    /// The Trainer checks at init that evaluation has an eval_dataset.
    init_checks_eval_dataset: bool = ["4.31.0" => false, "4.46.0" => true];
    /// The Trainer checks at init that "best" / load_best has a metric.
    init_checks_best_metric: bool = ["4.31.0" => false, "4.47.0" => true];
    /// EarlyStoppingCallback asserts load_best_model_at_end.
    early_stopping_requires_load_best: bool = ["4.31.0" => true, "4.49.0" => false];
    /// train_loss divides by `global_step` itself, so a run of 0 steps raises ZeroDivisionError
    /// (else by `max(global_step, 0.001)`).
    train_loss_zero_division: bool = ["4.31.0" => true, "4.39.0" => false];
    /// A training log needs a step since the last one (`global_step > _globalstep_last_logged`).
    log_requires_new_step: bool = ["4.31.0" => false, "4.37.0" => true];
    /// Checkpoints are written into `tmp-checkpoint-N`, renamed when complete.
    staging_dir: bool = ["4.31.0" => false, "4.36.0" => true, "4.39.0" => false];
    /// rng_state.pth is written after trainer_state.json.
    rng_after_state: bool = ["4.31.0" => true, "4.36.0" => false];
    /// The end-of-train save_total_limit=1 cleanup uses os.path.samefile (raises when the best
    /// folder is missing).
    cleanup_uses_samefile: bool = ["4.31.0" => false, "4.32.0" => true];
    /// config.json's dtype key.
    config_dtype_key: &'static str = ["4.31.0" => "torch_dtype", "4.56.0" => "dtype"];
    /// config.json has `use_cache: false`.
    config_use_cache: bool = ["4.31.0" => false, "5.0.0" => true];
    /// A model that is not a `PreTrainedModel` (the `module` kind: `_save`'s "only saving its
    /// state dict" branch) gets `safetensors.torch.save_file(..., metadata={"format": "pt"})`
    /// (before: no metadata).
    state_dict_safetensors_metadata: bool = ["4.31.0" => false, "4.37.0" => true];
    /// For a peft `PeftModel` (forward `(*args, **kwargs)`), `remove_unused_columns` reads the
    /// columns to keep from the base model's forward (before: the wrapper's, which keeps none).
    peft_forward_columns_of_base: bool = ["4.31.0" => false, "4.37.0" => true];
    /// For a `PeftModel`, the default `label_names` come from the base model's forward (before:
    /// the wrapper's, which names none: evaluation then has no labels and no `eval_loss`).
    peft_label_names_of_base: bool = ["4.31.0" => false, "4.55.0" => true];
    /// `train()` aligns the model config's special tokens with a tokenizer processing class
    /// (`_align_special_tokens`): the world's tokenizer has a pad token and the config none, so
    /// config.json gains `pad_token_id`.
    aligns_special_tokens: bool = ["4.31.0" => false, "4.56.0" => true];
    /// `optim_args` reach torch's SGD (momentum, dampening, weight_decay, nesterov), Adagrad
    /// (lr_decay, weight_decay, eps) and RMSprop (momentum, alpha, eps, weight_decay, centered)
    /// as constructor keywords (`float(value)`; the booleans `value.lower() in ("true", "1",
    /// "yes")`); before, they got `lr` only.
    torch_optimizers_take_optim_args: bool = ["4.31.0" => false, "5.3.0" => true];
    /// HF's weight-decay exclusion also matches norm-named parameters.
    decay_norm_patterns: bool = ["4.31.0" => false, "4.49.0" => true];
    /// How the training sampler is seeded.
    /// (accelerate 0.25 always made it seedable, 0.26 only on request, which the Trainer makes
    /// from 4.38.)
    sampler: SamplerKind = [
        "4.31.0" => SamplerKind::GlobalDrawnSeed,
        "4.36.0" => SamplerKind::SeedableCumulativeSeed,
        "4.37.0" => SamplerKind::GlobalDrawnSeed,
        "4.38.0" => SamplerKind::SeedableEpochSeed,
    ];
    /// The seedable sampler starts from `data_seed` when given (else always from `seed`).
    sampler_uses_data_seed: bool = ["4.31.0" => false, "4.46.0" => true];
    /// `eval_loss` ignores non-finite batch losses when `logging_nan_inf_filter`.
    eval_loss_skips_nonfinite: bool = ["4.31.0" => false, "5.23.0" => true];
    /// A training dataloader of length 0 runs on max_steps with sys.maxsize epochs.
    empty_dataloader_runs_on_max_steps: bool = ["4.31.0" => false, "4.49.0" => true];
    /// An empty training dataloader yields one `None` batch (accelerate before 1.3): the
    /// TypeError the Trainer's first use of it raises.
    empty_dataloader_none_error: Option<&'static str> = [
        "4.31.0" => Some("object of type 'NoneType' has no len()"),
        "4.47.0" => Some("argument of type 'NoneType' is not iterable"),
        "4.49.0" => None,
    ];
}

behaviors! {
    /// What a torch release writes and computes differently: state-dict key orders (dicts are
    /// pickled in insertion order), the archive layout, and the numeric details that changed.
    /// Keyed by the torch release of a profile's torch line (golden/hf-V/ENVIRONMENT).
    struct TorchLayout;
    /// `torch.optim.AdamW` param_group keys (HF's own AdamW writes its own).
    adamw_group_keys: &'static [&'static str] = [
        "2.1.0" => &["weight_decay", "lr", "betas", "eps", "amsgrad", "foreach", "maximize", "capturable", "differentiable", "fused"],
        "2.7.0" => &["weight_decay", "lr", "betas", "eps", "amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay"],
    ];
    /// `_single_tensor_adamw` multiplies by `1 - lr * weight_decay` even when it is 0.
    adamw_always_decays: bool = ["2.1.0" => true, "2.7.0" => false];
    /// `bias_correction2 ** 0.5` instead of `math.sqrt(bias_correction2)`.
    adamw_pow_half: bool = ["2.1.0" => false, "2.5.0" => true];
    /// `torch.optim.SGD` param_group keys.
    sgd_group_keys: &'static [&'static str] = [
        "2.1.0" => &["weight_decay", "lr", "momentum", "dampening", "nesterov", "maximize", "foreach", "differentiable"],
        "2.3.0" => &["weight_decay", "lr", "momentum", "dampening", "nesterov", "maximize", "foreach", "differentiable", "fused"],
    ];
    /// `torch.optim.Adagrad` param_group keys.
    adagrad_group_keys: &'static [&'static str] = [
        "2.1.0" => &["weight_decay", "lr", "lr_decay", "eps", "initial_accumulator_value", "foreach", "maximize", "differentiable"],
        "2.4.0" => &["weight_decay", "lr", "lr_decay", "eps", "initial_accumulator_value", "foreach", "maximize", "differentiable", "fused"],
    ];
    /// `torch.optim.RMSprop` param_group keys.
    rmsprop_group_keys: &'static [&'static str] = [
        "2.1.0" => &["weight_decay", "lr", "momentum", "alpha", "eps", "centered", "foreach", "maximize", "differentiable"],
        "2.4.0" => &["weight_decay", "lr", "momentum", "alpha", "eps", "centered", "capturable", "foreach", "maximize", "differentiable"],
    ];
    /// RMSprop's `step` state is a 0-dim float32 tensor (else a Python int).
    rmsprop_step_tensor: bool = ["2.1.0" => false, "2.4.0" => true];
    /// `gather()` with a float index tensor: its RuntimeError (LabelSmoother with float labels).
    gather_index_dtype_error: &'static str = [
        "2.1.0" => "gather(): Expected dtype int64 for index",
        "2.8.0" => "gather(): Expected dtype int32/int64 for index",
    ];
    /// `torch.optim.AdamW(..., fused=True)` takes CPU parameters; before, its constructor raises
    /// `RuntimeError: `fused=True` requires all the params to be floating point Tensors of
    /// supported devices: ['cuda', 'xpu', 'privateuseone'].` (`optim="adamw_torch_fused"`).
    fused_adamw_on_cpu: bool = ["2.1.0" => false, "2.4.0" => true];
    /// SGD without momentum keeps a `momentum_buffer: None` state per stepped parameter.
    sgd_state_momentum_none: bool = ["2.1.0" => true, "2.4.0" => false];
    /// `LambdaLR.state_dict()` keys.
    lambda_lr_keys: &'static [&'static str] = [
        "2.1.0" => &["base_lrs", "last_epoch", "verbose", "_step_count", "_get_lr_called_within_step", "_last_lr", "lr_lambdas"],
        "2.7.0" => &["base_lrs", "last_epoch", "_step_count", "_get_lr_called_within_step", "_last_lr", "lr_lambdas"],
        "2.8.0" => &["base_lrs", "last_epoch", "_step_count", "_is_initial", "_get_lr_called_within_step", "_last_lr", "lr_lambdas"],
    ];
    /// `ReduceLROnPlateau.state_dict()` keys (`_last_lr` only once stepped before 2.3).
    plateau_keys: &'static [&'static str] = [
        "2.1.0" => &["factor", "min_lrs", "patience", "verbose", "cooldown", "cooldown_counter", "mode", "threshold", "threshold_mode", "best", "num_bad_epochs", "mode_worse", "eps", "last_epoch", "_last_lr"],
        "2.4.0" => &["factor", "min_lrs", "patience", "verbose", "cooldown", "cooldown_counter", "mode", "threshold", "threshold_mode", "eps", "last_epoch", "_last_lr", "mode_worse", "best", "num_bad_epochs"],
        "2.6.0" => &["factor", "default_min_lr", "min_lrs", "patience", "verbose", "cooldown", "cooldown_counter", "mode", "threshold", "threshold_mode", "eps", "last_epoch", "_last_lr", "mode_worse", "best", "num_bad_epochs"],
        "2.7.0" => &["factor", "default_min_lr", "min_lrs", "patience", "cooldown", "cooldown_counter", "mode", "threshold", "threshold_mode", "eps", "last_epoch", "_last_lr", "mode_worse", "best", "num_bad_epochs"],
        "2.8.0" => &["factor", "default_min_lr", "min_lrs", "patience", "cooldown", "eps", "last_epoch", "_last_lr", "mode_worse", "mode", "threshold", "threshold_mode", "best", "cooldown_counter", "num_bad_epochs"],
    ];
    /// `ReduceLROnPlateau` sets `_last_lr` at construction (else at its first step).
    plateau_last_lr_at_init: bool = ["2.1.0" => false, "2.3.0" => true];
    /// `ReduceLROnPlateau` accepts the `verbose` keyword.
    plateau_accepts_verbose: bool = ["2.1.0" => true, "2.7.0" => false];
    /// `torch.save` writes `.format_version` and `.storage_alignment` and stores storages in
    /// first-use order (else lexicographic key order).
    archive_format_version: bool = ["2.1.0" => false, "2.7.0" => true];
    /// `torch.load`'s default for `weights_only` (2.6 turned it on; 2.4-2.5 only warned): a
    /// load that does not pass it refuses a pickle calling a global off torch's allow-list
    /// from 2.6 on, and runs it before. Checked against torch 2.1.2 and 2.13.0 with a file
    /// calling `posix.system` (`ckptspec inspect` reads it: [`TorchLoad`]).
    load_weights_only_default: bool = ["2.1.0" => false, "2.6.0" => true];
}

behaviors! {
    /// How `train(resume_from_checkpoint=...)` treats a checkpoint folder, as HF's source has it
    /// (`ckptspec inspect` reads it). A table of its own: tests/changes.rs checks [`Behaviors`]
    /// only, as some of these rows show in no golden outcome (the texts for damaged files that no
    /// scenario cuts: tests/resume.rs's cases against each release's real HF found them); the
    /// contract-v2 resume goldens show the others in CHANGES.md. Each change was read in the
    /// releases on both sides of it.
    struct ResumeBehaviors;
    /// `train()` reads the checkpoint's `trainer_state.json` unconditionally (a missing one is
    /// `FileNotFoundError`); before, only when it exists (else the run restarts at step 0 with
    /// the checkpoint's weights).
    requires_trainer_state: bool = ["4.31.0" => false, "4.36.0" => true];
    /// A restored `best_model_checkpoint` whose folder is gone is dropped with a warning ("The
    /// best checkpoint ... does not exist anymore. Ignoring it for this run.").
    drops_missing_best: bool = ["4.31.0" => false, "5.17.0" => true];
    /// The final `train_loss` averages over the steps of this `train()` call
    /// (`global_step - _initial_global_step`); before, over every step (`global_step`), so a
    /// resumed run divided its own losses by steps it did not train.
    train_loss_per_call: bool = ["4.31.0" => false, "5.19.0" => true];
    /// A resume inside an epoch visits that epoch's rows in the order of epoch 0: the Trainer
    /// calls `set_epoch(epoch)` before `skip_first_batches`, whose new DataLoaderShard starts at
    /// iteration 0 and, from accelerate 1.7 (pinned from 4.52), passes `set_epoch(0)` on to the
    /// seedable sampler. 5.0 calls `set_epoch` after `skip_first_batches`. Found by
    /// tests/resume.rs against the real HF of each profile.
    mid_epoch_resume_reorders: bool = ["4.31.0" => false, "4.52.0" => true, "5.0.0" => false];
    /// The resumed run batches with the checkpoint state's `train_batch_size` (4.36 recorded
    /// it), not with the new `per_device_train_batch_size`; 5.2 does so only with
    /// `auto_find_batch_size`. Found by the resume-batch-size-changed and
    /// args-auto-find-batch-size-resume goldens.
    batch_size_from_state: StateBatchSize = [
        "4.31.0" => StateBatchSize::Never,
        "4.36.0" => StateBatchSize::Always,
        "5.2.0" => StateBatchSize::WithAutoFindBatchSize,
    ];
    /// How `train()` passes over the epochs a checkpoint already trained before the first one it
    /// trains: by starting the DataLoader and fetching one batch (a `_base_seed` draw and, for a
    /// torch `RandomSampler`, its seed draw from the global generator), by `list(sampler)` (only
    /// the sampler's own draw; a seedable sampler counts an epoch), or not at all (4.41 dropped
    /// the loop). It decides the row order of a resume inside a later epoch where the sampler
    /// draws its seed from the global generator (4.31-4.35, 4.37).
    skip_trained_epochs: EpochSkip = ["4.31.0" => EpochSkip::FirstBatch, "4.34.0" => EpochSkip::WholeSampler, "4.41.0" => EpochSkip::None];
    /// In the resumed epoch the loop's batch counter `step` restarts at -1 after
    /// `skip_first_batches` (the epoch's progress adds the skipped batches back), so
    /// `(step + 1) == steps_in_epoch` never holds and a last partial accumulation window of that
    /// epoch does not step the optimizer (its gradients carry on); 4.57 sets
    /// `step = steps_trained_in_current_epoch - 1`.
    resumed_step_restarts: bool = ["4.31.0" => true, "4.57.0" => false];
    /// The resumed epoch's updates are cut from the batches left after the skip: `total_updates`
    /// fetches of GA batches (the last one `remainder`), counted from the skip point; 5.3 loops
    /// `update_step in range(steps_trained // GA, num_update_steps_per_epoch)` over the epoch's
    /// own windows. (Before 4.46 each fetch is one batch, so both read the same.)
    resumed_updates_from_skip_point: bool = ["4.31.0" => true, "5.3.0" => false];
    /// `_init_training_state` (5.3) reads the checkpoint's trainer_state.json before
    /// `_load_optimizer_and_scheduler`; before, the optimizer and scheduler were loaded first,
    /// into a fresh `TrainerState` (`max_steps` 0). It decides the state a damaged optimizer.pt
    /// or scheduler.pt leaves.
    state_before_optimizer: bool = ["4.31.0" => false, "5.3.0" => true];
    /// `str()` of the `EOFError` `torch.load` raises for an empty optimizer.pt, scheduler.pt or
    /// rng_state.pth: pickle's, or torch's weights-only unpickler's empty one (torch 2.6 made
    /// `weights_only=True` the default; 4.48's profile is the first on torch 2.6). Found by
    /// truncating each file of a real checkpoint (tests/resume.rs).
    empty_state_file_message: &'static str = ["4.31.0" => "Ran out of input", "4.48.0" => ""];
    /// The same for an empty pytorch_model.bin: `_load_from_checkpoint` passes `weights_only=True`
    /// from 4.37.
    empty_weights_file_message: &'static str = ["4.31.0" => "Ran out of input", "4.37.0" => ""];
    /// How `_load_optimizer_and_scheduler` calls `torch.load` on optimizer.pt and scheduler.pt
    /// (both, only when both exist): without `weights_only` until 4.50, `weights_only=True`
    /// from 4.51 (read in the trainer.py of 4.31.0, 4.32.1, 4.35.2, 4.37.2, 4.46.3, 4.47.1,
    /// 4.49.0, 4.50.3, 4.51.3, 4.52.4, 4.57.6, 5.0.0, 5.14.1, 5.17.0, 5.18.0, 5.24.0). The
    /// profiles on torch before 2.6 (4.31-4.47) therefore run a pickled global; 4.48-4.50 refuse
    /// it through torch 2.6's default.
    optimizer_scheduler_load: TorchLoad = ["4.31.0" => TorchLoad::TorchDefault, "4.51.0" => TorchLoad::WeightsOnly];
    /// How `_load_rng_state` calls `torch.load` on rng_state.pth (inside `safe_globals()`, which
    /// allow-lists numpy's array globals, from 4.47): `weights_only=True` in 4.51 only; 4.52
    /// dropped the argument again (transformers PR 37162), 5.0 restored it (CVE-2026-1839,
    /// transformers PR 43140). Read in the same releases as `optimizer_scheduler_load`.
    rng_state_load: TorchLoad = [
        "4.31.0" => TorchLoad::TorchDefault,
        "4.51.0" => TorchLoad::WeightsOnly,
        "4.52.0" => TorchLoad::TorchDefault,
        "5.0.0" => TorchLoad::WeightsOnly,
    ];
    /// How `_load_from_checkpoint` and `_load_best_model` call `torch.load` on
    /// pytorch_model.bin: `weights_only=True` from 4.37 (on every torch from 1.13, so every
    /// profile); the same change as `empty_weights_file_message`.
    weights_file_load: TorchLoad = ["4.31.0" => TorchLoad::TorchDefault, "4.37.0" => TorchLoad::WeightsOnly];
    /// What torch appends to a `PytorchStreamReader failed reading zip archive: ...` message
    /// (`not a ZIP archive`, `failed finding central directory`: a torch file cut short):
    /// torch 2.11 explains it (5.4's profile is the first on torch 2.11).
    zip_error_suffix: &'static str = [
        "4.31.0" => "",
        "5.4.0" => ". This is an internal miniz error. If you are seeing this error, there is a high likelihood that your checkpoint file is corrupted. This can happen if the checkpoint was not saved properly, was transferred incorrectly, or the file was modified after saving.",
    ];
    /// The `SafetensorError` texts (after "Error while deserializing header: ") for a
    /// model.safetensors under 8 bytes and for one shorter than its header says: safetensors
    /// 0.6+ prints them in words, 0.4-0.5 by their Rust names. 4.31.0's profile is unpinned
    /// (safetensors 0.8.0), 4.32-4.54 pin 0.4.1-0.5.3, 4.55+ run 0.6.2 and later.
    safetensors_header_errors: (&'static str, &'static str) = [
        "4.31.0" => ("header too small", "invalid header length"),
        "4.32.0" => ("HeaderTooSmall", "InvalidHeaderLength"),
        "4.55.0" => ("header too small", "invalid header length"),
    ];
}

behaviors! {
    /// What a launch of several processes changes (contract v3 part 2, issue 18), keyed by the
    /// transformers release (its profile pins the accelerate that shards the data). Found in the
    /// distributed goldens (torchrun, gloo, 2 processes or 2 nodes); `ckptspec versions` prints it.
    struct LaunchBehaviors;
    /// Where the training order comes from in a launch (accelerate replaces or keeps the
    /// Trainer's `RandomSampler` differently per release; found from the goldens' first losses).
    sampler: LaunchSampler = [
        "4.31.0" => LaunchSampler::OwnGenerator,
        "4.35.0" => LaunchSampler::EpochZeroSeed,
        "4.36.0" => LaunchSampler::AsOneProcess,
        "4.38.0" => LaunchSampler::GlobalDrawnSeed,
        "4.40.0" => LaunchSampler::AsOneProcess,
    ];
    /// Every training loss is multiplied by the number of processes before backward and logging
    /// (`average_tokens_across_devices` with a model whose forward takes `**kwargs`, which the
    /// world's models do, and `num_items_in_batch` counted): the averaged gradient becomes their sum.
    loss_times_world: bool = ["4.31.0" => false, "4.54.0" => true];
    /// `TrainingArguments.__post_init__` turns `average_tokens_across_devices` on in a launch
    /// (training_args.bin records True; 4.57 made True the default everywhere).
    average_tokens_on_in_launch: bool = ["4.31.0" => false, "4.54.0" => true];
    /// The evaluation loss too (`eval_loss` doubles with 2 processes).
    eval_loss_times_world: bool = ["4.31.0" => false, "4.57.0" => true];
    /// The pickled arguments' `distributed_state` (accelerate's `PartialState`, backend "gloo"
    /// in every release) holds an indexed device `cpu:<local_process_index>` (the arguments'
    /// cached `_setup_devices` is that device); before, the plain `cpu` device.
    state_device_indexed: bool = ["4.31.0" => false, "4.40.0" => true];
    /// Releases that stage a checkpoint in `tmp-checkpoint-N` (4.36-4.38): what becomes of the
    /// staging folder a process that does not save leaves on another node's disk (its rng file
    /// only). 4.36 lets every process rename its disk's folder (main process first), 4.37 only the
    /// saving ones (the folder stays), 4.38 has the others delete it. On a disk that nodes share,
    /// 4.38's delete races the main process's rename of the same folder (between the same two
    /// barriers): the race `staging-rename-vs-rmtree` of conformance/races.json
    /// ([`crate::hf::races`]); the golden and the Rust trainer have the rename first.
    staging_elsewhere: StagingElsewhere = [
        "4.31.0" => StagingElsewhere::Renamed,
        "4.37.0" => StagingElsewhere::Left,
        "4.38.0" => StagingElsewhere::Removed,
    ];
    /// A resume in a launch fails loading optimizer.pt: `torch.load(..., map_location=args.device)`
    /// with the indexed `cpu:<local rank>` device raises torch's RuntimeError ("don't know how to
    /// restore data location of torch.storage.UntypedStorage (tagged with cpu:0)"; each process
    /// names its own device).
    map_location_fails: bool = ["4.31.0" => false, "4.40.0" => true, "5.18.0" => false];
    /// That error names each process's own device (`cpu:1` in the second process); later
    /// releases give every process `cpu:0`.
    map_location_device_per_process: bool = ["4.31.0" => true, "4.43.0" => false];
    /// `PartialState` sets `local_process_index` before `num_processes` and `process_index` in a
    /// launch (the pickled `__dict__` keeps that order); later releases keep the one-process order.
    state_local_index_first: bool = ["4.31.0" => true, "4.40.0" => false];
    /// `save_pretrained` writes the weights and config.json only in the launch's main process:
    /// another node's first process (save_on_each_node) writes the rest of the checkpoint
    /// without them; before, it wrote them too.
    save_pretrained_main_only: bool = ["4.31.0" => false, "5.15.0" => true];
    /// A launch without `use_cpu=True` here (no GPU): the world accelerate forms. 5.4 is the first
    /// profile on accelerate 1.13, whose `PartialState._prepare_backend` takes `MULTI_CPU` only
    /// `if distributed_type is None and cpu and (LOCAL_RANK or WORLD_SIZE > 1)`; 1.12 and before
    /// (and 0.21-0.28's `__init__`) lack `and cpu` (golden: dist-without-use-cpu).
    without_use_cpu: WithoutUseCpu = ["4.31.0" => WithoutUseCpu::Gloo, "5.4.0" => WithoutUseCpu::EveryProcessAlone];
}

impl TorchLayout {
    /// torch 2.1.2 (with transformers 4.31.0) and torch 2.13.0 (with 5.24.0): for tests.
    pub fn v2_1() -> TorchLayout {
        TorchLayout::at(Version(2, 1, 2))
    }
    pub fn v2_13() -> TorchLayout {
        TorchLayout::at(Version(2, 13, 0))
    }
}
