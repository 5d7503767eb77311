#!/usr/bin/env python3
"""Golden generator: runs scenarios (contract v3) through the real, unmodified HF Trainer.

Run it with the python of the profile's venv (./dev golden VERSION does that, creating the venv):

    python conformance/generate.py --hf 5.24.0            # (re)write golden/hf-5.24.0/
    python conformance/generate.py --hf 5.24.0 --check    # regenerate into a temp dir, diff with golden
    python conformance/generate.py --hf 5.24.0 --only NAME [NAME ...]
    python conformance/generate.py --hf 5.24.0 --scenarios DIR --out DIR   # any scenario folder

The runner contract (what a run directory holds, what is compared) is conformance/README.md.
This file is the HF adapter of that contract; src/ is the Rust one.
"""
import argparse
import contextlib
import copy
import dataclasses
import functools
import gc
import inspect
import itertools
import json
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import types
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(ROOT, "conformance", "scenarios")

# Fields of the scenario format (contract v2: v1's plus `tokenizer` and `resume`; v3: `model.kind`
# and `resume.model`). Anything else in a scenario file is an error of the file.
SCENARIO_FIELDS = {"name", "summary", "args", "model", "data", "metrics", "early_stopping", "finally",
                   "tokenizer", "resume", "launch", "signal", "train", "earlier", "control"}
# Contract v3 part 3 (c): the TrainerControl flags the world's control callback may set.
CONTROL_FLAGS = {"should_save", "should_evaluate", "should_log", "should_training_stop", "should_epoch_stop"}
# Contract v3 part 3 (g): a SIGTERM the process sends itself at a step (conformance/README.md
# "Signal"); enable_jit_checkpoint's handler requests its checkpoint after a grace period of
# JIT_KILL_WAIT seconds, which the world waits out (SIGNAL_WAIT) so that the outcome is the same
# on every run.
SIGNAL_FIELDS = {"at_step"}
SIGNAL_WAIT = 3.5
RESUME_FIELDS = {"from", "args", "damage", "model", "launch", "early_stopping"}
# Contract v3, part 2 (conformance/README.md "Launch"): how many processes and nodes run a phase,
# and whether the nodes share one disk. Default: one process (no launcher).
LAUNCH_FIELDS = {"nnodes": (1, 2), "nproc_per_node": (1, 2), "disks": ("shared", "per-node")}
LAUNCH_DEFAULT = {"nnodes": 1, "nproc_per_node": 1, "disks": "shared"}
NODE_DIR = re.compile(r"^node-[0-9]+$")
# Model kinds (contract v3, conformance/README.md "Model kinds"): the fields each kind takes.
MODEL_FIELDS = {
    "regression": {"kind", "a", "b", "frozen"},
    "module": {"kind", "a", "b", "frozen"},
    "linear": {"kind", "a", "b", "frozen"},
    "lora": {"kind", "a", "b", "r", "alpha", "lora_a", "lora_b"},
}
# The fixed LoRA of the `lora` kind (conformance/README.md): every other LoraConfig field is peft's
# default. `r` and `alpha` may be overridden by the scenario.
LORA_DEFAULTS = {"r": 1, "alpha": 2, "lora_a": 1.0, "lora_b": 0.0}
FINALLY_CALLS = {"save_model", "save_state"}
CHECKPOINT_NAME = re.compile(r"^checkpoint-[0-9]+$")
# Arguments the generator owns (a scenario may not set them): see conformance/README.md.
GENERATOR_ARGS = {"output_dir", "report_to", "disable_tqdm", "logging_dir"}
# Arguments HF renamed (format v1 uses HF 5.x names): a version without the new field gets the
# old spelling (evaluation_strategy before 4.41).
RENAMES = {"eval_strategy": "evaluation_strategy", "use_cpu": "no_cuda"}
# Keys whose values are wall-clock measurements: never compared.
VOLATILE_KEY = re.compile(r"(_runtime|_per_second|_jit_compilation_time)$")


class ScenarioError(Exception):
    """A broken scenario file: the generator's own error, not an HF outcome."""


def load_scenario(path):
    with open(path) as f:
        try:
            sc = json.load(f)
        except json.JSONDecodeError as e:
            raise ScenarioError(f"{path}: not valid JSON: {e}")
    if not isinstance(sc, dict):
        raise ScenarioError(f"{path}: a scenario is a JSON object")
    unknown = set(sc) - SCENARIO_FIELDS
    if unknown:
        raise ScenarioError(f"{path}: unknown field(s) {sorted(unknown)}; format v1 has {sorted(SCENARIO_FIELDS)}")
    stem = os.path.splitext(os.path.basename(path))[0]
    if sc.get("name") != stem:
        raise ScenarioError(f"{path}: field 'name' must equal the file stem {stem!r}")
    if not isinstance(sc.get("args", {}), dict):
        raise ScenarioError(f"{path}: field 'args' must be an object")
    owned = GENERATOR_ARGS & set(sc.get("args", {}))
    if owned:
        raise ScenarioError(f"{path}: field 'args' may not set {sorted(owned)}: the runner owns them")
    for call in sc.get("finally", []):
        if call not in FINALLY_CALLS:
            raise ScenarioError(f"{path}: field 'finally' has {call!r}; allowed: {sorted(FINALLY_CALLS)}")
    if "tokenizer" in sc and not isinstance(sc["tokenizer"], bool):
        raise ScenarioError(f"{path}: field 'tokenizer' must be true or false")
    check_model(sc.get("model", {}), path, "model")
    if "launch" in sc:
        check_launch(sc["launch"], path, "launch")
    if "resume" in sc:
        check_resume(sc["resume"], path)
    if "signal" in sc:
        check_signal(sc, path)
    for k, e in enumerate(sc.get("earlier", [])):
        # Contract v3 part 3 (a): {"folder": P} or {"file": P, "text": T}, P under output/.
        ok = isinstance(e, dict) and (set(e) == {"folder"} or set(e) in ({"file"}, {"file", "text"}))
        p = ok and e.get("folder", e.get("file"))
        if not ok or not isinstance(p, str) or not p.startswith("output/") or ".." in p.split("/") or "" in p.split("/") \
                or not isinstance(e.get("text", ""), str):
            raise ScenarioError(f"{path}: field 'earlier[{k}]' must be {{\"folder\": P}} or {{\"file\": P, \"text\": T}} "
                                f"with P under output/ (relative, no '..')")
    if sc.get("earlier") and world_size(launch_of(sc.get("launch"))) > 1:
        raise ScenarioError(f"{path}: field 'earlier' is for a first run of one process")
    for k, c in enumerate(sc.get("control", [])):
        if (not isinstance(c, dict) or set(c) != {"at_step", "set"} or c["set"] not in CONTROL_FLAGS
                or isinstance(c["at_step"], bool) or not isinstance(c["at_step"], int) or c["at_step"] < 1):
            raise ScenarioError(f"{path}: field 'control[{k}]' must be {{\"at_step\": N, \"set\": FLAG}} with N >= 1 and "
                                f"FLAG one of {sorted(CONTROL_FLAGS)}")
    if "train" in sc:
        if not isinstance(sc["train"], bool):
            raise ScenarioError(f"{path}: field 'train' must be true or false")
        if sc["train"] is False and "resume" in sc:
            raise ScenarioError(f"{path}: field 'train' may be false only without 'resume' (a resume needs a first "
                                f"run's checkpoint)")
    return sc


def check_signal(sc, path):
    """Field `signal` (contract v3 part 3 g): strict. Only with enable_jit_checkpoint=True (else
    SIGTERM's default action ends the generator itself) and one process."""
    sg = sc["signal"]
    if not isinstance(sg, dict) or set(sg) != SIGNAL_FIELDS:
        raise ScenarioError(f"{path}: field 'signal' must be an object with exactly {sorted(SIGNAL_FIELDS)}")
    n = sg["at_step"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError(f"{path}: field 'signal.at_step' must be a positive integer (a global step)")
    if sc.get("args", {}).get("enable_jit_checkpoint") is not True:
        raise ScenarioError(f"{path}: field 'signal' needs args.enable_jit_checkpoint=true: without its handler "
                            f"SIGTERM ends the process")
    if world_size(launch_of(sc.get("launch"))) > 1 or world_size(launch_of((sc.get("resume") or {}).get("launch"))) > 1:
        raise ScenarioError(f"{path}: field 'signal' is for one process (no launch of several)")


def check_model(m, path, field):
    """Field `model` (and `resume.model`), contract v3: strict, naming the field."""
    if not isinstance(m, dict):
        raise ScenarioError(f"{path}: field '{field}' must be an object")
    kind = m.get("kind", "regression")
    if kind not in MODEL_FIELDS:
        raise ScenarioError(f"{path}: field '{field}.kind' must be one of {sorted(MODEL_FIELDS)}, not {kind!r}")
    unknown = set(m) - MODEL_FIELDS[kind]
    if unknown:
        raise ScenarioError(f"{path}: field '{field}' has unknown field(s) {sorted(unknown)} for kind {kind!r}; "
                            f"allowed: {sorted(MODEL_FIELDS[kind])}")
    for k in ("a", "b", "lora_a", "lora_b", "alpha"):
        if k in m and (isinstance(m[k], bool) or not isinstance(m[k], (int, float))):
            raise ScenarioError(f"{path}: field '{field}.{k}' must be a number")
    if "frozen" in m:
        names = {"regression": ["a", "b"], "module": ["a", "b"], "linear": ["linear.weight", "linear.bias"]}[kind]
        fr = m["frozen"]
        if not isinstance(fr, list) or any(n not in names for n in fr) or len(set(fr)) != len(fr):
            raise ScenarioError(f"{path}: field '{field}.frozen' must list distinct parameters of kind {kind!r}: {names}")
    if "r" in m and (isinstance(m["r"], bool) or not isinstance(m["r"], int) or m["r"] < 1):
        raise ScenarioError(f"{path}: field '{field}.r' must be a positive integer")


def check_launch(lc, path, field):
    """Field `launch` (and `resume.launch`), contract v3 part 2: strict, naming the field."""
    if not isinstance(lc, dict):
        raise ScenarioError(f"{path}: field '{field}' must be an object with 'nnodes', 'nproc_per_node', 'disks'")
    unknown = set(lc) - set(LAUNCH_FIELDS)
    if unknown:
        raise ScenarioError(f"{path}: field '{field}' has unknown field(s) {sorted(unknown)}; allowed: {sorted(LAUNCH_FIELDS)}")
    for k, allowed in LAUNCH_FIELDS.items():
        if k in lc and (isinstance(lc[k], bool) or lc[k] not in allowed):
            raise ScenarioError(f"{path}: field '{field}.{k}' must be one of {list(allowed)}, not {lc[k]!r}")


def launch_of(lc):
    """A launch field with its defaults filled in (a tuple: it groups the launches)."""
    full = dict(LAUNCH_DEFAULT, **(lc or {}))
    return (full["nnodes"], full["nproc_per_node"], full["disks"])


def world_size(launch):
    return launch[0] * launch[1]


def check_resume(r, path):
    """Field `resume` (conformance/README.md, contract v2): strict, naming the field."""
    if not isinstance(r, dict):
        raise ScenarioError(f"{path}: field 'resume' must be an object with 'from' (and optional 'args', 'damage')")
    unknown = set(r) - RESUME_FIELDS
    if unknown:
        raise ScenarioError(f"{path}: field 'resume' has unknown field(s) {sorted(unknown)}; allowed: {sorted(RESUME_FIELDS)}")
    frm = r.get("from")
    if not (frm == "last" or (isinstance(frm, str) and CHECKPOINT_NAME.match(frm))):
        raise ScenarioError(f"{path}: field 'resume.from' must be \"last\" or \"checkpoint-<N>\", not {frm!r}")
    if not isinstance(r.get("args", {}), dict):
        raise ScenarioError(f"{path}: field 'resume.args' must be an object")
    es = r.get("early_stopping")
    if es is not None and (not isinstance(es, dict) or set(es) - {"patience", "threshold"}):
        raise ScenarioError(f"{path}: field 'resume.early_stopping' must be null or an object with "
                            f"'patience' and/or 'threshold'")
    if "model" in r:
        check_model(r["model"], path, "resume.model")
    if "launch" in r:
        check_launch(r["launch"], path, "resume.launch")
    owned = GENERATOR_ARGS & set(r.get("args", {}))
    if owned:
        raise ScenarioError(f"{path}: field 'resume.args' may not set {sorted(owned)}: the runner owns them")
    damage = r.get("damage", [])
    if not isinstance(damage, list):
        raise ScenarioError(f"{path}: field 'resume.damage' must be a list")
    for k, d in enumerate(damage):
        where = f"{path}: field 'resume.damage[{k}]'"
        if not isinstance(d, dict) or not (set(d) == {"remove"} or set(d) == {"truncate", "bytes"}
                                           or set(d) == {"reshard", "max_shard_size"}):
            raise ScenarioError(f"{where} must be {{\"remove\": PATH}}, {{\"truncate\": PATH, \"bytes\": N}} or "
                                f"{{\"reshard\": CHECKPOINT, \"max_shard_size\": N}}")
        rel = d.get("remove", d.get("truncate", d.get("reshard")))
        parts = rel.split("/") if isinstance(rel, str) else []
        if parts and NODE_DIR.match(parts[0]):  # a per-node disk's output (contract v3 part 2)
            parts = parts[1:]
        if not isinstance(rel, str) or not parts or parts[0] != "output" or os.path.isabs(rel) or ".." in parts:
            raise ScenarioError(f"{where}: the path must be output or lie under it (or under node-K/output for "
                                f"per-node disks; relative, no '..'), not {rel!r}")
        if "bytes" in d and not (isinstance(d["bytes"], int) and not isinstance(d["bytes"], bool) and d["bytes"] >= 0):
            raise ScenarioError(f"{where}: 'bytes' must be a non-negative integer")
        if "max_shard_size" in d and not (isinstance(d["max_shard_size"], int) and not isinstance(d["max_shard_size"], bool)
                                          and d["max_shard_size"] > 0):
            raise ScenarioError(f"{where}: 'max_shard_size' must be a positive integer (bytes)")


def find_scenarios(root):
    out = []
    for dirpath, _, files in os.walk(root):
        for fn in files:
            if fn.endswith(".json"):
                out.append(os.path.join(dirpath, fn))
    scs = [load_scenario(p) for p in sorted(out)]
    names = [s["name"] for s in scs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ScenarioError(f"duplicate scenario names: {sorted(dup)}")
    return scs


# ---------------------------------------------------------------- the HF side

# The environment every scenario starts from: the generator's own, taken before any scenario ran.
# HF and accelerate write into os.environ and read it back: 4.31-4.57's TrainingArguments sets
# ACCELERATE_MIXED_PRECISION to "bf16" for `bf16=True` and keeps what it finds there otherwise,
# and accelerate then trains every later Trainer of the process, and every launch that inherits
# the variable, with bf16 autocast (seen: a random 2-process linear scenario of 4.31.0 whose
# checkpoint-7 Adam moments moved by 7e-4 after an earlier scenario's bf16). Each scenario, and
# each task of a launch, starts from this one as a process of its own would.
BASE_ENV = None


def reset_env(base):
    """os.environ back to `base` (what a scenario's process would start with); None (hf_world
    not called yet): nothing to restore."""
    if base is None:
        return
    for k in [k for k in os.environ if k not in base]:
        del os.environ[k]
    for k, v in base.items():
        if os.environ.get(k) != v:
            os.environ[k] = v

def hf_world():
    """Imports torch/transformers and defines the model, data and metrics of the contract."""
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    global BASE_ENV
    BASE_ENV = dict(os.environ)
    import numpy as np
    import torch
    from torch import nn
    import transformers
    from transformers import PretrainedConfig, PreTrainedModel

    torch.set_num_threads(1)

    class RegressionConfig(PretrainedConfig):
        model_type = "regression"

        def __init__(self, a=0.0, b=0.0, **kwargs):
            super().__init__(**kwargs)
            self.a = a
            self.b = b

    class RegressionModel(PreTrainedModel):
        # HF's own tests/trainer RegressionPreTrainedModel, with the contract's names.
        config_class = RegressionConfig
        base_model_prefix = "regression"

        def __init__(self, config):
            super().__init__(config)
            self.a = nn.Parameter(torch.tensor(config.a).float())
            self.b = nn.Parameter(torch.tensor(config.b).float())

        def forward(self, input_x, labels=None, **kwargs):
            y = input_x * self.a + self.b
            if labels is None:
                return (y,)
            loss = nn.functional.mse_loss(y, labels)
            return (loss, y)

    class RegressionModule(nn.Module):
        # Kind "module" (contract v3): not a PreTrainedModel, same parameters, forward and loss.
        def __init__(self, a=0.0, b=0.0):
            super().__init__()
            self.a = nn.Parameter(torch.tensor(a).float())
            self.b = nn.Parameter(torch.tensor(b).float())

        def forward(self, input_x, labels=None, **kwargs):
            y = input_x * self.a + self.b
            if labels is None:
                return (y,)
            loss = nn.functional.mse_loss(y, labels)
            return (loss, y)

    class LinearConfig(PretrainedConfig):
        model_type = "linear"

        def __init__(self, a=0.0, b=0.0, **kwargs):
            super().__init__(**kwargs)
            self.a = a
            self.b = b

    class LinearModel(PreTrainedModel):
        # Kind "linear" (contract v3): the prediction is an nn.Linear(1, 1) (weight a, bias b), a
        # module peft can target. nn.Linear's own initialiser draws from the global RNG; the
        # values are then set from the config, and the Trainer seeds the RNG after this anyway.
        config_class = LinearConfig
        base_model_prefix = "linear_model"

        def __init__(self, config):
            super().__init__(config)
            self.linear = nn.Linear(1, 1)
            with torch.no_grad():
                self.linear.weight.fill_(float(config.a))
                self.linear.bias.fill_(float(config.b))

        def forward(self, input_x, labels=None, **kwargs):
            y = self.linear(input_x.unsqueeze(-1)).squeeze(-1)
            if labels is None:
                return (y,)
            loss = nn.functional.mse_loss(y, labels)
            return (loss, y)

    # peft records the base model's class and module in adapter_config.json (auto_mapping), and
    # Python names a method by its qualified name in errors (a TypeError from forward): one module
    # name, "ckptspec_world", whether this file runs as __main__ or is imported (tests/common) as
    # generate, and plain qualified names (LinearModel.forward, not hf_world.<locals>....).
    # The module is real (in sys.modules, its __file__ this file, where the classes are defined):
    # 5.0+ reads `sys.modules[cls.__module__].__file__` when it builds a PreTrainedModel.
    world_module = types.ModuleType("ckptspec_world")
    world_module.__file__ = os.path.abspath(__file__)
    for cls in (RegressionModule, LinearConfig, LinearModel):
        cls.__module__ = "ckptspec_world"
        cls.__qualname__ = cls.__name__
        setattr(world_module, cls.__name__, cls)
        for f in vars(cls).values():
            if inspect.isfunction(f):
                f.__qualname__ = f"{cls.__name__}.{f.__name__}"
    sys.modules["ckptspec_world"] = world_module

    class RegressionSet(torch.utils.data.Dataset):
        def __init__(self, n, offset):
            i = [k + offset for k in range(n)]
            xs = [math.sin(v + 1) for v in i]
            ys = [2 * x + 3 + 0.1 * math.cos(3 * v) for x, v in zip(xs, i)]
            self.x = torch.tensor(xs, dtype=torch.float64).float()
            self.y = torch.tensor(ys, dtype=torch.float64).float()

        def __len__(self):
            return len(self.x)

        def __getitem__(self, k):
            return {"input_x": self.x[k], "labels": self.y[k]}

    return dict(np=np, torch=torch, transformers=transformers, RegressionConfig=RegressionConfig,
                RegressionModel=RegressionModel, RegressionSet=RegressionSet,
                RegressionModule=RegressionModule, LinearConfig=LinearConfig, LinearModel=LinearModel)


def make_model(spec, world):
    """The model of a scenario's `model` field (contract v3; default kind "regression"), with
    the parameters `frozen` names set requires_grad=False (v3 part 3 b)."""
    model = make_model_of_kind(spec, world)
    frozen = spec.get("frozen", [])
    for n, p in model.named_parameters():
        if n in frozen:
            p.requires_grad_(False)
    return model


def make_model_of_kind(spec, world):
    kind = spec.get("kind", "regression")
    a, b = float(spec.get("a", 0.0)), float(spec.get("b", 0.0))
    if kind == "regression":
        return world["RegressionModel"](world["RegressionConfig"](a=a, b=b))
    if kind == "module":
        return world["RegressionModule"](a, b)
    base = world["LinearModel"](world["LinearConfig"](a=a, b=b))
    if kind == "linear":
        return base
    # kind "lora": peft is imported only here, so that a profile runs its other scenarios alike
    # (transformers imports it anyway where it is installed).
    from peft import LoraConfig, get_peft_model
    lo = dict(LORA_DEFAULTS, **{k: spec[k] for k in LORA_DEFAULTS if k in spec})
    model = get_peft_model(base, LoraConfig(r=int(lo["r"]), lora_alpha=lo["alpha"], target_modules=["linear"],
                                            lora_dropout=0.0))
    # peft's default init draws lora_A from the global RNG (kaiming_uniform_, a=sqrt(5)) and
    # zeros lora_B; the world sets both explicitly instead, every entry to one value.
    torch = world["torch"]
    with torch.no_grad():
        model.base_model.model.linear.lora_A["default"].weight.fill_(float(lo["lora_a"]))
        model.base_model.model.linear.lora_B["default"].weight.fill_(float(lo["lora_b"]))
    return model


class ScriptedMetrics:
    """compute_metrics that replays the scenario's list, one entry per call of each eval set.

    A dict eval set is recognised by its labels (each set has its own offset), so each set's
    call takes its own part of the entry, whatever order HF evaluates them in.
    """

    def __init__(self, entries, sets):
        self.entries = entries
        self.sets = sets  # list of (name or None, first label value)
        self.calls = {}

    def __call__(self, pred):
        first = float(pred.label_ids.reshape(-1)[0])
        name = None
        for n, lab in self.sets:
            if lab == first:
                name = n
                break
        k = self.calls.get(name, 0)
        self.calls[name] = k + 1
        if k >= len(self.entries):
            return {}
        entry = self.entries[k]
        if name is not None:
            entry = entry.get(name, {})
        return dict(entry)


def ControlAtSteps(items):
    """The world's control callback (contract v3 part 3 c): in on_step_end, after the Trainer's
    own callbacks, sets each item's TrainerControl flag at its global step."""
    from transformers import TrainerCallback

    class _Control(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            for c in items:
                if state.global_step == c["at_step"]:
                    setattr(control, c["set"], True)
            return control

    return _Control()


def SignalAtStep(step):
    """The world's signal (contract v3 part 3 g): after the Trainer's own callbacks' on_step_end
    of global step `step`, SIGTERM to this process, then SIGNAL_WAIT seconds, past
    enable_jit_checkpoint's grace period (its handler's timer then has requested the checkpoint)."""
    import signal
    from transformers import TrainerCallback

    class _Signal(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == step:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(SIGNAL_WAIT)

    return _Signal()


def make_tokenizer(world):
    """The world's tokenizer (contract v2, `"tokenizer": true`): a fast WordLevel tokenizer over a
    fixed vocabulary with its special tokens, built in code (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "low": 5, "high": 6, "loss": 7}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def resolve_args(args):
    """The scenario's arguments under this version's spelling, plus the runner's own."""
    from transformers import TrainingArguments
    args = dict(args)
    fields = TrainingArguments.__dataclass_fields__
    for new, old in RENAMES.items():
        if new in args and new not in fields and old in fields:
            args[old] = args.pop(new)
    args.update(output_dir="output", report_to="none", disable_tqdm=True)
    if "logging_dir" in fields:
        # Older versions default it to runs/<time>_<host>, which would make training_args.bin
        # differ on every run; nothing is written there with report_to="none".
        args["logging_dir"] = "output/runs"
    return args


def one_run(sc, args, world, resume_from, model_spec=None):
    """Builds a Trainer from the scenario (model, data, callbacks, a fresh scripted
    compute_metrics) with `args`, trains (`resume_from` None, True or a path), then the `finally`
    calls. Returns (trainer or None, error or None). Runs in the run directory.

    Every Trainer gets its own copy of the arguments as the scenario writes them, as a process of
    its own would: HF writes into the dicts it is given (5.5+'s create_accelerator_and_postprocess
    sets accelerator_config's gradient_accumulation_kwargs["num_steps"] = 1 in the caller's dict),
    and a resume's Trainer built from the same dict then trained with gradient_accumulation_steps 1
    (args-accelerator-config-grad-acc-num-steps-resume)."""
    import transformers
    from transformers import Trainer, TrainingArguments
    trainer = None
    args = copy.deepcopy(args)
    try:
        targs = TrainingArguments(**resolve_args(args))
        model = make_model(model_spec if model_spec is not None else sc.get("model", {}), world)
        data = sc.get("data", {})
        train_set = world["RegressionSet"](int(data.get("train", 64)), 0)
        ev = data.get("eval", 16)
        sets = []
        if isinstance(ev, dict):
            eval_set = {}
            for k, (name, size) in enumerate(ev.items()):
                eval_set[name] = world["RegressionSet"](int(size), 10000 * (k + 1))
                sets.append((name, float(eval_set[name].y[0])))
        elif ev:
            eval_set = world["RegressionSet"](int(ev), 10000)
            sets.append((None, float(eval_set.y[0])))
        else:
            eval_set = None
        kwargs = dict(model=model, args=targs, train_dataset=train_set, eval_dataset=eval_set)
        if "metrics" in sc:
            kwargs["compute_metrics"] = ScriptedMetrics(sc["metrics"], sets)
        es = sc.get("early_stopping")
        if resume_from is not None and "early_stopping" in (sc.get("resume") or {}):
            es = sc["resume"]["early_stopping"]  # contract v3 part 3 (d): the second run's own (or null)
        if es is not None:
            kwargs["callbacks"] = [transformers.EarlyStoppingCallback(
                early_stopping_patience=es.get("patience", 1),
                early_stopping_threshold=es.get("threshold", 0.0))]
        if sc.get("control"):
            kwargs["callbacks"] = kwargs.get("callbacks", []) + [ControlAtSteps(sc["control"])]
        if "signal" in sc:
            kwargs["callbacks"] = kwargs.get("callbacks", []) + [SignalAtStep(sc["signal"]["at_step"])]
        if sc.get("tokenizer"):
            # The version's argument for it (processing_class from 4.46; tokenizer before), and
            # the default collator kept: with a tokenizer HF would pad with it instead.
            params = inspect.signature(Trainer.__init__).parameters
            kwargs["processing_class" if "processing_class" in params else "tokenizer"] = make_tokenizer(world)
            kwargs["data_collator"] = transformers.default_data_collator
        trainer = Trainer(**kwargs)
        # disable_tqdm makes PrinterCallback print every log to stdout; keep ours readable.
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            if resume_from is None:
                if sc.get("train", True):  # contract v3 part 3 (f): `"train": false` calls only `finally`
                    trainer.train()
            else:
                trainer.train(resume_from_checkpoint=resume_from)
            for call in sc.get("finally", []):
                getattr(trainer, call)()
    except Exception as e:  # HF's outcome for this scenario
        if os.environ.get("CKPTSPEC_TRACEBACK"):
            traceback.print_exc()
        return trainer, {"type": type(e).__name__, "message": str(e)}
    return trainer, None


def state_json(trainer):
    # TrainerState has no to_json_string; this is the serialisation of its own save_to_json.
    return (json.loads(json.dumps(dataclasses.asdict(trainer.state), indent=2, sort_keys=True))
            if trainer is not None else None)


# The modification time `earlier` items get (2020-01-01T00:00:00Z): an earlier run's folders are
# older than this run's by far more than the 1 s below which HF's mtime-ordered rotation falls
# back to the numbers, so the outcome does not depend on how fast the run is.
EARLIER_MTIME = 1577836800


def make_earlier(items):
    """`earlier` (contract v3 part 3 a), relative to the run directory (the cwd): what the output
    folder holds before the first Trainer is built, every path made dated EARLIER_MTIME."""
    for e in items:
        if "folder" in e:
            os.makedirs(e["folder"], exist_ok=True)
        else:
            os.makedirs(os.path.dirname(e["file"]), exist_ok=True)
            with open(e["file"], "w", encoding="utf-8") as f:
                f.write(e.get("text", ""))
    for e in items:
        parts = e.get("folder", e.get("file")).split("/")
        for k in range(len(parts), 1, -1):  # the item, then its folders below output/
            os.utime("/".join(parts[:k]), (EARLIER_MTIME, EARLIER_MTIME))


def apply_damage(damage):
    """`resume.damage`, in order, relative to the run directory (the cwd). A path that does not
    exist is left alone: which folders a release wrote is its outcome, not the scenario's."""
    for d in damage:
        if "remove" in d:
            p = d["remove"]
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)
        elif "reshard" in d:
            reshard(d["reshard"], d["max_shard_size"])
        elif os.path.isfile(d["truncate"]):
            with open(d["truncate"], "r+b") as f:
                f.truncate(d["bytes"])


def reshard(folder, max_shard_size):
    """A `{"reshard": CHECKPOINT, "max_shard_size": N}` damage (contract v3 part 3 e): the
    checkpoint's full weights file (model.safetensors or pytorch_model.bin) rewritten in
    save_pretrained's sharded layout, in its own format: shards named `model-0000K-of-0000N.
    safetensors` (`pytorch_model-...bin`), filled in state-dict order and a new one begun where a
    tensor would take a shard past N bytes (huggingface_hub's split), the index
    `model.safetensors.index.json` (`pytorch_model.bin.index.json`) with `metadata.total_size`
    and `weight_map` as save_pretrained writes it (indent 2, sorted keys), the single file removed.
    The generator's own code, the same for every release: the damage is the scenario's input,
    what each release's resume and load_best_model_at_end make of it is the outcome. A checkpoint
    without a full weights file (an adapter's, or none left) is left alone."""
    import torch
    safe = os.path.join(folder, "model.safetensors")
    pt = os.path.join(folder, "pytorch_model.bin")
    if os.path.isfile(safe):
        from safetensors.torch import load_file, save_file
        sd, src, prefix, ext = load_file(safe), safe, "model", "safetensors"
        index_name = "model.safetensors.index.json"
    elif os.path.isfile(pt):
        sd, src, prefix, ext = torch.load(pt, map_location="cpu"), pt, "pytorch_model", "bin"
        index_name = "pytorch_model.bin.index.json"
    else:
        return
    shards, size = [], 0
    for k, t in sd.items():
        n = t.numel() * t.element_size()
        if not shards or size + n > max_shard_size:
            shards.append({})
            size = 0
        shards[-1][k] = t
        size += n
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"{prefix}-{i + 1:05d}-of-{len(shards):05d}.{ext}"
        if ext == "safetensors":
            save_file({k: t.contiguous() for k, t in shard.items()}, os.path.join(folder, name), metadata={"format": "pt"})
        else:
            torch.save({k: t.clone() for k, t in shard.items()}, os.path.join(folder, name))
        weight_map.update({k: name for k in shard})
    index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in sd.values())}, "weight_map": weight_map}
    with open(os.path.join(folder, index_name), "w", encoding="utf-8") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    os.remove(src)


def write_result(result):
    with open("result.json", "w") as f:
        f.write(json.dumps(result, indent=2) + "\n")


def sets_mixed_precision(sc):
    """Whether the scenario (or its resume) asks for bf16/fp16 training or evaluation."""
    keys = ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval")
    args = [sc.get("args", {}), (sc.get("resume") or {}).get("args", {})]
    return any(a.get(k) for a in args for k in keys)


def run_scenario(sc, world, hf_version, run_dir, resume=None, phase="all"):
    """Runs one scenario with cwd = run_dir (so output_dir is the relative path "output").

    Contract v2: with `sc["resume"]`, the first run, then the damage, then a second Trainer built
    fresh (its args = the first's updated with `resume.args`) trains with
    `resume_from_checkpoint` (True for "last", else "output/<name>"); result.json's top level is
    the second run's, `first` the first run's. `phase` splits this for cross-resume tests:
    "first" stops after the damage (result.json is then the first run's, as v1 writes it);
    "second" starts from such a run directory. `resume` (tests/resume.rs): no first run, one
    `train(resume_from_checkpoint=...)` with the scenario's own arguments in a run directory a
    first run left."""
    os.makedirs(run_dir, exist_ok=True)
    reset_env(BASE_ENV)
    cwd = os.getcwd()
    os.chdir(run_dir)
    try:
        r = sc.get("resume")
        if resume is not None:
            trainer, error = one_run(sc, sc.get("args", {}), world, resume_target(resume))
            write_result({"hf_version": hf_version, "error": error, "final_state": state_json(trainer)})
            return error
        if phase in ("all", "first"):
            make_earlier(sc.get("earlier", []))
            trainer, error = one_run(sc, sc.get("args", {}), world, None)
            first = {"hf_version": hf_version, "error": error, "final_state": state_json(trainer)}
            if r is None or error is not None or phase == "first":
                if r is not None and error is None:
                    apply_damage(r.get("damage", []))
                write_result(first)
                return error
            apply_damage(r.get("damage", []))
        else:
            with open("result.json") as f:
                first = json.load(f)
            if r is None or first["error"] is not None:
                raise ScenarioError(f"{sc['name']}: phase 'second' needs a resume scenario whose first run succeeded")
        args, resume_from, model_spec = phase_args(sc, "second")
        trainer, error = one_run(sc, args, world, resume_from, model_spec)
        write_result({"hf_version": hf_version, "error": error, "final_state": state_json(trainer),
                      "first": {"error": first["error"], "final_state": first["final_state"]}})
        return error
    finally:
        os.chdir(cwd)


# ---------------------------------------------------------------- several processes (contract v3 part 2)

def phase_cwd(run_dir, launch, node):
    """Where a process of `node` runs: the run directory, or its node's own `node-K/` (per-node disks:
    the relative `output/` is then that node's disk)."""
    return os.path.join(run_dir, f"node-{node}") if launch[2] == "per-node" else run_dir


def phase_args(sc, phase):
    """(args, resume_from, model spec) of a phase: "all"/"first" the scenario's own; "second" the
    resume's (contract v2)."""
    if phase != "second":
        return sc.get("args", {}), None, sc.get("model", {})
    r = sc["resume"]
    args = dict(sc.get("args", {}))
    args.update(r.get("args", {}))
    return args, resume_target(r["from"]), r.get("model", sc.get("model", {}))


def resume_target(frm):
    """`resume_from_checkpoint` of a `resume.from`: True for "last" (HF's get_last_checkpoint),
    else the checkpoint's path relative to the run directory."""
    return True if frm == "last" else f"output/{frm}"


def phase_launch(sc, phase):
    if phase == "second" and "launch" in sc["resume"]:
        return launch_of(sc["resume"]["launch"])
    return launch_of(sc.get("launch"))


def is_distributed(sc):
    return any(world_size(phase_launch(sc, ph)) > 1 for ph in (("first", "second") if "resume" in sc else ("all",)))


RACES = os.path.join(ROOT, "conformance", "races.json")


def _release(v):
    return tuple(int(x) for x in v.split("."))


@functools.lru_cache(maxsize=None)
def declared_races():
    """races.json's races, read once per process."""
    with open(RACES) as f:
        return tuple(json.load(f)["races"])


def races_of(sc, hf_version):
    """The races of real HF (conformance/races.json) that apply to a scenario in this release: to
    one of its phases, by that phase's launch and arguments. Such a scenario's files differ from
    run to run in real HF; --check runs it again until it gives the golden (main)."""
    found = []
    for race in declared_races():
        if not _release(race["from"]) <= _release(hf_version) < _release(race["until"]):
            continue
        when = race["when"]
        for ph in (("first", "second") if "resume" in sc else ("all",)):
            nnodes, nproc, disks = phase_launch(sc, ph)
            args = phase_args(sc, ph)[0]
            if (nnodes >= when.get("nnodes_at_least", 1) and nnodes * nproc >= when.get("processes_at_least", 1)
                    and disks == when.get("disks", disks)
                    and all(bool(args.get(k, False)) == v for k, v in when.get("args", {}).items())):
                found.append(race)
                break
    return found


def worker_main(task_file):
    """One process of a torchrun launch: runs the launch's tasks one after another (each in its own
    run directory; one launch per profile and launch shape amortises the 15-30 s a launch costs)
    and writes each task's outcome, as this rank saw it, next to the task file."""
    with open(task_file) as f:
        job = json.load(f)
    warnings.filterwarnings("ignore")
    world = hf_world()
    import torch.distributed as dist
    rank, node = int(os.environ["RANK"]), int(os.environ.get("GROUP_RANK", "0"))
    launch = tuple(job["launch"])
    launched_env = dict(os.environ)  # the generator's BASE_ENV and what torchrun set for this rank
    for k, t in enumerate(job["tasks"]):
        reset_env(launched_env)
        if k > 0:
            # Every task after the first rendezvouses on a store of its own (rank 0 serves it on a
            # port the launcher chose): re-initialising on the launch's agent store reuses its
            # keys, and gloo's connectFullMesh then fails now and then (seen with torch 2.1.2).
            os.environ["MASTER_PORT"] = str(job["ports"][k])
            os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
        sc = t["scenario"]
        cwd = phase_cwd(t["run_dir"], launch, node)
        os.makedirs(cwd, exist_ok=True)
        os.chdir(cwd)
        args, resume_from, model_spec = phase_args(sc, t["phase"])
        trainer, error = one_run(sc, args, world, resume_from, model_spec)
        out = {"rank": rank, "node": node, "local_rank": int(os.environ.get("LOCAL_RANK", "0")), "error": error,
               "final_state": state_json(trainer) if rank == 0 else None}
        os.chdir(ROOT)
        with open(outcome_file(task_file, k, rank), "w") as f:
            json.dump(out, f)
        del trainer
        if dist.is_initialized():
            dist.barrier()  # every rank is done with this run directory before the next task starts
            # Then let gloo's worker thread drop its finished work before the group is destroyed.
            # That work can hold the last reference to a tensor a Python object still owns (HF's
            # gathered losses and metrics); freeing it takes the GIL. destroy_process_group joins
            # that thread holding the GIL: with work still queued, both wait forever (torch
            # 2.1.2, py-spy: the main thread in ~ProcessGroupGloo's thread join, gloo's runLoop
            # in ~AsyncAllgatherWork waiting for the GIL). A second barrier makes the thread
            # finish the first one's work while this thread waits without the GIL; the sleeps
            # (which release the GIL) let it drop the last barrier's.
            gc.collect()
            time.sleep(0.05)
            dist.barrier()
            time.sleep(0.05)
            # Each task starts as a launch of its own would: no process group and no accelerate
            # state, so that its TrainingArguments set them up anew (4.31-era accelerate records
            # the backend only when it initialises the group itself: a second Trainer of the same
            # process pickled `backend=None` where a user's launch has 'gloo').
            dist.destroy_process_group()
            from accelerate.state import AcceleratorState
            AcceleratorState._reset_state(reset_partial_state=True)
    # A gloo thread can abort a rank at interpreter exit after everything is written ("terminate
    # called without an active exception"): the group was left after the last task; exit without
    # the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# Rendezvous ports: a range of 100 per generator process below Linux's ephemeral range
# (32768-60999). bind(0) hands out ephemeral ports: one chosen for a later task's store could be
# taken meanwhile by a gloo connection of the running task (its rank 0 then fails to serve the
# store and the others wait for it). Generators side by side (./dev test's checks, the
# cross-resume test's profiles) must not share a range: each claims one by holding a socket on
# its first port for as long as it lives, starting from a range picked by its pid.
_PORTS = None
_CLAIM = None


def _claim_port_range():
    import socket
    global _PORTS, _CLAIM
    for k in range(120):
        base = 20000 + ((os.getpid() + k) % 120) * 100
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", base))
            s.listen(1)
        except OSError:
            s.close()
            continue
        _CLAIM = s
        _PORTS = itertools.cycle(range(base + 1, base + 100))  # reused once a launch is over
        return
    raise RuntimeError("no rendezvous port range of 100 free between 20000 and 31999")


def free_port():
    import socket
    if _PORTS is None:
        _claim_port_range()
    for p in itertools.islice(_PORTS, 99):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return p
    raise RuntimeError("no free port left in this generator's range of 100")


def descendants(roots):
    """Every live process below `roots` (Linux's /proc: each process's parent)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:
                    # "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(roots)
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


# Seconds a launch may go without a new outcome file before it counts as hung (its start, a
# task, its exit). A start takes 15-30 s on a quiet machine and a task seconds; 150 s leaves room
# for a loaded one, and a real hang (see "Races in real HF" in conformance/README.md) costs no
# more than that before its tasks run again one by one.
LAUNCH_IDLE_S = 150
# The same for a launch of scenarios a race of real HF applies to, in --check (races.json): one of
# the race's outcomes is a hang, and such a launch is run again anyway.
RACE_IDLE_S = 45


class LaunchError(Exception):
    """torchrun failed, or a rank wrote no outcome: a generator failure, never a golden."""


def torchrun(launch, tasks, scratch, label, idle_s=LAUNCH_IDLE_S):
    """Runs `tasks` (dicts: scenario, run_dir, phase) in one launch of `launch` (nnodes,
    nproc_per_node, disks): `torch.distributed.run`, gloo on CPU, the rendezvous on 127.0.0.1 with a
    free port, one launcher per node. Returns, per task, the ranks' outcomes (global rank order)."""
    import subprocess
    nnodes, nproc, _ = launch
    task_file = os.path.join(scratch, f"{label}.json")
    with open(task_file, "w") as f:
        # One port per task after the first: each task's process group has a store of its own.
        json.dump({"launch": list(launch), "tasks": tasks, "ports": [free_port() for _ in tasks]}, f)
    port = free_port()
    logs, procs = [], []
    for node in range(nnodes):
        log_path = os.path.join(scratch, f"{label}.node{node}.log")
        logs.append(log_path)
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc_per_node={nproc}",
               f"--node_rank={node}", "--master_addr=127.0.0.1", f"--master_port={port}",
               os.path.abspath(__file__), "--worker", task_file]
        # Its own session: on a timeout the launcher and every worker it started are killed
        # together (killing the launcher alone leaves its workers waiting in a collective).
        procs.append(subprocess.Popen(cmd, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, cwd=ROOT, env=BASE_ENV,
                                      start_new_session=True))
    # A hang is no progress, not a slow launch: the launch is given up when no new outcome file
    # appeared for idle_s seconds (its start included; after the last outcome: its exit).
    # A fixed limit per launch failed under load: with cargo test and another generator on two
    # cores, a 22-task launch ran past 60 + 15 s per task while every rank still progressed.
    outcome_files = [outcome_file(task_file, k, r) for k in range(len(tasks)) for r in range(nnodes * nproc)]
    seen, last = 0, time.monotonic()
    while any(p.poll() is None for p in procs):
        now_seen = sum(os.path.exists(f) for f in outcome_files)
        if now_seen > seen:
            seen, last = now_seen, time.monotonic()
        if time.monotonic() - last > idle_s:
            break
        time.sleep(0.2)
    if any(p.poll() is None for p in procs):
        import signal
        # torch.distributed.run starts each worker in a session of its own: kill the launchers'
        # descendants by name first (killing a launcher orphans its workers, which then wait in a
        # collective forever), then the launchers' own groups.
        for pid in descendants([q.pid for q in procs]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for q in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(q.pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        rcs = ["timeout" if p.returncode is None or p.returncode < 0 else p.returncode for p in procs]
    else:
        rcs = [p.returncode for p in procs]
    outcomes = []
    for k, t in enumerate(tasks):
        ranks = []
        for r in range(nnodes * nproc):
            path = outcome_file(task_file, k, r)
            if not os.path.exists(path):
                tails = "".join(f"--- {log}\n" + "".join(open(log).readlines()[-15:]) for log in logs)
                raise LaunchError(f"{t['scenario']['name']} ({t['phase']}): rank {r} wrote no outcome "
                                  f"(launch {launch}, launcher exit {rcs}); the last lines of each node's log:\n{tails}")
            with open(path) as f:
                ranks.append(json.load(f))
        outcomes.append(ranks)
    if any(rc != 0 for rc in rcs):
        raise LaunchError(f"launch {launch} of {len(tasks)} task(s) exited {rcs} after writing every outcome; see {logs}")
    return outcomes


def torchrun_retrying(launch, tasks, scratch, label, racy=False):
    """torchrun, and when a launch fails (now and then a rendezvous or a gloo teardown hangs; the
    real HF's own errors are outcomes, never failures), every task of it again in a launch of its
    own, each from a copy of its run directory as it was before the failed launch (a resume's run
    directory holds the first phase's folders and the damage). Only complete launches, whose every
    rank wrote its outcome and exited 0, reach a golden folder.

    `racy` (--check only): the tasks are scenarios a race of real HF applies to (races.json), one
    of whose outcomes is a hang. Such a launch is given up sooner (RACE_IDLE_S), a task is tried
    once on its own, and a hung one's outcome is None: the check runs the scenario again."""
    backup = os.path.join(scratch, f"{label}.before")
    for k, t in enumerate(tasks):
        shutil.copytree(t["run_dir"], os.path.join(backup, str(k)), symlinks=True)
    idle_s = RACE_IDLE_S if racy else LAUNCH_IDLE_S
    try:
        return torchrun(launch, tasks, scratch, label, idle_s)
    except LaunchError as e:
        first_error = e
        if racy and len(tasks) == 1:
            return [None]  # the task already had its launch of its own
    outcomes = []
    for k, t in enumerate(tasks):
        for attempt in ((1,) if racy else (1, 2)):
            shutil.rmtree(t["run_dir"])
            shutil.copytree(os.path.join(backup, str(k)), t["run_dir"], symlinks=True)
            try:
                outcomes.append(torchrun(launch, [t], scratch, f"{label}-task{k}-try{attempt}", idle_s)[0])
                break
            except LaunchError as e:
                if racy:
                    outcomes.append(None)
                elif attempt == 2:
                    raise LaunchError(f"{e}\n(the launch of all {len(tasks)} task(s) had failed first: {first_error})")
        print(f"note: {t['scenario']['name']} ({t['phase']}) ran again in a launch of its own after a failed launch",
              file=sys.stderr)
    return outcomes


def outcome_file(task_file, k, rank):
    """Where a worker writes rank `rank`'s outcome of task `k` (worker_main), and torchrun reads it."""
    return f"{task_file}.{k}.rank{rank}.json"


def phase_result(ranks):
    """A phase's part of result.json: global rank 0's error and final state (what the user's main
    process sees), and every rank's outcome. None: the launch of a racy scenario hung (--check;
    torchrun_retrying), which no golden holds."""
    if ranks is None:
        return {"error": {"type": "hung", "message": "the launch made no progress (a race of real HF, races.json)"},
                "final_state": None, "ranks": []}
    return {"error": ranks[0]["error"], "final_state": ranks[0]["final_state"],
            "ranks": [{"rank": o["rank"], "node": o["node"], "local_rank": o["local_rank"], "error": o["error"]}
                      for o in ranks]}


def run_phase_in_process(sc, phase, world, run_dir):
    """A one-process phase of a distributed scenario (a resume with 1 process, or the first run of
    one resumed with 2): the runner's own process, as for every other scenario."""
    launch = phase_launch(sc, phase)
    cwd = phase_cwd(run_dir, launch, 0)
    os.makedirs(cwd, exist_ok=True)
    reset_env(BASE_ENV)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        args, resume_from, model_spec = phase_args(sc, phase)
        trainer, error = one_run(sc, args, world, resume_from, model_spec)
        return {"error": error, "final_state": state_json(trainer)}
    finally:
        os.chdir(here)


def run_distributed(scs, world, hf_version, target, report, phase="all", racy=frozenset()):
    """Every scenario with a launch of several processes: the first phases grouped by launch shape
    (one torchrun each), the damage, then the resumes grouped by theirs. Each scenario's
    result.json is written at its run directory's root (`target/<name>`).

    `phase` splits this for cross-resume tests as run_scenario's does: "first" runs the first
    phases and the damage (result.json is then the first phase's, its `ranks` included);
    "second" runs the resumes in run directories such a first phase left (by either
    implementation) and carries that result.json's error, final_state and ranks into `first`.

    `racy` (--check): names of scenarios a race of real HF applies to in this release. They run in
    launches of their own (a hang there costs no other scenario a rerun), and a hung one's
    result.json says "hung" (torchrun_retrying)."""
    if phase not in ("all", "first", "second"):
        raise ValueError(f"phase {phase!r}")
    scratch = tempfile.mkdtemp(prefix="ckptspec-launch-")
    try:
        results = {}

        def run_group(phase_of):
            groups = {}
            for sc in scs:
                ph = phase_of(sc)
                if ph is not None:
                    groups.setdefault((phase_launch(sc, ph), sc["name"] in racy), []).append((sc, ph))
            for n, ((launch, is_racy), items) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
                if world_size(launch) == 1:
                    for sc, ph in items:
                        results.setdefault(sc["name"], {})[ph] = run_phase_in_process(sc, ph, world, os.path.join(target, sc["name"]))
                    continue
                tasks = [{"scenario": sc, "run_dir": os.path.join(target, sc["name"]), "phase": ph} for sc, ph in items]
                label = f"{phase_of.__name__}-{n}"
                for (sc, ph), ranks in zip(items, torchrun_retrying(launch, tasks, scratch, label, is_racy)):
                    results.setdefault(sc["name"], {})[ph] = phase_result(ranks)

        def first(sc):
            return "first" if "resume" in sc else "all"

        def second(sc):
            res = results[sc["name"]][first(sc)]
            if "resume" not in sc or res["error"] is not None:
                return None
            return "second"

        if phase == "second":
            for sc in scs:
                with open(os.path.join(target, sc["name"], "result.json")) as f:
                    done = json.load(f)
                if "resume" not in sc or done["error"] is not None:
                    raise ScenarioError(f"{sc['name']}: phase 'second' needs a resume scenario whose first run succeeded")
                # The first phase's part as run_group recorded it (`ranks` only for several processes).
                results[sc["name"]] = {"first": {k: done[k] for k in ("error", "final_state", "ranks") if k in done}}
        else:
            for sc in scs:
                run_dir = os.path.join(target, sc["name"])
                if os.path.exists(run_dir):
                    shutil.rmtree(run_dir)
                os.makedirs(run_dir)
            run_group(first)
            here = os.getcwd()
            for sc in scs:
                if second(sc) is not None:
                    os.chdir(os.path.join(target, sc["name"]))
                    try:
                        apply_damage(sc["resume"].get("damage", []))
                    finally:
                        os.chdir(here)
        if phase != "first":
            run_group(second)
        for sc in scs:
            res = results[sc["name"]]
            top = res.get("second", res[first(sc)])
            out = {"hf_version": hf_version, **top}
            if "second" in res:
                out["first"] = res["first"]
            with open(os.path.join(target, sc["name"], "result.json"), "w") as f:
                f.write(json.dumps(out, indent=2) + "\n")
            err = top["error"]
            report(sc, err)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def tokenizer_template(world):
    """The files the world's tokenizer's `save_pretrained` writes in this release (text, by file
    name, sorted): golden/hf-V/TOKENIZER.json. The Rust trainer's processing class is these
    files, as TRAINING_ARGS.pkl is its TrainingArguments object; what the Trainer decides is
    where and when they are written."""
    tmp = tempfile.mkdtemp(prefix="ckptspec-tok-")
    try:
        make_tokenizer(world).save_pretrained(tmp)
        files = {}
        for n in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, n), encoding="utf-8") as f:
                files[n] = f.read()
    finally:
        shutil.rmtree(tmp)
    return json.dumps({"files": files}, indent=1) + "\n"


def peft_template(world):
    """What this release's peft writes for the world's default `lora` model (r=1, alpha=2, lora_a
    1.0, lora_b 0.0; conformance/README.md) with `save_pretrained(tmp)`: the text files by name
    (adapter_config.json, README.md) and the names of the binary ones: golden/hf-V/PEFT.json. As
    TOKENIZER.json is the Rust trainer's processing class, these are its peft: the bytes of the
    release's templates (the LoraConfig fields it serialises, the model card it renders); the Rust
    trainer decides where and when they are written and fills in the scenario's r and alpha."""
    import peft
    tmp = tempfile.mkdtemp(prefix="ckptspec-peft-")
    try:
        make_model({"kind": "lora"}, world).save_pretrained(tmp)
        files, binary = {}, []
        for n in sorted(os.listdir(tmp)):
            if n.endswith((".json", ".md")):
                with open(os.path.join(tmp, n), encoding="utf-8") as f:
                    files[n] = f.read()
            else:
                binary.append(n)
    finally:
        shutil.rmtree(tmp)
    return json.dumps({"peft": peft.__version__, "files": files, "binary_files": binary}, indent=1) + "\n"


def environment_text(world):
    import accelerate
    import peft
    import safetensors
    return (
        f"python {platform.python_version()}\n"
        f"torch {world['torch'].__version__}\n"
        f"transformers {world['transformers'].__version__}\n"
        f"accelerate {accelerate.__version__}\n"
        f"numpy {world['np'].__version__}\n"
        f"safetensors {safetensors.__version__}\n"
        f"peft {peft.__version__}\n"
    )


def training_args_fields(world):
    """The version's TrainingArguments fields, in declaration order, with their defaults.

    The Rust profile reads this (never a hand-written list) to know which keyword arguments the
    version accepts and what it defaults them to.
    """
    import dataclasses as dc
    import enum
    from transformers import TrainingArguments

    def jsonable(v):
        if isinstance(v, enum.Enum):
            return v.value
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            return [jsonable(x) for x in v]
        if isinstance(v, dict):
            return {str(k): jsonable(x) for k, x in v.items()}
        return repr(v)

    out = []
    for f in dc.fields(TrainingArguments):
        if not f.init:
            continue
        if f.default is not dc.MISSING:
            default = jsonable(f.default)
        elif f.default_factory is not dc.MISSING:
            default = jsonable(f.default_factory())
        else:
            default = None
        out.append({"name": f.name, "default": default})
    # The values of the argument enums the version validates against (their order is the order
    # of HF's "please select one of [...]" messages).
    from transformers import trainer_utils, training_args
    enums = {}
    for mod, name in [(trainer_utils, "IntervalStrategy"), (trainer_utils, "SaveStrategy"),
                      (trainer_utils, "SchedulerType"), (training_args, "OptimizerNames")]:
        cls = getattr(mod, name, None)
        if cls is not None:
            enums[name] = [m.value for m in cls]
    return json.dumps({"fields": out, "enums": enums}, indent=1) + "\n"


def training_args_template(world):
    """The pickle (protocol 2, as torch.save writes it into data.pkl) of the TrainingArguments
    object a Trainer holds for a scenario with no args: the runner's fixed settings, after the
    Trainer's init touched it (device, n_gpu). The Rust side patches the scenario's fields into
    it to write training_args.bin, so that the private state HF keeps (accelerate's
    PartialState, cached device, ...) comes from HF itself.
    """
    import io
    import zipfile
    from transformers import Trainer, TrainingArguments

    tmp = tempfile.mkdtemp(prefix="ckptspec-args-")
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        args = dict(output_dir="output", report_to="none", disable_tqdm=True)
        if "logging_dir" in TrainingArguments.__dataclass_fields__:
            args["logging_dir"] = "output/runs"
        targs = TrainingArguments(**args)
        model = world["RegressionModel"](world["RegressionConfig"]())
        Trainer(model=model, args=targs, train_dataset=world["RegressionSet"](8, 0))
        buf = io.BytesIO()
        world["torch"].save(targs, buf)
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        name = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        return z.read(name)


# ---------------------------------------------------------------- check mode

def _load_json(path):
    with open(path) as f:
        return json.load(f)


_NOT_JSON = object()


def _json_or_not(path):
    """The parsed file, or _NOT_JSON when it does not parse."""
    try:
        return _load_json(path)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


# JSON fields of the float-math class (conformance/README.md): what HF computes in floating point.
FLOAT_MATH_KEY = re.compile(r"^(loss|eval_loss|eval_.+_loss|train_loss|grad_norm|learning_rate|total_flos)$")


def _float_class(a, b):
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-7


def _diff_json(a, b, where, out, loss_best=False, key=None):
    """Exact, but for the float-math fields (and best_metric when the metric is a loss:
    `loss_best`), which compare in the float class."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if VOLATILE_KEY.search(k):
                continue
            if k not in a:
                out.append(f"{where}.{k}: only in regenerated")
            elif k not in b:
                out.append(f"{where}.{k}: only in golden")
            else:
                _diff_json(a[k], b[k], f"{where}.{k}", out, loss_best, k)
        if list(k for k in a if not VOLATILE_KEY.search(k)) != list(k for k in b if not VOLATILE_KEY.search(k)):
            out.append(f"{where}: key order differs")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} in golden, {len(b)} regenerated")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff_json(x, y, f"{where}[{i}]", out, loss_best, key)
    else:
        same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
        floaty = isinstance(key, str) and (FLOAT_MATH_KEY.match(key) or (key == "best_metric" and loss_best))
        if not same and floaty and type(a) is type(b) is float and _float_class(a, b):
            FLOAT_CLASS_ONLY.append(where)
            same = True
        if not same or type(a) is not type(b):
            out.append(f"{where}: golden {a!r}, regenerated {b!r}")


def diff_run_dirs(golden, fresh, loss_best=False):
    """Every difference between two run directories (structure, JSON, then bytes)."""
    out = []

    def files(root):
        got = set()
        # Folders count through their files: git cannot hold an empty folder.
        for dp, dn, fn in os.walk(root):
            for f in fn:
                rel = os.path.relpath(os.path.join(dp, f), root)
                got.add(rel)
                parent = os.path.dirname(rel)
                while parent:
                    got.add(parent + "/")
                    parent = os.path.dirname(parent)
        return got

    fa, fb = files(golden), files(fresh)
    for p in sorted(fa - fb):
        out.append(f"{p}: only in golden")
    for p in sorted(fb - fa):
        out.append(f"{p}: only in regenerated")
    for p in sorted(fa & fb):
        if p.endswith("/"):
            continue
        pa, pb = os.path.join(golden, p), os.path.join(fresh, p)
        ja = jb = _NOT_JSON
        if p.endswith(".json"):
            ja, jb = _json_or_not(pa), _json_or_not(pb)
        if ja is not _NOT_JSON and jb is not _NOT_JSON:
            _diff_json(ja, jb, p, out, loss_best)
        elif p.endswith(".json"):
            # Not JSON on a side: a file the scenario's damage cut (an emptied trainer_state.json)
            # or a broken write. Such files compare as bytes, exactly.
            with open(pa, "rb") as x, open(pb, "rb") as y:
                if x.read() != y.read():
                    out.append(f"{p}: not JSON on {'both sides' if ja is jb else 'one side'}, bytes differ")
        else:
            with open(pa, "rb") as x, open(pb, "rb") as y:
                if x.read() != y.read():
                    why = _tensor_file_difference(pa, pb)
                    if why is None:
                        FLOAT_CLASS_ONLY.append(p)
                    else:
                        out.append(f"{p}: bytes differ ({why})")
    return out


# Tensor files whose bytes differ but whose loaded values agree within the float class (and
# float-math JSON values within it): the same
# HF and torch on another CPU round the last bit of a weight differently (seen: torch 2.1-2.4 on
# AMD EPYC vs the machine that wrote the goldens). Reported in the summary, not failed.
FLOAT_CLASS_ONLY = []
TENSOR_FILE = re.compile(r"\.(bin|pt|pth|safetensors)$")


def _tensor_file_difference(pa, pb):
    """None when two torch/safetensors files load (as this version of HF loads them) to the same
    structure, keys, dtypes, shapes, exact integers and arrays, and floats within the float class
    (conformance/README.md, "Check mode"); otherwise the first difference."""
    if not TENSOR_FILE.search(pa):
        return "not a tensor file"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import load_check
    try:
        a, b = load_check.load(pa), load_check.load(pb)
    except Exception as e:  # an unreadable file is a difference, never a pass
        return f"does not load: {type(e).__name__}: {e}"
    diffs = []
    load_check.same(a, b, "", diffs)
    return diffs[0] if diffs else None


# ---------------------------------------------------------------- main

def rerun_racy(sc, races, world, hf_version, golden, diffs, loss_best):
    """--check of a scenario a race of real HF applies to (races.json), whose first run differed
    from the golden (or hung): run it again, alone, until real HF gives the golden or the races'
    check_tries runs are spent. Only the golden is accepted, never another outcome of the race.
    Returns the last run's differences (none: equal), and prints every run's outcome, so that the
    log shows how often each outcome came."""
    tries = max(r["check_tries"] for r in races)
    names = ", ".join(r["name"] for r in races)

    def outcome(ds):
        # result.json's error is {"type": "hung", ...} (phase_result); the diff shows its repr.
        return "hung" if any("'type': 'hung'" in d for d in ds) else f"{len(ds)} difference(s): {ds[0]}"

    seen = [outcome(diffs)]
    for k in range(2, tries + 1):
        target = tempfile.mkdtemp(prefix=f"ckptspec-race-{hf_version}-")
        try:
            run_distributed([sc], world, hf_version, target, lambda s, e: None, racy=frozenset([sc["name"]]))
            diffs = diff_run_dirs(golden, os.path.join(target, sc["name"]), loss_best=loss_best)
        finally:
            shutil.rmtree(target, ignore_errors=True)
        if not diffs:
            print(f"{sc['name']}: equal to the golden on run {k} of {tries} (race in real HF {hf_version}: {names}, "
                  f"conformance/races.json); the runs before: " + "; ".join(seen), flush=True)
            return []
        seen.append(outcome(diffs))
    print(f"{sc['name']}: no run of {tries} gave the golden (race in real HF {hf_version}: {names}); "
          "the runs: " + "; ".join(seen), flush=True)
    return diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", required=True, help="profile version; must equal the installed transformers")
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and diff with the golden")
    ap.add_argument("--only", nargs="*", help="scenario names to run (default all)")
    ap.add_argument("--scenarios", default=SCENARIOS, help="scenario folder (default conformance/scenarios)")
    ap.add_argument("--out", help="output folder (default golden/hf-VERSION)")
    ap.add_argument("--meta-only", action="store_true",
                    help="write (or check) only the profile files (ENVIRONMENT, TRAINING_ARGS.*, TOKENIZER.json, PEFT.json)")
    a = ap.parse_args(argv)

    try:
        scs = find_scenarios(a.scenarios)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.only:
        missing = set(a.only) - {s["name"] for s in scs}
        if missing:
            print(f"error: no scenario named {sorted(missing)}", file=sys.stderr)
            return 2
        scs = [s for s in scs if s["name"] in a.only]
    if a.meta_only:
        scs = []

    warnings.filterwarnings("ignore")
    world = hf_world()
    installed = world["transformers"].__version__
    if installed != a.hf:
        print(f"error: --hf {a.hf} but this python has transformers {installed}; use that profile's venv",
              file=sys.stderr)
        return 2
    golden_root = a.out or os.path.join(ROOT, "golden", f"hf-{a.hf}")
    target = tempfile.mkdtemp(prefix=f"ckptspec-check-{a.hf}-") if a.check else golden_root
    os.makedirs(target, exist_ok=True)

    def report(sc, err):
        print(f"{sc['name']}: {'ok' if err is None else err['type']}", flush=True)

    dist_scs = [sc for sc in scs if is_distributed(sc)]
    # A scenario that trains with bf16/fp16 leaves CPU autocast state in the process (4.31-4.51
    # train with bf16 on CPU): every later scenario of the same process computed the linear and
    # lora kinds' numbers differently (a full check found 33 linear/lora scenarios of 4.31.0
    # differing after args-bf16). Those scenarios run last, so no other one runs after them; a
    # process of their own would give the same files (their goldens were generated so). The
    # environment variable such a scenario sets (ACCELERATE_MIXED_PRECISION, BASE_ENV) is reset
    # before every scenario and never reaches a launch.
    scs = sorted(scs, key=sets_mixed_precision)
    for sc in scs:
        if sc in dist_scs:
            continue
        run_dir = os.path.join(target, sc["name"])
        if os.path.exists(run_dir):
            shutil.rmtree(run_dir)
        report(sc, run_scenario(sc, world, a.hf, run_dir))
    racy = {sc["name"]: races_of(sc, a.hf) for sc in dist_scs}
    racy = {name: races for name, races in racy.items() if races}
    for name, races in sorted(racy.items()):
        # Generating, the race's outcome is whatever comes: the Rust trainer's conformance test
        # then tells a golden without the declared one (every other release's) at once.
        if not a.check:
            print(f"note: {name}: real HF {a.hf} races here ({', '.join(r['name'] for r in races)}, "
                  f"conformance/races.json); the golden must hold the first outcome listed there", file=sys.stderr)
    if dist_scs:
        try:
            run_distributed(dist_scs, world, a.hf, target, report, racy=frozenset(racy) if a.check else frozenset())
        except LaunchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    env = environment_text(world)
    with open(os.path.join(target, "ENVIRONMENT"), "w") as f:
        f.write(env)
    fields = training_args_fields(world)
    with open(os.path.join(target, "TRAINING_ARGS.json"), "w") as f:
        f.write(fields)
    template = training_args_template(world)
    with open(os.path.join(target, "TRAINING_ARGS.pkl"), "wb") as f:
        f.write(template)
    tok = tokenizer_template(world)
    with open(os.path.join(target, "TOKENIZER.json"), "w") as f:
        f.write(tok)
    peft_json = peft_template(world)
    with open(os.path.join(target, "PEFT.json"), "w") as f:
        f.write(peft_json)

    if not a.check:
        if not a.only and not a.meta_only:  # drop golden folders whose scenario is gone
            keep = {s["name"] for s in scs} | {"ENVIRONMENT", "TRAINING_ARGS.json", "TRAINING_ARGS.pkl", "TOKENIZER.json",
                                               "PEFT.json"}
            for entry in os.listdir(golden_root):
                if entry not in keep:
                    shutil.rmtree(os.path.join(golden_root, entry))
        print(f"wrote {len(scs)} run directories to {golden_root}")
        return 0

    bad = 0
    env_golden = os.path.join(golden_root, "ENVIRONMENT")
    if not os.path.exists(env_golden) or open(env_golden).read() != env:
        print("ENVIRONMENT differs from the golden one:\n" + env)
        bad += 1
    fields_golden = os.path.join(golden_root, "TRAINING_ARGS.json")
    if not os.path.exists(fields_golden) or open(fields_golden).read() != fields:
        print("TRAINING_ARGS.json differs from the golden one")
        bad += 1
    tmpl_golden = os.path.join(golden_root, "TRAINING_ARGS.pkl")
    if not os.path.exists(tmpl_golden) or open(tmpl_golden, "rb").read() != template:
        print("TRAINING_ARGS.pkl differs from the golden one")
        bad += 1
    tok_golden = os.path.join(golden_root, "TOKENIZER.json")
    if not os.path.exists(tok_golden) or open(tok_golden).read() != tok:
        print("TOKENIZER.json differs from the golden one")
        bad += 1
    peft_golden = os.path.join(golden_root, "PEFT.json")
    if not os.path.exists(peft_golden) or open(peft_golden).read() != peft_json:
        print("PEFT.json differs from the golden one")
        bad += 1
    for sc in scs:
        g = os.path.join(golden_root, sc["name"])
        if not os.path.isdir(g):
            print(f"{sc['name']}: no golden folder (run without --check to create it)")
            bad += 1
            continue
        metric = sc.get("args", {}).get("metric_for_best_model") or "loss"
        diffs = diff_run_dirs(g, os.path.join(target, sc["name"]), loss_best=str(metric).endswith("loss"))
        if diffs and sc["name"] in racy:
            diffs = rerun_racy(sc, racy[sc["name"]], world, a.hf, g, diffs, loss_best=str(metric).endswith("loss"))
        if diffs:
            bad += 1
            print(f"{sc['name']}: {len(diffs)} difference(s)")
            for d in diffs:
                print(f"    {d}")
    shutil.rmtree(target)
    if FLOAT_CLASS_ONLY:
        print(f"{len(FLOAT_CLASS_ONLY)} tensor file(s) or float-math JSON value(s) differ from the golden "
              f"within the float class (CPU arithmetic, e.g. {FLOAT_CLASS_ONLY[0]})")
    print(f"check hf-{a.hf}: {len(scs) - bad} clean, {bad} differing" if bad else
          f"check hf-{a.hf}: all {len(scs)} scenarios clean")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":  # a torchrun process (run_distributed)
        worker_main(sys.argv[2])
    # Python's string hashing is randomised per process, and HF shows set orders in messages (4.31's
    # "The batch received was empty ... keys expected by the model: args,kwargs,label,label_ids"
    # lists a set()): one fixed seed, so that reruns are byte-identical. A runner that imports this
    # file (tests/common) sets PYTHONHASHSEED=0 itself.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    sys.exit(main())
