//! `ckptspec plan --json`: one object per version (a list when several), documented in README.md
//! ("Is my last step saved?"). The fields are the text's answers as data; `null` where a
//! version fails (`error`) or cannot be planned (`not_planned`).

use serde_json::{json, Value};
use super::answers::{Answers, Event, LoadBest};
use super::arguments::Dropped;
use super::VersionPlan;

/// The object for one version.
pub fn version(vp: &VersionPlan) -> Value {
    let dropped = |list: &[Dropped], why: &str| -> Value {
        list.iter().map(|d| json!({"name": d.name, "value": d.value, why: d.why})).collect()
    };
    let mut o = json!({
        "hf_version": vp.hf_version,
        "asked": vp.asked,
        "config": vp.config,
        "config_kind": vp.config_kind,
        "config_note": vp.config_note,
        "not_planned": null,
        "error": null,
        "max_steps": null,
        "global_step": null,
        "stop_reason": null,
        "events": [],
        "saved_steps": [],
        "checkpoints_left": [],
        "best_checkpoint": null,
        "best_step": null,
        "final_step_saved": null,
        "load_best": null,
        "final_weights_at": null,
        "save_model_needed": null,
        "resume_pick": null,
        "model": null,
        "checkpoint_files": [],
        "not_affecting": dropped(&vp.classified.not_affecting, "reason"),
        "not_modelled": dropped(&vp.classified.not_modelled, "assumed"),
        "runner_owned": dropped(&vp.classified.runner_owned, "note"),
        "unknown_to_version": vp.classified.unknown,
        "data": {"train": vp.train_note, "eval": vp.eval_note},
        "metrics": vp.metrics_note,
        "assumed": false,
        "depends_on_assumed": [],
        "assumed_values": [],
        "resume": null,
        "races": vp.races.iter().map(|r| json!({
            "name": r.name, "when": r.condition(), "what": r.what, "outcomes": r.outcomes, "planned": r.outcomes[0],
        })).collect::<Vec<_>>(),
    });
    match &vp.outcome {
        Err(why) => o["not_planned"] = Value::String(why.clone()),
        Ok(a) => fill(&mut o, a),
    }
    o
}

fn fill(o: &mut Value, a: &Answers) {
    o["error"] = a.error.as_ref().map(|(t, m)| json!({"type": t, "message": m})).unwrap_or(Value::Null);
    o["max_steps"] = json!(a.max_steps);
    o["global_step"] = json!(a.global_step);
    o["stop_reason"] = json!(a.stop_reason);
    o["events"] = a.events.iter().map(event).collect();
    o["saved_steps"] = json!(a.saved_steps);
    o["checkpoints_left"] = json!(a.checkpoints_left);
    o["other_nodes"] = a.other_nodes.iter().map(|(n, f, files)| json!({"node": n, "folder": f, "files": files})).collect();
    o["best_checkpoint"] = json!(a.best_checkpoint);
    o["best_step"] = json!(a.best_step);
    o["final_step_saved"] = json!(a.final_step_saved);
    o["load_best"] = match &a.load_best {
        LoadBest::Off => Value::Null,
        LoadBest::Loads(f) => json!({"loads": f}),
        LoadBest::NoBest => json!({"loads": null, "why": "no best checkpoint recorded"}),
        LoadBest::Missing(f) => json!({"loads": null, "why": format!("{f} is not there")}),
    };
    o["final_weights_at"] = json!(a.final_weights_at);
    o["save_model_needed"] = json!(a.save_model_needed);
    o["resume_pick"] = json!(a.resume_pick);
    o["model"] = json!({"kind": a.model_kind.name(), "to_keep": super::render::to_keep(a.model_kind)});
    o["checkpoint_files"] = json!(a.checkpoint_files);
    o["assumed"] = json!(a.assumed);
    o["depends_on_assumed"] = json!(a.depends_on_assumed);
    o["assumed_values"] = a.assumed_values.iter().map(|(s, k)| json!({"step": s, "key": k})).collect();
    if let Some(r) = &a.resume {
        let first_error = r.first_error.as_ref().map(|(t, m)| json!({"type": t, "message": m}));
        o["resume"] = json!({
            "from": r.from,
            "args": r.args.iter().cloned().collect::<serde_json::Map<String, Value>>(),
            "damage": r.damage,
            "ran": r.ran,
            "checkpoint": r.checkpoint,
            "start_step": r.start_step,
            "first_run": {
                "error": first_error,
                "global_step": r.first_global_step,
                "max_steps": r.first_max_steps,
                "checkpoints_left": r.first_checkpoints_left,
                "best_checkpoint": r.first_best_checkpoint,
            },
        });
    }
}

fn event(e: &Event) -> Value {
    json!({"step": e.step, "kind": e.kind, "details": e.details})
}

/// The whole output: an object for one version, a list for several.
pub fn output(plans: &[VersionPlan]) -> String {
    let v = if plans.len() == 1 { version(&plans[0]) } else { Value::Array(plans.iter().map(version).collect()) };
    serde_json::to_string_pretty(&v).expect("plan JSON serialises") + "\n"
}
