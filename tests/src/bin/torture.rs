//! `torture --seed N --seconds S [--store postgres|sqlite] [--engines K] [--mutant live-index|fencing|cas] [--out DIR]`:
//! a seeded, randomized workload with faults against real `onceflow serve` processes,
//! checked against the promises (see `onceflow_tests::torture`). Exits 0 when every rule
//! held (with `--mutant`: when the run caught the mutant), 1 otherwise.

use std::path::PathBuf;

use onceflow_tests::torture::{run, Mutant, Settings, Store};

fn usage(problem: &str) -> ! {
    eprintln!("torture: {problem}");
    eprintln!("usage: torture --seed N --seconds S [--store postgres|sqlite] [--engines K] [--mutant live-index|fencing|cas] [--out DIR]");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut seed = None;
    let mut seconds = 60;
    let mut store = Store::Postgres;
    let mut engines = 2;
    let mut mutant = None;
    let mut out = None;
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--seed" => {
                seed = Some(
                    value()
                        .parse()
                        .unwrap_or_else(|_| usage("--seed takes a number")),
                )
            }
            "--seconds" => {
                seconds = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--seconds takes a number"))
            }
            "--engines" => {
                engines = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--engines takes a number"))
            }
            "--store" => {
                store = match value().as_str() {
                    "postgres" => Store::Postgres,
                    "sqlite" => Store::Sqlite,
                    other => usage(&format!("no store {other}")),
                }
            }
            "--mutant" => {
                mutant = Some(match value().as_str() {
                    "live-index" => Mutant::LiveIndex,
                    "fencing" => Mutant::Fencing,
                    "cas" => Mutant::Cas,
                    other => usage(&format!("no mutant {other}")),
                })
            }
            "--out" => out = Some(PathBuf::from(value())),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let seed = seed.unwrap_or_else(|| usage("--seed is required"));
    let out_dir =
        out.unwrap_or_else(|| std::env::temp_dir().join(format!("onceflow-torture-{seed}")));
    let settings = Settings {
        seed,
        seconds,
        store,
        engines,
        mutant,
        out_dir: out_dir.clone(),
    };
    eprintln!(
        "torture: seed {seed}, {seconds} s, {store:?}, {engines} engine(s){}; history in {}",
        mutant
            .map(|m| format!(", mutant {m:?}"))
            .unwrap_or_default(),
        out_dir.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime.block_on(run(settings));
    println!(
        "TORTURE seed={seed} store={store:?} seconds={seconds} requests={} jobs={} kills={} pauses={} db_restarts={} dropped={} delayed={} violations={}{}",
        report.requests, report.jobs, report.kills, report.pauses, report.db_restarts, report.dropped, report.delayed,
        report.violations.len(),
        report.first_violation_ms.map(|ms| format!(" first_violation_ms={ms}")).unwrap_or_default(),
    );
    let ok = match mutant {
        None => report.violations.is_empty(),
        Some(m) => {
            let caught = !report.violations.is_empty();
            eprintln!(
                "torture: mutant {m:?} {}",
                if caught { "caught" } else { "NOT caught" }
            );
            caught
        }
    };
    if !ok {
        eprintln!("torture: FAILED with seed {seed} (rerun: scripts/torture --seed {seed} --seconds {seconds} --store {})", if store == Store::Postgres { "postgres" } else { "sqlite" });
    }
    std::process::exit(if ok { 0 } else { 1 });
}
