//! What `train(resume_from_checkpoint=True)` picks in an output folder, and whether that resume
//! and `load_best_model_at_end` would work.
//!
//! * The pick is `trainer_utils.get_last_checkpoint(output_dir)`, the same function in every
//!   release 4.31.0-5.24.0 (read in all 52): the folders named `^checkpoint\-(\d+)$` that are
//!   directories, the largest number wins; no completeness check (a partial folder is picked),
//!   `tmp-checkpoint-N` and staging names never match; none at all is `ValueError("No valid
//!   checkpoint found in output directory (...)")`. Not a behavior-table row: it never changed.
//! * The resumed state's `best_model_checkpoint` is restored as is. When its folder is gone:
//!   5.17+ drop it ([`crate::hf::behaviors::ResumeBehaviors::drops_missing_best`]); before, it stays, and
//!   - 4.31-4.34's rotation calls `list.index` on it unguarded
//!     ([`crate::hf::behaviors::Behaviors::rotation_protection`]): the first save with a
//!     `save_total_limit` raises `ValueError: '<path>' is not in list`;
//!   - with `save_total_limit=1`, the end-of-train cleanup calls `os.path.samefile` on it from
//!     4.32 ([`crate::hf::behaviors::Behaviors::cleanup_uses_samefile`]): `FileNotFoundError`;
//!   - `load_best_model_at_end` (`_load_best_model`) finds no weights there, warns "Could not
//!     locate the best model" and keeps the last weights.
//! * `_load_best_model` loads the weights file of the best folder (the same preference as a
//!   resume); a present but corrupt one raises at the end of `train()`.

use crate::hf::behaviors::Protection;
use crate::hf::profile::Profile;

pub use crate::policy::rotation::last_checkpoint;

/// What a missing best folder does to a resume of this release with these arguments.
pub fn missing_best_consequences(profile: &Profile, best: &str, save_total_limit: Option<i64>, load_best: bool) -> (Vec<String>, Vec<String>) {
    let (mut fails, mut warns) = (vec![], vec![]);
    if profile.resume_rules().drops_missing_best {
        warns.push(format!("{} drops the missing best {best} when it resumes (it warns) and tracks the best afresh", profile.version));
        return (fails, warns);
    }
    let limit = save_total_limit.filter(|l| *l > 0);
    if limit.is_some() && profile.rotation_protection == (Protection::Bubble { guarded: false }) {
        fails.push(format!(
            "its first save rotates checkpoints, and {}'s rotation looks the best checkpoint up unguarded: ValueError: '{best}' is not in list",
            profile.version
        ));
    }
    if limit == Some(1) && profile.cleanup_uses_samefile {
        fails.push(format!(
            "unless a later evaluation replaces the best, the save_total_limit=1 cleanup at the end of train() calls os.path.samefile on {best}: FileNotFoundError"
        ));
    }
    if load_best {
        warns.push(format!("load_best_model_at_end would find no weights in {best} (\"Could not locate the best model\") and keep the last weights, unless a later evaluation replaces the best"));
    }
    (fails, warns)
}
