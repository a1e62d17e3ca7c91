//! The app manifest `sless.toml`, or a folder holding one function whose runtime and
//! entrypoint are detected from its files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use sless_core::runtime::Runtime;

/// The manifest file's name.
pub const MANIFEST: &str = "sless.toml";

/// An app: functions to deploy into one namespace.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Namespace to deploy into (default `default`).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The functions.
    #[serde(default)]
    pub functions: Vec<FunctionDecl>,
}

fn default_namespace() -> String {
    "default".into()
}

/// One function of a manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDecl {
    /// DNS-1123 name.
    pub name: String,
    /// Code folder, relative to the manifest (default: the function's name).
    pub path: Option<PathBuf>,
    /// `python3.11` or `nodejs20` (default: detected).
    pub runtime: Option<String>,
    /// `folder/module.function` (default: detected).
    pub entrypoint: Option<String>,
    /// Memory limit in MiB.
    pub memory_mb: Option<u32>,
    /// Timeout in seconds.
    pub timeout_sec: Option<u32>,
    /// Environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Reads `dir/sless.toml`, or treats `dir` as one function named after the folder.
pub fn load(dir: &Path) -> anyhow::Result<Manifest> {
    let dir = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
    let file = dir.join(MANIFEST);
    if !file.exists() {
        let name = folder_name(&dir)?;
        let decl = FunctionDecl {
            name,
            path: Some(dir),
            runtime: None,
            entrypoint: None,
            memory_mb: None,
            timeout_sec: None,
            env: BTreeMap::new(),
        };
        return Ok(Manifest { namespace: default_namespace(), functions: vec![decl] });
    }
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut manifest: Manifest =
        toml::from_str(&text).with_context(|| format!("{} is not a valid manifest", file.display()))?;
    if manifest.functions.is_empty() {
        bail!("{} declares no [[functions]]", file.display());
    }
    for f in &mut manifest.functions {
        let rel = f.path.clone().unwrap_or_else(|| PathBuf::from(&f.name));
        let path = dir.join(&rel);
        if !path.is_dir() {
            bail!("{}: function {:?}: path {} is not a folder", file.display(), f.name, path.display());
        }
        f.path = Some(path);
    }
    Ok(manifest)
}

/// A folder's name as a function name: lowercase, other characters → `-`.
pub fn folder_name(dir: &Path) -> anyhow::Result<String> {
    let raw = dir.file_name().and_then(|n| n.to_str()).context("the folder has no usable name; pass --name")?;
    let name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    Ok(name.trim_matches('-').to_string())
}

/// The runtime and entrypoint of a folder: given values win, the rest is detected.
pub fn resolve(dir: &Path, runtime: Option<&str>, entrypoint: Option<&str>) -> anyhow::Result<(String, String)> {
    match (runtime, entrypoint) {
        (Some(r), Some(e)) => Ok((r.to_string(), e.to_string())),
        _ => {
            let detected = Runtime::detect(|f| dir.join(f).is_file());
            let Some((rt, ep)) = detected else {
                bail!(
                    "cannot detect the runtime of {}: no main.py, handler.py, index.js or index.mjs; pass --runtime and --entrypoint",
                    dir.display()
                );
            };
            Ok((
                runtime.map(str::to_string).unwrap_or_else(|| rt.name().into()),
                entrypoint.map(str::to_string).unwrap_or(ep),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_become_function_names() {
        assert_eq!(folder_name(Path::new("/x/Hello_World")).expect("name"), "hello-world");
    }

    #[test]
    fn manifest_typos_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(MANIFEST), "[[functions]]\nname = \"a\"\nmemroy_mb = 1\n").expect("write");
        let err = load(dir.path()).expect_err("typo");
        assert!(format!("{err:#}").contains("memroy_mb"), "{err:#}");
    }

    #[test]
    fn single_function_folders_are_detected() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("index.mjs"), "export const handler = async () => 1;").expect("write");
        let m = load(dir.path()).expect("load");
        assert_eq!(m.functions.len(), 1);
        let path = m.functions[0].path.clone().expect("path");
        assert_eq!(resolve(&path, None, None).expect("detect"), ("nodejs20".to_string(), "index.handler".to_string()));
    }
}
