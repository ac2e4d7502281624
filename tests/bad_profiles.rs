//! A corpus of invalid profiles: every one is refused with exit 2 and
//! `file:line:column: ...`, saying what was expected, before anything is
//! written, and none makes the command panic.

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::Env;

const RULE: &str = "[[rule]]\nname = \"r\"\n";

/// (case, profile text); the text is bytes so that non-UTF-8 fits.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut c: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |name: &str, text: String| c.push((name.to_string(), text.into_bytes()));

    // TOML syntax
    add("unclosed table header", "[[rule\nname = \"r\"\n".into());
    add("unclosed string", "[[rule]]\nname = \"r\n".into());
    add("missing value", "[[rule]]\nname =\n".into());
    add("missing equals", "[[rule]]\nname \"r\"\n".into());
    add("bare word value", "[[rule]]\nname = r\n".into());
    add("duplicate key", format!("{RULE}name = \"s\"\n"));
    add("duplicate table", "[defaults]\n[defaults]\n".into());
    add(
        "unclosed inline table",
        format!("{RULE}match = {{ name = \"a\"\n"),
    );
    add(
        "unclosed array",
        format!("{RULE}match = {{ name = [\"a\" }}\n"),
    );
    add(
        "trailing garbage",
        format!("{RULE}cpu_lat_limit_us = 10 10\n"),
    );
    add("bad escape", "[[rule]]\nname = \"\\q\"\n".into());
    add("invalid key char", format!("{RULE}cpu lat = 1\n"));
    add(
        "table redefined as value",
        "defaults = 1\n[defaults]\n".into(),
    );
    add(
        "array of tables vs table",
        "[rule]\nname = \"r\"\n[[rule]]\nname = \"s\"\n".into(),
    );
    add("lone bracket", "[\n".into());
    add("control character", "[[rule]]\nname = \"a\u{1}b\"\n".into());
    add(
        "leading zero integer",
        format!("{RULE}cpu_lat_limit_us = 010\n"),
    );
    add(
        "integer overflow",
        format!("{RULE}cpu_lat_limit_us = 99999999999999999999\n"),
    );
    // unknown keys
    add("unknown top-level key", format!("rules = 1\n{RULE}"));
    add("unknown rule key", format!("{RULE}cpu_lat_limt_us = 10\n"));
    add(
        "unknown defaults key",
        format!("[defaults]\ntimeout = 3\n{RULE}"),
    );
    add(
        "unknown match key",
        format!("{RULE}match = {{ vendor = \"x\" }}\n"),
    );
    add(
        "misspelled match",
        format!("{RULE}matches = {{ name = \"x\" }}\n"),
    );
    // wrong types
    add("name is an integer", "[[rule]]\nname = 1\n".into());
    add("name is a table", "[[rule]]\nname = { a = 1 }\n".into());
    add("rule is a table", "[rule]\nname = \"r\"\n".into());
    add("rule is a string", "rule = \"r\"\n".into());
    add("defaults is an array", format!("defaults = [1]\n{RULE}"));
    add(
        "limit is a float",
        format!("{RULE}cpu_lat_limit_us = 1.5\n"),
    );
    add(
        "limit is a bool",
        format!("{RULE}cpu_lat_limit_us = true\n"),
    );
    add(
        "limit is a word",
        format!("{RULE}cpu_lat_limit_us = \"fast\"\n"),
    );
    add(
        "limit is an array",
        format!("{RULE}cpu_lat_limit_us = [1]\n"),
    );
    add(
        "timeout is a string",
        format!("{RULE}cpu_lat_timeout_ms = \"3\"\n"),
    );
    add(
        "timeout is a float",
        format!("{RULE}cpu_lat_timeout_ms = 3.0\n"),
    );
    add("fallback is a bool", format!("{RULE}fallback = true\n"));
    add("fallback unknown", format!("{RULE}fallback = \"pm-qos\"\n"));
    add(
        "rotational is a string",
        format!("{RULE}match = {{ rotational = \"no\" }}\n"),
    );
    add(
        "removable is an integer",
        format!("{RULE}match = {{ removable = 0 }}\n"),
    );
    add(
        "name glob is an integer",
        format!("{RULE}match = {{ name = 5 }}\n"),
    );
    add(
        "name glob list has a table",
        format!("{RULE}match = {{ name = [\"a\", {{ b = 1 }}] }}\n"),
    );
    add(
        "property is a string",
        format!("{RULE}match = {{ property = \"ID\" }}\n"),
    );
    add(
        "property value is an integer",
        format!("{RULE}match = {{ property = {{ ID = 1 }} }}\n"),
    );
    add(
        "queue value is a table",
        format!("{RULE}[rule.queue]\nscheduler = {{ a = 1 }}\n"),
    );
    add(
        "queue value is multi-line",
        format!("{RULE}[rule.queue]\nscheduler = \"none\\nmq\"\n"),
    );
    // values the kernel refuses at every apply (the attack's finding)
    add(
        "queue value with a NUL",
        format!("{RULE}[rule.queue]\nscheduler = \"none\\u0000\"\n"),
    );
    add(
        "queue value with blanks around it",
        format!("{RULE}[rule.queue]\nread_ahead_kb = \"  128  \"\n"),
    );
    add(
        "queue value below -1",
        format!("{RULE}[rule.queue]\nread_ahead_kb = -5\n"),
    );
    // queue values no kernel takes, or that never read back as written
    for (attr, value) in [
        ("nr_requests", "\"abc\""),
        ("nr_requests", "\"-5\""),
        ("nr_requests", "-1"),
        ("nr_requests", "2"),
        ("nr_requests", "\"+64\""),
        ("nr_requests", "\"064\""),
        ("nr_requests", "4294967296"),
        ("read_ahead_kb", "\"lots\""),
        ("read_ahead_kb", "130"),
        ("rotational", "\"yes\""),
        ("rotational", "true"),
        ("rotational", "2"),
        ("add_random", "-1"),
        ("iostats", "\"on\""),
        ("nomerges", "3"),
        ("rq_affinity", "\"same\""),
        ("io_timeout", "0"),
        ("wbt_lat_usec", "-2"),
        ("write_cache", "\"on\""),
        ("write_cache", "1"),
        ("write_cache", "\"none\""),
        ("scheduler", "5"),
        ("scheduler", "\"mq deadline\""),
        ("scheduler", "\"a-scheduler-name-too-long\""),
        ("max_sectors_kb", "\"big\""),
        ("logical_block_size", "4096"),
        ("no_such_attribute", "1"),
    ] {
        add(
            &format!("queue.{attr} = {value}"),
            format!("{RULE}[rule.queue]\n{attr} = {value}\n"),
        );
    }
    add(
        "transport unknown",
        format!("{RULE}match = {{ transport = \"fibre\" }}\n"),
    );
    add(
        "transport is an integer",
        format!("{RULE}match = {{ transport = 1 }}\n"),
    );
    // out of range and negative
    add("limit negative", format!("{RULE}cpu_lat_limit_us = -1\n"));
    add(
        "limit very negative",
        format!("{RULE}cpu_lat_limit_us = -100\n"),
    );
    add(
        "limit above max",
        format!("{RULE}cpu_lat_limit_us = 100001\n"),
    );
    add("timeout zero", format!("{RULE}cpu_lat_timeout_ms = 0\n"));
    add(
        "timeout negative",
        format!("{RULE}cpu_lat_timeout_ms = -3\n"),
    );
    add(
        "timeout above max",
        format!("{RULE}cpu_lat_timeout_ms = 60001\n"),
    );
    add(
        "defaults limit above max",
        format!("[defaults]\ncpu_lat_limit_us = 200000\n{RULE}"),
    );
    add(
        "defaults timeout zero",
        format!("[defaults]\ncpu_lat_timeout_ms = 0\n{RULE}"),
    );
    // bad globs and regexes
    add(
        "glob unclosed class",
        format!("{RULE}match = {{ name = \"nvme[\" }}\n"),
    );
    add(
        "glob only negation",
        format!("{RULE}match = {{ model = \"!\" }}\n"),
    );
    add(
        "glob bad alternation",
        format!("{RULE}match = {{ serial = \"{{a,b\" }}\n"),
    );
    add(
        "regex unclosed group",
        format!("{RULE}match = {{ property = {{ ID_MODEL = \"(abc\" }} }}\n"),
    );
    add(
        "regex bad repetition",
        format!("{RULE}match = {{ property = {{ ID_MODEL = \"*x\" }} }}\n"),
    );
    add(
        "regex bad class",
        format!("{RULE}match = {{ property = {{ ID_MODEL = \"[z-a]\" }} }}\n"),
    );
    // duplicate and missing rules
    add("duplicate rule names", format!("{RULE}{RULE}"));
    add(
        "rule without name",
        "[[rule]]\ncpu_lat_limit_us = 10\n".into(),
    );
    add("empty rule name", "[[rule]]\nname = \"\"\n".into());
    add("empty file", String::new());
    add("only comments", "# nothing here\n".into());
    add(
        "only defaults",
        "[defaults]\ncpu_lat_timeout_ms = 3\n".into(),
    );
    // deeply nested and huge
    add(
        "deeply nested arrays",
        format!(
            "{RULE}match = {{ name = {}{} }}\n",
            "[".repeat(5000),
            "]".repeat(5000)
        ),
    );
    add(
        "deeply nested inline tables",
        format!(
            "{RULE}x = {}1{}\n",
            "{ a = ".repeat(3000),
            " }".repeat(3000)
        ),
    );
    add(
        "huge file",
        format!(
            "{RULE}{}",
            "# padding padding padding padding\n".repeat(40_000)
        ),
    );
    add(
        "huge string",
        format!(
            "{RULE}match = {{ model = \"{}\" }}\n",
            "a".repeat(2_000_000)
        ),
    );
    let mut v = c;
    // not text at all
    v.push((
        "non-UTF-8".into(),
        b"[[rule]]\nname = \"\xff\xfe\"\n".to_vec(),
    ));
    v.push((
        "binary garbage".into(),
        vec![0x7f, b'E', b'L', b'F', 0, 0, 0xff, 0x10],
    ));
    v.push(("UTF-16 with BOM".into(), vec![0xff, 0xfe, b'[', 0, b'[', 0]));
    v
}

#[test]
fn every_invalid_profile_is_refused_with_a_position_and_writes_nothing() {
    let env = Env::zoo(Abi::Queue);
    let before = env.snapshot();
    let cases = corpus();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (i, (name, text)) in cases.iter().enumerate() {
        let path = env.work.join(format!("bad-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let r = env.run(&["apply", p]);
        let prefix = format!("blkqos: error: {p}:");
        let position = r.stderr.strip_prefix(&prefix).and_then(|rest| {
            let mut it = rest.splitn(3, ':');
            let line = it.next()?.parse::<usize>().ok()?;
            let col = it.next()?.parse::<usize>().ok()?;
            Some((line, col, it.next()?.to_string()))
        });
        let ok = r.code == 2
            && !r.stderr.contains("panicked")
            && position
                .as_ref()
                .is_some_and(|(l, c, msg)| *l >= 1 && *c >= 1 && msg.contains("expected"));
        if !ok {
            failures.push(format!("{name}: exit {} stderr {:?}", r.code, r.stderr));
        }
        let check = env.run(&["check", p]);
        if check.code != 2 {
            failures.push(format!("{name}: check exit {}", check.code));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!(env.snapshot(), before, "nothing written");
    assert!(!env.state.exists(), "no state created");
}

/// Each `[rule.queue]` value is held to what that attribute's store
/// function in the kernel parses (and what then reads back as written):
/// anything else fails every apply with EINVAL or a read-back mismatch,
/// so `check` refuses it, saying where and what the attribute takes.
#[test]
fn a_queue_value_the_kernel_never_takes_is_refused_saying_what_it_takes() {
    let env = Env::zoo(Abi::Queue);
    for (attr, value, expected) in [
        (
            "nr_requests",
            "\"abc\"",
            "expected an integer from 4 to 4294967295, found string \"abc\"",
        ),
        (
            "nr_requests",
            "\"-5\"",
            "expected an integer from 4 to 4294967295, found string \"-5\"",
        ),
        (
            "read_ahead_kb",
            "\"lots\"",
            "expected a multiple of 4 from 0 to 4294967292",
        ),
        (
            "rotational",
            "\"yes\"",
            "expected 0 or 1, found string \"yes\"",
        ),
        (
            "write_cache",
            "\"on\"",
            "expected \"write back\" or \"write through\", found string \"on\"",
        ),
        (
            "no_such_attribute",
            "1",
            "not a writable queue attribute; expected one of add_random, ",
        ),
    ] {
        let p = env.profile("p.toml", &format!("{RULE}[rule.queue]\n{attr} = {value}\n"));
        let p = p.to_str().unwrap();
        let r = env.run(&["check", p]);
        assert_eq!(r.code, 2, "{attr} = {value}: {}", r.stderr);
        r.assert_stderr_has(&format!(
            "{p}:4:{}: queue.{attr}: {expected}",
            attr.len() + 4
        ));
    }
    // what the kernel takes passes, a number given as a string too
    let ok = env.profile(
        "ok.toml",
        &format!(
            "{RULE}[rule.queue]\nnr_requests = \"64\"\nread_ahead_kb = 0\nrotational = \"1\"\n\
             add_random = 0\niostats = 1\nstable_writes = 0\nnomerges = 2\nrq_affinity = 2\n\
             io_poll = 0\nio_poll_delay = -1\nio_timeout = 30000\nwbt_lat_usec = 0\n\
             write_cache = \"write through\"\nscheduler = \"mq-deadline\"\n\
             max_sectors_kb = 1280\ndiscard_max_bytes = 0\n"
        ),
    );
    let r = env.run(&["check", ok.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}
