//! How an implementation is judged: the runner contract's Rust side ([`runner`]: a scenario in,
//! a run directory out), the comparison with a golden folder ([`diff`]), the matrix of every
//! scenario and profile ([`conformance`]), the insta timelines ([`snapshot`]), the release
//! history built from the golden folders ([`changes`]), and the job pool they run on ([`par`]).
//!
//! Invariant: drives [`crate::trainer`] and reads the layers below; nothing below it knows it.
//! Only [`crate::answers`] and the CLI stand above it.

pub mod changes;
pub mod conformance;
pub mod diff;
pub mod par;
pub mod runner;
pub mod snapshot;
