//! Every `--json` document, on success and on failure, validates against
//! its JSON Schema in `schemas/` (draft 2020-12).

#![deny(unsafe_code)]

mod common;
use blkqos::abi::Abi;
use common::{Env, MIXED, NVME_AUTO, Run};
use serde_json::Value;
use std::path::Path;

fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{name}"
    );
    let id = schema["$id"].as_str().unwrap_or_default();
    assert!(
        id.ends_with(&format!(":{}:{name}", blkqos::report::JSON_SCHEMA)),
        "{name}: $id {id:?} names the schema version"
    );
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn errors(validator: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    (validator.iter_errors(doc))
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The run printed one document valid against `name`'s schema.
fn valid(r: &Run, name: &str) -> Value {
    let doc = r.json();
    let bad = errors(&schema(name), &doc);
    assert!(bad.is_empty(), "{name}: {bad:#?}\n{doc:#}");
    doc
}

/// A failed run: exit status `code`, and a document valid against the
/// error schema (and the command's own, which allows an error).
fn failed(r: &Run, code: i32, own: Option<&str>) -> Value {
    assert_eq!(r.code, code, "{}", r.stderr);
    let doc = valid(r, "error");
    if let Some(own) = own {
        valid(r, own);
    }
    doc
}

#[test]
fn every_command_prints_documents_its_schema_describes() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let p = p.to_str().unwrap();

    valid(&env.run(&["list", "--json"]), "list");
    valid(&env.run(&["status", "--json"]), "status");
    valid(&env.run(&["check", p, "--json"]), "check");
    for device in ["nvme0n1", "md0", "sda", "loop0", "zram0"] {
        let doc = valid(&env.run(&["explain", p, device, "--json"]), "explain");
        assert_eq!(doc["devices"][0]["name"], device);
    }
    let dry = valid(&env.run(&["apply", p, "--dry-run", "--json"]), "apply");
    assert_eq!(dry["dry_run"], true);
    let mismatch = env.run(&["verify", p, "--json"]);
    assert_eq!(mismatch.code, 1);
    valid(&mismatch, "verify");

    let applied = env.run(&["apply", p, "--json"]);
    if applied.code == 0 {
        let doc = valid(&applied, "apply");
        assert_eq!(doc["changed"], true);
        valid(&env.run(&["verify", p, "--json"]), "verify");
        valid(&env.run(&["status", "--json"]), "status");
        valid(&env.run(&["restore", "--dry-run", "--json"]), "restore");
        let restored = valid(&env.run(&["restore", "--json"]), "restore");
        assert_eq!(restored["changed"], true);
    } else {
        // not root: the error document
        failed(&applied, 2, Some("apply"));
    }
}

#[test]
fn limits_are_a_mode_and_a_number_not_prose() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let doc = valid(
        &env.run(&["apply", p.to_str().unwrap(), "--dry-run", "--json"]),
        "apply",
    );
    let devices = doc["devices"].as_array().unwrap();
    let limit = |name: &str| devices.iter().find(|d| d["name"] == name).unwrap()["limit"].clone();
    assert_eq!(limit("md0"), serde_json::json!({"mode": "us", "us": 2}));
    let nvme = limit("nvme0n1");
    assert_eq!(nvme["mode"], "auto", "{nvme}");
    assert!(nvme["us"].is_u64(), "{nvme}");
    // what schema 1 printed is refused
    let mut prose = doc.clone();
    prose["devices"][0]["limit"] = Value::from("auto (4 us)");
    assert!(!errors(&schema("apply"), &prose).is_empty());
    let mut extra = doc;
    extra["surprise"] = Value::from(1);
    assert!(
        !errors(&schema("apply"), &extra).is_empty(),
        "no field left out of the schema"
    );
}

#[test]
fn failures_print_the_error_document() {
    let env = Env::zoo(Abi::Queue);
    let bad = env.profile("bad.toml", "[[rule]]\nname = \"r\"\ncpu_lat_limt_us = 3\n");
    let bad = bad.to_str().unwrap();
    let good = env.profile("good.toml", NVME_AUTO);
    let good = good.to_str().unwrap();
    for (args, own) in [
        (vec!["check", bad, "--json"], "check"),
        (vec!["apply", bad, "--json"], "apply"),
        (vec!["apply", bad, "--dry-run", "--json"], "apply"),
        (vec!["verify", bad, "--json"], "verify"),
        (vec!["explain", bad, "nvme0n1", "--json"], "explain"),
        (vec!["explain", good, "nvme99n1", "--json"], "explain"),
        (
            vec!["apply", good, "--dry-run", "--json", "--device", "nvme99n1"],
            "apply",
        ),
        (vec!["apply", "--json", "--frobnicate"], "apply"),
    ] {
        let doc = failed(&env.run(&args), 2, Some(own));
        assert!(doc["failure"]["kind"].is_string(), "{args:?}");
    }
    // a root that is not sysfs
    let nowhere = env.work.join("empty");
    std::fs::create_dir_all(&nowhere).unwrap();
    for (args, own) in [
        (vec!["list", "--json"], "list"),
        (vec!["status", "--json"], "status"),
        (vec!["restore", "--json", "--dry-run"], "restore"),
    ] {
        let doc = failed(&env.run_in(&nowhere, &args), 2, Some(own));
        assert_eq!(doc["failure"]["kind"], "not-sysfs", "{args:?}");
    }
}

#[test]
fn a_failed_apply_lists_its_devices_in_the_apply_schema() {
    if !common::is_root("apply writes only as root") {
        return;
    }
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", MIXED);
    let r = common::Run::from(
        env.faulty_cmd("/sda/queue/cpu_lat_limit_us", "1", libc::ENOSPC)
            .args(["apply", p.to_str().unwrap(), "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = valid(&r, "apply");
    assert_eq!(doc["failure"]["kind"], "write-failed");
    assert!(!doc["devices"].as_array().unwrap().is_empty());
}

#[test]
fn knob_values_are_typed_in_list_and_status() {
    let env = Env::zoo(Abi::Queue);
    let p = env.profile("p.toml", NVME_AUTO);
    assert_eq!(env.run(&["apply", p.to_str().unwrap()]).code, 0);
    let list = valid(&env.run(&["list", "--json"]), "list");
    let nvme = common::device(&list, "nvme0n1");
    assert_eq!(
        nvme["cpu_lat_limit_us"],
        serde_json::json!({"mode": "us", "us": 4}),
        "{nvme}"
    );
    assert_eq!(nvme["cpu_lat_timeout_ms"], 3, "{nvme}");
    let sda = common::device(&list, "sda");
    assert_eq!(
        sda["cpu_lat_limit_us"],
        serde_json::json!({"mode": "off", "us": null}),
        "{sda}"
    );
    let status = valid(&env.run(&["status", "--json"]), "status");
    let target = &common::device(&status, "nvme0n1")["targets"][0];
    assert_eq!(target["cpu_lat_limit_us"]["us"], 4, "{target}");
    assert_eq!(target["cpu_lat_timeout_ms"], 3, "{target}");
    // the tables still show what the kernel reports
    let table = env.run(&["list"]).stdout;
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("nvme0n1 ") && l.contains(" 4 ")),
        "{table}"
    );
}

#[test]
fn status_shows_each_cpus_lease_where_the_kernel_has_one() {
    let env = Env::zoo(Abi::Queue);
    env.fx.set_lease(1, Some((4, 2500)));
    let doc = valid(&env.run(&["status", "--json"]), "status");
    let nvme = (doc["devices"].as_array().unwrap().iter())
        .find(|d| d["name"] == "nvme0n1")
        .unwrap();
    let lease = |cpu: u64| {
        (nvme["cpus"].as_array().unwrap().iter())
            .find(|c| c["cpu"] == cpu)
            .unwrap()["lease"]
            .clone()
    };
    assert_eq!(
        lease(1),
        serde_json::json!({"held": true, "limit_us": 4, "left_us": 2500})
    );
    assert_eq!(
        lease(0),
        serde_json::json!({"held": false, "limit_us": null, "left_us": 0})
    );
    let table = env.run(&["status"]);
    assert!(
        table
            .stdout
            .contains("lease (limit/left): cpu0=- cpu1=4us/2500us"),
        "{}",
        table.stdout
    );

    // kernels without the series (and the RFC layout) have no lease
    for abi in [Abi::None, Abi::Disk] {
        let env = Env::zoo(abi);
        let doc = valid(&env.run(&["status", "--json"]), "status");
        let cpus: Vec<&Value> = (doc["devices"].as_array().unwrap().iter())
            .flat_map(|d| d["cpus"].as_array().unwrap())
            .collect();
        assert!(!cpus.is_empty());
        assert!(cpus.iter().all(|c| c["lease"].is_null()), "{cpus:?}");
        assert!(!env.run(&["status"]).stdout.contains("lease"));
    }
}
