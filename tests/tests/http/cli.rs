//! The `onceflow` binary's token and operator commands.

use std::process::Command;

use onceflow_tests::server::{onceflow_binary, TestServer};
use onceflow_tests::{rules, wait_for};
use serde_json::json;

fn onceflow(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(onceflow_binary());
    command
        .args(args)
        .env_remove("ONCEFLOW_URL")
        .env_remove("ONCEFLOW_TOKEN");
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
}
