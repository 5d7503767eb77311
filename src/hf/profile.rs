//! Version profiles: every behavioral difference between HF releases, as data.
//!
//! A behavior is declared once, in [`crate::hf::behaviors`], as its history: the value it has from
//! each release on where it changed (oldest first). The profile of a version is derived from that
//! table (the last change at or before the version), so the policies read fields instead of
//! comparing version strings, and `ckptspec versions` prints the same table. What the real HF of a
//! version wrote beside its golden folders (`golden/hf-V/TRAINING_ARGS.json`: its argument list,
//! defaults and enum values; `TRAINING_ARGS.pkl`; `ENVIRONMENT`: its torch and numpy) completes
//! the profile. torch's own changes (state-dict and archive layouts) form a second table keyed by
//! the torch release of the profile's torch line ([`crate::hf::behaviors::TorchLayout`]).
//! ../shared/notes/hf-checkpoint-behavior.md maps the eras; the golden folders judge.

use crate::formats::torch_format::ArchiveStyle;
use crate::hf::behaviors::{Behaviors, LaunchBehaviors, ResumeBehaviors, TorchLayout};
use crate::hf::peft::{Peft, PeftBehaviors};
use crate::hf::version::{at, Row, Version};
use serde_json::Value;

/// One profiled release: its version and what its real HF wrote beside the golden folders.
struct Release {
    version: &'static str,
    training_args_json: &'static str,
    training_args_pkl: &'static [u8],
    environment: &'static str,
    tokenizer_json: &'static str,
    peft_json: &'static str,
}

macro_rules! releases {
    ($($v:literal),* $(,)?) => {
        /// Every profiled release, oldest first: each minor at its latest patch.
        const RELEASES: &[Release] = &[ $( Release {
            version: $v,
            training_args_json: include_str!(concat!("../../golden/hf-", $v, "/TRAINING_ARGS.json")),
            training_args_pkl: include_bytes!(concat!("../../golden/hf-", $v, "/TRAINING_ARGS.pkl")),
            environment: include_str!(concat!("../../golden/hf-", $v, "/ENVIRONMENT")),
            tokenizer_json: include_str!(concat!("../../golden/hf-", $v, "/TOKENIZER.json")),
            peft_json: include_str!(concat!("../../golden/hf-", $v, "/PEFT.json")),
        }, )* ];
    };
}

releases!(
    "4.31.0", "4.32.1", "4.33.3", "4.34.1", "4.35.2", "4.36.2", "4.37.2", "4.38.2", "4.39.3", "4.40.2",
    "4.41.2", "4.42.4", "4.43.4", "4.44.2", "4.45.2", "4.46.3", "4.47.1", "4.48.3", "4.49.0", "4.50.3",
    "4.51.3", "4.52.4", "4.53.3", "4.54.1", "4.55.4", "4.56.2", "4.57.6", "5.0.0", "5.1.0", "5.2.0",
    "5.3.0", "5.4.0", "5.5.4", "5.6.2", "5.7.0", "5.8.1", "5.9.0", "5.10.4", "5.11.0", "5.12.1",
    "5.13.1", "5.14.1", "5.15.1", "5.16.1", "5.17.0", "5.18.0", "5.19.0", "5.20.2", "5.21.1", "5.22.2",
    "5.23.0", "5.24.0",
);

/// The pad token's id in a TOKENIZER.json (see [`Profile::tokenizer_pad_token_id`]).
fn pad_token_id(tokenizer_json: &str) -> Option<i64> {
    let t: Value = serde_json::from_str(tokenizer_json).ok()?;
    let files = t.get("files")?;
    let config: Value = serde_json::from_str(files.get("tokenizer_config.json")?.as_str()?).ok()?;
    // `pad_token` is a string, or an AddedToken dict with `content` (older releases).
    let pad = config.get("pad_token").and_then(|p| p.as_str().or_else(|| p.get("content")?.as_str()))?;
    let tok: Value = serde_json::from_str(files.get("tokenizer.json")?.as_str()?).ok()?;
    let added = tok.get("added_tokens")?.as_array()?;
    added.iter().find(|a| a.get("content").and_then(|c| c.as_str()) == Some(pad)).and_then(|a| a.get("id")?.as_i64())
}

/// The profiled versions, oldest first.
pub fn supported() -> Vec<&'static str> {
    RELEASES.iter().map(|r| r.version).collect()
}

/// The newest and the oldest profile (what `./dev test` checks against the real HF).
pub fn newest() -> &'static str {
    RELEASES[RELEASES.len() - 1].version
}
pub fn oldest() -> &'static str {
    RELEASES[0].version
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub version: &'static str,
    /// TrainingArguments fields and defaults of this version (golden/hf-V/TRAINING_ARGS.json,
    /// written by the generator from the real HF).
    pub fields: Vec<(String, Value)>,
    /// Python class name of `save_strategy` values in messages and the values it accepts.
    pub save_strategy_enum: &'static str,
    pub save_strategy_values: Vec<String>,
    pub scheduler_types: Vec<String>,
    /// The values of `OptimizerNames` (what `optim` may be).
    pub optimizer_names: Vec<String>,
    /// The torch release of this profile's torch line (golden/hf-V/ENVIRONMENT).
    pub torch: Version,
    /// The torch release's state-dict layouts and archive layout.
    pub torch_layout: TorchLayout,
    pub archive_style: ArchiveStyle,
    /// numpy's module in pickles of arrays (`numpy._core.multiarray` from numpy 2).
    pub numpy_core_module: &'static str,
    /// The pickled TrainingArguments of a scenario without arguments (golden/hf-V/TRAINING_ARGS.pkl).
    pub training_args_template: &'static [u8],
    /// The world's tokenizer as this release's `save_pretrained` writes it (file name, text),
    /// from golden/hf-V/TOKENIZER.json, written by the real HF: the Trainer's processing class.
    /// What the Trainer decides is where and when these files go (every `_save`).
    pub tokenizer_files: Vec<(String, String)>,
    /// The id of the tokenizer's `pad_token` (tokenizer_config.json's token, looked up in
    /// tokenizer.json's added tokens): what `_align_special_tokens` writes into the config.
    pub tokenizer_pad_token_id: Option<i64>,
    /// The pinned peft's files for the world's LoRA (golden/hf-V/PEFT.json).
    pub peft: Peft,
    /// Everything else, from the behavior table.
    pub b: Behaviors,
}

impl std::ops::Deref for Profile {
    type Target = Behaviors;
    fn deref(&self) -> &Behaviors {
        &self.b
    }
}

/// How `--hf` was matched to a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The exact profiled version.
    Exact(&'static str),
    /// Another patch of a profiled minor: that minor's profile.
    SameMinor { asked: String, profile: &'static str },
}

impl Resolved {
    pub fn profile(&self) -> &'static str {
        match self {
            Resolved::Exact(v) | Resolved::SameMinor { profile: v, .. } => v,
        }
    }
    /// The one line said on stderr when another patch runs a minor's profile.
    pub fn note(&self) -> Option<String> {
        match self {
            Resolved::Exact(_) => None,
            Resolved::SameMinor { asked, profile } => {
                Some(format!("note: --hf {asked} runs the profile of {profile} (the profiled patch of that minor release)"))
            }
        }
    }
}

/// Matches a `--hf` value to a profile: the exact version, or another patch of a profiled minor.
pub fn resolve(asked: &str) -> Result<Resolved, String> {
    let unsupported = || {
        format!(
            "unsupported --hf version {asked:?}; supported (each minor release at its latest patch; another patch of one of these minors runs its profile): {}",
            supported().join(", ")
        )
    };
    let v = Version::parse(asked).ok_or_else(unsupported)?;
    for r in RELEASES {
        let p = Version::parse(r.version).expect("profile versions parse");
        if p == v {
            return Ok(Resolved::Exact(r.version));
        }
        if (p.0, p.1) == (v.0, v.1) {
            return Ok(Resolved::SameMinor { asked: asked.to_string(), profile: r.version });
        }
    }
    Err(unsupported())
}

impl Profile {
    /// How this release's `train(resume_from_checkpoint=...)` treats a checkpoint folder.
    pub fn resume_rules(&self) -> ResumeBehaviors {
        ResumeBehaviors::at(Version::parse(self.version).expect("profile versions parse"))
    }

    /// What this release does differently in a launch of several processes.
    pub fn launch_rules(&self) -> LaunchBehaviors {
        LaunchBehaviors::at(Version::parse(self.version).expect("profile versions parse"))
    }

    /// The profile of an exactly profiled HF version, or an error listing the supported ones
    /// (see [`resolve`] for other patches).
    pub fn get(version: &str) -> Result<Profile, String> {
        let r = RELEASES
            .iter()
            .find(|r| r.version == version)
            .ok_or_else(|| format!("unsupported --hf version {version:?}; supported: {}", supported().join(", ")))?;
        let v = Version::parse(r.version).expect("profile versions parse");
        let meta: Value = serde_json::from_str(r.training_args_json).expect("golden TRAINING_ARGS.json is valid JSON");
        let enum_values = |name: &str| -> Option<Vec<String>> {
            meta.get("enums")?.get(name)?.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        };
        let (save_strategy_enum, save_strategy_values) = match enum_values("SaveStrategy") {
            Some(vals) => ("SaveStrategy", vals),
            None => ("IntervalStrategy", enum_values("IntervalStrategy").expect("TRAINING_ARGS.json lists IntervalStrategy")),
        };
        let env = |pkg: &str| -> Version {
            r.environment
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{pkg} ")))
                .and_then(Version::parse)
                .unwrap_or_else(|| panic!("golden/hf-{}/ENVIRONMENT names {pkg}", r.version))
        };
        let torch = env("torch");
        Ok(Profile {
            version: r.version,
            fields: fields(&meta),
            save_strategy_enum,
            save_strategy_values,
            scheduler_types: enum_values("SchedulerType").expect("TRAINING_ARGS.json lists SchedulerType"),
            optimizer_names: enum_values("OptimizerNames").expect("TRAINING_ARGS.json lists OptimizerNames"),
            torch,
            torch_layout: TorchLayout::at(torch),
            archive_style: if TorchLayout::at(torch).archive_format_version {
                ArchiveStyle::Torch2_13
            } else {
                ArchiveStyle::Torch2_1
            },
            numpy_core_module: if env("numpy") >= Version(2, 0, 0) { "numpy._core.multiarray" } else { "numpy.core.multiarray" },
            training_args_template: r.training_args_pkl,
            tokenizer_pad_token_id: pad_token_id(r.tokenizer_json),
            tokenizer_files: {
                let t: Value = serde_json::from_str(r.tokenizer_json).expect("golden TOKENIZER.json is valid JSON");
                t["files"]
                    .as_object()
                    .expect("TOKENIZER.json has files")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("tokenizer files are text").to_string()))
                    .collect()
            },
            peft: Peft::from_json(r.peft_json),
            b: Behaviors::at(v),
        })
    }

    /// The name this version gives a format-v1 argument.
    pub fn spelling<'a>(&self, name: &'a str) -> &'a str {
        self.renames.iter().find(|(v1, _)| *v1 == name).map(|(_, here)| *here).unwrap_or(name)
    }

    pub fn has_field(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, _)| n == name)
    }

    /// The enum class (module, name) HF converts a string argument into, if any.
    pub fn enum_class_of(&self, name: &str) -> Option<(&'static str, &'static str)> {
        match name {
            // Where both spellings exist (4.41-4.50), `evaluation_strategy` is only copied into
            // `eval_strategy` and keeps the string it was given.
            "evaluation_strategy" if self.has_field("eval_strategy") => None,
            "eval_strategy" | "evaluation_strategy" | "logging_strategy" => Some(("transformers.trainer_utils", "IntervalStrategy")),
            "save_strategy" => Some(("transformers.trainer_utils", self.save_strategy_enum)),
            "hub_strategy" => Some(("transformers.trainer_utils", "HubStrategy")),
            "lr_scheduler_type" => Some(("transformers.trainer_utils", "SchedulerType")),
            "optim" => Some(("transformers.training_args", "OptimizerNames")),
            "debug" => Some(("transformers.debug_utils", "DebugOption")),
            _ => None,
        }
    }

    pub fn default_of(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

fn fields(meta: &Value) -> Vec<(String, Value)> {
    meta["fields"]
        .as_array()
        .expect("fields list")
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["default"].clone()))
        .collect()
}

/// One table's rows: the name, then each change (`since: value`), with the doc line below.
fn push_rows(out: &mut String, rows: &[Row], width: usize, with_doc: bool) {
    for row in rows {
        let changes: Vec<String> = row.changes.iter().map(|(since, v)| format!("{since}: {v}")).collect();
        out.push_str(&format!("{:width$}  {}\n", row.name, changes.join("  |  ")));
        if with_doc {
            out.push_str(&format!("{:width$}    ({})\n", "", row.doc.trim()));
        }
    }
}

/// `ckptspec versions`: the behavior table, one row per behavior, one column per change: the
/// release where the value changed and the value from then on. With `per_release`, one column per
/// profiled release instead (the value in each).
pub fn render_table(per_release: bool) -> String {
    let mut out = String::new();
    let rows = Behaviors::table();
    if per_release {
        let vs = supported();
        let profiles: Vec<Profile> = vs.iter().map(|v| Profile::get(v).expect("profiled")).collect();
        out.push_str(&format!("behavior\t{}\n", vs.join("\t")));
        for row in &rows {
            let cells: Vec<String> = profiles
                .iter()
                .map(|p| at(&row.changes, Version::parse(p.version).expect("profile versions parse")))
                .collect();
            out.push_str(&format!("{}\t{}\n", row.name, cells.join("\t")));
        }
        for row in ResumeBehaviors::table() {
            let cells: Vec<String> = vs.iter().map(|v| at(&row.changes, Version::parse(v).expect("profile versions parse"))).collect();
            out.push_str(&format!("resume.{}\t{}\n", row.name, cells.join("\t")));
        }
        for row in LaunchBehaviors::table() {
            let cells: Vec<String> = vs.iter().map(|v| at(&row.changes, Version::parse(v).expect("profile versions parse"))).collect();
            out.push_str(&format!("launch.{}\t{}\n", row.name, cells.join("\t")));
        }
        for row in TorchLayout::table() {
            let cells: Vec<String> = profiles.iter().map(|p| at(&row.changes, p.torch)).collect();
            out.push_str(&format!("torch.{}\t{}\n", row.name, cells.join("\t")));
        }
        let torch: Vec<String> = profiles.iter().map(|p| p.torch.to_string()).collect();
        out.push_str(&format!("torch\t{}\n", torch.join("\t")));
        for row in PeftBehaviors::table() {
            let cells: Vec<String> = profiles.iter().map(|p| at(&row.changes, p.peft.version)).collect();
            out.push_str(&format!("peft.{}\t{}\n", row.name, cells.join("\t")));
        }
        let peft: Vec<String> = profiles.iter().map(|p| p.peft.version.to_string()).collect();
        out.push_str(&format!("peft\t{}\n", peft.join("\t")));
        return out;
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    out.push_str(&format!("{} profiles: {}\n\n", supported().len(), supported().join(" ")));
    out.push_str("behavior, then each change: the release it first appears in, and the value from then on\n\n");
    push_rows(&mut out, &rows, width, true);
    out.push_str("\nresume: how train(resume_from_checkpoint=...) treats a checkpoint (from HF's source, checked by the resume goldens and tests/resume.rs)\n\n");
    push_rows(&mut out, &ResumeBehaviors::table(), width, true);
    out.push_str("\nlaunch: what a launch of several processes changes (torchrun, gloo; found in the distributed goldens)\n\n");
    push_rows(&mut out, &LaunchBehaviors::table(), width, true);
    out.push_str("\nraces in real HF (conformance/races.json): the same scenario gives other files from run to run; the golden\nand ckptspec have outcome 1; the generator's --check runs such a scenario again until real HF gives it\n\n");
    out.push_str(&crate::hf::races::render());
    out.push_str("\ntorch: what a torch release writes differently (keyed by the profile's torch line)\n\n");
    push_rows(&mut out, &TorchLayout::table(), width, false);
    out.push_str("\ntorch lines (golden/hf-V/ENVIRONMENT):\n");
    let mut lines: Vec<(String, Vec<&str>)> = vec![];
    for v in supported() {
        let t = Profile::get(v).expect("profiled").torch.to_string();
        match lines.last_mut() {
            Some((lt, vs)) if *lt == t => vs.push(v),
            _ => lines.push((t, vec![v])),
        }
    }
    for (t, vs) in lines {
        out.push_str(&format!("  torch {t}: {}\n", vs.join(" ")));
    }
    out.push_str("\npeft: what a peft release does differently (keyed by the profile's peft pin; the `lora` model kind)\n\n");
    push_rows(&mut out, &PeftBehaviors::table(), width, true);
    out.push_str("\npeft pins (conformance/requirements) and what each writes for the default adapter (golden/hf-V/PEFT.json):\n");
    let mut pins: Vec<(Peft, Vec<&str>)> = vec![];
    for v in supported() {
        let p = Profile::get(v).expect("profiled").peft;
        match pins.last_mut() {
            Some((lp, vs)) if lp.version == p.version => vs.push(v),
            _ => pins.push((p, vec![v])),
        }
    }
    let mut prev: Vec<String> = vec![];
    for (p, vs) in pins {
        let fields = p.config_fields();
        let added: Vec<String> = fields.iter().filter(|f| !prev.contains(f)).map(|f| format!("+{f}")).collect();
        let removed: Vec<String> = prev.iter().filter(|f| !fields.contains(f)).map(|f| format!("-{f}")).collect();
        out.push_str(&format!(
            "  peft {}: {}\n      adapter_config.json {} fields{}; README.md {} bytes; save_pretrained() default {}\n",
            p.version,
            vs.join(" "),
            fields.len(),
            if prev.is_empty() { String::new() } else { format!(" ({})", [added, removed].concat().join(" ")).replace(" ()", "") },
            p.model_card.len(),
            p.default_weights_file,
        ));
        prev = fields;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        assert!(Version::parse("4.9.0").unwrap() < Version::parse("4.10.0").unwrap());
        assert_eq!(Version::parse("2.1.2+cu121"), Some(Version(2, 1, 2)));
        assert_eq!(Version::lit("5.10.4"), Version(5, 10, 4));
    }

    #[test]
    fn histories_pick_the_last_change_at_or_before() {
        let h = [("4.31.0", 1), ("4.42.0", 2), ("4.50.0", 3)];
        assert_eq!(at(&h, Version(4, 41, 2)), 1);
        assert_eq!(at(&h, Version(4, 42, 4)), 2);
        assert_eq!(at(&h, Version(5, 24, 0)), 3);
    }

    #[test]
    fn other_patches_run_their_minor() {
        assert_eq!(resolve("4.46.1").unwrap().profile(), "4.46.3");
        assert!(resolve("4.46.1").unwrap().note().unwrap().contains("4.46.3"));
        assert_eq!(resolve("5.24.0").unwrap(), Resolved::Exact("5.24.0"));
        let e = resolve("4.30.2").unwrap_err();
        assert!(e.contains("4.31.0") && e.contains("5.24.0"), "{e}");
        assert!(resolve("banana").is_err());
    }

    #[test]
    fn table_histories_are_ordered() {
        for row in Behaviors::table() {
            let vs: Vec<Version> = row.changes.iter().map(|(s, _)| Version::parse(s).unwrap()).collect();
            assert!(vs.windows(2).all(|w| w[0] < w[1]), "{}: changes out of order", row.name);
            assert_eq!(row.changes[0].0, "4.31.0", "{}: a history starts at the oldest profile", row.name);
        }
    }
}
