// TEMPORARY STUB
pub fn svg(_a: &super::analyze::Analysis, _t: &str) -> String {
    String::new()
}
