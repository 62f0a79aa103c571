//! The network of a cluster's VMs (`spec.cloudConfig.vSphereNetwork`): a
//! standard port group or a distributed one (a port group of a vSphere
//! Distributed Switch), looked up once per run, and the `<deviceChange>`
//! that moves a clone's first network adapter onto it.

use crate::client::MoRef;
use crate::vcenter::Vcenter;
use crate::xml::{escape, Element};
use crate::VsphereError;

/// The field and flag naming the network (for hints).
const FIELD: &str = "spec.cloudConfig.vSphereNetwork (--vsphere-network)";

/// The tag vCenter puts on a distributed switch's uplink port group.
const UPLINK_TAG: &str = "SYSTEM/DVS.UPLINKPG";

/// Where a clone's first network adapter goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// A standard port group (a `Network` object): the adapter is backed
    /// by its name.
    Standard { name: String, network: MoRef },
    /// A distributed port group: the adapter is backed by a port of the
    /// group on its switch.
    Distributed {
        name: String,
        portgroup_key: String,
        switch_uuid: String,
    },
}

impl Network {
    /// What the network `name` (found at `found`) backs an adapter with:
    /// a standard port group as it is; a distributed one after reading its
    /// key and switch, then the switch's UUID (two reads). A switch, an
    /// uplink port group, an NSX opaque network or another object is
    /// refused with the field to fix.
    pub async fn lookup(vc: &Vcenter, name: &str, found: MoRef) -> Result<Network, VsphereError> {
        match found.kind.as_str() {
            "Network" => Ok(Network::Standard {
                name: name.to_string(),
                network: found,
            }),
            "DistributedVirtualPortgroup" => distributed(vc, name, &found).await,
            kind if kind.ends_with("DistributedVirtualSwitch") => Err(invalid(
                format!("network `{name}` is a distributed switch, not a port group"),
                format!("name one of the switch's port groups in {FIELD}"),
            )),
            "OpaqueNetwork" => Err(invalid(
                format!("network `{name}` is an NSX opaque network; kops-rs attaches VMs to standard and distributed port groups"),
                format!("name a standard or distributed port group in {FIELD}"),
            )),
            kind => Err(invalid(
                format!("network `{name}` is a {kind}, not a port group"),
                format!("name a standard or distributed port group in {FIELD}"),
            )),
        }
    }

    /// The name the user gave.
    pub fn name(&self) -> &str {
        match self {
            Network::Standard { name, .. } | Network::Distributed { name, .. } => name,
        }
    }

    /// The `<backing>` of an adapter on this network.
    fn backing(&self) -> String {
        match self {
            Network::Standard { name, network } => format!(
                "<backing xsi:type=\"VirtualEthernetCardNetworkBackingInfo\"><deviceName>{}</deviceName>{}</backing>",
                escape(name),
                network.xml("network"),
            ),
            Network::Distributed {
                portgroup_key,
                switch_uuid,
                ..
            } => format!(
                "<backing xsi:type=\"VirtualEthernetCardDistributedVirtualPortBackingInfo\">\
                 <port><switchUuid>{}</switchUuid><portgroupKey>{}</portgroupKey></port></backing>",
                escape(switch_uuid),
                escape(portgroup_key),
            ),
        }
    }

    /// A `<deviceChange>` moving the first network adapter among
    /// `devices` (a template's) to this network; empty when there is none.
    pub fn nic_change(&self, devices: &[Element]) -> String {
        let Some(nic) = first_nic(devices) else {
            return String::new();
        };
        let kind = nic.xsi_type().unwrap_or("VirtualVmxnet3");
        let key = nic.text_at(&["key"]).unwrap_or("4000");
        let controller = nic
            .text_at(&["controllerKey"])
            .map(|c| format!("<controllerKey>{c}</controllerKey>"))
            .unwrap_or_default();
        let unit = nic
            .text_at(&["unitNumber"])
            .map(|c| format!("<unitNumber>{c}</unitNumber>"))
            .unwrap_or_default();
        // The label and summary come along: vcsim 0.24 fails an edit without
        // them (vCenter does not mind either way).
        let info = format!(
            "<deviceInfo><label>{}</label><summary>{}</summary></deviceInfo>",
            escape(
                nic.text_at(&["deviceInfo", "label"])
                    .unwrap_or("Network adapter 1")
            ),
            escape(self.name()),
        );
        format!(
            "<deviceChange><operation>edit</operation><device xsi:type=\"{kind}\"><key>{key}</key>{info}\
             {}{controller}{unit}<addressType>generated</addressType></device></deviceChange>",
            self.backing(),
        )
    }
}

/// A distributed port group as an adapter's backing: its key and its
/// switch's UUID; its uplink port group is refused.
async fn distributed(vc: &Vcenter, name: &str, found: &MoRef) -> Result<Network, VsphereError> {
    let group = vc
        .properties(
            found,
            &[
                "key",
                "config.distributedVirtualSwitch",
                "config.uplink",
                "tag",
            ],
        )
        .await?;
    let unreadable = || {
        invalid(
            format!("cannot read the distributed switch of port group `{name}`"),
            "give the vCenter user read access (System.Read) to the port group and its switch, or name a standard port group in spec.cloudConfig.vSphereNetwork (--vsphere-network)".into(),
        )
    };
    let switch = group
        .get("config.distributedVirtualSwitch")
        .and_then(MoRef::from_element)
        .ok_or_else(unreadable)?;
    let portgroup_key = text(group.get("key")).ok_or_else(unreadable)?;
    let found_switch = vc
        .properties(&switch, &["name", "uuid", "config.uplinkPortgroup"])
        .await?;
    let uplink = text(group.get("config.uplink")).as_deref() == Some("true")
        || group.get("tag").is_some_and(|tags| {
            tags.all("Tag")
                .any(|t| t.text_at(&["key"]) == Some(UPLINK_TAG))
        })
        || found_switch.get("config.uplinkPortgroup").is_some_and(|u| {
            u.children
                .iter()
                .any(|r| MoRef::from_element(r).as_ref() == Some(found))
        });
    if uplink {
        let switch_name = text(found_switch.get("name")).unwrap_or(switch.value.clone());
        return Err(invalid(
            format!("network `{name}` is the uplink port group of distributed switch `{switch_name}` (its hosts' physical adapters), not a port group for VMs"),
            format!("name a VM port group of `{switch_name}` in {FIELD}"),
        ));
    }
    let switch_uuid = text(found_switch.get("uuid")).ok_or_else(unreadable)?;
    Ok(Network::Distributed {
        name: name.to_string(),
        portgroup_key,
        switch_uuid,
    })
}

fn text(element: Option<&Element>) -> Option<String> {
    element
        .map(|e| e.text.trim().to_string())
        .filter(|t| !t.is_empty())
}

fn invalid(message: String, fix: String) -> VsphereError {
    VsphereError::Invalid { message, fix }
}

/// A VM's first network adapter among its devices.
pub(crate) fn first_nic(devices: &[Element]) -> Option<&Element> {
    devices
        .iter()
        .find(|d| d.child("macAddress").is_some() || d.xsi_type().is_some_and(is_nic_type))
}

fn is_nic_type(kind: &str) -> bool {
    matches!(
        kind,
        "VirtualE1000"
            | "VirtualE1000e"
            | "VirtualPCNet32"
            | "VirtualVmxnet"
            | "VirtualVmxnet2"
            | "VirtualVmxnet3"
            | "VirtualSriovEthernetCard"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic() -> Vec<Element> {
        let xml = r#"<d><device xmlns:xsi="x" xsi:type="VirtualVmxnet3"><key>4000</key><deviceInfo><label>Network adapter 1</label></deviceInfo><controllerKey>100</controllerKey><unitNumber>7</unitNumber><macAddress>00:50:56:00:00:01</macAddress></device></d>"#;
        crate::xml::parse(xml).unwrap().children
    }

    #[test]
    fn a_distributed_port_group_backs_the_nic_with_a_port_of_its_switch() {
        let network = Network::Distributed {
            name: "pg & co".into(),
            portgroup_key: "dvportgroup-15".into(),
            switch_uuid: "50 2a".into(),
        };
        let change = network.nic_change(&nic());
        assert!(
            change.contains(
                "<backing xsi:type=\"VirtualEthernetCardDistributedVirtualPortBackingInfo\">\
                 <port><switchUuid>50 2a</switchUuid><portgroupKey>dvportgroup-15</portgroupKey></port></backing>"
            ),
            "{change}"
        );
        assert!(
            change.contains("<summary>pg &amp; co</summary>"),
            "{change}"
        );
        assert!(
            change.contains("<key>4000</key>") && change.contains("<unitNumber>7</unitNumber>")
        );
        assert!(!change.contains("deviceName"), "{change}");
    }

    #[test]
    fn a_standard_port_group_backs_the_nic_by_name() {
        let network = Network::Standard {
            name: "VM Network".into(),
            network: MoRef::new("Network", "network-7"),
        };
        let change = network.nic_change(&nic());
        assert!(
            change.contains(
                "<backing xsi:type=\"VirtualEthernetCardNetworkBackingInfo\"><deviceName>VM Network</deviceName>\
                 <network type=\"Network\">network-7</network></backing>"
            ),
            "{change}"
        );
        assert_eq!(network.nic_change(&[]), "");
    }
}
