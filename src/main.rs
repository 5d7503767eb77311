//! The `ckptspec` command line. See README.md.
use ckptspec::{conformance, diff, profile::{self, Profile}, runner, trainer::SaveMode};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  ckptspec conformance [--hf VERSION]... [--only NAME]... [--scenarios DIR] [--golden DIR] [--jobs N] [--atomic]
      run every scenario through the Rust trainer for every HF profile and diff with golden/
  ckptspec run PATH --hf VERSION --out DIR [--atomic]
      run one scenario file (DIR becomes its run directory) or a folder of them (DIR/<name>/)
      --atomic: write each checkpoint into a staging folder, fsync it, publish it by one rename
      (the same files; README \"Atomic mode\")
  ckptspec versions [--per-release]
      the behavior table: every behavior that differs between HF releases, with the release of
      each change (--per-release: its value in every profiled release, tab-separated)
  ckptspec changes [--check] [--golden DIR] [--out FILE]
      write conformance/CHANGES.md from the golden folders alone (--check: fail when stale)
  ckptspec diff EXPECTED ACTUAL [--max N]
      compare two run directories (or two bare HF output folders): structure, JSON fields,
      tensors, error; prints the first difference and up to N (default 50) of all of them;
      exit status 0 when they agree, 1 when they differ";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match real_main(&args) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// `--hf`: the exact profiled version, or another patch of a profiled minor (said on stderr).
fn resolve_hf(asked: &str) -> Result<String, String> {
    let r = profile::resolve(asked)?;
    if let Some(note) = r.note() {
        eprintln!("{note}");
    }
    Ok(r.profile().to_string())
}

fn real_main(args: &[String]) -> Result<ExitCode, String> {
    let Some(cmd) = args.first() else {
        return Err(format!("no command given\n{USAGE}"));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "conformance" => {
            let mut opts = conformance::Options::default();
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                let mut val = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
                match a.as_str() {
                    "--hf" => opts.versions.push(resolve_hf(&val("--hf")?)?),
                    "--only" => opts.only.push(val("--only")?),
                    "--scenarios" => opts.scenarios = PathBuf::from(val("--scenarios")?),
                    "--golden" => opts.golden = PathBuf::from(val("--golden")?),
                    "--atomic" => opts.mode = SaveMode::Atomic,
                    "--jobs" => {
                        let v = val("--jobs")?;
                        opts.jobs = v.parse().map_err(|_| format!("--jobs {v}: not a number"))?;
                    }
                    other => return Err(format!("unknown option {other}\n{USAGE}")),
                }
            }
            let summary = conformance::run(&opts).map_err(|e| e.to_string())?;
            Ok(if summary.failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        "run" => {
            let (mut path, mut hf, mut out, mut mode) = (None, None, None, SaveMode::HfCompatible);
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--hf" => hf = it.next().cloned(),
                    "--out" => out = it.next().map(PathBuf::from),
                    "--atomic" => mode = SaveMode::Atomic,
                    p if !p.starts_with("--") && path.is_none() => path = Some(PathBuf::from(p)),
                    other => return Err(format!("unexpected argument {other}\n{USAGE}")),
                }
            }
            let path = path.ok_or(format!("run needs a scenario file or folder\n{USAGE}"))?;
            let hf = hf.ok_or(format!("run needs --hf VERSION\n{USAGE}"))?;
            let out = out.ok_or(format!("run needs --out DIR\n{USAGE}"))?;
            let profile = Profile::get(&resolve_hf(&hf)?)?;
            runner::run_path_with(&path, &profile, &out, mode).map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        "diff" => {
            let mut paths = Vec::new();
            let mut cap = 50usize;
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--max" => {
                        let v = it.next().ok_or(format!("--max needs a number\n{USAGE}"))?;
                        cap = v.parse().map_err(|_| format!("--max {v}: not a number\n{USAGE}"))?;
                    }
                    p if !p.starts_with("--") && paths.len() < 2 => paths.push(PathBuf::from(p)),
                    other => return Err(format!("unexpected argument {other}\n{USAGE}")),
                }
            }
            let [expected, actual] = <[PathBuf; 2]>::try_from(paths)
                .map_err(|_| format!("diff needs two folders, EXPECTED and ACTUAL\n{USAGE}"))?;
            for p in [&expected, &actual] {
                if !p.is_dir() {
                    return Err(format!("{}: not a folder", p.display()));
                }
            }
            let rep = diff::compare_run_dirs(&expected, &actual).map_err(|e| e.to_string())?;
            print!("{}", rep.render(&expected, &actual, cap));
            Ok(if rep.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        "versions" => {
            let per_release = match rest {
                [] => false,
                [f] if f == "--per-release" => true,
                _ => return Err(format!("unexpected arguments {rest:?}\n{USAGE}")),
            };
            print!("{}", profile::render_table(per_release));
            Ok(ExitCode::SUCCESS)
        }
        "changes" => {
            let mut opts = ckptspec::changes::Options::default();
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                let mut val = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
                match a.as_str() {
                    "--check" => opts.check = true,
                    "--golden" => opts.golden = PathBuf::from(val("--golden")?),
                    "--out" => opts.out = PathBuf::from(val("--out")?),
                    other => return Err(format!("unknown option {other}\n{USAGE}")),
                }
            }
            ckptspec::changes::main(&opts)
        }
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}
