//! One insta snapshot per golden scenario and HF version: the spec-like view of
//! `ckptspec::snapshot` (timeline, checkpoints left, best checkpoint or error), built from the
//! golden run directory alone. A changed golden folder shows up as a changed snapshot.
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
            let view = ckptspec::snapshot::run_dir_view(run_dir, &format!("{name} @ HF {version}")).unwrap();
            insta::assert_snapshot!(view);
        });
    });
}
