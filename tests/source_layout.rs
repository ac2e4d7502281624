//! The source's shape as people pick it up: no two modules that import
//! each other (directly or round a longer circle), read from the `crate::`
//! paths of every file under src/.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Top-level module of a file under src/: "discover" for src/discover.rs,
/// "cmd" for src/cmd/apply.rs.
fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// module -> the top-level modules its files name as crate::<module>.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let from = module_of(f.strip_prefix(&src).unwrap());
        if from == "main" || from == "lib" {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap();
        // unit tests may reach anywhere: only the module's own code counts
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = graph.entry(from.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != from {
                deps.insert(name);
            }
        }
    }
    graph
}

#[test]
fn no_modules_import_each_other() {
    let graph = imports();
    let mut circles = Vec::new();
    // a circle through `start`: a path back to it (depth-first, small graph)
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    circles.push(path.join(" -> ") + " -> " + start);
                } else if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// A file a person can hold in mind: none under src/ over 700 lines.
#[test]
fn no_source_file_is_over_700_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let long: Vec<String> = (files.iter())
        .map(|f| (f, fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 700)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "over 700 lines: {long:?}");
}

/// The only places under src/ with unsafe code, each with why no safe
/// binding serves: every other system call goes through rustix (see
/// ARCHITECTURE.md's dependency table). The count is of `unsafe` blocks,
/// functions, impls, traits and extern blocks in the file.
const UNSAFE_ALLOWED: &[(&str, usize, &str)] = &[(
    "lease/tracepoint.rs",
    8,
    "perf_event_open and its ioctls (perf-event-open-sys binds them unsafe only), \
     the descriptor it returns, the page size, and the mmap'd ring buffer's \
     mapping, header reads and unmapping",
)];

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The `unsafe` keywords that open unsafe code in `text` (not a word that
/// contains it, such as `unsafe_char`, nor one in a comment), as 1-based
/// lines.
fn unsafe_code_lines(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for (at, word) in text.match_indices("unsafe") {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        if text[line_start..at].contains("//") || text[..at].ends_with(is_ident) {
            continue;
        }
        // what follows, across line ends: `unsafe\n{` opens a block too
        let after = text[at + word.len()..].trim_start();
        let opens = after.starts_with('{')
            || (["fn", "impl", "extern", "trait"].iter()).any(|w| {
                after
                    .strip_prefix(w)
                    .is_some_and(|r| !r.starts_with(is_ident))
            });
        if opens {
            found.push(text[..at].matches('\n').count() + 1);
        }
    }
    found
}

/// blkqos runs as root: what it opens and renames is its security
/// boundary, so no hand-written unsafe system call outside the places
/// listed in UNSAFE_ALLOWED (and no more of them there than listed).
#[test]
fn no_unsafe_code_outside_the_allowed_places() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let lines = unsafe_code_lines(&fs::read_to_string(f).unwrap());
        let allowed = (UNSAFE_ALLOWED.iter())
            .find(|(file, _, _)| *file == rel)
            .map_or(0, |(_, n, _)| *n);
        if lines.len() > allowed {
            wrong.push(format!(
                "src/{rel}: unsafe code at line(s) {lines:?}, {allowed} allowed"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe code outside the allowed places (use a safe binding: rustix; \
         or add the place, with why, to UNSAFE_ALLOWED):\n{}",
        wrong.join("\n")
    );
    // each allowed place still exists, so the list does not outlive its reason
    for (file, _, why) in UNSAFE_ALLOWED {
        assert!(src.join(file).is_file(), "src/{file} ({why}) is gone");
    }
}

#[test]
fn unsafe_code_is_told_from_words_and_comments() {
    let text = "let unsafe_char = 1;\n// an unsafe { in a comment\n\
                let x = unsafe { f() };\nunsafe fn g() {}\nunsafe impl Send for T {}\n\
                unsafe extern \"C\" {}\nlet y = unsafe\n{ h() };\nis_unsafe(fn_x);\n";
    assert_eq!(unsafe_code_lines(text), [3, 4, 5, 6, 7]);
}
