//! HTTPS end to end with a CA of the test's own: the SDK's worker and client, the CLI and
//! a real `onceflow serve --tls-cert --tls-key`; clients that do not trust the CA are
//! refused; bad certificate, key or `ONCEFLOW_CA_CERT` files are clear errors.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::http::{ServerConfig, ServerTls};
use onceflow_engine::model::{JobStatus, Role};
use onceflow_tests::server::{onceflow_binary, ServerProcess, TestServer};
use onceflow_tests::tls::TestCa;
use onceflow_tests::{Backend, TestDb};
use onceflow_worker::{ActivityContext, ActivityError, ActivityOptions, Client, SdkError, Worker};
use reqwest::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    n: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Done {
    n: u32,
}

/// Server settings with a certificate of `ca` for localhost and 127.0.0.1.
fn tls_config(ca: &TestCa) -> ServerConfig {
    let cert = ca.issue("server");
    ServerConfig {
        tls: Some(
            ServerTls::from_pem_files(&cert.cert_path, &cert.key_path).expect("the identity loads"),
        ),
        reaper_interval: Duration::from_millis(100),
        ..ServerConfig::default()
    }
}

/// Runs `onceflow ARGS` with `env` (and no inherited ONCEFLOW_URL, ONCEFLOW_TOKEN or
/// ONCEFLOW_CA_CERT): (exit code, stdout, stderr).
async fn onceflow(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut command = Command::new(onceflow_binary());
    command
        .args(args)
        .env_remove("ONCEFLOW_URL")
        .env_remove("ONCEFLOW_TOKEN")
        .env_remove("ONCEFLOW_CA_CERT")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().expect("run onceflow"))
        .await
        .expect("the command's thread");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_completes_a_job_over_https_trusting_the_test_ca() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start_tls(&db, tls_config(&ca), &ca.ca_path()).await;
        assert!(server.api.url.starts_with("https://"), "{}", server.api.url);
        let worker = Arc::new(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .ca_cert(ca.ca_path())
                .poll_wait(Duration::from_secs(1))
                .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                    Ok::<_, ActivityError>(Done { n: w.n * 2 })
                })
                .build()
                .expect("the worker builds"),
        );
        let running = {
            let worker = worker.clone();
            tokio::spawn(async move { worker.run().await })
        };
        let client = Client::with_ca_cert(
            server.api.url.clone(),
            server.tokens.client.clone(),
            ca.ca_path(),
        )
        .expect("the client builds");
        let job = client
            .submit_activity(
                "over-tls",
                "work",
                &["cpu"],
                &Work { n: 21 },
                ActivityOptions::default(),
            )
            .await
            .expect("submitted over https")
            .job;
        let done = client
            .wait(job.id, Duration::from_secs(30))
            .await
            .expect("read over https");
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(done.activities[0].result, Some(json!({"n": 42})));
        worker.shutdown_token().cancel();
        let stopped = tokio::time::timeout(Duration::from_secs(30), running)
            .await
            .expect("the worker stops")
            .expect("the worker's task");
        assert!(stopped.is_ok(), "{stopped:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_that_do_not_trust_the_servers_ca_are_refused_with_a_certificate_error() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let other = TestCa::new("another CA");
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start_tls(&db, tls_config(&ca), &ca.ca_path()).await;
        let healthz = format!("{}/healthz", server.api.url);
        // The client that trusts the CA is answered: the server is up.
        let trusted = server
            .api
            .http
            .get(&healthz)
            .send()
            .await
            .expect("answered");
        assert_eq!(trusted.status(), StatusCode::OK);
        // System roots only: the test CA is not among them.
        let untrusting = onceflow_worker::http_client(None).expect("the client builds");
        let refused = untrusting
            .get(&healthz)
            .send()
            .await
            .expect_err("a certificate of an unknown CA is refused");
        let reason = onceflow_worker::with_causes(&refused);
        assert!(
            reason.contains("certificate") && reason.contains("UnknownIssuer"),
            "{reason}"
        );
        // The SDK's client trusting another CA: refused, and the reason reaches its error.
        let client = Client::with_ca_cert(
            server.api.url.clone(),
            server.tokens.client.clone(),
            other.ca_path(),
        )
        .expect("the client builds");
        match client.recent_jobs(1).await {
            Err(SdkError::Transport(message)) => {
                assert!(message.contains("certificate"), "{message}")
            }
            other => panic!("expected a transport error about the certificate, got {other:?}"),
        }
        // Plain HTTP to the TLS port gets no HTTP answer.
        let plain = reqwest::Client::new()
            .get(format!("http://{}/healthz", server.addr()))
            .send()
            .await;
        assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_reads_jobs_over_https_trusting_onceflow_ca_cert() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start_tls(&db, tls_config(&ca), &ca.ca_path()).await;
        let reply = server
            .api
            .submit(
                &server.tokens.client,
                "cli-over-tls",
                &json!({"activity": "generate", "providers": ["primary-llm"]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        let id = reply.body["id"].as_str().expect("job id").to_owned();
        let ca_path = ca.ca_path();
        let env = [
            ("ONCEFLOW_URL", server.api.url.as_str()),
            ("ONCEFLOW_TOKEN", server.tokens.operator.as_str()),
            ("ONCEFLOW_CA_CERT", path(&ca_path)),
        ];
        let (code, stdout, stderr) = onceflow(&["jobs", "show", &id], &env).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains(&id) && stdout.contains("cli-over-tls"),
            "{stdout}"
        );
        let (code, stdout, stderr) =
            onceflow(&["attempts", "stuck", "--older-than", "0s"], &env).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains("primary-llm") || stdout.contains("no attempts"),
            "{stdout}"
        );
        // Without the CA the CLI is refused, and says why.
        let (code, _, stderr) = onceflow(&["jobs", "show", &id], &env[..2]).await;
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("certificate"), "{stderr}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_onceflow_ca_cert_is_an_error_naming_the_variable_never_a_panic() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let missing = ca.dir().join("missing.pem");
        let not_pem = ca.dir().join("not-pem.txt");
        std::fs::write(&not_pem, "this is not a certificate\n").expect("write");
        for (file, reason) in [(&missing, "cannot read"), (&not_pem, "no PEM certificate")] {
            let env = [
                ("ONCEFLOW_URL", "https://127.0.0.1:9"),
                ("ONCEFLOW_TOKEN", "of_whatever"),
                ("ONCEFLOW_CA_CERT", path(file)),
            ];
            let (code, _, stderr) = onceflow(&["attempts", "stuck"], &env).await;
            assert_eq!(code, Some(1), "an error exit, not a panic: {stderr}");
            assert!(
                stderr.contains("ONCEFLOW_CA_CERT")
                    && stderr.contains(path(file))
                    && stderr.contains(reason)
                    && !stderr.contains("panicked"),
                "{stderr}"
            );
            // The SDK given the same file explicitly: a configuration error naming it.
            match Client::with_ca_cert("https://127.0.0.1:9", "of_whatever", file.as_path()) {
                Err(SdkError::Config(message)) => {
                    assert!(
                        message.contains(path(file)) && message.contains(reason),
                        "{message}"
                    )
                }
                other => panic!("expected a configuration error, got {other:?}"),
            }
            let built = Worker::builder("https://127.0.0.1:9", "of_whatever")
                .ca_cert(file.as_path())
                .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                    Ok::<_, ActivityError>(Done { n: w.n })
                })
                .build();
            assert!(
                matches!(&built, Err(SdkError::Config(m)) if m.contains(path(file))),
                "{:?}",
                built.err()
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn onceflow_serve_with_tls_cert_and_key_serves_https_and_drains_on_sigterm() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let cert = ca.issue("serve");
        let db = TestDb::new(Backend::Sqlite).await;
        let engine = db.engine();
        let client = engine
            .create_token("alice", Role::Client)
            .await
            .unwrap()
            .token;
        let worker = engine.create_token("*", Role::Worker).await.unwrap().token;
        let mut server = ServerProcess::start_tls(
            &db.url(),
            &cert.cert_path,
            &cert.key_path,
            &ca.ca_path(),
            &[],
        )
        .await;
        assert!(server.api.url.starts_with("https://"));
        let reply = server
            .api
            .submit(
                &client,
                "k",
                &json!({"activity": "generate", "providers": ["primary-llm"]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        let plain = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/healthz", server.port()))
            .send()
            .await;
        assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
        // A long-poll in flight over TLS is answered when the server is told to stop.
        let task = server.api.poll(&worker, "primary-llm", 2000).await;
        assert_eq!(task.len(), 1, "the job's attempt is handed out over https");
        let api = server.api.clone();
        let in_flight = tokio::spawn(async move { api.poll(&worker, "primary-llm", 20_000).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.signal(libc::SIGTERM);
        let answered = tokio::time::timeout(Duration::from_secs(15), in_flight)
            .await
            .expect("the in-flight poll was answered")
            .unwrap();
        assert!(answered.is_empty());
        let status = tokio::task::spawn_blocking(move || server.wait())
            .await
            .unwrap();
        assert!(status.success(), "a clean exit: {status:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onceflow_serve_with_a_bad_tls_cert_or_key_exits_non_zero_naming_the_file() {
    onceflow_tests::time_limit(async {
        let ca = TestCa::new("onceflow test CA");
        let good = ca.issue("good");
        let other = ca.issue("other");
        let missing = ca.dir().join("missing.crt");
        let not_pem = ca.dir().join("not-pem.crt");
        std::fs::write(&not_pem, "not a certificate\n").expect("write");
        let cases = [
            (&missing, &good.key_path, path(&missing).to_owned()),
            (&not_pem, &good.key_path, path(&not_pem).to_owned()),
            // The certificate given as the key: no private key in it.
            (
                &good.cert_path,
                &good.cert_path,
                format!("{}: no private key", path(&good.cert_path)),
            ),
            // Another certificate's key.
            (
                &good.cert_path,
                &other.key_path,
                path(&other.key_path).to_owned(),
            ),
        ];
        for (cert, key, named) in cases {
            let (code, _, stderr) = onceflow(
                &[
                    "serve",
                    "--database-url",
                    "sqlite::memory:",
                    "--bind",
                    "127.0.0.1:0",
                    "--tls-cert",
                    path(cert),
                    "--tls-key",
                    path(key),
                ],
                &[],
            )
            .await;
            assert_eq!(code, Some(1), "exits non-zero at start-up: {stderr}");
            assert!(
                stderr.contains("cannot serve TLS") && stderr.contains(&named),
                "names {named}: {stderr}"
            );
        }
        // One without the other is refused by the command line.
        let (code, _, stderr) = onceflow(
            &[
                "serve",
                "--database-url",
                "sqlite::memory:",
                "--tls-cert",
                path(&good.cert_path),
            ],
            &[],
        )
        .await;
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("--tls-key"), "{stderr}");
    })
    .await;
}
