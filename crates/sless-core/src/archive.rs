//! Code-archive checks and unpacking (DESIGN §4).
//!
//! An archive is checked completely before anything is stored: size, entry count, paths
//! (no absolute paths, no `..`, backslashes normalised to `/`), duplicates, links that leave
//! the code root, the compression ratio (zip bombs), and the entrypoint's file. Every failure
//! names the entry at fault. [`unpack`] enforces the same limits again on the real bytes,
//! since sizes declared in a zip can lie.

use std::collections::BTreeSet;
use std::io::{Cursor, Read};
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

/// What a checked archive holds.
#[derive(Debug, Clone)]
pub struct CheckedArchive {
    /// Lowercase hex SHA-256 of the archive's bytes: the version's identity.
    pub sha256: String,
    /// Size of the archive in bytes.
    pub size_bytes: u64,
    /// Sum of the declared sizes of its files, in bytes.
    pub uncompressed_bytes: u64,
    /// The normalised paths of its files and links (not directories), sorted.
    pub files: BTreeSet<String>,
}

/// The blob-store key of an archive: `archives/<sha256>.zip` (content-addressed, so the same
/// bytes uploaded to several functions are stored once).
pub fn blob_key(sha256: &str) -> String {
    format!("archives/{sha256}.zip")
}

/// Entries that are skipped, not rejected: macOS resource forks and Finder metadata.
fn skipped(path: &str) -> bool {
    path == "__MACOSX" || path.starts_with("__MACOSX/") || path == ".DS_Store" || path.ends_with("/.DS_Store")
}

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
            s => parts.push(s),
        }
    }
    Ok(parts.join("/"))
}

/// Resolves a link target relative to the link's folder; `None` if it leaves the root.
fn resolve_link(link_path: &str, target: &str) -> Option<String> {
    if target.starts_with('/') || target.contains('\\') {
        return None;
    }
    let mut parts: Vec<&str> = link_path.split('/').collect();
    parts.pop();
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
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

/// Checks an archive for `runtime` and `entrypoint` without unpacking it.
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
    if bytes.is_empty() {
        return Err(Error::InvalidArchive { entry: None, message: "the body is empty; expected a zip archive".into() });
    }
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::InvalidArchive { entry: None, message: format!("not a valid zip archive: {e}") })?;
    if zip.len() > limits.max_entries {
        return Err(Error::InvalidArchive {
            entry: None,
            message: format!("has {} entries, more than the limit of {}", zip.len(), limits.max_entries),
        });
    }
    if let Some(dup) = duplicate_raw_name(bytes) {
        return Err(Error::archive(dup, "duplicate entry"));
    }
    let mut files = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let mut links = Vec::new();
    let mut total: u64 = 0;
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .map_err(|e| Error::InvalidArchive { entry: None, message: format!("entry #{i} is unreadable: {e}") })?;
        let raw = String::from_utf8_lossy(file.name_raw()).into_owned();
        let path = normalise(&raw)?;
        if path.is_empty() || skipped(&path) {
            continue;
        }
        if file.is_dir() {
            dirs.insert(path);
            continue;
        }
        if file.encrypted() {
            return Err(Error::archive(&raw, "encrypted entries are not supported"));
        }
        let size = file.size();
        let compressed = file.compressed_size().max(1);
        if size > 1024 * 1024 && size / compressed > limits.max_ratio {
            return Err(Error::archive(
                &raw,
                format!("compression ratio {}:1 exceeds {}:1 (zip bomb?)", size / compressed, limits.max_ratio),
            ));
        }
        total = total.saturating_add(size);
        if total > limits.max_uncompressed_bytes {
            return Err(Error::archive(
                &raw,
                format!("unpacked size exceeds the limit of {} bytes", limits.max_uncompressed_bytes),
            ));
        }
        if is_symlink(&file) {
            let mut target = String::new();
            (&mut file)
                .take(4096)
                .read_to_string(&mut target)
                .map_err(|e| Error::archive(&raw, format!("unreadable link: {e}")))?;
            links.push((raw.clone(), path.clone(), target));
        }
        if !files.insert(path.clone()) || dirs.contains(&path) {
            return Err(Error::archive(&raw, "duplicate entry"));
        }
    }
    for (raw, path, target) in &links {
        match resolve_link(path, target) {
            Some(resolved) if !resolved.is_empty() => {}
            _ => return Err(Error::archive(raw, format!("link to {target:?} leaves the code root"))),
        }
    }
    if let Some(dup) = files.iter().find(|f| dirs.contains(*f)) {
        return Err(Error::archive(dup, "duplicate entry (both a file and a folder)"));
    }
    let candidates = runtime.entrypoint_files(entrypoint);
    if !candidates.iter().any(|c| files.contains(c)) {
        return Err(Error::archive(
            &candidates[0],
            format!("entrypoint file not found in the archive (looked for {})", candidates.join(", ")),
        ));
    }
    let sha256 = hex::encode(Sha256::digest(bytes));
    Ok(CheckedArchive { sha256, size_bytes, uncompressed_bytes: total, files })
}

/// Unpacks a checked archive into `dest` (which must exist and be empty). File modes are
/// normalised (0644, or 0755 when any execute bit was set); links are recreated. Real sizes
/// are enforced against `max_uncompressed_bytes` while writing.
pub fn unpack(bytes: &[u8], dest: &Path, limits: &ArchiveLimits) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |raw: &str, e: std::io::Error| Error::archive(raw, format!("cannot unpack: {e}"));
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::InvalidArchive { entry: None, message: format!("not a valid zip archive: {e}") })?;
    let mut budget = limits.max_uncompressed_bytes;
    for i in 0..zip.len() {
        let mut file = zip
            .by_index(i)
            .map_err(|e| Error::InvalidArchive { entry: None, message: format!("entry #{i} is unreadable: {e}") })?;
        let raw = String::from_utf8_lossy(file.name_raw()).into_owned();
        let path = normalise(&raw)?;
        if path.is_empty() || skipped(&path) {
            continue;
        }
        let target = dest.join(&path);
        if file.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| io(&raw, e))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(&raw, e))?;
        }
        if is_symlink(&file) {
            let mut link = String::new();
            (&mut file).take(4096).read_to_string(&mut link).map_err(|e| io(&raw, e))?;
            if resolve_link(&path, &link).is_none() {
                return Err(Error::archive(&raw, format!("link to {link:?} leaves the code root")));
            }
            std::os::unix::fs::symlink(&link, &target).map_err(|e| io(&raw, e))?;
            continue;
        }
        let mut out = std::fs::File::create(&target).map_err(|e| io(&raw, e))?;
        let written = std::io::copy(&mut (&mut file).take(budget + 1), &mut out).map_err(|e| io(&raw, e))?;
        if written > budget {
            return Err(Error::archive(
                &raw,
                format!("unpacked size exceeds the limit of {} bytes", limits.max_uncompressed_bytes),
            ));
        }
        budget -= written;
        let exec = file.unix_mode().is_some_and(|m| m & 0o111 != 0);
        let mode = if exec { 0o755 } else { 0o644 };
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).map_err(|e| io(&raw, e))?;
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
        assert_eq!(resolve_link("a/b", "../c").as_deref(), Some("c"));
        assert_eq!(resolve_link("a/b", "../../c"), None);
        assert_eq!(resolve_link("a", "/etc/passwd"), None);
    }
}
