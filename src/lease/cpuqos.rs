//! The user-space lease's hand on the CPUs: each CPU's
//! `power/pm_qos_resume_latency_us`, written while a lease holds the CPU
//! and put back when it lapses.
//!
//! The value a CPU had before blkqos held it (set by an admin, TuneD or
//! CRI-O) is its *original*: a lease writes the stricter of the original
//! and its own limit, never a looser one, and writes the original back
//! when it lapses. A value that someone else wrote while the lease held is
//! reported and becomes the original (it is what they want once the lease
//! lapses); a lapse leaves such a value as it is.

use crate::abi::resume;
use crate::state::LeaseSaved;
use crate::sysfs::Sysfs;
use std::collections::{BTreeMap, BTreeSet};

/// The attribute of one CPU, relative to the sysfs root.
/// The CPU whose attribute `path` is (the inverse of [`attr`]).
pub fn cpu_of(path: &str) -> Option<u32> {
    (path.strip_prefix("devices/system/cpu/cpu"))
        .and_then(|r| r.strip_suffix("/power/pm_qos_resume_latency_us"))
        .and_then(|n| n.parse().ok())
}

pub fn attr(cpu: u32) -> String {
    format!("devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// What a lease of `limit_us` writes over `original`: never looser.
pub fn target(original: &str, limit_us: u64) -> String {
    resume::encode(resume::strictest(
        resume::decode(original).unwrap_or(None),
        Some(limit_us),
    ))
}

/// Something the writer met and did not do as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Someone else wrote the CPU's value while a lease held it.
    Changed {
        cpu: u32,
        wrote: String,
        found: String,
    },
    /// The attribute could not be read or written.
    Failed { cpu: u32, error: String },
    /// The CPU left the tree (hot-removed) while the lease knew it: its
    /// original cannot matter any more and is forgotten.
    Gone { cpu: u32, original: String },
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Changed { cpu, wrote, found } => write!(
                f,
                "cpu{cpu}: pm_qos_resume_latency_us was changed to {found:?} by someone else while the lease held it at {wrote:?}; {found:?} is kept as the value to put back"
            ),
            Note::Failed { cpu, error } => write!(f, "cpu{cpu}: {error}"),
            Note::Gone { cpu, original } => write!(
                f,
                "cpu{cpu}: gone from {}; its saved original {original:?} is forgotten",
                attr(*cpu)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cpu {
    original: String,
    /// What the lease wrote, while it holds the CPU.
    held: Option<String>,
}

/// Every CPU a lease holds or held; what is saved to put them back.
#[derive(Debug, Clone, Default)]
pub struct CpuQos {
    cpus: BTreeMap<u32, Cpu>,
    /// CPUs whose value could not be read, reported once.
    unreadable: BTreeSet<u32>,
    /// CPUs whose last write failed, with the value: tried again at each
    /// step, reported once per value.
    unwritable: BTreeMap<u32, String>,
}

/// Whether `found` is a value a lease over `saved`'s original writes (or
/// the original itself): a killed run's, safe to put back.
pub fn ours(saved: &LeaseSaved, found: &str) -> bool {
    found == saved.original || (saved.limits.iter()).any(|&l| target(&saved.original, l) == found)
}

impl CpuQos {
    /// The CPUs held now, with what was written.
    pub fn held(&self) -> impl Iterator<Item = (u32, &str)> {
        self.cpus
            .iter()
            .filter_map(|(&c, s)| s.held.as_deref().map(|h| (c, h)))
    }

    /// The original of each CPU ever held, for the state file.
    pub fn originals(&self) -> impl Iterator<Item = (u32, &str)> {
        self.cpus.iter().map(|(&c, s)| (c, s.original.as_str()))
    }

    /// Whether bringing the CPUs to `wanted` writes anything, from what
    /// the lease knows (no read): a renewal that changes nothing needs
    /// neither the state lock nor a read.
    pub fn needs(&self, wanted: &BTreeMap<u32, u64>) -> bool {
        let held = self.held().any(|(c, _)| !wanted.contains_key(&c));
        held || (wanted.iter()).any(|(&cpu, &limit)| !self.holds_at(cpu, limit))
    }

    /// Whether `cpu` is held at what `limit` writes over its original:
    /// nothing to write, nothing to read.
    fn holds_at(&self, cpu: u32, limit: u64) -> bool {
        (self.cpus.get(&cpu))
            .is_some_and(|e| e.held.as_deref() == Some(target(&e.original, limit).as_str()))
    }

    /// Take in what another run told the lease through the state file,
    /// under the state lock: `apply` taking a CPU over (its value is now
    /// the one under the hold) or `restore` giving one its original back.
    /// A CPU held stays held at what it reads now when that is a value a
    /// lease writes over the new original.
    pub fn resync(&mut self, sysfs: &Sysfs, leases: &BTreeMap<String, LeaseSaved>) {
        for (&cpu, e) in &mut self.cpus {
            let Some(s) = leases.get(&attr(cpu)) else {
                continue;
            };
            if s.original == e.original {
                continue;
            }
            e.original = s.original.clone();
            if e.held.is_some()
                && let Ok(found) = read(sysfs, cpu)
                && ours(s, &found)
            {
                e.held = Some(found);
            }
        }
    }

    /// Take over a CPU that a killed run left held and that could not be
    /// put back: its saved original stays the original, and the value
    /// found is treated as this run's, so that the next step writes the
    /// original again (a value someone else wrote since is not taken).
    pub fn take_over(&mut self, sysfs: &Sysfs, saved: &BTreeMap<String, LeaseSaved>) {
        for (path, s) in saved {
            let Some(cpu) = cpu_of(path) else {
                continue;
            };
            if let Ok(found) = read(sysfs, cpu)
                && found != s.original
                && ours(s, &found)
            {
                self.cpus.insert(
                    cpu,
                    Cpu {
                        original: s.original.clone(),
                        held: Some(found),
                    },
                );
            }
        }
    }

    /// Note the original of each of `cpus` not seen yet, writing nothing:
    /// saved before a lease first writes there, so that what a killed run
    /// left can be put back. Returns what could not be read, and whether
    /// an original was noted.
    pub fn adopt(
        &mut self,
        sysfs: &Sysfs,
        cpus: impl IntoIterator<Item = u32>,
    ) -> (Vec<Note>, bool) {
        let mut notes = Vec::new();
        let mut changed = false;
        for cpu in cpus {
            if self.cpus.contains_key(&cpu) {
                continue;
            }
            match read(sysfs, cpu) {
                Ok(original) => {
                    self.cpus.insert(
                        cpu,
                        Cpu {
                            original,
                            held: None,
                        },
                    );
                    changed = true;
                }
                Err(n) => {
                    if self.unreadable.insert(cpu) {
                        notes.push(n);
                    }
                }
            }
        }
        (notes, changed)
    }

    /// What bringing the CPUs to `wanted` (CPU -> limit; a CPU not named
    /// is free) takes, with the originals brought up to date: a CPU is
    /// read only where its value is to change (held anew, another limit,
    /// let go), so a lease that holds costs no read. Write the changes
    /// with [`CpuQos::write`] once the originals are saved (`changed`).
    pub fn plan(&mut self, sysfs: &Sysfs, wanted: &BTreeMap<u32, u64>) -> Plan {
        let mut plan = Plan::default();
        let cpus: BTreeSet<u32> = (wanted.keys().copied())
            .chain(self.held().map(|(c, _)| c))
            .collect();
        for cpu in cpus {
            let want = wanted.get(&cpu).copied();
            if want.is_some_and(|limit| self.holds_at(cpu, limit)) {
                continue;
            }
            let found = match read(sysfs, cpu) {
                Ok(v) => {
                    self.unreadable.remove(&cpu);
                    v
                }
                Err(_) if gone(sysfs, cpu) => {
                    if let Some(e) = self.cpus.remove(&cpu) {
                        plan.notes.push(Note::Gone {
                            cpu,
                            original: e.original,
                        });
                        plan.changed = true;
                    }
                    self.unreadable.remove(&cpu);
                    self.unwritable.remove(&cpu);
                    continue;
                }
                Err(n) => {
                    // once, not at every step until it reads again
                    if self.unreadable.insert(cpu) {
                        plan.notes.push(n);
                    }
                    continue;
                }
            };
            let entry = self.cpus.entry(cpu).or_insert_with(|| {
                plan.changed = true;
                Cpu {
                    original: found.clone(),
                    held: None,
                }
            });
            match &entry.held {
                Some(wrote) if *wrote != found => {
                    plan.notes.push(Note::Changed {
                        cpu,
                        wrote: wrote.clone(),
                        found: found.clone(),
                    });
                    entry.original = found.clone();
                    plan.changed = true;
                }
                None if entry.original != found => {
                    // changed while no lease held it: theirs is the original
                    entry.original = found.clone();
                    plan.changed = true;
                }
                _ => {}
            }
            // a lapse puts the original back: unchanged when someone
            // else's value just became it
            let next = match want {
                Some(limit) => target(&entry.original, limit),
                None => entry.original.clone(),
            };
            if next == found {
                entry.held = want.map(|_| next);
            } else {
                plan.writes.push((cpu, next, want.is_some()));
            }
        }
        plan
    }

    /// Write what `plan` found to change. A CPU whose write fails stays
    /// as it was: held (its original kept) if it was.
    pub fn write(&mut self, sysfs: &Sysfs, writes: Vec<(u32, String, bool)>) -> Vec<Note> {
        let mut notes = Vec::new();
        for (cpu, value, hold) in writes {
            let path = attr(cpu);
            match sysfs.write(&path, &value) {
                Ok(()) => {
                    self.unwritable.remove(&cpu);
                    if let Some(e) = self.cpus.get_mut(&cpu) {
                        e.held = hold.then_some(value);
                    }
                }
                Err(e) => {
                    if self.unwritable.get(&cpu) != Some(&value) {
                        notes.push(Note::Failed {
                            cpu,
                            error: format!("cannot write {value:?} to {path}: {e}"),
                        });
                    }
                    self.unwritable.insert(cpu, value);
                }
            }
        }
        notes
    }

    /// [`CpuQos::plan`] and [`CpuQos::write`] at once, for the tests.
    #[cfg(test)]
    pub fn sync(&mut self, sysfs: &Sysfs, wanted: &BTreeMap<u32, u64>) -> (Vec<Note>, bool) {
        let plan = self.plan(sysfs, wanted);
        let mut notes = plan.notes;
        notes.extend(self.write(sysfs, plan.writes));
        (notes, plan.changed)
    }
}

/// What [`CpuQos::plan`] found.
#[derive(Debug, Default)]
pub struct Plan {
    pub notes: Vec<Note>,
    /// An original changed: the state must be saved before the writes.
    pub changed: bool,
    /// (CPU, value, whether the lease holds it after).
    pub writes: Vec<(u32, String, bool)>,
}

/// A CPU's value, when it is one the kernel reports.
fn read(sysfs: &Sysfs, cpu: u32) -> Result<String, Note> {
    let path = attr(cpu);
    match sysfs.read(&path) {
        Ok(v) if resume::decode(&v).is_some() => Ok(v),
        Ok(v) => Err(Note::Failed {
            cpu,
            error: format!("{path} reads {v:?}; expected \"n/a\" or an integer"),
        }),
        Err(e) => Err(Note::Failed {
            cpu,
            error: format!("cannot read {path}: {e}"),
        }),
    }
}

/// Whether the CPU left the tree (hot-removed: its device is gone, not
/// merely offline, which keeps its attributes).
fn gone(sysfs: &Sysfs, cpu: u32) -> bool {
    !sysfs.exists(&format!("devices/system/cpu/cpu{cpu}"))
}

/// What [`put_back`] did not put back.
#[derive(Debug, Default)]
pub struct PutBack {
    /// What was put back (or would be, in a dry run): path, the value
    /// found, the original written.
    pub restored: Vec<(String, String, String)>,
    /// Values someone else wrote since: left, and their entries dropped.
    pub kept: Vec<String>,
    /// CPUs that could not be read or written: their entries stay, for
    /// the next try.
    pub failed: BTreeMap<String, (LeaseSaved, String)>,
}

/// Put back what a run that was killed left (the state's `leases`): each
/// CPU that still has a value a lease writes gets its original; one that
/// someone else changed since keeps theirs, and is reported.
pub fn put_back(sysfs: &Sysfs, saved: &BTreeMap<String, LeaseSaved>, dry_run: bool) -> PutBack {
    let mut out = PutBack::default();
    for (path, s) in saved {
        match sysfs.read(path) {
            Ok(found) if found == s.original => {}
            Ok(found) if ours(s, &found) => match dry_run {
                true => out.restored.push((path.clone(), found, s.original.clone())),
                false => match sysfs.write(path, &s.original) {
                    Ok(()) => out.restored.push((path.clone(), found, s.original.clone())),
                    Err(e) => {
                        let why = format!("cannot put {:?} back in {path}: {e}", s.original);
                        out.failed.insert(path.clone(), (s.clone(), why));
                    }
                },
            },
            Ok(found) => out.kept.push(format!(
                "{path} reads {found:?}, not a value a lease wrote over {:?}: someone else's, left as it is",
                s.original
            )),
            Err(_) if cpu_of(path).is_some_and(|c| gone(sysfs, c)) => out.kept.push(format!(
                "{path}: its CPU is gone; its saved original {:?} is forgotten",
                s.original
            )),
            Err(e) => {
                let why = format!("cannot read {path}: {e}");
                out.failed.insert(path.clone(), (s.clone(), why));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(values: &[&str]) -> (tempfile::TempDir, Sysfs) {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, v) in values.iter().enumerate() {
            let p = dir.path().join(attr(cpu as u32));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("{v}\n")).unwrap();
        }
        let sysfs = Sysfs::new(dir.path());
        (dir, sysfs)
    }

    fn value(dir: &tempfile::TempDir, cpu: u32) -> String {
        fs::read_to_string(dir.path().join(attr(cpu)))
            .unwrap()
            .trim()
            .to_string()
    }

    fn want(pairs: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn a_lease_writes_the_stricter_of_original_and_limit_and_puts_the_original_back() {
        // cpu0 free, cpu1 set to 5 us by an admin, cpu2 to n/a
        let (dir, sysfs) = tree(&["0", "5", "n/a"]);
        let mut q = CpuQos::default();
        let (notes, changed) = q.sync(&sysfs, &want(&[(0, 10), (1, 10), (2, 10)]));
        assert_eq!(notes, []);
        assert!(changed, "originals are new");
        assert_eq!(
            [value(&dir, 0), value(&dir, 1), value(&dir, 2)],
            ["10", "5", "n/a"]
        );
        assert_eq!(q.held().count(), 3);
        let (notes, changed) = q.sync(&sysfs, &want(&[(0, 10), (1, 10), (2, 10)]));
        assert_eq!((notes, changed), (vec![], false), "nothing new");
        let (notes, _) = q.sync(&sysfs, &want(&[]));
        assert_eq!(notes, []);
        assert_eq!(
            [value(&dir, 0), value(&dir, 1), value(&dir, 2)],
            ["0", "5", "n/a"]
        );
        assert_eq!(q.held().count(), 0);
        assert_eq!(
            q.originals().collect::<Vec<_>>(),
            [(0, "0"), (1, "5"), (2, "n/a")]
        );
    }

    #[test]
    fn a_value_someone_else_wrote_while_held_is_reported_kept_and_not_undone() {
        let (dir, sysfs) = tree(&["0", "0"]);
        let mut q = CpuQos::default();
        q.sync(&sysfs, &want(&[(0, 10), (1, 10)]));
        // TuneD writes cpu0 while the lease holds it: a lease that holds
        // reads nothing, so it is seen when the value is to change
        fs::write(dir.path().join(attr(0)), "50\n").unwrap();
        let (notes, changed) = q.sync(&sysfs, &want(&[(0, 10), (1, 10)]));
        assert_eq!((notes.len(), changed), (0, false), "no read while held");
        let (notes, changed) = q.sync(&sysfs, &want(&[(0, 5), (1, 10)]));
        assert_eq!(
            notes,
            [Note::Changed {
                cpu: 0,
                wrote: "10".into(),
                found: "50".into()
            }]
        );
        assert!(changed);
        assert_eq!(value(&dir, 0), "5", "held on, strictest of 50 and 5");
        // someone else again, then the lapse: theirs stays
        fs::write(dir.path().join(attr(0)), "2\n").unwrap();
        let (notes, _) = q.sync(&sysfs, &want(&[]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(value(&dir, 0), "2");
        assert_eq!(value(&dir, 1), "0");
        // a value changed while nothing held it becomes the original
        fs::write(dir.path().join(attr(1)), "30\n").unwrap();
        let (notes, changed) = q.sync(&sysfs, &want(&[(1, 10)]));
        assert_eq!((notes.len(), changed), (0, true));
        q.sync(&sysfs, &want(&[]));
        assert_eq!(value(&dir, 1), "30");
    }

    #[test]
    fn a_cpu_that_cannot_be_put_back_stays_held_and_a_bad_one_is_reported_once() {
        let (dir, sysfs) = tree(&["0", "0"]);
        let mut q = CpuQos::default();
        q.sync(&sysfs, &want(&[(0, 10), (1, 10)]));
        // cpu1's attribute becomes a directory: its write fails
        let p1 = dir.path().join(attr(1));
        fs::remove_file(&p1).unwrap();
        fs::create_dir(&p1).unwrap();
        let (notes, _) = q.sync(&sysfs, &want(&[]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(value(&dir, 0), "0");
        assert_eq!(
            q.held().map(|(c, _)| c).collect::<Vec<_>>(),
            [1],
            "still held"
        );
        let (notes, _) = q.sync(&sysfs, &want(&[]));
        assert_eq!(
            notes.len(),
            0,
            "an unreadable CPU is reported once: {notes:?}"
        );
    }

    #[test]
    fn unreadable_cpus_are_reported_and_the_others_held() {
        let (dir, sysfs) = tree(&["0", "garbage"]);
        let mut q = CpuQos::default();
        // cpu7 is not in the tree (hot-removed, or never there): nothing to say
        let (notes, _) = q.sync(&sysfs, &want(&[(0, 10), (1, 10), (7, 10)]));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0]
                .to_string()
                .contains("expected \"n/a\" or an integer")
        );
        assert_eq!(value(&dir, 0), "10");
        assert_eq!(value(&dir, 1), "garbage");
    }

    #[test]
    fn put_back_restores_a_killed_runs_values_and_keeps_someone_elses() {
        let (dir, sysfs) = tree(&["10", "7", "0"]);
        // cpu9 is there but its attribute cannot be read: kept for the next try
        fs::create_dir_all(dir.path().join(attr(9))).unwrap();
        let saved = |original: &str| LeaseSaved {
            original: original.into(),
            limits: [10].into(),
        };
        let map: BTreeMap<String, LeaseSaved> = [
            (attr(0), saved("0")),
            (attr(1), saved("0")),
            (attr(2), saved("0")),
            (attr(9), saved("0")),
        ]
        .into();
        let out = put_back(&sysfs, &map, false);
        assert_eq!(value(&dir, 0), "0", "the killed run's 10 put back");
        assert_eq!(value(&dir, 1), "7", "someone else's 7 left");
        assert_eq!(out.kept.len(), 1, "{out:?}");
        assert!(out.kept[0].contains("someone else's"), "{out:?}");
        assert_eq!(
            out.failed.keys().collect::<Vec<_>>(),
            [&attr(9)],
            "kept for the next try"
        );
    }

    #[test]
    fn a_killed_runs_values_are_told_from_someone_elses() {
        let s = LeaseSaved {
            original: "50".into(),
            limits: [10, 100].into(),
        };
        assert!(ours(&s, "50") && ours(&s, "10"));
        assert!(!ours(&s, "100"), "a looser limit is never written");
        assert!(!ours(&s, "20"));
        let s = LeaseSaved {
            original: "0".into(),
            limits: [0].into(),
        };
        assert!(ours(&s, "n/a") && ours(&s, "0") && !ours(&s, "5"));
    }
}
