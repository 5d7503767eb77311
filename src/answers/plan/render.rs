//! The plan as text: per version the timeline, then the answers in plain words; with several
//! versions, a table of what differs between them.
//!
//! The timeline is the insta snapshots' view of a run directory
//! ([`crate::harness::snapshot::run_dir_view_traced`]), applied to the plan's run directory, with what a
//! plan is not: no model was trained, so loss and gradient-norm values are dropped (the learning
//! rate stays), assumed metric values are shown as `assumed` rather than as the stand-in numbers
//! the executor was fed, and runs of steps that only log are folded into one line. One renderer,
//! so the plan and the snapshots cannot drift apart.

use crate::world::scenario::ModelKind;
use crate::trainer::PlanTrace;
use std::fmt::Write as _;
use std::path::Path;
use super::answers::{Answers, LoadBest, ASSUMED, NOT_MEANINGFUL};
use super::VersionPlan;

/// The header of a plan's timeline.
pub const HEADER: &str = "\
A plan: this version's checkpoint rules (the Rust reference executor, the same code that
reproduces every golden run) applied to the config without training. No model was trained, so
losses are not shown; `assumed` marks metric values nobody gave (each assumed value improves
on the last). output/ stands for your output_dir.";

/// The plan's timeline for one version, from its run directory.
pub fn timeline(run_dir: &Path, title: &str, trace: &PlanTrace, best_assumed: bool) -> Result<String, String> {
    let view = crate::harness::snapshot::run_dir_view_traced(run_dir, title, &trace.events)?;
    let mut out: Vec<String> = vec![];
    let mut lines = view.lines();
    if let Some(t) = lines.next() {
        out.push(t.to_string());
    }
    for h in HEADER.lines() {
        out.push(format!("# {h}"));
    }
    let mut step: Option<u64> = None;
    for line in lines.skip_while(|l| l.starts_with("# ")) {
        if let Some(s) = step_header(line) {
            step = Some(s);
            out.push(line.to_string());
            continue;
        }
        if !line.starts_with("  ") {
            step = None;
        }
        out.push(edit_line(line, step, trace, best_assumed));
    }
    Ok(fold_log_runs(&out).join("\n") + "\n")
}

/// `  step N (epoch E):` or `  step N:`.
fn step_header(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("  step ")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if line.ends_with(':') && !digits.is_empty() {
        digits.parse().ok()
    } else {
        None
    }
}

/// A timeline line `    <kind, 10 wide><key=value ...>`, or `  best: ...` at the end.
fn edit_line(line: &str, step: Option<u64>, trace: &PlanTrace, best_assumed: bool) -> String {
    if let Some(rest) = line.strip_prefix("  best: ") {
        return format!("  best: {}", edit_fields(rest, |k, v| Some(best_field(k, v, best_assumed))));
    }
    let Some(body) = line.strip_prefix("    ") else { return line.to_string() };
    if body.len() < 10 || !body.is_char_boundary(10) {
        return line.to_string();
    }
    let (kind, rest) = body.split_at(10);
    let edited = match kind.trim_end() {
        "log" | "train end" | "entry" => edit_fields(rest, |k, v| (!NOT_MEANINGFUL.contains(&k)).then(|| v.to_string())),
        "evaluate" => edit_fields(rest, |k, v| {
            let assumed = step.is_some_and(|s| trace.assumed.iter().any(|(at, key)| *at == s && key == k));
            Some(if assumed { ASSUMED.to_string() } else { v.to_string() })
        }),
        "best" => edit_fields(rest, |k, v| Some(best_field(k, v, best_assumed))),
        _ => rest.to_string(),
    };
    format!("    {kind}{edited}").trim_end().to_string()
}

fn best_field(k: &str, v: &str, best_assumed: bool) -> String {
    if k == "best_metric" && best_assumed && v != "-" {
        ASSUMED.to_string()
    } else {
        v.to_string()
    }
}

/// Rewrites the `key=value` fields of a view line: `f(key, value)` gives the new value, or None
/// to drop the field. A value may hold spaces (a quoted string); a new field starts at a word
/// of the form `identifier=`.
fn edit_fields(rest: &str, mut f: impl FnMut(&str, &str) -> Option<String>) -> String {
    let mut fields: Vec<(String, String)> = vec![];
    for word in rest.split(' ') {
        let key = word.split_once('=').map(|(k, _)| k).filter(|k| is_ident(k));
        match (key, fields.last_mut()) {
            (Some(k), _) => fields.push((k.to_string(), word[k.len() + 1..].to_string())),
            (None, Some(last)) => {
                last.1.push(' ');
                last.1.push_str(word);
            }
            (None, None) if word.is_empty() => {}
            (None, None) => fields.push((String::new(), word.to_string())),
        }
    }
    fields
        .into_iter()
        .filter_map(|(k, v)| if k.is_empty() { Some(v) } else { f(&k, &v).map(|v| format!("{k}={v}")) })
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|x| x.is_ascii_alphabetic() || x == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Folds three or more consecutive steps that only log into one line with their first and last
/// learning rate: a 5000-step plan shows its saves and evaluations, not a hundred log lines.
fn fold_log_runs(lines: &[String]) -> Vec<String> {
    // Blocks: a step header and its indented lines.
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    let block_end = |start: usize| {
        let mut j = start + 1;
        while j < lines.len() && lines[j].starts_with("    ") {
            j += 1;
        }
        j
    };
    let log_only = |start: usize, end: usize| end > start + 1 && lines[start + 1..end].iter().all(|l| l.trim_start().starts_with("log "));
    while i < lines.len() {
        let Some(first) = step_header(&lines[i]) else {
            out.push(lines[i].clone());
            i += 1;
            continue;
        };
        let mut run = vec![];
        let mut j = i;
        while j < lines.len() && step_header(&lines[j]).is_some() {
            let end = block_end(j);
            if !log_only(j, end) {
                break;
            }
            run.push((j, end));
            j = end;
        }
        if run.len() >= 3 {
            let last = step_header(&lines[run[run.len() - 1].0]).unwrap_or(first);
            let lr = |(s, _): (usize, usize)| field_of(&lines[s + 1], "learning_rate");
            let lrs = match (lr(run[0]), lr(run[run.len() - 1])) {
                (Some(a), Some(b)) => format!(", learning_rate {a} .. {b}"),
                _ => String::new(),
            };
            out.push(format!("  steps {first}..{last}: {} logs{lrs}", run.len()));
            i = j;
        } else {
            let end = block_end(i);
            out.extend(lines[i..end].iter().cloned());
            i = end;
        }
    }
    out
}

fn field_of(line: &str, key: &str) -> Option<String> {
    let mut found = None;
    edit_fields(line.trim_start().get(10..).unwrap_or(""), |k, v| {
        if k == key {
            found = Some(v.to_string());
        }
        None
    });
    found
}

/// One version's section: timeline, arguments (or a pointer to an earlier identical list),
/// answers.
pub fn section(vp: &VersionPlan, arguments_as_for: Option<&str>) -> String {
    let mut s = String::new();
    let rule = "=".repeat(78);
    writeln!(s, "{rule}").unwrap();
    match &vp.outcome {
        Err(why) => {
            writeln!(s, "HF {}: cannot plan: {why}", vp.hf_version).unwrap();
            return s;
        }
        Ok(_) => s.push_str(&vp.timeline),
    }
    writeln!(s).unwrap();
    match arguments_as_for {
        Some(v) => writeln!(s, "arguments, data and metrics: as for HF {v}").unwrap(),
        None => s.push_str(&arguments_text(vp)),
    }
    if let Ok(a) = &vp.outcome {
        writeln!(s).unwrap();
        s.push_str(&answers_text(vp.hf_version, a, vp));
    }
    for r in &vp.races {
        writeln!(s, "  RACE in real HF {} ({}, conformance/races.json): {}.", vp.hf_version, r.name, r.what).unwrap();
        writeln!(s, "    These answers are its first outcome; a run of real HF can give any of:").unwrap();
        for (k, o) in r.outcomes.iter().enumerate() {
            writeln!(s, "    {}. {o}", k + 1).unwrap();
        }
    }
    s
}

/// The arguments taken out, the data and the metrics, as text.
pub fn arguments_text(vp: &VersionPlan) -> String {
    use super::arguments::show;
    let mut s = String::new();
    let c = &vp.classified;
    if let Some(n) = &vp.config_note {
        writeln!(s, "config: {n}").unwrap();
    }
    writeln!(s, "arguments:").unwrap();
    if c.not_affecting.is_empty() && c.not_modelled.is_empty() && c.runner_owned.is_empty() && c.unknown.is_empty() {
        writeln!(s, "  every argument is modelled by the executor").unwrap();
    }
    if !c.unknown.is_empty() {
        writeln!(s, "  not arguments of this version (HF's TypeError names the first): {}", c.unknown.join(", ")).unwrap();
    }
    for (title, list) in [("not affecting the plan", &c.not_affecting), ("not modelled", &c.not_modelled), ("owned by the runner, dropped", &c.runner_owned)] {
        if list.is_empty() {
            continue;
        }
        writeln!(s, "  {title}:").unwrap();
        for d in list {
            writeln!(s, "    {}={}: {}", d.name, show(&d.value), d.why).unwrap();
        }
    }
    writeln!(s, "data: {}", vp.train_note).unwrap();
    writeln!(s, "      eval: {}", vp.eval_note).unwrap();
    writeln!(s, "metrics: {}", vp.metrics_note).unwrap();
    s
}

fn listing(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The answers in plain words.
pub fn answers_text(version: &str, a: &Answers, vp: &VersionPlan) -> String {
    let mut s = String::new();
    writeln!(s, "answers for HF {version}:").unwrap();
    let resumed = a.resume.as_ref().filter(|r| r.ran);
    if let Some(r) = &a.resume {
        s.push_str(&resume_text(r));
    }
    if let Some((t, m)) = &a.error {
        writeln!(s, "  HF raises {t}: {m}").unwrap();
        if let Some(r) = resumed {
            let at = match (&r.checkpoint, r.start_step) {
                (Some(c), Some(st)) => format!("while training from {c} (at step {})", a.global_step.unwrap_or(st)),
                (Some(c), None) => format!("while loading {c}, before training"),
                (None, _) => "before picking a checkpoint".to_string(),
            };
            writeln!(s, "  the resumed train() raises it {at}; the checkpoints left: {}", listing(&a.checkpoints_left)).unwrap();
        } else if a.error_in_training {
            writeln!(
                s,
                "  train() raises it at step {}; the checkpoints written before are left: {}",
                a.global_step.unwrap_or(0),
                listing(&a.checkpoints_left)
            )
            .unwrap();
        } else {
            writeln!(s, "  before training (TrainingArguments(...) or Trainer(...)): nothing is trained or saved").unwrap();
        }
        return s;
    }
    let g = a.global_step.unwrap_or(0);
    let last = format!("checkpoint-{g}");
    writeln!(s, "  training ends at step {g} ({}).", a.stop_reason.as_deref().unwrap_or("-")).unwrap();
    if a.final_step_saved == Some(true) {
        let left = if a.checkpoints_left.contains(&last) { "left at the end" } else { "written, but not left at the end" };
        writeln!(s, "  final step saved: yes, as {last} ({left}).").unwrap();
    } else {
        let prev = a.saved_steps.iter().max().map(|n| format!("the last checkpoint written is checkpoint-{n}")).unwrap_or("no checkpoint is written".into());
        writeln!(s, "  final step saved: NO, step {g} is not saved as a checkpoint ({prev}).").unwrap();
    }
    writeln!(s, "  checkpoints left: {}", listing(&a.checkpoints_left)).unwrap();
    for (node, folder, files) in &a.other_nodes {
        writeln!(s, "  node {node}'s disk: {folder} ({})", files.join(", ")).unwrap();
    }
    if let Some(b) = &a.best_checkpoint {
        let there = if a.checkpoints_left.contains(b) { "" } else { " (not there at the end)" };
        writeln!(s, "  best checkpoint: {b}{there}").unwrap();
        if let Some(step) = a.best_step.filter(|st| format!("checkpoint-{st}") != *b) {
            writeln!(s, "    (the best evaluation, at step {step}, was not saved: best_model_checkpoint stays {b})").unwrap();
        }
    }
    let model = match &a.load_best {
        LoadBest::Off => {
            writeln!(s, "  load_best_model_at_end: off, so after train() the model holds the last step's weights (step {g}).").unwrap();
            format!("step {g}'s weights")
        }
        LoadBest::Loads(b) => {
            writeln!(s, "  load_best_model_at_end: loads {b} into the model at the end of train() (it writes nothing new).").unwrap();
            format!("{b}'s weights, the best checkpoint's")
        }
        LoadBest::NoBest => {
            writeln!(s, "  load_best_model_at_end: on, but no best checkpoint is recorded, so nothing is loaded: the model holds step {g}'s weights.").unwrap();
            format!("step {g}'s weights")
        }
        LoadBest::Missing(b) => {
            writeln!(s, "  load_best_model_at_end: the best checkpoint recorded, {b}, is not there: HF warns (\"Could not locate the best model\") and keeps step {g}'s weights.").unwrap();
            format!("step {g}'s weights")
        }
    };
    match (&a.final_weights_at, a.save_model_needed) {
        (Some(f), _) => {
            writeln!(s, "  the final model ({model}) is on disk in {f}.").unwrap();
            writeln!(s, "  save_model() needed: no, {f} holds exactly these weights. Call trainer.save_model() anyway to have them in").unwrap();
            writeln!(s, "    output_dir itself (what from_pretrained(output_dir) reads), outside checkpoint folders that a later").unwrap();
            writeln!(s, "    run's rotation into the same output_dir may delete.").unwrap();
        }
        (None, _) => {
            writeln!(s, "  the final model ({model}) is in memory only: no checkpoint folder left holds it.").unwrap();
            let files = match a.model_kind {
                ModelKind::Regression | ModelKind::Linear => "the weights, config.json",
                ModelKind::Module => "the state dict",
                ModelKind::Lora => "the adapter, adapter_config.json",
            };
            writeln!(s, "  save_model() needed: YES: call trainer.save_model() after train() (it writes {files} and").unwrap();
            writeln!(s, "    training_args.bin into output_dir) to keep it.").unwrap();
        }
    }
    if vp.finally_calls.iter().any(|c| c == "save_model") {
        writeln!(s, "    (the scenario calls save_model() after train(); output_dir holds: {})", listing(&a.output_files)).unwrap();
    }
    if !a.checkpoint_files.is_empty() {
        writeln!(s, "  each checkpoint holds ({} model): {}", a.model_kind.name(), listing(&a.checkpoint_files)).unwrap();
    }
    writeln!(s, "  to use the fine-tuned model: {}", to_keep(a.model_kind)).unwrap();
    writeln!(s, "  tokenizer: checkpoints and save_model() hold tokenizer files only when the Trainer has the tokenizer").unwrap();
    writeln!(s, "    (passed as tokenizer=/processing_class=, or taken from the data collator where the release does that);").unwrap();
    writeln!(s, "    otherwise save it yourself: tokenizer.save_pretrained(output_dir).").unwrap();
    match &a.resume_pick {
        Some(r) => writeln!(s, "  resume_from_checkpoint=True would pick {r} (get_last_checkpoint: the highest-numbered checkpoint-N in output_dir).").unwrap(),
        None => writeln!(s, "  resume_from_checkpoint=True would raise ValueError: no checkpoint-N folder is left in output_dir.").unwrap(),
    }
    if a.assumed {
        writeln!(s, "  depends on assumed metric values (give --metrics or --metrics-from to make it exact):").unwrap();
        for d in &a.depends_on_assumed {
            writeln!(s, "    - {d}").unwrap();
        }
    }
    s
}

/// The first run and the resume, before the answers of the end.
fn resume_text(r: &super::answers::Resume) -> String {
    let mut s = String::new();
    let call = if r.from == "last" { "train(resume_from_checkpoint=True)".to_string() } else { format!("train(resume_from_checkpoint=\"output/{}\")", r.from) };
    let args: Vec<String> = r.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let with = if args.is_empty() { "the first run's arguments".to_string() } else { format!("the first run's arguments with {}", args.join(", ")) };
    match &r.first_error {
        Some((t, _)) => {
            writeln!(s, "  the first train() raises {t} (below): the resume, {call}, never runs.").unwrap();
            return s;
        }
        None => {
            let best = r.first_best_checkpoint.as_ref().map(|b| format!("; best {b}")).unwrap_or_default();
            writeln!(
                s,
                "  first run: ends at step {} of max_steps={}; checkpoints left: {}{best}.",
                r.first_global_step.unwrap_or(0),
                r.first_max_steps.unwrap_or(0),
                listing(&r.first_checkpoints_left)
            )
            .unwrap();
        }
    }
    if !r.damage.is_empty() {
        writeln!(s, "  between the runs: {}.", r.damage.join(", ")).unwrap();
    }
    let picked = match (&r.checkpoint, r.start_step) {
        (Some(c), Some(st)) => format!("resumes from {c} at step {st}"),
        (Some(c), None) => format!("picks {c}"),
        (None, _) => "picks no checkpoint".to_string(),
    };
    writeln!(s, "  resume: a new Trainer ({with}) calls {call}: it {picked}.").unwrap();
    writeln!(s, "  at the end of the resumed run:").unwrap();
    s
}

/// The answers compared across versions: one row per run of consecutive versions with equal
/// answers, one column per answer that differs somewhere (the "what changes if I upgrade" view).
pub fn differences(plans: &[VersionPlan]) -> String {
    type Column = (&'static str, Box<dyn Fn(&VersionPlan) -> String>);
    let columns: Vec<Column> = vec![
        ("error", Box::new(|vp| match &vp.outcome {
            Err(_) => "cannot plan".into(),
            Ok(a) => a.error.as_ref().map(|(t, m)| format!("{t}: {m}")).unwrap_or("none".into()),
        })),
        ("final step saved", Box::new(|vp| answer(vp, |a| a.final_step_saved.map(yes_no)))),
        ("checkpoints left", Box::new(|vp| answer(vp, |a| Some(listing(&a.checkpoints_left))))),
        ("best checkpoint", Box::new(|vp| answer(vp, |a| Some(a.best_checkpoint.clone().unwrap_or("-".into()))))),
        ("load_best loads", Box::new(|vp| answer(vp, |a| Some(match &a.load_best {
            LoadBest::Off => "off".into(),
            LoadBest::Loads(b) => b.clone(),
            LoadBest::NoBest => "nothing (no best)".into(),
            LoadBest::Missing(b) => format!("nothing ({b} missing)"),
        })))),
        ("save_model() needed", Box::new(|vp| answer(vp, |a| a.save_model_needed.map(yes_no)))),
        ("resume picks", Box::new(|vp| answer(vp, |a| Some(a.resume_pick.clone().unwrap_or("-".into()))))),
        ("assumed metrics", Box::new(|vp| answer(vp, |a| Some(yes_no(a.assumed))))),
        ("resumes from", Box::new(|vp| answer(vp, |a| a.resume.as_ref().map(|r| match (&r.checkpoint, r.start_step) {
            _ if !r.ran => "- (first run failed)".to_string(),
            (Some(c), Some(st)) => format!("{c} (step {st})"),
            (Some(c), None) => format!("{c} (raises)"),
            (None, _) => "none (raises)".to_string(),
        })))),
    ];
    // The resume column only where the plan resumes.
    let resumes = plans.iter().any(|vp| vp.outcome.as_ref().is_ok_and(|a| a.resume.is_some()));
    let columns: Vec<Column> = columns.into_iter().filter(|(name, _)| resumes || *name != "resumes from").collect();
    let cells: Vec<Vec<String>> = plans.iter().map(|vp| columns.iter().map(|(_, f)| f(vp)).collect()).collect();
    // Runs of consecutive versions with equal answers.
    let mut groups: Vec<(usize, usize)> = vec![];
    for k in 0..plans.len() {
        match groups.last_mut() {
            Some((_, end)) if cells[*end] == cells[k] => *end = k,
            _ => groups.push((k, k)),
        }
    }
    let differing: Vec<usize> = (0..columns.len()).filter(|&c| groups.iter().any(|(a, _)| cells[*a][c] != cells[groups[0].0][c])).collect();
    // Error texts are long: the table names each distinct one by a number, listed below it.
    let mut errors: Vec<String> = vec![];
    let shown_cell = |c: usize, cell: &str, errors: &mut Vec<String>| -> String {
        if c != 0 || cell == "none" || cell == "cannot plan" {
            return cell.to_string();
        }
        let n = match errors.iter().position(|e| e == cell) {
            Some(n) => n,
            None => {
                errors.push(cell.to_string());
                errors.len() - 1
            }
        };
        format!("{} [{}]", cell.split(':').next().unwrap_or(cell), n + 1)
    };
    let mut s = String::new();
    writeln!(s, "{}", "=".repeat(78)).unwrap();
    writeln!(s, "What differs between the versions for this config (consecutive versions with equal answers grouped):").unwrap();
    if differing.is_empty() {
        writeln!(s, "  nothing: every version gives the same answers.").unwrap();
    } else {
        let mut table: Vec<Vec<String>> = vec![std::iter::once("versions".to_string()).chain(differing.iter().map(|&c| columns[c].0.to_string())).collect()];
        for (a, b) in &groups {
            let range = if a == b { plans[*a].hf_version.to_string() } else { format!("{} .. {}", plans[*a].hf_version, plans[*b].hf_version) };
            let row: Vec<String> = differing.iter().map(|&c| shown_cell(c, &cells[*a][c], &mut errors)).collect();
            table.push(std::iter::once(range).chain(row).collect());
        }
        let widths: Vec<usize> = (0..table[0].len()).map(|c| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        for (i, row) in table.iter().enumerate() {
            let line: Vec<String> = row.iter().enumerate().map(|(c, x)| format!("{x:<w$}", w = widths[c])).collect();
            writeln!(s, "  {}", line.join(" | ").trim_end()).unwrap();
            if i == 0 {
                let sep: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
                writeln!(s, "  {}", sep.join("-+-")).unwrap();
            }
        }
    }
    for (n, e) in errors.iter().enumerate() {
        writeln!(s, "  [{}] {e}", n + 1).unwrap();
    }
    let same: Vec<String> = (0..columns.len())
        .filter(|c| !differing.contains(c))
        .map(|c| format!("{}: {}", columns[c].0, cells[0][c]))
        .collect();
    if !same.is_empty() {
        writeln!(s, "  the same in every version: {}", same.join("; ")).unwrap();
    }
    s
}

fn answer(vp: &VersionPlan, f: impl Fn(&Answers) -> Option<String>) -> String {
    match &vp.outcome {
        Ok(a) => f(a).unwrap_or("-".into()),
        Err(_) => "-".into(),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// What a user keeps to use the trained model, by the kind HF's `_save` saw.
pub fn to_keep(kind: ModelKind) -> &'static str {
    match kind {
        ModelKind::Regression | ModelKind::Linear => {
            "a checkpoint or save_model()'s folder is the whole model (config.json and the weights): from_pretrained(folder) loads it."
        }
        ModelKind::Module => {
            "the folder holds the state dict only (not a PreTrainedModel: no config.json): keep the code that builds the module, then module.load_state_dict(the weights file)."
        }
        ModelKind::Lora => {
            "the folder holds the adapter only (adapter_config.json and the adapter weights), not the base model: keep the base model too (its name or files), then PeftModel.from_pretrained(base_model, folder) (or merge_and_unload() and save_pretrained the merged model)."
        }
    }
}
