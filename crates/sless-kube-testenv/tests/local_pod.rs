//! Proofs for pods run as local processes (sless_kube_testenv::local_pod,
//! docs/kubernetes-testing.md "Local process pods"): a request reaches a Deployment's pod's
//! real process at the pod's IP and port (127.0.0.1), the process ends with its pod, and why a
//! Service cannot list a loopback pod.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use sless_kube_testenv::local_pod::{self, LocalPods};
use sless_kube_testenv::{TestNamespace, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(60);

fn obj<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// `GET path` over HTTP/1.0 to `address`: the status code and the body.
async fn http_get(address: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((code, body))
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_request_reaches_a_deployments_pod_process_at_its_pod_address() {
    let ns = TestNamespace::create("local-pod").await.expect("namespace");
    let ip = Ipv4Addr::LOCALHOST;
    let port = local_pod::free_port(ip).expect("a free port");
    let www = std::env::temp_dir().join(format!("sless-{}-www", ns.name()));
    std::fs::create_dir_all(&www).expect("folder");
    std::fs::write(www.join("hello.txt"), "hello from the pod\n").expect("file");

    let mut deployment: Deployment = obj(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": "registry.invalid/python:3",
                    "command": ["python3", "-m", "http.server"],
                    // $(PORT) is expanded from the env the helper gives the process.
                    "args": ["$(PORT)", "--bind", ip.to_string()],
                    "workingDir": www.to_string_lossy(),
                    "ports": [{"containerPort": port}],
                }]},
            },
        },
    }));
    let template = &mut deployment.spec.template;
    local_pod::mark_local_process(template.metadata.get_or_insert_with(Default::default));
    let local = LocalPods::start(ns.api::<Pod>());
    let deployments = ns.api::<Deployment>();
    deployments.create(&PostParams::default(), &deployment).await.expect("create the deployment");

    eventually("the deployment to be available", WAIT, || async {
        let status = deployments.get("web").await?.status.unwrap_or_default();
        let available = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True"));
        Ok((available && status.available_replicas == Some(1)).then_some(()))
    })
    .await
    .unwrap_or_else(|err| panic!("{err}; problems: {:?}", local.problems()));

    let pods = ns.api::<Pod>().list(&ListParams::default().labels("app=web")).await.expect("pods");
    let status = pods.items[0].status.clone().unwrap_or_default();
    assert_eq!(status.pod_ip.as_deref(), Some(ip.to_string().as_str()));
    // The address a client takes from the pod: its IP and its container's port.
    let pod_ip: std::net::IpAddr = status.pod_ip.as_deref().expect("pod IP").parse().expect("an IP");
    let address = SocketAddr::new(pod_ip, port);
    assert!(status.message.unwrap_or_default().contains("port from its containerPort"));

    let (code, body) = http_get(address, "/hello.txt").await.expect("GET");
    assert_eq!((code, body.as_str()), (200, "hello from the pod\n"));

    deployments.delete("web", &DeleteParams::background()).await.expect("delete the deployment");
    eventually("the pod's process to stop", WAIT, || async {
        Ok(TcpStream::connect(address).await.is_err().then_some(()))
    })
    .await
    .unwrap_or_else(|err| panic!("{err}; problems: {:?}", local.problems()));
    assert!(local.running().is_empty(), "{:?}", local.running());
    let _ = std::fs::remove_dir_all(&www);
}

#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_process_that_exits_fails_its_pod_with_the_exit_code() {
    let ns = TestNamespace::create("local-exit").await.expect("namespace");
    let ip = Ipv4Addr::LOCALHOST;
    // No containerPort: the helper picks a free port and passes it as PORT. The program
    // answers one connection (the helper's readiness check or a later one), then exits 3.
    let program = "import os, socket, sys\n\
                   s = socket.socket()\n\
                   s.bind((os.environ['BIND'], int(os.environ['PORT'])))\n\
                   s.listen()\n\
                   s.accept()\n\
                   print('giving up as', os.environ['HOSTNAME'], flush=True)\n\
                   sys.exit(3)\n";
    let mut pod: Pod = obj(json!({
        "metadata": {"name": "once"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "once",
            "image": "registry.invalid/python:3",
            "command": ["python3", "-c", program],
            "env": [{"name": "BIND", "value": ip.to_string()}],
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }]},
    }));
    local_pod::mark_local_process(&mut pod.metadata);
    let pods = ns.api::<Pod>();
    let local = LocalPods::start(pods.clone());
    pods.create(&PostParams::default(), &pod).await.expect("create");

    let status = eventually("the pod to fail", WAIT, || async {
        let status = pods.get("once").await?.status.unwrap_or_default();
        Ok((status.phase.as_deref() == Some("Failed")).then_some(status))
    })
    .await
    .unwrap_or_else(|err| panic!("{err}; problems: {:?}", local.problems()));
    let container = &status.container_statuses.expect("container statuses")[0];
    let terminated = container.state.as_ref().and_then(|s| s.terminated.as_ref()).expect("terminated");
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (3, Some("Error")));
    assert_eq!(terminated.message.as_deref(), Some("giving up as once"));
    assert!(!container.ready);
    assert!(local.running().is_empty());
    assert!(local.problems().is_empty(), "{:?}", local.problems());
}

/// Why a loopback pod cannot be behind a Service: the API server refuses a loopback endpoint.
#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn an_endpoint_slice_with_a_loopback_address_is_refused() {
    let ns = TestNamespace::create("loopback").await.expect("namespace");
    let slice: EndpointSlice = obj(json!({
        "metadata": {"name": "loopback"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"]}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }));
    match ns.api::<EndpointSlice>().create(&PostParams::default(), &slice).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("may not be in the loopback range"), "{}", status.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A pod run on 127.0.0.1 runs and is Ready, but the endpointslice controller cannot list it:
/// its write is refused, and it says so in a Warning event on the Service.
#[tokio::test]
#[cfg_attr(sless_kube_testenv_no_go, ignore = "needs Go: scripts/kube-testenv build")]
async fn a_pod_on_loopback_runs_but_its_service_cannot_list_it() {
    let ns = TestNamespace::create("loopback-pod").await.expect("namespace");
    let mut pod: Pod = obj(json!({
        "metadata": {"name": "lo", "labels": {"app": "lo"}},
        "spec": {"containers": [{
            "name": "lo",
            "image": "registry.invalid/python:3",
            "command": ["python3", "-m", "http.server", "$(PORT)", "--bind", "127.0.0.1"],
            "workingDir": std::env::temp_dir().to_string_lossy(),
        }]},
    }));
    local_pod::mark_local_process(&mut pod.metadata);
    let pods = ns.api::<Pod>();
    let local = LocalPods::start_on(pods.clone(), Ipv4Addr::LOCALHOST);
    pods.create(&PostParams::default(), &pod).await.expect("create the pod");
    let service: Service = obj(json!({
        "metadata": {"name": "lo"},
        "spec": {"selector": {"app": "lo"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }));
    ns.api::<Service>().create(&PostParams::default(), &service).await.expect("create the service");

    let status = eventually("the pod to be running", WAIT, || async {
        let status = pods.get("lo").await?.status.unwrap_or_default();
        Ok((status.phase.as_deref() == Some("Running")).then_some(status))
    })
    .await
    .unwrap_or_else(|err| panic!("{err}; problems: {:?}", local.problems()));
    assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    assert!(status.message.unwrap_or_default().contains("from a free port (no containerPort)"));
    assert!(local.address("lo").is_some_and(|a| a.ip() == Ipv4Addr::LOCALHOST));

    let events = ns.api::<Event>();
    let message = eventually("the endpointslice controller's warning", WAIT, || async {
        let list = events.list(&ListParams::default().fields("reason=FailedToUpdateEndpointSlices")).await?;
        Ok(list.items.into_iter().find_map(|e| e.message.filter(|_| e.involved_object.name.as_deref() == Some("lo"))))
    })
    .await
    .expect("a warning event");
    assert!(message.contains("may not be in the loopback range"), "{message}");
}
