//! A private PostgreSQL cluster for the tests that restart, reconfigure or break the
//! database: `initdb` and `pg_ctl` in a temp dir of its own, on a free loopback port, so
//! the shared cluster at 127.0.0.1:5432 is never touched. Stopped (immediately) and
//! deleted when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A PostgreSQL cluster of the test's own.
pub struct PrivateCluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
}

/// The directory of PostgreSQL's server programs (`initdb`, `pg_ctl`): `pg_config
/// --bindir`, else the newest `/usr/lib/postgresql/*/bin`.
pub fn postgres_bin_dir() -> PathBuf {
    let newest_debian = || {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .collect();
        versions.sort_by_key(|p| {
            p.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        });
        versions.pop()
    };
    if let Some(dir) = newest_debian() {
        return dir;
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match from_pg_config {
        Some(dir) if dir.join("initdb").exists() => dir,
        _ => panic!("PostgreSQL's server programs (initdb, pg_ctl) are not installed: install the postgresql package"),
    }
}

/// Runs a server program as the `postgres` user when we are root (PostgreSQL refuses to
/// run as root), else as ourselves.
fn as_postgres(program: &Path) -> Command {
    // SAFETY: geteuid(2) reads the process's credentials; no memory is touched.
    if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn checked(what: &str, output: std::io::Result<Output>) -> Output {
    let output = output.unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Makes `path` belong to the `postgres` user when we are root.
fn give_to_postgres(path: &Path) {
    // SAFETY: geteuid(2) only reads the process's credentials.
    if unsafe { libc::geteuid() } == 0 {
        checked(
            "chown",
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(path)
                .output(),
        );
    }
}

impl PrivateCluster {
    /// Creates a cluster (`initdb`, trust authentication, superuser `postgres`), applies
    /// `settings` (lines of `postgresql.conf`, e.g. `ssl = on`) and starts it on a free
    /// loopback port. `files` are written into the data directory first (name, contents),
    /// readable by the server only (e.g. `server.key`).
    pub fn start(settings: &[&str], files: &[(&str, &[u8])]) -> PrivateCluster {
        let bin = postgres_bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "onceflow_cluster_{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("create the cluster's directory");
        give_to_postgres(&dir);
        let data = dir.join("data");
        checked(
            "initdb",
            as_postgres(&bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args([
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ])
                .output(),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("free port")
            .local_addr()
            .expect("addr")
            .port();
        let cluster = PrivateCluster { dir, bin, port };
        for (name, contents) in files {
            cluster.write_file(name, contents);
        }
        let mut conf = format!(
            "\n# onceflow test cluster\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nfsync = off\nmax_connections = 100\n",
            cluster.dir.display()
        );
        for line in settings {
            conf.push_str(line);
            conf.push('\n');
        }
        cluster.append_file("postgresql.conf", &conf);
        cluster.pg_ctl(&["start", "-w", "-t", "60"]);
        cluster
    }

    /// A streaming standby of `primary`: a base backup of it (`pg_basebackup -X stream
    /// -R --checkpoint=fast`, which writes `standby.signal` and `primary_conninfo`), on a free loopback port
    /// and a socket directory of its own, connecting as `application_name = name` (the
    /// name `synchronous_standby_names` gives it), with `settings` appended to the
    /// `postgresql.conf` copied from the primary; started. The primary must allow
    /// replication connections from 127.0.0.1 (initdb's default `pg_hba.conf` does).
    pub fn standby_of(primary: &PrivateCluster, name: &str, settings: &[&str]) -> PrivateCluster {
        let bin = postgres_bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "onceflow_cluster_{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("create the standby's directory");
        give_to_postgres(&dir);
        let data = dir.join("data");
        checked(
            "pg_basebackup",
            as_postgres(&bin.join("pg_basebackup"))
                .arg("-D")
                .arg(&data)
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &primary.port.to_string(),
                    "-U",
                    "postgres",
                    "-X",
                    "stream",
                    "-R",
                    "--no-sync",
                    // Not a spread checkpoint, which takes most of checkpoint_timeout.
                    "--checkpoint=fast",
                ])
                .output(),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("free port")
            .local_addr()
            .expect("addr")
            .port();
        let standby = PrivateCluster { dir, bin, port };
        // Later lines win: the port and socket directory copied from the primary are
        // replaced.
        let mut conf = format!(
            "\n# onceflow test standby\nport = {port}\nunix_socket_directories = '{}'\ncluster_name = '{name}'\n",
            standby.dir.display()
        );
        for line in settings {
            conf.push_str(line);
            conf.push('\n');
        }
        standby.append_file("postgresql.conf", &conf);
        // postgresql.auto.conf (where -R wrote primary_conninfo) is read last.
        standby.append_file(
            "postgresql.auto.conf",
            &format!(
                "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name={name}'\n",
                primary.port
            ),
        );
        standby.pg_ctl(&["start", "-w", "-t", "60"]);
        standby
    }

    /// `pg_ctl stop -m immediate`: the server is killed as a crash would (no shutdown
    /// checkpoint, sessions cut); waits until it is down.
    pub fn stop_immediate(&self) {
        self.pg_ctl(&["stop", "-m", "immediate", "-w", "-t", "60"]);
    }

    /// `pg_ctl promote`: a standby ends recovery and takes writes; waits until it does.
    pub fn promote(&self) {
        self.pg_ctl(&["promote", "-w", "-t", "60"]);
    }

    /// A plain cluster with one database, `database`, started off the async threads
    /// (shared, so that a test can restart it from a blocking task while it runs).
    pub async fn with_database(database: &'static str) -> std::sync::Arc<PrivateCluster> {
        let cluster = tokio::task::spawn_blocking(move || {
            let cluster = PrivateCluster::start(&[], &[]);
            cluster.create_database(database);
            cluster
        })
        .await
        .expect("start a private cluster");
        std::sync::Arc::new(cluster)
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:{port}/{database}`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a database (as `postgres`, over the loopback port).
    pub fn create_database(&self, name: &str) {
        checked(
            "createdb",
            Command::new(self.bin.join("createdb"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    name,
                ])
                .output(),
        );
    }

    /// Writes a file into the data directory, readable by the server only.
    pub fn write_file(&self, name: &str, contents: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.data_dir().join(name);
        std::fs::write(&path, contents).expect("write a file into the data directory");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 0600");
        give_to_postgres(&path);
    }

    /// Appends text to a file of the data directory (`postgresql.conf`, `pg_hba.conf`).
    pub fn append_file(&self, name: &str, text: &str) {
        use std::io::Write;
        let path = self.data_dir().join(name);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open a file of the data directory");
        file.write_all(text.as_bytes())
            .expect("append to a file of the data directory");
    }

    /// Replaces `pg_hba.conf` (takes effect at the next start or reload).
    pub fn set_hba(&self, text: &str) {
        self.write_file("pg_hba.conf", text.as_bytes());
    }

    fn pg_ctl(&self, args: &[&str]) {
        checked(
            &format!("pg_ctl {}", args.join(" ")),
            as_postgres(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.dir.join("log"))
                .args(args)
                .output(),
        );
    }

    /// `pg_ctl stop -m fast`: every session is disconnected; waits until it is down.
    pub fn stop_fast(&self) {
        self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"]);
    }

    /// `pg_ctl start`; waits until it accepts connections.
    pub fn start_again(&self) {
        self.pg_ctl(&["start", "-w", "-t", "60"]);
    }

    /// `pg_ctl reload`: the server rereads `postgresql.conf` and `pg_hba.conf` (new
    /// connections see the change; sessions already open keep theirs).
    pub fn reload(&self) {
        self.pg_ctl(&["reload"]);
    }

    /// `pg_ctl restart -m fast`; waits until it accepts connections again.
    pub fn restart_fast(&self) {
        self.pg_ctl(&["restart", "-m", "fast", "-w", "-t", "60"]);
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .args(["stop", "-m", "immediate", "-w", "-t", "30"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
