//! A restricted unpickler: it reads the opcodes pickle protocols 2–5 emit for checkpoint data
//! into a graph of nodes, refuses every global that is not on the allow-list, and never
//! calls, imports or evaluates anything. The graph then becomes a [`Value`] tree in which
//! object identity the writer cannot infer is kept as [`Value::Shared`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use super::error::{FormatError, Result};
use super::pickle_write::{minimize_twos, op};
use super::value::{Construct, DType, Global, Object, Storage, Tensor, Value};

/// The globals a pickle may name.
#[derive(Clone, Debug)]
pub struct AllowList {
    set: HashSet<(String, String)>,
}

/// The globals of the checkpoint files HF Trainer 5.24.0 (torch 2.13, numpy 2) and 4.31.0
/// (torch 2.1, numpy 1) write — optimizer.pt, scheduler.pt, rng_state.pth, training_args.bin,
/// pytorch_model.bin — plus what this writer itself emits (every torch storage class and
/// dtype, `_rebuild_tensor_v3`, protocol 2's spellings of bytes and sets).
pub fn default_allow_list() -> Vec<Global> {
    let mut g: Vec<Global> = Vec::new();
    let mut add = |m: &str, n: &str| g.push(Global::new(m, n));
    // tensors
    add("torch._utils", "_rebuild_tensor_v2");
    add("torch._utils", "_rebuild_tensor_v3");
    add("torch.storage", "UntypedStorage");
    add("collections", "OrderedDict");
    add("torch", "device");
    for d in DType::ALL {
        if let Some(cls) = d.storage_class() {
            add("torch", cls);
        }
        add("torch", d.torch_name());
    }
    // protocol 2 encodings of bytes and sets
    add("_codecs", "encode");
    add("builtins", "bytes");
    add("builtins", "set");
    add("builtins", "frozenset");
    // numpy (rng_state.pth: np.random.get_state())
    for np in ["numpy.core.multiarray", "numpy._core.multiarray"] {
        add(np, "_reconstruct");
        add(np, "scalar");
    }
    add("numpy", "ndarray");
    add("numpy", "dtype");
    // transformers / accelerate (training_args.bin)
    add("transformers.training_args", "TrainingArguments");
    add("transformers.training_args", "OptimizerNames");
    add("transformers.trainer_utils", "IntervalStrategy");
    add("transformers.trainer_utils", "SaveStrategy");
    add("transformers.trainer_utils", "SchedulerType");
    add("transformers.trainer_utils", "HubStrategy");
    add("transformers.debug_utils", "DebugOption");
    add("transformers.trainer_pt_utils", "AcceleratorConfig");
    add("accelerate.state", "PartialState");
    add("accelerate.utils.dataclasses", "DistributedType");
    g
}

impl Default for AllowList {
    fn default() -> Self {
        AllowList::new(default_allow_list())
    }
}

impl AllowList {
    pub fn new(globals: impl IntoIterator<Item = Global>) -> Self {
        AllowList {
            set: globals.into_iter().map(|g| (g.module, g.name)).collect(),
        }
    }
    pub fn allow(&mut self, g: Global) {
        self.set.insert((g.module, g.name));
    }
    pub fn allows(&self, module: &str, name: &str) -> bool {
        self.set.contains(&(module.to_string(), name.to_string()))
    }
}

/// What a persistent id asks for: a storage record.
#[derive(Clone, Debug)]
pub struct StorageRequest {
    pub key: String,
    pub dtype: DType,
    pub nbytes: u64,
    pub location: String,
}

type NodeId = usize;

#[derive(Debug)]
enum Node {
    Leaf(Value),
    Str(String),
    Global(Global),
    List(Vec<NodeId>),
    Tuple(Vec<NodeId>),
    Dict(Vec<(NodeId, NodeId)>),
    Set(Vec<NodeId>),
    FrozenSet(Vec<NodeId>),
    Obj(ObjNode),
    Pid(NodeId),
}

#[derive(Debug)]
struct ObjNode {
    class: Global,
    construct: Construct,
    args: Vec<NodeId>,
    state: Option<NodeId>,
    list_items: Vec<NodeId>,
    dict_items: Vec<(NodeId, NodeId)>,
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    op_pos: usize,
    record: &'a str,
    allow: &'a AllowList,
    nodes: Vec<Node>,
    stack: Vec<NodeId>,
    marks: Vec<usize>,
    memo: HashMap<u64, NodeId>,
}

/// Python 2 → Python 3 names (fix_imports).
fn py3_module(module: &str) -> &str {
    match module {
        "__builtin__" => "builtins",
        "copy_reg" => "copyreg",
        _ => module,
    }
}

impl<'a> Parser<'a> {
    fn err(&self, msg: impl Into<String>) -> FormatError {
        FormatError::Pickle {
            path: String::new(),
            record: self.record.to_string(),
            offset: self.op_pos as u64,
            msg: msg.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.data.len() - self.pos < n {
            return Err(self.err("truncated pickle"));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn len64(&mut self, n: u64) -> Result<usize> {
        if n > (self.data.len() - self.pos) as u64 {
            return Err(self.err("truncated pickle"));
        }
        Ok(n as usize)
    }
    fn line(&mut self) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.err("truncated pickle (no end of line)"))?;
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end]).map_err(|_| self.err("non-UTF-8 text argument"))
    }

    fn push_node(&mut self, n: Node) {
        self.nodes.push(n);
        self.stack.push(self.nodes.len() - 1);
    }
    fn pop(&mut self) -> Result<NodeId> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(self.err("stack underflow (popped past a MARK)"));
        }
        self.stack.pop().ok_or_else(|| self.err("stack underflow"))
    }
    fn top(&self) -> Result<NodeId> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(self.err("stack underflow (MARK on top)"));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| self.err("stack underflow"))
    }
    fn pop_mark(&mut self) -> Result<Vec<NodeId>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err("no MARK on the stack"))?;
        Ok(self.stack.split_off(m))
    }
    fn str_of(&self, id: NodeId) -> Option<&str> {
        match &self.nodes[id] {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    fn global(&mut self, module: &str, name: &str) -> Result<()> {
        let module = py3_module(module);
        if !self.allow.allows(module, name) {
            return Err(FormatError::RefusedGlobal {
                path: String::new(),
                record: self.record.to_string(),
                offset: self.op_pos as u64,
                global: format!("{module}.{name}"),
            });
        }
        self.push_node(Node::Global(Global::new(module, name)));
        Ok(())
    }

    fn memo_put(&mut self, idx: u64) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(idx, top);
        Ok(())
    }
    fn memo_get(&mut self, idx: u64) -> Result<()> {
        let id = *self
            .memo
            .get(&idx)
            .ok_or_else(|| self.err(format!("memo key {idx} not found")))?;
        self.stack.push(id);
        Ok(())
    }

    fn set_items(&mut self, target: NodeId, items: Vec<NodeId>) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            return Err(self.err("odd number of items for SETITEMS"));
        }
        let pairs: Vec<(NodeId, NodeId)> = items.chunks(2).map(|c| (c[0], c[1])).collect();
        match &mut self.nodes[target] {
            Node::Dict(d) => d.extend(pairs),
            Node::Obj(o) => o.dict_items.extend(pairs),
            _ => return Err(self.err("SETITEM on something that is not a dict")),
        }
        Ok(())
    }
    fn append_items(&mut self, target: NodeId, items: Vec<NodeId>) -> Result<()> {
        match &mut self.nodes[target] {
            Node::List(l) => l.extend(items),
            Node::Obj(o) => o.list_items.extend(items),
            _ => return Err(self.err("APPEND on something that is not a list")),
        }
        Ok(())
    }
    fn args_of(&self, id: NodeId) -> Result<Vec<NodeId>> {
        match &self.nodes[id] {
            Node::Tuple(t) => Ok(t.clone()),
            _ => Err(self.err("arguments are not a tuple")),
        }
    }
    fn class_of(&self, id: NodeId, what: &str) -> Result<Global> {
        match &self.nodes[id] {
            Node::Global(g) => Ok(g.clone()),
            _ => Err(self.err(format!("{what} of something that is not an allowed global"))),
        }
    }

    fn run(&mut self) -> Result<NodeId> {
        loop {
            self.op_pos = self.pos;
            let code = self
                .u8()
                .map_err(|_| self.err("truncated pickle (no STOP)"))?;
            match code {
                op::PROTO => {
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(self.err(format!("unsupported pickle protocol {v}")));
                    }
                }
                op::FRAME => {
                    self.u64()?;
                }
                op::STOP => {
                    let id = self.pop()?;
                    return Ok(id);
                }
                op::NONE => self.push_node(Node::Leaf(Value::None)),
                op::NEWTRUE => self.push_node(Node::Leaf(Value::Bool(true))),
                op::NEWFALSE => self.push_node(Node::Leaf(Value::Bool(false))),
                op::BININT => {
                    let v = self.u32()? as i32 as i64;
                    self.push_node(Node::Leaf(Value::Int(v)))
                }
                op::BININT1 => {
                    let v = self.u8()? as i64;
                    self.push_node(Node::Leaf(Value::Int(v)))
                }
                op::BININT2 => {
                    let v = self.u16()? as i64;
                    self.push_node(Node::Leaf(Value::Int(v)))
                }
                op::LONG1 | op::LONG4 => {
                    let n = if code == op::LONG1 {
                        self.u8()? as u64
                    } else {
                        self.u32()? as i32 as i64 as u64
                    };
                    let n = self.len64(n)?;
                    let mut b = self.take(n)?.to_vec();
                    let v = if b.is_empty() {
                        Value::Int(0)
                    } else {
                        minimize_twos(&mut b);
                        if b.len() <= 8 {
                            let neg = b[b.len() - 1] & 0x80 != 0;
                            let mut full = [if neg { 0xff } else { 0 }; 8];
                            full[..b.len()].copy_from_slice(&b);
                            Value::Int(i64::from_le_bytes(full))
                        } else {
                            Value::BigInt(b)
                        }
                    };
                    self.push_node(Node::Leaf(v))
                }
                op::INT => {
                    let l = self.line()?;
                    let v = match l {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        _ => Value::Int(
                            l.trim()
                                .parse()
                                .map_err(|_| self.err(format!("bad INT {l:?}")))?,
                        ),
                    };
                    self.push_node(Node::Leaf(v))
                }
                op::LONG => {
                    let l = self.line()?;
                    let t = l.trim().trim_end_matches('L');
                    let v: i64 = t
                        .parse()
                        .map_err(|_| self.err(format!("unsupported LONG {l:?}")))?;
                    self.push_node(Node::Leaf(Value::Int(v)))
                }
                op::BINFLOAT => {
                    let v = f64::from_be_bytes(self.take(8)?.try_into().unwrap());
                    self.push_node(Node::Leaf(Value::Float(v)))
                }
                op::FLOAT => {
                    let l = self.line()?;
                    let v: f64 = l
                        .trim()
                        .parse()
                        .map_err(|_| self.err(format!("bad FLOAT {l:?}")))?;
                    self.push_node(Node::Leaf(Value::Float(v)))
                }
                op::BINUNICODE | op::SHORT_BINUNICODE | op::BINUNICODE8 => {
                    let n = match code {
                        op::BINUNICODE => self.u32()? as u64,
                        op::SHORT_BINUNICODE => self.u8()? as u64,
                        _ => self.u64()?,
                    };
                    let n = self.len64(n)?;
                    let b = self.take(n)?;
                    let s = String::from_utf8(b.to_vec()).map_err(|_| {
                        self.err("string is not valid UTF-8 (lone surrogates are not supported)")
                    })?;
                    self.push_node(Node::Str(s))
                }
                op::BINBYTES | op::SHORT_BINBYTES | op::BINBYTES8 | op::BYTEARRAY8 => {
                    let n = match code {
                        op::BINBYTES => self.u32()? as u64,
                        op::SHORT_BINBYTES => self.u8()? as u64,
                        _ => self.u64()?,
                    };
                    let n = self.len64(n)?;
                    let b = self.take(n)?.to_vec();
                    self.push_node(Node::Leaf(Value::Bytes(b)))
                }
                op::BINSTRING | op::SHORT_BINSTRING => {
                    // Python 2 str: Python 3 decodes it as ASCII by default.
                    let n = if code == op::BINSTRING {
                        self.u32()? as u64
                    } else {
                        self.u8()? as u64
                    };
                    let n = self.len64(n)?;
                    let b = self.take(n)?;
                    if !b.is_ascii() {
                        return Err(self.err("non-ASCII Python 2 string"));
                    }
                    self.push_node(Node::Str(String::from_utf8(b.to_vec()).unwrap()))
                }
                op::EMPTY_TUPLE => self.push_node(Node::Tuple(vec![])),
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = (code - op::TUPLE1 + 1) as usize;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.push_node(Node::Tuple(items))
                }
                op::TUPLE => {
                    let items = self.pop_mark()?;
                    self.push_node(Node::Tuple(items))
                }
                op::EMPTY_LIST => self.push_node(Node::List(vec![])),
                op::LIST => {
                    let items = self.pop_mark()?;
                    self.push_node(Node::List(items))
                }
                op::APPEND => {
                    let v = self.pop()?;
                    let t = self.top()?;
                    self.append_items(t, vec![v])?;
                }
                op::APPENDS => {
                    let items = self.pop_mark()?;
                    let t = self.top()?;
                    self.append_items(t, items)?;
                }
                op::EMPTY_DICT => self.push_node(Node::Dict(vec![])),
                op::DICT => {
                    let items = self.pop_mark()?;
                    if !items.len().is_multiple_of(2) {
                        return Err(self.err("odd number of items for DICT"));
                    }
                    let pairs = items.chunks(2).map(|c| (c[0], c[1])).collect();
                    self.push_node(Node::Dict(pairs))
                }
                op::SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let t = self.top()?;
                    self.set_items(t, vec![k, v])?;
                }
                op::SETITEMS => {
                    let items = self.pop_mark()?;
                    let t = self.top()?;
                    self.set_items(t, items)?;
                }
                op::EMPTY_SET => self.push_node(Node::Set(vec![])),
                op::ADDITEMS => {
                    let items = self.pop_mark()?;
                    let t = self.top()?;
                    match &mut self.nodes[t] {
                        Node::Set(s) => s.extend(items),
                        _ => return Err(self.err("ADDITEMS on something that is not a set")),
                    }
                }
                op::FROZENSET => {
                    let items = self.pop_mark()?;
                    self.push_node(Node::FrozenSet(items))
                }
                op::MARK => self.marks.push(self.stack.len()),
                op::POP => {
                    if self.marks.last().is_some_and(|&m| m == self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop()?;
                    }
                }
                op::POP_MARK => {
                    self.pop_mark()?;
                }
                op::DUP => {
                    let t = self.top()?;
                    self.stack.push(t);
                }
                op::BINPUT => {
                    let i = self.u8()? as u64;
                    self.memo_put(i)?
                }
                op::LONG_BINPUT => {
                    let i = self.u32()? as u64;
                    self.memo_put(i)?
                }
                op::PUT => {
                    let l = self.line()?;
                    let i: u64 = l
                        .trim()
                        .parse()
                        .map_err(|_| self.err(format!("bad PUT {l:?}")))?;
                    self.memo_put(i)?
                }
                op::MEMOIZE => {
                    let i = self.memo.len() as u64;
                    self.memo_put(i)?
                }
                op::BINGET => {
                    let i = self.u8()? as u64;
                    self.memo_get(i)?
                }
                op::LONG_BINGET => {
                    let i = self.u32()? as u64;
                    self.memo_get(i)?
                }
                op::GET => {
                    let l = self.line()?;
                    let i: u64 = l
                        .trim()
                        .parse()
                        .map_err(|_| self.err(format!("bad GET {l:?}")))?;
                    self.memo_get(i)?
                }
                op::GLOBAL => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.global(module, name)?;
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Some(m), Some(n)) = (self.str_of(module), self.str_of(name)) else {
                        return Err(self.err("STACK_GLOBAL needs two strings"));
                    };
                    let (m, n) = (m.to_string(), n.to_string());
                    self.global(&m, &n)?;
                }
                op::REDUCE => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let class = self.class_of(callable, "REDUCE")?;
                    let args = self.args_of(args)?;
                    self.push_node(Node::Obj(ObjNode {
                        class,
                        construct: Construct::Reduce,
                        args,
                        state: None,
                        list_items: vec![],
                        dict_items: vec![],
                    }))
                }
                op::NEWOBJ | op::NEWOBJ_EX => {
                    if code == op::NEWOBJ_EX {
                        let kwargs = self.pop()?;
                        if !matches!(&self.nodes[kwargs], Node::Dict(d) if d.is_empty()) {
                            return Err(
                                self.err("NEWOBJ_EX with keyword arguments is not supported")
                            );
                        }
                    }
                    let args = self.pop()?;
                    let cls = self.pop()?;
                    let class = self.class_of(cls, "NEWOBJ")?;
                    let args = self.args_of(args)?;
                    self.push_node(Node::Obj(ObjNode {
                        class,
                        construct: Construct::NewObj,
                        args,
                        state: None,
                        list_items: vec![],
                        dict_items: vec![],
                    }))
                }
                op::BUILD => {
                    let state = self.pop()?;
                    let t = self.top()?;
                    match &mut self.nodes[t] {
                        Node::Obj(o) if o.state.is_none() => o.state = Some(state),
                        Node::Obj(_) => return Err(self.err("BUILD applied twice to one object")),
                        _ => return Err(self.err("BUILD on something that is not an object")),
                    }
                }
                op::BINPERSID => {
                    let pid = self.pop()?;
                    self.push_node(Node::Pid(pid))
                }
                other => return Err(self.err(format!("unsupported opcode 0x{other:02x}"))),
            }
        }
    }
}

/// Graph → tree conversion, visiting nodes in the order the writer will emit them, so that it
/// can tell which strings the writer will merge by value and which must stay distinct.
struct Converter<'a, 'r> {
    nodes: &'a [Node],
    refcount: Vec<u32>,
    arcs: HashMap<NodeId, Arc<Value>>,
    canon: HashMap<&'a str, NodeId>,
    busy: Vec<bool>,
    depth: usize,
    /// Bytes of strings, globals, bytes and big ints copied into the tree so far, and the most
    /// allowed (see [`copy_budget`]).
    copied: u64,
    copy_limit: u64,
    resolve: &'r mut dyn FnMut(&StorageRequest) -> Result<Arc<Storage>>,
}

/// How deep a value may nest. The conversion (and every consumer of the tree: comparison,
/// writing, dropping) recurses once per level, so an unbounded depth (a pickle of 10,000 nested
/// lists is 20 KB) would overflow the stack; checkpoint files nest fewer than 10 levels.
pub const MAX_DEPTH: usize = 1000;

/// The most bytes the conversion may copy for a pickle of `len` bytes. Strings that are not
/// memoized into shared values are copied at each reference (that keeps the writer's
/// byte-for-byte round trip), so a 1 MB string fetched from the memo a million times (two bytes
/// per `BINGET`) would ask for a terabyte; real checkpoints copy far less than their own size.
fn copy_budget(len: usize) -> u64 {
    (len as u64).saturating_mul(8).max(64 << 20)
}

fn children(n: &Node) -> Vec<NodeId> {
    match n {
        Node::Leaf(_) | Node::Str(_) | Node::Global(_) => vec![],
        Node::List(v) | Node::Tuple(v) | Node::Set(v) | Node::FrozenSet(v) => v.clone(),
        Node::Dict(d) => d.iter().flat_map(|&(k, v)| [k, v]).collect(),
        Node::Obj(o) => {
            let mut c = o.args.clone();
            c.extend(&o.list_items);
            c.extend(o.dict_items.iter().flat_map(|&(k, v)| [k, v]));
            c.extend(o.state);
            c
        }
        Node::Pid(p) => vec![*p],
    }
}

fn invalid(msg: impl Into<String>) -> FormatError {
    FormatError::invalid(format!("data.pkl: {}", msg.into()))
}

impl<'a, 'r> Converter<'a, 'r> {
    fn count(&mut self, root: NodeId) {
        let mut todo = vec![root];
        while let Some(id) = todo.pop() {
            self.refcount[id] += 1;
            if self.refcount[id] == 1 {
                todo.extend(children(&self.nodes[id]));
            }
        }
    }

    fn conv_str(&mut self, id: NodeId) -> Value {
        let nodes = self.nodes;
        let Node::Str(s) = &nodes[id] else {
            unreachable!()
        };
        match self.canon.get(s.as_str()) {
            Some(&c) if c == id => {
                self.copied += s.len() as u64;
                Value::Str(s.clone())
            }
            Some(_) => {
                let a = self
                    .arcs
                    .entry(id)
                    .or_insert_with(|| Arc::new(Value::Str(s.clone())))
                    .clone();
                Value::Shared(a)
            }
            None => {
                if let Some(a) = self.arcs.get(&id) {
                    return Value::Shared(a.clone());
                }
                self.canon.insert(s.as_str(), id);
                self.copied += s.len() as u64;
                Value::Str(s.clone())
            }
        }
    }

    fn value(&mut self, id: NodeId) -> Result<Value> {
        if self.copied > self.copy_limit {
            return Err(invalid(format!(
                "the pickle expands to more than {} bytes of strings (memo references to large values)",
                self.copy_limit
            )));
        }
        let node = &self.nodes[id];
        let memoizable = match node {
            Node::Str(_) => return Ok(self.conv_str(id)),
            Node::Leaf(Value::Bytes(_)) => true,
            Node::Leaf(_) | Node::Global(_) | Node::Pid(_) => false,
            Node::Tuple(t) => !t.is_empty(),
            _ => true,
        };
        if memoizable && self.refcount[id] > 1 {
            if let Some(a) = self.arcs.get(&id) {
                return Ok(Value::Shared(a.clone()));
            }
            let v = self.build(id)?;
            let a = Arc::new(v);
            self.arcs.insert(id, a.clone());
            return Ok(Value::Shared(a));
        }
        self.build(id)
    }

    fn values(&mut self, ids: &[NodeId]) -> Result<Vec<Value>> {
        ids.iter().map(|&i| self.value(i)).collect()
    }
    fn pairs(&mut self, ids: &[(NodeId, NodeId)]) -> Result<Vec<(Value, Value)>> {
        ids.iter()
            .map(|&(k, v)| Ok((self.value(k)?, self.value(v)?)))
            .collect()
    }

    fn build(&mut self, id: NodeId) -> Result<Value> {
        if self.busy[id] {
            return Err(invalid(
                "recursive structure (an object containing itself) is not supported",
            ));
        }
        if self.depth > MAX_DEPTH {
            return Err(invalid(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        if self.copied > self.copy_limit {
            return Err(invalid(format!(
                "the pickle expands to more than {} bytes of strings (memo references to large values)",
                self.copy_limit
            )));
        }
        self.busy[id] = true;
        self.depth += 1;
        let r = self.build_inner(id);
        self.depth -= 1;
        self.busy[id] = false;
        r
    }

    fn build_inner(&mut self, id: NodeId) -> Result<Value> {
        let nodes = self.nodes;
        Ok(match &nodes[id] {
            Node::Leaf(v) => {
                self.copied += match v {
                    Value::Bytes(b) | Value::BigInt(b) => b.len() as u64,
                    _ => 0,
                };
                v.clone()
            }
            Node::Str(_) => self.conv_str(id),
            Node::Global(g) => {
                self.copied += (g.module.len() + g.name.len()) as u64;
                Value::Global(g.clone())
            }
            Node::List(v) => Value::List(self.values(v)?),
            Node::Tuple(v) => Value::Tuple(self.values(v)?),
            Node::Set(v) => Value::Set(self.values(v)?),
            Node::FrozenSet(v) => Value::FrozenSet(self.values(v)?),
            Node::Dict(d) => Value::Dict(self.pairs(d)?),
            Node::Pid(_) => return Err(invalid("a storage outside a tensor is not supported")),
            Node::Obj(o) => {
                let c = &o.class;
                let plain = o.state.is_none() && o.list_items.is_empty() && o.dict_items.is_empty();
                if c.module == "torch._utils"
                    && (c.name == "_rebuild_tensor_v2" || c.name == "_rebuild_tensor_v3")
                    && plain
                {
                    return self.tensor(o);
                }
                if c.is("_codecs", "encode") && plain {
                    return self.codecs_bytes(o);
                }
                if c.is("builtins", "bytes") && plain && o.args.is_empty() {
                    return Ok(Value::Bytes(vec![]));
                }
                if (c.is("builtins", "set") || c.is("builtins", "frozenset"))
                    && plain
                    && o.args.len() <= 1
                {
                    let items = match o.args.first() {
                        None => vec![],
                        Some(&a) => match &nodes[a] {
                            Node::List(v) | Node::Tuple(v) => self.values(v)?,
                            _ => {
                                return Err(invalid(format!("{c} of something that is not a list")))
                            }
                        },
                    };
                    return Ok(if c.name == "set" {
                        Value::Set(items)
                    } else {
                        Value::FrozenSet(items)
                    });
                }
                let args = self.values(&o.args)?;
                let list_items = self.values(&o.list_items)?;
                let dict_items = self.pairs(&o.dict_items)?;
                let state = match o.state {
                    Some(s) => Some(self.value(s)?),
                    None => None,
                };
                Value::Object(Box::new(Object {
                    class: c.clone(),
                    construct: o.construct,
                    args,
                    state,
                    list_items,
                    dict_items,
                }))
            }
        })
    }

    fn codecs_bytes(&mut self, o: &ObjNode) -> Result<Value> {
        let nodes = self.nodes;
        let (Some(&t), Some(&e)) = (o.args.first(), o.args.get(1)) else {
            return Err(invalid("_codecs.encode needs (text, encoding)"));
        };
        let (Node::Str(text), Node::Str(enc)) = (&nodes[t], &nodes[e]) else {
            return Err(invalid("_codecs.encode needs (text, encoding)"));
        };
        if o.args.len() != 2 || !matches!(enc.as_str(), "latin1" | "latin-1" | "iso-8859-1") {
            return Err(invalid(format!(
                "_codecs.encode with encoding {enc:?} is not supported"
            )));
        }
        if text.chars().count() == 1 {
            self.conv_str(t);
        }
        self.conv_str(e);
        let mut out = Vec::with_capacity(text.len());
        for ch in text.chars() {
            let c = ch as u32;
            if c > 0xff {
                return Err(invalid("_codecs.encode: text is not latin-1"));
            }
            out.push(c as u8);
        }
        Ok(Value::Bytes(out))
    }

    fn int_of(&self, id: NodeId, what: &str) -> Result<i64> {
        match &self.nodes[id] {
            Node::Leaf(Value::Int(i)) => Ok(*i),
            _ => Err(invalid(format!("tensor {what} is not an int"))),
        }
    }
    fn ints_of(&self, id: NodeId, what: &str) -> Result<Vec<i64>> {
        match &self.nodes[id] {
            Node::Tuple(v) | Node::List(v) => v.iter().map(|&i| self.int_of(i, what)).collect(),
            _ => Err(invalid(format!("tensor {what} is not a tuple"))),
        }
    }

    fn tensor(&mut self, o: &ObjNode) -> Result<Value> {
        let nodes = self.nodes;
        let v3 = o.class.name == "_rebuild_tensor_v3";
        let need = if v3 { 7 } else { 6 };
        if o.args.len() < need || o.args.len() > need + 1 {
            return Err(invalid(format!(
                "{} with {} arguments",
                o.class,
                o.args.len()
            )));
        }
        let Node::Pid(pid) = &nodes[o.args[0]] else {
            return Err(invalid("tensor storage is not a persistent id"));
        };
        let Node::Tuple(p) = &nodes[*pid] else {
            return Err(invalid("storage persistent id is not a tuple"));
        };
        if p.len() != 5 || !matches!(&nodes[p[0]], Node::Str(s) if s == "storage") {
            return Err(invalid(
                "storage persistent id is not ('storage', type, key, location, numel)",
            ));
        }
        self.conv_str(p[0]);
        let Node::Global(storage_class) = &nodes[p[1]] else {
            return Err(invalid("storage type is not a global"));
        };
        let Node::Str(key) = &nodes[p[2]] else {
            return Err(invalid("storage key is not a string"));
        };
        let Node::Str(location) = &nodes[p[3]] else {
            return Err(invalid("storage location is not a string"));
        };
        self.conv_str(p[3]);
        let numel = self.int_of(p[4], "storage size")?;
        if numel < 0 {
            return Err(invalid(format!("storage {key} has a negative size {numel}")));
        }
        let dtype = if v3 {
            match &nodes[o.args[6]] {
                Node::Global(g) if g.module == "torch" => DType::from_torch_name(&g.name)
                    .ok_or_else(|| invalid(format!("unknown tensor dtype torch.{}", g.name)))?,
                _ => return Err(invalid("_rebuild_tensor_v3 dtype is not a torch dtype")),
            }
        } else if storage_class.module == "torch" {
            DType::from_storage_class(&storage_class.name)
                .ok_or_else(|| invalid(format!("unsupported storage type {storage_class}")))?
        } else {
            return Err(invalid(format!("unsupported storage type {storage_class}")));
        };
        // Checked: the record's size is compared with this, so a wrapped product must not match.
        let nbytes = if storage_class.is("torch.storage", "UntypedStorage") {
            Some(numel as u64)
        } else {
            (numel as u64).checked_mul(dtype.size())
        }
        .ok_or_else(|| invalid(format!("storage {key} of {numel} elements overflows")))?;
        let storage = (self.resolve)(&StorageRequest {
            key: key.clone(),
            dtype,
            nbytes,
            location: location.clone(),
        })?;
        let storage_offset = self.int_of(o.args[1], "storage offset")?;
        let shape = self.ints_of(o.args[2], "size")?;
        let stride = self.ints_of(o.args[3], "stride")?;
        let requires_grad = match &nodes[o.args[4]] {
            Node::Leaf(Value::Bool(b)) => *b,
            _ => return Err(invalid("tensor requires_grad is not a bool")),
        };
        match &nodes[o.args[5]] {
            Node::Obj(h) if h.class.is("collections", "OrderedDict") && h.dict_items.is_empty() => {
            }
            Node::Leaf(Value::None) => {}
            _ => return Err(invalid("tensors with backward hooks are not supported")),
        }
        let metadata = match o.args.get(need) {
            Some(&m) => Some(Box::new(self.value(m)?)),
            None => None,
        };
        let t = Tensor {
            storage,
            storage_offset,
            shape,
            stride,
            requires_grad,
            metadata,
        };
        super::pickle_write::check_view(&t)
            .map_err(|e| invalid(e.to_string().replace("cannot write: ", "")))?;
        Ok(Value::Tensor(t))
    }
}

/// Parses `data` (a pickle named `record` in messages) into a value, resolving storages with
/// `resolve`.
pub(crate) fn unpickle_with(
    data: &[u8],
    record: &str,
    allow: &AllowList,
    resolve: &mut dyn FnMut(&StorageRequest) -> Result<Arc<Storage>>,
) -> Result<Value> {
    let mut p = Parser {
        data,
        pos: 0,
        op_pos: 0,
        record,
        allow,
        nodes: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let root = p.run()?;
    let nodes = std::mem::take(&mut p.nodes);
    let n = nodes.len();
    let mut c = Converter {
        nodes: &nodes,
        refcount: vec![0; n],
        arcs: HashMap::new(),
        canon: HashMap::new(),
        busy: vec![false; n],
        depth: 0,
        copied: 0,
        copy_limit: copy_budget(data.len()),
        resolve,
    };
    c.count(root);
    c.value(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_storage(_: &StorageRequest) -> Result<Arc<Storage>> {
        Err(FormatError::invalid("no storages here"))
    }

    #[test]
    fn refuses_os_system() {
        let evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.";
        let e =
            unpickle_with(evil, "data.pkl", &AllowList::default(), &mut no_storage).unwrap_err();
        assert_eq!(
            e.to_string(),
            "data.pkl: refusing global os.system at byte 2 (not on the allow-list)"
        );
    }

    #[test]
    fn unsupported_opcode_is_named() {
        let e = unpickle_with(
            b"\x80\x02\x97.",
            "data.pkl",
            &AllowList::default(),
            &mut no_storage,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "data.pkl: unsupported opcode 0x97 at byte 2");
    }

    #[test]
    fn round_trips_through_the_writer() {
        let shared = Arc::new(Value::List(vec![Value::Int(1)]));
        let v = Value::dict([
            ("a", Value::Shared(shared.clone())),
            ("b", Value::Shared(shared)),
            ("c", Value::fresh_str("a")),
            ("d", Value::Set(vec![Value::Int(3), Value::str("x")])),
            ("e", Value::Bytes(b"\x00\xffab".to_vec())),
            ("f", Value::Bytes(vec![])),
            ("g", Value::from_u64(u64::MAX)),
            ("h", Value::List((0..2500).map(Value::Int).collect())),
            (
                "i",
                Value::Dict((0..2000).map(|i| (Value::Int(i), Value::None)).collect()),
            ),
        ]);
        let bytes = super::super::pickle_write::pickle(&v).unwrap().bytes;
        let back =
            unpickle_with(&bytes, "data.pkl", &AllowList::default(), &mut no_storage).unwrap();
        assert_eq!(back, v);
        let again = super::super::pickle_write::pickle(&back).unwrap().bytes;
        assert_eq!(again, bytes);
    }
}
