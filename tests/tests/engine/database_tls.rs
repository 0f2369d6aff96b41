//! An engine on a PostgreSQL that accepts TLS connections only (a private cluster with
//! `ssl = on` and `hostnossl … reject`, its certificate signed by a CA of the test's
//! own): `sslmode` and `sslrootcert` of the database URL are honoured.

use onceflow_engine::model::JobStatus;
use onceflow_engine::Engine;
use onceflow_tests::cluster::PrivateCluster;
use onceflow_tests::tls::TestCa;
use onceflow_tests::{claim_one, llm_job, owner, quick_options, result_of, ALICE};
use serde_json::json;

/// A PostgreSQL that refuses every connection without TLS, with database `onceflow`; its
/// certificate (for `localhost` and `127.0.0.1`) signed by `ca`.
struct TlsPostgres {
    cluster: PrivateCluster,
    ca: TestCa,
}

impl TlsPostgres {
    fn start() -> TlsPostgres {
        let ca = TestCa::new("onceflow test CA");
        let cert = ca.issue("postgres");
        let cluster = PrivateCluster::start(
            &[
                "ssl = on",
                "ssl_cert_file = 'server.crt'",
                "ssl_key_file = 'server.key'",
            ],
            &[
                ("server.crt", cert.cert_pem.as_bytes()),
                ("server.key", cert.key_pem.as_bytes()),
            ],
        );
        // `createdb` connects without TLS: before the rules below forbid that.
        cluster.create_database("onceflow");
        cluster.set_hba(
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 0.0.0.0/0 reject\n",
        );
        cluster.reload();
        TlsPostgres { cluster, ca }
    }

    /// The database's URL with `params` (e.g. `sslmode=require`).
    fn url(&self, params: &str) -> String {
        format!("{}?{params}", self.cluster.url("onceflow"))
    }
}

fn ca_param(ca: &TestCa) -> String {
    format!("sslrootcert={}", ca.ca_path().display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_signing_ca_connects_and_runs_a_job_end_to_end() {
    onceflow_tests::time_limit(async {
        let pg = TlsPostgres::start();
        let url = pg.url(&format!("sslmode=verify-full&{}", ca_param(&pg.ca)));
        let engine = Engine::connect(&url, 4).await.unwrap_or_else(|e| {
            panic!(
                "verify-full with the signing CA connects: {e:?}\n{}",
                pg.cluster.log()
            )
        });
        engine.migrate().await.expect("migrations apply over TLS");
        let job = engine
            .submit(ALICE, "over-tls", &llm_job(json!({}), quick_options()))
            .await
            .expect("submitted")
            .job;
        let task = claim_one(&engine, "primary-llm").await;
        assert_eq!(task.job_id, job.id);
        engine
            .complete(
                &owner(ALICE),
                task.attempt_id,
                &result_of(&task, json!({"text": "done"})),
            )
            .await
            .expect("completed");
        let done = engine.job(&owner(ALICE), job.id).await.expect("read");
        assert_eq!(done.status, JobStatus::Succeeded);
        // The sessions are encrypted (the server admits no other kind; this says so too).
        let mut conn = {
            use sqlx::Connection;
            sqlx::PgConnection::connect(&url).await.expect("connect")
        };
        let ssl: bool =
            sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(&mut conn)
                .await
                .expect("pg_stat_ssl");
        assert!(ssl);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_that_requires_tls_refuses_sslmode_disable() {
    onceflow_tests::time_limit(async {
        let pg = TlsPostgres::start();
        let refused = Engine::connect(&pg.url("sslmode=disable"), 2).await;
        let error = format!("{:?}", refused.err().expect("refused without TLS"));
        assert!(
            error.contains("no encryption") || error.contains("pg_hba.conf"),
            "{error}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_server_certificate_that_another_ca_signed() {
    onceflow_tests::time_limit(async {
        let pg = TlsPostgres::start();
        let other = TestCa::new("another CA");
        let url = pg.url(&format!("sslmode=verify-full&{}", ca_param(&other)));
        let refused = Engine::connect(&url, 2).await;
        let error = format!(
            "{:?}",
            refused.err().expect("refused: the CA did not sign it")
        );
        assert!(
            error.contains("UnknownIssuer") || error.contains("certificate"),
            "{error}"
        );
        // verify-ca checks the signer just the same.
        let url = pg.url(&format!("sslmode=verify-ca&{}", ca_param(&other)));
        assert!(
            Engine::connect(&url, 2).await.is_err(),
            "verify-ca with another CA connected"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_encrypts_without_the_ca_and_verify_ca_accepts_the_signing_ca() {
    onceflow_tests::time_limit(async {
        let pg = TlsPostgres::start();
        let engine = Engine::connect(&pg.url("sslmode=require"), 2)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "require connects without the CA: {e:?}\n{}",
                    pg.cluster.log()
                )
            });
        engine.ping().await.expect("the database answers");
        // prefer (sqlx's default, as libpq's) takes TLS when the server offers it.
        let engine = Engine::connect(&pg.url("sslmode=prefer"), 2)
            .await
            .expect("prefer connects over TLS");
        engine.ping().await.expect("the database answers");
        let engine = Engine::connect(
            &pg.url(&format!("sslmode=verify-ca&{}", ca_param(&pg.ca))),
            2,
        )
        .await
        .expect("verify-ca with the signing CA connects");
        engine.ping().await.expect("the database answers");
    })
    .await;
}
