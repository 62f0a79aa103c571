//! A cloud resource `delete cluster` finds and deletes.

/// One cloud object of the cluster, in the order `delete cluster` takes
/// them (lower phase first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resource {
    /// Deletion phase: lower goes first.
    pub phase: u8,
    /// kops' type name (`instance`, `subnet`, `vpc`, `forwarding-rule`, ...).
    pub kind: &'static str,
    pub id: String,
    pub name: String,
    /// Marked shared with other clusters: listed, kept.
    pub shared: bool,
    /// For AWS internet gateways: the VPC to detach from first.
    pub vpc: Option<String>,
}

/// How a deletion went.
#[derive(Debug, Default)]
pub struct DeleteReport {
    pub deleted: Vec<Resource>,
    pub kept: Vec<Resource>,
    pub passes: u32,
}
