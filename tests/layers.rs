//! The layers of `src/` keep their order: a module uses its own layer and those below it, and
//! names the layer it reaches into (`crate::hf::profile::Profile`, never a flat re-export).
//! The order is lib.rs's (its `pub mod` lines, bottom-up, and its layer table); this test reads
//! every `crate::` path in the code (comments left out) and reports each one that reaches up.

use std::path::{Path, PathBuf};

/// The top-level modules of lib.rs, in declaration order: the layers, bottom-up.
fn layers() -> Vec<String> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("src/lib.rs");
    lib.lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';').map(String::from))
        .collect()
}

/// The layer a source file belongs to: its first folder under `src/` (or its own name for a
/// top-level file); None for lib.rs and main.rs, which stand outside the layers.
fn layer_of(rel: &str) -> Option<&str> {
    let first = rel.split('/').next()?;
    match first {
        "lib.rs" | "main.rs" => None,
        _ => Some(first.strip_suffix(".rs").unwrap_or(first)),
    }
}

/// The code of a line: without a `//` comment (a `//` inside a string literal ends nothing).
fn code_of(line: &str) -> &str {
    let mut in_str = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '/' if !in_str && prev == '/' => return &line[..i - 1],
            _ => {}
        }
        prev = if prev == '\\' && c == '\\' { ' ' } else { c };
    }
    line
}

/// Every upward or unnamed reach in the given files (path relative to `src/`, text), one line
/// each: `file:line: ...`.
fn violations(order: &[String], files: &[(String, String)]) -> Vec<String> {
    let rank = |name: &str| order.iter().position(|l| l == name);
    let mut out = vec![];
    for (rel, text) in files {
        let Some(own) = layer_of(rel) else { continue };
        let Some(own_rank) = rank(own) else {
            out.push(format!("{rel}: folder '{own}' is not a layer of src/lib.rs (add its `pub mod` line in its place)"));
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let code = code_of(line);
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                let after = &rest[i + "crate::".len()..];
                let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let at = format!("{rel}:{}", n + 1);
                if name.is_empty() {
                    out.push(format!("{at}: `crate::{{...}}` hides which layers it reaches; write one path per layer"));
                } else {
                    match rank(&name) {
                        None => out.push(format!("{at}: `crate::{name}` is no layer; name the layer (`crate::<layer>::{name}`)")),
                        Some(r) if r > own_rank => out.push(format!(
                            "{at}: {own} uses `crate::{name}`, a layer above it ({name} is layer {r}, {own} layer {own_rank}): move the item down or the caller up"
                        )),
                        Some(_) => {}
                    }
                }
                rest = after;
            }
        }
    }
    out
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).expect("src/ lists").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn src_imports_respect_the_layer_order() {
    let order = layers();
    assert_eq!(
        order,
        ["formats", "hf", "numerics", "policy", "world", "save", "trainer", "harness", "answers"],
        "src/lib.rs's layers changed: update this list, lib.rs's layer table and the README's module table together"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&root, &root, &mut files);
    assert!(files.len() > 40, "found only {} source files", files.len());
    let bad = violations(&order, &files);
    assert!(bad.is_empty(), "{} import(s) break the layer order (src/lib.rs):\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn the_check_catches_what_it_is_for() {
    let order: Vec<String> = ["formats", "hf", "numerics", "trainer"].iter().map(|s| s.to_string()).collect();
    let file = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let bad = violations(
        &order,
        &[
            file("hf/args.rs", "use crate::formats::pyjson::PyJson;\nuse crate::trainer::SaveMode;\n"),
            file("hf/state.rs", "/// See [`crate::trainer`].\nlet s = \"http://x\"; // crate::trainer in a comment\n"),
            file("numerics/lr.rs", "use crate::profile::Profile;\nuse crate::{hf::args, formats::pyjson};\n"),
            file("extra/x.rs", "use crate::formats::pyjson;\n"),
            file("trainer/mod.rs", "use crate::numerics::lr;\nuse crate::hf::args::Args;\n"),
            file("lib.rs", "pub use crate::trainer::run;\n"),
        ],
    );
    assert_eq!(bad.len(), 4, "{bad:#?}");
    assert!(bad[0].starts_with("hf/args.rs:2: hf uses `crate::trainer`"), "{}", bad[0]);
    assert!(bad[1].starts_with("numerics/lr.rs:1: `crate::profile` is no layer"), "{}", bad[1]);
    assert!(bad[2].starts_with("numerics/lr.rs:2: `crate::{...}`"), "{}", bad[2]);
    assert!(bad[3].starts_with("extra/x.rs: folder 'extra' is not a layer"), "{}", bad[3]);
}
