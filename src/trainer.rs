//! The executor: the only place that runs training and touches disk.
use crate::profile::Profile;
use crate::runner::RunError;
use crate::scenario::Scenario;
use std::path::Path;

pub fn run(_sc: &Scenario, _profile: &Profile, _run_dir: &Path) -> Result<(), RunError> {
    Err(RunError::NotImplemented("the Rust trainer".into()))
}
