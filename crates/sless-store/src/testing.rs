//! Test fixtures (feature `test-support`): a PostgreSQL database of its own for each test,
//! a local S3-protocol server (moto, from PyPI) with a bucket of its own, and records.
//!
//! PostgreSQL is the server at `SLESS_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`, trust auth as on the development
//! machines); `.ci/run` starts it when it is not running. moto is started as
//! `python3 -m moto.server` (`SLESS_TEST_PYTHON` names another interpreter); `.ci/run`
//! installs `moto[server]` when it is missing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sless_core::spec::FunctionSpec;
use sless_core::status::FunctionStatus;
use sless_core::traits::FunctionRecord;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// A new function record in namespace `default` (Python, `main.handler`, pending).
pub fn function_record(name: &str) -> FunctionRecord {
    let (_, spec) =
        FunctionSpec::from_json(&serde_json::json!({"runtime": "python3.11", "entrypoint": "main.handler"}))
            .expect("spec");
    let now = chrono::Utc::now();
    FunctionRecord {
        namespace: "default".into(),
        name: name.into(),
        spec,
        resource_version: sless_core::resource_version::ResourceVersion::from_count(1),
        active_version: None,
        status: FunctionStatus::pending(now),
        created_at: now,
        updated_at: now,
    }
}

/// The PostgreSQL server the tests use (a URL of its `postgres` database).
pub fn postgres_admin_url() -> String {
    std::env::var("SLESS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// `admin` with its database replaced by `database`.
fn with_database(admin: &str, database: &str) -> String {
    let (base, query) = admin.split_once('?').map_or((admin, None), |(b, q)| (b, Some(q)));
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

async fn admin_connection(admin: &str) -> PgConnection {
    PgConnection::connect(admin).await.unwrap_or_else(|e| {
        panic!(
            "cannot reach the test PostgreSQL at {admin}: {e}\n\
             start it (`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, as .ci/run does) \
             or set SLESS_TEST_POSTGRES_URL"
        )
    })
}

/// A database created for one test (`sless_test_<random>`), dropped with its connections
/// when this value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    /// The URL to connect to it.
    pub url: String,
    name: String,
    admin: String,
}

impl TestDatabase {
    /// Creates an empty database. Panics when PostgreSQL is unreachable.
    pub async fn create() -> TestDatabase {
        let admin = postgres_admin_url();
        let name = format!("sless_test_{}_{:016x}", std::process::id(), rand::random::<u64>());
        let mut conn = admin_connection(&admin).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
        let _ = conn.close().await;
        TestDatabase { url: with_database(&admin, &name), name, admin }
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drops the database now, ending every connection to it: whoever used it finds the
    /// database unreachable from then on.
    pub async fn drop_now(&self) {
        let mut conn = admin_connection(&self.admin).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop_sql(&self.name)))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("cannot drop the test database {}: {e}", self.name));
        let _ = conn.close().await;
    }
}

fn drop_sql(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop runs inside or outside a runtime, maybe while unwinding: a thread of its own
        // with a runtime of its own drops the database either way.
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let mut conn = PgConnection::connect(&admin).await.ok()?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop_sql(&name))).execute(&mut conn).await.ok()?;
                conn.close().await.ok()
            })
        });
        let _ = dropped.join();
    }
}

/// A moto S3 server on 127.0.0.1 with one bucket, stopped when dropped. Its data lives in
/// memory: it ends with the server.
#[derive(Debug)]
pub struct S3Server {
    /// e.g. `http://127.0.0.1:41234`.
    pub endpoint: String,
    /// The bucket created for the test.
    pub bucket: String,
    child: Child,
}

/// The credentials the test server is given (moto accepts any).
pub const S3_ACCESS_KEY_ID: &str = "sless-test";
/// See [`S3_ACCESS_KEY_ID`].
pub const S3_SECRET_ACCESS_KEY: &str = "sless-test-secret";
/// The region the test server is used with.
pub const S3_REGION: &str = "us-east-1";

impl S3Server {
    /// Starts moto on a free port and creates a bucket. Panics when moto cannot be started.
    pub fn start() -> S3Server {
        let python = std::env::var("SLESS_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let mut child = Command::new(&python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {python} -m moto.server: {e}"));
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        // Reads the "Running on http://127.0.0.1:PORT" line, then keeps draining the log.
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("Running on http://") {
                    let _ = tx.send(Ok(line[at + "Running on ".len()..].trim().to_string()));
                } else if seen.len() < 50 {
                    seen.push(line);
                }
            }
            let _ = tx.send(Err(seen.join("\n")));
        });
        let endpoint = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(endpoint)) => endpoint,
            Ok(Err(log)) => {
                let _ = child.kill();
                panic!(
                    "moto did not start (install it with `python3 -m pip install 'moto[server]'`, as .ci/run does):\n{log}"
                )
            }
            Err(_) => {
                let _ = child.kill();
                panic!("moto did not start within 60 s")
            }
        };
        let bucket = format!("sless-test-{:08x}", rand::random::<u32>());
        let server = S3Server { endpoint, bucket, child };
        server.create_bucket();
        server
    }

    /// One unsigned request with an empty body (moto allows them); the whole answer.
    fn request(&self, method: &str, target: &str) -> String {
        let host = self.endpoint.trim_start_matches("http://");
        let mut tcp = TcpStream::connect(host).expect("connect to moto");
        write!(tcp, "{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .expect("write to moto");
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer);
        answer
    }

    fn create_bucket(&self) {
        let answer = self.request("PUT", &format!("/{}", self.bucket));
        assert!(answer.starts_with("HTTP/1.1 200"), "creating bucket {}: {answer}", self.bucket);
    }

    /// The settings for [`crate::ObjectBlobStore::s3`] (and, upper-cased, the environment
    /// of a server) that reach this server.
    pub fn config(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint_url", self.endpoint.clone()),
            ("aws_region", S3_REGION.to_string()),
            ("aws_access_key_id", S3_ACCESS_KEY_ID.to_string()),
            ("aws_secret_access_key", S3_SECRET_ACCESS_KEY.to_string()),
            ("aws_allow_http", "true".to_string()),
        ]
    }

    /// The same settings as environment variables (`AWS_ENDPOINT_URL`, …).
    pub fn env(&self) -> Vec<(String, String)> {
        self.config().into_iter().map(|(k, v)| (k.to_ascii_uppercase(), v)).collect()
    }

    /// `s3://BUCKET/prefix`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// Every key in the bucket, in key order.
    pub fn keys(&self) -> Vec<String> {
        let answer = self.request("GET", &format!("/{}?list-type=2", self.bucket));
        answer.split("<Key>").skip(1).filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string())).collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_is_replaced() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "x"), "postgres://u@h:5432/x");
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
        assert_eq!(with_database("postgres://u:p@h/db?sslmode=disable", "x"), "postgres://u:p@h/x?sslmode=disable");
    }
}
