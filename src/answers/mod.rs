//! What ckptspec answers for users' own configs and folders, from the same rules that reproduce
//! every golden run: [`plan`] (a config, without training) and [`inspect`] (a real output folder).
//!
//! Invariant: the top of the library: may use every layer ([`crate::trainer`]'s plan mode,
//! [`crate::harness`]'s runner and diff keys); nothing but the CLI uses it.

pub mod inspect;
pub mod plan;
