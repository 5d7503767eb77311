//! `save_total_limit`: which checkpoint folders to delete. Pure: the executor lists the folders
//! (name and mtime) and deletes what this returns.

use crate::hf::behaviors::{Protection, RotationOrder};
use crate::hf::error::HfError;

/// A `checkpoint-*` folder as HF's glob sees it: its path as HF spells it
/// (`<output_dir>/checkpoint-N`) and its modification time in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Folder {
    pub path: String,
    pub mtime: f64,
}

/// The greedy `.*checkpoint-([0-9]+)` match HF uses for numeric order.
pub fn step_of(path: &str) -> Option<u64> {
    let at = path.rfind("checkpoint-")?;
    let digits: String = path[at + "checkpoint-".len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// `^checkpoint\-(\d+)$` as Python's `re` matches it: `$` also matches before one final newline.
/// (Python's `\d` also takes non-ASCII decimal digits; HF never writes them, and they are not
/// taken here.)
pub fn hf_step(name: &str) -> Option<u64> {
    let body = name.strip_suffix('\n').unwrap_or(name);
    let digits = body.strip_prefix("checkpoint-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().or(Some(u64::MAX))
}

/// `get_last_checkpoint`: among `(name, is_dir)` entries, the `checkpoint-N` with the largest N
/// (the first of equal numbers in listing order, as Python's `max`).
pub fn last_checkpoint<'a>(entries: impl IntoIterator<Item = (&'a str, bool)>) -> Option<&'a str> {
    let mut best: Option<(&str, u64)> = None;
    for (name, is_dir) in entries {
        if !is_dir {
            continue;
        }
        if let Some(n) = hf_step(name) {
            if best.is_none_or(|(_, b)| n > b) {
                best = Some((name, n));
            }
        }
    }
    best.map(|(n, _)| n)
}

/// Oldest first, in the version's order.
pub fn sort(folders: &[Folder], order: RotationOrder) -> Vec<String> {
    let numeric = || {
        let mut v: Vec<(u64, &String)> = folders.iter().filter_map(|f| step_of(&f.path).map(|s| (s, &f.path))).collect();
        v.sort();
        v.into_iter().map(|(_, p)| p.clone()).collect::<Vec<_>>()
    };
    let by_mtime = || {
        let mut v: Vec<(f64, &String)> = folders.iter().map(|f| (f.mtime, &f.path)).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        v
    };
    match order {
        RotationOrder::Numeric => numeric(),
        RotationOrder::Mtime => by_mtime().into_iter().map(|(_, p)| p.clone()).collect(),
        RotationOrder::MtimeWithNumericFallback => {
            let v = by_mtime();
            if v.len() > 1 && v[v.len() - 1].0 - v[0].0 < 1.0 {
                numeric()
            } else {
                v.into_iter().map(|(_, p)| p.clone()).collect()
            }
        }
    }
}

/// `str(Path(p))`: drops a leading "./", repeated and trailing slashes.
pub fn normalize(p: &str) -> String {
    let abs = p.starts_with('/');
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    let body = parts.join("/");
    if abs {
        format!("/{body}")
    } else if body.is_empty() {
        ".".into()
    } else {
        body
    }
}

/// `_sorted_checkpoints`' protection of the best: the best is bubbled to second-to-last. It runs
/// before `_rotate_checkpoints` compares the count with the limit, so the unguarded lookup
/// (4.31-4.34) raises even when nothing would be deleted. The end of `train()` calls it too
/// (whatever save_total_limit says).
pub fn protect_best(sorted: &[String], best: Option<&str>, protection: Protection) -> Result<Vec<String>, HfError> {
    let mut v = sorted.to_vec();
    let Some(b) = best else { return Ok(v) };
    let Protection::Bubble { guarded } = protection;
    let nb = normalize(b);
    match v.iter().position(|p| *p == nb) {
        Some(i) => {
            for j in i..v.len().saturating_sub(2) {
                v.swap(j, j + 1);
            }
        }
        None if !guarded => return Err(HfError::value(format!("{} is not in list", crate::formats::pyjson::py_str_repr(&nb)))),
        None => {}
    }
    Ok(v)
}

/// `_rotate_checkpoints`: the folders to delete after a save, oldest first. Nothing when the
/// limit is unset or not positive (HF returns before listing); otherwise the best is protected
/// first (which may raise, see [`protect_best`]), then the oldest beyond the limit go, and
/// `save_total_limit=1` keeps 2 when the best is not the newest.
pub fn plan(
    sorted: &[String],
    limit: Option<i64>,
    best: Option<&str>,
    protection: Protection,
) -> Result<Vec<String>, HfError> {
    let Some(limit) = limit.filter(|l| *l > 0) else { return Ok(vec![]) };
    let v = protect_best(sorted, best, protection)?;
    let limit = limit as usize;
    if v.len() <= limit {
        return Ok(vec![]);
    }
    let keep = if limit == 1 && best.is_some_and(|b| v.last().map(String::as_str) != Some(b)) { 2 } else { limit };
    let n = v.len().saturating_sub(keep);
    Ok(v[..n].to_vec())
}
