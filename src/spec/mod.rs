//! The specification and its judges: every HF difference as data ([`profile`]), the scenario
//! format and run-directory contract ([`scenario`], [`runner`]), the comparison ([`diff`]), the
//! matrix ([`conformance`]), the insta timelines ([`snapshot`]) and the release history built from
//! the golden folders ([`changes`]).

pub mod changes;
pub mod conformance;
pub mod diff;
pub mod profile;
pub mod runner;
pub mod scenario;
pub mod snapshot;
