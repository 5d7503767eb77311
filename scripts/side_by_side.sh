#!/usr/bin/env bash
# Save speed, side by side in one run: the real HF Trainer's _save_checkpoint (the .venv's
# transformers), ckptspec's fast save (examples/save_worker.rs, driven as a long-lived process)
# and a raw write of the same bytes. Builds the worker, then runs scripts/side_by_side.py with
# the arguments given (e.g. --sizes 100M --reps 9 --no-durable, or --cases
# ckpt-durable,ckpt-atomic for atomic mode's cost alone). See README "Save speed".
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --example save_worker
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 1.0) }'; then
  echo "warning: load average is $load (> 1): other work shares the 2 cores; numbers will be noisy" >&2
fi
exec .venv/bin/python scripts/side_by_side.py "$@"
