//! The `mkfixture` example's command line: it builds trees where it is
//! told to, and an option is no directory name.

#![deny(unsafe_code)]

#[path = "../examples/mkfixture.rs"]
#[allow(dead_code)]
mod mkfixture;

/// (exit code, stdout, stderr) of `mkfixture ARGS`.
fn run(args: &[&str]) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = mkfixture::run(&args, &mut out, &mut err);
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (code, text(out), text(err))
}

/// `mkfixture --help` built a tree named `--help`; an unknown option did
/// the same. Help is printed, an unknown option refused, and neither
/// builds anything.
#[test]
fn help_prints_the_usage_and_an_unknown_option_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // the one test of this binary: relative names land in the temporary directory
    std::env::set_current_dir(dir.path()).unwrap();
    for help in ["--help", "-h"] {
        let (code, out, _) = run(&[help]);
        assert_eq!(code, 0, "{help}");
        assert!(out.starts_with("usage: mkfixture DIR"), "{help}: {out:?}");
    }
    let (code, _, err) = run(&["--sysfs", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option \"--sysfs\""), "{err}");
    assert!(err.contains("usage: mkfixture DIR"), "{err}");
    let made: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(made.is_empty(), "nothing built: {made:?}");
    // a directory that starts with a dash, after --
    let (code, _, err) = run(&["--", "-tree", "nvme:1"]);
    assert_eq!(code, 0, "{err}");
    assert!(dir.path().join("-tree/block/nvme0n1").exists());
}
