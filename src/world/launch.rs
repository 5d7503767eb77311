//! Contract v3, part 2: `"launch"`, the processes and nodes a phase runs on, and the disks they
//! write to (conformance/README.md "Launch").
//!
//! The generator runs a launch of several processes under `torch.distributed.run` (gloo, CPU);
//! the Rust trainer simulates every rank in one process (the ranks run in lockstep, DDP keeps
//! their weights equal) and writes each rank's files where that rank would: node K's output is
//! `node-K/output` with per-node disks, `output` with a shared one. This module owns the shape
//! and where each rank stands in it; what a rank writes is the executor's.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Whether the nodes share one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum Disks {
    /// Every process runs in the run directory: one `output/`.
    #[default]
    #[serde(rename = "shared")]
    Shared,
    /// Node K's processes run in `node-K/` of the run directory: its own `output/`.
    #[serde(rename = "per-node")]
    PerNode,
}

/// `"launch": {"nnodes", "nproc_per_node", "disks"}` as written (each field optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSpec {
    #[serde(default = "one")]
    pub nnodes: usize,
    #[serde(default = "one")]
    pub nproc_per_node: usize,
    #[serde(default)]
    pub disks: Disks,
}

fn one() -> usize {
    1
}

impl Default for LaunchSpec {
    fn default() -> Self {
        LaunchSpec { nnodes: 1, nproc_per_node: 1, disks: Disks::Shared }
    }
}

/// One process of a launch, as torchrun numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// `RANK`: the global process index.
    pub rank: usize,
    /// `GROUP_RANK`: the node.
    pub node: usize,
    /// `LOCAL_RANK`: the index on its node.
    pub local_rank: usize,
}

impl LaunchSpec {
    /// The contract's bounds (1 or 2 nodes, 1 or 2 processes each), naming the field.
    pub fn check(&self, field: &str) -> Result<(), String> {
        if !(1..=2).contains(&self.nnodes) {
            return Err(format!("field '{field}.nnodes' must be 1 or 2, not {}", self.nnodes));
        }
        if !(1..=2).contains(&self.nproc_per_node) {
            return Err(format!("field '{field}.nproc_per_node' must be 1 or 2, not {}", self.nproc_per_node));
        }
        Ok(())
    }

    /// `WORLD_SIZE`.
    pub fn world_size(&self) -> usize {
        self.nnodes * self.nproc_per_node
    }

    /// Every rank, in global order.
    pub fn ranks(&self) -> Vec<Rank> {
        (0..self.world_size())
            .map(|rank| Rank { rank, node: rank / self.nproc_per_node, local_rank: rank % self.nproc_per_node })
            .collect()
    }

    /// The rng file process `rank` writes and reads ([`rng_file`] of this launch's world size).
    pub fn rng_file(&self, rank: usize) -> String {
        rng_file(self.world_size(), rank)
    }

    /// The working directory of node `node`'s processes: `node-K/` with per-node disks (also for
    /// a phase of one process, which runs as node 0), else the run directory.
    pub fn node_dir(&self, run_dir: &Path, node: usize) -> PathBuf {
        match self.disks {
            Disks::PerNode => run_dir.join(format!("node-{node}")),
            Disks::Shared => run_dir.to_path_buf(),
        }
    }

    /// The disks that hold an output folder: one per node with per-node disks, else one.
    pub fn disk_count(&self) -> usize {
        match self.disks {
            Disks::PerNode => self.nnodes,
            Disks::Shared => 1,
        }
    }
}

/// The output folder the main process wrote in a run directory: `node-0/output` where the run
/// had per-node disks (a `node-0/` folder), else `output`. What the user's main process sees.
pub fn main_output(run_dir: &Path) -> PathBuf {
    let node0 = run_dir.join("node-0");
    if node0.is_dir() { node0.join("output") } else { run_dir.join("output") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_and_dirs() {
        let l: LaunchSpec = serde_json::from_str(r#"{"nnodes": 2, "nproc_per_node": 2, "disks": "per-node"}"#).unwrap();
        assert_eq!(l.world_size(), 4);
        assert_eq!(l.ranks()[3], Rank { rank: 3, node: 1, local_rank: 1 });
        assert_eq!(l.node_dir(Path::new("r"), 1), PathBuf::from("r/node-1"));
        let d: LaunchSpec = serde_json::from_str("{}").unwrap();
        assert_eq!((d.world_size(), d.node_dir(Path::new("r"), 0)), (1, PathBuf::from("r")));
        assert!(serde_json::from_str::<LaunchSpec>(r#"{"disks": "nfs"}"#).is_err());
        assert!(serde_json::from_str::<LaunchSpec>(r#"{"nodes": 2}"#).is_err());
        let bad = LaunchSpec { nnodes: 3, ..LaunchSpec::default() };
        assert_eq!(bad.check("launch").unwrap_err(), "field 'launch.nnodes' must be 1 or 2, not 3");
    }
}

/// The rng file process `rank` of a launch of `world` processes writes and reads:
/// `rng_state_{process_index}.pth` in a launch of several, `rng_state.pth` alone.
pub fn rng_file(world: usize, rank: usize) -> String {
    if world > 1 {
        format!("rng_state_{rank}.pth")
    } else {
        "rng_state.pth".into()
    }
}
