//! The values each `[rule.queue]` attribute takes: what its store function
//! in the kernel (block/blk-sysfs.c, elevator.c) parses, narrowed to what
//! then reads back as written, since apply reads every write back and
//! rolls the run back on a difference. Anything else fails every apply.

use super::raw::{Fail, describe};
use toml::{Spanned, Value};

/// What one attribute takes.
#[derive(Clone, Copy)]
enum Takes {
    /// An integer in the range; the kernel parses decimal (kstrtoul and
    /// friends).
    Int {
        min: i64,
        max: i64,
        /// The unit, or what a value means, after the range.
        unit: &'static str,
        /// Why the range is narrower than the parser's, where it is.
        why: &'static str,
    },
    /// A multiple of `step` up to `max`.
    Multiple {
        step: i64,
        max: i64,
        why: &'static str,
    },
    /// One of these words.
    Words(&'static [&'static str]),
    /// An I/O scheduler's name; whether the disk offers it is the plan's
    /// to say.
    Scheduler,
}

/// queue_var_store() refuses more than UINT_MAX.
const UINT_MAX: i64 = u32::MAX as i64;
const FLAG: Takes = Takes::Int {
    min: 0,
    max: 1,
    unit: "",
    why: "",
};

/// Every writable queue attribute of the kernels blkqos knows, by name
/// (sorted: the error lists them in this order).
const ATTRS: &[(&str, Takes)] = &[
    ("add_random", FLAG),
    (
        "discard_max_bytes",
        Takes::Int {
            min: 0,
            max: UINT_MAX,
            unit: "",
            why: "",
        },
    ),
    ("io_poll", FLAG),
    (
        "io_poll_delay",
        Takes::Int {
            min: -1,
            max: i32::MAX as i64,
            unit: " (-1: classic polling)",
            why: "",
        },
    ),
    (
        "io_timeout",
        Takes::Int {
            min: 1,
            max: UINT_MAX,
            unit: " (milliseconds)",
            why: "",
        },
    ),
    ("iostats", FLAG),
    ("iostats_passthrough", FLAG),
    (
        "max_sectors_kb",
        Takes::Int {
            min: 0,
            max: UINT_MAX,
            unit: "",
            why: "",
        },
    ),
    (
        "nomerges",
        Takes::Int {
            min: 0,
            max: 2,
            unit: "",
            why: "; a larger number reads back as 1",
        },
    ),
    (
        "nr_requests",
        Takes::Int {
            min: 4,
            max: UINT_MAX,
            unit: "",
            why: "; the kernel raises a smaller number to 4, which does not read back as written",
        },
    ),
    (
        "read_ahead_kb",
        Takes::Multiple {
            step: 4,
            max: UINT_MAX - 3,
            why: "; the kernel keeps whole pages, of 4 KiB at least, and another number reads back rounded down",
        },
    ),
    ("rotational", FLAG),
    (
        "rq_affinity",
        Takes::Int {
            min: 0,
            max: 2,
            unit: "",
            why: "; the kernel ignores a larger number",
        },
    ),
    ("scheduler", Takes::Scheduler),
    ("stable_writes", FLAG),
    (
        "wbt_lat_usec",
        Takes::Int {
            min: 0,
            max: i64::MAX / 1000,
            unit: " (microseconds, 0: no throttling)",
            why: "; -1 (the default) reads back as the default's value, not -1",
        },
    ),
    (
        "write_cache",
        Takes::Words(&["write back", "write through"]),
    ),
];

/// The kernel copies a scheduler's name into ELV_NAME_MAX (16) bytes with
/// its terminating NUL: a longer one is cut short.
const SCHEDULER_NAME_MAX: usize = 15;

/// `value` of queue attribute `attr` as it is written, or why no kernel
/// takes it.
pub(super) fn value(attr: &str, value: &Spanned<Value>) -> Result<String, Fail> {
    let Some(&(_, takes)) = ATTRS.iter().find(|(name, _)| *name == attr) else {
        let names: Vec<&str> = ATTRS.iter().map(|(name, _)| *name).collect();
        return Err((
            value.span(),
            format!(
                "queue.{}: not a writable queue attribute; expected one of {}",
                attr.escape_debug(),
                names.join(", ")
            ),
        ));
    };
    let v = value.get_ref();
    let fail = |expected: String, why: &str| {
        (
            value.span(),
            format!(
                "queue.{attr}: expected {expected}, found {}{why}",
                describe(v)
            ),
        )
    };
    // why a range is narrower than the parser's matters only to a number
    let number = integer(v);
    let why_not = |why| if number.is_some() { why } else { "" };
    match takes {
        Takes::Int {
            min,
            max,
            unit,
            why,
        } => number
            .filter(|n| (min..=max).contains(n))
            .map(|n| n.to_string())
            .ok_or_else(|| fail(int_range(min, max, unit), why_not(why))),
        Takes::Multiple { step, max, why } => number
            .filter(|n| (0..=max).contains(n) && n % step == 0)
            .map(|n| n.to_string())
            .ok_or_else(|| {
                fail(
                    format!("a multiple of {step} from 0 to {max}"),
                    why_not(why),
                )
            }),
        Takes::Words(words) => match v.as_str() {
            Some(s) if words.contains(&s) => Ok(s.to_string()),
            _ => {
                let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
                Err(fail(quoted.join(" or "), ""))
            }
        },
        Takes::Scheduler => match v.as_str() {
            Some(s) if is_scheduler_name(s) => Ok(s.to_string()),
            _ => Err(fail(
                format!(
                    "an I/O scheduler's name as the disk's queue/scheduler lists it (\"none\", \"mq-deadline\", ...: letters, digits, - and _, at most {SCHEDULER_NAME_MAX} characters)"
                ),
                "",
            )),
        },
    }
}

fn int_range(min: i64, max: i64, unit: &str) -> String {
    if max - min == 1 {
        format!("{min} or {max}{unit}")
    } else {
        format!("an integer from {min} to {max}{unit}")
    }
}

/// An integer, or a string holding one as the kernel prints it: the
/// written text is compared with what reads back, so "+5" or "05", which
/// the kernel would parse, would still fail.
fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(n) => Some(*n),
        Value::String(s) => s.parse::<i64>().ok().filter(|n| n.to_string() == *s),
        _ => None,
    }
}

fn is_scheduler_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SCHEDULER_NAME_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(attr: &str, toml_value: &str) -> Result<String, String> {
        let doc: toml::Table = toml::from_str(&format!("v = {toml_value}")).unwrap();
        let v = Spanned::new(0..1, doc["v"].clone());
        value(attr, &v).map_err(|(_, e)| e)
    }

    #[test]
    fn numbers_are_written_as_the_kernel_prints_them() {
        assert_eq!(check("nr_requests", "64"), Ok("64".into()));
        assert_eq!(check("nr_requests", "\"64\""), Ok("64".into()));
        assert_eq!(check("io_poll_delay", "\"-1\""), Ok("-1".into()));
        for bad in ["\"+64\"", "\"064\"", "\" 64\"", "\"0x40\"", "64.0", "3"] {
            assert!(check("nr_requests", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ranges_are_the_kernels() {
        assert!(check("nr_requests", "4294967295").is_ok());
        assert!(check("nr_requests", "4294967296").is_err());
        assert!(check("io_timeout", "0").is_err());
        assert!(check("read_ahead_kb", "4294967292").is_ok());
        assert!(check("read_ahead_kb", "4294967296").is_err());
        assert!(check("read_ahead_kb", "6").is_err());
        assert!(check("nomerges", "2").is_ok());
        assert!(check("wbt_lat_usec", "-1").is_err());
        assert_eq!(
            check("rotational", "\"yes\"").unwrap_err(),
            "queue.rotational: expected 0 or 1, found string \"yes\""
        );
    }

    #[test]
    fn words_and_scheduler_names() {
        assert!(check("write_cache", "\"write back\"").is_ok());
        assert!(check("write_cache", "\"none\"").is_err());
        assert!(check("scheduler", "\"mq-deadline\"").is_ok());
        assert!(check("scheduler", "\"[bfq]\"").is_err());
        assert!(check("scheduler", "\"sixteen-letters\"").is_ok());
        assert!(check("scheduler", "\"seventeen-letter\"").is_err());
        assert!(check("scheduler", "\"longer-than-16-chars\"").is_err());
    }

    #[test]
    fn the_table_is_sorted() {
        assert!(ATTRS.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
