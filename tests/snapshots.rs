//! One insta snapshot per golden scenario and run of releases with one view: the spec-like view
//! of `ckptspec::harness::snapshot` (timeline, checkpoints left, best checkpoint or error) of the golden run
//! directory, with the saves and deletions the Rust reference trainer's executor recorded for the
//! same scenario (its run directory equals the golden one: tests/conformance.rs). Consecutive
//! releases whose views are equal share one snapshot, named by the range
//! (`golden@hf-4.31.0..4.41.2__<scenario>.snap`), so a snapshot shows what one era does, and a
//! changed golden folder or rule shows up as a changed (or newly split) snapshot.
//!
//! Review: `cargo insta review` (cargo-insta), or `INSTA_UPDATE=always cargo test --release
//! --test snapshots` and `git diff tests/snapshots/`. Without INSTA_UPDATE a changed snapshot
//! fails the test (with CI=true nothing is written); a snapshot no range names any more fails
//! the test too (`stale snapshot`), so the folder holds exactly the current eras.
use ckptspec::hf::profile::{self, Profile};
use ckptspec::world::scenario::Scenario;
use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn golden() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenarios = Scenario::load_dir(&root.join("conformance/scenarios")).unwrap();
    let versions: Vec<&str> =
        profile::supported().into_iter().filter(|v| root.join("golden").join(format!("hf-{v}")).is_dir()).collect();
    let profiles: Vec<Profile> = versions.iter().map(|v| Profile::get(v).unwrap()).collect();
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    // The views of every cell, the scenarios spread over the cores (each cell runs the Rust
    // trainer traced); then the snapshots are asserted in order.
    let eras: Vec<Vec<(&str, &str, String)>> = ckptspec::harness::par::map(scenarios.len(), ckptspec::harness::par::cores(), |k| {
        let sc = &scenarios[k].1;
        // (first, last, view) runs of releases with one view.
        let mut runs: Vec<(&str, &str, String)> = vec![];
        for (v, p) in versions.iter().zip(&profiles) {
            let run_dir = root.join("golden").join(format!("hf-{v}")).join(&sc.name);
            if !run_dir.is_dir() {
                continue;
            }
            let tmp = tempfile::tempdir().unwrap();
            let events = ckptspec::trainer::run_traced(sc, p, tmp.path()).unwrap();
            let view = ckptspec::harness::snapshot::run_dir_view_traced(&run_dir, &sc.name, &events).unwrap();
            match runs.last_mut() {
                Some((_, last, prev)) if *prev == view => *last = v,
                _ => runs.push((v, v, view)),
            }
        }
        runs
    });
    let mut names = BTreeSet::new();
    settings.bind(|| {
        for ((_, sc), runs) in scenarios.iter().zip(eras) {
            for (first, last, view) in runs {
                let range = if first == last { first.to_string() } else { format!("{first}..{last}") };
                let name = format!("golden@hf-{range}__{}", sc.name);
                let titled = view.replacen(&sc.name, &format!("{} @ HF {range}", sc.name), 1);
                insta::assert_snapshot!(name.clone(), titled);
                names.insert(format!("{name}.snap"));
            }
        }
    });
    let stale: Vec<String> = std::fs::read_dir(root.join("tests/snapshots"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("golden@") && n.ends_with(".snap") && !names.contains(n))
        .collect();
    assert!(stale.is_empty(), "stale snapshot(s), named by no current range (delete them): {stale:?}");
}
