//! Pickle protocol 2 exactly as CPython's C pickler (`_pickle.Pickler`, which `torch.save`
//! uses) emits it for the values of [`Value`]: memo puts after every memoizable object,
//! batches of 1000 for list and dict items, torch's persistent ids for storages.

use std::collections::HashMap;
use std::sync::Arc;
use super::error::{FormatError, Result};
use super::value::{Construct, DType, Object, Storage, Tensor, Value};

#[allow(dead_code)] // the full opcode table, for reference and the reader
pub(crate) mod op {
    pub const MARK: u8 = b'(';
    pub const STOP: u8 = b'.';
    pub const POP: u8 = b'0';
    pub const POP_MARK: u8 = b'1';
    pub const DUP: u8 = b'2';
    pub const FLOAT: u8 = b'F';
    pub const INT: u8 = b'I';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const LONG: u8 = b'L';
    pub const BININT2: u8 = b'M';
    pub const NONE: u8 = b'N';
    pub const PERSID: u8 = b'P';
    pub const BINPERSID: u8 = b'Q';
    pub const REDUCE: u8 = b'R';
    pub const STRING: u8 = b'S';
    pub const BINSTRING: u8 = b'T';
    pub const SHORT_BINSTRING: u8 = b'U';
    pub const UNICODE: u8 = b'V';
    pub const BINUNICODE: u8 = b'X';
    pub const APPEND: u8 = b'a';
    pub const BUILD: u8 = b'b';
    pub const GLOBAL: u8 = b'c';
    pub const DICT: u8 = b'd';
    pub const EMPTY_DICT: u8 = b'}';
    pub const APPENDS: u8 = b'e';
    pub const GET: u8 = b'g';
    pub const BINGET: u8 = b'h';
    pub const INST: u8 = b'i';
    pub const LONG_BINGET: u8 = b'j';
    pub const LIST: u8 = b'l';
    pub const EMPTY_LIST: u8 = b']';
    pub const OBJ: u8 = b'o';
    pub const PUT: u8 = b'p';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const SETITEM: u8 = b's';
    pub const TUPLE: u8 = b't';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const SETITEMS: u8 = b'u';
    pub const BINFLOAT: u8 = b'G';
    pub const PROTO: u8 = 0x80;
    pub const NEWOBJ: u8 = 0x81;
    pub const EXT1: u8 = 0x82;
    pub const EXT2: u8 = 0x83;
    pub const EXT4: u8 = 0x84;
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const LONG1: u8 = 0x8a;
    pub const LONG4: u8 = 0x8b;
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const BINUNICODE8: u8 = 0x8d;
    pub const BINBYTES8: u8 = 0x8e;
    pub const EMPTY_SET: u8 = 0x8f;
    pub const ADDITEMS: u8 = 0x90;
    pub const FROZENSET: u8 = 0x91;
    pub const NEWOBJ_EX: u8 = 0x92;
    pub const STACK_GLOBAL: u8 = 0x93;
    pub const MEMOIZE: u8 = 0x94;
    pub const FRAME: u8 = 0x95;
    pub const BYTEARRAY8: u8 = 0x96;
    pub const NEXT_BUFFER: u8 = 0x97;
    pub const READONLY_BUFFER: u8 = 0x98;
}

const BATCHSIZE: usize = 1000;

/// A storage the pickle references, in first-use order, with the key it got.
pub(crate) struct StorageRef {
    pub key: String,
    pub storage: Arc<Storage>,
}

pub(crate) struct Pickled {
    pub bytes: Vec<u8>,
    pub storages: Vec<StorageRef>,
}

/// Pickles `v` with protocol 2 as `torch.save` does (storages become persistent ids).
pub(crate) fn pickle(v: &Value) -> Result<Pickled> {
    let mut p = Pickler::default();
    p.out.extend_from_slice(&[op::PROTO, 2]);
    p.save(v)?;
    p.out.push(op::STOP);
    Ok(Pickled {
        bytes: p.out,
        storages: p.storages,
    })
}

#[derive(Default)]
struct Pickler {
    out: Vec<u8>,
    memo_len: u32,
    strings: HashMap<String, u32>,
    globals: HashMap<(String, String), u32>,
    shared: HashMap<*const Value, u32>,
    storage_index: HashMap<*const Storage, (usize, Option<u32>)>,
    storages: Vec<StorageRef>,
}

/// Python 3 → Python 2 names, as the pickler's fix_imports applies them for protocol < 3.
fn py2_module(module: &str) -> &str {
    match module {
        "builtins" => "__builtin__",
        "copyreg" => "copy_reg",
        _ => module,
    }
}

/// Minimal little-endian two's complement of an i64 (what LONG1 carries).
pub(crate) fn long_bytes_i64(x: i64) -> Vec<u8> {
    let mut b = x.to_le_bytes().to_vec();
    minimize_twos(&mut b);
    b
}

pub(crate) fn minimize_twos(b: &mut Vec<u8>) {
    while b.len() > 1 {
        let last = b[b.len() - 1];
        let prev_hi = b[b.len() - 2] & 0x80;
        if (last == 0 && prev_hi == 0) || (last == 0xff && prev_hi != 0) {
            b.pop();
        } else {
            break;
        }
    }
}

impl Pickler {
    fn put(&mut self) -> u32 {
        let idx = self.memo_len;
        self.memo_len += 1;
        if idx < 256 {
            self.out.extend_from_slice(&[op::BINPUT, idx as u8]);
        } else {
            self.out.push(op::LONG_BINPUT);
            self.out.extend_from_slice(&idx.to_le_bytes());
        }
        idx
    }

    fn get(&mut self, idx: u32) {
        if idx < 256 {
            self.out.extend_from_slice(&[op::BINGET, idx as u8]);
        } else {
            self.out.push(op::LONG_BINGET);
            self.out.extend_from_slice(&idx.to_le_bytes());
        }
    }

    fn int(&mut self, x: i64) {
        if (0..=0xff).contains(&x) {
            self.out.extend_from_slice(&[op::BININT1, x as u8]);
        } else if (0..=0xffff).contains(&x) {
            self.out.push(op::BININT2);
            self.out.extend_from_slice(&(x as u16).to_le_bytes());
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&x) {
            self.out.push(op::BININT);
            self.out.extend_from_slice(&(x as i32).to_le_bytes());
        } else {
            let b = long_bytes_i64(x);
            self.long(&b);
        }
    }

    fn long(&mut self, b: &[u8]) {
        if b.len() < 256 {
            self.out.extend_from_slice(&[op::LONG1, b.len() as u8]);
        } else {
            self.out.push(op::LONG4);
            self.out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        }
        self.out.extend_from_slice(b);
    }

    fn big_int(&mut self, b: &[u8]) -> Result<()> {
        let mut b = b.to_vec();
        if b.is_empty() {
            b.push(0);
        }
        minimize_twos(&mut b);
        if b.len() <= 8 {
            let neg = b[b.len() - 1] & 0x80 != 0;
            let mut full = [if neg { 0xff } else { 0 }; 8];
            full[..b.len()].copy_from_slice(&b);
            self.int(i64::from_le_bytes(full));
        } else {
            self.long(&b);
        }
        Ok(())
    }

    /// A string object of its own (not looked up by value, not registered by value).
    fn fresh_str(&mut self, s: &str) -> u32 {
        self.out.push(op::BINUNICODE);
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        self.put()
    }

    /// An interned string: one memo entry per distinct value.
    fn interned_str(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.strings.get(s) {
            self.get(i);
            return i;
        }
        let i = self.fresh_str(s);
        self.strings.insert(s.to_string(), i);
        i
    }

    fn global(&mut self, module: &str, name: &str) -> u32 {
        let key = (module.to_string(), name.to_string());
        if let Some(&i) = self.globals.get(&key) {
            self.get(i);
            return i;
        }
        self.out.push(op::GLOBAL);
        self.out.extend_from_slice(py2_module(module).as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'\n');
        let i = self.put();
        self.globals.insert(key, i);
        i
    }

    /// Saves `v`; returns the memo index the object got (None for unmemoized values).
    fn save(&mut self, v: &Value) -> Result<Option<u32>> {
        match v {
            Value::None => self.out.push(op::NONE),
            Value::Bool(b) => self.out.push(if *b { op::NEWTRUE } else { op::NEWFALSE }),
            Value::Int(i) => self.int(*i),
            Value::BigInt(b) => self.big_int(b)?,
            Value::Float(f) => {
                self.out.push(op::BINFLOAT);
                self.out.extend_from_slice(&f.to_be_bytes());
            }
            Value::Str(s) => return Ok(Some(self.interned_str(s))),
            Value::Bytes(b) => return self.bytes(b).map(Some),
            Value::List(items) => {
                self.out.push(op::EMPTY_LIST);
                let i = self.put();
                self.list_items_exact(items)?;
                return Ok(Some(i));
            }
            Value::Tuple(items) => return self.tuple(items),
            Value::Dict(items) => {
                self.out.push(op::EMPTY_DICT);
                let i = self.put();
                self.dict_items_exact(items)?;
                return Ok(Some(i));
            }
            Value::Set(items) => return self.set_like("set", items).map(Some),
            Value::FrozenSet(items) => return self.set_like("frozenset", items).map(Some),
            Value::Global(g) => return Ok(Some(self.global(&g.module, &g.name))),
            Value::Object(o) => return self.object(o).map(Some),
            Value::Tensor(t) => return self.tensor(t).map(Some),
            Value::Shared(arc) => {
                let ptr = Arc::as_ptr(arc);
                if let Some(&i) = self.shared.get(&ptr) {
                    self.get(i);
                    return Ok(Some(i));
                }
                let idx = match arc.as_ref() {
                    Value::Str(s) => Some(self.fresh_str(s)),
                    inner => self.save(inner)?,
                };
                if let Some(i) = idx {
                    self.shared.insert(ptr, i);
                }
                return Ok(idx);
            }
        }
        Ok(None)
    }

    fn tuple(&mut self, items: &[Value]) -> Result<Option<u32>> {
        match items.len() {
            0 => {
                self.out.push(op::EMPTY_TUPLE);
                return Ok(None);
            }
            1..=3 => {
                for it in items {
                    self.save(it)?;
                }
                self.out
                    .push([op::TUPLE1, op::TUPLE2, op::TUPLE3][items.len() - 1]);
            }
            _ => {
                self.out.push(op::MARK);
                for it in items {
                    self.save(it)?;
                }
                self.out.push(op::TUPLE);
            }
        }
        Ok(Some(self.put()))
    }

    /// `batch_list_exact` of CPython's `_pickle.c` (a list's own items).
    fn list_items_exact(&mut self, items: &[Value]) -> Result<()> {
        if items.len() == 1 {
            self.save(&items[0])?;
            self.out.push(op::APPEND);
            return Ok(());
        }
        let mut total = 0;
        while total < items.len() {
            self.out.push(op::MARK);
            let end = (total + BATCHSIZE).min(items.len());
            for it in &items[total..end] {
                self.save(it)?;
            }
            total = end;
            self.out.push(op::APPENDS);
        }
        Ok(())
    }

    /// `batch_dict_exact` of `_pickle.c`, including its empty trailing batch when the size is a
    /// multiple of 1000.
    fn dict_items_exact(&mut self, items: &[(Value, Value)]) -> Result<()> {
        match items.len() {
            0 => return Ok(()),
            1 => {
                self.save(&items[0].0)?;
                self.save(&items[0].1)?;
                self.out.push(op::SETITEM);
                return Ok(());
            }
            _ => {}
        }
        let mut pos = 0;
        loop {
            self.out.push(op::MARK);
            let end = (pos + BATCHSIZE).min(items.len());
            for (k, v) in &items[pos..end] {
                self.save(k)?;
                self.save(v)?;
            }
            let n = end - pos;
            pos = end;
            self.out.push(op::SETITEMS);
            if n != BATCHSIZE {
                break;
            }
        }
        Ok(())
    }

    /// `batch_list` of `_pickle.c` (list items of a reduce, from an iterator).
    fn list_items_iter(&mut self, items: &[Value]) -> Result<()> {
        let mut pos = 0;
        while pos < items.len() {
            if pos + 1 == items.len() {
                self.save(&items[pos])?;
                self.out.push(op::APPEND);
                break;
            }
            self.out.push(op::MARK);
            let end = (pos + BATCHSIZE).min(items.len());
            for it in &items[pos..end] {
                self.save(it)?;
            }
            pos = end;
            self.out.push(op::APPENDS);
        }
        Ok(())
    }

    /// `batch_dict` of `_pickle.c` (dict items of a reduce, e.g. an OrderedDict's).
    fn dict_items_iter(&mut self, items: &[(Value, Value)]) -> Result<()> {
        let mut pos = 0;
        while pos < items.len() {
            if pos + 1 == items.len() {
                self.save(&items[pos].0)?;
                self.save(&items[pos].1)?;
                self.out.push(op::SETITEM);
                break;
            }
            self.out.push(op::MARK);
            let end = (pos + BATCHSIZE).min(items.len());
            for (k, v) in &items[pos..end] {
                self.save(k)?;
                self.save(v)?;
            }
            pos = end;
            self.out.push(op::SETITEMS);
        }
        Ok(())
    }

    /// bytes under protocol 2: `_codecs.encode(latin1_text, 'latin1')`, or `bytes()` when empty.
    fn bytes(&mut self, b: &[u8]) -> Result<u32> {
        if b.is_empty() {
            self.global("builtins", "bytes");
            self.out.push(op::EMPTY_TUPLE);
        } else {
            self.global("_codecs", "encode");
            let text: String = b.iter().map(|&c| c as char).collect();
            if text.chars().count() == 1 {
                // CPython's one-character latin-1 strings are singletons: the same object as an
                // equal literal elsewhere.
                self.interned_str(&text);
            } else {
                self.fresh_str(&text);
            }
            self.interned_str("latin1");
            self.out.push(op::TUPLE2);
            self.put();
        }
        self.out.push(op::REDUCE);
        Ok(self.put())
    }

    /// set / frozenset under protocol 2: `set([items])` via REDUCE.
    fn set_like(&mut self, class: &str, items: &[Value]) -> Result<u32> {
        self.global("builtins", class);
        self.out.push(op::EMPTY_LIST);
        self.put();
        self.list_items_exact(items)?;
        self.out.push(op::TUPLE1);
        self.put();
        self.out.push(op::REDUCE);
        Ok(self.put())
    }

    fn object(&mut self, o: &Object) -> Result<u32> {
        self.global(&o.class.module, &o.class.name);
        self.tuple(&o.args)?;
        self.out.push(match o.construct {
            Construct::Reduce => op::REDUCE,
            Construct::NewObj => op::NEWOBJ,
        });
        let idx = self.put();
        self.list_items_iter(&o.list_items)?;
        self.dict_items_iter(&o.dict_items)?;
        if let Some(state) = &o.state {
            self.save(state)?;
            self.out.push(op::BUILD);
        }
        Ok(idx)
    }

    fn int_tuple(&mut self, xs: &[i64]) -> Result<()> {
        let items: Vec<Value> = xs.iter().map(|&x| Value::Int(x)).collect();
        self.tuple(&items)?;
        Ok(())
    }

    /// A tensor as `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
    /// requires_grad, OrderedDict()[, metadata])` (v3 plus a dtype for the dtypes torch has no
    /// typed storage for), the storage being the persistent id
    /// `('storage', torch.XStorage, key, location, numel)`.
    fn tensor(&mut self, t: &Tensor) -> Result<u32> {
        let dtype: DType = t.dtype();
        let v3 = dtype.storage_class().is_none();
        check_view(t)?;
        self.global(
            "torch._utils",
            if v3 {
                "_rebuild_tensor_v3"
            } else {
                "_rebuild_tensor_v2"
            },
        );
        self.out.push(op::MARK);
        // persistent id tuple
        self.out.push(op::MARK);
        self.interned_str("storage");
        match dtype.storage_class() {
            Some(cls) => self.global("torch", cls),
            None => self.global("torch.storage", "UntypedStorage"),
        };
        let ptr = Arc::as_ptr(&t.storage);
        match self.storage_index.get(&ptr).copied() {
            Some((_, Some(key_memo))) => self.get(key_memo),
            Some((n, None)) => {
                let key = self.storages[n].key.clone();
                let m = self.fresh_str(&key);
                self.storage_index.insert(ptr, (n, Some(m)));
            }
            None => {
                let n = self.storages.len();
                let key = n.to_string();
                let m = self.fresh_str(&key);
                self.storages.push(StorageRef {
                    key,
                    storage: t.storage.clone(),
                });
                self.storage_index.insert(ptr, (n, Some(m)));
            }
        }
        self.interned_str(&t.storage.location);
        let numel = if v3 {
            t.storage.nbytes()
        } else {
            t.storage.numel()
        };
        self.int(numel as i64);
        self.out.push(op::TUPLE);
        self.put();
        self.out.push(op::BINPERSID);
        self.int(t.storage_offset);
        self.int_tuple(&t.shape)?;
        self.int_tuple(&t.stride)?;
        self.out.push(if t.requires_grad {
            op::NEWTRUE
        } else {
            op::NEWFALSE
        });
        // backward hooks: an empty OrderedDict
        self.global("collections", "OrderedDict");
        self.out.push(op::EMPTY_TUPLE);
        self.out.push(op::REDUCE);
        self.put();
        if v3 {
            self.global("torch", dtype.torch_name());
        }
        if let Some(m) = &t.metadata {
            self.save(m)?;
        }
        self.out.push(op::TUPLE);
        self.put();
        self.out.push(op::REDUCE);
        Ok(self.put())
    }
}

/// Refuses a view that reaches outside its storage (torch would refuse to load it).
pub(crate) fn check_view(t: &Tensor) -> Result<()> {
    if t.shape.len() != t.stride.len() {
        return Err(FormatError::unwritable(format!(
            "tensor has shape {:?} but stride {:?}",
            t.shape, t.stride
        )));
    }
    if t.shape.iter().any(|&s| s < 0) || t.storage_offset < 0 {
        return Err(FormatError::unwritable(format!(
            "tensor has a negative size or offset: {:?}",
            t.shape
        )));
    }
    // Checked arithmetic throughout: shapes and strides come from files too (the reader calls
    // this), and a product that wraps around would let a view reach outside its storage.
    let overflow = || {
        FormatError::unwritable(format!(
            "tensor view (shape {:?}, stride {:?}, offset {}) overflows 64-bit element counts",
            t.shape, t.stride, t.storage_offset
        ))
    };
    let numel = t
        .shape
        .iter()
        .try_fold(1i64, |a, &s| a.checked_mul(s))
        .ok_or_else(overflow)?;
    if numel == 0 {
        return Ok(());
    }
    let mut last = t.storage_offset;
    for (&s, &st) in t.shape.iter().zip(&t.stride) {
        if st < 0 {
            return Err(FormatError::unwritable("tensor has a negative stride"));
        }
        last = (s - 1)
            .checked_mul(st)
            .and_then(|x| last.checked_add(x))
            .ok_or_else(overflow)?;
    }
    if last as u64 >= t.storage.numel() {
        return Err(FormatError::unwritable(format!(
            "tensor view (shape {:?}, stride {:?}, offset {}) exceeds its storage of {} elements",
            t.shape,
            t.stride,
            t.storage_offset,
            t.storage.numel()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_use_the_smallest_opcode() {
        let mut p = Pickler::default();
        for x in [
            0i64,
            255,
            256,
            65535,
            65536,
            -1,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MIN,
        ] {
            p.int(x);
        }
        let expect: Vec<u8> = [
            vec![op::BININT1, 0],
            vec![op::BININT1, 255],
            vec![op::BININT2, 0, 1],
            vec![op::BININT2, 255, 255],
            vec![op::BININT, 0, 0, 1, 0],
            vec![op::BININT, 255, 255, 255, 255],
            vec![op::BININT, 0, 0, 0, 0x80],
            vec![op::LONG1, 5, 0, 0, 0, 0x80, 0],
            vec![op::LONG1, 8, 0, 0, 0, 0, 0, 0, 0, 0x80],
        ]
        .concat();
        assert_eq!(p.out, expect);
    }

    #[test]
    fn minimal_twos_complement() {
        assert_eq!(long_bytes_i64(-128), vec![0x80]);
        assert_eq!(long_bytes_i64(-129), vec![0x7f, 0xff]);
        assert_eq!(long_bytes_i64(255), vec![0xff, 0]);
        assert_eq!(long_bytes_i64(1 << 31), vec![0, 0, 0, 0x80, 0]);
    }
}
