//! Putting a checkpoint folder on disk: which files it holds as the version writes them
//! ([`store`]), the fast streamed writers ([`fastsave`]), atomic publishing ([`atomic`]) and the
//! failpoints the kill tests stop it with ([`failpoint`]), sharded weights ([`shards`]). Only the executor calls [`store`].
//!
//! Invariant: uses the layers below it ([`crate::formats`] to [`crate::world`]); it writes what it
//! is given and decides nothing about when or whether to save.

pub mod atomic;
pub mod bench_model;
pub mod failpoint;
pub mod fastsave;
pub mod shards;
pub mod store;
