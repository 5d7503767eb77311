//! `train(resume_from_checkpoint=...)`: which checkpoint (`get_last_checkpoint` or a path),
//! `_load_from_checkpoint` (the weights), the checkpoint's trainer_state.json, 
//! `_load_optimizer_and_scheduler`, `_load_rng_state`, and where in the data the resumed run
//! starts. HF's errors for missing files are here, for damaged ones in [`super::damaged`].

use crate::formats::pyjson::py_str_repr;
use crate::formats::pyjson::PyJson;
use crate::formats::torch_format;
use crate::hf::args;
use crate::hf::behaviors::{ResumeBehaviors, StateBatchSize};
use crate::hf::error::HfError;
use crate::hf::state::{Intervals, TrainerState};
use crate::numerics::optim;
use crate::numerics::plateau;
use crate::numerics::rng::TorchGenerator;
use crate::policy::rotation;
use crate::save::{atomic, shards, store};
use std::path::Path;
use crate::world::scenario::ModelKind;
use super::damaged;
use super::{io_err, SaveMode, Trainer};
use super::optimizer::Scheduler;

/// Where `train(resume_from_checkpoint=...)` resumes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeFrom {
    /// `resume_from_checkpoint=True`: HF's `get_last_checkpoint(output_dir)`, the
    /// highest-numbered folder named exactly `checkpoint-<digits>` (atomic mode's staging folders
    /// never match it, so it never picks a half-written checkpoint there).
    Last,
    /// A folder of output_dir, passed as the path `output/<name>`.
    Checkpoint(String),
}

/// The checkpoint a resumed run loads, and its trainer_state.json.
#[derive(Debug, Clone)]
pub(super) struct Resumed {
    /// `output/checkpoint-N`, relative to the run directory, as HF's paths are.
    pub(super) rel: String,
    /// The text of its trainer_state.json (None: no such file, which only releases before 4.36
    /// accept). Parsed where the release reads it.
    pub(super) state_text: Option<String>,
}

/// `logging_steps`, `eval_steps`, `save_steps` of a trainer_state.json (4.32+ record them).
pub(super) fn loaded_intervals(state: &PyJson) -> Option<Intervals> {
    let n = |k: &str| match state.get(k)? {
        PyJson::Int(i) => Some(args::Num::Int(*i as i64)),
        PyJson::Float(f) => Some(args::Num::Float(*f)),
        _ => None,
    };
    Some(Intervals { logging: n("logging_steps")?, eval: Some(n("eval_steps")?), save: n("save_steps")? })
}

impl<'a> Trainer<'a> {
    /// `train(resume_from_checkpoint=...)` before `_inner_training_loop`: picks the checkpoint,
    /// loads its weights (`_load_from_checkpoint`) and reads its trainer_state.json, with HF's
    /// errors for what is missing.
    pub(super) fn begin_resume(&mut self, from: &ResumeFrom) -> Result<(), HfError> {
        let out_rel = self.output_rel();
        if self.mode == SaveMode::Atomic {
            // A killed atomic run may have left a staging folder (never matched as a checkpoint).
            let out = self.output_abs();
            atomic::remove_leftovers(&out).map_err(|e| io_err(&out, e))?;
        }
        let rel = match from {
            ResumeFrom::Checkpoint(name) => format!("{out_rel}/{name}"),
            ResumeFrom::Last => {
                let out = self.output_abs();
                let rd = std::fs::read_dir(&out).map_err(|_| {
                    HfError::new("FileNotFoundError", format!("[Errno 2] No such file or directory: {}", py_str_repr(out_rel)))
                })?;
                let entries: Vec<(String, bool)> = rd.flatten().map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir())).collect();
                match rotation::last_checkpoint(entries.iter().map(|(n, d)| (n.as_str(), *d))) {
                    Some(name) => format!("{out_rel}/{name}"),
                    None => return Err(HfError::value(format!("No valid checkpoint found in output directory ({out_rel})"))),
                }
            }
        };
        if let Some(feed) = self.plan.as_mut() {
            feed.picked(&rel);
        }
        let dir = self.run_dir.join(&rel);
        // `_load_from_checkpoint`: a folder with none of the weights files (full, sharded index or
        // adapter) is no checkpoint; full weights load into any model (`strict=False`), else a
        // `PeftModel` loads its adapter, else the sharded load looks for its index.
        let has = |f: &str| dir.join(f).is_file();
        let weights = ["model.safetensors", "pytorch_model.bin"].into_iter().find(|f| has(f));
        let adapter = ["adapter_model.safetensors", "adapter_model.bin"].into_iter().find(|f| has(f));
        let index: Vec<&str> = shards::INDEX_FILES.into_iter().filter(|f| has(f)).collect();
        if weights.is_none() && adapter.is_none() && index.is_empty() {
            return Err(HfError::value(format!("Can't find a valid checkpoint at {rel}")));
        }
        let rules = self.resume_rules();
        let lora = self.sc.model.kind == ModelKind::Lora;
        let read = |file: &str| {
            let weights_path = dir.join(file);
            store::read_state_dict(&weights_path).map_err(|e| {
                damaged::weights_load(&weights_path, &rules).unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged {file} in {rel}: {e}")))
            })
        };
        let loaded = match (weights, adapter) {
            (Some(w), _) => read(w)?,
            (None, Some(a)) if lora => read(a)?,
            (None, _) if lora => {
                return Err(HfError::not_modelled(format!("a LoRA resume from {rel}, which holds a sharded index and no adapter (HF warns and loads nothing)")))
            }
            // `load_sharded_checkpoint(model, folder, strict=False)`: the shards the index names.
            (None, _) => match index[..] {
                [] => {
                    return Err(HfError::value(format!(
                        "Can't find a checkpoint index (pytorch_model.bin.index.json or model.safetensors.index.json) in {rel}."
                    )))
                }
                [one] => Some(shards::read_sharded(&dir, one).map_err(|e| HfError::not_modelled(format!("HF's error for damaged sharded weights in {rel}: {e}")))?),
                _ => return Err(HfError::not_modelled(format!("{rel} holds both a bin and a safetensors index (which one load_sharded_checkpoint prefers is not modelled)"))),
            },
        };
        if let Some(sd) = loaded {
            let set = self.model.load(&sd);
            // `_issue_warnings_after_load` reads `model._keys_to_ignore_on_save` when keys are
            // missing: a plain nn.Module has no such attribute.
            if self.sc.model.kind == ModelKind::Module && set.len() < self.model.state_dict().len() {
                return Err(HfError::new("AttributeError", "'RegressionModule' object has no attribute '_keys_to_ignore_on_save'"));
            }
        }
        let sp = dir.join("trainer_state.json");
        let state_text = if sp.is_file() {
            let bytes = std::fs::read(&sp).map_err(|e| io_err(&sp, e))?;
            let text = String::from_utf8(bytes)
                .map_err(|e| HfError::not_modelled(format!("HF's error for a trainer_state.json that is not UTF-8 in {rel}: {e}")))?;
            if rules.requires_trainer_state {
                // train() reads it right after the weights (for the batch size it records).
                let json = damaged::parse_trainer_state(&text)
                    .map_err(|e| e.unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged trainer_state.json in {rel}"))))?;
                let from_state = match rules.batch_size_from_state {
                    StateBatchSize::Never => false,
                    StateBatchSize::Always => true,
                    StateBatchSize::WithAutoFindBatchSize => self.args.auto_find_batch_size,
                };
                if let (true, Some(PyJson::Int(b))) = (from_state, json.get("train_batch_size")) {
                    self.state_batch_size = Some(*b as usize);
                }
            }
            Some(text)
        } else if rules.requires_trainer_state {
            return Err(HfError::new(
                "FileNotFoundError",
                format!("[Errno 2] No such file or directory: {}", py_str_repr(&format!("{rel}/trainer_state.json"))),
            ));
        } else {
            None
        };
        self.resume = Some(Resumed { rel, state_text });
        Ok(())
    }

    /// The checkpoint's trainer_state.json (`TrainerState.load_from_json`) in place of the fresh
    /// state, then what `_inner_training_loop` sets after it (`max_steps`, `num_train_epochs`).
    /// A file that is not JSON is Python's `JSONDecodeError`.
    pub(super) fn load_trainer_state(&mut self, r: &Resumed, max_steps: i64, num_train_epochs: i64) -> Result<(), HfError> {
        let rel = &r.rel;
        let Some(text) = &r.state_text else { return Ok(()) };
        let json = damaged::parse_trainer_state(text).map_err(|e| e.unwrap_or_else(|| HfError::not_modelled(format!("HF's error for a damaged trainer_state.json in {rel}"))))?;
        let mut st = TrainerState::from_json(&json, self.profile)
            .map_err(|e| HfError::not_modelled(format!("HF's error for a trainer_state.json it cannot use in {rel}: {e}")))?;
        if let Some(b) = &st.best.best_model_checkpoint {
            if self.resume_rules().drops_missing_best && !self.run_dir.join(b).is_dir() {
                st.best.best_model_checkpoint = None;
            }
        }
        st.max_steps = max_steps;
        st.num_train_epochs = num_train_epochs;
        // HF's resumed run goes by the loaded state: where it records the intervals (4.32+),
        // the checkpoint's logging/eval/save steps, whatever the new arguments say.
        match (self.profile.state_has_intervals, loaded_intervals(&json)) {
            (true, Some(mut iv)) => {
                if self.iv.eval.is_none() && iv.eval == Some(args::Num::Int(500)) {
                    iv.eval = None; // the dataclass default, written for an unset eval_steps
                }
                self.iv = iv;
                st.intervals = Some(iv);
            }
            _ => st.intervals = self.state.intervals,
        }
        self.state = st;
        if self.args.restore_callback_states_from_checkpoint {
            self.restore_callback_states();
        }
        Ok(())
    }

    /// `_load_optimizer_and_scheduler`: only when both optimizer.pt and scheduler.pt exist (else
    /// both restart from scratch, without a word). The optimizer's groups take the saved lrs;
    /// LambdaLR its step count, ReduceLROnPlateau and GreedyLR their whole saved state.
    pub(super) fn load_optimizer_and_scheduler(&mut self, r: &Resumed) -> Result<(), HfError> {
        let rel = &r.rel;
        let rules = self.resume_rules();
        let unusable = |what: &str, e: String| HfError::not_modelled(format!("HF's error for a {what} it cannot use in {rel}: {e}"));
        let dir = self.run_dir.join(rel);
        let (opt_p, sched_p) = (dir.join("optimizer.pt"), dir.join("scheduler.pt"));
        if !(opt_p.is_file() && sched_p.is_file()) {
            return Ok(());
        }
        let load = |p: &Path, what: &str| {
            torch_format::load(p).map_err(|e| damaged::torch_load(p, rules.empty_state_file_message, rules.zip_error_suffix).unwrap_or_else(|| unusable(what, e.to_string())))
        };
        if self.launch.world_size() > 1 && self.profile.launch_rules().map_location_fails {
            // `torch.load(optimizer.pt, map_location=self.args.device)` with the indexed CPU
            // device of a launch (`cpu:<local rank>`), which torch cannot map a storage to.
            return Err(HfError::new(
                "RuntimeError",
                "don't know how to restore data location of torch.storage.UntypedStorage (tagged with cpu:0)",
            ));
        }
        let opt = load(&opt_p, "optimizer.pt")?;
        let sched = load(&sched_p, "scheduler.pt")?;
        optim::check_saved_groups(&opt, &self.opt.group_sizes()).map_err(HfError::value)?;
        let lrs: Vec<f64> = self.opt.load_state_dict(&opt).map_err(|e| unusable("optimizer.pt", e))?;
        // The saved group lrs with their Python type (a reduction may have stored an int min_lr).
        let saved_lrs: Vec<plateau::PyNum> = opt
            .get("param_groups")
            .and_then(|g| g.as_seq())
            .map(|gs| gs.iter().filter_map(|g| g.get("lr").and_then(plateau::py_num)).collect())
            .unwrap_or_default();
        match &mut self.sched {
            Scheduler::Lambda(_) => {
                let last = sched.get("last_epoch").and_then(|v| v.as_i64()).ok_or_else(|| unusable("scheduler.pt", "no last_epoch".into()))?;
                self.sched_steps = last;
                self.current_lr = lrs.first().copied().unwrap_or(self.current_lr);
            }
            Scheduler::Plateau(pl) => {
                pl.load_state_dict(&sched, saved_lrs).map_err(|e| unusable("scheduler.pt", e))?;
                self.current_lr = pl.lrs_f64()[0];
            }
            Scheduler::Greedy(g) => {
                g.load_state_dict(&sched, saved_lrs).map_err(|e| unusable("scheduler.pt", e))?;
                // GreedyLR sets every group's lr to its `_last_lr`.
                let lr = g.lrs_f64()[0];
                self.current_lr = lr;
                self.opt.set_lr(lr);
            }
        }
        Ok(())
    }

    /// Where a resumed run starts: (epochs trained, batches already trained in the current
    /// epoch), HF's `global_step // num_update_steps_per_epoch` and `(global_step % it) * GA`
    /// (always a whole number of accumulation windows, by this arithmetic).
    pub(super) fn resume_position(&mut self, nupe: usize) -> (usize, usize) {
        let g = self.state.global_step;
        self.initial_global_step = g;
        self.last_logged = g;
        if let Some(feed) = self.plan.as_mut() {
            // Which given evaluations are the resumed run's own: past those its loaded state holds.
            feed.resumed_at(g, &self.state.log_history);
        }
        let epochs_trained = (g / nupe as u64) as usize;
        let steps_in_epoch = (g % nupe as u64) as usize * self.args.gradient_accumulation_steps;
        (epochs_trained, steps_in_epoch)
    }

    pub(super) fn resume_rules(&self) -> ResumeBehaviors {
        self.profile.resume_rules()
    }

    /// `_load_rng_state`: the global torch generator from `rng_state.pth` (nothing when the file
    /// is absent: HF only logs that).
    pub(super) fn load_rng_state(&mut self) -> Result<(), HfError> {
        let Some(r) = &self.resume else { return Ok(()) };
        // Each process reads its own file (`rng_state_{process_index}.pth` in a launch of
        // several), from its node's disk; one without it keeps its generator. Where the two
        // processes of a launch then hold different generators, the second follows its own
        // (`other_rng`): a sampler that draws its seed from it orders that process's data.
        let rel = r.rel.clone();
        let paths: Vec<std::path::PathBuf> = self
            .launch
            .ranks()
            .iter()
            .map(|k| self.launch.node_dir(&self.root_dir, k.node).join(&rel).join(self.rng_file(k.rank)))
            .collect();
        let before = self.rng.clone();
        let mut states = vec![];
        for path in &paths {
            states.push(if path.is_file() { Some(self.read_rng_file(path)?) } else { None });
        }
        if let Some(bytes) = &states[0] {
            self.rng.global = TorchGenerator::set_state(bytes).map_err(|e| HfError::not_modelled(format!("{}: {e}", paths[0].display())))?;
        }
        if states.len() > 1 && states[1] != states[0] {
            let mut other = before;
            if let Some(bytes) = &states[1] {
                other.global = TorchGenerator::set_state(bytes).map_err(|e| HfError::not_modelled(format!("{}: {e}", paths[1].display())))?;
            }
            self.other_rng = Some(other);
        }
        Ok(())
    }

    /// The `cpu` generator state of an rng file, or HF's error for a damaged one.
    fn read_rng_file(&self, path: &Path) -> Result<Vec<u8>, HfError> {
        let damaged = |e: String| HfError::not_modelled(format!("HF's error for a damaged {}: {e}", path.display()));
        let rules = self.resume_rules();
        let v = torch_format::load(path)
            .map_err(|e| damaged::torch_load(path, rules.empty_state_file_message, rules.zip_error_suffix).unwrap_or_else(|| damaged(e.to_string())))?;
        let cpu = v.get("cpu").and_then(|t| t.as_tensor()).ok_or_else(|| damaged("no cpu state".into()))?;
        cpu.contiguous_bytes().map_err(|e| damaged(e.to_string()))
    }

}
