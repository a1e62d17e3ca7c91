//! The code archive of a `sless_function`: a folder zipped deterministically, so the same
//! files always give the same bytes (and the same SHA-256, which the server keys versions
//! by), whatever their modification times, owners or the order the file system lists them.
//!
//! Rules (docs/terraform.md): entries sorted by path (`/`-separated, relative to the folder),
//! files only (folders are implied), every time set to 1980-01-01 00:00, mode 0644 or 0755
//! when the owner may execute the file, deflate; symbolic links kept as links. Skipped at any
//! depth: `.git`, `.hg`, `.svn`, `.terraform`, `.sless`, `.venv`, `__pycache__`, `.DS_Store`,
//! `*.pyc`, `*.tfstate`, `*.tfstate.backup`, and `node_modules` in the folder's root when a
//! `package.json` sits beside it (the build installs the dependencies again).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use crate::error::{Error, Result};

/// Names skipped wherever they appear.
const SKIPPED: [&str; 8] = [".git", ".hg", ".svn", ".terraform", ".sless", ".venv", "__pycache__", ".DS_Store"];

/// Whether the entry at `rel` (relative to `root`) is left out of the archive.
pub fn skipped(rel: &Path, root: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if SKIPPED.contains(&name) {
        return true;
    }
    if name == "node_modules" {
        return rel.parent().is_some_and(|p| p.as_os_str().is_empty()) && root.join("package.json").exists();
    }
    name.ends_with(".pyc") || name.ends_with(".tfstate") || name.ends_with(".tfstate.backup")
}

/// The deterministic zip of `dir` (see the module's rules). Errors: [`Error::Source`] when a
/// file cannot be read or a name is not UTF-8, [`Error::Zip`].
pub fn zip_dir(dir: &Path) -> Result<Vec<u8>> {
    let source = |path: &Path, e: std::io::Error| Error::Source { path: path.to_path_buf(), source: e };
    let zip_err = |e| Error::Zip { path: dir.to_path_buf(), source: e };
    let meta = std::fs::metadata(dir).map_err(|e| source(dir, e))?;
    if !meta.is_dir() {
        return Err(source(dir, std::io::Error::other("not a folder")));
    }
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    let walker = walkdir::WalkDir::new(dir).follow_links(false).into_iter();
    for entry in walker.filter_entry(|e| e.path().strip_prefix(dir).map(|rel| !skipped(rel, dir)).unwrap_or(true)) {
        let entry = entry.map_err(|e| {
            let path = e.path().unwrap_or(dir).to_path_buf();
            Error::Source { path, source: e.into() }
        })?;
        if entry.file_type().is_dir() {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).map_err(|_| source(entry.path(), std::io::Error::other("outside")))?;
        let name = rel
            .to_str()
            .ok_or_else(|| source(entry.path(), std::io::Error::other("the name is not valid UTF-8")))?
            .replace(std::path::MAIN_SEPARATOR, "/");
        entries.push((name, entry.path().to_path_buf()));
    }
    entries.sort();
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, path) in &entries {
        let meta = path.symlink_metadata().map_err(|e| source(path, e))?;
        let mode = if meta.permissions().mode() & 0o100 != 0 { 0o755 } else { 0o644 };
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(mode)
            .last_modified_time(zip::DateTime::default());
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).map_err(|e| source(path, e))?;
            zip.add_symlink(name.as_str(), target.to_string_lossy(), options.unix_permissions(0o777))
                .map_err(zip_err)?;
        } else {
            let bytes = std::fs::read(path).map_err(|e| source(path, e))?;
            zip.start_file(name.as_str(), options).map_err(zip_err)?;
            zip.write_all(&bytes).map_err(|e| source(path, e))?;
        }
    }
    Ok(zip.finish().map_err(zip_err)?.into_inner())
}

/// The bytes of a prepared zip file (`source_zip`). Errors: [`Error::Source`].
pub fn read_zip(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Source { path: path.to_path_buf(), source: e })
}

/// Lowercase hex SHA-256 of `bytes`: what the server reports as a version's `sha256`.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
