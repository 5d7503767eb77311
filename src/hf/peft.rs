//! The profile's peft (its pin in `conformance/requirements/hf-<version>.txt`): what that release
//! writes for the world's `lora` model. `golden/hf-V/PEFT.json` holds the bytes the real peft
//! wrote for the contract's default adapter (`save_pretrained` of r=1, alpha=2, written by the
//! generator): the `adapter_config.json` its `LoraConfig` serialises (every field the release
//! has, with its defaults) and the `README.md` model card it renders, and the weights file its
//! `save_pretrained` writes by default. As TOKENIZER.json is the Rust trainer's processing class,
//! these are its peft; what the Trainer decides (when, where, which weights file) is the executor's,
//! and the scenario's `r` and `alpha` are filled in here.

use crate::formats::pyjson::{self, DumpOptions, PyJson};
use crate::hf::version::{behaviors, Version};
use serde_json::Value;

/// How `save_pretrained` treats a `README.md` already in the folder (`create_or_update_model_card`;
/// a second save into one folder, e.g. `save_model()` after a resumed run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardUpdate {
    /// The card's lines, with `- PEFT <version>` inserted two lines below `### Framework versions`.
    InsertFrameworkLine,
    /// The card with its training-procedure section (`## Training procedure` to the framework
    /// line) appended once more.
    AppendSection,
    /// The card as it is.
    Unchanged,
}

behaviors! {
    /// What a peft release does differently, keyed by the peft release a profile pins (its files
    /// for the default adapter are in golden/hf-V/PEFT.json).
    struct PeftBehaviors;
    /// A second save into a folder that has a README.md.
    model_card_update: CardUpdate = ["0.4.0" => CardUpdate::InsertFrameworkLine, "0.6.0" => CardUpdate::AppendSection, "0.7.0" => CardUpdate::Unchanged];
}

/// One peft release as the profile pins it.
#[derive(Debug, Clone, PartialEq)]
pub struct Peft {
    pub version: Version,
    /// `adapter_config.json` of the default adapter, as written.
    adapter_config: String,
    /// `README.md`, the model card `save_pretrained` writes (for the world's base model, which
    /// has no name: the card does not depend on the adapter's values).
    pub model_card: String,
    /// The weights file `save_pretrained()` writes without `safe_serialization`.
    pub default_weights_file: String,
    pub b: PeftBehaviors,
}

impl Peft {
    /// From golden/hf-V/PEFT.json.
    pub fn from_json(text: &str) -> Peft {
        let v: Value = serde_json::from_str(text).expect("golden PEFT.json is valid JSON");
        let file = |n: &str| v["files"][n].as_str().unwrap_or_else(|| panic!("PEFT.json has {n}")).to_string();
        let bins: Vec<&str> = v["binary_files"].as_array().expect("PEFT.json lists binary files").iter().filter_map(|b| b.as_str()).collect();
        let version = Version::parse(v["peft"].as_str().expect("PEFT.json has the peft version")).expect("a peft version");
        Peft {
            version,
            b: PeftBehaviors::at(version),
            adapter_config: file("adapter_config.json"),
            model_card: file("README.md"),
            default_weights_file: bins.iter().find(|b| b.starts_with("adapter_model")).expect("PEFT.json lists the adapter weights").to_string(),
        }
    }

    /// `adapter_config.json` for `LoraConfig(r, lora_alpha)`: the release's file with the two
    /// values replaced (`alpha` as the scenario wrote it, int or float, as Python keeps it).
    pub fn adapter_config(&self, r: i64, alpha: &PyJson) -> String {
        let mut cfg = pyjson::loads(&self.adapter_config).expect("PEFT.json's adapter_config.json is JSON");
        if let PyJson::Dict(items) = &mut cfg {
            for (k, v) in items.iter_mut() {
                match k.as_str() {
                    "r" => *v = PyJson::Int(r as i128),
                    "lora_alpha" => *v = alpha.clone(),
                    _ => {}
                }
            }
        }
        pyjson::dumps(&cfg, &DumpOptions { indent: Some(2), sort_keys: true, ..DumpOptions::default() }).expect("a JSON dict")
    }

    /// The `README.md` a save writes into a folder that holds `existing` (None: no card yet).
    pub fn model_card(&self, existing: Option<&str>) -> String {
        let Some(old) = existing else { return self.model_card.clone() };
        match self.b.model_card_update {
            CardUpdate::Unchanged => old.to_string(),
            CardUpdate::AppendSection => format!("{old}## Training procedure\n\n\n### Framework versions\n\n\n- PEFT {}\n", self.version),
            CardUpdate::InsertFrameworkLine => {
                // `lines = f.readlines()`; `lines.insert(lines.index(heading) + 2, line)`.
                let mut lines: Vec<String> = old.split_inclusive('\n').map(str::to_string).collect();
                let line = format!("- PEFT {}\n", self.version);
                match lines.iter().position(|l| l == "### Framework versions\n") {
                    Some(i) => lines.insert((i + 2).min(lines.len()), line),
                    None => lines.push(format!("### Framework versions\n\n\n{line}")),
                }
                lines.concat()
            }
        }
    }

    /// The fields `LoraConfig` serialises in this release, in file order.
    pub fn config_fields(&self) -> Vec<String> {
        match pyjson::loads(&self.adapter_config) {
            Ok(PyJson::Dict(items)) => items.into_iter().map(|(k, _)| k).collect(),
            _ => vec![],
        }
    }

    /// The adapter weights file for `safe_serialization` (None: the release's default).
    pub fn weights_file(&self, safe_serialization: Option<bool>) -> &str {
        match safe_serialization {
            Some(true) => "adapter_model.safetensors",
            Some(false) => "adapter_model.bin",
            None => &self.default_weights_file,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every profile's adapter_config.json comes back byte for byte for the default adapter.
    #[test]
    fn adapter_config_round_trips() {
        for v in crate::hf::profile::supported() {
            let p = crate::hf::profile::Profile::get(v).unwrap();
            assert_eq!(p.peft.adapter_config(1, &PyJson::Int(2)), p.peft.adapter_config, "{v}");
        }
    }
}
