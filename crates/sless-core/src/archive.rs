//! Code-archive checks and unpacking (docs/architecture.md, "Archives and builds").
//!
//! An archive is checked completely before anything is stored: size, entry count, paths
//! (no absolute paths, no `..`, backslashes normalised to `/`), duplicates, links that leave
//! the code root, the compression ratio (zip bombs), the real unpacked size and the
//! entrypoint's file. Every failure names the entry at fault. [`check`] decompresses every
//! entry into a counting sink, since the sizes a zip declares can lie; [`unpack`] applies the
//! same checks again while writing.

use std::collections::BTreeSet;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::runtime::{Entrypoint, Runtime};
use crate::{Error, Result};

/// Limits applied to code archives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Largest archive (the zip's own bytes), in bytes. Default 50 MiB. Larger → 413.
    pub max_compressed_bytes: u64,
    /// Largest total of unpacked file sizes, in bytes. Default 250 MiB. Larger → 422.
    pub max_uncompressed_bytes: u64,
    /// Most entries. Default 20,000.
    pub max_entries: usize,
    /// Largest uncompressed/compressed ratio of one entry bigger than 1 MiB. Default 200.
    pub max_ratio: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            max_compressed_bytes: 50 * 1024 * 1024,
            max_uncompressed_bytes: 250 * 1024 * 1024,
            max_entries: 20_000,
            max_ratio: 200,
        }
    }
}

/// Entries up to this size are never refused for their compression ratio.
const RATIO_FLOOR: u64 = 1024 * 1024;

/// Longest link target, in bytes (Linux's `PATH_MAX`).
const MAX_LINK_TARGET: u64 = 4095;

/// What a checked archive holds.
#[derive(Debug, Clone)]
pub struct CheckedArchive {
    /// Lowercase hex SHA-256 of the archive's bytes: the version's identity.
    pub sha256: String,
    /// Size of the archive in bytes.
    pub size_bytes: u64,
    /// Sum of the real (decompressed) sizes of its files, in bytes.
    pub uncompressed_bytes: u64,
    /// The normalised paths of its files and links (not directories), sorted.
    pub files: BTreeSet<String>,
}

/// The blob-store key of an archive: `archives/<sha256>.zip` (content-addressed, so the same
/// bytes uploaded to several functions are stored once).
pub fn blob_key(sha256: &str) -> String {
    format!("archives/{sha256}.zip")
}

/// Where build logs are in the blob store (see [`build_log_key`]).
pub const BUILD_LOGS: &str = "build-logs/";

/// The blob-store key of a version's build log:
/// `build-logs/<namespace>/<function>/<version>-<sha256>.log` (the SHA-256 keeps a function
/// created again under the same name from seeing the old one's logs).
pub fn build_log_key(namespace: &str, function: &str, version: u32, sha256: &str) -> String {
    format!("{BUILD_LOGS}{namespace}/{function}/{version}-{sha256}.log")
}

/// Entries that are skipped, not rejected: macOS resource forks and Finder metadata.
fn skipped(path: &str) -> bool {
    path == "__MACOSX" || path.starts_with("__MACOSX/") || path == ".DS_Store" || path.ends_with("/.DS_Store")
}

/// The longest file or folder name in an archive, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// Normalises an entry name: `\` → `/`, no leading `./`, no empty or `.` segments. Rejects
/// absolute paths, drive letters and `..`.
fn normalise(raw: &str) -> Result<String> {
    let name = raw.replace('\\', "/");
    if name.starts_with('/') || name.as_bytes().get(1) == Some(&b':') {
        return Err(Error::archive(raw, "absolute paths are not allowed"));
    }
    let mut parts = Vec::new();
    for seg in name.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(Error::archive(raw, "'..' in a path is not allowed")),
            s if s.contains('\0') => return Err(Error::archive(raw, "NUL in a path is not allowed")),
            // Linux's NAME_MAX: a longer name would fail the unpack ("File name too long").
            s if s.len() > MAX_NAME_BYTES => {
                return Err(Error::archive(
                    raw,
                    format!("a file or folder name is longer than {MAX_NAME_BYTES} bytes"),
                ));
            }
            s => parts.push(s),
        }
    }
    Ok(parts.join("/"))
}

/// Resolves a link target relative to the link's folder; the error says why the link may not
/// be kept. Only what the kernel resolves the same way is accepted: a relative target whose
/// `..` segments all come first (a `..` after a folder name would be applied to wherever that
/// folder leads if it is itself a link), staying inside the root and not naming the root itself.
fn resolve_link(link_path: &str, target: &str) -> std::result::Result<String, String> {
    let leaves = || format!("link to {target:?} leaves the code root");
    if target.is_empty() {
        return Err("link with an empty target".into());
    }
    if target.contains('\0') {
        return Err("NUL in a link target is not allowed".into());
    }
    if target.starts_with('/') || target.contains('\\') {
        return Err(leaves());
    }
    let mut parts: Vec<&str> = link_path.split('/').collect();
    parts.pop();
    let mut descended = false;
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." if descended => {
                return Err(format!("link to {target:?}: '..' after a folder name in a link target is not allowed"));
            }
            ".." => {
                parts.pop().ok_or_else(leaves)?;
            }
            s => {
                descended = true;
                parts.push(s);
            }
        }
    }
    if parts.is_empty() {
        return Err(format!("link to {target:?} points at the code root itself"));
    }
    Ok(parts.join("/"))
}

/// A name listed twice in the central directory (APPNOTE.TXT §4.3.12). The `zip` crate keeps
/// only one entry per name, so exact duplicates would pass unseen; they are found here by
/// walking the central directory's file headers.
fn duplicate_raw_name(bytes: &[u8]) -> Option<String> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const CDFH: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
    let u16_at = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let search_from = bytes.len().saturating_sub(22 + 65_535);
    let eocd = (search_from..bytes.len().saturating_sub(21)).rev().find(|&i| bytes[i..i + 4] == EOCD)?;
    let count = u16_at(eocd + 10)?;
    let mut at = u32_at(eocd + 16)?;
    if count == 0xffff || at == 0xffff_ffff {
        return None; // Zip64: the zip crate's own checks apply.
    }
    let mut seen = BTreeSet::new();
    for _ in 0..count {
        if bytes.get(at..at + 4)? != CDFH {
            return None;
        }
        let (name_len, extra_len, comment_len) = (u16_at(at + 28)?, u16_at(at + 30)?, u16_at(at + 32)?);
        let name = String::from_utf8_lossy(bytes.get(at + 46..at + 46 + name_len)?).into_owned();
        if !seen.insert(name.clone()) {
            return Some(name);
        }
        at += 46 + name_len + extra_len + comment_len;
    }
    None
}

const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;

fn is_symlink(file: &zip::read::ZipFile<'_, impl Read>) -> bool {
    file.unix_mode().is_some_and(|m| m & S_IFMT == S_IFLNK)
}

/// What an entry becomes when unpacked.
#[derive(Debug)]
enum Kind {
    Dir,
    /// A regular file; `exec` when the archive gave it any execute bit.
    File {
        exec: bool,
    },
    /// A link, with its target as written in the archive.
    Link(String),
}

/// One entry that is kept, in archive order.
#[derive(Debug)]
struct Entry {
    index: usize,
    raw: String,
    path: String,
    kind: Kind,
    compressed: u64,
}

/// The checked listing of an archive: every entry that is kept, in archive order, and the
/// paths of its files and links.
struct Listing {
    entries: Vec<Entry>,
    files: BTreeSet<String>,
}

type Zip<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

fn open(bytes: &[u8]) -> Result<Zip<'_>> {
    if bytes.is_empty() {
        return Err(Error::InvalidArchive { entry: None, message: "the body is empty; expected a zip archive".into() });
    }
    zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::InvalidArchive { entry: None, message: format!("not a valid zip archive: {e}") })
}

fn entry_at<'z, 'a>(zip: &'z mut Zip<'a>, i: usize) -> Result<zip::read::ZipFile<'z, Cursor<&'a [u8]>>> {
    zip.by_index(i)
        .map_err(|e| Error::InvalidArchive { entry: None, message: format!("entry #{i} is unreadable: {e}") })
}

fn too_big(raw: &str, limits: &ArchiveLimits) -> Error {
    Error::archive(raw, format!("unpacked size exceeds the limit of {} bytes", limits.max_uncompressed_bytes))
}

fn too_compressed(raw: &str, size: u64, compressed: u64, limits: &ArchiveLimits) -> Error {
    Error::archive(
        raw,
        format!("compression ratio {}:1 exceeds {}:1 (zip bomb?)", size / compressed.max(1), limits.max_ratio),
    )
}

/// Reads the central directory and checks everything that needs no decompression of file
/// data: entry count, names, duplicates, declared sizes and ratios, links and their targets,
/// and that nothing is unpacked inside a file or through a link.
fn list(zip: &mut Zip<'_>, bytes: &[u8], limits: &ArchiveLimits) -> Result<Listing> {
    if zip.len() > limits.max_entries {
        return Err(Error::InvalidArchive {
            entry: None,
            message: format!("has {} entries, more than the limit of {}", zip.len(), limits.max_entries),
        });
    }
    if let Some(dup) = duplicate_raw_name(bytes) {
        return Err(Error::archive(dup, "duplicate entry"));
    }
    let mut entries = Vec::new();
    let mut files = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let mut declared: u64 = 0;
    for index in 0..zip.len() {
        let mut file = entry_at(zip, index)?;
        let raw = String::from_utf8_lossy(file.name_raw()).into_owned();
        let path = normalise(&raw)?;
        if path.is_empty() || skipped(&path) {
            continue;
        }
        let compressed = file.compressed_size();
        if file.is_dir() {
            if files.contains(&path) {
                return Err(Error::archive(&raw, "duplicate entry (both a file and a folder)"));
            }
            dirs.insert(path.clone());
            entries.push(Entry { index, raw, path, kind: Kind::Dir, compressed });
            continue;
        }
        if file.encrypted() {
            return Err(Error::archive(&raw, "encrypted entries are not supported"));
        }
        let size = file.size();
        if size > RATIO_FLOOR && size / compressed.max(1) > limits.max_ratio {
            return Err(too_compressed(&raw, size, compressed, limits));
        }
        declared = declared.saturating_add(size);
        if declared > limits.max_uncompressed_bytes {
            return Err(too_big(&raw, limits));
        }
        let kind = if is_symlink(&file) {
            let mut target = String::new();
            (&mut file)
                .take(MAX_LINK_TARGET + 1)
                .read_to_string(&mut target)
                .map_err(|e| Error::archive(&raw, format!("unreadable link: {e}")))?;
            if target.len() as u64 > MAX_LINK_TARGET {
                return Err(Error::archive(&raw, format!("link target longer than {MAX_LINK_TARGET} bytes")));
            }
            resolve_link(&path, &target).map_err(|message| Error::archive(&raw, message))?;
            Kind::Link(target)
        } else {
            Kind::File { exec: file.unix_mode().is_some_and(|m| m & 0o111 != 0) }
        };
        if !files.insert(path.clone()) {
            return Err(Error::archive(&raw, "duplicate entry"));
        }
        if dirs.contains(&path) {
            return Err(Error::archive(&raw, "duplicate entry (both a file and a folder)"));
        }
        entries.push(Entry { index, raw, path, kind, compressed });
    }
    // Parents are real folders: nothing is unpacked inside a file or through a link (a link
    // to a folder would otherwise carry later entries, or the targets of links among them,
    // to wherever it points).
    let links: BTreeSet<&str> =
        entries.iter().filter(|e| matches!(e.kind, Kind::Link(_))).map(|e| e.path.as_str()).collect();
    for entry in &entries {
        let mut parent = entry.path.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            parent = up;
            if links.contains(parent) {
                return Err(Error::archive(
                    &entry.raw,
                    format!("is inside {parent:?}, which is a link; nothing may be unpacked through a link"),
                ));
            }
            if files.contains(parent) {
                return Err(Error::archive(&entry.raw, format!("is inside {parent:?}, which is a file, not a folder")));
            }
        }
    }
    Ok(Listing { entries, files })
}

/// Copies one entry's decompressed bytes to `out`, counting them against `budget` (what is
/// left of the unpacked limit) and checking the real compression ratio. Corrupt data (a bad
/// CRC, a broken deflate stream) is an error naming the entry.
fn copy_entry(
    file: &mut impl Read,
    out: &mut impl Write,
    entry: &Entry,
    budget: &mut u64,
    limits: &ArchiveLimits,
) -> Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut written: u64 = 0;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::archive(&entry.raw, format!("corrupt entry: {e}"))),
        };
        written += n as u64;
        if written > *budget {
            return Err(too_big(&entry.raw, limits));
        }
        if written > RATIO_FLOOR && written / entry.compressed.max(1) > limits.max_ratio {
            return Err(too_compressed(&entry.raw, written, entry.compressed, limits));
        }
        out.write_all(&buf[..n]).map_err(|e| Error::archive(&entry.raw, format!("cannot unpack: {e}")))?;
    }
    *budget -= written;
    Ok(written)
}

/// Checks an archive for `runtime` and `entrypoint` without writing anything: the listing
/// first, then every file is decompressed into a counting sink, so sizes the zip misstates
/// are caught here rather than at build time.
///
/// Errors: [`Error::ArchiveTooLarge`] (413) when over `max_compressed_bytes`;
/// [`Error::InvalidArchive`] (422) naming the entry for everything else, including an
/// empty body, bytes that are not a zip, and a missing entrypoint file.
pub fn check(
    bytes: &[u8],
    limits: &ArchiveLimits,
    runtime: Runtime,
    entrypoint: &Entrypoint,
) -> Result<CheckedArchive> {
    let size_bytes = bytes.len() as u64;
    if size_bytes > limits.max_compressed_bytes {
        return Err(Error::ArchiveTooLarge { size: size_bytes, limit: limits.max_compressed_bytes });
    }
    let mut zip = open(bytes)?;
    let Listing { entries, files } = list(&mut zip, bytes, limits)?;
    let candidates = runtime.entrypoint_files(entrypoint);
    if !candidates.iter().any(|c| files.contains(c)) {
        return Err(Error::archive(
            &candidates[0],
            format!("entrypoint file not found in the archive (looked for {})", candidates.join(", ")),
        ));
    }
    let mut budget = limits.max_uncompressed_bytes;
    for entry in entries.iter().filter(|e| matches!(e.kind, Kind::File { .. })) {
        let mut file = entry_at(&mut zip, entry.index)?;
        copy_entry(&mut file, &mut std::io::sink(), entry, &mut budget, limits)?;
    }
    let sha256 = hex::encode(Sha256::digest(bytes));
    Ok(CheckedArchive { sha256, size_bytes, uncompressed_bytes: limits.max_uncompressed_bytes - budget, files })
}

/// Creates `rel`'s folders under `root`, each new one with mode 0755.
fn make_dirs(root: &Path, rel: &str, raw: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut dir = root.to_path_buf();
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        dir.push(seg);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => return Err(Error::archive(raw, format!("cannot unpack: {} is not a folder", dir.display()))),
            Err(_) => {}
        }
        std::fs::create_dir(&dir)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)))
            .map_err(|e| Error::archive(raw, format!("cannot unpack: {e}")))?;
    }
    Ok(())
}

/// Unpacks an archive into `dest` (which must exist and be empty), with the same checks as
/// [`check`] (except the entrypoint's). Folders get mode 0755 and files 0644, or 0755 when
/// the archive gave them any execute bit, whatever mode the archive recorded (so a file
/// stored as 0000 or 0200 is readable); links are recreated as links. Real sizes are
/// enforced against `max_uncompressed_bytes` while writing.
pub fn unpack(bytes: &[u8], dest: &Path, limits: &ArchiveLimits) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |raw: &str, e: std::io::Error| Error::archive(raw, format!("cannot unpack: {e}"));
    let mut zip = open(bytes)?;
    let listing = list(&mut zip, bytes, limits)?;
    let mut budget = limits.max_uncompressed_bytes;
    for entry in &listing.entries {
        let (parent, _) = entry.path.rsplit_once('/').unwrap_or(("", ""));
        let target = dest.join(&entry.path);
        match &entry.kind {
            Kind::Dir => make_dirs(dest, &entry.path, &entry.raw)?,
            Kind::Link(link) => {
                make_dirs(dest, parent, &entry.raw)?;
                std::os::unix::fs::symlink(link, &target).map_err(|e| io(&entry.raw, e))?;
            }
            Kind::File { exec } => {
                make_dirs(dest, parent, &entry.raw)?;
                // `create_new`: never through a link or over anything already there.
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .map_err(|e| io(&entry.raw, e))?;
                let mut file = entry_at(&mut zip, entry.index)?;
                copy_entry(&mut file, &mut out, entry, &mut budget, limits)?;
                let mode = if *exec { 0o755 } else { 0o644 };
                out.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| io(&entry.raw, e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data) in entries {
            w.start_file(*name, SimpleFileOptions::default()).expect("start");
            w.write_all(data).expect("write");
        }
        w.finish().expect("finish").into_inner()
    }

    fn ep(s: &str) -> Entrypoint {
        Entrypoint::parse("entrypoint", s).expect("valid")
    }

    fn check_py(bytes: &[u8]) -> Result<CheckedArchive> {
        check(bytes, &ArchiveLimits::default(), Runtime::Python311, &ep("main.handler"))
    }

    #[test]
    fn accepts_a_plain_archive_and_hashes_it() {
        let bytes = zip_of(&[("main.py", b"def handler(e, c): return 1\n"), ("lib\\util.py", b"")]);
        let a = check_py(&bytes).expect("valid");
        assert_eq!(a.sha256.len(), 64);
        assert!(a.files.contains("lib/util.py"), "backslashes normalised: {:?}", a.files);
    }

    #[test]
    fn regression_a_zip_entry_name_over_255_bytes_is_refused_naming_it() {
        let long = format!("lib/{}.py", "x".repeat(MAX_NAME_BYTES));
        match check_py(&zip_of(&[("main.py", b""), (long.as_str(), b"")])) {
            Err(Error::InvalidArchive { entry: Some(e), message }) => {
                assert_eq!(e, long);
                assert!(message.contains("255 bytes"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let fits = format!("lib/{}.py", "x".repeat(MAX_NAME_BYTES - 3));
        assert!(check_py(&zip_of(&[("main.py", b""), (fits.as_str(), b"")])).is_ok(), "255 bytes fit");
    }

    #[test]
    fn rejects_with_the_entry_named() {
        type Entries<'a> = &'a [(&'a str, &'a [u8])];
        let cases: &[(Entries<'_>, &str)] = &[
            (&[("main.py", b""), ("../evil.py", b"")], "../evil.py"),
            (&[("main.py", b""), ("/etc/passwd", b"")], "/etc/passwd"),
            (&[("main.py", b""), ("a/main.py", b""), ("a\\main.py", b"")], "a\\main.py"),
            (&[("other.py", b"")], "main.py"),
        ];
        for (entries, entry) in cases {
            match check_py(&zip_of(entries)) {
                Err(Error::InvalidArchive { entry: Some(e), .. }) => assert_eq!(e, *entry),
                other => panic!("{entry}: {other:?}"),
            }
        }
    }

    #[test]
    fn exact_duplicate_names_are_rejected() {
        // The zip writer refuses duplicates, so the second central-directory name is patched in.
        let mut bytes = zip_of(&[("main.py", b"one"), ("mainXpy", b"two")]);
        let cd = bytes.windows(4).rposition(|w| w == [0x50, 0x4b, 0x01, 0x02]).expect("second header");
        bytes[cd + 46 + 4] = b'.';
        match check_py(&bytes) {
            Err(Error::InvalidArchive { entry: Some(e), message }) => {
                assert_eq!((e.as_str(), message.as_str()), ("main.py", "duplicate entry"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn empty_and_non_zip_bodies_are_invalid() {
        assert!(matches!(check_py(b""), Err(Error::InvalidArchive { .. })));
        assert!(matches!(check_py(b"hello, not a zip"), Err(Error::InvalidArchive { .. })));
    }

    #[test]
    fn oversized_is_too_large() {
        let limits = ArchiveLimits { max_compressed_bytes: 10, ..Default::default() };
        let bytes = zip_of(&[("main.py", b"")]);
        assert!(matches!(
            check(&bytes, &limits, Runtime::Python311, &ep("main.handler")),
            Err(Error::ArchiveTooLarge { .. })
        ));
    }

    #[test]
    fn zip_bomb_ratio_is_rejected() {
        let zeros = vec![0u8; 8 * 1024 * 1024];
        let bytes = zip_of(&[("main.py", b""), ("zeros.bin", &zeros)]);
        match check_py(&bytes) {
            Err(Error::InvalidArchive { entry: Some(e), message }) => {
                assert_eq!(e, "zeros.bin");
                assert!(message.contains("ratio"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn macosx_entries_are_skipped_and_unpack_normalises() {
        let bytes = zip_of(&[("main.py", b"x"), ("__MACOSX/._main.py", b"junk"), ("pkg\\mod.py", b"y")]);
        let a = check_py(&bytes).expect("valid");
        assert!(!a.files.iter().any(|f| f.starts_with("__MACOSX")));
        let dir = tempfile::tempdir().expect("tempdir");
        unpack(&bytes, dir.path(), &ArchiveLimits::default()).expect("unpack");
        assert_eq!(std::fs::read(dir.path().join("pkg/mod.py")).expect("read"), b"y");
        assert!(!dir.path().join("__MACOSX").exists());
    }

    #[test]
    fn links_resolve_inside_the_root_only() {
        assert_eq!(resolve_link("a/b", "../c").as_deref(), Ok("c"));
        assert_eq!(resolve_link("lib.py", "real/lib.py").as_deref(), Ok("real/lib.py"));
        assert_eq!(resolve_link("a/b/l", "./../../x/./y/").as_deref(), Ok("x/y"));
        for (link, target, why) in [
            ("a/b", "../../c", "leaves"),
            ("a", "/etc/passwd", "leaves"),
            ("a", "..\\x", "leaves"),
            ("a/l", "..", "code root itself"),
            ("l", ".", "code root itself"),
            ("l", "", "empty"),
            ("l", "x\0y", "NUL"),
            // `p/q/l2 -> ..` is fine on its own, but through it `..` climbs above the root.
            ("a", "p/q/l2/../..", "after a folder"),
            ("a", "x/../y", "after a folder"),
        ] {
            match resolve_link(link, target) {
                Err(e) => assert!(e.contains(why), "{link} -> {target:?}: {e}"),
                Ok(r) => panic!("{link} -> {target:?} resolved to {r:?}"),
            }
        }
    }

    /// One entry of a test zip: a file with an optional mode, or a link.
    enum Item<'a> {
        File(&'a str, &'a [u8], Option<u32>),
        Link(&'a str, &'a str),
    }

    fn zip_items(items: &[Item<'_>]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for item in items {
            match item {
                Item::File(name, data, mode) => {
                    let mut options = SimpleFileOptions::default();
                    if let Some(mode) = mode {
                        options = options.unix_permissions(*mode);
                    }
                    w.start_file(*name, options).expect("start");
                    w.write_all(data).expect("write");
                }
                Item::Link(name, target) => w.add_symlink(*name, *target, SimpleFileOptions::default()).expect("link"),
            }
        }
        w.finish().expect("finish").into_inner()
    }

    /// Sets the uncompressed size that the central directory declares for `name` (the local
    /// header keeps the true one; the zip crate reads the central directory).
    fn lie_about_size(bytes: &mut [u8], name: &str, size: u32) {
        let at = (0..bytes.len() - 46)
            .find(|&i| bytes[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] && bytes[i + 46..].starts_with(name.as_bytes()))
            .expect("central directory header");
        bytes[at + 24..at + 28].copy_from_slice(&size.to_le_bytes());
    }

    /// Compressible but not bomb-like data: about 4:1 with deflate.
    fn text(len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut x: u32 = 0x1234_5678;
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            out.push(b"acgt"[(x % 4) as usize]);
        }
        out
    }

    fn entry_error(result: Result<impl std::fmt::Debug>) -> (String, String) {
        match result {
            Err(Error::InvalidArchive { entry: Some(e), message }) => (e, message),
            other => panic!("expected an error naming an entry, got {other:?}"),
        }
    }

    #[test]
    fn zips_without_folder_entries_unpack_nested_files() {
        let bytes = zip_of(&[("src/app.py", b"x = 1\n"), ("src/helpers/deep/util.py", b"y = 2\n")]);
        let a = check(&bytes, &ArchiveLimits::default(), Runtime::Python311, &ep("src/app.handler")).expect("valid");
        assert_eq!(a.uncompressed_bytes, 12);
        let dir = tempfile::tempdir().expect("tempdir");
        unpack(&bytes, dir.path(), &ArchiveLimits::default()).expect("unpack");
        assert_eq!(std::fs::read(dir.path().join("src/helpers/deep/util.py")).expect("read"), b"y = 2\n");
    }

    #[test]
    fn restrictive_modes_are_normalised() {
        use std::os::unix::fs::PermissionsExt;
        let bytes = zip_items(&[
            Item::File("main.py", b"", Some(0o000)),
            Item::File("write_only.py", b"", Some(0o200)),
            Item::File("bin/run", b"#!/bin/sh\n", Some(0o700)),
            Item::File("bin/exec_only", b"", Some(0o100)),
            Item::File("wide.txt", b"", Some(0o777)),
            Item::File("default.txt", b"", None),
        ]);
        check_py(&bytes).expect("valid");
        let dir = tempfile::tempdir().expect("tempdir");
        unpack(&bytes, dir.path(), &ArchiveLimits::default()).expect("unpack");
        let mode = |p: &str| std::fs::metadata(dir.path().join(p)).expect("stat").permissions().mode() & 0o7777;
        for (path, expected) in [
            ("main.py", 0o644),
            ("write_only.py", 0o644),
            ("bin/run", 0o755),
            ("bin/exec_only", 0o755),
            ("wide.txt", 0o755),
            ("default.txt", 0o644),
            ("bin", 0o755),
        ] {
            assert_eq!(mode(path), expected, "{path}");
        }
    }

    #[test]
    fn links_inside_the_root_are_kept() {
        let bytes = zip_items(&[
            Item::File("main.py", b"", None),
            Item::File("real/lib.py", b"VALUE = 42\n", None),
            Item::Link("lib.py", "real/lib.py"),
            Item::Link("pkg/up.py", "../real/lib.py"),
            Item::Link("dangling", "missing/file"),
        ]);
        let a = check_py(&bytes).expect("valid");
        assert!(a.files.contains("lib.py"), "{:?}", a.files);
        let dir = tempfile::tempdir().expect("tempdir");
        unpack(&bytes, dir.path(), &ArchiveLimits::default()).expect("unpack");
        let link = dir.path().join("lib.py");
        assert!(std::fs::symlink_metadata(&link).expect("lstat").file_type().is_symlink());
        assert_eq!(std::fs::read_link(&link).expect("readlink"), Path::new("real/lib.py"));
        assert_eq!(std::fs::read(&link).expect("read through"), b"VALUE = 42\n");
        assert_eq!(std::fs::read(dir.path().join("pkg/up.py")).expect("read through"), b"VALUE = 42\n");
    }

    #[test]
    fn nothing_is_unpacked_through_a_link_or_inside_a_file() {
        let cases: &[(&[Item<'_>], &str, &str)] = &[
            // A link to a folder, then an entry through it.
            (&[Item::Link("d", "sub"), Item::File("d/x.py", b"", None)], "d/x.py", "link"),
            // `d1/d2` really is one level shallower than it looks, so a link under it that
            // looks inside the root would point above it.
            (&[Item::Link("d1/d2", "../x"), Item::Link("d1/d2/d3/l", "../../../x")], "d1/d2/d3/l", "link"),
            (&[Item::File("a", b"", None), Item::File("a/b.py", b"", None)], "a/b.py", "file"),
            (&[Item::File("a/b/c.py", b"", None), Item::File("a", b"", None)], "a/b/c.py", "file"),
        ];
        for (items, entry, why) in cases {
            let mut all = vec![Item::File("main.py", b"", None)];
            all.extend(items.iter().map(|i| match i {
                Item::File(n, d, m) => Item::File(n, d, *m),
                Item::Link(n, t) => Item::Link(n, t),
            }));
            let bytes = zip_items(&all);
            let (e, message) = entry_error(check_py(&bytes));
            assert_eq!(e, *entry, "{message}");
            assert!(message.contains(why), "{message}");
            let dir = tempfile::tempdir().expect("tempdir");
            let (e, _) = entry_error(unpack(&bytes, dir.path(), &ArchiveLimits::default()));
            assert_eq!(e, *entry);
        }
    }

    #[test]
    fn links_leaving_the_root_are_rejected_by_check_and_unpack() {
        for (link, target) in [("l", "../x"), ("a/b/l", "../../../x"), ("l", "/etc/passwd"), ("l", "x/../../y")] {
            let bytes = zip_items(&[Item::File("main.py", b"", None), Item::Link(link, target)]);
            let (e, _) = entry_error(check_py(&bytes));
            assert_eq!(e, link);
            let dir = tempfile::tempdir().expect("tempdir");
            let (e, _) = entry_error(unpack(&bytes, dir.path(), &ArchiveLimits::default()));
            assert_eq!(e, link);
            assert!(!dir.path().join(link).exists());
        }
    }

    #[test]
    fn the_real_unpacked_size_is_checked_even_when_declared_sizes_lie() {
        let limits = ArchiveLimits { max_uncompressed_bytes: 1024 * 1024, ..Default::default() };
        let big = text(2 * 1024 * 1024);
        let honest = zip_of(&[("main.py", b""), ("data.txt", &big)]);
        assert!(honest.len() < 1024 * 1024, "small: {}", honest.len());
        let (e, message) = entry_error(check(&honest, &limits, Runtime::Python311, &ep("main.handler")));
        assert_eq!(e, "data.txt");
        assert!(message.contains("unpacked size"), "{message}");

        let mut lying = honest.clone();
        lie_about_size(&mut lying, "data.txt", 1000);
        let (e, message) = entry_error(check(&lying, &limits, Runtime::Python311, &ep("main.handler")));
        assert_eq!(e, "data.txt");
        assert!(message.contains("unpacked size"), "{message}");
        let dir = tempfile::tempdir().expect("tempdir");
        let (e, _) = entry_error(unpack(&lying, dir.path(), &limits));
        assert_eq!(e, "data.txt");

        // Under the limit, the real total is reported.
        let a = check_py(&lying).expect("fits the default limit");
        assert_eq!(a.uncompressed_bytes, big.len() as u64);
    }

    #[test]
    fn the_real_ratio_is_checked_even_when_declared_sizes_lie() {
        let zeros = vec![0u8; 8 * 1024 * 1024];
        let mut bytes = zip_of(&[("main.py", b""), ("zeros.bin", &zeros)]);
        lie_about_size(&mut bytes, "zeros.bin", 10);
        let (e, message) = entry_error(check_py(&bytes));
        assert_eq!(e, "zeros.bin");
        assert!(message.contains("ratio"), "{message}");
    }

    #[test]
    fn corrupt_data_is_named() {
        let mut bytes = zip_of(&[("main.py", b"def handler(e, c): return 1\n"), ("lib.py", b"hello hello hello")]);
        // Flip the CRC the central directory records for lib.py.
        let at = bytes.windows(4).rposition(|w| w == [0x50, 0x4b, 0x01, 0x02]).expect("header");
        bytes[at + 16] ^= 0xff;
        let (e, message) = entry_error(check_py(&bytes));
        assert_eq!(e, "lib.py");
        assert!(message.contains("corrupt"), "{message}");
    }
}
