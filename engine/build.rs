//! Rebuilds the engine when a migration is added or changed: `sqlx::migrate!` embeds
//! `migrations/` at compile time, and cargo would not notice a new file there by itself.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
