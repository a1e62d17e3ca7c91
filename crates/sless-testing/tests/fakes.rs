//! The fakes keep the SQL store's semantics: these follow the store suite
//! (`crates/sless-store/src/sql/tests.rs`) on the fakes.

use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use serde_json::json;
use sless_core::Error;
use sless_core::invocation::{InvocationQuery, Outcome, Retention};
use sless_core::job::JobStatus;
use sless_core::resource_version::ResourceVersion;
use sless_core::runtime::Runtime;
use sless_core::status::{FunctionPhase, FunctionStatus, VersionPhase};
use sless_core::traits::{
    BlobStore, BuildOutcome, Change, Executor, FunctionRecord, Invocation, InvocationLog, InvokeResult, InvokeTarget,
    Kind, Page, Registry,
};
use sless_core::trigger::TriggerStatus;
use sless_testing::{
    FakeBlobStore, FakeExecutor, FakeInvocationLog, FakeRegistry, FunctionBuilder, InvocationBuilder, JobBuilder,
    TriggerBuilder,
};

fn page(limit: u32, after: Option<&str>) -> Page {
    Page { limit, continue_token: after.map(String::from) }
}

fn rv(count: u64) -> ResourceVersion {
    ResourceVersion::from_count(count)
}

fn names<T>(items: Vec<T>, name: impl Fn(T) -> String) -> Vec<String> {
    items.into_iter().map(name).collect()
}

#[tokio::test]
async fn create_get_list_conflict_and_bytewise_order() {
    let reg = FakeRegistry::new();
    for name in ["ab", "a-c", "a0", "b", "a-b"] {
        reg.create_function(&FunctionBuilder::new(name).build().into()).await.expect("create");
    }
    reg.create_function(&FunctionBuilder::new("z").namespace("other").build().into()).await.expect("create");
    assert!(matches!(
        reg.create_function(&FunctionBuilder::new("b").build().into()).await,
        Err(Error::AlreadyExists { kind: "function", .. })
    ));
    assert!(matches!(reg.get_function("default", "nope").await, Err(Error::NotFound { kind: "function", .. })));
    let reg = &reg;
    let list = |p| async move {
        names(reg.list_functions("default", &p).await.expect("list").items, |f: FunctionRecord| f.name)
    };
    assert_eq!(list(page(10, None)).await, ["a-b", "a-c", "a0", "ab", "b"]);
    assert_eq!(list(page(2, Some("a-c"))).await, ["a0", "ab"]);
    assert!(list(page(10, Some("b"))).await.is_empty());
    assert_eq!(names(reg.all_functions().await.expect("all"), |f| f.namespace + "/" + &f.name).len(), 6);
}

#[tokio::test]
async fn replace_checks_and_bumps_resource_version() {
    let reg = FakeRegistry::new();
    let created = reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("create");
    assert_eq!((created.resource_version.clone(), created.created_at), (rv(1), created.updated_at), "store-owned");
    let mut spec = created.spec.clone();
    spec.memory_mb = 256;
    let updated = reg.replace_spec("default", "f", &spec, Some(&rv(1))).await.expect("replace");
    assert_eq!((updated.resource_version, updated.spec.memory_mb), (rv(2), 256));
    assert!(updated.updated_at >= created.updated_at);
    assert_eq!(updated.created_at, created.created_at);
    assert!(matches!(
        reg.replace_spec("default", "f", &spec, Some(&rv(1))).await,
        Err(Error::Stale { expected, current }) if expected == "1" && current == "2"
    ));
    assert_eq!(reg.replace_spec("default", "f", &spec, None).await.expect("replace").resource_version, rv(3));
    assert!(matches!(reg.replace_spec("default", "nope", &spec, Some(&rv(1))).await, Err(Error::NotFound { .. })));

    // A status write keeps the resource version.
    reg.update_status("default", "f", &FunctionStatus::pending(Utc::now()), Some(4)).await.expect("status");
    let got = reg.get_function("default", "f").await.expect("get");
    assert_eq!((got.resource_version, got.active_version), (rv(3), Some(4)));
}

#[tokio::test]
async fn versions_are_numbered_deduplicated_and_the_active_one_is_spared() {
    let reg = FakeRegistry::new();
    reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("create");
    let add = |sha: &'static str| async { reg.add_version("default", "f", sha, 1, Runtime::Python311).await };
    assert_eq!(add("aa").await.map(|(v, new)| (v.version, new)).expect("v1"), (1, true));
    assert_eq!(add("bb").await.map(|(v, new)| (v.version, new)).expect("v2"), (2, true));
    assert_eq!(add("aa").await.map(|(v, new)| (v.version, new)).expect("same"), (1, false));
    assert_eq!(add("cc").await.map(|(v, _)| v.phase).expect("v3"), VersionPhase::Building);
    assert!(matches!(
        reg.add_version("default", "nope", "aa", 1, Runtime::Python311).await,
        Err(Error::NotFound { kind: "function", .. })
    ));

    reg.set_version_build("default", "f", 2, VersionPhase::Failed, "boom").await.expect("build");
    assert_eq!(reg.get_version("default", "f", 2).await.expect("get").phase, VersionPhase::Failed);

    reg.update_status("default", "f", &FunctionStatus::pending(Utc::now()), Some(2)).await.expect("status");
    let mut rx = reg.subscribe();
    assert!(!reg.delete_version("default", "f", 2).await.expect("active"));
    assert!(reg.delete_version("default", "f", 1).await.expect("delete"));
    assert!(!reg.delete_version("default", "f", 1).await.expect("again"));
    assert!(!reg.delete_version("default", "nope", 1).await.expect("missing"));
    assert_eq!(rx.try_recv().ok().map(|c| c.kind), Some(Kind::Function));
    assert!(rx.try_recv().is_err(), "only the deletion is announced");
    assert_eq!(names(reg.list_versions("default", "f").await.expect("list"), |v| v.version.to_string()), ["2", "3"]);
    assert_eq!(add("dd").await.map(|(v, _)| v.version).expect("v4"), 4, "numbers go on after the newest");

    reg.delete_function("default", "f").await.expect("delete");
    assert!(matches!(reg.get_version("default", "f", 2).await, Err(Error::NotFound { kind: "version", .. })));
    assert!(matches!(reg.list_versions("default", "f").await, Err(Error::NotFound { .. })));
}

#[tokio::test]
async fn triggers_and_jobs_crud() {
    let reg = FakeRegistry::new();
    for name in ["c", "a", "b"] {
        reg.create_trigger(&TriggerBuilder::cron(name, "f").build().into()).await.expect("create");
        reg.create_job(&JobBuilder::new(name, "f").build().into()).await.expect("create");
    }
    assert!(matches!(
        reg.create_trigger(&TriggerBuilder::http("a", "f").build().into()).await,
        Err(Error::AlreadyExists { kind: "trigger", .. })
    ));
    assert!(matches!(
        reg.create_job(&JobBuilder::new("a", "f").build().into()).await,
        Err(Error::AlreadyExists { kind: "job", .. })
    ));
    let triggers = names(reg.list_triggers("default", &page(1, Some("a"))).await.expect("list").items, |t| t.name);
    assert_eq!(triggers, ["b"]);
    assert_eq!(names(reg.all_jobs().await.expect("all"), |j| j.name), ["a", "b", "c"]);

    let mut spec = reg.get_trigger("default", "a").await.expect("get").spec;
    spec.enabled = false;
    assert_eq!(
        reg.replace_trigger_spec("default", "a", &spec, Some(&rv(1))).await.expect("replace").resource_version,
        rv(2)
    );
    assert!(matches!(reg.replace_trigger_spec("default", "a", &spec, Some(&rv(1))).await, Err(Error::Stale { .. })));
    let mut job = reg.get_job("default", "a").await.expect("get").spec;
    job.run_id = 2;
    assert_eq!(reg.replace_job_spec("default", "a", &job, None).await.expect("replace").spec.run_id, 2);

    let status = TriggerStatus { message: "firing".into(), ..TriggerStatus::new() };
    reg.update_trigger_status("default", "a", &status).await.expect("status");
    assert_eq!(reg.get_trigger("default", "a").await.expect("get").status, status);
    assert!(matches!(
        reg.update_job_status("default", "nope", &JobStatus::new()).await,
        Err(Error::NotFound { kind: "job", .. })
    ));
    reg.delete_trigger("default", "a").await.expect("delete");
    assert!(matches!(reg.delete_trigger("default", "a").await, Err(Error::NotFound { kind: "trigger", .. })));
    reg.delete_job("default", "a").await.expect("delete");
    assert!(matches!(reg.get_job("default", "a").await, Err(Error::NotFound { .. })));
}

#[tokio::test]
async fn every_write_is_announced_unless_silenced_and_failures_are_storage_errors() {
    let reg = FakeRegistry::new();
    let mut rx = reg.subscribe();
    let generation = reg.generation();
    let change = |kind, name: &str| Change { kind, namespace: "default".into(), name: name.into() };
    let f = FunctionBuilder::new("f").build();
    reg.create_function(&sless_core::traits::New::from(&f)).await.expect("create");
    assert!(reg.create_function(&sless_core::traits::New::from(&f)).await.is_err(), "failed writes say nothing");
    reg.replace_spec("default", "f", &f.spec, None).await.expect("replace");
    reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("version");
    reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("same version");
    reg.set_version_build("default", "f", 1, VersionPhase::Ready, "").await.expect("build");
    reg.create_job(&JobBuilder::new("j", "f").build().into()).await.expect("job");
    let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    let mut want = vec![change(Kind::Function, "f"); 4];
    want.push(change(Kind::Job, "j"));
    assert_eq!(got, want);
    assert_eq!(reg.generation() - generation, 5);

    reg.silence();
    reg.update_job_status("default", "j", &JobStatus::new()).await.expect("status");
    assert!(rx.try_recv().is_err(), "a lost notification");
    assert_eq!((reg.generation() - generation, reg.lost()), (5, 1));
    reg.unsilence();
    reg.delete_job("default", "j").await.expect("delete");
    assert_eq!(rx.try_recv().ok(), Some(change(Kind::Job, "j")));

    reg.failures().fail_next(1);
    assert!(matches!(reg.get_function("default", "f").await, Err(Error::Storage(_))));
    assert!(reg.get_function("default", "f").await.is_ok());
    reg.failures().fail_all(true);
    assert!(matches!(reg.delete_function("default", "f").await, Err(Error::Storage(_))));
    reg.failures().fail_all(false);
    assert!(reg.get_function("default", "f").await.is_ok(), "a failed write changed nothing");
    assert_eq!(reg.failures().failed(), 2);
}

#[tokio::test]
async fn deploy_and_seed_set_up_callable_functions() {
    let reg = FakeRegistry::new();
    reg.create_function(&FunctionBuilder::new("f").build().into()).await.expect("create");
    assert_eq!(reg.deploy("default", "f", "aa").await.expect("deploy"), 1);
    let f = reg.get_function("default", "f").await.expect("get");
    assert_eq!((f.status.phase, f.active_version), (FunctionPhase::Ready, Some(1)));
    assert_eq!(reg.deploy_failing("default", "f", "bb", "SyntaxError").await.expect("deploy"), 2);
    let f = reg.get_function("default", "f").await.expect("get");
    assert_eq!((f.status.phase, f.active_version), (FunctionPhase::Ready, Some(1)), "version 1 still serves");
    assert_eq!(reg.get_version("default", "f", 2).await.expect("v2").phase, VersionPhase::Failed);

    reg.seed_function(&FunctionBuilder::new("g").ready_at(3).build()).await.expect("seed");
    let v = reg.get_version("default", "g", 3).await.expect("seeded version");
    assert_eq!((v.phase, v.sha256), (VersionPhase::Ready, FakeRegistry::sha_for(3)));
    let failed = FunctionBuilder::new("h").failed("boom").build();
    assert_eq!((failed.status.phase, failed.active_version), (FunctionPhase::Failed, None));
}

#[tokio::test]
async fn invocation_log_lists_newest_first_filters_and_prunes() {
    let log = FakeInvocationLog::new();
    let now = Utc::now();
    let at = |secs| now - TimeDelta::seconds(1000) + TimeDelta::seconds(secs);
    let records: Vec<_> = (0..10)
        .map(|i| {
            let b = InvocationBuilder::new(if i % 2 == 0 { "a" } else { "b" }).started_at(at(i));
            if i % 3 == 0 { b.outcome(Outcome::Error, 502) } else { b }.build()
        })
        .collect();
    log.insert(&records).await.expect("insert");
    log.insert(&records[..2]).await.expect("again: stored once");
    let q = |function: Option<&str>| InvocationQuery {
        function: function.map(String::from),
        limit: 100,
        ..InvocationQuery::default()
    };
    let all = log.list("default", &q(None)).await.expect("list");
    assert_eq!(all.len(), 10);
    assert_eq!(all[0], records[9]);
    let before = InvocationQuery { before_id: Some(records[5].id.clone()), limit: 2, ..q(Some("a")) };
    assert_eq!(log.list("default", &before).await.expect("page"), [records[4].clone(), records[2].clone()]);
    let errors = InvocationQuery { outcomes: vec![Outcome::Error], ..q(None) };
    assert_eq!(log.list("default", &errors).await.expect("errors").len(), 4);
    let window = InvocationQuery { since: Some(at(2)), until: Some(at(4)), ..q(None) };
    assert_eq!(log.list("default", &window).await.expect("window"), [records[3].clone(), records[2].clone()]);
    assert_eq!(log.get("default", &records[3].id).await.expect("get"), records[3]);
    assert!(matches!(log.get("other", &records[3].id).await, Err(Error::NotFound { kind: "invocation", .. })));

    let by_count = Retention { max_age_sec: u64::MAX, max_per_function: 2 };
    assert_eq!(log.prune(&by_count, now).await.expect("prune"), 6);
    assert_eq!(log.records(), [records[6].clone(), records[7].clone(), records[8].clone(), records[9].clone()]);
    let by_age = Retention { max_age_sec: 1000 - 8, max_per_function: 100 };
    assert_eq!(log.prune(&by_age, now).await.expect("prune"), 2);
}

#[tokio::test]
async fn blob_store_lists_by_folder() {
    let store = FakeBlobStore::new();
    for (key, body) in [("archives/a.zip", "a"), ("archives/b.zip", "bbb"), ("other/c", "cc")] {
        store.put(key, Bytes::from(body)).await.expect("put");
    }
    assert_eq!(store.get("archives/b.zip").await.expect("get"), Bytes::from("bbb"));
    assert!(matches!(store.get("archives/x").await, Err(Error::NotFound { kind: "blob", .. })));
    let mut listed: Vec<_> =
        store.list("archives/").await.expect("list").into_iter().map(|b| (b.key, b.size_bytes)).collect();
    listed.sort();
    assert_eq!(listed, [("archives/a.zip".to_string(), 1), ("archives/b.zip".to_string(), 3)]);
    assert_eq!(store.list("archives").await.expect("list").len(), 2);
    assert!(store.list("arch").await.expect("list").is_empty());
    assert_eq!(store.list("").await.expect("list").len(), 3);
    store.delete("archives/a.zip").await.expect("delete");
    store.delete("archives/a.zip").await.expect("delete missing");
    assert_eq!(store.keys(), ["archives/b.zip", "other/c"]);
}

#[tokio::test]
async fn executor_records_and_answers_as_scripted() {
    let exec = std::sync::Arc::new(FakeExecutor::new());
    let f = FunctionBuilder::new("f").ready_at(1).build();
    let v = sless_core::traits::VersionRecord {
        namespace: "default".into(),
        function: "f".into(),
        version: 1,
        sha256: "aa".into(),
        size_bytes: 1,
        runtime: Runtime::Python311,
        phase: VersionPhase::Ready,
        message: String::new(),
        created_at: Utc::now(),
    };
    let target = InvokeTarget::new(&f, &v);
    assert!(!exec.is_built(&target).await.expect("built?"));
    assert!(exec.build(&target, Bytes::new()).await.expect("build").ok);
    assert!(exec.is_built(&target).await.expect("built?"));
    exec.on_build("f", BuildOutcome { ok: false, log: "boom".into(), message: "boom".into() });
    assert!(!exec.build(&target, Bytes::new()).await.expect("build").ok);
    assert_eq!(exec.builds().len(), 2);

    let call =
        |id: &str| Invocation { request_id: id.into(), event: sless_core::event::raw(&json!({"source": "test"})) };
    assert_eq!(exec.invoke(&target, call("1")).await.expect("invoke").result, InvokeResult::Returned(json!("ok")));
    exec.on_invoke("f", InvokeResult::TimedOut);
    assert_eq!(exec.invoke(&target, call("2")).await.expect("invoke").result, InvokeResult::TimedOut);
    exec.fail_invokes("f", "no capacity");
    assert!(matches!(exec.invoke(&target, call("3")).await, Err(Error::Internal(m)) if m == "no capacity"));

    exec.on_invoke("f", InvokeResult::Returned(json!(1))).hold("f");
    let held = tokio::spawn({
        let (exec, target) = (exec.clone(), target.clone());
        async move { exec.invoke(&target, call("4")).await.map(|o| o.result) }
    });
    assert_eq!(exec.wait_for_invocations(4, std::time::Duration::from_secs(10)).await.len(), 4);
    assert!(!held.is_finished());
    exec.release("f");
    assert_eq!(held.await.expect("join").expect("invoke"), InvokeResult::Returned(json!(1)));
    let calls = exec.invocations_of("f");
    assert_eq!(calls.iter().map(|c| c.request_id.as_str()).collect::<Vec<_>>(), ["1", "2", "3", "4"]);
    assert_eq!(calls[0].event, json!({"source": "test"}));

    exec.prewarm(&target).await.expect("prewarm");
    exec.remove("default", "f").await.expect("remove");
    exec.remove("default", "f").await.expect("remove");
    exec.shutdown().await;
    assert_eq!((exec.prewarms("f"), exec.removes("f"), exec.removes("g"), exec.shutdowns()), (1, 2, 0, 1));
}

#[tokio::test]
async fn tenants_follow_the_store_suite() {
    use sless_core::tenant::{Quotas, Role, StoredToken, TokenRecord};
    use sless_core::traits::Tenants;
    let t = sless_testing::FakeTenants::new();
    assert_eq!(t.get_namespace("default").await.unwrap().quotas, Quotas::default());
    let q = Quotas { max_functions: Some(2), ..Quotas::default() };
    let created = t.create_namespace("team-a", &q).await.unwrap();
    t.ensure_namespace("team-a").await.unwrap();
    t.ensure_namespace("team-b").await.unwrap();
    assert_eq!(t.get_namespace("team-a").await.unwrap().quotas, q);
    assert!(matches!(t.create_namespace("team-b", &q).await, Err(Error::AlreadyExists { .. })));
    let first = t.list_namespaces(&page(2, None)).await.unwrap();
    assert_eq!(first.items.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["default", "team-a"]);
    assert_eq!(first.next.as_deref(), Some("team-a"));
    let rest = t.list_namespaces(&page(2, first.next.as_deref())).await.unwrap();
    assert_eq!(rest.items.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["team-b"]);
    let replaced = t.replace_quotas("team-a", &Quotas::default(), Some(&created.resource_version)).await.unwrap();
    assert_eq!(replaced.resource_version, rv(2));
    assert!(matches!(t.replace_quotas("team-a", &q, Some(&rv(1))).await, Err(Error::Stale { .. })));

    let token = |id: &str, namespaces: &[&str]| StoredToken {
        record: TokenRecord {
            id: id.into(),
            role: Role::Viewer,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            description: String::new(),
            created_at: Utc::now(),
            expires_at: None,
        },
        secret_hash: "00".repeat(32),
    };
    t.create_token(&token("tok_1", &["team-a", "team-b"])).await.unwrap();
    t.create_token(&token("tok_2", &["team-a"])).await.unwrap();
    assert!(matches!(t.create_token(&token("tok_2", &["team-a"])).await, Err(Error::AlreadyExists { .. })));
    t.delete_namespace("team-a").await.unwrap();
    assert_eq!(t.get_token("tok_1").await.unwrap().record.namespaces, ["team-b"]);
    assert!(matches!(t.get_token("tok_2").await, Err(Error::NotFound { .. })));
    t.delete_token("tok_1").await.unwrap();
    assert!(matches!(t.delete_token("tok_1").await, Err(Error::NotFound { .. })));
    assert!(t.list_tokens().await.unwrap().is_empty());
}
