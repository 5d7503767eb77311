//! The `ckptspec` command line (clap, derive API). See README.md.
//!
//! Exit status: 0 on success, 1 where a command finds what it checks for (a failing cell, a
//! difference, a stale CHANGES.md, a folder a resume would trip over), 2 on the tool's own errors
//! (`error: ...` on stderr) and on usage errors (clap's message on stderr).
use ckptspec::answers::{inspect, plan};
use ckptspec::harness::{conformance, diff, runner};
use ckptspec::hf::profile::{self, Profile};
use ckptspec::trainer::SaveMode;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The executable specification of the HuggingFace Trainer's checkpoint rules, for every
/// profiled HF release, with a Rust reference trainer that reproduces HF's output folders.
#[derive(Debug, Parser)]
#[command(name = "ckptspec", version, propagate_version = true, arg_required_else_help = true)]
#[command(after_help = "Exit status: 0 on success, 1 where the command finds what it checks for (see each \
command's help), 2 on the tool's own errors (`error: ...` on stderr) and on usage errors.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Conformance(ConformanceArgs),
    Run(RunArgs),
    Versions(VersionsArgs),
    Changes(ChangesArgs),
    Diff(DiffArgs),
    Plan(PlanArgs),
    Inspect(InspectArgs),
}

/// Run every scenario through the Rust trainer for every HF profile and diff with golden/.
///
/// Prints a matrix (one row per scenario, one column per HF version: pass, FAIL, n/i,
/// no-golden; one character per cell with more than 6 versions) and the first difference of
/// each failure.
///
/// Exit status: 0 when every cell passes, 1 when any fails, 2 on the tool's own errors.
#[derive(Debug, Args)]
struct ConformanceArgs {
    /// An HF version to run (repeatable; default: every profile). A profiled version
    /// (`ckptspec versions` lists them), or another patch of a profiled minor, which runs that
    /// minor's profile and says so in one line on stderr.
    #[arg(long = "hf", value_name = "VERSION")]
    hf: Vec<String>,
    /// Run only the scenario of this name (repeatable; default: every scenario).
    #[arg(long, value_name = "NAME")]
    only: Vec<String>,
    /// The folder of scenario files.
    #[arg(long, value_name = "DIR", default_value_os_t = conformance::Options::default().scenarios)]
    scenarios: PathBuf,
    /// The folder of golden folders (golden/hf-<version>/<scenario>/).
    #[arg(long, value_name = "DIR", default_value_os_t = conformance::Options::default().golden)]
    golden: PathBuf,
    /// Cells judged at once (default: the machine's cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Write each checkpoint into a staging folder, fsync it, publish it by one rename (the same
    /// files; README "Atomic mode").
    #[arg(long)]
    atomic: bool,
}

/// Run one scenario file (DIR becomes its run directory) or a folder of them (DIR/<name>/).
///
/// An error HF raises for a scenario is its result (in result.json, exit status 0); a broken
/// scenario file is the tool's own error (exit status 2, nothing written). In a folder, a
/// scenario the Rust trainer cannot run (not yet implemented, or an I/O error) does not stop the
/// others: every scenario runs, those that could not are listed at the end (one line each, no run
/// directory left for them), and the exit status is then 2.
#[derive(Debug, Args)]
struct RunArgs {
    /// A scenario file, or a folder of them.
    #[arg(value_name = "PATH")]
    path: PathBuf,
    /// The HF version: a profiled one, or another patch of a profiled minor (runs that minor's
    /// profile and says so in one line on stderr).
    #[arg(long = "hf", value_name = "VERSION")]
    hf: String,
    /// The run directory to write (for a folder: one run directory per scenario under it).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write each checkpoint into a staging folder, fsync it, publish it by one rename (the same
    /// files; README "Atomic mode").
    #[arg(long)]
    atomic: bool,
}

/// Print the behavior table: every behavior that differs between HF releases, with the release
/// of each change.
///
/// A second table lists torch's own changes by torch release, and which profile uses which torch.
#[derive(Debug, Args)]
struct VersionsArgs {
    /// Print each behavior's value in every profiled release instead (tab-separated).
    #[arg(long)]
    per_release: bool,
    /// Print instead every field of a release's TrainingArguments and what the spec does with it:
    /// reproduced, set by the runner, accepted (changes nothing here), refused (with the reason)
    /// or not yet implemented.
    #[arg(long)]
    arguments: bool,
    /// The release for --arguments (a profiled version or another patch of one; default the newest).
    #[arg(long, requires = "arguments")]
    hf: Option<String>,
}

/// Write conformance/CHANGES.md from the golden folders alone.
///
/// Exit status: 0 when written (or, with --check, current), 1 with --check when stale, 2 on the
/// tool's own errors.
#[derive(Debug, Args)]
struct ChangesArgs {
    /// Write nothing; fail (exit status 1) when the file is stale.
    #[arg(long)]
    check: bool,
    /// The folder of golden folders.
    #[arg(long, value_name = "DIR", default_value_os_t = ckptspec::harness::changes::Options::default().golden)]
    golden: PathBuf,
    /// The file to write (or check).
    #[arg(long, value_name = "FILE", default_value_os_t = ckptspec::harness::changes::Options::default().out)]
    out: PathBuf,
}

/// Compare two run directories (or two bare HF output folders).
///
/// Compares structure, JSON fields, tensors and the error; prints the first difference and up
/// to N of all of them.
///
/// Exit status: 0 when they agree, 1 when they differ, 2 on the tool's own errors.
#[derive(Debug, Args)]
struct DiffArgs {
    /// The expected folder (e.g. golden/hf-5.24.0/<scenario>).
    #[arg(value_name = "EXPECTED")]
    expected: PathBuf,
    /// The folder to check against it.
    #[arg(value_name = "ACTUAL")]
    actual: PathBuf,
    /// Print at most N differences.
    #[arg(long = "max", value_name = "N", default_value_t = 50)]
    max: usize,
}

/// The checkpoint timeline and the answers for a user's config, without training.
///
/// Runs the checkpoint rules of each HF version given on the config, with the given (or assumed)
/// evaluation metrics and no tensor math.
///
/// The tool's own errors (an unreadable config, an unknown --hf) exit 2.
#[derive(Debug, Args)]
struct PlanArgs {
    /// A scenario file (format v1/v2), a JSON or YAML file of TrainingArguments keyword arguments
    /// as a user passes them, or a training_args.bin from a real run.
    #[arg(value_name = "CONFIG")]
    config: PathBuf,
    /// The HF versions to plan for: repeatable, also a comma list (`4.46.3,5.24.0`), or `all`
    /// for every profile (`ckptspec versions` lists them).
    #[arg(long = "hf", value_name = "VERSION", required = true)]
    hf: Vec<String>,
    /// The number of training rows (or give --steps-per-epoch).
    #[arg(long, value_name = "N", conflicts_with = "steps_per_epoch")]
    train_rows: Option<usize>,
    /// The evaluation rows: `M`, or named evaluation sets `a=8,b=4`.
    #[arg(long, value_name = "SPEC")]
    eval_rows: Option<String>,
    /// The optimizer steps per epoch (instead of --train-rows).
    #[arg(long, value_name = "K")]
    steps_per_epoch: Option<usize>,
    /// A JSON list of evaluation results, one per evaluation round, as HF logs them
    /// (e.g. {"eval_loss": 0.3, "eval_f1": 0.8}).
    #[arg(long, value_name = "FILE", conflicts_with = "metrics_from")]
    metrics: Option<PathBuf>,
    /// A trainer_state.json whose log_history evaluations are used in order.
    #[arg(long, value_name = "FILE")]
    metrics_from: Option<PathBuf>,
    /// What the Trainer is handed (contract v3's model kinds): `regression` (a PreTrainedModel,
    /// the default), `module` (a plain torch.nn.Module), `linear` (a PreTrainedModel with an
    /// nn.Linear) or `lora` (a peft LoRA adapter on it). It decides what each checkpoint and
    /// save_model() hold, and what to keep to use the model.
    #[arg(long, value_name = "KIND", value_parser = ["regression", "module", "linear", "lora"])]
    model: Option<String>,
    /// Also plan a resume: after the first train(), a second Trainer calls
    /// train(resume_from_checkpoint=True) for `last`, or the path of `checkpoint-N`. For a
    /// scenario file, replaces its resume's `from`.
    #[arg(long, value_name = "WHICH")]
    resume_from: Option<String>,
    /// The resumed Trainer's max_steps (its other arguments are the first run's); implies
    /// --resume-from last when that is not given.
    #[arg(long, value_name = "N")]
    resume_max_steps: Option<u64>,
    /// The resumed run's trainer_state.json: its log_history evaluations past those of the
    /// checkpoint it resumed from feed the resumed run's evaluations, in order.
    #[arg(long, value_name = "FILE")]
    resume_metrics_from: Option<PathBuf>,
    /// Plan a launch of N processes per node (torchrun's --nproc_per_node; 1 or 2): each
    /// process's rng file, the data each trains on, and who writes what.
    #[arg(long, value_name = "N")]
    nproc_per_node: Option<usize>,
    /// Plan a launch on M nodes (1 or 2), each with its own disk: the answer says what each
    /// node's output_dir holds at the end (save_on_each_node from the config).
    #[arg(long, value_name = "M")]
    nnodes: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What a real HF output folder holds, and whether a resume or load_best_model_at_end would
/// work on it.
///
/// Also says how the folder deviates from its own plan.
///
/// Exit status: 0 when nothing would break a resume or load_best_model_at_end, 1 when something
/// would, 2 on the tool's own errors.
#[derive(Debug, Args)]
struct InspectArgs {
    /// The Trainer's output_dir (the folder holding checkpoint-N/).
    #[arg(value_name = "OUTPUT_DIR")]
    dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    // Usage errors, --help and --version: clap prints and exits (2 for usage errors, 0 else).
    let cli = Cli::parse();
    match real_main(cli.command) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// `--hf`: the exact profiled version, or another patch of a profiled minor (said on stderr).
fn resolve_hf(asked: &str) -> Result<String, String> {
    let r = profile::resolve(asked)?;
    if let Some(note) = r.note() {
        eprintln!("{note}");
    }
    Ok(r.profile().to_string())
}

fn save_mode(atomic: bool) -> SaveMode {
    if atomic {
        SaveMode::Atomic
    } else {
        SaveMode::HfCompatible
    }
}

fn real_main(command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Conformance(a) => {
            let default = conformance::Options::default();
            let opts = conformance::Options {
                versions: a.hf.iter().map(|v| resolve_hf(v)).collect::<Result<_, _>>()?,
                only: a.only,
                scenarios: a.scenarios,
                golden: a.golden,
                jobs: a.jobs.unwrap_or(default.jobs),
                mode: save_mode(a.atomic),
            };
            let summary = conformance::run(&opts).map_err(|e| e.to_string())?;
            Ok(if summary.failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Run(a) => {
            let profile = Profile::get(&resolve_hf(&a.hf)?)?;
            let not_run = runner::run_path_with(&a.path, &profile, &a.out, save_mode(a.atomic)).map_err(|e| e.to_string())?;
            if not_run.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!("{} scenario(s) of {} could not be run (no run directory written for them):", not_run.len(), a.path.display());
            for n in &not_run {
                eprintln!("  {}: {}", n.name, n.error);
            }
            Ok(ExitCode::from(2))
        }
        Command::Diff(a) => {
            for p in [&a.expected, &a.actual] {
                if !p.is_dir() {
                    return Err(format!("{}: not a folder", p.display()));
                }
            }
            let rep = diff::compare_run_dirs(&a.expected, &a.actual).map_err(|e| e.to_string())?;
            print!("{}", rep.render(&a.expected, &a.actual, a.max));
            Ok(if rep.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Versions(a) => {
            if a.arguments {
                let v = match &a.hf {
                    Some(v) => resolve_hf(v)?,
                    None => profile::supported().last().expect("profiles").to_string(),
                };
                let p = profile::Profile::get(&v)?;
                print!("{}", ckptspec::hf::arguments::render(&p));
                return Ok(ExitCode::SUCCESS);
            }
            print!("{}", profile::render_table(a.per_release));
            Ok(ExitCode::SUCCESS)
        }
        Command::Changes(a) => {
            let opts = ckptspec::harness::changes::Options { check: a.check, golden: a.golden, out: a.out, ..Default::default() };
            ckptspec::harness::changes::main(&opts)
        }
        Command::Plan(a) => {
            // The --hf strings go through unchanged: plan resolves them (comma lists, `all`).
            let opts = plan::Options {
                config: a.config,
                hf: a.hf,
                train_rows: a.train_rows,
                eval_rows: a.eval_rows,
                steps_per_epoch: a.steps_per_epoch,
                metrics: a.metrics,
                metrics_from: a.metrics_from,
                model: a.model.as_deref().and_then(ckptspec::world::scenario::ModelKind::from_name),
                resume_from: a.resume_from,
                resume_max_steps: a.resume_max_steps,
                resume_metrics_from: a.resume_metrics_from,
                nproc_per_node: a.nproc_per_node,
                nnodes: a.nnodes,
                json: a.json,
            };
            plan::main(&opts)
        }
        Command::Inspect(a) => inspect::main(&inspect::Options { dir: a.dir, json: a.json }),
    }
}
