//! The provider's one error type, and how each error becomes a Terraform diagnostic that
//! names the attribute at fault and says what to do.

use std::borrow::Cow;
use std::path::PathBuf;

use tf_provider::{AttributePath, Diagnostic, Diagnostics};

/// Everything a provider operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sless API refused the request or could not be reached.
    #[error(transparent)]
    Api(#[from] sless_client::Error),
    /// A file of `source_dir` or `source_zip` could not be read.
    #[error("cannot read {}", .path.display())]
    Source {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `source_dir` could not be zipped.
    #[error("cannot zip {}", .path.display())]
    Zip {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: zip::result::ZipError,
    },
    /// A new version's build failed; the function keeps its previous version (if any).
    #[error("version {version} of function {function} failed to build: {message}")]
    BuildFailed {
        /// The function's name.
        function: String,
        /// The version that failed.
        version: u32,
        /// The version's status message.
        message: String,
        /// The last lines of its build log.
        log_tail: String,
    },
    /// The function settled in `Failed` without a failed build (e.g. its entrypoint no longer
    /// loads with the new spec).
    #[error("function {function} is {phase}: {message}")]
    NotReady {
        /// The function's name.
        function: String,
        /// Its phase.
        phase: String,
        /// Its status message.
        message: String,
    },
    /// A wait ran past its deadline.
    #[error("{what} did not finish within {secs} s")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline, seconds.
        secs: u64,
    },
    /// A job's run ended in `Failed`.
    #[error("job {job} run {run_id} failed with status {status_code}: {excerpt}")]
    JobFailed {
        /// The job's name.
        job: String,
        /// The run.
        run_id: u64,
        /// The function's HTTP status.
        status_code: u16,
        /// The first bytes of the answer, or the job's message.
        excerpt: String,
    },
    /// An attribute's value is invalid (found before anything is sent).
    #[error("{message}")]
    Invalid {
        /// The attribute.
        attribute: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// A resource was used before the provider was configured (a bug of the call order).
    #[error("the provider is not configured")]
    NotConfigured,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where an error happened, to phrase its diagnostic.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The Terraform type, e.g. `sless_function`.
    pub resource: &'a str,
    /// What was being done, e.g. `create`, `read`, `update`.
    pub action: &'a str,
    /// The object's `namespace/name` (or token id).
    pub id: &'a str,
    /// The resource's attributes: an API `field` is named as the attribute it is one of.
    pub attributes: &'a [&'a str],
    /// The attribute archive problems belong to (`source_dir` or `source_zip`).
    pub code_attribute: &'a str,
}

/// The attribute an API `field` (`memory_mb`, `env.FOO`, `namespaces[0]`) belongs to, if
/// it is one of `attributes`.
pub fn attribute_of(field: &str, attributes: &[&str]) -> Option<AttributePath> {
    let head = field.split(['.', '[']).next().unwrap_or(field);
    let name = attributes.iter().find(|a| **a == head)?;
    let mut path = AttributePath::new(name.to_string());
    if let Some(key) = field.strip_prefix(head).and_then(|rest| rest.strip_prefix('.')).filter(|k| !k.is_empty()) {
        path = path.key(key.to_string());
    }
    Some(path)
}

/// The diagnostic of `err` in `ctx`: a summary naming the object, the server's words, what
/// to do, and the attribute when one is at fault (the API's problem+json `field`).
pub fn diagnostic(err: &Error, ctx: &Context<'_>) -> Diagnostic {
    let what = format!("cannot {} {} {:?}", ctx.action, ctx.resource, ctx.id);
    match err {
        Error::Api(api) => api_diagnostic(api, ctx, &what),
        Error::Source { .. } | Error::Zip { .. } => crate::error::diag(
            format!("{what}: {err}"),
            format!("{}. Check that {} names a readable folder or file.", chain(err), ctx.code_attribute),
            AttributePath::new(ctx.code_attribute.to_string()),
        ),
        Error::BuildFailed { log_tail, .. } => crate::error::diag(
            format!("{what}: {err}"),
            format!(
                "The build log ends with:\n\n{log_tail}\n\nFix the code in {} (or its dependencies) and apply again; \
                 the previous version, if any, keeps serving.",
                ctx.code_attribute
            ),
            AttributePath::new(ctx.code_attribute.to_string()),
        ),
        Error::NotReady { .. } => crate::error::root(
            format!("{what}: {err}"),
            "Fix the function's runtime, entrypoint or code and apply again.".to_string(),
        ),
        Error::Timeout { .. } => crate::error::root(
            format!("{what}: {err}"),
            "The server is still working on it: raise the resource's timeout attribute, or apply again later."
                .to_string(),
        ),
        Error::JobFailed { .. } => crate::error::diag(
            format!("{what}: {err}"),
            "The function answered with an error: see `sless invocations` for the run's record, fix the function \
             or the payload, then bump run_id to run the job again."
                .to_string(),
            AttributePath::new("run_id"),
        ),
        Error::Invalid { attribute, message } => {
            crate::error::diag(format!("{what}: invalid {attribute}"), message.clone(), AttributePath::new(*attribute))
        }
        Error::NotConfigured => crate::error::root(
            format!("{what}: the provider is not configured"),
            "Configure the sless provider (endpoint and token, or SLESS_URL and SLESS_TOKEN).".to_string(),
        ),
    }
}

fn api_diagnostic(err: &sless_client::Error, ctx: &Context<'_>, what: &str) -> Diagnostic {
    let Some(problem) = err.problem() else {
        return match err {
            sless_client::Error::Transport { url, .. } => crate::error::root(
                format!("{what}: cannot reach the sless server"),
                format!(
                    "{}. Check the provider's endpoint (or SLESS_URL) and that the server runs (request: {url}).",
                    chain(err)
                ),
            ),
            _ => crate::error::root(format!("{what}: {err}"), chain(err)),
        };
    };
    let server = &problem.detail;
    let field_path = problem.field.as_deref().and_then(|f| attribute_of(f, ctx.attributes));
    let (summary, advice, path) = match (problem.status, problem.slug()) {
        (400, _) => {
            let field = problem.field.as_deref().unwrap_or("a field");
            let advice = match &field_path {
                Some(_) => format!("Fix the value of {field} in the configuration."),
                None => format!("The server rejected {field}; fix the configuration."),
            };
            (format!("{what}: invalid {field}"), advice, field_path)
        }
        (401, _) => (
            format!("{what}: the sless server refused the token"),
            "Set the provider's token (or SLESS_TOKEN) to a valid, unexpired token: the platform's admin token or \
             a tenant token (slt_…)."
                .to_string(),
            None,
        ),
        (403, "quota-exceeded") => (
            format!("{what}: quota {} exceeded", problem.quota.as_deref().unwrap_or("?")),
            "Lower the function's memory_mb or max_instances, delete unused functions, or ask the platform admin \
             to raise the namespace's quota."
                .to_string(),
            field_path,
        ),
        (403, _) => (
            format!("{what}: the token may not do this"),
            "Use a token whose namespaces include this one and whose role allows it (developer to write, admin \
             for tokens), or the platform admin token."
                .to_string(),
            Some(AttributePath::new("namespace")).filter(|_| ctx.attributes.contains(&"namespace")),
        ),
        (404, _) => (
            format!("{what}: not found"),
            "It was deleted outside Terraform: run terraform plan again to re-create it.".to_string(),
            None,
        ),
        (409, _) => (
            format!("{what}: it already exists or conflicts with another object"),
            format!(
                "Import the existing object (terraform import {}.<name> {}) or choose another name.",
                ctx.resource, ctx.id
            ),
            Some(AttributePath::new("name")).filter(|_| ctx.attributes.contains(&"name")),
        ),
        (412, _) => (
            format!("{what}: it was changed outside Terraform since it was last read"),
            "Refresh (terraform plan or terraform apply -refresh-only) to see the change, then apply again: \
             Terraform does not overwrite a change it has not seen."
                .to_string(),
            None,
        ),
        (413, _) | (422, _) => {
            let entry = problem.entry.as_deref().map(|e| format!(" (archive entry {e:?})")).unwrap_or_default();
            (
                format!("{what}: the code archive was refused{entry}"),
                format!("Fix the files of {}; docs/api.md lists the archive checks.", ctx.code_attribute),
                Some(AttributePath::new(ctx.code_attribute.to_string())),
            )
        }
        (429, _) => (
            format!("{what}: rate-limited"),
            "The token's requests_per_minute is used up: apply again later, or with -parallelism=1.".to_string(),
            None,
        ),
        _ => (
            format!("{what}: the server failed"),
            "Apply again; if it persists, see the server's log.".to_string(),
            None,
        ),
    };
    let detail = format!("The server answered {}: {server}\n\n{advice}", problem.status);
    match path {
        Some(p) => crate::error::diag(summary, detail, p),
        None => crate::error::root(summary, detail),
    }
}

/// `err` and its causes, `: `-separated.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

/// A diagnostic on `attribute`. Built as a literal: `Diagnostic::new` appends a backtrace
/// when `RUST_BACKTRACE` is set, and Terraform's crash detector takes the `panic:` in one
/// for a crash of Terraform itself.
pub fn diag(
    summary: impl Into<Cow<'static, str>>,
    detail: impl Into<Cow<'static, str>>,
    attribute: AttributePath,
) -> Diagnostic {
    Diagnostic { summary: summary.into(), detail: detail.into(), attribute }
}

/// A diagnostic of the whole resource (no attribute).
pub fn root(summary: impl Into<Cow<'static, str>>, detail: impl Into<Cow<'static, str>>) -> Diagnostic {
    diag(summary, detail, AttributePath::root())
}

/// Adds an error diagnostic on `attribute`.
pub fn add(
    diags: &mut Diagnostics,
    summary: impl Into<Cow<'static, str>>,
    detail: impl Into<Cow<'static, str>>,
    attribute: AttributePath,
) {
    diags.add_error(diag(summary, detail, attribute));
}

/// Adds an error diagnostic of the whole resource.
pub fn add_root(diags: &mut Diagnostics, summary: impl Into<Cow<'static, str>>, detail: impl Into<Cow<'static, str>>) {
    diags.add_error(root(summary, detail));
}
