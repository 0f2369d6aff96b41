//! The `onceflow` binary's token and operator commands.

use std::process::Command;

use onceflow_tests::server::{onceflow_binary, TestServer};
use onceflow_tests::{admin_url, rules, wait_for};
use serde_json::json;

/// Runs `onceflow` off the async runtime, with owned arguments and variables.
async fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        onceflow(&args, &env)
    })
    .await
    .expect("onceflow ran")
}

#[test]
fn the_server_commands_need_no_url_or_token_flag_and_say_where_the_token_comes_from() {
    onceflow_tests::time_limit_blocking(|| {
        for command in [
            &["attempts", "stuck"][..],
            &["jobs", "show"],
            &["jobs", "signal"],
            &["jobs", "resume"],
            &["schedules", "list"],
        ] {
            let mut args = command.to_vec();
            args.push("--help");
            let (ok, help, stderr) = onceflow(&args, &[]);
            assert!(ok, "{stderr}");
            let usage = help
                .lines()
                .find(|l| l.starts_with("Usage:"))
                .expect("a usage line");
            assert!(
                !usage.contains("--url") && !usage.contains("--token"),
                "{command:?}: {usage}"
            );
            assert!(
                help.contains("[default: http://127.0.0.1:7380]")
                    && help.contains("[env: ONCEFLOW_URL"),
                "{help}"
            );
            assert!(
                help.contains("ONCEFLOW_OPERATOR_TOKEN") && help.contains("ONCEFLOW_CLIENT_TOKEN"),
                "{help}"
            );
        }
        let (_, help, _) = onceflow(&["attempts", "stuck", "--help"], &[]);
        assert!(help.contains("Stuck page"), "{help}");
    });
}

#[test]
fn token_create_without_a_database_names_the_flag_and_both_variables() {
    onceflow_tests::time_limit_blocking(|| {
        let (ok, _, stderr) = onceflow(
            &["token", "create", "--owner", "a", "--role", "client"],
            &[],
        );
        assert!(!ok);
        for needle in ["--database-url", "ONCEFLOW_DATABASE_URL", "or DATABASE_URL"] {
            assert!(stderr.contains(needle), "{needle} in {stderr}");
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_migrate_name_a_missing_database_and_how_to_create_it() {
    onceflow_tests::time_limit(async {
        let name = format!("onceflow_missing_{}", uuid::Uuid::new_v4().simple());
        let admin = admin_url();
        let (base, last) = admin.rsplit_once('/').expect("a database URL");
        let query = last
            .split_once('?')
            .map(|(_, q)| format!("?{q}"))
            .unwrap_or_default();
        let url = format!("{base}/{name}{query}");
        for args in [
            vec!["migrate", "--database-url", &url],
            vec!["serve", "--database-url", &url, "--bind", "127.0.0.1:0"],
        ] {
            let (ok, _, stderr) = run(&args, &[]).await;
            assert!(!ok, "{args:?} fails");
            let text = stderr.trim_end();
            assert!(!text.contains('\n'), "one line: {text}");
            assert!(
                text.contains(&format!("the database `{name}` does not exist")),
                "{text}"
            );
            assert!(
                text.contains("createdb ") && text.contains("CREATE DATABASE"),
                "{text}"
            );
            assert!(
                !text.contains("Database(") && !text.contains('{'),
                "no Rust debug output: {text}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_database_url_it_cannot_use_and_says_why() {
    onceflow_tests::time_limit(async {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port")
        };
        let (p1, p2) = (free_port(), free_port());
        let nobody = format!(
            "postgres://u:secret@127.0.0.1:{p1},127.0.0.1:{p2}/db?target_session_attrs=read-write"
        );
        for (url, says) in [
            (
                "postgres://u:secret@a:1,,b:2/db",
                "host 2 of the database URL's host list is empty",
            ),
            (
                "postgres://u:secret@a:1,b:x/db",
                "bad database URL at host `b:x`",
            ),
            (
                "postgres://u:secret@a:1,b:2/db?target_session_attrs=read-only",
                "target_session_attrs=read-only is not supported",
            ),
            (
                "postgres://u:secret@a:1,b:2/db?port=3",
                "not as host=, hostaddr= or port=",
            ),
            (
                &nobody,
                "no writable database server among the URL's hosts: 127.0.0.1:",
            ),
        ] {
            let args = ["serve", "--database-url", url, "--bind", "127.0.0.1:0"];
            let (ok, _, stderr) = run(&args, &[]).await;
            assert!(!ok, "{url} is refused");
            let text = stderr.trim_end();
            assert!(text.contains(says), "{url}: {text}");
            assert!(!text.contains("secret"), "the password stays out: {text}");
            assert!(!text.contains('\n'), "one line: {text}");
        }
        let (_, _, stderr) = run(&["migrate", "--database-url", &nobody], &[]).await;
        assert!(
            stderr.contains(&format!("127.0.0.1:{p1}"))
                && stderr.contains(&format!("127.0.0.1:{p2}")),
            "each server and why it was passed over: {stderr}"
        );
    })
    .await;
}

/// The variables the commands read (`tokens.env`'s among them): none leaks in from the
/// environment the tests run in.
const VARIABLES: [&str; 9] = [
    "ONCEFLOW_URL",
    "ONCEFLOW_TOKEN",
    "ONCEFLOW_CLIENT_TOKEN",
    "ONCEFLOW_WORKER_TOKEN",
    "ONCEFLOW_OPERATOR_TOKEN",
    "ONCEFLOW_ADMIN_TOKEN",
    "ONCEFLOW_DATABASE_URL",
    "DATABASE_URL",
    "ONCEFLOW_CA_CERT",
];

fn onceflow(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(onceflow_binary());
    command.args(args);
    for name in VARIABLES {
        command.env_remove(name);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run onceflow");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

rules! {
    async fn token_create_prints_the_token_alone_and_it_works(db) {
        let url = db.url();
        let (ok, stdout, stderr) = tokio::task::spawn_blocking(move || {
            onceflow(&["token", "create", "--owner", "carol", "--role", "client", "--database-url", &url], &[])
        }).await.unwrap();
        assert!(ok, "{stderr}");
        let token = stdout.trim_end_matches('\n');
        assert!(!token.contains('\n') && token.starts_with("of_"), "only the token on stdout: {stdout:?}");
        let principal = db.engine().authenticate(token).await.unwrap();
        assert_eq!(principal.owner, "carol");
        let url = db.url();
        let (ok, _, stderr) = tokio::task::spawn_blocking(move || {
            onceflow(&["token", "create", "--owner", "carol", "--role", "emperor", "--database-url", &url], &[])
        }).await.unwrap();
        assert!(!ok && stderr.contains("--role"), "{stderr}");
    }

    async fn operators_find_cancel_and_read_stuck_attempts_from_the_terminal(db) {
        let server = TestServer::start(db).await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"],
            "options": {"heartbeat_timeout_s": 1}})).await.body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await.remove(0);
        let attempt = task["attempt_id"].as_str().unwrap().to_owned();
        wait_for("unknown", std::time::Duration::from_secs(10), || async {
            server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await.body["activities"][0]["attempts"][0]["status"] == json!("unknown")
        }).await;
        let env = [("ONCEFLOW_URL", server.api.url.clone()), ("ONCEFLOW_TOKEN", server.tokens.operator.clone())];
        let run = |args: Vec<String>| {
            let env = env.clone();
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                onceflow(&args, &env)
            })
        };
        let (ok, stuck, stderr) = run(vec!["attempts".into(), "stuck".into(), "--older-than".into(), "0s".into()]).await.unwrap();
        assert!(ok, "{stderr}");
        assert!(stuck.contains(&attempt) && stuck.contains("unknown") && stuck.contains("alice"), "{stuck}");
        let (ok, cancelled, stderr) = run(vec!["attempts".into(), "cancel".into(), attempt.clone(), "--reason".into(), "provider confirmed no request".into()]).await.unwrap();
        assert!(ok, "{stderr}");
        assert!(cancelled.contains("cancelled by ops"), "{cancelled}");
        let task = server.api.poll(&server.tokens.worker, "primary-llm", 100).await;
        assert!(task.is_empty());
        let (ok, show, stderr) = run(vec!["jobs".into(), "show".into(), id.clone()]).await.unwrap();
        assert!(ok, "{stderr}");
        for expected in ["attempt_heartbeat_lost", "attempt_cancelled", "cancelled by ops: \"provider confirmed no request\"", "failover_skipped", "providers_exhausted"] {
            assert!(show.contains(expected), "{expected} in:\n{show}");
        }
        let (ok, _, stderr) = run(vec!["attempts".into(), "cancel".into(), attempt, "--reason".into(), "again".into(), "--token".into(), "of_nope".into()]).await.unwrap();
        assert!(!ok && stderr.contains("unauthenticated"), "{stderr}");
    }

    async fn attempts_stuck_lists_what_the_ui_stuck_page_lists(db) {
        let server = TestServer::start(db).await;
        let job = |key: &str, heartbeat: u64| json!({"activity": "generate", "providers": ["primary-llm"],
            "input": {"key": key}, "options": {"heartbeat_timeout_s": heartbeat}});
        let lost = server.api.submit(&server.tokens.client, "lost", &job("lost", 1)).await.body["id"].as_str().unwrap().to_owned();
        let unknown = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await.remove(0)["attempt_id"].as_str().unwrap().to_owned();
        wait_for("unknown", std::time::Duration::from_secs(10), || async {
            server.api.get(&format!("/v1/jobs/{lost}"), &server.tokens.client).await.body["activities"][0]["attempts"][0]["status"] == json!("unknown")
        }).await;
        server.api.submit(&server.tokens.client, "busy", &job("busy", 600)).await;
        let started = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await.remove(0)["attempt_id"].as_str().unwrap().to_owned();
        let claimed = std::time::Instant::now();
        let env = [("ONCEFLOW_URL", server.api.url.as_str()), ("ONCEFLOW_OPERATOR_TOKEN", server.tokens.operator.as_str())];
        // By default, as the Stuck page: an unknown attempt of any age (this one is seconds
        // old), and a started one only after 60 s.
        let (ok, listed, stderr) = run(&["attempts", "stuck"], &env).await;
        assert!(ok, "{stderr}");
        assert!(listed.contains(&unknown), "{listed}");
        // (On a machine so loaded that the started attempt is 60 s old by now, it belongs.)
        assert!(!listed.contains(&started) || claimed.elapsed().as_secs() >= 60, "{listed}");
        let (ok, listed, stderr) = run(&["attempts", "stuck", "--older-than", "0s"], &env).await;
        assert!(ok, "{stderr}");
        assert!(listed.contains(&unknown) && listed.contains(&started), "{listed}");
        let (ok, listed, stderr) = run(&["attempts", "stuck", "--older-than", "1h"], &env).await;
        assert!(ok, "{stderr}");
        assert!(listed.contains("no attempts stuck") && !listed.contains("unknown"), "{listed}");
    }

    async fn the_cli_moves_on_from_a_server_it_cannot_reach_to_the_next_url(db) {
        let server = TestServer::start(db).await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await.body["id"].as_str().unwrap().to_owned();
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let urls = format!("http://127.0.0.1:{dead}, {}", server.api.url);
        let (ok, shown, stderr) = run(&["jobs", "show", &id], &[("ONCEFLOW_URL", &urls), ("ONCEFLOW_CLIENT_TOKEN", &server.tokens.client)]).await;
        assert!(ok && shown.contains("generate"), "{shown}{stderr}");
        // A POST too, as a refused connection reached no server.
        let (ok, shown, stderr) = run(&["schedules", "pause", "nope"], &[("ONCEFLOW_URL", &urls), ("ONCEFLOW_CLIENT_TOKEN", &server.tokens.client)]).await;
        assert!(!ok && stderr.contains("not_found"), "the server's answer, not a connection error: {shown}{stderr}");
        // Only unreachable servers: the error names the last one tried.
        let (ok, _, stderr) = run(&["jobs", "show", &id], &[("ONCEFLOW_URL", &format!("http://127.0.0.1:{dead}")), ("ONCEFLOW_CLIENT_TOKEN", &server.tokens.client)]).await;
        assert!(!ok && stderr.contains("cannot reach") && stderr.contains(&dead.to_string()), "{stderr}");
    }

    async fn jobs_signal_sends_one_signal_per_key_and_jobs_show_lists_the_signals(db) {
        let server = TestServer::start(db).await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"workflow": "approval", "input": {}})).await.body["id"].as_str().unwrap().to_owned();
        let env = [("ONCEFLOW_URL", server.api.url.as_str()), ("ONCEFLOW_CLIENT_TOKEN", server.tokens.client.as_str())];
        let (ok, out, stderr) = run(&["jobs", "signal", &id, "approve", "--payload", r#"{"by": "ann"}"#, "--key", "click-1"], &env).await;
        assert!(ok && out.contains("approve #1 recorded") && out.contains("click-1"), "{out}{stderr}");
        let (ok, out, stderr) = run(&["jobs", "signal", &id, "approve", "--payload", r#"{"by":"ann"}"#, "--key", "click-1"], &env).await;
        assert!(ok && out.contains("approve #1 was already recorded"), "the same click again: {out}{stderr}");
        let (ok, _, stderr) = run(&["jobs", "signal", &id, "approve", "--payload", r#"{"by": "bob"}"#, "--key", "click-1"], &env).await;
        assert!(!ok && stderr.contains("idempotency_key_reused"), "{stderr}");
        let (ok, _, stderr) = run(&["jobs", "signal", &id, "approve", "--payload", "{not json"], &env).await;
        assert!(!ok && stderr.contains("--payload"), "{stderr}");
        // Without --key, each run is a new signal, and its key is printed.
        let (ok, out, stderr) = run(&["jobs", "signal", &id, "nudge"], &env).await;
        assert!(ok && out.contains("nudge #2 recorded") && out.contains("Idempotency-Key"), "{out}{stderr}");
        let (ok, shown, stderr) = run(&["jobs", "show", &id], &env).await;
        assert!(ok && shown.contains("signals") && shown.contains("approve") && shown.contains("nudge") && shown.contains("waiting for the workflow"), "{shown}{stderr}");
        let view = server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await;
        assert_eq!(view.body["signals"].as_array().map(Vec::len), Some(2), "{:?}", view.body);
    }

    async fn jobs_resume_resumes_a_failed_job_once_from_the_terminal(db) {
        let server = TestServer::start(db).await;
        // A failed job: its one provider refused the attempt for good.
        let failed = || async {
            let id = server.api.submit(&server.tokens.client, &uuid::Uuid::now_v7().to_string(),
                &json!({"activity": "generate", "providers": ["primary-llm"]})).await.body["id"].as_str().unwrap().to_owned();
            // This job's attempt (a resumed job's fresh attempt may come first: left started).
            let task = loop {
                let tasks = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await;
                if let Some(task) = tasks.into_iter().find(|t| t["job_id"] == json!(id)) {
                    break task;
                }
            };
            let reply = server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
                &json!({"lease_token": task["lease_token"], "error": {"message": "declined", "retryable": false}})).await;
            assert!(reply.status.is_success(), "{:?}", reply.body);
            assert_eq!(server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await.body["status"], json!("failed"));
            id
        };
        let id = failed().await;
        let url = server.api.url.as_str();
        let as_client = [("ONCEFLOW_URL", url), ("ONCEFLOW_CLIENT_TOKEN", server.tokens.client.as_str())];
        let (ok, _, stderr) = run(&["jobs", "resume", &id], &as_client).await;
        assert!(!ok && stderr.contains("--reason"), "the reason is required: {stderr}");
        let (ok, _, stderr) = run(&["jobs", "resume", &id, "--reason", "  "], &as_client).await;
        assert!(!ok && stderr.contains("--reason"), "{stderr}");
        let (ok, out, stderr) = run(&["jobs", "resume", &id, "--reason", "provider fixed"], &as_client).await;
        assert!(ok && out.contains(&format!("job {id} resumed: running")) && out.contains("Idempotency-Key"), "{out}{stderr}");
        let view = server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await;
        assert_eq!(view.body["status"], json!("running"));
        assert_eq!(view.body["activities"][0]["attempts"].as_array().map(Vec::len), Some(2), "a fresh attempt: {:?}", view.body);
        // Running again: a second resume is refused.
        let (ok, _, stderr) = run(&["jobs", "resume", &id, "--reason", "again"], &as_client).await;
        assert!(!ok && stderr.contains("job_not_resumable"), "{stderr}");
        let (ok, shown, stderr) = run(&["jobs", "show", &id], &as_client).await;
        assert!(ok && shown.contains("job_resumed") && shown.contains("client:alice") && shown.contains("reason: provider fixed"), "{shown}{stderr}");
        // An operator's token (tokens.env's first choice) resumes any owner's job.
        let other = failed().await;
        let as_operator = [("ONCEFLOW_URL", url), ("ONCEFLOW_OPERATOR_TOKEN", server.tokens.operator.as_str())];
        let (ok, out, stderr) = run(&["jobs", "resume", &other, "--reason", "retry after the outage"], &as_operator).await;
        assert!(ok && out.contains("resumed: running"), "{out}{stderr}");
        let (ok, shown, _) = run(&["jobs", "show", &other], &as_operator).await;
        assert!(ok && shown.contains("operator:ops"), "{shown}");
        // Another owner's client cannot.
        let third = failed().await;
        let (ok, _, stderr) = run(&["jobs", "resume", &third, "--reason", "x"], &[("ONCEFLOW_URL", url), ("ONCEFLOW_CLIENT_TOKEN", &server.tokens.bob)]).await;
        assert!(!ok && stderr.contains("not_found"), "{stderr}");
    }

    async fn the_cli_takes_its_roles_token_from_the_variables_of_tokens_env(db) {
        let server = TestServer::start(db).await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await.body["id"].as_str().unwrap().to_owned();
        let url = server.api.url.as_str();
        let everything = [("ONCEFLOW_URL", url), ("ONCEFLOW_OPERATOR_TOKEN", server.tokens.operator.as_str()),
            ("ONCEFLOW_CLIENT_TOKEN", server.tokens.client.as_str()), ("ONCEFLOW_WORKER_TOKEN", server.tokens.worker.as_str())];
        for args in [&["attempts", "stuck"][..], &["jobs", "show", &id], &["schedules", "list"]] {
            let (ok, _, stderr) = run(args, &everything).await;
            assert!(ok, "{args:?} with the variables of tokens.env: {stderr}");
        }
        // A client token alone reads its own job.
        let (ok, shown, stderr) = run(&["jobs", "show", &id], &[("ONCEFLOW_URL", url), ("ONCEFLOW_CLIENT_TOKEN", &server.tokens.client)]).await;
        assert!(ok && shown.contains("generate"), "{shown}{stderr}");
        // --token and ONCEFLOW_TOKEN come first.
        let (ok, _, stderr) = run(&["attempts", "stuck", "--token", "of_nope"], &everything).await;
        assert!(!ok && stderr.contains("unauthenticated"), "{stderr}");
        let mut with_token = everything.to_vec();
        with_token.push(("ONCEFLOW_TOKEN", "of_nope"));
        let (ok, _, stderr) = run(&["attempts", "stuck"], &with_token).await;
        assert!(!ok && stderr.contains("unauthenticated"), "{stderr}");
        // Without any, the error says what to set.
        let (ok, _, stderr) = run(&["schedules", "list"], &[("ONCEFLOW_URL", url), ("ONCEFLOW_OPERATOR_TOKEN", &server.tokens.operator)]).await;
        assert!(!ok && stderr.contains("--token") && stderr.contains("ONCEFLOW_CLIENT_TOKEN") && stderr.contains("tokens.env"), "{stderr}");
    }

    async fn schedules_are_listed_shown_paused_and_resumed_from_the_terminal(db) {
        let server = TestServer::start(db).await;
        let put = server.api.send(reqwest::Method::PUT, "/v1/schedules/digest", Some(&server.tokens.client), &[],
            Some(&json!({"cron": "* * * * * *", "overlap": "allow", "job": {"workflow": "digest", "input": {}}}))).await;
        assert_eq!(put.status.as_u16(), 201);
        wait_for("a tick", std::time::Duration::from_secs(10), || async {
            server.api.get("/v1/schedules/digest", &server.tokens.client).await.body["fired_count"].as_u64() >= Some(1)
        }).await;
        let env = [("ONCEFLOW_URL", server.api.url.clone()), ("ONCEFLOW_TOKEN", server.tokens.client.clone())];
        let run = |args: &'static [&'static str]| {
            let env = env.clone();
            tokio::task::spawn_blocking(move || {
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
                onceflow(args, &env)
            })
        };
        let (ok, list, stderr) = run(&["schedules", "list"]).await.unwrap();
        assert!(ok, "{stderr}");
        assert!(list.contains("digest") && list.contains("* * * * * *") && list.contains("active"), "{list}");
        let (ok, show, stderr) = run(&["schedules", "show", "digest"]).await.unwrap();
        assert!(ok, "{stderr}");
        // The latest events (the first ones, `created` among them, may have scrolled off).
        assert!(show.contains("latest events") && show.contains("fired") && show.contains("UTC"), "{show}");
        let (ok, paused, stderr) = run(&["schedules", "pause", "digest"]).await.unwrap();
        assert!(ok && paused.contains("paused"), "{paused}{stderr}");
        assert_eq!(server.api.get("/v1/schedules/digest", &server.tokens.client).await.body["paused"], json!(true));
        let (ok, resumed, stderr) = run(&["schedules", "resume", "digest"]).await.unwrap();
        assert!(ok && resumed.contains("active"), "{resumed}{stderr}");
        assert_eq!(server.api.get("/v1/schedules/digest", &server.tokens.client).await.body["paused"], json!(false));
        let (ok, _, stderr) = run(&["schedules", "show", "nope"]).await.unwrap();
        assert!(!ok && stderr.contains("not_found"), "{stderr}");
    }

    /// `onceflow bench --workload workflow`: every workflow of the run (and the warm-up)
    /// succeeded, each through its three activities and its zero-length timer, and the
    /// RESULT line carries workflows/s and activity steps/s.
    async fn bench_workflow_runs_each_workflow_through_its_steps_to_success(db) {
        let url = db.url();
        let args = ["bench", "--database-url", &url, "--workload", "workflow", "--jobs", "20", "--concurrency", "4"];
        let (ok, stdout, stderr) = run(&args, &[("RUST_LOG", "warn")]).await;
        assert!(ok, "{stderr}");
        let line = stdout.lines().find(|l| l.starts_with("RESULT workload=workflow")).unwrap_or_else(|| panic!("no workflow result: {stdout}"));
        assert!(line.contains(" jobs=20 ") && line.contains(" rate=") && line.contains(" steps_rate="), "{line}");
        assert_eq!(db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench' AND kind = 'workflow' AND status = 'succeeded'").await, 21);
        assert_eq!(db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench'").await, 21, "no job other than the workflows");
        assert_eq!(db.count("SELECT count(*) FROM activities WHERE owner_id = 'bench' AND status = 'succeeded'").await, 63);
        assert_eq!(db.count("SELECT count(*) FROM timers WHERE owner_id = 'bench' AND fired_at IS NOT NULL").await, 21);
    }

    async fn bench_task_cost_runs_a_workflow_per_history_length_with_kept_runs_and_with_replays(db) {
        let url = db.url();
        let args = ["bench", "--database-url", &url, "--workload", "task-cost", "--steps", "5,40"];
        let (ok, stdout, stderr) = run(&args, &[("RUST_LOG", "warn")]).await;
        assert!(ok, "{stderr}");
        let line = stdout.lines().find(|l| l.starts_with("RESULT workload=task-cost")).unwrap_or_else(|| panic!("no task-cost result: {stdout}"));
        for key in ["ms_at_5=", "ms_at_40=", "replay_ms_at_5=", "replay_ms_at_40=", "ratio_at_40="] {
            assert!(line.contains(key), "{key} missing: {line}");
        }
        // Two workflows per length (kept runs, full replays), each of N + 50 zero-length
        // timers, all succeeded.
        assert_eq!(db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench' AND kind = 'workflow' AND status = 'succeeded'").await, 4);
        assert_eq!(db.count("SELECT count(*) FROM timers WHERE owner_id = 'bench' AND fired_at IS NOT NULL").await, 2 * (55 + 90));
        let (ok, _, stderr) = run(&["bench", "--database-url", &url, "--workload", "task-cost", "--steps", "0"], &[]).await;
        assert!(!ok && stderr.contains("positive"), "{stderr}");
    }
}

/// `onceflow bench --engines 2` runs two engine processes on one database and spreads its
/// producers and workers across them: every job of the run is made once and succeeds
/// (e2e), every key twice submitted makes one job (dedup), and both engines' workers
/// ran jobs. PostgreSQL: the database several engines share.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_with_two_engines_makes_each_job_once_and_uses_both() {
    onceflow_tests::time_limit(async {
        use onceflow_tests::{Backend, TestDb};
        let db = TestDb::new(Backend::Postgres).await;
        let url = db.url();
        let bench = |workload: &'static str| {
            let url = url.clone();
            async move {
                let args = [
                    "bench",
                    "--database-url",
                    &url,
                    "--workload",
                    workload,
                    "--jobs",
                    "200",
                    "--concurrency",
                    "4",
                    "--engines",
                    "2",
                ];
                run(&args, &[("RUST_LOG", "warn")]).await
            }
        };
        let (ok, stdout, stderr) = bench("e2e").await;
        assert!(ok, "{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.starts_with("RESULT workload=e2e"))
            .unwrap_or_else(|| panic!("no e2e result: {stdout}"));
        assert!(
            line.contains(" jobs=200 ") && line.contains(" engines=2"),
            "{line}"
        );
        // The 200 jobs and the warm-up, each once, each succeeded, by the workers of both engines.
        assert_eq!(
            db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench'")
                .await,
            201
        );
        assert_eq!(
            db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench' AND status = 'succeeded'")
                .await,
            201
        );
        assert_eq!(db.count("SELECT count(DISTINCT worker_id) FROM attempts WHERE owner_id = 'bench' AND completion_outcome = 'won'").await, 2, "one worker per engine, both ran jobs");

        let (ok, stdout, stderr) = bench("dedup").await;
        assert!(ok, "{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.starts_with("RESULT workload=dedup"))
            .unwrap_or_else(|| panic!("no dedup result: {stdout}"));
        assert!(
            line.contains(" jobs_created=100") && line.contains(" engines=2"),
            "{line}"
        );
        assert_eq!(db.count("SELECT count(*) FROM jobs WHERE owner_id = 'bench' AND idempotency_key LIKE '%-dedup-%'").await, 100, "one job per key across both engines");
        db.assert_integrity().await;
    })
    .await;
}
