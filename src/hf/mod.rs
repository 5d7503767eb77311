//! What an HF release is, as data: its version and the history tables of every behavior that
//! changed between releases ([`version`], [`behaviors`]), the profile of one release
//! ([`profile`]), and the Trainer's own vocabulary as that release spells it: `TrainingArguments`
//! ([`args`]; its `accelerator_config`: [`accelerator`]; what the spec does with each of its fields: [`arguments`]), `TrainerState` and `TrainerControl` ([`state`]) and HF's exceptions ([`error`]); where real HF
//! races with itself ([`races`], declared in conformance/races.json).
//!
//! Invariant: uses only [`crate::formats`]. Nothing here decides or trains; every layer above
//! reads a release's differences from here instead of comparing version strings.

pub mod accelerator;
pub mod args;
pub mod arguments;
pub mod behaviors;
pub mod error;
pub mod peft;
pub mod profile;
pub mod races;
pub mod state;
pub mod version;
