//! The registry of runtimes and the entrypoint rules (docs/architecture.md, "Concepts", runtimes/PROTOCOL.md).

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A supported language runtime. Adding a runtime is one variant here plus its shim in
/// `runtimes/<name>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Runtime {
    /// CPython 3.11 (`python3.11`).
    #[serde(rename = "python3.11")]
    Python311,
    /// Node.js 20 (`nodejs20`).
    #[serde(rename = "nodejs20")]
    Nodejs20,
}

impl Runtime {
    /// Every runtime, in the order shown to users.
    pub const ALL: [Runtime; 2] = [Runtime::Python311, Runtime::Nodejs20];

    /// Whether the interpreter reads the environment variable `name` only while it starts,
    /// so that a process started before the function's environment was known (a warm-pool
    /// process) cannot honour it; a function that sets one gets a fresh process instead.
    /// Python: `PYTHON*` (e.g. `PYTHONHASHSEED`, `PYTHONUTF8`, `PYTHONOPTIMIZE`) except
    /// `PYTHONPATH`, which the shim applies itself, and the locale (`LANG`, `LC_*`); Node:
    /// `NODE_*` (e.g. `NODE_OPTIONS`, `NODE_EXTRA_CA_CERTS`) except `NODE_PATH`, which the
    /// shim applies, and `NODE_ENV`, which only libraries read, and `UV_THREADPOOL_SIZE`; both:
    /// the dynamic loader's and the C allocator's (`LD_*`, `MALLOC_*`).
    pub fn reads_at_start(self, name: &str) -> bool {
        let any = name.starts_with("LD_") || name.starts_with("MALLOC_");
        any || match self {
            Runtime::Python311 => {
                (name.starts_with("PYTHON") && name != "PYTHONPATH") || name == "LANG" || name.starts_with("LC_")
            }
            Runtime::Nodejs20 => {
                (name.starts_with("NODE_") && name != "NODE_PATH" && name != "NODE_ENV") || name == "UV_THREADPOOL_SIZE"
            }
        }
    }

    /// Lambda's `AWS_EXECUTION_ENV` for this runtime: `AWS_Lambda_` and Lambda's runtime
    /// identifier (`python3.11`, `nodejs20.x`), as Lambda sets it (docs/writing-functions.md,
    /// "Environment").
    pub fn lambda_execution_env(self) -> &'static str {
        match self {
            Runtime::Python311 => "AWS_Lambda_python3.11",
            Runtime::Nodejs20 => "AWS_Lambda_nodejs20.x",
        }
    }

    /// The runtime's API name, e.g. `python3.11`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Python311 => "python3.11",
            Runtime::Nodejs20 => "nodejs20",
        }
    }

    /// Parses an API name; errors name `field` and list the known runtimes.
    pub fn parse(field: &str, value: &str) -> Result<Self> {
        Runtime::ALL.into_iter().find(|r| r.name() == value).ok_or_else(|| {
            let known: Vec<_> = Runtime::ALL.iter().map(|r| r.name()).collect();
            Error::field(field, format!("unknown runtime {value:?}; known: {}", known.join(", ")))
        })
    }

    /// The archive paths (relative, `/`-separated) of which one must exist for `entrypoint`,
    /// in the order the runtime tries them.
    ///
    /// Python: `dir/a.b.fn` → `dir/a/b.py` or `dir/a/b/__init__.py`. Node (Lambda's rule: the
    /// module is the text up to the first `.`): `dir/index.handler` → `dir/index.js`,
    /// `.mjs`, `.cjs`, or `dir/index`.
    pub fn entrypoint_files(self, entrypoint: &Entrypoint) -> Vec<String> {
        let prefix = if entrypoint.folder.is_empty() { String::new() } else { format!("{}/", entrypoint.folder) };
        match self {
            Runtime::Python311 => {
                let module = entrypoint.module.replace('.', "/");
                vec![format!("{prefix}{module}.py"), format!("{prefix}{module}/__init__.py")]
            }
            Runtime::Nodejs20 => {
                let module = entrypoint.node_module();
                ["js", "mjs", "cjs"]
                    .iter()
                    .map(|ext| format!("{prefix}{module}.{ext}"))
                    .chain(std::iter::once(format!("{prefix}{module}")))
                    .collect()
            }
        }
    }

    /// Detects the runtime and entrypoint of a folder holding one function from its files
    /// (`read` gives a file's text, `None` when it is absent): the first of `main.py`,
    /// `handler.py`, `lambda_function.py` (the Lambda console's default) → `python3.11`,
    /// `index.js`, `index.mjs` → `nodejs20`. The handler is `handler`, or in Python
    /// `lambda_handler` (Lambda's default name) when the module defines that and no `handler`.
    pub fn detect(read: impl Fn(&str) -> Option<String>) -> Option<(Runtime, String)> {
        [
            ("main.py", Runtime::Python311, "main"),
            ("handler.py", Runtime::Python311, "handler"),
            ("lambda_function.py", Runtime::Python311, "lambda_function"),
            ("index.js", Runtime::Nodejs20, "index"),
            ("index.mjs", Runtime::Nodejs20, "index"),
        ]
        .into_iter()
        .find_map(|(file, rt, module)| {
            let text = read(file)?;
            let defines = |name: &str| {
                text.lines().any(|l| {
                    let l = l.trim_start_matches("async ");
                    l.strip_prefix("def ").is_some_and(|rest| rest.trim_start().starts_with(&format!("{name}(")))
                })
            };
            let function = match rt {
                Runtime::Python311 if !defines("handler") && defines("lambda_handler") => "lambda_handler",
                _ => "handler",
            };
            Some((rt, format!("{module}.{function}")))
        })
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed entrypoint `folder/module.path.function` (docs/architecture.md, "Concepts").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entrypoint {
    /// The folder under the code root (`""` for the root), `/`-separated.
    pub folder: String,
    /// The dotted module path, e.g. `main` or `hello_world.app`.
    pub module: String,
    /// The handler's name, e.g. `handler`.
    pub function: String,
}

impl Entrypoint {
    /// Parses and checks an entrypoint; errors name `field`.
    pub fn parse(field: &str, value: &str) -> Result<Self> {
        let bad = |m: &str| {
            Error::field(field, format!("{m}, got {value:?} (expected e.g. main.handler or src/app.handler)"))
        };
        if value.is_empty() || value.len() > 256 {
            return Err(bad("must be 1-256 characters"));
        }
        if value.starts_with('/') || value.contains('\\') || value.chars().any(char::is_whitespace) {
            return Err(bad("must be a relative path without spaces or backslashes"));
        }
        // A NUL can never reach a process's argv: the version would stay `Building` for good.
        if value.chars().any(char::is_control) {
            return Err(bad("must not contain control characters"));
        }
        let (folder, rest) = match value.rfind('/') {
            Some(i) => (&value[..i], &value[i + 1..]),
            None => ("", value),
        };
        if folder.split('/').any(|s| s == ".." || s == ".") && !folder.is_empty() {
            return Err(bad("must not contain '.' or '..' folders"));
        }
        if !folder.is_empty() && folder.split('/').any(str::is_empty) {
            return Err(bad("must not contain empty folder names"));
        }
        let Some(dot) = rest.rfind('.') else {
            return Err(bad("must be module.function"));
        };
        let (module, function) = (&rest[..dot], &rest[dot + 1..]);
        if module.is_empty() || function.is_empty() || module.split('.').any(str::is_empty) {
            return Err(bad("must be module.function with non-empty parts"));
        }
        Ok(Entrypoint { folder: folder.to_string(), module: module.to_string(), function: function.to_string() })
    }

    /// The Node module file stem: the text up to the first `.` after the folder (Lambda's rule).
    pub fn node_module(&self) -> &str {
        self.module.split('.').next().unwrap_or(&self.module)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_read_at_start_are_named() {
        let py = Runtime::Python311;
        for name in
            ["PYTHONHASHSEED", "PYTHONUTF8", "PYTHONOPTIMIZE", "LANG", "LC_ALL", "LD_PRELOAD", "MALLOC_ARENA_MAX"]
        {
            assert!(py.reads_at_start(name), "{name}");
        }
        for name in ["PYTHONPATH", "TZ", "NODE_OPTIONS", "MY_SETTING"] {
            assert!(!py.reads_at_start(name), "{name}");
        }
        let node = Runtime::Nodejs20;
        for name in ["NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "UV_THREADPOOL_SIZE", "LD_LIBRARY_PATH"] {
            assert!(node.reads_at_start(name), "{name}");
        }
        for name in ["NODE_PATH", "NODE_ENV", "TZ", "PYTHONHASHSEED", "DEBUG"] {
            assert!(!node.reads_at_start(name), "{name}");
        }
    }

    #[test]
    fn regression_an_entrypoint_with_a_nul_byte_is_refused() {
        for bad in ["main\0.handler", "main.hand\u{7}ler", "src\n/main.handler"] {
            match Entrypoint::parse("entrypoint", bad) {
                Err(Error::InvalidField { field, .. }) => assert_eq!(field, "entrypoint"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn python_files() {
        let ep = Entrypoint::parse("entrypoint", "src/hello_world.app.handler").expect("valid");
        assert_eq!(ep.folder, "src");
        assert_eq!(ep.module, "hello_world.app");
        assert_eq!(
            Runtime::Python311.entrypoint_files(&ep),
            ["src/hello_world/app.py", "src/hello_world/app/__init__.py"]
        );
    }

    #[test]
    fn node_files_follow_lambda_first_dot_rule() {
        let ep = Entrypoint::parse("entrypoint", "src/hello_world.app.handler").expect("valid");
        assert_eq!(
            Runtime::Nodejs20.entrypoint_files(&ep),
            ["src/hello_world.js", "src/hello_world.mjs", "src/hello_world.cjs", "src/hello_world"]
        );
        let ep = Entrypoint::parse("entrypoint", "index.handler").expect("valid");
        assert_eq!(Runtime::Nodejs20.entrypoint_files(&ep)[0], "index.js");
    }

    #[test]
    fn bad_entrypoints_name_the_field() {
        for bad in ["", "main", ".handler", "main.", "/abs.handler", "../up.handler", "a//b.handler", "a b.h", "a\\b.h"]
        {
            let err = Entrypoint::parse("entrypoint", bad).expect_err(bad);
            assert!(err.to_string().starts_with("entrypoint: "), "{err}");
        }
    }

    #[test]
    fn runtime_names_round_trip_and_unknown_is_named() {
        for rt in Runtime::ALL {
            assert_eq!(Runtime::parse("runtime", rt.name()).expect("known"), rt);
        }
        let err = Runtime::parse("runtime", "ruby3").expect_err("unknown");
        assert!(err.to_string().contains("runtime: unknown runtime \"ruby3\""), "{err}");
    }

    #[test]
    fn detects_from_files() {
        let only = |name: &'static str, text: &'static str| move |f: &str| (f == name).then(|| text.to_string());
        let py = "def handler(event, context):\n    return 1\n";
        assert_eq!(Runtime::detect(only("main.py", py)), Some((Runtime::Python311, "main.handler".into())));
        assert_eq!(Runtime::detect(only("index.mjs", "")), Some((Runtime::Nodejs20, "index.handler".into())));
        assert_eq!(Runtime::detect(|_| None), None);
    }

    #[test]
    fn regression_lambda_style_python_handlers_are_detected() {
        let only = |name: &'static str, text: &'static str| move |f: &str| (f == name).then(|| text.to_string());
        let lambda = "import json\n\ndef lambda_handler(event, context):\n    return 1\n";
        assert_eq!(
            Runtime::detect(only("lambda_function.py", lambda)),
            Some((Runtime::Python311, "lambda_function.lambda_handler".into()))
        );
        assert_eq!(
            Runtime::detect(only("handler.py", "async def lambda_handler(e, c):\n    return 1\n")),
            Some((Runtime::Python311, "handler.lambda_handler".into()))
        );
        let both = "def handler(e, c):\n    return 1\ndef lambda_handler(e, c):\n    return 2\n";
        assert_eq!(Runtime::detect(only("main.py", both)), Some((Runtime::Python311, "main.handler".into())));
    }
}
