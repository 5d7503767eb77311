//! The pure decision rules (burn-train's shape): functions of observations that return actions;
//! the executor ([`crate::trainer`]) applies them. `plan` feeds them given metrics instead of a
//! trained model through the same executor.
//!
//! Invariant: uses [`crate::formats`], [`crate::hf`] and [`crate::numerics`] only; pure (no I/O):
//! observations in, actions out.

pub mod best;
pub mod rotation;
pub mod schedule;
