//! `_save_checkpoint` (the folder, its files in the release's order, the best checkpoint's
//! pointer, tmp-checkpoint staging where the release has it, atomic mode), `_save` (weights,
//! config, tokenizer, training_args.bin), `_rotate_checkpoints`, and the user's `save_model()` /
//! `save_state()` calls. The files themselves are [`crate::save::store`]'s.

use crate::formats::pyjson::PyJson;
use crate::hf::args::Interval;
use crate::hf::behaviors::{BestTiming, CallbackRefresh, StagingElsewhere};
use crate::hf::error::HfError;
use crate::numerics::lr::LambdaLrState;
use crate::policy::{best, rotation};
use crate::save::{atomic, store};
use crate::save::store::StateDictContainer;
use crate::world::launch::Rank;
use crate::world::scenario::ModelKind;
use std::path::Path;
use super::{io_err, DeleteRule, DiskEvent, SaveMode, Trainer};
use super::optimizer::Scheduler;

impl<'a> Trainer<'a> {
    /// `_save_checkpoint` in every process of the launch: the main process's (all a run of one
    /// process has), then each other process's on its node's disk.
    pub(super) fn save_checkpoint(&mut self, metrics: Option<&Vec<(String, PyJson)>>) -> Result<(), HfError> {
        self.save_checkpoint_of_writer(metrics)?;
        for r in self.launch.ranks().into_iter().skip(1) {
            self.save_checkpoint_of(r, metrics)?;
        }
        Ok(())
    }

    /// `_save_checkpoint` in process `r` (not the main one). One that should save (each node's
    /// first with save_on_each_node) writes the checkpoint on its node's disk as the main process
    /// does, with its own `is_*_process_zero`, and rotates that disk; the others write only
    /// their `rng_state_{r}.pth`. Its state changes stay its own: the main process's state is
    /// the run's.
    fn save_checkpoint_of(&mut self, r: Rank, metrics: Option<&Vec<(String, PyJson)>>) -> Result<(), HfError> {
        let cwd = self.launch.node_dir(&self.root_dir, r.node);
        if self.args.should_save(r.rank, r.local_rank) {
            let (state, events) = (self.state.clone(), self.events.len());
            let main_dir = std::mem::replace(&mut self.run_dir, cwd);
            self.state.is_world_process_zero = false;
            self.state.is_local_process_zero = r.local_rank == 0;
            self.writer = r;
            let res = self.save_checkpoint_of_writer(metrics);
            self.writer = self.launch.ranks()[0];
            self.run_dir = main_dir;
            self.state = state;
            self.events.truncate(events);
            return res;
        }
        if self.args.save_only_model {
            return Ok(());
        }
        let out = cwd.join(self.output_rel());
        let folder = format!("checkpoint-{}", self.state.global_step);
        let final_dir = out.join(&folder);
        let file = self.rng_file(r.rank);
        let write = |dir: &Path| {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
            store::write_rng_named(dir, &file, self.profile, self.args.seed, &self.rank_torch_state(r.rank)).map_err(|e| io_err(dir, e))
        };
        // On the main process's disk the process writes before the main one renames the staging
        // folder: its file ends up in checkpoint-N. Another node's disk keeps its own staging
        // folder, renamed, left or deleted as the release does.
        let nonempty = std::fs::read_dir(&final_dir).map(|mut d| d.next().is_some()).unwrap_or(false);
        let own_disk = r.node != 0 && self.launch.disks == crate::world::launch::Disks::PerNode;
        if !(own_disk && self.profile.staging_dir && !nonempty) {
            return write(&final_dir);
        }
        let staging = out.join(format!("tmp-{folder}"));
        write(&staging)?;
        match self.profile.launch_rules().staging_elsewhere {
            StagingElsewhere::Renamed => std::fs::rename(&staging, &final_dir).map_err(|e| io_err(&staging, e)),
            StagingElsewhere::Left => Ok(()),
            StagingElsewhere::Removed if r.local_rank == 0 => std::fs::remove_dir_all(&staging).map_err(|e| io_err(&staging, e)),
            StagingElsewhere::Removed => Ok(()),
        }
    }

    /// The rng file of process `rank`: `rng_state.pth` for a run of one process.
    pub(super) fn rng_file(&self, rank: usize) -> String {
        self.launch.rng_file(rank)
    }

    /// `_save_checkpoint` as the writing process (`self.writer`, the main one unless
    /// [`Self::save_checkpoint_of`] says otherwise) does it.
    fn save_checkpoint_of_writer(&mut self, metrics: Option<&Vec<(String, PyJson)>>) -> Result<(), HfError> {
        let p = self.profile;
        self.store_flos();
        let folder = format!("checkpoint-{}", self.state.global_step);
        let rel = format!("{}/{folder}", self.output_rel());
        let out = self.output_abs();
        let final_dir = out.join(&folder);
        let atomic = self.mode == SaveMode::Atomic;
        // 4.36-4.38 write into tmp-checkpoint-N and rename it at the end, unless checkpoint-N
        // already exists and is not empty (then they write into it).
        let nonempty = std::fs::read_dir(&final_dir).map(|mut d| d.next().is_some()).unwrap_or(false);
        let staged = !atomic && p.staging_dir && !nonempty;
        let dir = if atomic {
            atomic::remove_leftovers(&out).map_err(|e| io_err(&out, e))?;
            atomic::staging_dir(&out, &folder)
        } else if staged {
            out.join(format!("tmp-{folder}"))
        } else {
            final_dir.clone()
        };
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        self.write_model(&dir)?;
        if p.best_timing == BestTiming::EveryEvalByStep
            && matches!(self.args.save_strategy, Interval::Steps | Interval::Epoch | Interval::Best)
        {
            if let Some(bs) = self.state.best.best_global_step.filter(|s| *s != 0) {
                let best_rel = format!("{}/checkpoint-{bs}", self.output_rel());
                // The folder being saved counts as existing, as it does in the HF-compatible
                // mode, which writes it in place (this era has no tmp-checkpoint staging); atomic
                // mode publishes it only at the end.
                let exists = (atomic && bs == self.state.global_step) || self.run_dir.join(&best_rel).exists();
                if exists {
                    self.state.best.best_model_checkpoint = Some(best_rel);
                }
            }
        }
        if !self.args.save_only_model {
            self.write_optimizer_and_scheduler(&dir)?;
            if !p.rng_after_state {
                self.write_rng(&dir)?;
            }
        }
        if p.best_timing == BestTiming::OnSaveWithMetrics {
            if let (Some(m), Some(key)) = (metrics, self.args.metric_to_check()) {
                let v = best::lookup(m, &key, p.missing_metric_best)?;
                self.state.best.on_save_with_metrics(&v, self.args.greater_is_better.unwrap_or(true), &rel);
            }
        }
        if p.stateful_callbacks != CallbackRefresh::Absent {
            self.refresh_stateful_callbacks(p.stateful_callbacks)?;
        }
        let sp = dir.join("trainer_state.json");
        store::write_text(&sp, &self.state.to_json_string(p)).map_err(|e| io_err(&sp, e))?;
        if !self.args.save_only_model && p.rng_after_state {
            self.write_rng(&dir)?;
        }
        if atomic {
            // The mtime goes on the staging folder before its fsync; the renames keep it.
            keep_mtime_order(&dir).map_err(|e| io_err(&dir, e))?;
            atomic::sync_tree(&dir).map_err(|e| io_err(&dir, e))?;
            atomic::publish(&out, &dir, &folder).map_err(|e| io_err(&final_dir, e))?;
        } else {
            if staged {
                std::fs::rename(&dir, &final_dir).map_err(|e| io_err(&dir, e))?;
            }
            keep_mtime_order(&final_dir).map_err(|e| io_err(&final_dir, e))?;
        }
        self.events.push(DiskEvent::Saved { step: self.state.global_step, folder: folder.clone(), best: self.state.best.clone() });
        self.rotate()?;
        Ok(())
    }

    pub(super) fn rotate(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        let mut folders = vec![];
        if let Ok(rd) = std::fs::read_dir(&out) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("checkpoint-") && e.path().is_dir() {
                    let mtime = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .map(|t| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0))
                        .unwrap_or(0.0);
                    folders.push(rotation::Folder { path: format!("{}/{name}", self.output_rel()), mtime });
                }
            }
        }
        let sorted = rotation::sort(&folders, self.profile.rotation);
        let del = rotation::plan(
            &sorted,
            self.args.save_total_limit,
            self.state.best.best_model_checkpoint.as_deref(),
            self.profile.rotation_protection,
        )?;
        for d in del {
            let folder = d.rsplit('/').next().unwrap_or(&d).to_string();
            self.delete_checkpoint(&folder);
            self.events.push(DiskEvent::Deleted { step: self.state.global_step, folder, why: DeleteRule::SaveTotalLimit });
        }
        Ok(())
    }

    /// Deletes `output/<folder>` as HF does (`shutil.rmtree(..., ignore_errors=True)`); in atomic
    /// mode by one rename out of HF's sight first, so that a crash never leaves it partial.
    pub(super) fn delete_checkpoint(&self, folder: &str) {
        let out = self.output_abs();
        let _ = match self.mode {
            SaveMode::Atomic => atomic::remove_checkpoint(&out, folder),
            SaveMode::HfCompatible => std::fs::remove_dir_all(out.join(folder)),
        };
    }

    /// `_save`: the model by its class (`save_pretrained` for a `PreTrainedModel` or a
    /// `PeftModel`, else "only saving its state dict"), the tokenizer, training_args.bin.
    pub(super) fn write_model(&self, dir: &Path) -> Result<(), HfError> {
        let p = self.profile;
        let weights = self.args.weights_file(p);
        let sd = self.model.state_dict();
        let write = |file: &str, container, format_metadata| {
            store::write_state_dict(&dir.join(file), p, &sd, container, format_metadata).map_err(|e| io_err(dir, e))
        };
        // `_align_special_tokens` at the start of train(): a save_model() without train()
        // writes the config as built.
        let pad = p.tokenizer_pad_token_id.filter(|_| self.sc.tokenizer && p.aligns_special_tokens && self.train_called);
        let (a, b) = (self.sc.model.a, self.sc.model.b);
        let pretrained_skipped = self.writer.rank != 0 && p.launch_rules().save_pretrained_main_only;
        match self.sc.model.kind {
            ModelKind::Regression | ModelKind::Linear | ModelKind::Lora if pretrained_skipped => {}
            ModelKind::Regression | ModelKind::Linear => {
                write(weights, StateDictContainer::Dict, true)?;
                let names = if self.sc.model.kind == ModelKind::Linear { ("LinearModel", "linear") } else { ("RegressionModel", "regression") };
                store::write_config(dir, p, names, a, b, pad, self.args.use_cache).map_err(|e| io_err(dir, e))?;
            }
            ModelKind::Module => write(weights, StateDictContainer::ModuleStateDict, p.state_dict_safetensors_metadata)?,
            ModelKind::Lora => {
                // `save_pretrained(output_dir, safe_serialization=args.save_safetensors)` where
                // the argument exists, else peft's default.
                let safe = p.has_field("save_safetensors").then_some(weights == "model.safetensors");
                write(p.peft.weights_file(safe), StateDictContainer::Dict, true)?;
                let lo = &self.sc.model.lora;
                let alpha = if lo.alpha_is_int { PyJson::Int(lo.alpha as i128) } else { PyJson::Float(lo.alpha) };
                let cfg = dir.join("adapter_config.json");
                store::write_text(&cfg, &p.peft.adapter_config(lo.r, &alpha)).map_err(|e| io_err(&cfg, e))?;
                let card = dir.join("README.md");
                let existing = std::fs::read_to_string(&card).ok();
                store::write_text(&card, &p.peft.model_card(existing.as_deref())).map_err(|e| io_err(&card, e))?;
            }
        }
        if self.sc.tokenizer {
            // `_save`: `processing_class.save_pretrained(output_dir)` after the model, before
            // training_args.bin, in every checkpoint and in save_model()'s folder.
            for (name, text) in &p.tokenizer_files {
                let path = dir.join(name);
                store::write_text(&path, text).map_err(|e| io_err(&path, e))?;
            }
        }
        let place = (self.launch.world_size() > 1).then(|| store::ProcessPlace {
            num_processes: self.launch.world_size(),
            process_index: self.writer.rank,
            local_process_index: self.writer.local_rank,
        });
        store::write_training_args_of(dir, p, &self.args, place).map_err(|e| io_err(dir, e))
    }

    /// The weights file `_load_best_model` reads from a checkpoint folder: for a `PeftModel` the
    /// adapter `load_adapter` finds (safetensors first), else the file `save_safetensors` names.
    pub(super) fn best_weights_file(&self, dir: &Path) -> &'static str {
        match self.sc.model.kind {
            ModelKind::Lora => ["adapter_model.safetensors", "adapter_model.bin"].into_iter().find(|f| dir.join(f).is_file()).unwrap_or("adapter_model.safetensors"),
            _ => self.args.weights_file(self.profile),
        }
    }

    pub(super) fn write_optimizer_and_scheduler(&self, dir: &Path) -> Result<(), HfError> {
        let opt_sd = self.opt.state_dict();
        store::write_pyvalue(&dir.join("optimizer.pt"), &opt_sd, self.profile).map_err(|e| io_err(dir, e))?;
        let sched_sd = match &self.sched {
            Scheduler::Lambda(s) => LambdaLrState::new(s, self.args.learning_rate, 2, self.sched_steps).to_py(self.profile.torch_layout),
            Scheduler::Plateau(p) => p.state_dict(self.profile.torch_layout),
            Scheduler::Greedy(g) => g.state_dict(),
        };
        store::write_pyvalue(&dir.join("scheduler.pt"), &sched_sd, self.profile).map_err(|e| io_err(dir, e))
    }

    pub(super) fn write_rng(&self, dir: &Path) -> Result<(), HfError> {
        let rank = self.writer.rank;
        store::write_rng_named(dir, &self.rng_file(rank), self.profile, self.args.seed, &self.rank_torch_state(rank)).map_err(|e| io_err(dir, e))
    }

    /// Process `rank`'s global torch generator: the main process's, unless a resume left the
    /// second process with a generator of its own (its rng file missing, or the main one's).
    pub(super) fn rank_torch_state(&self, rank: usize) -> Vec<u8> {
        match (&self.other_rng, rank) {
            (Some(other), 1) => other.torch_state(),
            _ => self.rng.torch_state(),
        }
    }

    /// `trainer.save_model()` after train(): weights, config and training_args.bin in output_dir.
    pub(super) fn save_model(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
        self.write_model(&out)
    }

    /// `trainer.save_state()`: trainer_state.json in output_dir.
    pub(super) fn save_state(&mut self) -> Result<(), HfError> {
        let out = self.output_abs();
        std::fs::create_dir_all(&out).map_err(|e| io_err(&out, e))?;
        let sp = out.join("trainer_state.json");
        store::write_text(&sp, &self.state.to_json_string(self.profile)).map_err(|e| io_err(&sp, e))
    }
}

/// Rotation by mtime (4.31, and 5.x when saves span a second) assumes each new checkpoint
/// folder is newer than the others, as it is under HF, whose saves take longer than the file
/// system's timestamp granularity (a few ms). Our saves can be faster than that, so when the
/// new folder's mtime does not exceed every other checkpoint's, it is set 1 ms past the newest.
pub(super) fn keep_mtime_order(dir: &Path) -> std::io::Result<()> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
    let mine = mtime(dir)?;
    let mut newest = None;
    if let Some(parent) = dir.parent() {
        for e in std::fs::read_dir(parent)?.flatten() {
            let p = e.path();
            let name = e.file_name();
            if p != dir && p.is_dir() && name.to_string_lossy().starts_with("checkpoint-") {
                let m = mtime(&p)?;
                if newest.is_none_or(|n| m > n) {
                    newest = Some(m);
                }
            }
        }
    }
    if let Some(n) = newest.filter(|n| mine <= *n) {
        let t = n + std::time::Duration::from_millis(1);
        std::fs::File::open(dir)?.set_times(std::fs::FileTimes::new().set_modified(t))?;
    }
    Ok(())
}
