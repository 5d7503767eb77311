//! `ckptspec plan CONFIG --hf VERSION...`: the checkpoint timeline and the answers for a user's
//! config, without training: the executor run with given (or assumed) metrics and no tensor math.
//! (Being built; see issue 10.)

use std::path::PathBuf;
use std::process::ExitCode;

/// The command line of `ckptspec plan`, as the CLI parsed it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A scenario file, a JSON/YAML file of TrainingArguments keyword arguments, or a
    /// `training_args.bin`.
    pub config: PathBuf,
    /// Profiles (`--hf`, repeatable; `all` for every profile). Patch mapping is the CLI's.
    pub hf: Vec<String>,
    pub train_rows: Option<usize>,
    /// `--eval-rows M` or `--eval-rows a=8,b=4`, as given.
    pub eval_rows: Option<String>,
    pub steps_per_epoch: Option<usize>,
    pub metrics: Option<PathBuf>,
    pub metrics_from: Option<PathBuf>,
    pub json: bool,
}

/// Runs `ckptspec plan`; Err is the tool's own error (exit 2).
pub fn main(_opts: &Options) -> Result<ExitCode, String> {
    Err("plan: not built yet".into())
}
