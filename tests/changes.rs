//! conformance/CHANGES.md is generated from the golden folders and current, and every behavior
//! change the profile table declares is visible in the real HF's goldens: at each boundary
//! between two adjacent profiles where a behavior changes value, at least one scenario's golden
//! outcome differs (so the catalogue reaches every change point, and the table claims no change
//! the real HF does not show). The resume table's changes must show in a resume scenario's
//! golden (contract v2), since only a resumed run can reach them.
use ckptspec::harness::changes;
use ckptspec::hf::behaviors::{Behaviors, ResumeBehaviors};
use ckptspec::hf::profile;
use ckptspec::hf::version::{self, Version};
use ckptspec::world::scenario::Scenario;
use std::path::Path;
use std::sync::OnceLock;

/// Every scenario's history, computed once for both tests (it reads every golden file).
fn histories() -> &'static [changes::History] {
    static H: OnceLock<Vec<changes::History>> = OnceLock::new();
    H.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        changes::histories(&root.join("golden"), &root.join("conformance/scenarios")).unwrap()
    })
}

#[test]
fn changes_page_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let releases = changes::golden_releases(&root.join("golden")).unwrap();
    let page = changes::render_histories(&releases, histories());
    let committed = std::fs::read_to_string(root.join("conformance/CHANGES.md")).unwrap_or_default();
    assert!(
        committed == page,
        "conformance/CHANGES.md is stale: run `cargo run --release -- changes` (or `./dev golden all`) and commit it"
    );
}

/// The rows of a table whose value differs between releases `a` and `b`.
fn changed_rows(rows: &[version::Row], a: Version, b: Version) -> Vec<&'static str> {
    rows.iter().filter(|r| version::at(&r.changes, a) != version::at(&r.changes, b)).map(|r| r.name).collect()
}

#[test]
fn every_declared_change_shows_in_the_goldens() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hs = histories();
    let versions = profile::supported();
    let rows = Behaviors::table();
    let resume_rows = ResumeBehaviors::table();
    let resumed: Vec<String> = Scenario::load_dir(&root.join("conformance/scenarios"))
        .unwrap()
        .into_iter()
        .filter(|(_, s)| s.resume.is_some())
        .map(|(_, s)| s.name)
        .collect();
    assert!(resumed.len() >= 40, "{} resume scenarios", resumed.len());
    let mut unseen = vec![];
    for w in versions.windows(2) {
        let (a, b) = (Version::parse(w[0]).unwrap(), Version::parse(w[1]).unwrap());
        let changed = changed_rows(&rows, a, b);
        let shown = |resumed_only: bool| {
            hs.iter()
                .filter(|h| !resumed_only || resumed.contains(&h.name))
                .any(|h| h.runs.iter().skip(1).any(|(start, _)| start == w[1]))
        };
        if !changed.is_empty() && !shown(false) {
            unseen.push(format!("{} -> {}: {}", w[0], w[1], changed.join(", ")));
        }
        let changed = changed_rows(&resume_rows, a, b);
        if !changed.is_empty() && !shown(true) {
            unseen.push(format!("{} -> {} (resume table, no resume scenario shows it): {}", w[0], w[1], changed.join(", ")));
        }
    }
    assert!(
        unseen.is_empty(),
        "behavior changes no scenario's golden outcome shows (add a scenario that reaches them):\n  {}",
        unseen.join("\n  ")
    );
}
