//! blkqos(8) as examples/gen-docs.rs writes it: what --help leaves out
//! is still documented there.

#![deny(unsafe_code)]

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

/// blkqos(8) names blkqos-apply(8) and the others: each is generated, and
/// documents every option of its subcommand.
#[test]
fn every_subcommand_page_blkqos8_names_is_there_with_its_options() {
    use clap::CommandFactory;
    let pages = gen_docs::pages().expect("renders");
    let main = &pages
        .iter()
        .find(|(f, _)| f == "blkqos.8")
        .expect("blkqos.8")
        .1;
    let mut cli = blkqos::cli::Cli::command();
    // built, as blkqos(8) is rendered: clap's `help` subcommand included
    cli.build();
    let mut checked = 0;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("blkqos\\-{}", sub.get_name());
        assert!(main.contains(&format!("{name}(8)")), "{name}(8) not named");
        let file = format!("blkqos-{}.8", sub.get_name());
        let page = &(pages.iter().find(|(f, _)| *f == file))
            .unwrap_or_else(|| panic!("{file}: not generated"))
            .1;
        assert!(
            page.contains(&format!(".TH {} 8", &file[..file.len() - 2])),
            "{file}:\n{page}"
        );
        assert!(
            page.contains(&format!(".SH NAME\n{name} \\-")),
            "{file}:\n{page}"
        );
        for long in (sub.get_arguments())
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long())
        {
            let long = format!("\\-\\-{}", long.replace('-', "\\-"));
            assert!(page.contains(&long), "{file}: {long} missing:\n{page}");
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} subcommands");
}

/// docs/commands.md's synopsis gives every option each subcommand takes.
#[test]
fn the_synopsis_in_docs_names_every_option() {
    use clap::CommandFactory;
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"))
        .expect("docs/commands.md");
    let block = doc
        .split("```")
        .nth(1)
        .expect("the synopsis is the first code block");
    let cli = blkqos::cli::Cli::command();
    let mut missing = Vec::new();
    for sub in cli.get_subcommands() {
        let start = format!("  {} ", sub.get_name());
        // its line, and the lines indented under it
        let text: String = (block.lines())
            .skip_while(|l| !l.starts_with(&start))
            .enumerate()
            .take_while(|(i, l)| *i == 0 || l.starts_with("     "))
            .map(|(_, l)| l)
            .collect();
        assert!(!text.is_empty(), "{}: not in the synopsis", sub.get_name());
        for long in (sub.get_arguments())
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long())
            .filter(|l| *l != "help")
        {
            if !text.contains(&format!("--{long}")) {
                missing.push(format!("{} --{long}", sub.get_name()));
            }
        }
    }
    assert!(missing.is_empty(), "not in the synopsis: {missing:?}");
}
