//! "Files are real": every file the Rust trainer writes for every scenario loads with the real
//! torch / safetensors of that profile's venv, the way HF itself loads it (weights_only=True
//! with HF's safe globals in 5.x; torch 2.1.2's torch.load for 4.31.0), and equals the golden
//! file loaded the same way (conformance/load_check.py).
//!
//! Which profiles: `CKPTSPEC_REAL_PROFILES` (comma-separated versions, or `all`); by default the
//! oldest and the newest, whose venvs `./dev test` creates (`./dev test-full` runs all).
use ckptspec::hf::profile::{self, Profile};
use ckptspec::world::scenario::Scenario;
use std::path::Path;
use std::process::Command;

fn venv_python(root: &Path, version: &str) -> std::path::PathBuf {
    // ./dev's layout: the newest profile's venv is the test venv .venv.
    let dir = if version == profile::newest() { root.join(".venv") } else { root.join(format!(".venv-hf-{version}")) };
    dir.join("bin/python")
}

#[test]
fn rust_written_files_load_in_real_torch_and_equal_the_golden_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenarios = Scenario::load_dir(&root.join("conformance/scenarios")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let chosen = std::env::var("CKPTSPEC_REAL_PROFILES").unwrap_or_default();
    let versions: Vec<&str> = match chosen.as_str() {
        "" => vec![profile::oldest(), profile::newest()],
        "all" => profile::supported(),
        list => list.split(',').map(|v| profile::resolve(v.trim()).unwrap().profile()).collect(),
    };
    for v in versions {
        let py = venv_python(root, v);
        assert!(py.exists(), "{} is missing: `./dev test` creates every profile's venv", py.display());
        let profile = Profile::get(v).unwrap();
        let out = tmp.path().join(v);
        // A file the scenario's resume.damage cut is the scenario's, not ours: not loaded.
        let mut skip = Vec::new();
        for (_, sc) in &scenarios {
            ckptspec::harness::runner::run_scenario(sc, &profile, &out.join(&sc.name)).unwrap();
            // Nor is a file the scenario's `earlier` put there before the run.
            for e in &sc.earlier {
                if let ckptspec::world::scenario::Earlier::File { file, .. } = e {
                    skip.push("--skip".to_string());
                    skip.push(format!("{}/{file}", sc.name));
                }
            }
            for d in sc.resume.iter().flat_map(|r| &r.damage) {
                if let ckptspec::world::scenario::Damage::Truncate { truncate, .. } = d {
                    skip.push("--skip".to_string());
                    skip.push(format!("{}/{truncate}", sc.name));
                }
            }
        }
        let res = Command::new(&py)
            .arg(root.join("conformance/load_check.py"))
            .arg(&out)
            .arg(root.join("golden").join(format!("hf-{v}")))
            .args(&skip)
            .env("PYTHONWARNINGS", "ignore")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&res.stdout);
        println!("{v}: {}", stdout.lines().last().unwrap_or(""));
        assert!(res.status.success(), "{v}:\n{stdout}\n{}", String::from_utf8_lossy(&res.stderr));
    }
}
