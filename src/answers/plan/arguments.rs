//! Which of a config's arguments reach the executor. The executor reports an argument it does not
//! model as "not yet implemented" rather than ignoring it; a plan cannot stop there, so every
//! argument the executor would refuse is taken out here and named in the output, never
//! silently:
//!
//! - arguments that do not change when checkpoints are written, evaluated or deleted
//!   ([`NOT_AFFECTING`], one line of reason each);
//! - arguments the runner owns (`scenario::RUNNER_ARGS`: output_dir, logging_dir, report_to,
//!   disable_tqdm);
//! - anything else the executor does not model: it may change the plan, so the plan says that it
//!   assumed the version's default.
//!
//! An argument is taken out only where the version has that field: a name the version does not
//! know stays in, so the version's own TypeError is the answer, as under HF.

use crate::hf::{args, arguments};
use crate::hf::profile::Profile;
use crate::world::scenario::RUNNER_ARGS;
use serde_json::{Map, Value};

/// Arguments that do not affect when checkpoints are written, evaluated or deleted, with the
/// reason. Their values are not validated by the plan (HF may still reject a bad one).
pub const NOT_AFFECTING: &[(&str, &str)] = &[
    ("optim", "chooses the optimizer: changes what optimizer.pt holds, not when checkpoints are written"),
    ("optim_target_modules", "which modules a special optimizer trains: numbers only"),
    ("fp16_opt_level", "apex mixed-precision level: numbers only"),
    ("half_precision_backend", "mixed-precision backend: numbers only"),
    ("gradient_checkpointing_kwargs", "options of gradient checkpointing: the same steps and checkpoints"),
    ("activation_checkpointing_kwargs", "options of activation checkpointing: the same steps and checkpoints"),
    ("torch_compile", "compiles the model: the same steps and checkpoints"),
    ("torch_compile_backend", "compiler backend: the same steps and checkpoints"),
    ("torch_compile_mode", "compiler mode: the same steps and checkpoints"),
    ("torchdynamo", "compiler backend (old name): the same steps and checkpoints"),
    ("use_liger_kernel", "fused kernels: numbers only"),
    ("liger_kernel_config", "fused kernels: numbers only"),
    ("use_mps_device", "which device runs the model (the plan assumes one device)"),
    ("use_ipex", "Intel extension for the model: numbers only"),
    ("torch_empty_cache_steps", "frees accelerator memory every N steps: the same steps and checkpoints"),
    ("dataloader_num_workers", "data-loading speed, not the order or number of batches"),
    ("dataloader_pin_memory", "data-loading speed, not the order or number of batches"),
    ("length_column_name", "the column group_by_length reads, not the number of steps"),
    ("eval_accumulation_steps", "how evaluation outputs are gathered for compute_metrics: the metrics are given or assumed"),
    ("eval_use_gather_object", "how evaluation outputs are gathered for compute_metrics: the metrics are given or assumed"),
    ("include_for_metrics", "what compute_metrics receives: the metrics are given or assumed"),
    ("average_tokens_across_devices", "loss normalization across devices: numbers only"),
    ("past_index", "reuse of model outputs between steps: numbers only"),
    ("full_determinism", "deterministic kernels: numbers only"),
    ("log_level", "console logging only"),
    ("log_level_replica", "console logging only"),
    ("log_on_each_node", "console logging only"),
    ("run_name", "a name for reporting integrations only"),
    ("project", "a name for reporting integrations only"),
    ("trackio_space_id", "a reporting integration only"),
    ("trackio_bucket_id", "a reporting integration only"),
    ("trackio_static_space_id", "a reporting integration only"),
    ("skip_memory_metrics", "adds memory keys to the final metrics only"),
    ("include_num_input_tokens_seen", "adds token counts to logs and trainer_state.json, not checkpoints"),
    ("tpu_metrics_debug", "debug output only"),
    ("do_train", "read by HF's example scripts, not by the Trainer"),
    ("do_eval", "read by HF's example scripts, not by the Trainer"),
    ("do_predict", "read by HF's example scripts, not by the Trainer"),
    ("overwrite_output_dir", "read by HF's example scripts, not by the Trainer"),
    ("resume_from_checkpoint", "read by HF's example scripts; the Trainer resumes only through train(resume_from_checkpoint=...)"),
    ("local_rank", "multi-process only (the plan assumes one process)"),
    ("ddp_backend", "multi-process communication (the plan assumes one process)"),
    ("ddp_broadcast_buffers", "multi-process communication (the plan assumes one process)"),
    ("ddp_bucket_cap_mb", "multi-process communication (the plan assumes one process)"),
    ("ddp_find_unused_parameters", "multi-process communication (the plan assumes one process)"),
    ("ddp_static_graph", "multi-process communication (the plan assumes one process)"),
    ("ddp_timeout", "multi-process communication (the plan assumes one process)"),
    ("xpu_backend", "multi-process communication (the plan assumes one process)"),
    ("tpu_num_cores", "TPU setup (the plan assumes one device)"),
];

/// The learning-rate schedules the executor builds (`trainer::create_scheduler`). Another
/// schedule HF accepts changes only the learning rates a plan shows (unless it steps on a
/// metric, as these two do: reduce_lr_on_plateau and greedy are built), so the plan runs it as
/// the default schedule and says so. `tests/plan.rs` plans every SchedulerType of the newest and
/// oldest profile, so a schedule missing from this list fails there.
pub const SCHEDULES_BUILT: &[&str] = &[
    "linear", "cosine", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial", "inverse_sqrt",
    "cosine_with_min_lr", "reduce_lr_on_plateau", "greedy",
];

/// Arguments the executor reproduces as HF's error for the world's models on this CPU machine
/// (`ckptspec run`), but whose outcome for a user depends on their model or machine, which a plan
/// does not have: the plan of a user's arguments (not of a scenario file, whose world is the
/// executor's) assumes they run, and says so.
pub const YOUR_MODEL_OR_MACHINE: &[(&str, &str)] = &[
    ("gradient_checkpointing", "raises ValueError for a model that does not support it (the world's models do not: `ckptspec run` shows it); the plan assumes yours does: the same steps and checkpoints"),
    ("activation_checkpointing", "5.23's name for gradient_checkpointing: raises ValueError for a model that does not support it (the world's models do not: `ckptspec run` shows it); the plan assumes yours does: the same steps and checkpoints"),
    ("label_smoothing_factor", "raises for float labels (the world's regression labels: `ckptspec run` shows it); the plan assumes class labels: the loss values change, not the timeline"),
    ("tf32", "raises ValueError without an Ampere GPU (this spec's CPU machine: `ckptspec run` shows it); the plan assumes your machine has one: numbers only"),
    ("bf16", "precision: on a machine without a bf16 GPU and without use_cpu, 4.52+ raise ValueError (this spec's CPU machine: `ckptspec run` shows it); the plan assumes your device supports it: changes the numbers, not when checkpoints are written"),
    ("fp16", "precision: 4.31-4.40 raise ValueError without CUDA (this spec's CPU machine: `ckptspec run` shows it); the plan assumes your device supports it: changes the numbers, not when checkpoints are written"),
    ("bf16_full_eval", "evaluation precision: on a machine without a bf16 GPU and without use_cpu, 4.52+ raise ValueError (this spec's CPU machine: `ckptspec run` shows it); the plan assumes your device supports it: numbers only"),
    ("fp16_full_eval", "evaluation precision: 4.31-4.40 raise ValueError without CUDA (this spec's CPU machine: `ckptspec run` shows it); the plan assumes your device supports it: numbers only"),
    ("neftune_noise_alpha", "raises NotImplementedError for a model without input embeddings (the world's: `ckptspec run` shows it); the plan assumes yours has them: adds noise to embeddings, numbers only"),
    ("group_by_length", "raises ValueError for data without input_ids (the world's: `ckptspec run` shows it); the plan assumes yours has them: which samples share a batch, not the number of steps"),
    ("include_inputs_for_metrics", "raises KeyError at the first evaluation for batches without the model's main input (the world's: `ckptspec run` shows it); the plan assumes yours have it: what compute_metrics receives, the metrics are given or assumed"),
    ("include_for_metrics", "\"inputs\" raises KeyError at the first evaluation for batches without the model's main input (the world's: `ckptspec run` shows it); the plan assumes yours have it: what compute_metrics receives, the metrics are given or assumed"),
];

/// Optimizers that need a package no profile pins: `ckptspec run` raises HF's error for them
/// (`bnb_missing_error`); the plan of a user's arguments assumes the package is installed.
const YOUR_PACKAGES: &[(&str, &str)] = &[(
    "paged_adamw_32bit",
    "a bitsandbytes optimizer: without bitsandbytes installed HF raises (no profile pins it: `ckptspec run` shows the error); the plan assumes yours has it: changes what optimizer.pt holds, not when checkpoints are written",
)];

/// One argument taken out of the executor's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub name: String,
    pub value: Value,
    /// Why it does not affect the plan, or what the plan assumed instead.
    pub why: String,
}

/// A config's arguments sorted for one version.
#[derive(Debug, Clone, Default)]
pub struct Classified {
    /// What the executor gets, in the order written.
    pub args: Map<String, Value>,
    pub not_affecting: Vec<Dropped>,
    pub not_modelled: Vec<Dropped>,
    pub runner_owned: Vec<Dropped>,
    /// Names this version's TrainingArguments does not have, in call order: they stay in the
    /// executor's arguments, and HF's TypeError names the first.
    pub unknown: Vec<String>,
    /// The TypeError this version raises for a keyword the user spelled as another version
    /// does (`eval_strategy` before 4.41): a kwargs file passes names as written, while the
    /// executor's argument resolution spells format-v1 names per version.
    pub spelling_error: Option<(String, String)>,
}

/// Sorts `kwargs` for `profile`. `as_written`: the names are passed exactly as written (a user's
/// kwargs or training_args.bin), rather than in format-v1 spelling (a scenario file).
pub fn classify(kwargs: &Map<String, Value>, profile: &Profile, as_written: bool, users_run: bool) -> Classified {
    let mut c = Classified::default();
    let mut first_unknown_seen = false;
    for (k, v) in kwargs {
        let here = profile.spelling(k);
        let known = if as_written { profile.has_field(k) } else { profile.has_field(here) };
        if !known {
            // Python names the first unexpected keyword in call order; the executor's
            // resolution raises it for names it cannot spell, this one for names it would.
            if !first_unknown_seen && as_written && profile.has_field(here) {
                c.spelling_error = Some((
                    "TypeError".into(),
                    format!("TrainingArguments.__init__() got an unexpected keyword argument '{k}'"),
                ));
            }
            first_unknown_seen = true;
            c.unknown.push(k.clone());
            c.args.insert(k.clone(), v.clone());
            continue;
        }
        let default = || profile.default_of(here).cloned().unwrap_or(Value::Null);
        if RUNNER_ARGS.contains(&k.as_str()) {
            let why = if k == "output_dir" {
                "the plan writes into a temporary folder; output/ in the timeline stands for this output_dir".to_string()
            } else {
                "owned by the runner (conformance/README.md); does not affect checkpoints".to_string()
            };
            c.runner_owned.push(Dropped { name: k.clone(), value: v.clone(), why });
            continue;
        }
        if let Some((_, reason)) = YOUR_MODEL_OR_MACHINE.iter().find(|(n, _)| n == k).filter(|_| users_run) {
            if *v != default() {
                c.not_affecting.push(Dropped { name: k.clone(), value: v.clone(), why: (*reason).to_string() });
                continue;
            }
        }
        if let Some((_, reason)) = YOUR_PACKAGES.iter().find(|(o, _)| k == "optim" && v.as_str() == Some(o)).filter(|_| users_run) {
            c.not_affecting.push(Dropped { name: k.clone(), value: v.clone(), why: (*reason).to_string() });
            continue;
        }
        if k == "lr_scheduler_type" {
            if let Some(s) = v.as_str() {
                if profile.scheduler_types.iter().any(|t| t == s) && !SCHEDULES_BUILT.contains(&s) {
                    let d = default();
                    c.not_modelled.push(Dropped {
                        name: k.clone(),
                        value: v.clone(),
                        why: format!(
                            "the executor does not build this schedule; the plan ran {} (the default): the learning rates shown are that schedule's, when checkpoints are written does not depend on it",
                            show(&d)
                        ),
                    });
                    continue;
                }
            }
        }
        if args::is_modelled(k, v) {
            c.args.insert(k.clone(), v.clone());
            continue;
        }
        if let Some((_, reason)) = NOT_AFFECTING.iter().find(|(n, _)| n == k) {
            c.not_affecting.push(Dropped { name: k.clone(), value: v.clone(), why: (*reason).to_string() });
            // An accepted field runs in the executor too (golden shows it changes nothing there),
            // where another argument's check may read it (dataloader_prefetch_factor reads
            // dataloader_num_workers).
            if arguments::status(here).accepted() {
                c.args.insert(k.clone(), v.clone());
            }
            continue;
        }
        let d = default();
        let why = if *v == d {
            format!("not modelled; your value is this version's default ({}), which the plan used", show(&d))
        } else {
            format!("may change the plan but is not modelled; the plan assumed this version's default ({})", show(&d))
        };
        c.not_modelled.push(Dropped { name: k.clone(), value: v.clone(), why });
    }
    // The schedule substituted above drops its kwargs with it (they belong to that schedule).
    if c.not_modelled.iter().any(|d| d.name == "lr_scheduler_type") {
        if let Some(v) = c.args.remove("lr_scheduler_kwargs") {
            c.not_modelled.push(Dropped {
                name: "lr_scheduler_kwargs".into(),
                value: v,
                why: "belongs to the schedule the plan did not build; dropped with it".into(),
            });
        }
    }
    c
}

/// A value as the output shows it (JSON text).
pub fn show(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"))
}
