//! Which checkpoints belong to one run, and the run's newest known `TrainerState`.
//!
//! Within one `train()` call HF only appends to `log_history`, and every save writes the whole
//! state, so for two checkpoints of one run the later one's `log_history` starts with the
//! earlier one's entries (runtimes included, which differ between any two real runs), and both
//! have the same `max_steps` and `num_train_epochs`; a checkpoint's `global_step` is the number
//! in its name. A folder that breaks this was written by another `train()` call sharing the
//! `output_dir`: another run, or the same one resumed with other arguments (a resume keeps the
//! loaded `log_history`, so then one history still leads into the other; said in the message).
//!
//! The reference state is the newest one the folder holds: a run directory's `result.json`
//! `final_state` (the runner contract: the Trainer's state after `train()`), else the output
//! folder's own `trainer_state.json` (`save_state()`), else the checkpoint that the most
//! checkpoints (itself included) are consistent with (ties: the higher step, HF's own pick).

use crate::formats::pyjson::PyJson;
use super::checkpoint::{int, Checkpoint};

/// Where the reference state comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `result.json`'s `final_state` (a ckptspec run directory).
    FinalState,
    /// The output folder's `trainer_state.json` (`trainer.save_state()`).
    FolderState,
    /// A checkpoint's `trainer_state.json` (index into the checkpoint list).
    Checkpoint(usize),
}

impl Source {
    pub fn describe(&self, cks: &[Checkpoint]) -> String {
        match self {
            Source::FinalState => "result.json final_state".into(),
            Source::FolderState => "the output folder's trainer_state.json".into(),
            Source::Checkpoint(i) => format!("{}/trainer_state.json", cks[*i].name),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Lineage {
    pub source: Option<Source>,
    pub state: Option<PyJson>,
    /// Checkpoints (indices) consistent with the reference.
    pub members: Vec<usize>,
    /// Checkpoints that are not: the first reason, and whether their log_history leads into the
    /// reference's (or the reference's into theirs): one run resumed with other arguments?
    pub foreign: Vec<(usize, String, bool)>,
}

/// Python-equal JSON with NaN equal to NaN (two writes of one state compare equal).
pub fn same(a: &PyJson, b: &PyJson) -> bool {
    match (a, b) {
        (PyJson::Float(x), PyJson::Float(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (PyJson::List(x), PyJson::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (PyJson::Dict(x), PyJson::Dict(y)) => x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q)),
        _ => a == b,
    }
}

fn history(s: &PyJson) -> &[PyJson] {
    match s.get("log_history") {
        Some(PyJson::List(l)) => l,
        _ => &[],
    }
}

/// How a checkpoint relates to the run's newest state.
#[derive(Debug, Clone, PartialEq)]
pub enum Relation {
    /// Part of the run.
    Member,
    /// Written by another `train()` call: why, and whether its log_history still leads into
    /// the newest state's (then it may be the same run resumed with other arguments, e.g. more
    /// steps: still two calls sharing the folder, and the plan of the newest arguments does not
    /// cover it).
    Foreign { why: String, continues: bool },
}

/// How checkpoint `c` relates to the run whose newest state is `r` (a checkpoint without a
/// readable state cannot be judged and counts as a member).
pub fn relation(c: &Checkpoint, r: &PyJson) -> Relation {
    let Some(s) = c.state.as_ref() else { return Relation::Member };
    let (hc, hr) = (history(s), history(r));
    let diverges = if hc.len() > hr.len() {
        Some(format!("its log_history has {} entries, more than the run's newest state ({})", hc.len(), hr.len()))
    } else {
        hc.iter().zip(hr).position(|(a, b)| !same(a, b)).map(|i| {
            let step = hc[i].get("step").and_then(int).map(|s| format!(" (step {s})")).unwrap_or_default();
            format!("its log_history entry {i}{step} differs from the run's")
        })
    };
    let foreign = |why: String| Relation::Foreign { why, continues: diverges.is_none() };
    let gs = s.get("global_step").and_then(int);
    if let (Some(n), Some(g)) = (c.step, gs) {
        if n as i128 != g {
            return foreign(format!("its trainer_state.json has global_step {g}, not {n}"));
        }
    }
    if let Some(why) = diverges.clone() {
        return foreign(why);
    }
    if let (Some(g), Some(rg)) = (gs, r.get("global_step").and_then(int)) {
        if g > rg {
            return foreign(format!("its global_step {g} is past the run's newest state (step {rg})"));
        }
    }
    for key in ["max_steps", "num_train_epochs"] {
        if let (Some(a), Some(b)) = (s.get(key), r.get(key)) {
            if !same(a, b) {
                return foreign(format!("its {key} is {}, the run's {}", show(a), show(b)));
            }
        }
    }
    Relation::Member
}

fn show(v: &PyJson) -> String {
    crate::formats::pyjson::dumps(v, &crate::formats::pyjson::DumpOptions::default()).unwrap_or_else(|_| format!("{v:?}"))
}

/// Builds the lineage from the run's own final states (if any) and its checkpoints.
pub fn build(cks: &[Checkpoint], final_state: Option<&PyJson>, folder_state: Option<&PyJson>) -> Lineage {
    let judged = |r: &PyJson| -> (Vec<usize>, Vec<(usize, String, bool)>) {
        let (mut m, mut f) = (vec![], vec![]);
        for (i, c) in cks.iter().enumerate() {
            if c.step.is_none() {
                continue;
            }
            match relation(c, r) {
                Relation::Member => m.push(i),
                Relation::Foreign { why, continues } => f.push((i, why, continues)),
            }
        }
        (m, f)
    };
    let fixed = final_state.map(|s| (Source::FinalState, s)).or(folder_state.map(|s| (Source::FolderState, s)));
    if let Some((src, s)) = fixed {
        let (members, foreign) = judged(s);
        return Lineage { source: Some(src), state: Some(s.clone()), members, foreign };
    }
    let mut best: Option<(usize, usize)> = None; // (index, consistent count)
    let mut order: Vec<usize> = (0..cks.len()).filter(|&i| cks[i].state.is_some() && cks[i].step.is_some()).collect();
    order.sort_by_key(|&i| cks[i].step);
    for &i in &order {
        let r = cks[i].state.as_ref().expect("filtered");
        let n = judged(r).0.len();
        if best.is_none_or(|(_, b)| n >= b) {
            best = Some((i, n));
        }
    }
    match best {
        Some((i, _)) => {
            let r = cks[i].state.clone().expect("filtered");
            let (members, foreign) = judged(&r);
            Lineage { source: Some(Source::Checkpoint(i)), state: Some(r), members, foreign }
        }
        None => Lineage {
            source: None,
            state: None,
            members: (0..cks.len()).filter(|&i| cks[i].step.is_some()).collect(),
            foreign: vec![],
        },
    }
}
