//! The store suite: every test body runs on SQLite and on PostgreSQL (a database of its own
//! per test, see `crate::testing`).

use serde_json::json;
use sless_core::invocation::{Outcome, Source};
use sless_core::job::JobPhase;
use sless_core::tenant::{NamespacePhase, Quotas, Role, StoredToken, TokenRecord};
use sless_core::traits::Tenants;
use sless_core::trigger::{TriggerPhase, TriggerType};

use super::rows::parse_time;
use super::*;
use crate::testing::{TestDatabase, function_record as record};

/// A registry under test with what keeps its database alive.
struct Fixture {
    reg: SqlRegistry,
    _dir: Option<tempfile::TempDir>,
    _db: Option<TestDatabase>,
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = SqlRegistry::open_sqlite(&dir.path().join("sless.db")).await.expect("open");
    Fixture { reg, _dir: Some(dir), _db: None }
}

async fn postgres() -> Fixture {
    let db = TestDatabase::create().await;
    let reg = SqlRegistry::open_postgres(&db.url).await.expect("open");
    assert_eq!(reg.backend(), "postgres");
    Fixture { reg, _dir: None, _db: Some(db) }
}

/// One `#[tokio::test]` per body and database: `on_sqlite::NAME` and `on_postgres::NAME`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let f = super::sqlite().await;
                    super::$name(&f.reg).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let f = super::postgres().await;
                    super::$name(&f.reg).await;
                    f.reg.close().await;
                }
            )*
        }
    };
}

on_both!(
    create_get_list_conflict,
    names_sort_bytewise,
    replace_checks_resource_version,
    versions_are_numbered_and_deduplicated_by_sha,
    concurrent_uploads_get_distinct_numbers,
    delete_version_spares_the_active_one,
    triggers_crud,
    one_http_trigger_per_function,
    jobs_crud,
    every_write_is_announced,
    invocations_list_newest_first_with_cursor,
    invocations_filters,
    invocation_get_round_trips,
    invocations_prune_by_age_and_count,
    namespaces_and_tokens,
    invocations_of_a_deleted_namespace_go,
);

fn rv(count: u64) -> ResourceVersion {
    ResourceVersion::from_count(count)
}

fn now() -> DateTime<Utc> {
    Utc::now()
}

async fn create_get_list_conflict(reg: &SqlRegistry) {
    reg.create_function(&sless_core::traits::New::from(&record("b"))).await.expect("create");
    reg.create_function(&sless_core::traits::New::from(&record("a"))).await.expect("create");
    assert!(matches!(
        reg.create_function(&sless_core::traits::New::from(&record("a"))).await,
        Err(Error::AlreadyExists { .. })
    ));
    let got = reg.get_function("default", "a").await.expect("get");
    assert_eq!(got.spec, record("a").spec);
    let names: Vec<_> = reg
        .list_functions("default", &Page::first(10))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    let after: Vec<_> = reg
        .list_functions("default", &Page { limit: 10, continue_token: Some("a".into()) })
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(after, ["b"]);
    let garbage = Page { limit: 10, continue_token: Some("\0\u{ff}".into()) };
    assert!(
        matches!(reg.list_functions("default", &garbage).await, Err(Error::InvalidField { ref field, .. }) if field == "cursor"),
        "a token this store did not give"
    );
    assert!(matches!(reg.list_jobs("default", &garbage).await, Err(Error::InvalidField { .. })));
    assert!(reg.list_functions("other", &Page::first(10)).await.expect("list").items.is_empty());
}

async fn replace_checks_resource_version(reg: &SqlRegistry) {
    reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    let mut spec = record("f").spec;
    spec.memory_mb = 256;
    let updated = reg.replace_spec("default", "f", &spec, Some(&rv(1))).await.expect("replace");
    assert_eq!((updated.resource_version.as_count(), updated.spec.memory_mb), (Some(2), 256));
    assert!(matches!(reg.replace_spec("default", "f", &spec, Some(&rv(1))).await, Err(Error::Stale { .. })));
    assert!(matches!(reg.replace_spec("default", "nope", &spec, None).await, Err(Error::NotFound { .. })));
}

async fn versions_are_numbered_and_deduplicated_by_sha(reg: &SqlRegistry) {
    reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    let (v1, created) = reg.add_version("default", "f", "aa", 10, Runtime::Python311).await.expect("v1");
    assert_eq!((v1.version, created), (1, true));
    let (v2, created) = reg.add_version("default", "f", "bb", 10, Runtime::Python311).await.expect("v2");
    assert_eq!((v2.version, created), (2, true));
    let (again, created) = reg.add_version("default", "f", "aa", 10, Runtime::Python311).await.expect("same");
    assert_eq!((again.version, created), (1, false));
    reg.set_version_build("default", "f", 2, VersionPhase::Failed, "boom").await.expect("build");
    assert_eq!(reg.get_version("default", "f", 2).await.expect("get").phase, VersionPhase::Failed);
    assert!(matches!(
        reg.add_version("default", "nope", "aa", 1, Runtime::Python311).await,
        Err(Error::NotFound { .. })
    ));
    reg.delete_function("default", "f").await.expect("delete");
    assert!(matches!(reg.get_version("default", "f", 1).await, Err(Error::NotFound { .. })));
}

/// A fixed time with whole milliseconds (what the database keeps), plus `secs` seconds.
fn at(secs: i64) -> DateTime<Utc> {
    parse_time("2024-05-01T12:00:00.123Z").expect("time") + TimeDelta::seconds(secs)
}

fn any_schedule(_: &str, _: &str) -> Result<()> {
    Ok(())
}

fn trigger(name: &str) -> TriggerRecord {
    let (_, spec) =
        TriggerSpec::from_json(&json!({"function": "f", "type": "cron", "schedule": "@hourly"}), any_schedule)
            .expect("spec");
    TriggerRecord {
        namespace: "default".into(),
        name: name.into(),
        spec,
        resource_version: rv(1),
        status: TriggerStatus::new(),
        created_at: at(0),
        updated_at: at(0),
    }
}

fn job(name: &str) -> JobRecord {
    let (_, spec) = JobSpec::from_json(&json!({"function": "f", "run_id": 1, "payload": {"a": 1}})).expect("spec");
    JobRecord {
        namespace: "default".into(),
        name: name.into(),
        spec,
        resource_version: rv(1),
        status: JobStatus::new(),
        created_at: at(0),
        updated_at: at(0),
    }
}

fn page(limit: u32, after: Option<&str>) -> Page {
    Page { limit, continue_token: after.map(String::from) }
}

fn http_trigger(name: &str, function: &str) -> TriggerRecord {
    let (_, spec) = TriggerSpec::from_json(&json!({"function": function, "type": "http"}), any_schedule).expect("spec");
    TriggerRecord { spec, ..trigger(name) }
}

/// The store, not the API process, keeps a function to one http trigger: parallel creates
/// (as from two servers on one database) let exactly one through, and a replace that would
/// make a second one is refused too.
async fn one_http_trigger_per_function(reg: &SqlRegistry) {
    let attempts = futures::future::join_all((0..6).map(|i| async move {
        reg.create_trigger(&sless_core::traits::New::from(&http_trigger(&format!("h{i}"), "f"))).await
    }))
    .await;
    assert_eq!(attempts.iter().filter(|r| r.is_ok()).count(), 1, "{attempts:?}");
    for refused in attempts.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(refused, Error::AlreadyExists { kind: "http trigger for this function", .. }), "{refused}");
    }
    // Another function, another namespace, and cron triggers are unaffected.
    reg.create_trigger(&sless_core::traits::New::from(&http_trigger("g-http", "g"))).await.expect("another function");
    let mut elsewhere = http_trigger("h0", "f");
    elsewhere.namespace = "other".into();
    reg.create_trigger(&sless_core::traits::New::from(&elsewhere)).await.expect("another namespace");
    reg.create_trigger(&sless_core::traits::New::from(&trigger("cron-a"))).await.expect("cron");
    reg.create_trigger(&sless_core::traits::New::from(&trigger("cron-b"))).await.expect("cron");
    // Pointing g's http trigger at f would make f a second one.
    let spec = http_trigger("g-http", "f").spec;
    let err = reg.replace_trigger_spec("default", "g-http", &spec, None).await.expect_err("second http trigger");
    assert!(matches!(err, Error::AlreadyExists { kind: "http trigger for this function", .. }), "{err}");
    // Deleting f's frees the route.
    let winner = reg
        .all_triggers()
        .await
        .expect("all")
        .into_iter()
        .find(|t| t.spec.function == "f" && t.namespace == "default" && t.spec.kind == TriggerType::Http);
    reg.delete_trigger("default", &winner.expect("one").name).await.expect("delete");
    reg.replace_trigger_spec("default", "g-http", &spec, None).await.expect("now the only one");
}

async fn triggers_crud(reg: &SqlRegistry) {
    let mut created = Vec::new();
    for name in ["c", "a", "b"] {
        created.push(reg.create_trigger(&sless_core::traits::New::from(&trigger(name))).await.expect("create"));
    }
    let first = created.iter().find(|r| r.name == "a").cloned().expect("created");
    assert_eq!(first.resource_version, rv(1), "the store gives the first version");
    assert_eq!(sless_core::traits::New::from(&first), sless_core::traits::New::from(&trigger("a")));
    let mut other = trigger("z");
    other.namespace = "other".into();
    reg.create_trigger(&sless_core::traits::New::from(&other)).await.expect("create other");
    assert!(matches!(
        reg.create_trigger(&sless_core::traits::New::from(&trigger("a"))).await,
        Err(Error::AlreadyExists { kind: "trigger", .. })
    ));
    assert_eq!(reg.get_trigger("default", "a").await.expect("get"), first);
    assert!(matches!(reg.get_trigger("default", "nope").await, Err(Error::NotFound { kind: "trigger", .. })));

    let names = |v: Vec<TriggerRecord>| v.into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(reg.list_triggers("default", &page(10, None)).await.expect("list").items), ["a", "b", "c"]);
    assert_eq!(names(reg.list_triggers("default", &page(1, None)).await.expect("list").items), ["a"]);
    assert_eq!(names(reg.list_triggers("default", &page(1, Some("a"))).await.expect("list").items), ["b"]);
    assert_eq!(
        names(reg.list_triggers("default", &page(10, Some("c"))).await.expect("list").items),
        Vec::<String>::new()
    );
    assert_eq!(names(reg.list_triggers("other", &page(10, None)).await.expect("list").items), ["z"]);
    let all: Vec<_> = reg.all_triggers().await.expect("all").into_iter().map(|t| (t.namespace, t.name)).collect();
    assert_eq!(all.len(), 4);
    assert_eq!(all[3], ("other".to_string(), "z".to_string()));

    // Replacing the spec bumps resource_version and updated_at.
    let mut spec = trigger("a").spec;
    spec.enabled = false;
    let replaced = reg.replace_trigger_spec("default", "a", &spec, Some(&rv(1))).await.expect("replace");
    assert_eq!((replaced.resource_version.as_count(), replaced.spec.enabled), (Some(2), false));
    assert!(replaced.updated_at >= first.created_at);
    assert_eq!(replaced.created_at, first.created_at);
    assert_eq!(reg.get_trigger("default", "a").await.expect("get"), replaced);
    assert!(matches!(
        reg.replace_trigger_spec("default", "a", &spec, Some(&rv(1))).await,
        Err(Error::Stale { expected, current }) if expected == "1" && current == "2"
    ));
    assert_eq!(reg.replace_trigger_spec("default", "a", &spec, None).await.expect("replace").resource_version, rv(3));
    assert!(matches!(
        reg.replace_trigger_spec("default", "nope", &spec, None).await,
        Err(Error::NotFound { kind: "trigger", .. })
    ));
    assert!(matches!(
        reg.replace_trigger_spec("default", "nope", &spec, Some(&rv(1))).await,
        Err(Error::NotFound { kind: "trigger", .. })
    ));

    // A status update keeps resource_version.
    let status = TriggerStatus {
        phase: TriggerPhase::Active,
        message: "firing".into(),
        last_fired: Some(at(60)),
        next_fire: Some(at(3600)),
        ..TriggerStatus::new()
    };
    reg.update_trigger_status("default", "a", &status).await.expect("status");
    let got = reg.get_trigger("default", "a").await.expect("get");
    assert_eq!((got.status, got.resource_version), (status.clone(), rv(3)));
    assert!(matches!(
        reg.update_trigger_status("default", "nope", &status).await,
        Err(Error::NotFound { kind: "trigger", .. })
    ));

    reg.delete_trigger("default", "a").await.expect("delete");
    assert!(matches!(reg.get_trigger("default", "a").await, Err(Error::NotFound { .. })));
    assert!(matches!(reg.delete_trigger("default", "a").await, Err(Error::NotFound { kind: "trigger", .. })));
    assert_eq!(names(reg.list_triggers("default", &page(10, None)).await.expect("list").items), ["b", "c"]);
}

async fn jobs_crud(reg: &SqlRegistry) {
    let mut created = Vec::new();
    for name in ["b", "a"] {
        created.push(reg.create_job(&sless_core::traits::New::from(&job(name))).await.expect("create"));
    }
    let first = created.iter().find(|r| r.name == "b").cloned().expect("created");
    assert_eq!(first.resource_version, rv(1), "the store gives the first version");
    assert_eq!(sless_core::traits::New::from(&first), sless_core::traits::New::from(&job("b")));
    assert!(matches!(
        reg.create_job(&sless_core::traits::New::from(&job("b"))).await,
        Err(Error::AlreadyExists { kind: "job", .. })
    ));
    assert_eq!(reg.get_job("default", "b").await.expect("get"), first);
    assert!(matches!(reg.get_job("default", "nope").await, Err(Error::NotFound { kind: "job", .. })));

    let names = |v: Vec<JobRecord>| v.into_iter().map(|j| j.name).collect::<Vec<_>>();
    assert_eq!(names(reg.list_jobs("default", &page(10, None)).await.expect("list").items), ["a", "b"]);
    assert_eq!(names(reg.list_jobs("default", &page(1, Some("a"))).await.expect("list").items), ["b"]);
    assert!(reg.list_jobs("other", &page(10, None)).await.expect("list").items.is_empty());
    assert_eq!(names(reg.all_jobs().await.expect("all")), ["a", "b"]);

    let mut spec = job("a").spec;
    spec.run_id = 2;
    let replaced = reg.replace_job_spec("default", "a", &spec, Some(&rv(1))).await.expect("replace");
    assert_eq!((replaced.resource_version.as_count(), replaced.spec.run_id), (Some(2), 2));
    assert!(replaced.updated_at > at(0));
    assert!(matches!(reg.replace_job_spec("default", "a", &spec, Some(&rv(1))).await, Err(Error::Stale { .. })));
    assert!(matches!(
        reg.replace_job_spec("default", "nope", &spec, None).await,
        Err(Error::NotFound { kind: "job", .. })
    ));

    let status = JobStatus { phase: JobPhase::Running, last_run_id: Some(2), ..JobStatus::new() };
    reg.update_job_status("default", "a", &status).await.expect("status");
    let got = reg.get_job("default", "a").await.expect("get");
    assert_eq!((got.status, got.resource_version), (status.clone(), rv(2)));
    assert!(matches!(reg.update_job_status("default", "nope", &status).await, Err(Error::NotFound { .. })));

    reg.delete_job("default", "a").await.expect("delete");
    assert!(matches!(reg.get_job("default", "a").await, Err(Error::NotFound { .. })));
    assert!(matches!(reg.delete_job("default", "a").await, Err(Error::NotFound { kind: "job", .. })));
    assert_eq!(names(reg.all_jobs().await.expect("all")), ["b"]);
}

async fn every_write_is_announced(reg: &SqlRegistry) {
    let mut rx = reg.subscribe();
    let generation = reg.generation();
    let change = |kind, name: &str| Change { kind, namespace: "default".into(), name: name.into() };

    reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    assert!(reg.create_function(&sless_core::traits::New::from(&record("f"))).await.is_err()); // failed writes say nothing
    reg.replace_spec("default", "f", &record("f").spec, None).await.expect("replace");
    reg.update_status("default", "f", &FunctionStatus::pending(now()), None).await.expect("status");
    reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("version");
    reg.add_version("default", "f", "aa", 1, Runtime::Python311).await.expect("same version");
    reg.set_version_build("default", "f", 1, VersionPhase::Ready, "").await.expect("build");
    reg.delete_function("default", "f").await.expect("delete");

    reg.create_trigger(&sless_core::traits::New::from(&trigger("t"))).await.expect("create");
    reg.replace_trigger_spec("default", "t", &trigger("t").spec, None).await.expect("replace");
    reg.update_trigger_status("default", "t", &TriggerStatus::new()).await.expect("status");
    assert!(reg.update_trigger_status("default", "nope", &TriggerStatus::new()).await.is_err());
    reg.delete_trigger("default", "t").await.expect("delete");

    reg.create_job(&sless_core::traits::New::from(&job("j"))).await.expect("create");
    reg.replace_job_spec("default", "j", &job("j").spec, None).await.expect("replace");
    reg.update_job_status("default", "j", &JobStatus::new()).await.expect("status");
    reg.delete_job("default", "j").await.expect("delete");

    let mut got = vec![];
    while let Ok(c) = rx.try_recv() {
        got.push(c);
    }
    let mut want = vec![change(Kind::Function, "f"); 6];
    want.extend(vec![change(Kind::Trigger, "t"); 4]);
    want.extend(vec![change(Kind::Job, "j"); 4]);
    assert_eq!(got, want);
    // Every announcement moves the generation on (what the call path's cache compares).
    assert_eq!(reg.generation() - generation, want.len() as u64);
    let _ = reg.get_function("default", "gone").await;
    let _ = reg.list_triggers("default", &Page::first(10)).await;
    assert_eq!(reg.generation() - generation, want.len() as u64, "reads leave it alone");
}

/// Invocation `i`: started `i` seconds after `at(0)`, with an id that sorts by `i`.
fn invocation(i: u64, function: &str) -> InvocationRecord {
    let failed = i.is_multiple_of(3);
    InvocationRecord {
        id: format!("{:012x}-7000-8000-{:012x}", 0x0190_0000_0000 + i * 1000, i),
        namespace: "default".into(),
        function: function.into(),
        version: (!i.is_multiple_of(5)).then_some(3),
        source: if i.is_multiple_of(2) { Source::Invoke } else { Source::Cron },
        source_name: (!i.is_multiple_of(2)).then(|| "tick".to_string()),
        started_at: at(i64::try_from(i).expect("i")),
        duration_ms: i * 7,
        status: if failed { 502 } else { 200 },
        outcome: if failed { Outcome::Error } else { Outcome::Ok },
        error_type: failed.then(|| "ValueError".to_string()),
        error_message: failed.then(|| format!("bad {i}")),
        request_bytes: i,
        response_bytes: 2 * i,
        cold_start: i.is_multiple_of(4),
        cold_start_kind: i.is_multiple_of(4).then_some(sless_core::invocation::ColdStart::Pool),
        logs: vec![format!("line {i}"), "second \"quoted\" line".into()],
    }
}

/// 120 records, `a` for even `i` and `b` for odd, in one call.
async fn with_invocations(reg: &SqlRegistry) -> Vec<InvocationRecord> {
    let records: Vec<_> = (0..120).map(|i| invocation(i, if i.is_multiple_of(2) { "a" } else { "b" })).collect();
    reg.insert(&records).await.expect("insert");
    let mut elsewhere = invocation(1000, "a");
    elsewhere.namespace = "other".into();
    reg.insert(&[elsewhere]).await.expect("insert other");
    reg.insert(&[]).await.expect("insert nothing");
    records
}

fn query(function: Option<&str>, limit: u32) -> InvocationQuery {
    InvocationQuery { function: function.map(String::from), limit, ..InvocationQuery::default() }
}

fn ids(v: &[InvocationRecord]) -> Vec<String> {
    v.iter().map(|r| r.id.clone()).collect()
}

async fn invocations_list_newest_first_with_cursor(reg: &SqlRegistry) {
    let records = with_invocations(reg).await;
    let all = reg.list("default", &query(None, 1000)).await.expect("list");
    let mut want = ids(&records);
    want.reverse();
    assert_eq!(ids(&all), want);
    assert_eq!(all[0], records[119]);

    // Paging through one function collects each of its records exactly once, newest first.
    let mut seen = vec![];
    let mut q = query(Some("a"), 7);
    loop {
        let page = reg.list("default", &q).await.expect("page");
        assert!(page.len() <= 7);
        let Some(last) = page.last() else { break };
        q.before_id = Some(last.id.clone());
        seen.extend(page);
    }
    let mut want: Vec<_> = records.iter().filter(|r| r.function == "a").map(|r| r.id.clone()).collect();
    want.reverse();
    assert_eq!(ids(&seen), want);
    assert_eq!(seen.len(), 60);

    assert!(reg.list("default", &query(Some("nope"), 10)).await.expect("list").is_empty());
    assert_eq!(ids(&reg.list("other", &query(None, 10)).await.expect("list")).len(), 1);
}

async fn invocations_filters(reg: &SqlRegistry) {
    with_invocations(reg).await;
    let errors = InvocationQuery { outcomes: vec![Outcome::Error], ..query(None, 1000) };
    let got = reg.list("default", &errors).await.expect("list");
    assert_eq!(got.len(), 40);
    assert!(got.iter().all(|r| r.outcome == Outcome::Error));
    let two = InvocationQuery { outcomes: vec![Outcome::Timeout, Outcome::Error], ..query(Some("a"), 1000) };
    let got = reg.list("default", &two).await.expect("list");
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|r| r.outcome == Outcome::Error && r.function == "a"));
    let none = InvocationQuery { outcomes: vec![Outcome::Oom], ..query(None, 1000) };
    assert!(reg.list("default", &none).await.expect("list").is_empty());

    let window = InvocationQuery { since: Some(at(10)), until: Some(at(20)), ..query(None, 1000) };
    let got = reg.list("default", &window).await.expect("list");
    let starts: Vec<_> = got.iter().map(|r| r.started_at).collect();
    assert_eq!(starts, (10..20).rev().map(at).collect::<Vec<_>>());
    let since = InvocationQuery { since: Some(at(115)), ..query(Some("b"), 1000) };
    let got = reg.list("default", &since).await.expect("list");
    assert_eq!(got.iter().map(|r| r.started_at).collect::<Vec<_>>(), [at(119), at(117), at(115)]);
}

async fn invocations_of_a_deleted_namespace_go(reg: &SqlRegistry) {
    let mut other = invocation(99, "f");
    other.namespace = "other".into();
    other.id = "other-id".into();
    with_invocations(reg).await;
    reg.insert(std::slice::from_ref(&other)).await.unwrap();
    let n = reg.delete_namespace_records("default").await.unwrap();
    assert!(n > 0);
    assert!(reg.list("default", &query(None, 100)).await.unwrap().is_empty());
    assert_eq!(reg.get("other", "other-id").await.unwrap().id, "other-id");
}

async fn invocation_get_round_trips(reg: &SqlRegistry) {
    let records = with_invocations(reg).await;
    for i in [0, 5, 7] {
        assert_eq!(reg.get("default", &records[i].id).await.expect("get"), records[i]);
    }
    assert!(matches!(reg.get("default", "nope").await, Err(Error::NotFound { kind: "invocation", .. })));
    assert!(matches!(reg.get("other", &records[0].id).await, Err(Error::NotFound { .. })));
    // Inserting the same records again changes nothing.
    reg.insert(&records[..3]).await.expect("again");
    assert_eq!(reg.list("default", &query(None, 1000)).await.expect("list").len(), 120);
}

async fn invocations_prune_by_age_and_count(reg: &SqlRegistry) {
    let records = with_invocations(reg).await;
    let keep_all = Retention { max_age_sec: 1_000_000, max_per_function: 10_000 };
    assert_eq!(reg.prune(&keep_all, at(200)).await.expect("prune"), 0);
    let forever = Retention { max_age_sec: u64::MAX, max_per_function: u64::MAX };
    assert_eq!(reg.prune(&forever, at(200)).await.expect("prune"), 0);

    // By age: older than 100 s before at(130), i.e. started before at(30).
    let by_age = Retention { max_age_sec: 100, max_per_function: 10_000 };
    assert_eq!(reg.prune(&by_age, at(130)).await.expect("prune"), 30);
    let left = reg.list("default", &query(None, 1000)).await.expect("list");
    assert_eq!(left.len(), 90);
    assert!(left.iter().all(|r| r.started_at >= at(30)));

    // By count: the newest 10 of each function (and the other namespace's one) stay.
    let by_count = Retention { max_age_sec: 1_000_000, max_per_function: 10 };
    assert_eq!(reg.prune(&by_count, at(130)).await.expect("prune"), 70);
    for function in ["a", "b"] {
        let got = reg.list("default", &query(Some(function), 1000)).await.expect("list");
        let mut want: Vec<_> = records.iter().filter(|r| r.function == function).map(|r| r.id.clone()).collect();
        want.reverse();
        want.truncate(10);
        assert_eq!(ids(&got), want);
    }
    assert_eq!(reg.list("other", &query(None, 10)).await.expect("list").len(), 1);
    assert_eq!(reg.prune(&by_count, at(130)).await.expect("prune"), 0);
}

async fn names_sort_bytewise(reg: &SqlRegistry) {
    for name in ["ab", "a-c", "a0", "b", "a-b"] {
        reg.create_function(&sless_core::traits::New::from(&record(name))).await.expect("create");
    }
    let names = |v: Vec<FunctionRecord>| v.into_iter().map(|f| f.name).collect::<Vec<_>>();
    let want = ["a-b", "a-c", "a0", "ab", "b"];
    assert_eq!(names(reg.list_functions("default", &page(10, None)).await.expect("list").items), want);
    assert_eq!(names(reg.list_functions("default", &page(2, Some("a-c"))).await.expect("list").items), ["a0", "ab"]);
    assert_eq!(names(reg.all_functions().await.expect("all")), want);
}

async fn concurrent_uploads_get_distinct_numbers(reg: &SqlRegistry) {
    reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    let shas: Vec<String> = (0..8).map(|i| format!("{i:064x}")).collect();
    let added = futures::future::join_all(
        shas.iter().chain(shas.iter()).map(|sha| reg.add_version("default", "f", sha, 1, Runtime::Python311)),
    )
    .await;
    let mut created: Vec<(u32, String)> = Vec::new();
    for res in added {
        let (v, new) = res.expect("add");
        if new {
            created.push((v.version, v.sha256));
        }
    }
    created.sort();
    assert_eq!(created.iter().map(|(n, _)| *n).collect::<Vec<_>>(), (1..=8).collect::<Vec<_>>());
    let versions = reg.list_versions("default", "f").await.expect("list");
    assert_eq!(versions.len(), 8);
    for v in versions {
        assert!(created.contains(&(v.version, v.sha256)));
    }
}

async fn delete_version_spares_the_active_one(reg: &SqlRegistry) {
    reg.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    for sha in ["aa", "bb", "cc"] {
        reg.add_version("default", "f", sha, 1, Runtime::Python311).await.expect("add");
    }
    reg.update_status("default", "f", &FunctionStatus::pending(now()), Some(2)).await.expect("status");
    let mut rx = reg.subscribe();
    assert!(!reg.delete_version("default", "f", 2).await.expect("delete active"));
    assert!(reg.delete_version("default", "f", 1).await.expect("delete"));
    assert!(!reg.delete_version("default", "f", 1).await.expect("delete again"));
    assert!(!reg.delete_version("default", "nope", 1).await.expect("delete missing"));
    assert_eq!(
        rx.try_recv().expect("announced"),
        Change { kind: Kind::Function, namespace: "default".into(), name: "f".into() }
    );
    assert!(rx.try_recv().is_err());
    let left: Vec<u32> =
        reg.list_versions("default", "f").await.expect("list").into_iter().map(|v| v.version).collect();
    assert_eq!(left, [2, 3]);
    // Numbers go on after the newest.
    let (v, _) = reg.add_version("default", "f", "dd", 1, Runtime::Python311).await.expect("add");
    assert_eq!(v.version, 4);
}

/// Two servers starting at once on a new database: the migrator's advisory lock lets one
/// migrate while the other waits, and both start.
#[tokio::test]
async fn postgres_servers_starting_together_migrate_once() {
    let db = TestDatabase::create().await;
    let (a, b, c) = tokio::join!(
        SqlRegistry::open_postgres(&db.url),
        SqlRegistry::open_postgres(&db.url),
        SqlRegistry::open_postgres(&db.url)
    );
    let (a, b, c) = (a.expect("first"), b.expect("second"), c.expect("third"));
    a.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    assert_eq!(b.get_function("default", "f").await.expect("get").name, "f");
    for reg in [a, b, c] {
        reg.close().await;
    }
}

#[tokio::test]
async fn postgres_unreachable_is_a_storage_error() {
    let started = std::time::Instant::now();
    let err = SqlRegistry::open_postgres("postgres://postgres@127.0.0.1:1/none").await.expect_err("unreachable");
    assert!(matches!(err, Error::Storage(_)), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

/// Servers on one database hear each other's changes (through `NOTIFY`), each its own once.
#[tokio::test]
async fn postgres_servers_hear_each_others_changes() {
    let db = TestDatabase::create().await;
    let a = SqlRegistry::open_postgres(&db.url).await.expect("a");
    let b = SqlRegistry::open_postgres(&db.url).await.expect("b");
    let (mut from_a, mut from_b) = (a.subscribe(), b.subscribe());
    let heard = |rx: &mut broadcast::Receiver<Change>| {
        let mut rx = rx.resubscribe();
        async move { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("in time").expect("change") }
    };
    let f = Change { kind: Kind::Function, namespace: "default".into(), name: "f".into() };
    let j = Change { kind: Kind::Job, namespace: "default".into(), name: "j".into() };

    let b_hears = heard(&mut from_b);
    a.create_function(&sless_core::traits::New::from(&record("f"))).await.expect("create");
    assert_eq!(from_a.recv().await.expect("own"), f);
    assert_eq!(b_hears.await, f);
    let a_hears = heard(&mut from_a);
    b.create_job(&sless_core::traits::New::from(&job("j"))).await.expect("job");
    assert_eq!(a_hears.await, j);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rest = |rx: &mut broadcast::Receiver<Change>| std::iter::from_fn(|| rx.try_recv().ok()).collect::<Vec<_>>();
    assert_eq!(rest(&mut from_a), std::slice::from_ref(&j), "a hears b's job once");
    assert_eq!(rest(&mut from_b), [f, j], "b hears a's function once and its own job once");
    a.close().await;
    b.close().await;
}

fn stored_token(id: &str, namespaces: &[&str]) -> StoredToken {
    StoredToken {
        record: TokenRecord {
            id: id.to_string(),
            role: Role::Developer,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            description: "ci".into(),
            created_at: rows::stored_now(),
            expires_at: Some(parse_time("2030-01-01T00:00:00.000Z").unwrap()),
        },
        secret_hash: "ab".repeat(32),
    }
}

async fn namespaces_and_tokens(reg: &SqlRegistry) {
    // `default` exists from the start; ensure is idempotent and keeps quotas.
    assert_eq!(reg.get_namespace("default").await.unwrap().quotas, Quotas::default());
    let q = Quotas { max_functions: Some(2), requests_per_minute: Some(60), ..Quotas::default() };
    let created = reg.create_namespace("team-a", &q).await.unwrap();
    assert_eq!(reg.get_namespace("team-a").await.unwrap(), created);
    reg.ensure_namespace("team-a").await.unwrap();
    reg.ensure_namespace("team-b").await.unwrap();
    assert_eq!(reg.get_namespace("team-a").await.unwrap().quotas, q);
    assert!(matches!(reg.create_namespace("team-b", &q).await, Err(Error::AlreadyExists { kind: "namespace", .. })));
    assert!(matches!(reg.get_namespace("nope").await, Err(Error::NotFound { kind: "namespace", .. })));

    let first = reg.list_namespaces(&page(2, None)).await.unwrap();
    let names: Vec<_> = first.items.iter().map(|n| n.name.as_str()).collect();
    assert_eq!((names, first.next.as_deref()), (vec!["default", "team-a"], Some("team-a")));
    let rest = reg.list_namespaces(&page(2, first.next.as_deref())).await.unwrap();
    assert_eq!(rest.items.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), vec!["team-b"]);

    let q2 = Quotas { max_instances: Some(4), ..Quotas::default() };
    let replaced = reg.replace_quotas("team-a", &q2, Some(&created.resource_version)).await.unwrap();
    assert_eq!((replaced.quotas, replaced.resource_version.clone()), (q2, rv(2)));
    assert!(matches!(reg.replace_quotas("team-a", &q, Some(&rv(1))).await, Err(Error::Stale { .. })));
    assert!(matches!(reg.replace_quotas("nope", &q, None).await, Err(Error::NotFound { .. })));

    let both = stored_token("tok_1", &["team-a", "team-b"]);
    let only_a = stored_token("tok_2", &["team-a"]);
    reg.create_token(&both).await.unwrap();
    reg.create_token(&only_a).await.unwrap();
    assert!(matches!(reg.create_token(&only_a).await, Err(Error::AlreadyExists { kind: "token", .. })));
    assert_eq!(reg.get_token("tok_1").await.unwrap(), both);
    assert_eq!(reg.list_tokens().await.unwrap(), vec![both.record.clone(), only_a.record.clone()]);

    // Deleting a namespace takes it out of every token; a token left with none is gone.
    reg.delete_namespace("team-a").await.unwrap();
    assert!(matches!(reg.get_namespace("team-a").await, Err(Error::NotFound { .. })));
    assert_eq!(reg.get_token("tok_1").await.unwrap().record.namespaces, vec!["team-b".to_string()]);
    assert!(matches!(reg.get_token("tok_2").await, Err(Error::NotFound { kind: "token", .. })));
    assert!(matches!(reg.delete_namespace("team-a").await, Err(Error::NotFound { .. })));

    reg.delete_token("tok_1").await.unwrap();
    assert!(matches!(reg.delete_token("tok_1").await, Err(Error::NotFound { .. })));
    assert!(reg.list_tokens().await.unwrap().is_empty());

    // A namespace being deleted is Terminating; one made anew reaches no earlier token.
    reg.terminate_namespace("team-b").await.unwrap();
    assert_eq!(reg.get_namespace("team-b").await.unwrap().phase, NamespacePhase::Terminating);
    assert!(matches!(reg.terminate_namespace("nope").await, Err(Error::NotFound { .. })));
    reg.create_token(&stored_token("tok_3", &["later", "team-b"])).await.unwrap();
    reg.create_token(&stored_token("tok_4", &["later"])).await.unwrap();
    reg.ensure_namespace("later").await.unwrap();
    assert_eq!(reg.get_namespace("later").await.unwrap().phase, NamespacePhase::Active);
    assert_eq!(reg.get_token("tok_3").await.unwrap().record.namespaces, vec!["team-b".to_string()]);
    assert!(matches!(reg.get_token("tok_4").await, Err(Error::NotFound { .. })));
    reg.create_token(&stored_token("tok_5", &["again"])).await.unwrap();
    reg.create_namespace("again", &Quotas::default()).await.unwrap();
    assert!(matches!(reg.get_token("tok_5").await, Err(Error::NotFound { .. })));
}
