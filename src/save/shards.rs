//! Sharded weights: save_pretrained's layout for a model saved with `max_shard_size` (shards
//! `model-0000K-of-0000N.safetensors` or `pytorch_model-0000K-of-0000N.bin`, and an index
//! `model.safetensors.index.json` / `pytorch_model.bin.index.json` whose `weight_map` names each
//! key's shard). A scenario's `reshard` damage writes it ([`reshard`], contract v3 part 3 e);
//! `resume_from_checkpoint` and `load_best_model_at_end` read it ([`read_sharded`]) where the
//! release's `_load_from_checkpoint` / `_load_best_model` look for an index.
//!
//! The layout is the generator's `reshard` (conformance/generate.py), file for file: the same
//! split, names and index text, so that both implementations resume from the same folder.

use crate::formats::pyjson::{self, DumpOptions, PyJson};
use crate::hf::profile::Profile;
use crate::save::store::{self, StateDictContainer};
use std::path::Path;

pub type Result<T> = std::result::Result<T, String>;

/// The index files `load_sharded_checkpoint` knows, in the order it names them.
pub const INDEX_FILES: [&str; 2] = ["pytorch_model.bin.index.json", "model.safetensors.index.json"];

/// The `reshard` damage: `folder`'s model.safetensors (else pytorch_model.bin) rewritten as
/// shards of at most `max_shard_size` bytes in state-dict order (a tensor that would take a
/// shard past it begins the next; one larger than it stands alone), in the file's own format,
/// with the index (`json.dumps(index, indent=2, sort_keys=True) + "\n"`); the single file
/// removed last. A folder without a full weights file is left alone (as the generator does).
pub fn reshard(folder: &Path, max_shard_size: u64, profile: &Profile) -> Result<()> {
    let (src, prefix, ext, index_name) = if folder.join("model.safetensors").is_file() {
        (folder.join("model.safetensors"), "model", "safetensors", "model.safetensors.index.json")
    } else if folder.join("pytorch_model.bin").is_file() {
        (folder.join("pytorch_model.bin"), "pytorch_model", "bin", "pytorch_model.bin.index.json")
    } else {
        return Ok(());
    };
    let tensors = store::read_tensors(&src)?.ok_or_else(|| format!("{}: gone", src.display()))?;
    let bytes = |v: &[f32]| 4 * v.len() as u64;
    let mut shards: Vec<Vec<(String, Vec<i64>, Vec<f32>)>> = vec![];
    let mut size = 0;
    for t in tensors {
        let n = bytes(&t.2);
        if shards.is_empty() || size + n > max_shard_size {
            shards.push(vec![]);
            size = 0;
        }
        size += n;
        shards.last_mut().expect("pushed").push(t);
    }
    let total: u64 = shards.iter().flatten().map(|t| bytes(&t.2)).sum();
    let mut weight_map = vec![];
    for (i, shard) in shards.iter().enumerate() {
        let name = format!("{prefix}-{:05}-of-{:05}.{ext}", i + 1, shards.len());
        store::write_state_dict(&folder.join(&name), profile, shard, StateDictContainer::Dict, true)?;
        weight_map.extend(shard.iter().map(|(k, _, _)| (k.clone(), PyJson::Str(name.clone()))));
    }
    let index = PyJson::Dict(vec![
        ("metadata".into(), PyJson::Dict(vec![("total_size".into(), PyJson::Int(total as i128))])),
        ("weight_map".into(), PyJson::Dict(weight_map)),
    ]);
    let text = pyjson::dumps(&index, &DumpOptions::hf()).map_err(|e| e.to_string())? + "\n";
    // Not a save's file event (no failpoint): the damage happens between the runs.
    std::fs::write(folder.join(index_name), text).map_err(|e| format!("{index_name}: {e}"))?;
    std::fs::remove_file(&src).map_err(|e| format!("{}: {e}", src.display()))
}

/// `load_sharded_checkpoint`'s reading of `folder` through the index `index_file`: every
/// shard its `weight_map` names, their tensors together (key, values).
pub fn read_sharded(folder: &Path, index_file: &str) -> Result<Vec<(String, Vec<f32>)>> {
    let index = pyjson::read_file(folder.join(index_file)).map_err(|e| format!("{index_file}: {e}"))?;
    let map = match index.get("weight_map") {
        Some(PyJson::Dict(m)) => m,
        _ => return Err(format!("{index_file}: no weight_map object")),
    };
    let mut files: Vec<&String> = vec![];
    for (_, f) in map {
        let PyJson::Str(f) = f else { return Err(format!("{index_file}: a weight_map value that is no file name")) };
        if !files.contains(&f) {
            files.push(f);
        }
    }
    let mut out = vec![];
    for f in files {
        let shard = store::read_state_dict(&folder.join(f))?.ok_or_else(|| format!("{index_file} names {f}, which is not there"))?;
        out.extend(shard);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshard_splits_in_order_and_reads_back_whole() {
        let profile = &Profile::get("5.24.0").unwrap();
        for file in ["model.safetensors", "pytorch_model.bin"] {
            let dir = tempfile::tempdir().unwrap();
            let tensors = vec![("w".to_string(), vec![1, 2], vec![1.0, 2.0]), ("b".to_string(), vec![1], vec![3.0]), ("c".to_string(), vec![1], vec![4.0])];
            store::write_state_dict(&dir.path().join(file), profile, &tensors, StateDictContainer::Dict, true).unwrap();
            // In the file's order (a torch-saved dict's; safetensors' load_file gives the names
            // sorted): w, b, c or b, c, w; 8 bytes a shard: w alone, b and c together.
            reshard(dir.path(), 8, profile).unwrap();
            let (prefix, ext) = file.split_once('.').unwrap();
            let (prefix, index) = (if prefix == "model" { "model" } else { "pytorch_model" }, format!("{file}.index.json"));
            assert!(!dir.path().join(file).exists());
            let text = std::fs::read_to_string(dir.path().join(&index)).unwrap();
            let first = format!("{prefix}-00001-of-00002.{ext}");
            let second = format!("{prefix}-00002-of-00002.{ext}");
            let (w, bc) = if ext == "bin" { (&first, &second) } else { (&second, &first) };
            for want in [format!("\"total_size\": 16"), format!("\"w\": \"{w}\""), format!("\"b\": \"{bc}\""), format!("\"c\": \"{bc}\"")] {
                assert!(text.contains(&want), "{want} in {text}");
            }
            let mut back = read_sharded(dir.path(), &index).unwrap();
            back.sort_by(|x, y| x.0.cmp(&y.0));
            assert_eq!(back, vec![("b".into(), vec![3.0]), ("c".into(), vec![4.0]), ("w".into(), vec![1.0, 2.0])]);
        }
    }
}
