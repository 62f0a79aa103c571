//! Where Google's APIs are: Google's own endpoints, or gcloud's
//! `CLOUDSDK_API_ENDPOINT_OVERRIDES_*` (a test server, a private endpoint).

/// Where each API is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// Ends with `/compute/v1/`.
    pub compute: String,
    /// Ends with `/dns/v1/`.
    pub dns: String,
    /// The root; paths start with `v1/`.
    pub iam: String,
    /// The root; paths start with `v1/`.
    pub resource_manager: String,
}

impl Endpoints {
    /// From gcloud's overrides `lookup` finds, else Google's endpoints.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Endpoints {
        let pick = |name: &str, default: &str| {
            let value = lookup(&format!("CLOUDSDK_API_ENDPOINT_OVERRIDES_{name}"))
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_string());
            let value = value.trim().to_string();
            if value.ends_with('/') {
                value
            } else {
                format!("{value}/")
            }
        };
        Endpoints {
            compute: pick("COMPUTE", "https://compute.googleapis.com/compute/v1/"),
            dns: pick("DNS", "https://dns.googleapis.com/dns/v1/"),
            iam: pick("IAM", "https://iam.googleapis.com/"),
            resource_manager: pick(
                "CLOUDRESOURCEMANAGER",
                "https://cloudresourcemanager.googleapis.com/",
            ),
        }
    }

    pub(crate) fn all_local(&self) -> bool {
        [&self.compute, &self.dns, &self.iam, &self.resource_manager]
            .iter()
            .all(|u| u.starts_with("http://"))
    }
}
