//! `list`: whole disks with identity, transport, stacking, knob ABI and
//! current values.

use super::apply::LimitOut;
use super::{Ctx, doc};
use crate::abi::{Abi, knobs};
use crate::discover::{self, Detail, Device, Extent};
use crate::error::Error;
use crate::plan::LimitMode;
use crate::report::{human_size, table, warn_all};
use crate::snapshot::Snapshot;
use crate::state::State;
use serde::Serialize;
use std::collections::BTreeMap;

/// The knob values of a request-based disk: typed in the JSON document as
/// a plan's are (a limit as mode and microseconds, the timeout a number;
/// null where there is no knob or its value is none the kernel gives), as
/// the kernel reports them in the tables.
#[derive(Serialize)]
pub struct Knobs {
    pub cpu_lat_limit_us: Option<LimitOut>,
    pub cpu_lat_timeout_ms: Option<u64>,
    #[serde(skip)]
    pub limit_text: Option<String>,
    #[serde(skip)]
    pub timeout_text: Option<String>,
}

impl Knobs {
    pub fn of(snap: &Snapshot, d: &Device) -> Knobs {
        let read = |p: String| {
            (d.abi != Abi::None)
                .then(|| snap.attr(&p).map(str::to_string))
                .flatten()
        };
        let limit_text = read(knobs::limit_path(d.abi, &d.name));
        let timeout_text = read(knobs::timeout_path(d.abi, &d.name));
        Knobs {
            cpu_lat_limit_us: limit_text.as_deref().and_then(decode_limit),
            cpu_lat_timeout_ms: timeout_text.as_deref().and_then(|t| t.parse().ok()),
            limit_text,
            timeout_text,
        }
    }
}

/// A live `cpu_lat_limit_us`: `-1` (no constraint), `auto` (the kernel's
/// choice) or microseconds.
fn decode_limit(raw: &str) -> Option<LimitOut> {
    let (mode, us) = match raw {
        knobs::OFF => (LimitMode::Off, None),
        "auto" => (LimitMode::Auto, None),
        n => (LimitMode::Us, Some(n.parse().ok()?)),
    };
    Some(LimitOut {
        mode: mode.as_str(),
        us,
    })
}

/// A disk in the JSON document.
#[derive(Serialize)]
struct Disk<'a> {
    name: &'a str,
    syspath: &'a str,
    kind: &'a str,
    transport: &'a str,
    model: Option<&'a str>,
    serial: Option<&'a str>,
    wwid: Option<&'a str>,
    driver: Option<&'a str>,
    pci: &'a [String],
    rotational: bool,
    removable: bool,
    size_bytes: u64,
    cpus: &'a [u32],
    hw_queues: usize,
    slaves: &'a [String],
    holders: &'a [String],
    paths: &'a [String],
    head: Option<&'a str>,
    abi: &'a str,
    targets: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: &'a BTreeMap<String, String>,
    excluded: Option<&'a str>,
    #[serde(flatten)]
    knobs: Knobs,
}

impl<'a> Disk<'a> {
    fn new(d: &'a Device, knobs: Knobs) -> Self {
        Disk {
            name: &d.name,
            syspath: &d.syspath,
            kind: d.kind.as_str(),
            transport: d.transport.as_str(),
            model: d.model.as_deref(),
            serial: d.serial.as_deref(),
            wwid: d.wwid.as_deref(),
            driver: d.driver.as_deref(),
            pci: &d.pci,
            rotational: d.rotational,
            removable: d.removable,
            size_bytes: d.size_bytes,
            cpus: &d.cpus,
            hw_queues: d.hw_queues,
            slaves: &d.slaves,
            holders: &d.holders,
            paths: &d.paths,
            head: d.head.as_deref(),
            abi: d.abi.describe(),
            targets: &d.targets,
            properties: &d.properties,
            excluded: d.excluded.as_deref(),
            knobs,
        }
    }
}

pub fn list(ctx: &Ctx, json: bool, out: &mut String) -> Result<u8, Error> {
    let inv = discover::scan(&ctx.sysfs, Extent::All, Detail::FULL)?;
    let snap = Snapshot::take(&ctx.sysfs, inv, State::default(), None);
    let inv = &snap.inventory;
    let rows: Vec<Disk> = (inv.devices.iter())
        .map(|d| Disk::new(d, Knobs::of(&snap, d)))
        .collect();
    if json {
        out.push_str(&doc("list", false, false, &rows, &inv.warnings, &[], None).render());
        return Ok(0);
    }
    let dash = |v: Option<&str>| v.unwrap_or("-").to_string();
    let body: Vec<Vec<String>> = (inv.devices.iter().zip(&rows))
        .map(|(d, r)| {
            let lower = if d.targets == [d.name.clone()] {
                "-".into()
            } else {
                d.targets.join(",")
            };
            let note = match (&d.excluded, d.holders.is_empty()) {
                (Some(why), _) => format!("excluded: {why}"),
                (None, false) => format!("under {}", d.holders.join(",")),
                (None, true) => String::new(),
            };
            vec![
                d.name.clone(),
                d.kind.as_str().into(),
                d.transport.to_string(),
                dash(d.model.as_deref()),
                human_size(d.size_bytes),
                d.abi.describe().into(),
                // the kernel's text, escaped before it reaches a terminal
                dash(r.knobs.limit_text.as_deref()),
                dash(r.knobs.timeout_text.as_deref()),
                lower,
                note,
            ]
        })
        .collect();
    out.push_str(&table(
        ctx.style,
        &[
            "NAME",
            "KIND",
            "TRANSPORT",
            "MODEL",
            "SIZE",
            "ABI",
            "LIMIT_US",
            "TIMEOUT_MS",
            "QUEUES",
            "NOTE",
        ],
        &body,
    ));
    warn_all(&inv.warnings);
    Ok(0)
}
