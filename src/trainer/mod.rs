//! The Rust reference Trainer: the executor ([`executor`]: HF's training loop step by step, its
//! resume path and the plan mode), `TrainingArguments` ([`args`]), `TrainerState` ([`state`]) and
//! HF's exceptions ([`hf_error`]).

pub mod args;
mod executor;
pub mod hf_error;
pub mod state;

pub use executor::*;
