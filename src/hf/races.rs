//! Races in real HF: where a release's own processes act on one folder or one value without a
//! barrier between them, so that one scenario gives other files from run to run.
//!
//! Why a table of its own: a race is not a value a release has (the behavior tables) but a set
//! of outcomes, one of which the golden holds. It is declared once, in `conformance/races.json`,
//! because two programs read it: the generator (its `--check` runs such a scenario again until
//! real HF gives the golden, and accepts no other outcome) and ckptspec (`versions` prints it,
//! `plan` warns where a config meets one). The golden and the Rust trainer have the first
//! outcome listed, the one every other release has.

use crate::hf::version::Version;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const RACES_JSON: &str = include_str!("../../conformance/races.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RacesFile {
    #[allow(dead_code)]
    doc: String,
    races: Vec<Race>,
}

/// One race, as races.json declares it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Race {
    pub name: String,
    /// The first release it applies to, and the first it does not.
    pub from: String,
    pub until: String,
    pub when: When,
    /// What races with what, in HF's code.
    pub what: String,
    /// Every outcome seen or possible; the first is the golden's.
    pub outcomes: Vec<String>,
    /// Where and when real HF showed it.
    pub seen: String,
    /// How many runs in all the generator's `--check` gives the scenario.
    pub check_tries: u32,
}

/// Which phases a race applies to: the launch, and arguments that must have a value (an argument
/// a config leaves out has HF's default, false).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    #[serde(default = "one")]
    pub nnodes_at_least: usize,
    #[serde(default = "one")]
    pub processes_at_least: usize,
    /// `"shared"` or `"per-node"` (the contract's launch.disks); absent: either.
    #[serde(default)]
    pub disks: Option<String>,
    #[serde(default)]
    pub args: BTreeMap<String, bool>,
}

fn one() -> usize {
    1
}

/// One phase (a train() of a launch) as a race looks at it.
pub struct Phase<'a> {
    pub nnodes: usize,
    pub nproc_per_node: usize,
    /// The contract's `launch.disks` ("shared" or "per-node").
    pub disks: &'a str,
    /// The value of a boolean argument of that phase (false when not set).
    pub flag: &'a dyn Fn(&str) -> bool,
}

/// Every declared race (races.json is compiled in; a malformed one fails the first call, which
/// `tests` make).
pub fn all() -> &'static [Race] {
    static RACES: OnceLock<Vec<Race>> = OnceLock::new();
    RACES.get_or_init(|| {
        let file: RacesFile = serde_json::from_str(RACES_JSON).expect("conformance/races.json parses");
        for r in &file.races {
            let (from, until) = (Version::parse(&r.from), Version::parse(&r.until));
            assert!(from.is_some() && until.is_some() && from < until, "races.json: {}: from < until, both versions", r.name);
            assert!(r.outcomes.len() >= 2 && r.check_tries >= 2, "races.json: {}: two outcomes or more, two runs or more", r.name);
        }
        file.races
    })
}

impl Race {
    pub fn in_release(&self, v: Version) -> bool {
        // `all()` has checked that both parse.
        let bound = |s: &str| Version::parse(s).expect("races.json versions parse (checked in all())");
        bound(&self.from) <= v && v < bound(&self.until)
    }

    pub fn applies_to(&self, p: &Phase) -> bool {
        let w = &self.when;
        p.nnodes >= w.nnodes_at_least
            && p.nnodes * p.nproc_per_node >= w.processes_at_least
            && w.disks.as_deref().is_none_or(|d| d == p.disks)
            && w.args.iter().all(|(k, v)| (p.flag)(k) == *v)
    }

    /// The condition as a user reads it.
    pub fn condition(&self) -> String {
        let w = &self.when;
        let mut parts = vec![];
        if w.nnodes_at_least > 1 {
            parts.push(format!("{}+ nodes", w.nnodes_at_least));
        }
        if w.processes_at_least > 1 {
            parts.push(format!("{}+ processes", w.processes_at_least));
        }
        if let Some(d) = &w.disks {
            parts.push(if d == "shared" { "a disk the nodes share".to_string() } else { "per-node disks".to_string() });
        }
        parts.extend(w.args.iter().map(|(k, v)| format!("{k}={}", if *v { "True" } else { "False" })));
        parts.join(", ")
    }
}

/// The races of release `version` that apply to any of `phases`.
pub fn applying(version: &str, phases: &[Phase]) -> Vec<&'static Race> {
    let Some(v) = Version::parse(version) else { return vec![] };
    all().iter().filter(|r| r.in_release(v) && phases.iter().any(|p| r.applies_to(p))).collect()
}

/// `ckptspec versions`' section: every race, its releases, condition and outcomes.
pub fn render() -> String {
    let mut out = String::new();
    for r in all() {
        out.push_str(&format!("{}  {} up to {} (not included); when: {}\n", r.name, r.from, r.until, r.condition()));
        out.push_str(&format!("    ({})\n", r.what));
        for (k, o) in r.outcomes.iter().enumerate() {
            out.push_str(&format!("    {}. {o}\n", k + 1));
        }
        out.push_str(&format!("    seen: {}\n", r.seen));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase<'a>(nnodes: usize, nproc: usize, disks: &'a str, flag: &'a dyn Fn(&str) -> bool) -> Phase<'a> {
        Phase { nnodes, nproc_per_node: nproc, disks, flag }
    }

    #[test]
    fn staging_race_is_4_38_two_nodes_shared_disk_only() {
        let off = |_: &str| false;
        let names = |v: &str, p: Phase| applying(v, &[p]).iter().map(|r| r.name.as_str()).collect::<Vec<_>>();
        assert_eq!(names("4.38.2", phase(2, 1, "shared", &off)), ["staging-rename-vs-rmtree"]);
        assert!(names("4.38.2", phase(2, 1, "per-node", &off)).is_empty());
        assert!(names("4.38.2", phase(1, 2, "shared", &off)).is_empty());
        assert!(names("4.39.3", phase(2, 1, "shared", &off)).is_empty());
        let on_each = |k: &str| k == "save_on_each_node";
        assert!(names("4.38.2", phase(2, 1, "shared", &on_each)).is_empty());
    }

    #[test]
    fn best_checkpoint_race_needs_load_best_and_two_processes() {
        let load_best = |k: &str| k == "load_best_model_at_end";
        let off = |_: &str| false;
        let names = |v: &str, p: Phase| applying(v, &[p]).iter().map(|r| r.name.as_str()).collect::<Vec<_>>();
        assert_eq!(names("4.50.3", phase(1, 2, "shared", &load_best)), ["best-checkpoint-exists"]);
        assert_eq!(names("4.56.2", phase(2, 1, "per-node", &load_best)), ["best-checkpoint-exists"]);
        assert!(names("4.57.6", phase(1, 2, "shared", &load_best)).is_empty());
        assert!(names("4.49.0", phase(1, 2, "shared", &load_best)).is_empty());
        assert!(names("4.50.3", phase(1, 2, "shared", &off)).is_empty());
        assert!(names("4.50.3", phase(1, 1, "shared", &load_best)).is_empty());
    }

    #[test]
    fn staging_race_is_where_other_nodes_remove_the_staging_folder() {
        // The race exists because of the behaviors tables: a staging folder (`staging_dir`) that
        // other nodes remove (`staging_elsewhere: Removed`). The declarations must cover the
        // same profiles.
        use crate::hf::behaviors::{Behaviors, LaunchBehaviors, StagingElsewhere};
        let race = all().iter().find(|r| r.name == "staging-rename-vs-rmtree").unwrap();
        for v in crate::hf::profile::supported() {
            let v = Version::parse(v).unwrap();
            let removed = Behaviors::at(v).staging_dir && LaunchBehaviors::at(v).staging_elsewhere == StagingElsewhere::Removed;
            assert_eq!(race.in_release(v), removed, "{v:?}");
        }
    }

    #[test]
    fn render_lists_every_race_with_its_outcomes() {
        let text = render();
        for r in all() {
            assert!(text.contains(&r.name) && r.outcomes.iter().all(|o| text.contains(o.as_str())), "{text}");
        }
    }
}
