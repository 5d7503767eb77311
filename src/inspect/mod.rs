//! `ckptspec inspect OUTPUT_DIR`: what a real HF output folder holds, whether a resume or
//! load_best_model_at_end would work on it, and how it deviates from its own plan.
//! (Being built; see issue 10.)

use std::path::PathBuf;
use std::process::ExitCode;

/// The command line of `ckptspec inspect`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub dir: PathBuf,
    pub json: bool,
}

/// Runs `ckptspec inspect`: exit 0 when nothing would break a resume or load_best_model_at_end,
/// 1 when something would; Err is the tool's own error (exit 2).
pub fn main(_opts: &Options) -> Result<ExitCode, String> {
    Err("inspect: not built yet".into())
}
