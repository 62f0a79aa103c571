//! A Google Cloud node's side: who it is, from the metadata server
//! ([`metadata`]), and its vTPM-signed bootstrap token ([`token`]).

pub mod metadata;
pub mod token;
