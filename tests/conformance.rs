//! Every golden scenario of every profile through the Rust trainer, diffed with the golden run
//! directory (conformance/README.md). A scenario the trainer does not implement fails here too:
//! nothing is skipped.
use ckptspec::conformance::{judge, Cell};
use ckptspec::profile::{self, Profile};
use ckptspec::scenario::Scenario;
use std::path::Path;

#[test]
fn every_golden_scenario_matches_for_every_profile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenarios = Scenario::load_dir(&root.join("conformance/scenarios")).expect("scenario files parse");
    assert!(scenarios.len() >= 60, "the catalogue has {} scenarios", scenarios.len());
    let work = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    let mut passed = 0;
    for v in profile::supported() {
        let profile = Profile::get(v).unwrap();
        for (_, sc) in &scenarios {
            match judge(sc, &profile, &root.join("golden"), work.path()) {
                Cell::Pass => passed += 1,
                other => failures.push(format!("{} @ {v}: {other:?}", sc.name)),
            }
        }
    }
    println!("conformance: {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{} cells differ from HF:\n{}", failures.len(), failures.join("\n"));
}
