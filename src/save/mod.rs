//! Putting a checkpoint folder on disk: which files it holds as the version writes them
//! ([`store`]), the fast streamed writers ([`fastsave`]), atomic publishing ([`atomic`]) and the
//! failpoints the kill tests stop it with ([`failpoint`]). Only the executor calls [`store`].

pub mod atomic;
pub mod failpoint;
pub mod fastsave;
pub mod store;
