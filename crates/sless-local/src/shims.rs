//! The runtime shims (embedded in the binary, written to the data folder at start) and the
//! interpreters that run them.

use std::path::{Path, PathBuf};

use sless_core::runtime::Runtime;

use crate::{Error, Result};

const PYTHON_SHIM: &str = include_str!("../../../runtimes/python3.11/bootstrap.py");
const NODE_SHIM: &str = include_str!("../../../runtimes/nodejs20/bootstrap.cjs");

/// The shim of `runtime`: its file name (`bootstrap.py`, `bootstrap.cjs`) and its source, as
/// embedded in the binary (what an image build copies in; docs/kubernetes.md, "Builds").
pub fn shim_source(runtime: Runtime) -> (&'static str, &'static str) {
    match runtime {
        Runtime::Python311 => ("bootstrap.py", PYTHON_SHIM),
        Runtime::Nodejs20 => ("bootstrap.cjs", NODE_SHIM),
    }
}

/// Writes the shims under `dir` (only when their content changed) and returns the path of
/// each runtime's entry file.
pub(crate) fn install(dir: &Path) -> Result<Shims> {
    let write = |rel: &str, content: &str| -> Result<PathBuf> {
        let path = dir.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(content) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(Error::io(format!("creating {}", parent.display())))?;
            }
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, content).map_err(Error::io(format!("writing {}", tmp.display())))?;
            std::fs::rename(&tmp, &path).map_err(Error::io(format!("writing {}", path.display())))?;
        }
        Ok(path)
    };
    Ok(Shims {
        python: write("python3.11/bootstrap.py", PYTHON_SHIM)?,
        node: write("nodejs20/bootstrap.cjs", NODE_SHIM)?,
    })
}

/// Paths of the installed shims.
#[derive(Debug, Clone)]
pub(crate) struct Shims {
    python: PathBuf,
    node: PathBuf,
}

impl Shims {
    pub(crate) fn for_runtime(&self, runtime: Runtime) -> &Path {
        match runtime {
            Runtime::Python311 => &self.python,
            Runtime::Nodejs20 => &self.node,
        }
    }
}

/// The interpreters used to run functions: absolute paths of real binaries (not shell shims
/// such as pyenv's, which add ~50 ms to every start).
#[derive(Debug, Clone)]
pub struct Interpreters {
    /// CPython 3.11.
    pub python: PathBuf,
    /// Node.js 20.
    pub node: PathBuf,
}

impl Interpreters {
    /// Resolves `python` and `node` (names looked up in `PATH`, or paths) to the real
    /// interpreter binaries and checks their versions. Errors: [`Error::Interpreter`] naming
    /// the runtime whose interpreter is missing or of another version.
    pub fn resolve(python: &str, node: &str) -> Result<Self> {
        let py = std::process::Command::new(python)
            .args(["-c", "import sys; print(sys.executable); print('%d.%d' % sys.version_info[:2])"])
            .output()
            .map_err(|e| Error::Interpreter {
                runtime: "python3.11",
                message: format!("cannot run {python:?}: {e}"),
            })?;
        let out = String::from_utf8_lossy(&py.stdout);
        let mut lines = out.lines();
        let (Some(exe), Some(version)) = (lines.next(), lines.next()) else {
            return Err(Error::Interpreter {
                runtime: "python3.11",
                message: format!("{python:?} did not report its version"),
            });
        };
        if version != "3.11" {
            return Err(Error::Interpreter {
                runtime: "python3.11",
                message: format!("{python:?} is Python {version}, not 3.11"),
            });
        }
        let node_out = std::process::Command::new(node)
            .args(["-p", "process.execPath + '\\n' + process.versions.node"])
            .output()
            .map_err(|e| Error::Interpreter { runtime: "nodejs20", message: format!("cannot run {node:?}: {e}") })?;
        let out = String::from_utf8_lossy(&node_out.stdout);
        let mut lines = out.lines();
        let (Some(node_exe), Some(node_version)) = (lines.next(), lines.next()) else {
            return Err(Error::Interpreter {
                runtime: "nodejs20",
                message: format!("{node:?} did not report its version"),
            });
        };
        if !node_version.starts_with("20.") {
            return Err(Error::Interpreter {
                runtime: "nodejs20",
                message: format!("{node:?} is Node.js {node_version}, not 20"),
            });
        }
        Ok(Interpreters { python: PathBuf::from(exe), node: PathBuf::from(node_exe) })
    }

    pub(crate) fn for_runtime(&self, runtime: Runtime) -> &Path {
        match runtime {
            Runtime::Python311 => &self.python,
            Runtime::Nodejs20 => &self.node,
        }
    }
}
