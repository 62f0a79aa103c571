//! Machine types, their architectures and the images kops picks for them.

use crate::gce;
use crate::instance_group::Role;
use crate::version::KubernetesVersion;

use super::options::MOCK_AWS_REGION;

/// A CPU architecture of machines and images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Amd64,
    Arm64,
}

/// The architecture of an EC2 instance type, from its name: Graviton
/// families carry a `g` after the generation (`t4g`, `m7gd`, `c6gn`) and
/// `a1` is arm64; everything else is x86-64.
pub fn machine_architecture(machine_type: &str) -> Architecture {
    let family = machine_type.split('.').next().unwrap_or("");
    if family == "a1" {
        return Architecture::Arm64;
    }
    let letters = family
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .count();
    let rest = &family[letters..];
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    if letters == 0 || digits == 0 {
        return Architecture::Amd64;
    }
    let suffix = &rest[digits..];
    let attributes = suffix.split('-').next().unwrap_or("");
    if attributes.contains('g') {
        Architecture::Arm64
    } else {
        Architecture::Amd64
    }
}

/// The image kops' stable channel gives instances of `cloud` running
/// `version` on `arch`, if it has one.
pub fn default_image(
    cloud: &str,
    version: &KubernetesVersion,
    arch: Architecture,
) -> Option<&'static str> {
    if cloud == "gce" {
        return gce::default_image(version);
    }
    if cloud != "aws" {
        return None;
    }
    let minor = (version.major, version.minor);
    let image = if minor >= (1, 32) {
        match arch {
            Architecture::Amd64 => {
                "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20260714"
            }
            Architecture::Arm64 => {
                "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-arm64-server-20260714"
            }
        }
    } else if minor >= (1, 27) {
        match arch {
            Architecture::Amd64 => {
                "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20260714"
            }
            Architecture::Arm64 => {
                "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-arm64-server-20260714"
            }
        }
    } else {
        return None;
    };
    Some(image)
}

/// The machine type kops picks on AWS for a group with `role` in `region`
/// whose image is `image`.
///
/// kops asks AWS for the first of its candidates offered in every zone of the
/// group: `t3.medium` (then `c5.large`, `c4.large`) for control-plane, API
/// server and worker nodes, `t3.micro` (then `t2.micro`) for bastions, and the
/// Graviton `t4g.medium` / `t4g.micro` when the image is arm64. `t3` is
/// offered in every current region, so the first candidate is used here. In
/// kops' mock region `us-test-1` the mock cloud answers `m3.medium`,
/// `t2.medium` and `t2.micro`, and so does this function.
pub fn default_machine_type(region: &str, role: Role, image: Option<&str>) -> &'static str {
    if region == MOCK_AWS_REGION {
        return match role {
            Role::ControlPlane | Role::ApiServer => "m3.medium",
            Role::Node => "t2.medium",
            Role::Bastion => "t2.micro",
        };
    }
    let arm = image.is_some_and(|i| i.contains("arm64") || i.contains("aarch64"));
    match (role, arm) {
        (Role::Bastion, false) => "t3.micro",
        (Role::Bastion, true) => "t4g.micro",
        (_, false) => "t3.medium",
        (_, true) => "t4g.medium",
    }
}
