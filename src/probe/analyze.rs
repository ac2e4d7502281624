// TEMPORARY STUB (not committed)
use super::sample::*;
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    pub p99_pct: f64,
}
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Answer {
    X,
}
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Analysis {
    pub answer: Answer,
    pub noisy: bool,
    pub aa_spread: Spread,
    pub n: usize,
}
pub fn analyze(_c: &[Config], _t: &[TableState], r: &[Run]) -> Analysis {
    Analysis {
        answer: Answer::X,
        noisy: false,
        aa_spread: Spread { p99_pct: 0.0 },
        n: r.len(),
    }
}
pub fn rule_snippet(_d: &str, _a: &Answer, _t: u64) -> Option<String> {
    None
}
pub fn render_table(a: &Analysis, _t: &[TableState]) -> String {
    format!("{a:?}\n")
}
