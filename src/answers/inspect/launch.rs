//! Launches of several processes (contract v3 part 2, issue 18): which rng files a
//! `checkpoint-N` on a disk needs for the world size its `training_args.bin` records, which
//! disk holds what, and what a resume with some number of processes does with those files.
//!
//! What HF does, read in the source of every profiled release (4.31.0-5.24.0, the same code in
//! all 52 where nothing else is said):
//! * `_save_rng_state`: a world of one process writes `rng_state.pth`; in a launch of several
//!   (`args.world_size > 1`) every process writes `rng_state_{args.process_index}.pth` (its
//!   global rank) into `output_dir` as *its* working directory sees it: its node's disk.
//! * `should_save` (the main process; each node's first with `save_on_each_node`) writes the
//!   rest of the checkpoint and rotates its disk. A node none of whose processes saves gets
//!   `checkpoint-N/` holding its processes' rng files only, never rotated: what HF writes there,
//!   not a broken checkpoint. 4.36-4.38 stage each save in `tmp-checkpoint-N`: on such a node
//!   4.36 renames it, 4.37 leaves it, 4.38 deletes it (`LaunchBehaviors::staging_elsewhere`).
//!   From 5.15 `save_pretrained` writes the weights and `config.json` in the main process only,
//!   so another node's first process with `save_on_each_node` writes a checkpoint without them
//!   (`LaunchBehaviors::save_pretrained_main_only`).
//! * `_load_rng_state`: with `args.world_size > 1` process `r` loads
//!   `rng_state_{r}.pth`; when that file is not there it calls `logger.info("Didn't find an RNG
//!   file for process {r}, if you are resuming a training that wasn't launched in a distributed
//!   fashion, reproducibility is not guaranteed.")` and returns; with one process it loads
//!   `rng_state.pth`, and without it `logger.info("Didn't find an RNG file, if you are resuming a
//!   training that was launched in a distributed fashion, reproducibility is not
//!   guaranteed.")`. Info level in every release, not a warning: transformers' default verbosity
//!   (warning; the Trainer's `log_level` "passive", `log_level_replica` "warning") does not even
//!   print it. The process goes on with the generators it has (seeded by the Trainer's seed):
//!   dropout, and the data order where the sampler draws from the global generator, are not the
//!   uninterrupted run's. Nothing fails.
//! * `resume_from_checkpoint=True`: every process calls `get_last_checkpoint(args.output_dir)`
//!   on its own disk, then `_load_from_checkpoint`, which raises `ValueError("Can't find a valid
//!   checkpoint at <folder>")` where the folder has no weights file: the rng-only folder of a
//!   node that does not save fails that node's processes, and the launch with them.
//! * 4.40-5.17 on CPUs (`use_cpu`, gloo): `torch.load(optimizer.pt, map_location=args.device)`
//!   with the indexed `cpu:<local rank>` raises in every process of a launch
//!   (`LaunchBehaviors::map_location_fails`); a resume with one process has the plain `cpu`.
//!
//! What `training_args.bin` records is the writing process's place ([`LaunchRecord`]): the
//! world size and its rank, not the number of nodes. Which ranks' files belong on a disk is
//! known for a shared disk (a ckptspec run directory's `output/`: every rank) and for a node's
//! disk of a ckptspec run directory whose `result.json` lists the ranks and their nodes; a bare
//! output folder could be either, so there the disk's ranks are the ones its checkpoints of that
//! world size show (any of them, and each writer's own rank): a checkpoint lacking one of those
//! is missing it; a disk all of whose checkpoints hold only some ranks of the world is said (a
//! warning), since a node's own disk and a shared one missing the same files look alike.

use super::training_args::LaunchRecord;
use crate::hf::profile::Profile;
use std::path::{Path, PathBuf};

/// The rng file a process of a launch writes and reads (the trainer writes it by the same rule).
pub use crate::world::launch::rng_file;

/// What the processes writing to a disk save there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskRole {
    /// A saving process's disk (the main process's; a node's first with `save_on_each_node`
    /// before 5.15): the whole checkpoint.
    #[default]
    Saving,
    /// Another node's first process with `save_on_each_node` from 5.15: the checkpoint without
    /// the weights and `config.json`, which `save_pretrained` writes in the main process only.
    SavingWithoutWeights,
    /// A node none of whose processes saves (`save_on_each_node=False`, not node 0): its
    /// processes' rng files only.
    RngOnly,
}

impl DiskRole {
    /// Why this disk's checkpoints hold no weights (None: they do).
    pub fn why_no_weights(&self, profile: &Profile) -> Option<String> {
        match self {
            DiskRole::Saving => None,
            DiskRole::SavingWithoutWeights => Some(format!(
                "from 5.15 save_pretrained writes the weights and config.json in the main process only, so {}'s save_on_each_node writes the rest of the checkpoint here without them",
                profile.version
            )),
            DiskRole::RngOnly => Some("save_on_each_node=False: no process of this node saves, each only writes its rng_state_{rank}.pth here".into()),
        }
    }
}

/// Which ranks' rng files a checkpoint of a launch on this disk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ranks {
    /// Not known from the layout: decided from the disk's own checkpoints (module doc).
    #[default]
    Unknown,
    /// Every rank of the world (a shared disk).
    All,
    /// The ranks `lo..hi` (a node's own disk; torchrun numbers a node's processes in a row).
    Range(usize, usize),
}

impl Ranks {
    /// The ranks for a checkpoint written by `world` processes (None: not known here).
    pub fn for_world(&self, world: usize) -> Option<Vec<usize>> {
        match *self {
            Ranks::Unknown => None,
            Ranks::All => Some((0..world).collect()),
            Ranks::Range(lo, hi) if hi <= world => Some((lo..hi).collect()),
            Ranks::Range(..) => None,
        }
    }
}

/// The rank of an `rng_state_{rank}.pth` name.
pub fn rank_of(file: &str) -> Option<usize> {
    decimal(file.strip_prefix("rng_state_")?.strip_suffix(".pth")?)
}

/// What `_load_rng_state` does when the file of a process (`Some(rank)` in a launch, `None`
/// alone) is not in the folder it resumes from (module doc).
pub fn missing_rng_consequence(rank: Option<usize>) -> String {
    let log = match rank {
        Some(r) => format!("\"Didn't find an RNG file for process {r}, if you are resuming a training that wasn't launched in a distributed fashion, reproducibility is not guaranteed.\""),
        None => "\"Didn't find an RNG file, if you are resuming a training that was launched in a distributed fashion, reproducibility is not guaranteed.\"".into(),
    };
    format!(
        "HF's _load_rng_state logs {log} at info level (not a warning: the default verbosity does not print it) and goes on with {} generators as they are, so its dropout, and its data order where the sampler draws from the global generator, are not the uninterrupted run's; nothing fails",
        match rank {
            Some(r) => format!("process {r}'s"),
            None => "the process's".into(),
        }
    )
}

/// Where the disks of what the user pointed at are.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// One folder: an HF output folder, or a run directory's `output/` (a shared disk).
    Single,
    /// A ckptspec run directory of a launch with per-node disks (`node-K/output`, contract v3
    /// part 2), or one node's folder in it: `root` holds `result.json` and the `node-K/`
    /// folders, `primary` is the node the user pointed at (node 0 for the run directory).
    PerNode { root: PathBuf, nodes: Vec<usize>, primary: usize },
}

/// `node-K` -> K.
pub fn node_index(name: &str) -> Option<usize> {
    decimal(name.strip_prefix("node-")?)
}

/// A number as Python's `str(int)` writes it: digits only, no leading zero.
fn decimal(d: &str) -> Option<usize> {
    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) || (d.len() > 1 && d.starts_with('0')) {
        return None;
    }
    d.parse().ok()
}

/// The `node-K` folders of a directory, by K.
pub fn node_dirs(dir: &Path) -> Vec<usize> {
    let mut v: Vec<usize> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| node_index(&e.file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// Where `dir` lies: a run directory with `node-K/` folders and no `output/`, a `node-K` folder
/// of one, or a `node-K/output` folder of one (the run directory is recognised by its
/// `result.json`, or by a second `node-K` folder beside it); anything else is one folder.
pub fn locate(dir: &Path) -> Layout {
    let nodes = node_dirs(dir);
    if !nodes.is_empty() && !dir.join("output").is_dir() && !super::has_checkpoints(dir) {
        return Layout::PerNode { root: dir.to_path_buf(), primary: nodes[0], nodes };
    }
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // A path given as `.` or ending in `..` has no name of its own: then its canonical path's.
    let canon = if dir.file_name().is_some() && dir.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        dir.to_path_buf()
    } else {
        std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
    };
    let node_of = |p: &Path| -> Option<(PathBuf, usize)> {
        let k = node_index(&name(p))?;
        let root = p.parent()?.to_path_buf();
        let siblings = node_dirs(&root);
        (root.join("result.json").is_file() || siblings.len() > 1).then_some((root, k))
    };
    if let Some((root, k)) = node_of(&canon).filter(|_| canon.join("output").is_dir()) {
        return Layout::PerNode { nodes: node_dirs(&root), root, primary: k };
    }
    if name(&canon) == "output" {
        if let Some((root, k)) = canon.parent().and_then(node_of) {
            return Layout::PerNode { nodes: node_dirs(&root), root, primary: k };
        }
    }
    Layout::Single
}


/// The ranks of node `k` from result.json's `ranks` (`(rank, node)` pairs); `Unknown` when
/// they are not a run of consecutive ranks.
pub fn ranks_of_node(ranks: &[(usize, usize)], k: usize) -> Ranks {
    let mut mine: Vec<usize> = ranks.iter().filter(|(_, n)| *n == k).map(|(r, _)| *r).collect();
    mine.sort();
    match (mine.first(), mine.last()) {
        (Some(&lo), Some(&hi)) if hi - lo + 1 == mine.len() => Ranks::Range(lo, hi + 1),
        _ => Ranks::Unknown,
    }
}

/// What the report says about the launch of the inspected disk.
#[derive(Debug, Clone)]
pub struct LaunchView {
    /// The record (`checkpoint-6/training_args.bin`, or another disk's), and what it holds.
    pub source: String,
    pub record: LaunchRecord,
    pub save_on_each_node: bool,
    /// The node of this disk, where known.
    pub node: Option<usize>,
    pub role: DiskRole,
    /// The ranks whose rng files this disk's checkpoints of the recorded world hold, and how
    /// that is known.
    pub ranks_here: Option<Vec<usize>>,
    pub ranks_how: String,
}

/// A list of ranks in words.
pub fn ranks_text(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

/// What a resume with some number of processes does with a checkpoint's rng files.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeWith {
    /// The resume's number of processes.
    pub processes: usize,
    /// As many as wrote the checkpoint.
    pub as_written: bool,
    /// The rng files its processes look for and find in the folder, and those they look for
    /// and do not (each such process goes on without, [`missing_rng_consequence`]). Where it is
    /// not known which processes resume from this disk (another launch of per-node disks),
    /// `not_found` is empty and `found` lists what the folder holds.
    pub found: Vec<String>,
    pub not_found: Vec<String>,
    /// What it raises before any rng file is read (4.40-5.17's CPU launches).
    pub raises: Option<String>,
    /// All of it in words.
    pub text: String,
}

/// What a resume from a checkpoint does with its rng files, for a resume with `world`
/// processes (as written), with one, and with one more than written (a launch of 2 for a
/// one-process checkpoint). `present`: the ranks whose `rng_state_{rank}.pth` the folder holds;
/// `single`: it holds `rng_state.pth`; `here`: the ranks that resume from this disk in a launch
/// like the one that wrote it (None: every rank of the resume); `cpu`: a CPU launch (`use_cpu`,
/// MULTI_CPU), where 4.40-5.17 cannot load optimizer.pt back in a launch; `state_files`:
/// optimizer.pt and scheduler.pt are both there (HF loads them only then).
pub fn resume_with(profile: &Profile, name: &str, world: usize, present: &[usize], single: bool, here: Option<&[usize]>, cpu: bool, state_files: bool) -> Vec<ResumeWith> {
    let fails_in_launch = cpu && state_files && profile.launch_rules().map_location_fails;
    let raises = |m: usize| {
        (m > 1 && fails_in_launch).then(|| {
            format!(
                "{}'s _load_optimizer_and_scheduler raises in every process of a CPU launch of {m}, before any rng file is read: RuntimeError: don't know how to restore data location of torch.storage.UntypedStorage (tagged with cpu:0) (torch.load(optimizer.pt, map_location=args.device), args.device cpu:<local rank>)",
                profile.version
            )
        })
    };
    let held: Vec<String> = present.iter().map(|r| rng_file(2, *r)).collect();
    let mut out = vec![];
    for m in if world > 1 { vec![world, 1, world + 1] } else { vec![1, 2] } {
        let as_written = m == world;
        let what = format!("with {m} process{}{}", if m == 1 { "" } else { "es" }, if as_written { " (as written)" } else { "" });
        let (mut found, mut not_found) = (vec![], vec![]);
        let mut text;
        if m == 1 {
            text = format!("{what}: _load_rng_state loads rng_state.pth");
            if single {
                found.push("rng_state.pth".to_string());
                text.push_str(&format!(", which {name} holds"));
            } else {
                not_found.push("rng_state.pth".to_string());
                text.push_str(&format!(
                    ", which {name} does not hold{}: {}",
                    if present.is_empty() { "" } else { " (a launch writes rng_state_{rank}.pth)" },
                    missing_rng_consequence(None)
                ));
            }
        } else {
            text = format!("{what}: process r loads rng_state_{{r}}.pth from the folder on its node's disk; {name} holds {}", if held.is_empty() { "none".to_string() } else { held.join(", ") });
            let ranks: Option<Vec<usize>> = match here {
                Some(h) if as_written => Some(h.to_vec()),
                Some(_) => None,
                None => Some((0..m).collect()),
            };
            match ranks {
                Some(ranks) => {
                    for r in &ranks {
                        if present.contains(r) { found.push(rng_file(m, *r)) } else { not_found.push(rng_file(m, *r)) }
                    }
                    let absent: Vec<usize> = ranks.iter().copied().filter(|r| !present.contains(r)).collect();
                    if !absent.is_empty() {
                        text.push_str(&format!(
                            "; {} find{} no {}: {}",
                            if absent.len() == 1 { format!("process {}", absent[0]) } else { format!("processes {}", ranks_text(&absent)) },
                            if absent.len() == 1 { "s" } else { "" },
                            not_found.join(", "),
                            missing_rng_consequence(Some(absent[0])).replace(&format!("process {}'s", absent[0]), "each one's")
                        ));
                    }
                }
                None => {
                    found = held.clone();
                    text.push_str("; which processes resume from this disk depends on that launch's nodes: each one whose file is not here goes on without it, as HF's _load_rng_state does (info log only)");
                }
            }
            if single {
                text.push_str("; rng_state.pth, a one-process save's file, is read by no process of a launch");
            }
        }
        let raises = raises(m);
        if let Some(r) = &raises {
            text.push_str(&format!("; but {r}"));
        }
        out.push(ResumeWith { processes: m, as_written, found, not_found, raises, text });
    }
    out
}
