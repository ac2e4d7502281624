//! blkqos(8) as examples/gen-docs.rs writes it: what --help leaves out
//! is still documented there.

#[path = "../examples/gen-docs.rs"]
#[allow(dead_code)]
mod gen_docs;

#[test]
fn the_man_page_documents_the_hidden_udev_command() {
    let page = gen_docs::man_page().expect("renders");
    assert!(page.contains(".SH \"THE UDEV COMMAND\""), "{page}");
    assert!(page.contains("blkqos udev [OPTIONS] [PROFILE]"), "{page}");
    assert!(page.contains("udev sets DEVPATH"), "{page}");
    assert!(page.contains("/etc/blkqos/blkqos.d/*.toml"), "{page}");
}
