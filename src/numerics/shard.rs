//! How accelerate splits one batch sampler between the processes of a launch, and how it puts
//! the evaluation results back together.
//!
//! `prepare_data_loader` wraps the DataLoader's batch sampler in `BatchSamplerShard`
//! (`split_batches=False`, `even_batches=True`, the Trainer's settings in every profile): the
//! batches keep the per-device size, process `p` takes batches `p, p + W, p + 2W, ...`, and an
//! epoch whose batch count is no multiple of `W` (or whose last batch is short) is completed from
//! the epoch's first rows, so that every process gets as many full batches as the others
//! (`_iter_with_no_split`, the same in accelerate 0.21 and 1.15). `gather_for_metrics` then
//! drops what the completion added: at the end of the loader it keeps the first
//! `len(dataset) % (batch_size * W)` rows of the last gathered batch.

/// Process `rank`'s batches of one epoch: `_iter_with_no_split` over the global `batches` (each
/// of `batch_size` rows but perhaps the last; `drop_last` as the DataLoader's).
pub fn shard_batches(batches: &[Vec<usize>], batch_size: usize, world: usize, rank: usize, drop_last: bool) -> Vec<Vec<usize>> {
    if world == 1 {
        return batches.to_vec();
    }
    let mut out = vec![];
    let mut initial: Vec<usize> = vec![];
    let mut to_yield: Option<Vec<usize>> = None;
    let mut idx = 0usize;
    let mut batch: Vec<usize> = vec![];
    for (i, b) in batches.iter().enumerate() {
        idx = i;
        batch = b.clone();
        if !drop_last && i < world {
            initial.extend_from_slice(b);
        }
        if i % world == rank {
            to_yield = Some(b.clone());
        }
        if i % world == world - 1 && b.len() == batch_size {
            if let Some(y) = to_yield.take() {
                out.push(y);
            }
        }
    }
    if !drop_last && !initial.is_empty() {
        if let Some(y) = to_yield.take().filter(|y| y.len() == batch_size) {
            out.push(y);
        }
        while initial.len() < world * batch_size {
            initial.extend_from_slice(&initial.clone());
        }
        if batch.len() == batch_size {
            batch.clear();
            idx += 1;
        }
        let mut cycle = 0usize;
        while idx % world != 0 || !batch.is_empty() {
            let end = cycle + batch_size - batch.len();
            batch.extend_from_slice(&initial[cycle..end]);
            if idx % world == rank {
                out.push(batch.clone());
            }
            cycle = end;
            batch.clear();
            idx += 1;
        }
    }
    out
}

/// `len(BatchSamplerShard)` (with `even_batches`): the batches each process gets per epoch.
pub fn sharded_len(global_batches: usize, world: usize, drop_last: bool) -> usize {
    if world == 1 || global_batches % world == 0 {
        global_batches / world
    } else if drop_last {
        global_batches / world
    } else {
        global_batches / world + 1
    }
}

/// Every process's batches, step by step: `steps[s][p]` is process `p`'s batch at its step `s`.
pub fn steps_of(batches: &[Vec<usize>], batch_size: usize, world: usize, drop_last: bool) -> Vec<Vec<Vec<usize>>> {
    let per: Vec<Vec<Vec<usize>>> = (0..world).map(|r| shard_batches(batches, batch_size, world, r, drop_last)).collect();
    let n = per.iter().map(|p| p.len()).min().unwrap_or(0);
    (0..n).map(|s| per.iter().map(|p| p[s].clone()).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batches(n: usize, bs: usize) -> Vec<Vec<usize>> {
        (0..n).collect::<Vec<_>>().chunks(bs).map(|c| c.to_vec()).collect()
    }

    #[test]
    fn even_split() {
        let b = batches(32, 8);
        assert_eq!(shard_batches(&b, 8, 2, 0, false), vec![b[0].clone(), b[2].clone()]);
        assert_eq!(shard_batches(&b, 8, 2, 1, false), vec![b[1].clone(), b[3].clone()]);
        assert_eq!(sharded_len(4, 2, false), 2);
    }

    #[test]
    fn odd_batch_count_and_short_last_batch_are_completed_from_the_start() {
        // 52 rows in batches of 8: 7 batches, the last of 4 rows.
        let b = batches(52, 8);
        let r0 = shard_batches(&b, 8, 2, 0, false);
        let r1 = shard_batches(&b, 8, 2, 1, false);
        assert_eq!(r0.len(), 4);
        assert_eq!(r1.len(), 4);
        assert_eq!(sharded_len(7, 2, false), 4);
        assert_eq!(r0[3], vec![48, 49, 50, 51, 0, 1, 2, 3]);
        assert_eq!(r1[3], vec![4, 5, 6, 7, 8, 9, 10, 11]);
        // drop_last: the batch sampler already dropped the short batch; the odd one goes.
        let d = batches(56, 8);
        assert_eq!(shard_batches(&d, 8, 2, 0, true), vec![d[0].clone(), d[2].clone(), d[4].clone()]);
        assert_eq!(sharded_len(7, 2, true), 3);
    }

    #[test]
    fn small_sets_cycle() {
        // 13 eval rows, batches of 8, 2 processes: one short batch; process 0 gets 0..8, 1 gets
        // 8..13 completed with 0..3.
        let b = batches(13, 8);
        assert_eq!(shard_batches(&b, 8, 2, 0, false), vec![(0..8).collect::<Vec<_>>()]);
        assert_eq!(shard_batches(&b, 8, 2, 1, false), vec![vec![8, 9, 10, 11, 12, 0, 1, 2]]);
        // 3 rows: fewer than one batch per process; the rows cycle on into process 1's batch.
        let s = batches(3, 8);
        assert_eq!(shard_batches(&s, 8, 2, 0, false), vec![vec![0, 1, 2, 0, 1, 2, 0, 1]]);
        assert_eq!(shard_batches(&s, 8, 2, 1, false), vec![vec![2, 0, 1, 2, 0, 1, 2, 0]]);
    }
}
