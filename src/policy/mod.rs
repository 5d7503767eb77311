//! The pure decision rules (burn-train's shape): functions of observations that return actions;
//! the executor ([`crate::trainer`]) applies them. `plan` feeds them given metrics instead of a
//! trained model through the same executor.

pub mod best;
pub mod rotation;
pub mod schedule;
