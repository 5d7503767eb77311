//! ckptspec: the executable specification of how the HuggingFace Trainer checkpoints.
//!
//! Policies (what to do) are pure functions of observations; one executor touches disk.
//! A version difference is a field of [`hf::profile::Profile`], never an `if version ==`.
//!
//! The folders are layers, bottom-up. A module uses its own layer and those below it, never one
//! above; a path names the layer it reaches into (`crate::hf::profile::Profile`), and
//! `tests/layers.rs` fails on an upward `crate::` path. The CLI (`src/main.rs`) stands above all.
//!
//! | layer | owns | may use |
//! |---|---|---|
//! | [`formats`] | the file formats, byte for byte: torch zip + pickle, safetensors, Python's JSON and its decode errors | nothing |
//! | [`hf`] | what a release is: versions, the behavior tables (HF's history as data), profiles, `TrainingArguments`, `TrainerState`/`TrainerControl`, HF's exceptions | formats |
//! | [`numerics`] | torch's and transformers' arithmetic bit for bit: schedules, optimizers, plateau/greedy, RNGs, the data order, Python's rounding | formats, hf |
//! | [`policy`] | the pure decision rules: when to log/evaluate/save, which metric is best, which folders rotation deletes | formats, hf, numerics |
//! | [`world`] | the scenario's world as the contract defines it: the scenario file, the data sets, the model | formats, hf, numerics, policy |
//! | [`save`] | putting a checkpoint on disk: the files of a folder, the fast writers, atomic mode, failpoints | formats, hf, numerics, policy, world |
//! | [`trainer`] | the executor: HF's Trainer method by method (loop, evaluation, saving and rotation, resume, plan mode) | every layer below |
//! | [`harness`] | how we are judged: the runner contract, the diff, the conformance matrix, snapshots, CHANGES.md | every layer below |
//! | [`answers`] | users' own questions: `plan` for a config, `inspect` for an output folder | every layer below |

pub mod formats;
pub mod hf;
pub mod numerics;
pub mod policy;
pub mod world;
pub mod save;
pub mod trainer;
pub mod harness;
pub mod answers;
