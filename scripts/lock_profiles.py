#!/usr/bin/env python3
"""Writes conformance/requirements/hf-<version>.txt for every profile: the pinned environment the
golden folders of that profile come from. Run once when a profile is added (needs PyPI):

    .tools/bin/python scripts/lock_profiles.py [VERSION ...]     # default: every profile below

How a profile's environment is chosen (conformance/README.md, "Profiles and torch lines"):
- transformers: the profile's version (each minor release at its latest patch);
- torch: the profile's torch line (TORCH_LINES): the torch minor that was current when the
  profile was released, at that minor's last patch, so that several profiles share one torch
  installation (uv hard-links it from its cache into each venv);
- accelerate: the newest release uploaded on or before the transformers release;
- peft: likewise the newest release uploaded on or before the transformers release (issue 17's
  `lora` model kind; compatibility was checked by installing it and building a LoRA model with
  `get_peft_model` in the oldest and newest profiles and others of their torch lines);
- everything else (numpy, tokenizers, huggingface_hub, safetensors, ...): resolved by uv as of
  the later of the transformers release and the torch line's release (`--exclude-newer`), so
  the stack is one that existed together.
The two profiles that existed before this script (4.31.0 and 5.24.0) keep their hand-pinned
files: their golden folders were generated with them. Their peft lines were added by hand by the
same rule (4.31.0: peft 0.4.0; 5.24.0: peft 0.21.2); `--peft-only` prints the peft of every
profile without resolving anything.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from datetime import datetime, timedelta

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQ = os.path.join(ROOT, "conformance", "requirements")
UV = os.path.join(ROOT, ".tools", "bin", "uv")

# (first profile of the line, torch version). A profile uses the last line starting at or before it.
TORCH_LINES = [
    ("4.31.0", "2.1.2"),
    ("4.38.2", "2.2.2"),
    ("4.40.2", "2.3.1"),
    ("4.43.4", "2.4.1"),
    ("4.46.3", "2.5.1"),
    ("4.48.3", "2.6.0"),
    ("4.52.4", "2.7.1"),
    ("4.55.4", "2.8.0"),
    ("4.57.6", "2.9.1"),
    ("5.0.0", "2.10.0"),
    ("5.4.0", "2.11.0"),
    ("5.9.0", "2.12.1"),
    # 5.17+ were released with torch 2.14/2.15 current; the newest line stays 2.13.0, the torch
    # tch 0.26 binds (the test venv is also the newest profile's venv).
    ("5.13.1", "2.13.0"),
]

PROFILES = ("4.31.0 4.32.1 4.33.3 4.34.1 4.35.2 4.36.2 4.37.2 4.38.2 4.39.3 4.40.2 4.41.2 4.42.4 "
            "4.43.4 4.44.2 4.45.2 4.46.3 4.47.1 4.48.3 4.49.0 4.50.3 4.51.3 4.52.4 4.53.3 4.54.1 "
            "4.55.4 4.56.2 4.57.6 5.0.0 5.1.0 5.2.0 5.3.0 5.4.0 5.5.4 5.6.2 5.7.0 5.8.1 5.9.0 "
            "5.10.4 5.11.0 5.12.1 5.13.1 5.14.1 5.15.1 5.16.1 5.17.0 5.18.0 5.19.0 5.20.2 5.21.1 "
            "5.22.2 5.23.0 5.24.0").split()
HAND_PINNED = {"4.31.0", "5.24.0"}


def key(v):
    return tuple(int(x) for x in v.split("."))


def torch_line(version):
    return [t for first, t in TORCH_LINES if key(first) <= key(version)][-1]


def upload_dates(package):
    with urllib.request.urlopen(f"https://pypi.org/pypi/{package}/json", timeout=60) as r:
        rel = json.load(r)["releases"]
    return {v: min(f["upload_time"] for f in fs) for v, fs in rel.items() if fs}


def newest_before(dates, released):
    """The newest final release (X.Y.Z, no pre-release) uploaded on or before `released`."""
    return max((a for a, d in dates.items() if re.fullmatch(r"\d+\.\d+\.\d+", a)
                and datetime.fromisoformat(d) <= released), key=key)


def main(argv):
    peft_only = "--peft-only" in argv
    argv = [a for a in argv if a != "--peft-only"]
    tf, acc, tor = upload_dates("transformers"), upload_dates("accelerate"), upload_dates("torch")
    pft = upload_dates("peft")
    if peft_only:
        for v in argv or PROFILES:
            print(f"{v}\tpeft=={newest_before(pft, datetime.fromisoformat(tf[v]))}")
        return 0
    wanted = argv or [p for p in PROFILES if p not in HAND_PINNED]
    for v in wanted:
        t = torch_line(v)
        released = datetime.fromisoformat(tf[v])
        cutoff = max(released, datetime.fromisoformat(tor[t])) + timedelta(days=1)
        accel = newest_before(acc, released)
        peft = newest_before(pft, released)
        with tempfile.NamedTemporaryFile("w", suffix=".in", delete=False) as f:
            f.write(f"transformers=={v}\ntorch=={t}\naccelerate=={accel}\npeft=={peft}\nsafetensors\nnumpy\n")
            if peft.startswith("0.11."):
                # peft 0.11 imports torch.utils.cpp_extension (BOFT) at import time, which imports
                # setuptools; torch before 2.4 does not declare it, and a uv venv (unlike one made
                # by `python -m venv` on Python < 3.12) has none: pinned as resolved.
                f.write("setuptools\n")
            src = f.name
        out = subprocess.run(
            [UV, "pip", "compile", "--quiet", "--no-header", "--no-annotate", "-p", sys.executable,
             "--exclude-newer", cutoff.strftime("%Y-%m-%d"), src],
            capture_output=True, text=True)
        os.unlink(src)
        if out.returncode != 0:
            print(f"{v}: uv pip compile failed:\n{out.stderr}", file=sys.stderr)
            return 1
        path = os.path.join(REQ, f"hf-{v}.txt")
        with open(path, "w") as f:
            f.write(f"# Profile {v} (released {released:%Y-%m-%d}); torch line {t}; written by "
                    f"scripts/lock_profiles.py (resolved as of {cutoff:%Y-%m-%d}).\n")
            f.write(out.stdout)
        print(f"{v}: torch {t}, accelerate {accel}, peft {peft}, as of {cutoff:%Y-%m-%d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
