#!/usr/bin/env python3
"""Loads every file of run directories written by an implementation with the real libraries of
an HF profile's venv, the way HF itself loads them, and compares the loaded objects with the
golden run directories loaded the same way. A folder with an adapter (adapter_config.json) also
loads with the real peft, `PeftModel.from_pretrained` on the world's base model.

    python conformance/load_check.py OURS_ROOT GOLDEN_ROOT [--skip NAME/PATH ...] [NAME ...]

OURS_ROOT/<name>/ and GOLDEN_ROOT/<name>/ are run directories. `--skip NAME/PATH` leaves out one
file, named by its path in the run directory (a file a scenario's resume.damage cut on purpose is
the scenario's, not the implementation's: it is not a checkpoint file to load). Exit status 0 when every file
loads and equals its golden counterpart (floats within the float class of conformance/README.md);
1 otherwise, with one line per problem. It never writes anything.
"""
import json
import re
import math
import os
import sys

import numpy as np
import torch

RTOL, ATOL = 1e-5, 1e-7
NEW_TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 4)


def safe_globals_ctx():
    """HF 4.47+ loads rng_state.pth inside its own safe_globals() (numpy's reconstruct allowed)."""
    import contextlib
    import importlib
    # transformers.trainer (4.47-4.57) or transformers.trainer_pt_utils (5.x); none before 4.47.
    for module in ("transformers.trainer_pt_utils", "transformers.trainer"):
        fn = getattr(importlib.import_module(module), "safe_globals", None)
        if fn is not None:
            return fn()
    return contextlib.nullcontext()


def load(path):
    """As the profile's HF loads it: weights_only=True for tensors/state (torch >= 2.4 era),
    the bare torch.load of older versions otherwise; training_args.bin is a pickled object."""
    name = os.path.basename(path)
    if name.endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path)
    if name.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    if name.endswith(".md"):  # peft's model card: text, compared exactly
        with open(path, encoding="utf-8") as f:
            return f.read()
    if name == "training_args.bin":
        return torch.load(path, weights_only=False) if NEW_TORCH else torch.load(path)
    if not NEW_TORCH:
        # torch 2.1.2: HF 4.31 calls a bare torch.load; the tensor files must also load safely.
        torch.load(path, weights_only=not is_rng_file(name))
        return torch.load(path)
    if is_rng_file(name):
        # HF's _load_rng_state: a bare torch.load (torch's own weights_only default: False before
        # torch 2.6, True from 2.6), inside HF's safe_globals() where the version has it (4.47+).
        with safe_globals_ctx():
            return torch.load(path)
    return torch.load(path, weights_only=True)


def is_rng_file(name):
    """rng_state.pth, or rng_state_{process_index}.pth of a launch: HF loads both alike."""
    return re.fullmatch(r"rng_state(_\d+)?\.pth", name) is not None


def same(a, b, where, out):
    if type(a) is not type(b) and not (isinstance(a, dict) and isinstance(b, dict)):
        out.append(f"{where}: type {type(a).__name__} vs {type(b).__name__}")
        return
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            out.append(f"{where}: keys {list(a.keys())} vs {list(b.keys())}")
            return
        for k in a:
            if k.endswith("_runtime") or k.endswith("_per_second") if isinstance(k, str) else False:
                continue
            same(a[k], b[k], f"{where}[{k!r}]", out)
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]", out)
    elif isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            out.append(f"{where}: tensor {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}")
        elif a.dtype.is_floating_point:
            if not torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                out.append(f"{where}: tensor values {a} vs {b}")
        elif not torch.equal(a, b):
            out.append(f"{where}: tensor values differ")
    elif isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
            out.append(f"{where}: ndarray differs")
    elif isinstance(a, float):
        if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= RTOL * max(abs(a), abs(b)) + ATOL):
            out.append(f"{where}: {a!r} vs {b!r}")
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        da, db = vars(a), vars(b)
        for k in sorted(set(da) | set(db)):
            if k in ("distributed_state",):  # an accelerate PartialState: compared by its repr
                if repr(da.get(k)) != repr(db.get(k)):
                    out.append(f"{where}.{k}: {da.get(k)!r} vs {db.get(k)!r}")
                continue
            if k not in da or k not in db:
                out.append(f"{where}.{k}: only in one")
            else:
                same(da[k], db[k], f"{where}.{k}", out)
    elif a != b:
        out.append(f"{where}: {a!r} vs {b!r}")


_WORLD = []


def peft_load(folder):
    """`PeftModel.from_pretrained(<the world's linear base model>, folder)`, as a user loads an
    adapter checkpoint (contract v3's `lora` kind): the adapter's parameters, by name."""
    from peft import PeftModel
    if not _WORLD:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import generate
        _WORLD.append((generate, generate.hf_world()))
    generate, world = _WORLD[0]
    model = PeftModel.from_pretrained(generate.make_model({"kind": "linear"}, world), folder)
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def main():
    ours_root, golden_root, *rest = sys.argv[1:]
    names, skip = [], set()
    while rest:
        arg = rest.pop(0)
        if arg == "--skip":
            skip.add(os.path.normpath(rest.pop(0)))
        else:
            names.append(arg)
    names = names or sorted(os.listdir(ours_root))
    problems, files = [], 0
    for name in names:
        g_out = os.path.join(golden_root, name, "output")
        if not os.path.isdir(g_out):
            continue
        for dp, _, fns in os.walk(g_out):
            for fn in fns:
                if fn.endswith(".json"):
                    continue  # JSON is compared by the Rust diff; this checks what torch reads
                g = os.path.join(dp, fn)
                rel = os.path.relpath(g, os.path.join(golden_root, name))  # output/... in the run dir
                if os.path.normpath(os.path.join(name, rel)) in skip:
                    continue
                o = os.path.join(ours_root, name, rel)
                files += 1
                try:
                    lo = load(o)
                except Exception as e:  # noqa: BLE001 - any failure to load is the finding
                    problems.append(f"{name}/{rel}: does not load: {type(e).__name__}: {e}")
                    continue
                out = []
                same(load(g), lo, f"{name}/{rel}", out)
                problems.extend(out)
            # An adapter folder (the `lora` kind): it loads into the base model with the real peft.
            rel_dir = os.path.relpath(dp, os.path.join(golden_root, name))
            # (Both files present: a scenario's damage may remove one, and the folder is then its.)
            adapter = "adapter_config.json" in fns and any(f.startswith("adapter_model.") for f in fns)
            if adapter and not any(os.path.normpath(os.path.join(name, rel_dir, f)) in skip for f in fns):
                files += 1
                try:
                    lo = peft_load(os.path.join(ours_root, name, rel_dir))
                except Exception as e:  # noqa: BLE001 - any failure to load is the finding
                    problems.append(f"{name}/{rel_dir}: PeftModel.from_pretrained fails: {type(e).__name__}: {e}")
                    continue
                out = []
                same(peft_load(dp), lo, f"{name}/{rel_dir} (peft)", out)
                problems.extend(out)
    for p in problems:
        print(p)
    print(f"load_check torch {torch.__version__}: {files} files, {len(problems)} problem(s)")
    return 1 if problems or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
