//! onceflow's wire protocol: the types of docs/api.md, shared by the engine (server) and the
//! worker SDK (client). Status words, field names and shapes here are a promise to
//! clients in every language; see `docs/api.md`.

#![warn(missing_docs)]

pub mod api;
pub mod model;
pub mod timeline;
pub mod workflow;
