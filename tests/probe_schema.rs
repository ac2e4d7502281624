//! What `blkqos probe --json` prints validates against
//! schemas/probe.schema.json: the envelope, a probed disk and a real
//! analysis of recorded-shape runs (the command itself is elsewhere).

#![deny(unsafe_code)]

// the unit tests use every machine, this test two of them
#[path = "support/probe_runs.rs"]
#[allow(dead_code)]
mod probe_runs;

use blkqos::probe::analyze;
use probe_runs::{Machine, PLAN, haltpoll, icelake};
use serde_json::{Value, json};
use std::path::Path;

fn validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/probe.schema.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(schema["$id"], "urn:blkqos:json:3:probe");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    (v.iter_errors(doc))
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The document a probe of one disk of `m` prints.
fn document(m: &Machine, name: &str, driver: &str) -> Value {
    let analysis = analyze(&m.configs, &m.table, &m.record(PLAN));
    json!({
        "schema": blkqos::report::JSON_SCHEMA,
        "command": "probe",
        "changed": false,
        "dry_run": false,
        "devices": [{
            "name": name,
            "path": format!("/dev/{name}"),
            "kernel_knobs": false,
            "cpus": [0, 1, 2, 3],
            "machine": {
                "cpuidle_driver": driver,
                "cpuidle_governor": "menu",
                "guest_halt_poll_ns": if driver == "haltpoll" { json!(200000) } else { Value::Null },
                "virtualized": if driver == "haltpoll" { json!("kvm") } else { Value::Null },
            },
            "table": m.table,
            "configs": m.configs,
            "rounds": PLAN.rounds,
            "run_secs": 2.0,
            "duration_secs": 151.3,
            "cpu_secs": 9.8,
            "reader_cpu": 3,
            "skipped": null,
            "analysis": analysis,
            "rule": null,
        }],
        "warnings": [],
    })
}

#[test]
fn a_probe_document_validates() {
    let v = validator();
    for (m, name, driver) in [
        (icelake(), "nvme0n1", "intel_idle"),
        (haltpoll(), "vda", "haltpoll"),
    ] {
        let doc = document(&m, name, driver);
        let bad = errors(&v, &doc);
        assert!(bad.is_empty(), "{bad:#?}\n{doc:#}");
    }
    // no configuration measured: nulls where numbers were, still valid
    let m = icelake();
    let mut empty = document(&m, "nvme0n1", "intel_idle");
    empty["devices"][0]["analysis"] = json!(analyze(&m.configs, &m.table, &[]));
    assert_eq!(empty["devices"][0]["analysis"]["answer"]["kind"], "no_data");
    let bad = errors(&v, &empty);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_schema_is_tight() {
    let v = validator();
    let doc = document(&icelake(), "nvme0n1", "intel_idle");
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        edit(&mut d);
        !errors(&v, &d).is_empty()
    };
    let a = "/devices/0/analysis";
    assert!(broken(&|d| d["devices"][0]["surprise"] = json!(1)));
    assert!(broken(
        &|d| d.pointer_mut(a).unwrap()["answer"]["kind"] = json!("maybe")
    ));
    assert!(broken(&|d| {
        d.pointer_mut(a).unwrap()["answer"] = json!({"kind": "limit", "limit_us": 4})
    }));
    assert!(broken(&|d| {
        d.pointer_mut(a).unwrap()["configs"][0]["config"] = json!({"kind": "lease", "limit_us": 4})
    }));
    assert!(broken(
        &|d| d.pointer_mut(a).unwrap()["configs"][0]["deep_residency"] = json!(1.5)
    ));
    assert!(broken(&|d| {
        d.pointer_mut(a).unwrap()["configs"][0]["vs_reference"]
            .as_object_mut()
            .unwrap()
            .remove("qd1_p99");
    }));
    assert!(broken(&|d| d["command"] = json!("list")));
    assert!(broken(
        &|d| d["devices"][0]["machine"]["virtualized"] = json!(true)
    ));
}
