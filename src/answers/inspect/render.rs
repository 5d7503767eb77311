//! How an inspection reads: the report as text (the timeline, each checkpoint, the resume pick,
//! the deviations from the replayed plan, problems and warnings) and as `--json`.

use super::*;

impl Report {
    /// The timeline of the run's newest state: (log steps, evaluation steps, checkpoint steps
    /// present).
    pub fn timeline(&self) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let Some(s) = &self.state else { return (vec![], vec![], vec![]) };
        let logs = steps_with(s, |d| d.iter().any(|(k, _)| k == "loss"));
        let evals = steps_with(s, is_eval);
        let saves = self.checkpoints.iter().filter_map(|c| c.step).collect();
        (logs, evals, saves)
    }

    /// What the disk holds, in a line (another node's disk in [`Report::nodes`]).
    pub fn holds(&self) -> String {
        if self.checkpoints.is_empty() && self.leftovers.is_empty() {
            return "no checkpoint folder".into();
        }
        let mut parts: Vec<String> = self
            .checkpoints
            .iter()
            .map(|c| {
                let files: Vec<&str> = c.files.iter().filter(|(_, s)| *s != checkpoint::FileState::Missing).map(|(f, _)| f.as_str()).collect();
                let rng_only = !files.is_empty() && files.iter().all(|f| launch::rank_of(f).is_some() || *f == "rng_state.pth");
                if rng_only {
                    format!("{} ({})", c.name, files.join(", "))
                } else if c.complete {
                    format!("{} (complete)", c.name)
                } else {
                    format!("{} (incomplete)", c.name)
                }
            })
            .collect();
        parts.extend(self.leftovers.iter().map(|l| format!("{} (leftover)", l.name)));
        parts.join(", ")
    }

    /// The folders a problem names.
    pub fn flagged_folders(&self) -> Vec<String> {
        let mut v: Vec<String> = self.problems.iter().filter_map(|p| p.folder.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    pub fn to_json(&self) -> J {
        let (logs, evals, saves) = self.timeline();
        let get = |k: &str| self.state.as_ref().and_then(|s| s.get(k)).and_then(|v| v.to_serde().ok()).unwrap_or(J::Null);
        // A non-finite float (a NaN best_metric) as Python writes it.
        let get_num = |k: &str| self.state.as_ref().and_then(|s| s.get(k)).map(|v| v.to_serde().unwrap_or_else(|_| J::String(pyshow(v)))).unwrap_or(J::Null);
        let cks: Vec<J> = self
            .checkpoints
            .iter()
            .map(|c| {
                let mut problems: Vec<String> = c.missing.iter().map(|f| format!("{f}: missing")).collect();
                problems.extend(c.corrupt.iter().map(|(f, w)| format!("{f}: {w}")));
                if c.sentinel {
                    problems.push("checkpoint-is-incomplete.txt: present".into());
                }
                problems.extend(c.code.iter().map(|cf| format!("{}: calls {} ({}): code that would run on load", cf.file, cf.code.global, cf.code.at)));
                json!({
                    "name": c.name,
                    "step": c.step,
                    "complete": c.complete,
                    "problems": problems,
                    "resume": if !c.resume_fails.is_empty() || !c.resume_by_design.is_empty() { "fails" } else if !c.resume_runs_code.is_empty() { "runs code" } else if !c.resume_degraded.is_empty() { "degraded" } else { "ok" },
                    "resume_fails": c.resume_fails,
                    "resume_runs_code": c.resume_runs_code,
                    "code": c.code.iter().map(|cf| {
                        let (on_resume, how) = match &cf.on_resume {
                            checkpoint::OnResume::Runs(h) => ("runs", h),
                            checkpoint::OnResume::Refused(h) => ("refused", h),
                            checkpoint::OnResume::NotLoaded(h) => ("not loaded", h),
                        };
                        json!({"file": cf.file, "global": cf.code.global, "at": cf.code.at, "on_resume": on_resume, "how": how})
                    }).collect::<Vec<_>>(),
                    "resume_degraded": c.resume_degraded,
                    "notes": c.notes,
                    "transformers_version": c.config_version,
                    "global_step": c.global_step(),
                    "world_size": c.world,
                    "rng_ranks": c.rng_ranks,
                    "resume_fails_by_design": c.resume_by_design,
                })
            })
            .collect();
        json!({
            "dir": self.dir.display().to_string(),
            "output_dir": self.output_dir.display().to_string(),
            "run_directory": self.run_directory,
            "hf_version": self.hf_version,
            "version_source": self.version_source,
            "profile": self.profile,
            "arguments_source": self.args_source,
            "arguments": self.args,
            "timeline": {
                "state_source": self.state_source,
                "global_step": get("global_step"),
                "max_steps": get("max_steps"),
                "epoch": get_num("epoch"),
                "log_steps": logs,
                "eval_steps": evals,
                "checkpoint_steps": saves,
                "plan_save_steps": self.replay.saves,
                "best_metric": get_num("best_metric"),
                "best_global_step": get("best_global_step"),
            },
            "checkpoints": cks,
            "leftovers": self.leftovers.iter().map(|l| json!({"name": l.name, "what": l.what})).collect::<Vec<_>>(),
            "best_checkpoint": self.best_checkpoint,
            "best_exists": self.best_exists,
            "best_pointers": self.best.iter().map(|b| json!({
                "source": b.source, "recorded": b.recorded, "folder": b.folder, "exists": b.exists,
                "loadable": b.loadable.as_ref().map(|r| r.is_ok()),
            })).collect::<Vec<_>>(),
            "resume_pick": self.resume_pick,
            "resume_ok": self.resume_ok,
            "resume_reasons": self.resume_reasons,
            "resume_runs_code": self.resume_runs_code,
            "replay": {
                "compared": self.replay.compared,
                "skipped": self.replay.skipped,
                "inferred": self.replay.inferred,
                "folders": self.replay.folders,
                "deletions": self.replay.deletions.iter().map(|(s, f, w)| json!({"step": s, "folder": f, "why": w})).collect::<Vec<_>>(),
                "error": self.replay.error,
            },
            "deviations": self.deviations.iter().map(|d| json!({"kind": d.kind, "folder": d.folder, "message": d.message})).collect::<Vec<_>>(),
            "problems": self.problems.iter().map(|p| json!({"folder": p.folder, "file": p.file, "message": p.message})).collect::<Vec<_>>(),
            "warnings": self.warnings,
            "notes": self.notes,
            "launch": self.launch.as_ref().map(|l| json!({
                "source": l.source,
                "num_processes": l.record.num_processes,
                "writer_process_index": l.record.process_index,
                "writer_local_process_index": l.record.local_process_index,
                "distributed_type": l.record.distributed_type,
                "save_on_each_node": l.save_on_each_node,
                "node": l.node,
                "disk": match l.role { DiskRole::Saving => "saving", DiskRole::SavingWithoutWeights => "saving without weights", DiskRole::RngOnly => "rng files only" },
                "ranks_here": l.ranks_here,
                "ranks_how": l.ranks_how,
            })),
            "resume_worlds": self.resume_worlds.iter().map(|x| json!({
                "processes": x.processes, "as_written": x.as_written, "found": x.found, "not_found": x.not_found, "raises": x.raises, "text": x.text,
            })).collect::<Vec<_>>(),
            "resume_fails_by_design": self.resume_by_design,
            "node": self.node,
            "nodes": self.nodes.iter().map(|n| json!({
                "node": n.node,
                "output_dir": n.output_dir.display().to_string(),
                "holds": n.holds,
                "report": n.report.as_ref().map(|r| r.to_json()),
            })).collect::<Vec<_>>(),
            "ok": self.problems.is_empty(),
        })
    }

    /// The plain-words report: a section per question.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let w = |o: &mut String, s: String| {
            o.push_str(&s);
            o.push('\n');
        };
        w(&mut o, format!("inspect {}{}", self.output_dir.display(), if self.run_directory { " (the output/ of a run directory)" } else { "" }));
        w(&mut o, String::new());
        w(&mut o, "version".into());
        let mapped = if self.profile == self.hf_version { String::new() } else { format!(", inspected with the profile of {}", self.profile) };
        w(&mut o, format!("  transformers {}{mapped}, from {}", self.hf_version, self.version_source));
        w(&mut o, String::new());
        w(&mut o, "arguments".into());
        match &self.args_source {
            Some(s) => {
                w(&mut o, format!("  from {s} (read without executing it); non-default:"));
                if self.args.is_empty() {
                    w(&mut o, "    (none)".into());
                }
                for (k, v) in &self.args {
                    w(&mut o, format!("    {k} = {}", jshow(v)));
                }
            }
            None => w(&mut o, "  no readable training_args.bin".into()),
        }
        if let Some(l) = &self.launch {
            w(&mut o, String::new());
            w(&mut o, "launch".into());
            w(&mut o, format!(
                "  {} processes ({}; distributed_state of {}: written by process {}, local process {}), save_on_each_node={}",
                l.record.num_processes,
                l.record.distributed_type.as_deref().unwrap_or("?"),
                l.source,
                l.record.process_index,
                l.record.local_process_index,
                if l.save_on_each_node { "True" } else { "False" }
            ));
            let disk = match l.role {
                DiskRole::Saving => "its saving process writes the whole checkpoint here".to_string(),
                DiskRole::SavingWithoutWeights => "its first process saves here without the weights and config.json (5.15+: main process only)".to_string(),
                DiskRole::RngOnly => "no process of this node saves: its checkpoint folders hold its processes' rng files only".to_string(),
            };
            let node = l.node.map(|k| format!("node {k}'s disk: ")).unwrap_or_default();
            w(&mut o, format!("  {node}{disk}"));
            match &l.ranks_here {
                Some(r) => w(&mut o, format!("  rng files of rank(s) {} belong here ({})", launch::ranks_text(r), l.ranks_how)),
                None => w(&mut o, "  which ranks write to this disk is not known".into()),
            }
        }
        w(&mut o, String::new());
        w(&mut o, "timeline".into());
        match &self.state {
            Some(s) => {
                let (logs, evals, saves) = self.timeline();
                let g = |k: &str| s.get(k).map(pyshow).unwrap_or_else(|| "?".into());
                w(&mut o, format!("  from {}: step {} of max_steps {} (epoch {})", self.state_source.clone().unwrap_or_default(), g("global_step"), g("max_steps"), g("epoch")));
                w(&mut o, format!("  training logs at step(s): {}", replay::list(&logs)));
                w(&mut o, format!("  evaluations at step(s):   {}", replay::list(&evals)));
                w(&mut o, format!("  checkpoints present:      {}", replay::list(&saves)));
                if self.replay.compared {
                    w(&mut o, format!("  the plan saves at:        {}", replay::list(&self.replay.saves)));
                }
                match s.get("best_metric") {
                    Some(PyJson::Null) | None => w(&mut o, "  best: none recorded".into()),
                    Some(m) => {
                        let at = s.get("best_global_step").filter(|x| **x != PyJson::Null).map(|x| format!(" at step {}", pyshow(x))).unwrap_or_default();
                        w(&mut o, format!("  best: {}{at}, best_model_checkpoint {}", pyshow(m), g("best_model_checkpoint")));
                    }
                }
            }
            None => w(&mut o, "  no readable trainer_state.json".into()),
        }
        w(&mut o, String::new());
        w(&mut o, "checkpoints".into());
        if self.checkpoints.is_empty() {
            w(&mut o, "  none".into());
        }
        for c in &self.checkpoints {
            let head = if !c.code.is_empty() {
                format!("CALLS CODE ({})", c.code.iter().map(|cf| cf.file.as_str()).collect::<Vec<_>>().join(", "))
            } else if c.complete {
                "complete".to_string()
            } else {
                "INCOMPLETE".to_string()
            };
            let resume = if !c.resume_by_design.is_empty() {
                "a resume from it FAILS, as HF leaves this disk"
            } else if !c.resume_fails.is_empty() {
                "a resume from it FAILS"
            } else if !c.resume_runs_code.is_empty() {
                "a resume from it RUNS CODE"
            } else if !c.resume_degraded.is_empty() {
                "a resume from it runs but does not continue the run"
            } else {
                "a resume from it loads"
            };
            w(&mut o, format!("  {}: {head}; {resume}", c.name));
            for f in &c.missing {
                w(&mut o, format!("    {f}: missing"));
            }
            for (f, why) in &c.corrupt {
                w(&mut o, format!("    {f}: unreadable: {why}"));
            }
            for cf in &c.code {
                w(&mut o, format!("    {}: calls {} ({}): code that would run on load", cf.file, cf.code.global, cf.code.at));
            }
            for r in c.resume_fails.iter().chain(&c.resume_by_design) {
                w(&mut o, format!("    resume: {r}"));
            }
            for r in &c.resume_runs_code {
                w(&mut o, format!("    resume: {r}"));
            }
            for r in &c.resume_degraded {
                w(&mut o, format!("    resume: {r}"));
            }
            for n in &c.notes {
                w(&mut o, format!("    note: {n}"));
            }
        }
        for l in &self.leftovers {
            w(&mut o, format!("  {}: LEFTOVER: {}", l.name, l.what));
        }
        w(&mut o, String::new());
        w(&mut o, "best checkpoint".into());
        if self.best.is_empty() {
            w(&mut o, "  no best_model_checkpoint recorded".into());
        }
        for b in &self.best {
            let state = if !b.exists {
                "DOES NOT EXIST".to_string()
            } else {
                match &b.loadable {
                    Some(Err(e)) => format!("exists, its weights DO NOT LOAD: {e}"),
                    _ => "exists, its weights load".to_string(),
                }
            };
            w(&mut o, format!("  {} (best_model_checkpoint of {}): {state}", b.recorded, b.source));
        }
        w(&mut o, String::new());
        w(&mut o, "resume".into());
        match &self.resume_pick {
            Some(p) => {
                w(&mut o, format!("  resume_from_checkpoint=True picks {p} (get_last_checkpoint: the highest checkpoint-N, complete or not)"));
                if self.resume_ok {
                    w(&mut o, "  it loads".into());
                } else {
                    for r in &self.resume_reasons {
                        w(&mut o, format!("  FAILS: {r}"));
                    }
                    for r in &self.resume_runs_code {
                        w(&mut o, format!("  RUNS CODE: {r}"));
                    }
                }
            }
            None => {
                for r in &self.resume_reasons {
                    w(&mut o, format!("  {r}"));
                }
            }
        }
        for x in &self.resume_worlds {
            w(&mut o, format!("  resumed {}", x.text));
        }
        for n in &self.nodes {
            w(&mut o, String::new());
            w(&mut o, format!("node {} ({})", n.node, n.output_dir.display()));
            w(&mut o, format!("  holds: {}", n.holds));
            if let Some(r) = &n.report {
                let rel = format!("node-{}/output", n.node);
                for c in r.checkpoints.iter().filter(|c| !c.complete || !c.resume_fails.is_empty()) {
                    for f in &c.missing {
                        w(&mut o, format!("  {rel}/{}/{f}: missing", c.name));
                    }
                    for (f, why) in &c.corrupt {
                        w(&mut o, format!("  {rel}/{}/{f}: unreadable: {why}", c.name));
                    }
                    for cf in &c.code {
                        w(&mut o, format!("  {rel}/{}/{}: calls {}: code that would run on load", c.name, cf.file, cf.code.global));
                    }
                }
                match &r.resume_pick {
                    Some(p) if r.resume_ok => w(&mut o, format!("  resume_from_checkpoint=True on this disk picks {p}: it loads")),
                    Some(p) => w(&mut o, format!("  resume_from_checkpoint=True on this disk picks {p}: FAILS: {}", r.resume_reasons.join("; "))),
                    None => w(&mut o, format!("  resume_from_checkpoint=True on this disk: {}", r.resume_reasons.join("; "))),
                }
            }
        }
        w(&mut o, String::new());
        w(&mut o, "plan".into());
        match &self.replay.skipped {
            Some(why) => w(&mut o, format!("  not replayed: {why}")),
            None => {
                w(&mut o, "  replayed from the run's own arguments and logged metrics:".into());
                for i in &self.replay.inferred {
                    w(&mut o, format!("    {i}"));
                }
                if let Some(e) = &self.replay.error {
                    w(&mut o, format!("    the replay ends in {e}"));
                }
                w(&mut o, format!("    the plan's folders at step {}: {}", self.replay_horizon(), if self.replay.folders.is_empty() { "none".into() } else { self.replay.folders.join(", ") }));
            }
        }
        w(&mut o, String::new());
        w(&mut o, "deviations".into());
        if self.deviations.is_empty() {
            w(&mut o, "  none".into());
        }
        for d in &self.deviations {
            w(&mut o, format!("  [{}] {}", d.kind, d.message));
        }
        if !self.warnings.is_empty() {
            w(&mut o, String::new());
            w(&mut o, "warnings (not counted as problems)".into());
            for x in &self.warnings {
                w(&mut o, format!("  {x}"));
            }
        }
        if !self.notes.is_empty() {
            w(&mut o, String::new());
            w(&mut o, "notes".into());
            for x in &self.notes {
                w(&mut o, format!("  {x}"));
            }
        }
        w(&mut o, String::new());
        if self.problems.is_empty() && !self.resume_by_design.is_empty() {
            w(&mut o, "verdict: nothing here is damaged (exit 0), but as HF leaves these folders with these arguments a resume fails:".into());
            for x in &self.resume_by_design {
                w(&mut o, format!("  - {x}"));
            }
        } else if self.problems.is_empty() {
            w(&mut o, "verdict: nothing here breaks a resume or load_best_model_at_end (exit 0)".into());
        } else {
            w(&mut o, format!("verdict: {} problem(s) (exit 1):", self.problems.len()));
            for p in &self.problems {
                w(&mut o, format!("  - {}", p.message));
            }
        }
        o
    }

    fn replay_horizon(&self) -> String {
        self.state.as_ref().and_then(|s| s.get("global_step")).map(pyshow).unwrap_or_else(|| "?".into())
    }
}
