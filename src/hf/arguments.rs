//! Every `TrainingArguments` field's standing in the spec, declared once: reproduced (the golden
//! folders judge it), owned by the runner, accepted (golden shows it changes nothing in this
//! world), refused for a stated reason, or not yet implemented. `ckptspec versions --arguments`
//! prints it for a release; the executor consults it before it runs a scenario, so a refusal
//! names its reason instead of "not yet implemented".
//!
//! Why one table and not per-release branches: the fields a release has come from its own
//! golden `TRAINING_ARGS.json` ([`Profile::fields`]); what the spec does with a field does not
//! depend on the release (where HF's handling of a field changes between releases, that history
//! is a row of [`super::behaviors`], the executor reproduces it and the field is `Reproduced`).

use super::profile::Profile;

/// Why the spec does not run a field (with a value other than the release's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Needs hardware this spec's world does not have (a TPU, Apple MPS, Intel XPU).
    Hardware(&'static str),
    /// Needs the network: the HuggingFace hub or a reporting service.
    Network,
    /// Only means something with several processes or nodes (the distributed issue).
    SeveralProcesses,
    /// Needs a package no profile pins (named).
    Package(&'static str),
    /// Writes values of the machine it runs on (memory use) into the run's files: no golden can
    /// hold them.
    MachineDependent,
    /// Trains through kernels torch.compile generates for the machine (inductor's C++ for its
    /// CPU's vector width): the numbers follow that generated code, not the eager ops the spec
    /// reproduces. Seen with 5.24.0 here: the first logged grad_norm 8.235719680786133 and loss
    /// 12.831459999084473 compiled, 8.235718727111816 and 12.831460952758789 eager.
    GeneratedKernels,
}

impl Refusal {
    pub fn text(&self) -> String {
        match self {
            Refusal::Hardware(what) => format!("needs {what}"),
            Refusal::Network => "needs the network (the HuggingFace hub or a reporting service)".into(),
            Refusal::SeveralProcesses => "only means something with several processes or nodes (not modelled yet)".into(),
            Refusal::Package(p) => format!("needs the package {p}, which no profile pins"),
            Refusal::MachineDependent => "writes this machine's own measurements into the run's files".into(),
            Refusal::GeneratedKernels => {
                "trains through kernels torch.compile generates for the machine's CPU: their rounding is that code's, not the eager ops' (the logged grad_norm and loss differ in the last digits)".into()
            }
        }
    }
}

/// A field's standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The executor reproduces it, golden-checked in every profile that has the field (this is
    /// the list [`super::args::modelled`] reads).
    Reproduced,
    /// The runner sets it (conformance/README.md); a scenario may not.
    Runner,
    /// Changes nothing in this world, shown by the named scenario in every profile; the text
    /// says what it changes elsewhere.
    Accepted { scenario: &'static str, elsewhere: &'static str },
    /// Not run, for the stated reason.
    Refused(Refusal),
    /// Real HF runs it here (or raises for it); the executor does not reproduce it yet.
    NotYetImplemented,
}

impl Status {
    pub fn label(&self) -> &'static str {
        match self {
            Status::Reproduced => "reproduced",
            Status::Runner => "runner",
            Status::Accepted { .. } => "accepted",
            Status::Refused(_) => "refused",
            Status::NotYetImplemented => "not yet implemented",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            Status::Reproduced => String::new(),
            Status::Runner => "set by the runner (output folder, reporting off)".into(),
            Status::Accepted { scenario, elsewhere } => format!("changes nothing here (scenario {scenario}); {elsewhere}"),
            Status::Refused(r) => r.text(),
            Status::NotYetImplemented => String::new(),
        }
    }

    /// Whether the executor runs the field without modelling it (a reproduced field runs with the
    /// values [`super::args::is_modelled`] lists: `optim` with some optimizers only).
    pub fn accepted(&self) -> bool {
        matches!(self, Status::Accepted { .. })
    }
}

use Refusal::*;
use Status::*;

const SEVERAL: Status = Refused(SeveralProcesses);
const HUB: Status = Refused(Network);

/// The table: every field of every profile's `TrainingArguments` (4.31-5.24) appears once; a
/// test checks that against the golden `TRAINING_ARGS.json` files. `optim` is reproduced for the
/// values [`super::args::is_modelled`] lists.
pub const ARGUMENTS: &[(&str, Status)] = &[
    // The training schedule and the data.
    ("max_steps", Reproduced),
    // Which process of a launch writes a checkpoint's shared files (contract v3 part 2).
    ("save_on_each_node", Reproduced),
    ("num_train_epochs", Reproduced),
    ("per_device_train_batch_size", Reproduced),
    ("per_device_eval_batch_size", Reproduced),
    ("gradient_accumulation_steps", Reproduced),
    ("dataloader_drop_last", Reproduced),
    ("ignore_data_skip", Reproduced),
    ("label_names", Reproduced),
    ("remove_unused_columns", Reproduced),
    ("seed", Reproduced),
    ("use_cpu", Reproduced),
    // 4.31's spelling of use_cpu; 4.32-4.57 copy it into use_cpu.
    ("no_cuda", Reproduced),
    // What HF does with these here is raise (tf32=True, gradient_checkpointing with the world's
    // models, label smoothing with its float labels): reproduced as those errors.
    ("tf32", Reproduced),
    ("gradient_checkpointing", Reproduced),
    // 5.23's names for gradient_checkpointing(_kwargs), which become their aliases.
    ("activation_checkpointing", Reproduced),
    ("label_smoothing_factor", Reproduced),
    ("data_seed", Reproduced),
    ("prediction_loss_only", Reproduced),
    ("logging_nan_inf_filter", Reproduced),
    // Batch sizes (the deprecated per_gpu fields win when set), the errors HF raises for
    // arguments that need the model's main input or embeddings (the world's have neither), a GPU
    // (fp16 before 4.41, bf16 without use_cpu from 4.52) or bitsandbytes, and what they write.
    ("per_gpu_train_batch_size", Reproduced),
    ("per_gpu_eval_batch_size", Reproduced),
    ("bf16", Reproduced),
    ("fp16", Reproduced),
    ("bf16_full_eval", Reproduced),
    ("fp16_full_eval", Reproduced),
    ("fp16_backend", Reproduced),
    ("dataloader_prefetch_factor", Reproduced),
    ("optim_args", Reproduced),
    ("group_by_length", Reproduced),
    ("train_sampling_strategy", Reproduced),
    // Changes nothing without compute_metrics; with one, HF raises (not modelled yet).
    ("eval_do_concat_batches", Reproduced),
    ("include_inputs_for_metrics", Reproduced),
    ("include_for_metrics", Reproduced),
    ("include_num_input_tokens_seen", Reproduced),
    ("auto_find_batch_size", Reproduced),
    // 5.0+: copied into the model config's use_cache (config.json).
    ("use_cache", Reproduced),
    // A resume rebuilds EarlyStoppingCallback from the checkpoint (its counter and arguments).
    ("restore_callback_states_from_checkpoint", Reproduced),
    // Converted to DebugOption members (training_args.bin); underflow_overflow's hooks change
    // nothing while values stay finite.
    ("debug", Reproduced),
    ("neftune_noise_alpha", Reproduced),
    // torch's DataLoader errors without worker processes; "fork" with workers loads as workers
    // do (a persistent worker, or another context, with workers: not modelled).
    ("dataloader_persistent_workers", Reproduced),
    ("dataloader_multiprocessing_context", Reproduced),
    // Evaluation through a traced model: a second iterator of the evaluation DataLoader and the
    // `eval_jit_compilation_time` key.
    ("jit_mode_eval", Reproduced),
    // A first batch of the training DataLoader before training (rng draws) and
    // `train_tokens_per_second` (0: the world's batches have no input_ids).
    ("include_tokens_per_second", Reproduced),
    // prediction_loop: torch's TypeError at the first evaluation until 4.47, then the same
    // metrics as evaluation_loop here.
    ("use_legacy_prediction_loop", Reproduced),
    // Init's ValueError with a compute_metrics that takes no `compute_result` (the world's);
    // without one, the same evaluation.
    ("batch_eval_metrics", Reproduced),
    // SIGTERM's handler: at the next callback event, a checkpoint of the current step and the
    // end of training (contract v3 part 3 g: a scenario's `signal`).
    ("enable_jit_checkpoint", Reproduced),
    // The optimizer and the schedule.
    ("learning_rate", Reproduced),
    ("weight_decay", Reproduced),
    ("adam_beta1", Reproduced),
    ("adam_beta2", Reproduced),
    ("adam_epsilon", Reproduced),
    ("max_grad_norm", Reproduced),
    ("optim", Reproduced),
    // 4.x's deprecated flag: `optim` becomes adafactor (5.0 removed the field).
    ("adafactor", Reproduced),
    ("lr_scheduler_type", Reproduced),
    ("lr_scheduler_kwargs", Reproduced),
    ("warmup_steps", Reproduced),
    ("warmup_ratio", Reproduced),
    // When to log, evaluate and save; the best model.
    ("logging_strategy", Reproduced),
    ("logging_steps", Reproduced),
    ("logging_first_step", Reproduced),
    ("eval_strategy", Reproduced),
    ("evaluation_strategy", Reproduced),
    ("eval_steps", Reproduced),
    ("eval_delay", Reproduced),
    ("eval_on_start", Reproduced),
    ("save_strategy", Reproduced),
    ("save_steps", Reproduced),
    ("save_total_limit", Reproduced),
    ("save_only_model", Reproduced),
    ("save_safetensors", Reproduced),
    ("load_best_model_at_end", Reproduced),
    ("metric_for_best_model", Reproduced),
    ("greater_is_better", Reproduced),
    // The runner's.
    ("output_dir", Runner),
    ("logging_dir", Runner),
    ("report_to", Runner),
    ("disable_tqdm", Runner),
    // Accepted: the golden of the named scenario equals what the executor writes.
    ("run_name", Accepted { scenario: "args-run-name", elsewhere: "names the run for reporting integrations" }),
    ("do_train", Accepted { scenario: "args-do-train-eval-predict", elsewhere: "read by HF's example scripts, not by the Trainer" }),
    ("do_eval", Accepted { scenario: "args-do-train-eval-predict", elsewhere: "read by HF's example scripts, not by the Trainer" }),
    ("do_predict", Accepted { scenario: "args-do-train-eval-predict", elsewhere: "read by HF's example scripts, not by the Trainer" }),
    ("resume_from_checkpoint", Accepted {
        scenario: "args-resume-from-checkpoint-field",
        elsewhere: "read by HF's example scripts; the Trainer resumes only through train(resume_from_checkpoint=...)",
    }),
    ("dataloader_pin_memory", Accepted { scenario: "args-dataloader-pin-memory-false", elsewhere: "page-locks batches for a GPU copy" }),
    ("overwrite_output_dir", Accepted { scenario: "args-overwrite-output-dir", elsewhere: "read by HF's example scripts, not by the Trainer (5.0 dropped the field: a TypeError there)" }),
    ("dataloader_num_workers", Accepted { scenario: "args-dataloader-num-workers", elsewhere: "loads batches in worker processes; the sampler, and so the order, stays in the main process" }),
    ("eval_accumulation_steps", Accepted {
        scenario: "args-eval-accumulation-steps",
        elsewhere: "moves gathered predictions off the accelerator every N evaluation steps",
    }),
    ("log_level", Accepted { scenario: "args-log-level", elsewhere: "sets the main process's log level" }),
    ("fp16_opt_level", Accepted { scenario: "args-fp16-opt-level", elsewhere: "apex's optimization level, read only with fp16 on the apex backend" }),
    ("half_precision_backend", Accepted { scenario: "args-half-precision-backend", elsewhere: "picks the mixed-precision backend (amp, apex, cpu_amp) for fp16/bf16" }),
    ("dataloader_in_order", Accepted { scenario: "args-dataloader-in-order", elsewhere: "keeps the sampler's order when several processes share the data" }),
    ("past_index", Accepted { scenario: "args-past-index", elsewhere: "keeps a model output (XLNet/Transformer-XL memories) for the next step; the world's models take none" }),
    ("length_column_name", Accepted { scenario: "args-length-column-name", elsewhere: "names the column of precomputed lengths the length-grouped sampler reads from a `datasets.Dataset`" }),
    ("activation_checkpointing_kwargs", Accepted { scenario: "args-activation-checkpointing-kwargs", elsewhere: "passed to gradient_checkpointing_enable when activation checkpointing is on" }),
    ("gradient_checkpointing_kwargs", Accepted { scenario: "args-gradient-checkpointing-kwargs", elsewhere: "passed to gradient_checkpointing_enable when gradient_checkpointing is on" }),
    ("full_determinism", Accepted { scenario: "args-full-determinism", elsewhere: "turns on torch's deterministic algorithms (and CUDA's settings); CPU kernels here are deterministic already" }),
    ("torch_empty_cache_steps", Accepted { scenario: "args-torch-empty-cache-steps", elsewhere: "empties the accelerator's memory cache every N steps" }),
    // Several processes or nodes.
    ("local_rank", SEVERAL),
    ("ddp_backend", SEVERAL),
    ("ddp_find_unused_parameters", SEVERAL),
    ("ddp_bucket_cap_mb", SEVERAL),
    ("ddp_broadcast_buffers", SEVERAL),
    ("ddp_timeout", SEVERAL),
    ("ddp_static_graph", SEVERAL),
    ("log_on_each_node", SEVERAL),
    ("log_level_replica", SEVERAL),
    ("dispatch_batches", SEVERAL),
    ("split_batches", SEVERAL),
    ("eval_use_gather_object", SEVERAL),
    ("average_tokens_across_devices", SEVERAL),
    ("tp_size", SEVERAL),
    ("parallelism_config", SEVERAL),
    ("xpu_backend", SEVERAL),
    ("fsdp", Refused(Hardware("a GPU: FSDP does not run on CPU"))),
    ("fsdp_min_num_params", Refused(Hardware("a GPU: FSDP does not run on CPU"))),
    ("fsdp_config", Refused(Hardware("a GPU: FSDP does not run on CPU"))),
    ("fsdp_transformer_layer_cls_to_wrap", Refused(Hardware("a GPU: FSDP does not run on CPU"))),
    ("sharded_ddp", Refused(Package("fairscale"))),
    ("deepspeed", Refused(Package("deepspeed"))),
    // Hardware and packages.
    ("tpu_num_cores", Refused(Hardware("a TPU"))),
    ("tpu_metrics_debug", Refused(Hardware("a TPU"))),
    ("use_mps_device", Refused(Hardware("Apple's MPS device"))),
    ("use_ipex", Refused(Package("intel_extension_for_pytorch"))),
    ("use_liger_kernel", Refused(Package("liger-kernel"))),
    ("liger_kernel_config", Refused(Package("liger-kernel"))),
    ("optim_target_modules", Refused(Package("galore-torch (GaLore/APOLLO optimizers)"))),
    ("mp_parameters", Refused(Package("SageMaker's smdistributed"))),
    ("ray_scope", Refused(Package("ray (hyperparameter search)"))),
    // The hub and reporting services.
    ("push_to_hub", HUB),
    ("hub_model_id", HUB),
    ("hub_strategy", HUB),
    ("hub_token", HUB),
    ("hub_private_repo", HUB),
    ("hub_always_push", HUB),
    ("hub_revision", HUB),
    ("push_to_hub_model_id", HUB),
    ("push_to_hub_organization", HUB),
    ("push_to_hub_token", HUB),
    ("project", HUB),
    ("trackio_space_id", HUB),
    ("trackio_bucket_id", HUB),
    ("trackio_static_space_id", HUB),
    ("skip_memory_metrics", Refused(MachineDependent)),
    // torch.compile (4.31's torchdynamo names its backend).
    ("torch_compile", Refused(GeneratedKernels)),
    ("torch_compile_backend", Refused(GeneratedKernels)),
    ("torch_compile_mode", Refused(GeneratedKernels)),
    ("torchdynamo", Refused(GeneratedKernels)),
    // A dict or a JSON file's path (4.38+): its errors, what training_args.bin pickles,
    // use_seedable_sampler=False's torch RandomSampler, gradient_accumulation_kwargs per release
    // (hf::behaviors::GaKwargs); split_batches, dispatch_batches, even_batches and non_blocking
    // change nothing in one process (in a launch: not modelled); use_configured_state=True is
    // refused (hf::accelerator::USE_CONFIGURED_STATE_REFUSAL).
    ("accelerator_config", Reproduced),
];

/// The standing of a field (a name the table does not list is not yet implemented).
pub fn status(name: &str) -> Status {
    ARGUMENTS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s).unwrap_or(NotYetImplemented)
}

/// `ckptspec versions --arguments --hf V`: every field of the release's `TrainingArguments`, in
/// its order, with its standing, then the count per standing.
pub fn render(profile: &Profile) -> String {
    let width = profile.fields.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = format!("TrainingArguments of transformers {} ({} fields): what the spec does with each\n\n", profile.version, profile.fields.len());
    let mut counts: Vec<(&str, usize)> = vec![];
    for (name, _) in &profile.fields {
        let s = status(name);
        let detail = s.detail();
        out.push_str(&format!("{name:width$}  {:20}{}\n", s.label(), if detail.is_empty() { String::new() } else { format!("  {detail}") }));
        match counts.iter_mut().find(|(l, _)| *l == s.label()) {
            Some(c) => c.1 += 1,
            None => counts.push((s.label(), 1)),
        }
    }
    out.push('\n');
    for label in ["reproduced", "runner", "accepted", "refused", "not yet implemented"] {
        let n = counts.iter().find(|(l, _)| *l == label).map_or(0, |c| c.1);
        out.push_str(&format!("{label}: {n}\n"));
    }
    out
}
