#!/usr/bin/env python3
"""Side by side, in one run, interleaved: the real HF Trainer's `_save_checkpoint` (transformers
5.24.0 in this venv), ckptspec's fast save (`examples/save_worker.rs`, a long-lived Rust
process driven over a pipe), and a raw write of the same tensor bytes (the bound).

Usage (see README "Save speed"; scripts/side_by_side.sh builds the worker and runs this):
    .venv/bin/python scripts/side_by_side.py [--sizes 1M,10M,100M] [--reps 7] [--no-durable]
        [--no-async] [--cases ckpt-durable,ckpt-atomic,...] [--dir DIR] [--worker PATH] [--json OUT.json]

For each size, the HF model is `layers` x nn.Linear(hidden, hidden) built from a config (no hub
download), trained 2 steps with optim="adamw_torch" so the AdamW state exists; the Rust worker
holds the same shapes (a fresh worker process per size, so its first save is a fresh process's).
One warm-up round of every case is discarded, then each round runs every case once, in a
rotated order. Before each timed call the target folder is deleted and os.sync() runs, outside
the timing. HF is timed here around `trainer._save_checkpoint(trainer.model, trial=None)`; the
Rust cases are timed inside the worker around the save call (the pipe round trip is reported
separately). Threads are pinned: torch.set_num_threads(1), tch::set_num_threads(1),
OMP/MKL/RAYON_NUM_THREADS=1; fastsave uses 2 writer threads of its own (printed).

Cases:
  hf             HF _save_checkpoint (page cache)
  ckptspec       fastsave (CRC32 on, 2 writer threads) (page cache)
  ckpt-nocrc     fastsave with CRC32 off (an option; torch.load accepts such files)
  raw            the same tensor bytes alone (2 files, no header, no CRC, 1 thread): the bound
  raw-2thr       the same, one thread per file
  hf+sync        HF _save_checkpoint then os.sync(), inside the timing (HF never fsyncs)
  ckpt-durable   fastsave durable mode (fsync of every file and of the folders)
  raw-fsync      raw, each file fsynced: the durable bound
  ckpt-atomic    atomic mode (src/save/atomic.rs): the durable save into the staging folder
                 (.ckptspec-staging-checkpoint-1), one rename to checkpoint-1, the output_dir fsynced
  ckpt-atomic-tree  the same in the executor's order: page-cache save into the staging folder, then
                 atomic::sync_tree (every file, then the folder), the rename, the output_dir fsync

--cases runs only the cases named (HF's model is then not built unless an hf case is named), e.g.
    scripts/side_by_side.sh --sizes 100M --reps 7 --cases ckpt-durable,ckpt-atomic,ckpt-atomic-tree
"""
import argparse, contextlib, io, json, os, shutil, statistics as st, subprocess, sys, time, warnings

for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(v, "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore")

import torch, torch.nn as nn  # noqa: E402
import transformers  # noqa: E402
from transformers import PretrainedConfig, PreTrainedModel, Trainer, TrainingArguments  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"1M": (512, 4), "10M": (1024, 10), "100M": (2048, 24)}
PAGE_CASES = ["hf", "ckptspec", "ckpt-nocrc", "raw", "raw-2thr"]
DURABLE_CASES = ["hf+sync", "ckpt-durable", "raw-fsync", "ckpt-atomic", "ckpt-atomic-tree"]
WORKER_CMD = {"ckptspec": "save", "ckpt-nocrc": "save_nocrc", "raw": "raw", "raw-2thr": "raw2",
              "ckpt-durable": "save_durable", "raw-fsync": "raw_durable", "ckpt-async": "async",
              "ckpt-atomic": "save_atomic", "ckpt-atomic-tree": "save_atomic_tree"}


class MLPConfig(PretrainedConfig):
    model_type = "perf_mlp"

    def __init__(self, hidden=256, layers=2, **kw):
        self.hidden, self.layers = hidden, layers
        super().__init__(**kw)


class MLP(PreTrainedModel):
    config_class = MLPConfig
    base_model_prefix = "mlp"

    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList([nn.Linear(config.hidden, config.hidden) for _ in range(config.layers)])
        self.post_init()

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, x=None, labels=None):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return {"loss": nn.functional.mse_loss(x, labels), "logits": x}


class DS(torch.utils.data.Dataset):
    def __init__(self, h):
        self.h = h

    def __len__(self):
        return 64

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(self.h, generator=g), "labels": torch.randn(self.h, generator=g)}


def hf_trainer(hidden, layers, out):
    torch.manual_seed(0)
    model = MLP(MLPConfig(hidden=hidden, layers=layers))
    args = TrainingArguments(output_dir=out, max_steps=2, per_device_train_batch_size=4, save_strategy="no",
                             report_to="none", use_cpu=True, logging_strategy="no", dataloader_num_workers=0,
                             optim="adamw_torch", learning_rate=1e-4, disable_tqdm=True)
    tr = Trainer(model=model, args=args, train_dataset=DS(hidden))
    with contextlib.redirect_stdout(io.StringIO()):
        tr.train()
    return tr


class Worker:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy())

    def __call__(self, line):
        t0 = time.perf_counter()
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = self.p.stdout.readline()
        rt = time.perf_counter() - t0
        if not reply:
            sys.exit(f"worker died on {line!r}")
        j = json.loads(reply)
        if "error" in j:
            sys.exit(f"worker: {line}: {j['error']}")
        j["roundtrip"] = rt
        return j

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=30)


def du(p):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(p) for f in fs)


def clean(p):
    shutil.rmtree(p, ignore_errors=True)
    os.sync()


def fmt_row(name, v, nbytes):
    m = st.median(v)
    return f"  {name:16s} {min(v):8.3f} {m:8.3f} {max(v):8.3f} {nbytes / m / 1e9:8.2f}   n={len(v)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1M,10M,100M")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-durable", action="store_true", help="skip the fsync cases")
    ap.add_argument("--no-async", action="store_true", help="skip the async case")
    ap.add_argument("--cases", default=None, help="comma list: run only these cases")
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "side-by-side"))
    ap.add_argument("--worker", default=os.path.join(ROOT, "target", "release", "examples", "save_worker"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cases = PAGE_CASES + ([] if a.no_durable else DURABLE_CASES) + ([] if a.no_async else ["ckpt-async"])
    if a.cases:
        cases = a.cases.split(",")
        unknown = [c for c in cases if c not in PAGE_CASES + DURABLE_CASES + ["ckpt-async"]]
        if unknown:
            sys.exit(f"unknown case(s) {unknown}; known: {PAGE_CASES + DURABLE_CASES + ['ckpt-async']}")
    with_hf = any(c.startswith("hf") for c in cases)
    os.makedirs(a.dir, exist_ok=True)
    print(f"torch {torch.__version__}  transformers {transformers.__version__}  python {sys.version.split()[0]}")
    print(f"threads: torch.get_num_threads()={torch.get_num_threads()}  "
          + "  ".join(f"{v}={os.environ.get(v)}" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"))
          + f"  cpus={os.cpu_count()}")
    print(f"load average at start: {os.getloadavg()}")
    print(f"dir: {a.dir}   reps: {a.reps} (+1 warm-up round)   worker: Rust process over a pipe, one per size")
    results = {}
    for label in a.sizes.split(","):
        hidden, layers = SIZES[label]
        hf_out = os.path.join(a.dir, f"hf-{label}")
        t0 = time.perf_counter()
        tr = hf_trainer(hidden, layers, hf_out) if with_hf else None
        w = Worker(a.worker)
        setup = w(f"setup {hidden} {layers}")
        nparam = setup["params"]
        if tr is not None:
            assert nparam == sum(p.numel() for p in tr.model.parameters()), (setup, tr.model)
            built = f"HF trained {tr.state.global_step} steps in {time.perf_counter() - t0:.1f}s"
        else:
            built = "no HF case: HF's model not built"
        print(f"\n== {label}: {nparam:,} params (hidden {hidden}, {layers} layers); {built}; Rust worker: tch threads "
              f"{setup['tch_threads']}, fastsave writer threads {setup['writer_threads']}")
        ck_hf = os.path.join(hf_out, f"checkpoint-{tr.state.global_step}") if tr is not None else None
        res, nbytes, hwm, rt, stall, first_hwm = {}, {}, [], [], [], None
        for r in range(a.reps + 1):
            order = cases[r % len(cases):] + cases[:r % len(cases)]
            for c in order:
                if c in ("hf", "hf+sync"):
                    clean(hf_out)
                    t = time.perf_counter()
                    tr._save_checkpoint(tr.model, trial=None)
                    if c == "hf+sync":
                        os.sync()
                    dt = time.perf_counter() - t
                    nbytes[c] = du(ck_hf)
                    clean(hf_out)
                else:
                    d = os.path.join(a.dir, f"rs-{label}-{c}")
                    clean(d)
                    j = w(f"{WORKER_CMD[c]} {d}")
                    dt = j["s"]
                    nbytes[c] = du(d)
                    if c.startswith("ckpt-atomic"):
                        # Published as one folder, no staging left.
                        assert sorted(os.listdir(d)) == ["checkpoint-1"], os.listdir(d)
                    clean(d)
                    if c == "ckptspec":
                        if first_hwm is None:
                            first_hwm = j["hwm_delta"]
                        hwm.append(j["hwm_delta"])
                        rt.append(j["roundtrip"] - j["s"])
                    if c == "ckpt-async" and r > 0:
                        stall.append(j["stall"])
                if r > 0:
                    res.setdefault(c, []).append(dt)
        w.close()
        del tr
        print(f"  {'case':16s} {'min s':>8s} {'median s':>8s} {'max s':>8s} {'GB/s med':>8s}   (bytes: "
              + ", ".join(f"{c} {nbytes[c]:,}" for c in ("hf", "ckptspec", "raw", "ckpt-durable") if c in nbytes) + ")")
        for c in cases:
            print(fmt_row(c, res[c], nbytes[c]))
        med = {c: st.median(v) for c, v in res.items()}
        mn = {c: min(v) for c, v in res.items()}
        have = lambda *cs: all(c in med for c in cs)  # noqa: E731
        if have("hf", "ckptspec"):
            print(f"  HF / ckptspec:            median {med['hf'] / med['ckptspec']:.2f}x   min {mn['hf'] / mn['ckptspec']:.2f}x   (target >= 2.0x at 100M)")
        if have("raw", "ckptspec"):
            print(f"  ckptspec vs raw (1 thr):  {med['raw'] / med['ckptspec'] * 100:.0f}% of raw throughput at the median, "
                  f"{mn['raw'] / mn['ckptspec'] * 100:.0f}% at the min   (target >= 80% at 100M)")
        if have("raw-2thr", "ckptspec"):
            print(f"  ckptspec vs raw (2 thr):  {med['raw-2thr'] / med['ckptspec'] * 100:.0f}% at the median")
        if have("ckpt-nocrc", "ckptspec"):
            print(f"  CRC32 off / on:           median {med['ckpt-nocrc'] / med['ckptspec']:.2f}")
        if have("ckpt-durable", "raw-fsync"):
            print(f"  durable / raw-fsync:      median {med['ckpt-durable'] / med['raw-fsync']:.2f}x   min "
                  f"{mn['ckpt-durable'] / mn['raw-fsync']:.2f}x   (target <= 1.2x)")
        if have("hf+sync", "ckpt-durable"):
            print(f"  HF+sync / durable:        median {med['hf+sync'] / med['ckpt-durable']:.2f}x")
        for c in ("ckpt-atomic", "ckpt-atomic-tree"):
            if have(c, "ckpt-durable"):
                print(f"  {c + ' / durable:':25s} median {med[c] / med['ckpt-durable']:.2f}x   min {mn[c] / mn['ckpt-durable']:.2f}x"
                      f"   (target <= 1.1x)")
        if stall:
            print(f"  async: stall min {min(stall):.3f} median {st.median(stall):.3f} s; total (stall + background write) "
                  f"median {med['ckpt-async']:.3f} s")
        if hwm:
            print(f"  peak memory of a ckptspec save (VmHWM - VmRSS before): first save in a fresh process "
                  f"{first_hwm / 2**20:.1f} MiB, max over all {max(hwm) / 2**20:.1f} MiB; tensors {setup['rss'] / 2**20:.0f} MiB RSS "
                  f"before saving (incl. the async snapshot buffers)")
            print(f"  pipe round trip beyond the worker's own timing: median {st.median(rt) * 1e3:.2f} ms")
        results[label] = {"params": nparam, "bytes": nbytes, "times": res, "hwm_delta": hwm, "first_hwm_delta": first_hwm,
                          "async_stall": stall}
    print(f"\nload average at end: {os.getloadavg()}")
    print("\nsummary (seconds, min / median of each case; then the ratios of medians):")
    for label, r in results.items():
        t = r["times"]
        m = {c: st.median(v) for c, v in t.items()}
        n = {c: min(v) for c, v in t.items()}
        print(f"  {label:5s} " + "  ".join(f"{c} {n[c]:.3f}/{m[c]:.3f}" for c in cases))
        ratios = [(x, y) for x, y in (("hf", "ckptspec"), ("ckpt-durable", "raw-fsync"), ("ckpt-atomic", "ckpt-durable"),
                                      ("ckpt-atomic-tree", "ckpt-durable")) if x in m and y in m]
        if ratios:
            print("        " + "  ".join(f"{x}/{y} {m[x] / m[y]:.2f}x" for x, y in ratios))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"load_end": os.getloadavg(), "results": results}, f, indent=1)
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
