//! No cloud (`cloudProvider: metal`): no cloud token is accepted; only
//! enrolled machines join, by their machine key ([`crate::hostkey`], which
//! the controller asks before any cloud verifier).

use crate::identity::NodeIdentity;
use crate::refusal::{token_kind, Refusal};
use crate::verifier::Verifier;

/// The verifier of a bare-metal cluster: it refuses every token.
pub struct MetalVerifier;

#[async_trait::async_trait]
impl Verifier for MetalVerifier {
    async fn verify(&self, authorization: &str, _body: &[u8]) -> Result<NodeIdentity, Refusal> {
        Err(Refusal::NotAccepted(format!(
            "`{}` tokens are not accepted on a bare-metal cluster (only enrolled machines' `x-pki-tpm`)",
            token_kind(authorization)
        )))
    }
}
