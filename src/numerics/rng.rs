//! MT19937 exactly as the three random number generators that `transformers.set_seed` seeds:
//!
//! * torch's CPU generator (`at::mt19937` inside `CPUGeneratorImpl`), including the 5056-byte
//!   blob that `torch.get_rng_state()` / `Generator.get_state()` return (torch 2.13.0 and 2.1.2
//!   have the same layout), `torch.randperm(n, generator=g)` for small `n`, and the int64 draw
//!   `torch.empty((), dtype=torch.int64).random_(generator=g)` that torch's `DataLoader`
//!   (`_BaseDataLoaderIter._base_seed`) and `RandomSampler` (seed of its private generator) make.
//! * CPython's `random.seed(int)` (`init_by_array`) and `random.getstate()`.
//! * numpy's legacy `np.random.seed(int)` (`init_genrand`) and `np.random.get_state()`.
//!
//! All three share one Mersenne Twister ([`Mt19937`]); they differ in how they seed it and in
//! the bookkeeping around the 624-word state.
//!
//! Verified against the real libraries by `tests/numerics.rs` (bit for bit, both venvs).

/// Number of 32-bit words of MT19937 state.
pub const MT_N: usize = 624;
const MT_M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// Size in bytes of torch's serialized CPU generator state (`CPUGeneratorImplState`).
pub const TORCH_STATE_BYTES: usize = 5056;

/// The bare Mersenne Twister: 624 words plus the index of the next word to temper
/// (`index == 624` means "regenerate before the next draw", CPython's and numpy's `pos`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Mt19937 {
    pub state: [u32; MT_N],
    pub index: usize,
}

impl Mt19937 {
    /// Knuth's `init_genrand(seed)`: what torch (`mt19937(seed & 0xffffffff)`) and numpy's legacy
    /// `seed(int)` (`mt19937_seed`) do. Leaves `index == 624`.
    pub fn from_seed(seed: u32) -> Self {
        let mut state = [0u32; MT_N];
        state[0] = seed;
        for j in 1..MT_N {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        Mt19937 { state, index: MT_N }
    }

    /// `init_by_array(key)`: what CPython's `random.seed(int)` does with the 32-bit words of
    /// `abs(seed)` (least significant first). Leaves `index == 624`.
    pub fn from_key(key: &[u32]) -> Self {
        let mut mt = Mt19937::from_seed(19_650_218);
        let st = &mut mt.state;
        let n = MT_N;
        let key_len = key.len().max(1);
        let (mut i, mut j) = (1usize, 0usize);
        let mut k = n.max(key_len);
        while k > 0 {
            let prev = st[i - 1];
            let kj = if key.is_empty() { 0 } else { key[j] };
            st[i] = (st[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(kj)
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= n {
                st[0] = st[n - 1];
                i = 1;
            }
            if j >= key_len {
                j = 0;
            }
            k -= 1;
        }
        k = n - 1;
        while k > 0 {
            let prev = st[i - 1];
            st[i] = (st[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= n {
                st[0] = st[n - 1];
                i = 1;
            }
            k -= 1;
        }
        st[0] = 0x8000_0000;
        mt
    }

    /// Regenerates all 624 words (the "twist"); sets `index = 0`.
    pub fn twist(&mut self) {
        twist_words(&mut self.state);
        self.index = 0;
    }

    /// The tempering of one state word.
    pub fn temper(mut y: u32) -> u32 {
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `genrand_uint32`: the next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= MT_N {
            self.twist();
        }
        let y = self.state[self.index];
        self.index += 1;
        Self::temper(y)
    }
}

/// The MT19937 state transition on a bare word array (in place, in the reference order).
pub fn twist_words(st: &mut [u32; MT_N]) {
    for kk in 0..MT_N {
        let y = (st[kk] & UPPER_MASK) | (st[(kk + 1) % MT_N] & LOWER_MASK);
        let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
        st[kk] = st[(kk + MT_M) % MT_N] ^ (y >> 1) ^ mag;
    }
}

// ---------------------------------------------------------------------------------------------
// torch
// ---------------------------------------------------------------------------------------------

/// torch's CPU generator (`CPUGeneratorImpl` around `at::mt19937`).
///
/// The engine keeps `left` and `next` instead of one index: after `manual_seed` they are
/// `left = 1, next = 0`; each draw does `if --left == 0 { twist; left = 624; next = 0 }` and
/// tempers `state[next++]`. The initial seed is kept as the full `u64` while only its low 32
/// bits seed the twister (`torch.initial_seed()` returns the full value).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TorchGenerator {
    seed: u64,
    left: u32,
    next: u32,
    state: [u32; MT_N],
}

impl TorchGenerator {
    /// `g = torch.Generator(); g.manual_seed(seed)` (also `torch.manual_seed(seed)` for the
    /// global one). A negative Python seed reaches torch as its two's complement: pass
    /// `seed as u64`.
    pub fn new(seed: u64) -> Self {
        TorchGenerator { seed, left: 1, next: 0, state: Mt19937::from_seed(seed as u32).state }
    }

    /// `g.manual_seed(seed)`.
    pub fn manual_seed(&mut self, seed: u64) {
        *self = TorchGenerator::new(seed);
    }

    /// `g.initial_seed()`.
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// `CPUGeneratorImpl::random()`: one 32-bit draw.
    pub fn random(&mut self) -> u32 {
        self.left -= 1;
        if self.left == 0 {
            twist_words(&mut self.state);
            self.left = MT_N as u32;
            self.next = 0;
        }
        let y = self.state[self.next as usize];
        self.next += 1;
        Mt19937::temper(y)
    }

    /// `CPUGeneratorImpl::random64()`: two 32-bit draws, the first one the high half.
    pub fn random64(&mut self) -> u64 {
        let hi = self.random() as u64;
        let lo = self.random() as u64;
        (hi << 32) | lo
    }

    /// `torch.empty((), dtype=torch.int64).random_(generator=g).item()`: `random64() % 2**63`.
    /// This is the draw torch's `DataLoader` makes for `_base_seed` each time an iterator is
    /// created, and the seed `RandomSampler` draws for its private generator when it has none.
    pub fn random_int64(&mut self) -> i64 {
        (self.random64() % (1u64 << 63)) as i64
    }

    /// `torch.randperm(n, generator=g)` on CPU (the "small n" path, n < 2**32 / 20, which is
    /// Fisher-Yates with `random() % (n - i)`; n - 1 draws).
    pub fn randperm(&mut self, n: usize) -> Vec<i64> {
        assert!(
            (n as u64) < (u32::MAX as u64) / 20,
            "randperm: only torch's small-n path (n < 2**32/20) is implemented"
        );
        let mut r: Vec<i64> = (0..n as i64).collect();
        if n > 1 {
            for i in 0..n - 1 {
                let z = (self.random() as u64 % (n - i) as u64) as usize;
                r.swap(i, z + i);
            }
        }
        r
    }

    /// `g.get_state()` / `torch.get_rng_state()` as bytes (a uint8 tensor of 5056 elements).
    ///
    /// Layout (little endian, `CPUGeneratorImplState`):
    /// `u64 the_initial_seed | i32 left | i32 seeded (=1) | u64 next | u64 state[624] |
    ///  f64 normal_x | f64 normal_y | f64 normal_rho | i32 normal_is_valid | 4 pad |
    ///  f32 next_float_normal_sample | u8 is_valid | 3 pad`.
    /// This generator never samples normals, so the tail is all zeros (as torch writes it
    /// after `manual_seed` and integer draws).
    pub fn get_state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(TORCH_STATE_BYTES);
        out.extend_from_slice(&self.seed.to_le_bytes());
        out.extend_from_slice(&(self.left as i32).to_le_bytes());
        out.extend_from_slice(&1i32.to_le_bytes());
        out.extend_from_slice(&(self.next as u64).to_le_bytes());
        for w in self.state.iter() {
            out.extend_from_slice(&(*w as u64).to_le_bytes());
        }
        out.resize(TORCH_STATE_BYTES, 0);
        out
    }

    /// Inverse of [`get_state`](Self::get_state) (`g.set_state(t)`); rejects blobs with a
    /// cached normal sample (not modelled) or a wrong size.
    pub fn set_state(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() != TORCH_STATE_BYTES {
            return Err(format!(
                "Expected either a THGeneratorState of size {} or a CPUGeneratorImplState of size {} but found the input RNG state size to be {}",
                5048, TORCH_STATE_BYTES, bytes.len()
            ));
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
        let i32_at = |o: usize| i32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        if bytes[5016..].iter().any(|b| *b != 0) {
            return Err("cached normal samples are not modelled".into());
        }
        let seed = u64_at(0);
        let left = i32_at(8);
        let next = u64_at(16);
        let mut state = [0u32; MT_N];
        for (k, w) in state.iter_mut().enumerate() {
            *w = u64_at(24 + 8 * k) as u32;
        }
        if !(1..=MT_N as i32).contains(&left) || next > MT_N as u64 {
            return Err(format!("invalid generator state: left {left}, next {next}"));
        }
        Ok(TorchGenerator { seed, left: left as u32, next: next as u32, state })
    }
}

// ---------------------------------------------------------------------------------------------
// CPython
// ---------------------------------------------------------------------------------------------

/// `random.getstate()` of CPython's `random` module: `(3, (mt[0], ..., mt[623], pos), None)`.
#[derive(Clone, PartialEq, Debug)]
pub struct PythonRandomState {
    /// Always 3 (`random.Random.VERSION`).
    pub version: i64,
    pub mt: [u32; MT_N],
    /// The MT index (624 right after seeding).
    pub pos: u32,
    /// `gauss_next` (None unless `random.gauss` was called).
    pub gauss_next: Option<f64>,
}

impl PythonRandomState {
    /// `random.seed(seed)` for an int seed: `init_by_array` of the 32-bit words of `abs(seed)`.
    pub fn seeded(seed: i64) -> Self {
        let mut a = seed.unsigned_abs();
        let mut key = Vec::new();
        while a != 0 {
            key.push(a as u32);
            a >>= 32;
        }
        if key.is_empty() {
            key.push(0);
        }
        let mt = Mt19937::from_key(&key);
        PythonRandomState { version: 3, mt: mt.state, pos: mt.index as u32, gauss_next: None }
    }

    /// The 625 ints of the state tuple's middle element, as Python ints.
    pub fn internal_state(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.mt.iter().map(|w| *w as u64).collect();
        v.push(self.pos as u64);
        v
    }
}

// ---------------------------------------------------------------------------------------------
// numpy
// ---------------------------------------------------------------------------------------------

/// `np.random.get_state()` (legacy tuple form):
/// `('MT19937', key: ndarray uint32[624], pos: int, has_gauss: int, cached_gaussian: float)`.
#[derive(Clone, PartialEq, Debug)]
pub struct NumpyRandomState {
    pub key: [u32; MT_N],
    pub pos: i64,
    pub has_gauss: i64,
    pub cached_gaussian: f64,
}

impl NumpyRandomState {
    /// The bit generator name, first element of the tuple.
    pub const NAME: &'static str = "MT19937";

    /// `np.random.seed(seed)` for an int seed (`mt19937_seed`, i.e. `init_genrand`).
    /// numpy rejects seeds outside `[0, 2**32 - 1]` with
    /// `ValueError("Seed must be between 0 and 2**32 - 1")`; that text is the `Err`.
    pub fn seeded(seed: i64) -> Result<Self, String> {
        if !(0..=u32::MAX as i64).contains(&seed) {
            return Err("Seed must be between 0 and 2**32 - 1".to_string());
        }
        let mt = Mt19937::from_seed(seed as u32);
        Ok(NumpyRandomState { key: mt.state, pos: MT_N as i64, has_gauss: 0, cached_gaussian: 0.0 })
    }
}

/// The three generators `transformers.set_seed(seed)` seeds (`random.seed`, `np.random.seed`,
/// `torch.manual_seed`; CUDA is absent on CPU runs). `rng_state.pth` on CPU is
/// `{"python": python, "numpy": numpy, "cpu": torch.get_state()}` in that key order.
#[derive(Clone, Debug)]
pub struct GlobalRngs {
    pub python: PythonRandomState,
    pub numpy: NumpyRandomState,
    pub torch: TorchGenerator,
}

impl GlobalRngs {
    /// `transformers.set_seed(seed)`. Errors with numpy's message when numpy would reject it.
    pub fn set_seed(seed: i64) -> Result<Self, String> {
        Ok(GlobalRngs {
            python: PythonRandomState::seeded(seed),
            numpy: NumpyRandomState::seeded(seed)?,
            torch: TorchGenerator::new(seed as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_genrand_matches_known_words() {
        // torch.Generator().manual_seed(42).get_state() words 0..3, and numpy's key[1..3].
        let mt = Mt19937::from_seed(42);
        assert_eq!(&mt.state[..3], &[42, 3107752595, 1895908407]);
    }

    #[test]
    fn reference_mt19937_outputs() {
        // std::mt19937 with the default seed 5489: the 10000th output is 4123659995.
        let mut mt = Mt19937::from_seed(5489);
        let mut last = 0;
        for _ in 0..10000 {
            last = mt.next_u32();
        }
        assert_eq!(last, 4123659995);
        // init_by_array({0x123, 0x234, 0x345, 0x456}) first output (mt19937ar.c reference).
        let mut mt = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        assert_eq!(mt.next_u32(), 1067595299);
    }

    #[test]
    fn torch_generator_bookkeeping() {
        let mut g = TorchGenerator::new(42);
        let s = g.get_state();
        assert_eq!(s.len(), TORCH_STATE_BYTES);
        assert_eq!(&s[8..12], &1i32.to_le_bytes());
        let _ = g.randperm(5); // 4 draws
        let s = g.get_state();
        assert_eq!(&s[8..12], &621i32.to_le_bytes());
        assert_eq!(&s[16..24], &4u64.to_le_bytes());
        let back = TorchGenerator::set_state(&s).unwrap();
        assert_eq!(back, g);
        // torch: manual_seed(7); int64 random_() -> 1407639518939636932
        assert_eq!(TorchGenerator::new(7).random_int64(), 1407639518939636932);
    }

    #[test]
    fn randperm_small_cases() {
        let mut g = TorchGenerator::new(0);
        assert_eq!(g.randperm(0), Vec::<i64>::new());
        assert_eq!(g.randperm(1), vec![0]);
        assert_eq!(g.get_state(), TorchGenerator::new(0).get_state(), "n <= 1 draws nothing");
    }

    #[test]
    fn python_and_numpy_seed() {
        let p = PythonRandomState::seeded(42);
        assert_eq!(p.mt[0], 0x8000_0000);
        assert_eq!(p.pos, 624);
        let n = NumpyRandomState::seeded(42).unwrap();
        assert_eq!(&n.key[..3], &[42, 3107752595, 1895908407]);
        assert!(NumpyRandomState::seeded(-1).is_err());
        assert!(NumpyRandomState::seeded(1 << 32).is_err());
    }
}
