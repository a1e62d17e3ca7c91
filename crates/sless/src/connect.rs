//! Where the client commands find the server: flags and environment first, then the
//! `client.json` that `sless up` and `sless server` write.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;
use sless_client::Client;

use crate::cli::Connection;

/// The connection file written by `sless up` and `sless server`.
pub const CLIENT_FILE: &str = "client.json";

/// The user's config folder for sless: `$SLESS_CONFIG_DIR`, else `$XDG_CONFIG_HOME/sless`,
/// else `~/.config/sless`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SLESS_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(d).join("sless"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("sless"))
}

/// Resolves the server and token: flags/env first, then `./.sless/client.json`, then the
/// user's config folder.
pub fn connect(conn: &Connection) -> anyhow::Result<Client> {
    let saved = || -> Option<Value> {
        let candidates = [Some(PathBuf::from(".sless")), config_dir()];
        candidates.into_iter().flatten().find_map(|d| {
            let text = std::fs::read_to_string(d.join(CLIENT_FILE)).ok()?;
            serde_json::from_str(&text).ok()
        })
    };
    let token_file = match &conn.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--token-file {}: cannot read it", path.display()))?;
            let token = text.trim().to_string();
            anyhow::ensure!(!token.is_empty(), "--token-file {}: the file is empty", path.display());
            Some(token)
        }
        None => None,
    };
    let explicit_token = conn.token.clone().or(token_file);
    let file = if conn.url.is_none() || explicit_token.is_none() { saved() } else { None };
    // A saved token belongs to the saved server: never send it to another one.
    let file = file.filter(|f| conn.url.is_none() || f.get("url").and_then(Value::as_str) == conn.url.as_deref());
    let from_file = |k: &str| file.as_ref().and_then(|f| f.get(k)).and_then(Value::as_str).map(str::to_string);
    let base = conn
        .url
        .clone()
        .or_else(|| from_file("url"))
        .context("no server: pass --url or set SLESS_URL (or start one with `sless up` or `sless server`)")?;
    let token = explicit_token
        .or_else(|| from_file("token"))
        .context("no token: pass --token or --token-file, or set SLESS_TOKEN")?;
    Ok(Client::new(&base, &token, &conn.namespace))
}
