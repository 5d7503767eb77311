//! ckptspec: the executable specification of how the HuggingFace Trainer checkpoints.
//!
//! Policies (what to do) are pure functions of observations; one executor touches disk.
//! A version difference is a field of [`profile::Profile`], never an `if version ==`.

pub mod conformance;
pub mod diff;
pub mod profile;
pub mod runner;
pub mod scenario;
pub mod trainer;
