//! Guards switched off on purpose, to show that the torture run (`scripts/torture
//! --mutant …`) catches their absence. Only a build with the test-only cargo feature
//! `mutants` can switch one off, and only when `ONCEFLOW_MUTANT` names it; every other
//! build answers `false`, always. Never build the feature for use.

/// Whether guard `name` (`fencing`, `cas`) is switched off.
#[cfg(feature = "mutants")]
pub(crate) fn off(name: &str) -> bool {
    static MUTANT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    MUTANT
        .get_or_init(|| std::env::var("ONCEFLOW_MUTANT").ok())
        .as_deref()
        == Some(name)
}

/// Whether guard `name` is switched off: never, in this build.
#[cfg(not(feature = "mutants"))]
pub(crate) const fn off(_name: &str) -> bool {
    false
}
