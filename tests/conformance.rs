//! Every golden scenario of every profile through the Rust trainer, diffed with the golden run
//! directory (conformance/README.md). A scenario the trainer does not implement fails here too:
//! nothing is skipped.
use ckptspec::harness::conformance::{judge_all_with, Cell};
use ckptspec::hf::profile::{self, Profile};
use ckptspec::trainer::SaveMode;
use ckptspec::world::scenario::Scenario;
use std::path::Path;

#[test]
fn every_golden_scenario_matches_for_every_profile() {
    judge_every_cell(SaveMode::HfCompatible);
}

/// Atomic mode publishes the same folders (README "Atomic mode": what each side publishes).
#[test]
fn every_golden_scenario_matches_for_every_profile_in_atomic_mode() {
    judge_every_cell(SaveMode::Atomic);
}

fn judge_every_cell(mode: SaveMode) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenarios = Scenario::load_dir(&root.join("conformance/scenarios")).expect("scenario files parse");
    assert!(scenarios.len() >= 60, "the catalogue has {} scenarios", scenarios.len());
    let work = tempfile::tempdir_in(ckptspec::harness::runner::scratch_root()).unwrap();
    let profiles: Vec<Profile> = profile::supported().iter().map(|v| Profile::get(v).unwrap()).collect();
    let scs: Vec<&Scenario> = scenarios.iter().map(|(_, s)| s).collect();
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let cells = judge_all_with(&scs, &profiles, &root.join("golden"), work.path(), jobs, mode);
    let mut failures = vec![];
    let mut passed = 0;
    for (k, cell) in cells.into_iter().enumerate() {
        let (sc, p) = (scs[k / profiles.len()], &profiles[k % profiles.len()]);
        match cell {
            Cell::Pass => passed += 1,
            other => failures.push(format!("{} @ {}: {other:?}", sc.name, p.version)),
        }
    }
    println!("conformance ({mode:?}): {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{} cells differ from HF:\n{}", failures.len(), failures.join("\n"));
}
