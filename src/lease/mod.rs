//! The lease without the kernel patch: `blkqos lease` holds the CPUs that
//! serve a device at its limit through their resume latency while the
//! device has I/O, and lets them go its timeout after the last one. The
//! rule (`policy`), the CPUs' attribute (`cpuqos`) and how I/O is seen
//! (`detect`) apart, so that each is tested on its own; what it holds is
//! `published` for `status`, `metrics` and `top`.

pub mod cpuqos;
pub mod detect;
pub mod policy;
pub mod published;
pub mod tracepoint;
