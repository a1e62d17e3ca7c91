//! Zipping a function's folder for upload.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use zip::write::SimpleFileOptions;

/// Folders never packed: version control, caches, sless's own data, and installed
/// dependencies that the build installs again from the lockfile.
fn skipped(rel: &Path, root: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    match name {
        ".git" | ".hg" | ".svn" | ".sless" | "__pycache__" | ".DS_Store" | ".venv" => true,
        "node_modules" => root.join("package.json").exists() && rel.parent().is_some_and(|p| p.as_os_str().is_empty()),
        _ => name.ends_with(".pyc"),
    }
}

/// Zips `dir` (paths relative to it, `/`-separated, modes kept, links kept as links).
pub fn zip_dir(dir: &Path) -> anyhow::Result<Vec<u8>> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let walker = walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name().into_iter();
    for entry in walker.filter_entry(|e| e.path().strip_prefix(dir).map(|rel| !skipped(rel, dir)).unwrap_or(true)) {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let rel = entry.path().strip_prefix(dir).context("walked outside the folder")?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        let name = rel.to_str().with_context(|| format!("{} is not valid UTF-8", rel.display()))?;
        let meta =
            entry.path().symlink_metadata().with_context(|| format!("cannot read {}", entry.path().display()))?;
        use std::os::unix::fs::PermissionsExt;
        // A fixed timestamp: the same files give the same bytes, so redeploying builds nothing.
        let options = SimpleFileOptions::default()
            .unix_permissions(meta.permissions().mode() & 0o777)
            .last_modified_time(zip::DateTime::default());
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            zip.add_symlink(name, target.to_string_lossy(), options)?;
        } else if meta.is_dir() {
            zip.add_directory(name, options)?;
        } else {
            zip.start_file(name, options)?;
            let bytes =
                std::fs::read(entry.path()).with_context(|| format!("cannot read {}", entry.path().display()))?;
            zip.write_all(&bytes)?;
        }
    }
    Ok(zip.finish()?.into_inner())
}
