//! One way to spread independent work over the cores: the conformance matrix, `plan --hf all`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `(0..n).map(f)` on `jobs` threads (at least one), results in index order.
pub fn map<T: Send>(n: usize, jobs: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                let r = f(k);
                slots.lock().expect("no poisoned slot")[k] = Some(r);
            });
        }
    });
    slots.into_inner().expect("no poisoned slot").into_iter().map(|r| r.expect("every index mapped")).collect()
}

/// The machine's cores.
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
