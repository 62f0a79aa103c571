//! The vCenter calls kops-rs makes, typed: log in, find objects by
//! inventory path or BIOS UUID, read properties (one object, or a folder's
//! children), make a folder, clone/power/reconfigure/destroy VMs, and wait
//! for their tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::{Client, MoRef};
use crate::trust::Trust;
use crate::xml::{escape, Element};
use crate::{Credentials, VsphereError};

/// The service objects every call starts from.
#[derive(Debug, Clone)]
struct ServiceContent {
    property_collector: MoRef,
    search_index: MoRef,
    session_manager: MoRef,
    /// Datastore files and virtual disks (the directory of etcd disks
    /// kept before they were First Class Disks).
    file_manager: Option<MoRef>,
    virtual_disk_manager: Option<MoRef>,
    /// First Class Disks (vCenter's VcenterVStorageObjectManager).
    vstorage_object_manager: Option<MoRef>,
}

/// A First Class Disk: a virtual disk vCenter keeps apart from any VM,
/// found by its own id whatever its file is called or wherever Storage
/// vMotion moved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstClassDisk {
    pub id: String,
    pub name: String,
    /// Its file now (`[ds] fcd/<uuid>.vmdk`).
    pub file: String,
    /// The datastore holding it (every call on it names it).
    pub datastore: MoRef,
    pub capacity_mb: u64,
}

impl FirstClassDisk {
    /// From a VStorageObject.
    fn from_element(e: &Element) -> Option<FirstClassDisk> {
        let config = e.child("config")?;
        Some(FirstClassDisk {
            id: config.text_at(&["id", "id"])?.trim().to_string(),
            name: config
                .text_at(&["name"])
                .unwrap_or_default()
                .trim()
                .to_string(),
            file: config
                .text_at(&["backing", "filePath"])
                .unwrap_or_default()
                .trim()
                .to_string(),
            datastore: config
                .child("backing")?
                .child("datastore")
                .and_then(MoRef::from_element)?,
            capacity_mb: config
                .text_at(&["capacityInMB"])
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(0),
        })
    }
}

/// Properties of one object, by property path.
pub type Properties = BTreeMap<String, Element>;

/// How long a task may run before its wait gives up (a full clone of a
/// large template to a busy datastore takes minutes; one that has not
/// ended in half an hour is stuck, and the command should say so).
pub const TASK_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// A logged-in session with a vCenter.
pub struct Vcenter {
    pub client: Client,
    content: ServiceContent,
    /// How long [`Vcenter::run_task`]'s wait lasts at most.
    pub task_deadline: Duration,
}

impl Vcenter {
    /// Connects to `server` and logs in; wrong credentials and an
    /// unreachable server are errors naming the fix.
    pub async fn login(server: &str, credentials: &Credentials) -> Result<Vcenter, VsphereError> {
        Vcenter::login_with(server, &Trust::System, credentials).await
    }

    /// [`Vcenter::login`] accepting the certificates `trust` names.
    pub async fn login_with(
        server: &str,
        trust: &Trust,
        credentials: &Credentials,
    ) -> Result<Vcenter, VsphereError> {
        let client = Client::with_trust(server, trust)?;
        let answer = client
            .call(
                "RetrieveServiceContent",
                &MoRef::new("ServiceInstance", "ServiceInstance").xml("_this"),
            )
            .await?;
        let returnval = answer
            .child("returnval")
            .ok_or_else(|| VsphereError::Unreachable {
                server: server.to_string(),
                reason: "its service content is empty; is it a vCenter?".into(),
            })?;
        let reference = |name: &str| {
            returnval
                .child(name)
                .and_then(MoRef::from_element)
                .ok_or_else(|| VsphereError::Unreachable {
                    server: server.to_string(),
                    reason: format!("its service content has no {name}"),
                })
        };
        let content = ServiceContent {
            property_collector: reference("propertyCollector")?,
            search_index: reference("searchIndex")?,
            session_manager: reference("sessionManager")?,
            file_manager: reference("fileManager").ok(),
            virtual_disk_manager: reference("virtualDiskManager").ok(),
            vstorage_object_manager: reference("vStorageObjectManager").ok(),
        };
        let login = format!(
            "{}<userName>{}</userName><password>{}</password>",
            content.session_manager.xml("_this"),
            escape(&credentials.username),
            escape(&credentials.password)
        );
        match client.call_or_fault("Login", &login).await? {
            Ok(_) => client.remember_login(&login),
            Err(fault) if fault.kind.contains("InvalidLogin") => {
                return Err(VsphereError::Login {
                    server: server.to_string(),
                    user: credentials.username.clone(),
                })
            }
            Err(fault) => {
                return Err(VsphereError::Fault {
                    method: "Login".into(),
                    kind: fault.kind,
                    message: fault.message,
                })
            }
        }
        Ok(Vcenter {
            client,
            content,
            task_deadline: TASK_DEADLINE,
        })
    }

    /// Ends the session (best effort).
    pub async fn logout(&self) {
        let _ = self
            .client
            .call("Logout", &self.content.session_manager.xml("_this"))
            .await;
    }

    /// The object at an inventory path (`DC0/vm/folder`), if any.
    pub async fn find_path(&self, path: &str) -> Result<Option<MoRef>, VsphereError> {
        let body = format!(
            "{}<inventoryPath>{}</inventoryPath>",
            self.content.search_index.xml("_this"),
            escape(path)
        );
        let answer = self.client.call("FindByInventoryPath", &body).await?;
        Ok(answer.child("returnval").and_then(MoRef::from_element))
    }

    /// The VM whose BIOS UUID is `uuid` in `datacenter`, if any.
    pub async fn find_vm_by_uuid(
        &self,
        datacenter: &MoRef,
        uuid: &str,
    ) -> Result<Option<MoRef>, VsphereError> {
        let body = format!(
            "{}{}<uuid>{}</uuid><vmSearch>true</vmSearch><instanceUuid>false</instanceUuid>",
            self.content.search_index.xml("_this"),
            datacenter.xml("datacenter"),
            escape(uuid)
        );
        let answer = self.client.call("FindByUuid", &body).await?;
        Ok(answer.child("returnval").and_then(MoRef::from_element))
    }

    /// Properties of one object (missing ones are left out).
    pub async fn properties(
        &self,
        object: &MoRef,
        paths: &[&str],
    ) -> Result<Properties, VsphereError> {
        let object_set = format!(
            "<objectSet>{}<skip>false</skip></objectSet>",
            object.xml("obj")
        );
        let found = self.retrieve(&object.kind, paths, &object_set).await?;
        Ok(found.into_iter().next().map(|(_, p)| p).unwrap_or_default())
    }

    /// Properties of a folder's children of one type (e.g. its VMs).
    pub async fn children(
        &self,
        folder: &MoRef,
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<(MoRef, Properties)>, VsphereError> {
        let object_set = format!(
            "<objectSet>{}<skip>true</skip><selectSet xsi:type=\"TraversalSpec\">\
             <name>children</name><type>Folder</type><path>childEntity</path>\
             <skip>false</skip></selectSet></objectSet>",
            folder.xml("obj")
        );
        self.retrieve(kind, paths, &object_set).await
    }

    async fn retrieve(
        &self,
        kind: &str,
        paths: &[&str],
        object_set: &str,
    ) -> Result<Vec<(MoRef, Properties)>, VsphereError> {
        let path_set: String = paths
            .iter()
            .map(|p| format!("<pathSet>{}</pathSet>", escape(p)))
            .collect();
        let mut body = format!(
            "{}<specSet><propSet><type>{}</type><all>false</all>{path_set}</propSet>{object_set}</specSet><options></options>",
            self.content.property_collector.xml("_this"),
            escape(kind),
        );
        let mut method = "RetrievePropertiesEx";
        let mut out = Vec::new();
        loop {
            let answer = self.client.call(method, &body).await?;
            let Some(result) = answer.child("returnval") else {
                return Ok(out);
            };
            for object in result.all("objects") {
                let Some(reference) = object.child("obj").and_then(MoRef::from_element) else {
                    continue;
                };
                let mut properties = Properties::new();
                for property in object.all("propSet") {
                    if let (Some(name), Some(value)) =
                        (property.text_at(&["name"]), property.child("val"))
                    {
                        properties.insert(name.to_string(), value.clone());
                    }
                }
                out.push((reference, properties));
            }
            match result.text_at(&["token"]) {
                Some(token) if !token.is_empty() => {
                    method = "ContinueRetrievePropertiesEx";
                    body = format!(
                        "{}<token>{}</token>",
                        self.content.property_collector.xml("_this"),
                        escape(token)
                    );
                }
                _ => return Ok(out),
            }
        }
    }

    /// Makes folder `name` in `parent`.
    pub async fn create_folder(&self, parent: &MoRef, name: &str) -> Result<MoRef, VsphereError> {
        let body = format!("{}<name>{}</name>", parent.xml("_this"), escape(name));
        let answer = self.client.call("CreateFolder", &body).await?;
        answer
            .child("returnval")
            .and_then(MoRef::from_element)
            .ok_or_else(|| VsphereError::protocol("CreateFolder returned no folder"))
    }

    /// Clones `source` into `folder` as `name` (`spec` is the inner XML of
    /// a VirtualMachineCloneSpec) and waits for it; the new VM.
    pub async fn clone_vm(
        &self,
        source: &MoRef,
        folder: &MoRef,
        name: &str,
        spec: &str,
    ) -> Result<MoRef, VsphereError> {
        let body = format!(
            "{}{}<name>{}</name><spec>{spec}</spec>",
            source.xml("_this"),
            folder.xml("folder"),
            escape(name)
        );
        let result = self.run_task("CloneVM_Task", &body).await?;
        result
            .as_ref()
            .and_then(MoRef::from_element)
            .ok_or_else(|| VsphereError::protocol("CloneVM_Task returned no VM"))
    }

    pub async fn power_on(&self, vm: &MoRef) -> Result<(), VsphereError> {
        self.run_task("PowerOnVM_Task", &vm.xml("_this"))
            .await
            .map(drop)
    }

    pub async fn power_off(&self, vm: &MoRef) -> Result<(), VsphereError> {
        self.run_task("PowerOffVM_Task", &vm.xml("_this"))
            .await
            .map(drop)
    }

    /// Destroys a VM or folder (and what a folder holds).
    pub async fn destroy(&self, object: &MoRef) -> Result<(), VsphereError> {
        self.run_task("Destroy_Task", &object.xml("_this"))
            .await
            .map(drop)
    }

    /// Sets extraConfig keys of a VM (an empty value removes the key).
    pub async fn set_extra_config(
        &self,
        vm: &MoRef,
        values: &[(&str, &str)],
    ) -> Result<(), VsphereError> {
        self.reconfigure(vm, &extra_config_xml(values)).await
    }

    /// Applies `spec` (the inner XML of a VirtualMachineConfigSpec) to a VM.
    pub async fn reconfigure(&self, vm: &MoRef, spec: &str) -> Result<(), VsphereError> {
        let body = format!("{}<spec>{spec}</spec>", vm.xml("_this"));
        self.run_task("ReconfigVM_Task", &body).await.map(drop)
    }

    /// Applies `spec` only while the VM's `config.changeVersion` is still
    /// `change_version` (what it was read as): a compare-and-swap of its
    /// configuration. When someone changed it since, vCenter ends the task
    /// with `ConcurrentAccess` ([`VsphereError::is_concurrent_access`]).
    pub async fn reconfigure_if(
        &self,
        vm: &MoRef,
        change_version: &str,
        spec: &str,
    ) -> Result<(), VsphereError> {
        // The first element of a VirtualMachineConfigSpec.
        let spec = format!(
            "<changeVersion>{}</changeVersion>{spec}",
            crate::xml::escape(change_version)
        );
        self.reconfigure(vm, &spec).await
    }

    fn manager(&self, which: &Option<MoRef>, what: &str) -> Result<MoRef, VsphereError> {
        which
            .clone()
            .ok_or_else(|| VsphereError::protocol(&format!("this vCenter has no {what}")))
    }

    /// Makes a First Class Disk `name` of `capacity_mb` on `datastore`
    /// (thin, kept when a VM it is attached to is deleted).
    pub async fn create_disk(
        &self,
        datastore: &MoRef,
        name: &str,
        capacity_mb: u64,
    ) -> Result<FirstClassDisk, VsphereError> {
        let body = format!(
            "{}<spec><name>{}</name><keepAfterDeleteVm>true</keepAfterDeleteVm>\
             <backingSpec xsi:type=\"VslmCreateSpecDiskFileBackingSpec\">{}\
             <provisioningType>thin</provisioningType></backingSpec>\
             <capacityInMB>{capacity_mb}</capacityInMB></spec>",
            self.vstorage()?.xml("_this"),
            escape(name),
            datastore.xml("datastore"),
        );
        let result = self.run_task("CreateDisk_Task", &body).await?;
        result
            .as_ref()
            .and_then(FirstClassDisk::from_element)
            .ok_or_else(|| VsphereError::protocol("CreateDisk_Task returned no disk"))
    }

    /// The ids of `datastore`'s First Class Disks.
    pub async fn disk_ids(&self, datastore: &MoRef) -> Result<Vec<String>, VsphereError> {
        let body = format!(
            "{}{}",
            self.vstorage()?.xml("_this"),
            datastore.xml("datastore"),
        );
        let answer = self.client.call("ListVStorageObject", &body).await?;
        Ok(answer
            .all("returnval")
            .filter_map(|id| id.text_at(&["id"]).map(|t| t.trim().to_string()))
            .collect())
    }

    /// The First Class Disk `id` of `datastore`, if it exists.
    pub async fn disk(
        &self,
        datastore: &MoRef,
        id: &str,
    ) -> Result<Option<FirstClassDisk>, VsphereError> {
        let body = format!(
            "{}<id><id>{}</id></id>{}",
            self.vstorage()?.xml("_this"),
            escape(id),
            datastore.xml("datastore"),
        );
        match self
            .client
            .call_or_fault("RetrieveVStorageObject", &body)
            .await?
        {
            Ok(answer) => Ok(answer
                .child("returnval")
                .and_then(FirstClassDisk::from_element)),
            Err(fault) if fault.kind.contains("NotFound") => Ok(None),
            Err(fault) => Err(VsphereError::Fault {
                method: "RetrieveVStorageObject".into(),
                kind: fault.kind,
                message: fault.message,
            }),
        }
    }

    /// Attaches the First Class Disk `id` of `datastore` to `vm` at the
    /// controller `controller_key`, unit `unit`.
    pub async fn attach_disk(
        &self,
        vm: &MoRef,
        datastore: &MoRef,
        id: &str,
        controller_key: i32,
        unit: i32,
    ) -> Result<(), VsphereError> {
        let body = format!(
            "{}<diskId><id>{}</id></diskId>{}<controllerKey>{controller_key}</controllerKey>\
             <unitNumber>{unit}</unitNumber>",
            vm.xml("_this"),
            escape(id),
            datastore.xml("datastore"),
        );
        self.run_task("AttachDisk_Task", &body).await.map(drop)
    }

    /// Detaches the First Class Disk `id` from `vm`; the disk stays.
    pub async fn detach_disk(&self, vm: &MoRef, id: &str) -> Result<(), VsphereError> {
        let body = format!(
            "{}<diskId><id>{}</id></diskId>",
            vm.xml("_this"),
            escape(id)
        );
        self.run_task("DetachDisk_Task", &body).await.map(drop)
    }

    /// Grows the First Class Disk `id` of `datastore` to `capacity_mb`
    /// (vCenter refuses a smaller size).
    pub async fn extend_disk(
        &self,
        datastore: &MoRef,
        id: &str,
        capacity_mb: u64,
    ) -> Result<(), VsphereError> {
        let body = format!(
            "{}<id><id>{}</id></id>{}<newCapacityInMB>{capacity_mb}</newCapacityInMB>",
            self.vstorage()?.xml("_this"),
            escape(id),
            datastore.xml("datastore"),
        );
        self.run_task("ExtendDisk_Task", &body).await.map(drop)
    }

    /// Makes the virtual disk `path` (`[ds] dir/disk.vmdk` of the
    /// datacenter at the inventory path `datacenter`) a First Class Disk
    /// named `name`, where its file is, and keeps it when a VM it is
    /// attached to is deleted (a registered disk is not kept otherwise).
    pub async fn register_disk(
        &self,
        datacenter: &str,
        path: &str,
        name: &str,
    ) -> Result<FirstClassDisk, VsphereError> {
        let Some((datastore_name, file)) =
            path.strip_prefix('[').and_then(|rest| rest.split_once(']'))
        else {
            return Err(VsphereError::protocol(&format!(
                "`{path}` is not a datastore path"
            )));
        };
        // RegisterDisk takes the disk's datastore URL, as the datastore's
        // file service serves it.
        let url = format!(
            "{}/folder/{}?dcPath={}&dsName={}",
            self.client.base_url(),
            url_escape(file.trim(), true),
            url_escape(datacenter, false),
            url_escape(datastore_name, false),
        );
        let body = format!(
            "{}<path>{}</path><name>{}</name>",
            self.vstorage()?.xml("_this"),
            escape(&url),
            escape(name),
        );
        let answer = self.client.call("RegisterDisk", &body).await?;
        let disk = answer
            .child("returnval")
            .and_then(FirstClassDisk::from_element)
            .ok_or_else(|| VsphereError::protocol("RegisterDisk returned no disk"))?;
        let flags = format!(
            "{}<id><id>{}</id></id>{}<controlFlags>keepAfterDeleteVm</controlFlags>",
            self.vstorage()?.xml("_this"),
            escape(&disk.id),
            disk.datastore.xml("datastore"),
        );
        self.client
            .call("SetVStorageObjectControlFlags", &flags)
            .await?;
        Ok(disk)
    }

    /// Deletes the First Class Disk `id` of `datastore` (its file too).
    pub async fn delete_disk(&self, datastore: &MoRef, id: &str) -> Result<(), VsphereError> {
        let body = format!(
            "{}<id><id>{}</id></id>{}",
            self.vstorage()?.xml("_this"),
            escape(id),
            datastore.xml("datastore"),
        );
        self.run_task("DeleteVStorageObject_Task", &body)
            .await
            .map(drop)
    }

    fn vstorage(&self) -> Result<MoRef, VsphereError> {
        self.manager(
            &self.content.vstorage_object_manager,
            "VStorageObjectManager",
        )
    }

    /// Moves the virtual disk `from` to `to` (`[ds] dir/disk.vmdk`, the
    /// same or another datastore of `datacenter`), its extents along.
    pub async fn move_virtual_disk(
        &self,
        datacenter: &MoRef,
        from: &str,
        to: &str,
    ) -> Result<(), VsphereError> {
        let body = format!(
            "{}<sourceName>{}</sourceName>{}<destName>{}</destName>{}<force>false</force>",
            self.manager(&self.content.virtual_disk_manager, "virtual disk manager")?
                .xml("_this"),
            escape(from),
            datacenter.xml("sourceDatacenter"),
            escape(to),
            datacenter.xml("destDatacenter"),
        );
        self.run_task("MoveVirtualDisk_Task", &body).await.map(drop)
    }

    /// Whether the virtual disk `path` (`[ds] dir/disk.vmdk`) exists.
    pub async fn disk_exists(&self, datacenter: &MoRef, path: &str) -> Result<bool, VsphereError> {
        let body = format!(
            "{}<name>{}</name>{}",
            self.manager(&self.content.virtual_disk_manager, "virtual disk manager")?
                .xml("_this"),
            escape(path),
            datacenter.xml("datacenter"),
        );
        match self
            .client
            .call_or_fault("QueryVirtualDiskUuid", &body)
            .await?
        {
            Ok(_) => Ok(true),
            Err(fault)
                if fault.kind.contains("FileNotFound")
                    || fault.kind.contains("CannotAccessFile") =>
            {
                Ok(false)
            }
            Err(fault) => Err(VsphereError::Fault {
                method: "QueryVirtualDiskUuid".into(),
                kind: fault.kind,
                message: fault.message,
            }),
        }
    }

    /// Deletes a datastore file or directory (with what it holds).
    pub async fn delete_datastore_file(
        &self,
        datacenter: &MoRef,
        path: &str,
    ) -> Result<(), VsphereError> {
        let body = format!(
            "{}<name>{}</name>{}",
            self.manager(&self.content.file_manager, "file manager")?
                .xml("_this"),
            escape(path),
            datacenter.xml("datacenter"),
        );
        self.run_task("DeleteDatastoreFile_Task", &body)
            .await
            .map(drop)
    }

    /// The key of `vm`'s first SCSI controller (tests attach disks there).
    #[cfg(test)]
    pub(crate) async fn scsi_controller_key(&self, vm: &MoRef) -> i32 {
        self.properties(vm, &["config.hardware.device"])
            .await
            .unwrap()["config.hardware.device"]
            .all("VirtualDevice")
            .find(|d| {
                d.xsi_type()
                    .is_some_and(|t| t.contains("LsiLogic") || t.contains("SCSI"))
            })
            .and_then(|d| d.text_at(&["key"]))
            .and_then(|k| k.trim().parse().ok())
            .expect("a SCSI controller")
    }

    /// Makes the datastore directory `path` (`[ds] dir`) and its parents,
    /// as tests place disks where older kops-rs or an operator did.
    #[cfg(test)]
    pub(crate) async fn make_directory(&self, datacenter: &MoRef, path: &str) {
        let body = format!(
            "{}<name>{}</name>{}<createParentDirectories>true</createParentDirectories>",
            self.content.file_manager.as_ref().unwrap().xml("_this"),
            escape(path),
            datacenter.xml("datacenter")
        );
        self.client.call("MakeDirectory", &body).await.unwrap();
    }

    /// Starts a task and waits for it; its result, if any.
    async fn run_task(&self, method: &str, body: &str) -> Result<Option<Element>, VsphereError> {
        let answer = self.client.call(method, body).await?;
        let task = answer
            .child("returnval")
            .and_then(MoRef::from_element)
            .ok_or_else(|| VsphereError::protocol(&format!("{method} returned no task")))?;
        self.wait_task(method, &task).await
    }

    /// Waits for `task` (started by `method`) to end, at most
    /// [`Vcenter::task_deadline`]; its result, or its fault, or an error
    /// naming the task when it did not end in time.
    async fn wait_task(&self, method: &str, task: &MoRef) -> Result<Option<Element>, VsphereError> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let info = self
                .properties(task, &["info.state", "info.result", "info.error"])
                .await?;
            match info.get("info.state").map(|s| s.text.trim()) {
                Some("success") => return Ok(info.get("info.result").cloned()),
                Some("error") => {
                    let error = info.get("info.error");
                    let fault = error
                        .and_then(|e| e.child("fault"))
                        .and_then(|f| f.xsi_type())
                        .unwrap_or("")
                        .to_string();
                    let message = error
                        .and_then(|e| e.text_at(&["localizedMessage"]))
                        .unwrap_or("")
                        .to_string();
                    return Err(VsphereError::Fault {
                        method: method.to_string(),
                        kind: fault,
                        message,
                    });
                }
                _ if started.elapsed() >= self.task_deadline => {
                    return Err(VsphereError::TaskDeadline {
                        method: method.to_string(),
                        task: task.value.clone(),
                        secs: self.task_deadline.as_secs(),
                    })
                }
                _ => {
                    let left = self.task_deadline.saturating_sub(started.elapsed());
                    tokio::time::sleep(pause.min(left)).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// `text` percent-encoded for a URL (its path when `path`, keeping `/`;
/// a query value otherwise).
fn url_escape(text: &str, path: bool) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte))
            }
            b'/' if path => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `<extraConfig>` elements of a VirtualMachineConfigSpec.
pub fn extra_config_xml(values: &[(&str, &str)]) -> String {
    values
        .iter()
        .map(|(key, value)| {
            format!(
                "<extraConfig xsi:type=\"OptionValue\"><key>{}</key><value xsi:type=\"xsd:string\">{}</value></extraConfig>",
                escape(key),
                escape(value)
            )
        })
        .collect()
}

/// A VM's extraConfig (`config.extraConfig`) as key → value; a key set
/// more than once keeps its last value, and empty values are dropped (an
/// empty value is how a key is removed).
pub fn extra_config(value: Option<&Element>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for option in value.into_iter().flat_map(|v| v.all("OptionValue")) {
        let key = option.text_at(&["key"]).unwrap_or("").to_string();
        let value = option.text_at(&["value"]).unwrap_or("").to_string();
        if value.is_empty() {
            out.remove(&key);
        } else {
            out.insert(key, value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use kops_testkit::vcsim::{self, Vcsim};

    fn simulator_credentials() -> Credentials {
        Credentials {
            username: vcsim::USER.into(),
            password: vcsim::PASSWORD.into(),
        }
    }

    /// A simulator of this test's own and a session on it (`None`: no
    /// simulator built, the test is skipped).
    async fn simulator() -> Option<(Vcsim, Vcenter)> {
        if !vcsim::vcsim_available() {
            return None;
        }
        let sim = Vcsim::start().unwrap();
        let vc = Vcenter::login(sim.url(), &simulator_credentials())
            .await
            .unwrap();
        Some((sim, vc))
    }

    /// Ends every session but `keep` from `admin`'s session, as a vCenter
    /// administrator terminates sessions.
    async fn terminate_others(admin: &Vcenter, keep: &str) {
        let sessions = admin
            .properties(&admin.content.session_manager, &["sessionList"])
            .await
            .unwrap();
        let body: String = sessions["sessionList"]
            .all("UserSession")
            .filter_map(|s| s.text_at(&["key"]).map(str::trim))
            .filter(|k| *k != keep)
            .map(|k| format!("<sessionId>{}</sessionId>", escape(k)))
            .collect();
        assert!(!body.is_empty(), "no session to end");
        let body = format!("{}{body}", admin.content.session_manager.xml("_this"));
        admin.client.call("TerminateSession", &body).await.unwrap();
    }

    /// A session vCenter ended mid-run (an administrator terminated it
    /// from another session) is renewed once, and the call goes through;
    /// a task wait whose task never reports an end stops at its deadline
    /// with an error naming the task.
    #[tokio::test]
    async fn an_ended_session_is_renewed_and_a_task_wait_has_a_deadline() {
        let Some((sim, mut vc)) = simulator().await else {
            return;
        };
        let admin = Vcenter::login(sim.url(), &simulator_credentials())
            .await
            .unwrap();
        let own = admin
            .properties(&admin.content.session_manager, &["currentSession"])
            .await
            .unwrap()["currentSession"]
            .text_at(&["key"])
            .unwrap()
            .trim()
            .to_string();
        terminate_others(&admin, &own).await;
        let logins = vc.client.calls()["Login"];
        let dc = vc.find_path(vcsim::DATACENTER).await.unwrap();
        assert!(dc.is_some(), "the call went through after a new login");
        assert_eq!(vc.client.calls()["Login"], logins + 1, "one new login");

        // A task whose state never comes: the session that polls it is
        // ended after the task started (the simulator then answers the
        // property reads with no value rather than a fault).
        let vm = vc
            .find_path(&format!("{}/vm/DC0_H0_VM0", vcsim::DATACENTER))
            .await
            .unwrap()
            .unwrap();
        let answer = vc
            .client
            .call("PowerOffVM_Task", &vm.xml("_this"))
            .await
            .unwrap();
        let task = answer
            .child("returnval")
            .and_then(MoRef::from_element)
            .unwrap();
        terminate_others(&admin, &own).await;
        vc.task_deadline = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let error = vc.wait_task("PowerOffVM_Task", &task).await.unwrap_err();
        let waited = started.elapsed();
        let text = error.to_string();
        assert!(
            text.contains(&task.value)
                && text.contains("PowerOffVM_Task")
                && text.contains("did not end"),
            "{text}"
        );
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        admin.logout().await;
    }

    /// The simulator keeps `config.changeVersion` as vCenter does: a new
    /// one after each reconfiguration, and a reconfiguration naming an
    /// older one fails with ConcurrentAccess and changes nothing.
    #[tokio::test]
    async fn a_reconfiguration_naming_a_stale_change_version_is_refused() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let vm = vc
            .find_path(&format!("{}/vm/DC0_H0_VM0", vcsim::DATACENTER))
            .await
            .unwrap()
            .unwrap();
        async fn read(vc: &Vcenter, vm: &MoRef) -> (String, BTreeMap<String, String>) {
            let p = vc
                .properties(vm, &["config.changeVersion", "config.extraConfig"])
                .await
                .unwrap();
            let version = p["config.changeVersion"].text.trim().to_string();
            (version, extra_config(p.get("config.extraConfig")))
        }
        let (first, _) = read(&vc, &vm).await;
        assert!(!first.is_empty(), "the VM has a change version");
        vc.reconfigure_if(&vm, &first, &extra_config_xml(&[("guestinfo.a", "1")]))
            .await
            .unwrap();
        let (second, extra) = read(&vc, &vm).await;
        assert_ne!(first, second, "a reconfiguration makes a new version");
        assert_eq!(extra["guestinfo.a"], "1");
        let lost = vc
            .reconfigure_if(&vm, &first, &extra_config_xml(&[("guestinfo.a", "2")]))
            .await
            .unwrap_err();
        assert!(lost.is_concurrent_access(), "{lost}");
        let (third, extra) = read(&vc, &vm).await;
        assert_eq!((third, extra["guestinfo.a"].as_str()), (second, "1"));
        vc.logout().await;
    }

    /// First Class Disks on the simulator as on vCenter: made with an id,
    /// listed, attached to a VM at a controller and unit (the VM's device
    /// then names the id), detached with the disk kept, and still there
    /// after the VM that held it is destroyed.
    #[tokio::test]
    async fn a_first_class_disk_is_attached_and_detached_by_its_id() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let datastore = vc
            .find_path(&format!(
                "{}/datastore/{}",
                vcsim::DATACENTER,
                vcsim::DATASTORE
            ))
            .await
            .unwrap()
            .unwrap();
        let disk = vc
            .create_disk(&datastore, "kops-etcd-main-a", 1024)
            .await
            .unwrap();
        assert_eq!(
            (disk.name.as_str(), disk.capacity_mb),
            ("kops-etcd-main-a", 1024)
        );
        assert!(vc.disk_ids(&datastore).await.unwrap().contains(&disk.id));
        assert_eq!(
            vc.disk(&datastore, &disk.id).await.unwrap().as_ref(),
            Some(&disk)
        );
        assert_eq!(vc.disk(&datastore, "no-such-disk").await.unwrap(), None);

        let vm = vc
            .find_path(&format!("{}/vm/DC0_H0_VM1", vcsim::DATACENTER))
            .await
            .unwrap()
            .unwrap();
        vc.power_off(&vm).await.unwrap();
        async fn disks(vc: &Vcenter, vm: &MoRef) -> Vec<(String, String, String)> {
            let p = vc
                .properties(vm, &["config.hardware.device"])
                .await
                .unwrap();
            p["config.hardware.device"]
                .all("VirtualDevice")
                .filter(|d| d.xsi_type() == Some("VirtualDisk"))
                .map(|d| {
                    let text =
                        |path: &[&str]| d.text_at(path).unwrap_or_default().trim().to_string();
                    (
                        text(&["vDiskId", "id"]),
                        text(&["backing", "fileName"]),
                        text(&["unitNumber"]),
                    )
                })
                .collect()
        }
        let controller = vc.scsi_controller_key(&vm).await;
        vc.attach_disk(&vm, &datastore, &disk.id, controller, 3)
            .await
            .unwrap();
        let attached = disks(&vc, &vm).await;
        assert!(
            attached.contains(&(disk.id.clone(), disk.file.clone(), "3".into())),
            "{attached:?}"
        );
        vc.detach_disk(&vm, &disk.id).await.unwrap();
        assert!(disks(&vc, &vm)
            .await
            .iter()
            .all(|(id, _, _)| *id != disk.id));
        let datacenter = vc.find_path(vcsim::DATACENTER).await.unwrap().unwrap();
        assert!(vc.disk_exists(&datacenter, &disk.file).await.unwrap());
        let missing = vc.detach_disk(&vm, &disk.id).await.unwrap_err();
        assert!(missing.to_string().contains("NotFound"), "{missing}");

        vc.attach_disk(&vm, &datastore, &disk.id, controller, 3)
            .await
            .unwrap();
        vc.detach_disk(&vm, &disk.id).await.unwrap();
        vc.destroy(&vm).await.unwrap();
        assert_eq!(vc.disk(&datastore, &disk.id).await.unwrap(), Some(disk));
        vc.logout().await;
    }

    /// The simulator answers as vCenter does: a First Class Disk grows and
    /// never shrinks; destroying a VM deletes the disks attached to it,
    /// wherever their files are, except First Class Disks kept after a
    /// VM's deletion, whether made so or registered from a plain disk and
    /// given the flag.
    #[tokio::test]
    async fn a_vms_deletion_takes_its_disks_but_not_first_class_disks_kept_after_it() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let path = |p: &str| format!("{}/{p}", vcsim::DATACENTER);
        let datastore = vc
            .find_path(&path(&format!("datastore/{}", vcsim::DATASTORE)))
            .await
            .unwrap()
            .unwrap();
        let datacenter = vc.find_path(vcsim::DATACENTER).await.unwrap().unwrap();
        let made = vc.create_disk(&datastore, "made", 1024).await.unwrap();
        vc.extend_disk(&datastore, &made.id, 2048).await.unwrap();
        let grown = vc.disk(&datastore, &made.id).await.unwrap().unwrap();
        assert_eq!(grown.capacity_mb, 2048);
        let shrink = vc
            .extend_disk(&datastore, &made.id, 1024)
            .await
            .unwrap_err();
        assert!(shrink.to_string().contains("InvalidArgument"), "{shrink}");

        // Two plain disks in a directory of their own, on one VM; one is
        // then registered as a First Class Disk.
        vc.make_directory(&datacenter, &format!("[{}] kept", vcsim::DATASTORE))
            .await;
        let vm = vc.find_path(&path("vm/DC0_H0_VM0")).await.unwrap().unwrap();
        vc.power_off(&vm).await.unwrap();
        let controller = vc.scsi_controller_key(&vm).await;
        let plain = |name: &str, key: i32, unit: u32| -> String {
            format!(
                "<deviceChange><operation>add</operation><fileOperation>create</fileOperation>\
                 <device xsi:type=\"VirtualDisk\"><key>{key}</key>\
                 <backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>[{}] kept/{name}.vmdk</fileName>\
                 <diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>\
                 <controllerKey>{controller}</controllerKey><unitNumber>{unit}</unitNumber>\
                 <capacityInKB>1048576</capacityInKB></device></deviceChange>",
                vcsim::DATASTORE
            )
        };
        vc.reconfigure(&vm, &plain("lost", -101, 4)).await.unwrap();
        let lost = format!("[{}] kept/lost.vmdk", vcsim::DATASTORE);
        // The other is made on its own, registered, then attached by id.
        let file = format!("[{}] kept/registered.vmdk", vcsim::DATASTORE);
        let create = format!(
            "{}<name>{file}</name>{}<spec xsi:type=\"FileBackedVirtualDiskSpec\">\
             <diskType>thin</diskType><adapterType>lsiLogic</adapterType><capacityKb>1048576</capacityKb></spec>",
            vc.content.virtual_disk_manager.as_ref().unwrap().xml("_this"),
            datacenter.xml("datacenter")
        );
        vc.run_task("CreateVirtualDisk_Task", &create)
            .await
            .unwrap();
        let registered = vc
            .register_disk(vcsim::DATACENTER, &file, "registered")
            .await
            .unwrap();
        assert_eq!(
            (registered.name.as_str(), registered.file.as_str()),
            ("registered", file.as_str())
        );

        vc.attach_disk(&vm, &datastore, &registered.id, controller, 5)
            .await
            .unwrap();
        vc.attach_disk(&vm, &datastore, &made.id, controller, 6)
            .await
            .unwrap();
        vc.destroy(&vm).await.unwrap();
        assert!(!vc.disk_exists(&datacenter, &lost).await.unwrap(), "{lost}");
        assert!(vc.disk_exists(&datacenter, &file).await.unwrap(), "{file}");
        assert!(vc.disk(&datastore, &made.id).await.unwrap().is_some());
        assert!(vc.disk(&datastore, &registered.id).await.unwrap().is_some());
        vc.logout().await;
    }
}
