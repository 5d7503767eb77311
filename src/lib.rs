//! ckptspec: the executable specification of how the HuggingFace Trainer checkpoints.
//!
//! Policies (what to do) are pure functions of observations; one executor touches disk.
//! A version difference is a field of [`profile::Profile`], never an `if version ==`.

pub mod args;
pub mod atomic;
pub mod best;
pub mod changes;
pub mod conformance;
pub mod diff;
pub mod failpoint;
pub mod fastsave;
pub mod hf_error;
pub mod profile;
pub mod rotation;
pub mod runner;
pub mod scenario;
pub mod sgd;
pub mod schedule;
pub mod snapshot;
pub mod state;
pub mod store;
pub mod trainer;
pub mod torch_format;
pub mod safetensors;
pub mod pyjson;
pub mod rng;
pub mod sampler;
pub mod optim;
pub mod lr;
pub mod plateau;
pub mod greedy;
pub mod plan;
pub mod inspect;
