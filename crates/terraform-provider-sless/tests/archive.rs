//! The deterministic zip of `source_dir`: the same files give the same bytes whatever their
//! times, order of creation or modes beyond the execute bit; the ignore rules hold.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use terraform_provider_sless::{sha256, skipped, zip_dir};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn names(zip: &[u8]) -> Vec<(String, u32)> {
    let mut a = zip::ZipArchive::new(std::io::Cursor::new(zip)).expect("zip");
    (0..a.len())
        .map(|i| {
            let f = a.by_index(i).expect("entry");
            (f.name().to_string(), f.unix_mode().unwrap_or(0) & 0o777)
        })
        .collect()
}

#[test]
fn the_same_files_give_the_same_bytes_whatever_their_times_and_creation_order() {
    let a = tempfile::tempdir().expect("tmp");
    let b = tempfile::tempdir().expect("tmp");
    write(a.path(), "main.py", "x = 1\n");
    write(a.path(), "lib/util.py", "y = 2\n");
    write(b.path(), "lib/util.py", "y = 2\n");
    std::thread::sleep(Duration::from_millis(20));
    write(b.path(), "main.py", "x = 1\n");
    let first = zip_dir(a.path()).expect("zip a");
    assert_eq!(first, zip_dir(b.path()).expect("zip b"));
    let f = std::fs::File::options().write(true).open(a.path().join("main.py")).expect("open");
    f.set_modified(SystemTime::now() - Duration::from_secs(3600)).expect("mtime");
    drop(f);
    std::fs::set_permissions(a.path().join("main.py"), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(
        sha256(&first),
        sha256(&zip_dir(a.path()).expect("zip again")),
        "times and modes other than +x do not count"
    );
    write(a.path(), "main.py", "x = 2\n");
    assert_ne!(first, zip_dir(a.path()).expect("zip changed"));
}

#[test]
fn entries_are_sorted_files_with_fixed_modes() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "b.py", "");
    write(d.path(), "a/z.py", "");
    write(d.path(), "a.py", "");
    write(d.path(), "run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(d.path().join("run.sh"), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let zip = zip_dir(d.path()).expect("zip");
    assert_eq!(
        names(&zip),
        vec![("a.py".into(), 0o644), ("a/z.py".into(), 0o644), ("b.py".into(), 0o644), ("run.sh".into(), 0o755)]
    );
    let mut a = zip::ZipArchive::new(std::io::Cursor::new(&zip)).expect("zip");
    let mut f = a.by_name("run.sh").expect("run.sh");
    let mut text = String::new();
    f.read_to_string(&mut text).expect("read");
    assert_eq!(text, "#!/bin/sh\n");
}

#[test]
fn version_control_caches_and_reinstalled_dependencies_are_left_out() {
    let d = tempfile::tempdir().expect("tmp");
    for rel in [
        "main.js",
        "package.json",
        ".git/HEAD",
        "__pycache__/m.cpython-311.pyc",
        "lib/__pycache__/x.pyc",
        "lib/x.pyc",
        "node_modules/left/index.js",
        "vendor/node_modules/kept/index.js",
        ".terraform/x",
        "terraform.tfstate",
        ".DS_Store",
    ] {
        write(d.path(), rel, "x");
    }
    let got: Vec<String> = names(&zip_dir(d.path()).expect("zip")).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, vec!["main.js", "package.json", "vendor/node_modules/kept/index.js"]);
    // node_modules without a package.json beside it is the function's own code.
    let e = tempfile::tempdir().expect("tmp");
    assert!(!skipped(Path::new("node_modules"), e.path()));
}

#[test]
fn a_missing_folder_is_an_error_naming_it() {
    let err = zip_dir(Path::new("/nonexistent/sless-src")).expect_err("missing");
    assert!(err.to_string().contains("/nonexistent/sless-src"), "{err}");
}
