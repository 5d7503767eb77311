//! Python's and numpy's float arithmetic where the Trainer's logged numbers go through it:
//! `round(x, n)` and `np.mean` of a float32 array (pairwise summation).

/// Python's `round(x, n)` for floats.
pub fn py_round(x: f64, n: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.n$}").parse().unwrap_or(x)
}

/// `np.mean` of a float32 array: pairwise summation in float32 (blocks of 8, unrolled by 8
/// below 128 elements), then division.
pub fn numpy_mean_f32(xs: &[f32]) -> f32 {
    fn pairwise(a: &[f32]) -> f32 {
        let n = a.len();
        if n < 8 {
            let mut s = 0.0f32;
            for &x in a {
                s += x;
            }
            s
        } else if n <= 128 {
            let mut r = [0f32; 8];
            r.copy_from_slice(&a[..8]);
            let mut i = 8;
            while i + 8 <= n {
                for j in 0..8 {
                    r[j] += a[i + j];
                }
                i += 8;
            }
            let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            while i < n {
                res += a[i];
                i += 1;
            }
            res
        } else {
            let mut n2 = n / 2;
            n2 -= n2 % 8;
            pairwise(&a[..n2]) + pairwise(&a[n2..])
        }
    }
    pairwise(xs) / xs.len() as f32
}
