//! Printing API objects: aligned tables and fields of their JSON.

use serde::Serialize;
use serde_json::Value;

/// Prints rows under headers, each column as wide as its widest cell.
pub(crate) fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// The field at `path` of an object's JSON as a table cell: strings bare, null as `-`.
pub(crate) fn s(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    match cur {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An object as the API's JSON (what `-o json` prints and table cells are read from).
pub(crate) fn json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Prints an object as pretty JSON.
pub(crate) fn print_json<T: Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// A phase enum's name as the API writes it (`Ready`, `Waiting`, …).
pub(crate) fn name_of<T: Serialize>(v: &T) -> String {
    s(&json(v), &[])
}
