//! Shared by the test binaries that draw random cases (`mod common;`).

/// SplitMix64: a small, deterministic, dependency-free stream for a given seed.
pub struct Rng(pub u64);

#[allow(dead_code)] // each test binary uses its own part
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

use std::path::{Path, PathBuf};

/// The python of a profile's venv (`.venv` for the newest, `.venv-hf-V` for the others;
/// `./dev venvs` makes them all). `CKPTSPEC_PYTHON` overrides it.
#[allow(dead_code)]
pub fn hf_python(root: &Path, v: &str) -> PathBuf {
    if let Ok(p) = std::env::var("CKPTSPEC_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = if v == ckptspec::hf::profile::newest() { root.join(".venv") } else { root.join(format!(".venv-hf-{v}")) };
    let py = venv.join("bin/python");
    assert!(py.exists(), "{}: no python with transformers {v} (`./dev venvs` makes every profile's venv, or set CKPTSPEC_PYTHON)", py.display());
    py
}

/// One python process runs the generator for every job, in order, with the real HF of `py`. A
/// job is `{"sc": <scenario file path or scenario object>, "dir": <run dir>, "phase":
/// "all"|"first"|"second" (optional), "resume": <checkpoint> (optional)}` (`run_scenario`, in
/// that process), or `{"launch": [<scenario file path>, ...], "target": <folder>, "phase": ...}`:
/// scenarios with a launch of several processes, run as the generator runs them
/// (`run_distributed`: one torchrun per launch shape and phase, each run directory
/// `<target>/<name>`). The jobs file is written to `jobs_file`. Panics with HF's stderr when the
/// process fails.
#[allow(dead_code)]
pub fn run_hf_jobs(py: &Path, root: &Path, jobs: &[serde_json::Value], jobs_file: &Path) {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import generate as g
world = g.hf_world()
v = world["transformers"].__version__
for job in json.load(open(sys.argv[2])):
    if "launch" in job:
        scs = [g.load_scenario(p) for p in job["launch"]]
        g.run_distributed(scs, world, v, job["target"], lambda sc, err: None, phase=job.get("phase", "all"))
        continue
    sc = g.load_scenario(job["sc"]) if isinstance(job["sc"], str) else job["sc"]
    g.run_scenario(sc, world, v, job["dir"], resume=job.get("resume"), phase=job.get("phase", "all"))
"#;
    std::fs::write(jobs_file, serde_json::to_string(jobs).unwrap()).unwrap();
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .arg(root.join("conformance"))
        .arg(jobs_file)
        .env("PYTHONWARNINGS", "ignore")
        .env("CUDA_VISIBLE_DEVICES", "")
        // As the generator runs itself (conformance/README.md): HF shows set orders in messages.
        .env("PYTHONHASHSEED", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "HF runs failed:\n{}", String::from_utf8_lossy(&out.stderr));
    // The generator's notes (a launch rerun after a hang): shown with --nocapture.
    for line in String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("note:")) {
        println!("{line}");
    }
}
