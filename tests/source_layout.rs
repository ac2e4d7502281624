//! The source's shape as people pick it up: no two modules that import
//! each other (directly or round a longer circle), read from the `crate::`
//! paths of every file under src/.

#![deny(unsafe_code)]

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

/// The lint the compiler enforces, spelt in two pieces so that this
/// file's own text holds no attribute naming it.
const LINT: &str = concat!("unsafe", "_code");

/// The only places with unsafe code, each with why no safe binding serves:
/// every other system call goes through rustix (see ARCHITECTURE.md's
/// dependency table), and every crate root denies the `unsafe_code` lint,
/// so the compiler refuses unsafe code anywhere else. Each place allows
/// the lint, and the count is how many times the word `unsafe` is in its
/// code (comment lines aside): exactly, so a block taken out and another
/// put in changes the list, and is reviewed.
const UNSAFE_ALLOWED: &[(&str, usize, &str)] = &[
    (
        "src/lease/tracepoint.rs",
        7,
        "perf_event_open and its ioctls (perf-event-open-sys binds them \
         unsafe only), the descriptor it returns, and the mmap'd ring \
         buffer's mapping, header reads and unmapping",
    ),
    (
        "tests/no_openat2.rs",
        2,
        "the seccomp filter that hides openat2 (prctl), installed in a \
         pre_exec closure (CommandExt::pre_exec is itself unsafe)",
    ),
    (
        "tests/state_trust.rs",
        1,
        "setrlimit in a pre_exec closure (CommandExt::pre_exec is itself unsafe)",
    ),
];

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` is in `line` as a word of its own, not inside a longer
/// name (`unsafe_char`, `no_unsafe_code_here`); how many times.
fn count_word(line: &str, word: &str) -> usize {
    (line.match_indices(word))
        .filter(|(at, _)| {
            let before = line[..*at].chars().next_back();
            let after = line[at + word.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
        .count()
}

/// The lines of `text` not comment lines, numbered from 1.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    (text.lines().enumerate())
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(n, l)| (n + 1, l))
}

/// The line of each `unsafe` word in `text` (not one inside a longer name
/// such as `unsafe_char`, nor on a comment line).
fn unsafe_words(text: &str) -> Vec<usize> {
    (code_lines(text))
        .flat_map(|(n, l)| std::iter::repeat_n(n, count_word(l, "unsafe")))
        .collect()
}

/// The lines of `text` that name the lint other than to deny it
/// crate-wide: any `allow`, `expect` or `warn` of it, or a `cfg_attr`
/// around one. An allowed place may hold `allow(unsafe_code)` itself.
fn lint_overrides(text: &str, allowed: bool) -> Vec<usize> {
    let deny = format!("#![deny({LINT})]");
    let allows = [format!("#![allow({LINT})]"), format!("#[allow({LINT})]")];
    (code_lines(text))
        .filter(|(_, l)| count_word(l, LINT) > 0 && l.trim() != deny)
        .filter(|(_, l)| !(allowed && allows.iter().any(|a| l.trim() == a)))
        .map(|(n, _)| n)
        .collect()
}

/// Every crate cargo builds here, found as cargo finds them: by the
/// layout, Cargo.toml naming no target of its own.
fn crate_roots(root: &Path) -> Vec<std::path::PathBuf> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for named in ["[lib]", "[[bin]]", "[[example]]", "[[test]]", "[[bench]]"] {
        assert!(
            !manifest.contains(named),
            "Cargo.toml names a {named} target: add its root to crate_roots"
        );
    }
    assert!(
        !root.join("build.rs").exists(),
        "a build script: add it to crate_roots"
    );
    let mut roots: Vec<_> = (["src/lib.rs", "src/main.rs"].iter())
        .map(|f| root.join(f))
        .filter(|p| p.is_file())
        .collect();
    for dir in ["src/bin", "examples", "tests", "benches"] {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "rs") {
                roots.push(p);
            } else if p.join("main.rs").is_file() {
                roots.push(p.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

/// blkqos runs as root: what it opens and renames is its security
/// boundary, so no hand-written unsafe system call outside the places
/// listed in UNSAFE_ALLOWED. The compiler is the guard (`unsafe_code`
/// denied at every crate root); this checks that every root denies it,
/// that only the listed places allow it, and how much unsafe code each
/// holds.
#[test]
fn no_unsafe_code_outside_the_allowed_places() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deny = format!("#![deny({LINT})]");
    let mut wrong = Vec::new();
    for f in crate_roots(root) {
        let text = fs::read_to_string(&f).unwrap();
        if !text.lines().any(|l| l.trim() == deny) {
            let rel = f.strip_prefix(root).unwrap().display();
            wrong.push(format!("{rel}: a crate root without {deny}"));
        }
    }
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples", "benches"] {
        if root.join(dir).is_dir() {
            sources(&root.join(dir), &mut files);
        }
    }
    files.sort();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(f).unwrap();
        let listed = UNSAFE_ALLOWED.iter().find(|(file, _, _)| *file == rel);
        let overrides = lint_overrides(&text, listed.is_some());
        if !overrides.is_empty() {
            wrong.push(format!("{rel}: {LINT} not denied at line(s) {overrides:?}"));
        }
        if let Some((_, n, _)) = listed {
            let lines = unsafe_words(&text);
            if lines.len() != *n {
                wrong.push(format!(
                    "{rel}: `unsafe` {} times (line(s) {lines:?}), {n} listed",
                    lines.len()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "unsafe code outside the allowed places, or not as listed (use a \
         safe binding: rustix; or list the place, with why and its count, in \
         UNSAFE_ALLOWED):\n{}",
        wrong.join("\n")
    );
    // each allowed place still exists, so the list does not outlive its reason
    for (file, _, why) in UNSAFE_ALLOWED {
        assert!(root.join(file).is_file(), "{file} ({why}) is gone");
    }
}

#[test]
fn unsafe_is_told_from_words_and_comments() {
    let text = format!(
        "let unsafe_char = 1;\n// an unsafe {{ in a comment\n\
         let x = unsafe {{ f() }};\n#![allow({LINT})]\nis_unsafe(fn_x);\n\
         unsafe fn g() {{}} unsafe impl Send for T {{}}\n  /// unsafe\n"
    );
    assert_eq!(unsafe_words(&text), [3, 6, 6]);
}

#[test]
fn only_a_listed_place_may_allow_the_lint() {
    let text = format!(
        "#![deny({LINT})]\n// allow({LINT}) in a comment\n#![allow({LINT})]\n\
         #[allow({LINT})]\n#[allow(dead_code, {LINT})]\n#![cfg_attr(all(), allow({LINT}))]\n\
         #[expect({LINT})]\n#![warn({LINT})]\nfn no_{LINT}_here() {{}}\n"
    );
    assert_eq!(lint_overrides(&text, false), [3, 4, 5, 6, 7, 8]);
    assert_eq!(lint_overrides(&text, true), [5, 6, 7, 8]);
}
