//! ckptspec: the executable specification of how the HuggingFace Trainer checkpoints.
//!
//! Policies (what to do) are pure functions of observations; one executor touches disk.
//! A version difference is a field of [`profile::Profile`], never an `if version ==`.
//!
//! The tree is grouped by layer; every module is also re-exported at the crate root
//! (`ckptspec::trainer`, `ckptspec::best`, ...), which is how the code refers to them:
//!
//! | layer | owns |
//! |---|---|
//! | [`spec`] | what HF does and how we are judged: profiles (versions as data), scenarios, the run-directory contract, the diff, the conformance matrix, snapshots, CHANGES.md |
//! | [`policy`] | the pure decision rules: when to log/evaluate/save, which metric is best, which folders rotation deletes |
//! | [`numerics`] | torch's and transformers' arithmetic bit for bit: schedules, optimizers, plateau/greedy, RNGs, the data order |
//! | [`trainer`] | the executor (HF's training loop, resume, plan mode), `TrainingArguments`, `TrainerState`, HF's errors |
//! | [`save`] | putting a checkpoint on disk: the files of a folder, the fast writers, atomic mode, failpoints |
//! | [`formats`] | the file formats: torch zip + pickle, safetensors, Python's JSON |
//! | [`answers`] | users' own questions: `plan` for a config, `inspect` for an output folder |

pub mod answers;
pub mod formats;
pub mod numerics;
pub mod par;
pub mod policy;
pub mod save;
pub mod spec;
pub mod trainer;

pub use answers::{inspect, plan};
pub use formats::{pyjson, safetensors, torch_format};
pub use numerics::{greedy, lr, optim, plateau, rng, sampler, sgd};
pub use policy::{best, rotation, schedule};
pub use save::{atomic, failpoint, fastsave, store};
pub use spec::{changes, conformance, diff, profile, runner, scenario, snapshot};
pub use trainer::{args, hf_error, state};
