//! `onceflow migrate --citus` (docs/operations.md, Citus): on a Citus test database
//! (`ONCEFLOW_TEST_CITUS=1`, run by `scripts/citus-check`) every table of the schema is
//! distributed by owner or is a reference table, and a table a later migration adds is
//! distributed the same way; on plain PostgreSQL the store stays in its plain mode.

use onceflow_engine::store::postgres::PgStore;
use onceflow_tests::{on_citus, Backend, TestDb};

async fn pg_store(db: &TestDb) -> PgStore {
    PgStore::connect(&db.url(), 2)
        .await
        .expect("connect to the test database")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_is_distributed_by_owner_or_a_reference_table_after_migrate_citus() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let store = pg_store(&db).await;
        if !on_citus() {
            // Plain PostgreSQL: the store takes its batched statements, and distributing is
            // refused (there is no Citus to distribute on).
            assert!(!store.citus().await.expect("read the mode"));
            assert!(store.distribute(None).await.is_err());
            return;
        }
        assert!(store.citus().await.expect("read the mode"));
        assert_eq!(
            store.undistributed_tables().await.expect("list tables"),
            Vec::<String>::new()
        );
        let kinds = db
            .strings(
                "SELECT logicalrelid::text || ':' || CASE WHEN partmethod = 'n' THEN 'reference'
                        ELSE 'by ' || column_to_column_name(logicalrelid, partkey)
                             || CASE WHEN colocationid = (SELECT colocationid FROM pg_dist_partition
                                                           WHERE logicalrelid = 'jobs'::regclass)
                                     THEN ' with jobs' ELSE ' apart' END END
                 FROM pg_dist_partition ORDER BY 1",
            )
            .await;
        assert_eq!(
            kinds,
            [
                "activities:by owner_id with jobs",
                "api_tokens:reference",
                "attempts:by owner_id with jobs",
                "certifications:reference",
                "contracts:reference",
                "job_events:by owner_id with jobs",
                "jobs:by owner_id with jobs",
                "schedule_events:by owner_id with jobs",
                "schedules:by owner_id with jobs",
                "signals:by owner_id with jobs",
                "timers:by owner_id with jobs",
                "workflow_patches:by owner_id with jobs",
            ]
        );
        // Idempotent: running it again changes nothing.
        assert_eq!(
            store.distribute(None).await.expect("distribute again"),
            Vec::<String>::new()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_added_later_is_distributed_and_one_without_owner_is_reported() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let store = pg_store(&db).await;
        if !on_citus() {
            assert!(!store.citus().await.expect("read the mode"));
            return;
        }
        // As a later migration would add them.
        db.execute("CREATE TABLE later_things (owner_id TEXT NOT NULL, id UUID NOT NULL, PRIMARY KEY (owner_id, id))")
            .await
            .expect("create a table with owner_id");
        db.execute("CREATE TABLE ownerless_things (id UUID PRIMARY KEY)")
            .await
            .expect("create a table without owner_id");
        assert_eq!(
            store.undistributed_tables().await.expect("list tables"),
            ["later_things", "ownerless_things"]
        );
        // migrate --citus distributes the first and reports the second (and then fails).
        assert_eq!(
            store.distribute(None).await.expect("distribute"),
            ["ownerless_things"]
        );
        assert!(
            db.boolean(
                "SELECT colocationid = (SELECT colocationid FROM pg_dist_partition
                                        WHERE logicalrelid = 'jobs'::regclass)
                 FROM pg_dist_partition WHERE logicalrelid = 'later_things'::regclass"
            )
            .await,
            "later_things is colocated with jobs"
        );
    })
    .await;
}
