//! The store's layout stays honest: SQL lives in `.sql` files, never in a Rust string
//! literal under `engine/src/store/`, and every `.sql` file is a statement the store runs
//! (loaded with `include_str!`).

use std::path::{Path, PathBuf};

/// Files under `engine/src/store/` that still hold inline SQL, because their store has
/// not been split into `.sql` files yet. Remove an entry once its statements moved; the
/// test fails if a listed file no longer exists or holds no SQL.
const NOT_YET_SPLIT: &[&str] = &[];

/// What only SQL says, in the uppercase the statements are written in.
const SQL_WORDS: &[&str] = &[
    "SELECT ",
    "INSERT INTO",
    "DELETE FROM",
    "UPDATE ",
    " WHERE ",
    "BEGIN",
    "SET LOCAL",
    "ON CONFLICT",
    "RETURNING ",
    "pg_notify",
];

fn store_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src/store")
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the store's folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The contents of the string literals of Rust source, comments left out (a simple
/// scanner: enough for the store's code, which has no raw strings).
fn string_literals(source: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '\'' => {
                // A char literal ('"', '\\'), or a lifetime: skip a char literal whole.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            '"' => {
                let mut literal = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                literal.push(escaped);
                            }
                        }
                        '"' => break,
                        c => literal.push(c),
                    }
                }
                literals.push(literal);
            }
            _ => {}
        }
    }
    literals
}

fn sql_in(path: &Path) -> Vec<String> {
    let source = std::fs::read_to_string(path).expect("read a store file");
    string_literals(&source)
        .into_iter()
        .filter(|l| SQL_WORDS.iter().any(|w| l.contains(w)))
        .collect()
}

#[test]
fn no_rust_file_of_the_store_holds_sql() {
    onceflow_tests::time_limit_blocking(|| {
        let dir = store_dir();
        let mut rust = Vec::new();
        files(&dir, "rs", &mut rust);
        assert!(rust.len() > 5, "found the store's files: {rust:?}");
        let mut offenders = Vec::new();
        for path in &rust {
            let name = path
                .strip_prefix(&dir)
                .expect("under the store")
                .to_string_lossy()
                .into_owned();
            let sql = sql_in(path);
            if NOT_YET_SPLIT.contains(&name.as_str()) {
                assert!(
                    !sql.is_empty(),
                    "{name} holds no SQL any more: take it off NOT_YET_SPLIT"
                );
                continue;
            }
            for statement in sql {
                offenders.push(format!("{name}: {}", statement.trim()));
            }
        }
        for name in NOT_YET_SPLIT {
            assert!(
                dir.join(name).exists(),
                "{name} is gone: take it off NOT_YET_SPLIT"
            );
        }
        assert!(
            offenders.is_empty(),
            "SQL belongs in a .sql file:\n{}",
            offenders.join("\n---\n")
        );
    });
}

#[test]
fn every_sql_file_is_a_statement_the_store_runs() {
    onceflow_tests::time_limit_blocking(|| {
        let dir = store_dir();
        for store in ["postgres", "sqlite"] {
            let folder = dir.join(store);
            if !folder.exists() {
                continue;
            }
            let mut sql = Vec::new();
            let sql_dir = folder.join("sql");
            if sql_dir.exists() {
                files(&sql_dir, "sql", &mut sql);
            }
            let mut rust = Vec::new();
            files(&folder, "rs", &mut rust);
            let code: String = rust
                .iter()
                .map(|p| std::fs::read_to_string(p).expect("read a store file"))
                .collect();
            for path in &sql {
                let name = path.file_name().expect("a file name").to_string_lossy();
                let include = format!("include_str!(\"sql/{name}\")");
                assert!(
                    code.contains(&include),
                    "{store}/sql/{name} is loaded by no include_str!: a dead statement"
                );
                let text = std::fs::read_to_string(path).expect("read a .sql file");
                assert!(
                    text.starts_with("--"),
                    "{store}/sql/{name} starts with no comment saying what it does"
                );
            }
        }
    });
}
