//! What both sides of kops' node bootstrap use (kops' `pkg/bootstrap` and
//! the controller's config): the protocol on the wire ([`protocol`]), the
//! node's client ([`client`]), the signed-token envelope
//! ([`signed_token`]) and its two tokens (Google Cloud's vTPM token,
//! [`gce::token`]; an enrolled machine's key, [`hostkey`]), the GCE
//! metadata client ([`gce::metadata`]), kops-controller's options as nodeup
//! writes them ([`config`]), and the HTTP client both use for cloud APIs
//! ([`http`], through [`proxy`]).
//!
//! nodeup depends on this crate, never on kops-controller; kops-controller
//! depends on it for everything it shares with the node.

pub mod client;
pub mod config;
pub mod gce;
pub mod hostkey;
pub mod http;
pub mod protocol;
pub mod proxy;
pub mod signed_token;
pub mod text;
