//! One insta snapshot per golden scenario and HF version: the spec-like view of
//! `ckptspec::snapshot` (timeline, checkpoints left, best checkpoint or error) of the golden run
//! directory, with the saves and deletions the Rust reference trainer's executor recorded for the
//! same scenario (its run directory equals the golden one: tests/conformance.rs). A changed
//! golden folder or a changed rule shows up as a changed snapshot.
//!
//! Review: `cargo insta review` (cargo-insta), or `INSTA_UPDATE=always cargo test --release
//! --test snapshots` and `git diff tests/snapshots/`. Without INSTA_UPDATE a changed snapshot
//! fails the test (with CI=true nothing is written).
#[test]
fn golden() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        insta::glob!("../golden", "hf-*/*/result.json", |path| {
            let run_dir = path.parent().unwrap();
            let name = run_dir.file_name().unwrap().to_string_lossy();
            let version = run_dir.parent().unwrap().file_name().unwrap().to_string_lossy();
            let version = version.trim_start_matches("hf-");
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let sc = ckptspec::scenario::Scenario::load_dir(&root.join("conformance/scenarios"))
                .unwrap()
                .into_iter()
                .find(|(_, s)| s.name == name)
                .map(|(_, s)| s)
                .expect("every golden folder has its scenario");
            let profile = ckptspec::profile::Profile::get(version).unwrap();
            let tmp = tempfile::tempdir().unwrap();
            let rust_run = tmp.path().join("run");
            std::fs::create_dir_all(&rust_run).unwrap();
            let events = ckptspec::trainer::run_traced(&sc, &profile, &rust_run).unwrap();
            let view = ckptspec::snapshot::run_dir_view_traced(run_dir, &format!("{name} @ HF {version}"), &events).unwrap();
            insta::assert_snapshot!(view);
        });
    });
}
