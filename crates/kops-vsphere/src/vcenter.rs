//! The vCenter calls kops-rs makes, typed: log in, find objects by
//! inventory path or BIOS UUID, read properties (one object, or a folder's
//! children), make a folder, clone/power/reconfigure/destroy VMs, and wait
//! for their tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::{Client, Fault, MoRef};
use crate::trust::Trust;
use crate::xml::{escape, Element};
use crate::{Credentials, VsphereError};

/// The service objects every call starts from.
#[derive(Debug, Clone)]
struct ServiceContent {
    property_collector: MoRef,
    search_index: MoRef,
    session_manager: MoRef,
    /// Datastore files and virtual disks (the etcd disks kept apart).
    file_manager: Option<MoRef>,
    virtual_disk_manager: Option<MoRef>,
    /// vSAN's top-level directories (none on an ESXi host or without vSAN).
    datastore_namespace_manager: Option<MoRef>,
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
            datastore_namespace_manager: reference("datastoreNamespaceManager").ok(),
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

    /// Makes the datastore directory `path` (`[ds] dir/sub`) and its
    /// parents; one that exists is fine. On vSAN, whose top-level
    /// directories are objects of their own (namespaces) that
    /// FileManager.MakeDirectory refuses to make (CannotCreateFile), the
    /// top one is made by the DatastoreNamespaceManager first.
    pub async fn make_directory(&self, datacenter: &MoRef, path: &str) -> Result<(), VsphereError> {
        let fault = match self.make_directory_once(datacenter, path).await? {
            Ok(()) => return Ok(()),
            Err(fault) => fault,
        };
        let refused = |fault: Fault| VsphereError::Fault {
            method: "MakeDirectory".into(),
            kind: fault.kind,
            message: fault.message,
        };
        if !fault.kind.contains("CannotCreateFile") {
            return Err(refused(fault));
        }
        let Some((datastore, top)) = self.vsan_namespace(datacenter, path).await? else {
            return Err(refused(fault));
        };
        self.create_namespace(&datastore, &top).await?;
        self.make_directory_once(datacenter, path)
            .await?
            .map_err(refused)
    }

    async fn make_directory_once(
        &self,
        datacenter: &MoRef,
        path: &str,
    ) -> Result<Result<(), Fault>, VsphereError> {
        let body = format!(
            "{}<name>{}</name>{}<createParentDirectories>true</createParentDirectories>",
            self.manager(&self.content.file_manager, "file manager")?
                .xml("_this"),
            escape(path),
            datacenter.xml("datacenter"),
        );
        Ok(
            match self.client.call_or_fault("MakeDirectory", &body).await? {
                Ok(_) => Ok(()),
                Err(fault) if fault.kind.contains("FileAlreadyExists") => Ok(()),
                Err(fault) => Err(fault),
            },
        )
    }

    /// The vSAN datastore of `datacenter` that `path` (`[ds] top/...`)
    /// names, with the path's top-level directory; `None` when that
    /// datastore is not vSAN.
    async fn vsan_namespace(
        &self,
        datacenter: &MoRef,
        path: &str,
    ) -> Result<Option<(MoRef, String)>, VsphereError> {
        let Some((name, inside)) = path.strip_prefix('[').and_then(|rest| rest.split_once(']'))
        else {
            return Ok(None);
        };
        let top = inside.trim().trim_start_matches('/');
        let top = top.split('/').next().unwrap_or_default();
        if top.is_empty() {
            return Ok(None);
        }
        let listed = self.properties(datacenter, &["datastore"]).await?;
        let datastores: Vec<MoRef> = listed
            .get("datastore")
            .map(|list| {
                list.all("ManagedObjectReference")
                    .filter_map(MoRef::from_element)
                    .collect()
            })
            .unwrap_or_default();
        for datastore in datastores {
            let found = self
                .properties(&datastore, &["name", "summary.type"])
                .await?;
            let text = |key: &str| found.get(key).map(|e| e.text.trim().to_string());
            if text("name").as_deref() == Some(name) {
                let vsan = text("summary.type").is_some_and(|t| t.eq_ignore_ascii_case("vsan"));
                return Ok(vsan.then(|| (datastore, top.to_string())));
            }
        }
        Ok(None)
    }

    /// Makes the vSAN namespace `name` at the top of `datastore`; one that
    /// exists is fine.
    async fn create_namespace(&self, datastore: &MoRef, name: &str) -> Result<(), VsphereError> {
        let body = format!(
            "{}{}<displayName>{}</displayName>",
            self.manager(
                &self.content.datastore_namespace_manager,
                "datastore namespace manager"
            )?
            .xml("_this"),
            datastore.xml("datastore"),
            escape(name),
        );
        match self.client.call_or_fault("CreateDirectory", &body).await? {
            Ok(_) => Ok(()),
            Err(fault) if fault.kind.contains("FileAlreadyExists") => Ok(()),
            Err(fault) => Err(VsphereError::Fault {
                method: "CreateDirectory".into(),
                kind: fault.kind,
                message: fault.message,
            }),
        }
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
            self.manager(
                &self.content.vstorage_object_manager,
                "VStorageObjectManager"
            )?
            .xml("_this"),
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
            self.manager(
                &self.content.vstorage_object_manager,
                "VStorageObjectManager"
            )?
            .xml("_this"),
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
            self.manager(
                &self.content.vstorage_object_manager,
                "VStorageObjectManager"
            )?
            .xml("_this"),
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

    /// The virtual disks in the datastore directory `dir` (`[ds] path`) of
    /// `datastore`, by full path (`[ds] path/disk.vmdk`), each with its
    /// capacity in KiB when the server says it (vCenter does; govmomi's
    /// simulator 0.24 does not); empty when the directory does not exist.
    /// One search through the datastore's browser (its `browser` read
    /// first): a task, so at least three calls.
    pub async fn virtual_disks(
        &self,
        datastore: &MoRef,
        dir: &str,
    ) -> Result<BTreeMap<String, Option<u64>>, VsphereError> {
        let browser = self
            .properties(datastore, &["browser"])
            .await?
            .get("browser")
            .and_then(MoRef::from_element)
            .ok_or_else(|| VsphereError::protocol("the datastore has no browser"))?;
        let body = format!(
            "{}<datastorePath>{}</datastorePath><searchSpec>\
             <query xsi:type=\"VmDiskFileQuery\"><details><diskType>false</diskType>\
             <capacityKb>true</capacityKb><hardwareVersion>false</hardwareVersion></details></query>\
             <details><fileType>true</fileType><fileSize>false</fileSize><modification>false</modification></details>\
             <matchPattern>*.vmdk</matchPattern></searchSpec>",
            browser.xml("_this"),
            escape(dir),
        );
        let result = match self.run_task("SearchDatastore_Task", &body).await {
            Ok(result) => result,
            Err(VsphereError::Fault { kind, .. }) if kind.contains("FileNotFound") => {
                return Ok(BTreeMap::new())
            }
            Err(e) => return Err(e),
        };
        Ok(result.map(|r| search_results(&r)).unwrap_or_default())
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

/// A HostDatastoreBrowserSearchResults' disks: full path → capacity in
/// KiB (when given).
fn search_results(result: &Element) -> BTreeMap<String, Option<u64>> {
    let folder = result
        .text_at(&["folderPath"])
        .unwrap_or("")
        .trim()
        .trim_end_matches('/');
    result
        .all("file")
        .filter_map(|file| {
            let name = file.text_at(&["path"])?.trim();
            let capacity = file
                .text_at(&["capacityKb"])
                .and_then(|c| c.trim().parse().ok())
                .filter(|c| *c > 0);
            Some((format!("{folder}/{name}"), capacity))
        })
        .collect()
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
        let p = vc
            .properties(&vm, &["config.hardware.device"])
            .await
            .unwrap();
        let controller = p["config.hardware.device"]
            .all("VirtualDevice")
            .find(|d| {
                d.xsi_type()
                    .is_some_and(|t| t.contains("LsiLogic") || t.contains("SCSI"))
            })
            .and_then(|d| d.text_at(&["key"]))
            .map(|k| k.trim().parse::<i32>().unwrap())
            .expect("a SCSI controller");
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

    /// A datastore search's result as vCenter gives it (capacities
    /// included; govmomi's simulator leaves them out).
    #[test]
    fn a_search_result_gives_each_disk_its_path_and_capacity() {
        let xml = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x" xmlns:xsi="y"><soapenv:Body><R>
            <val xsi:type="HostDatastoreBrowserSearchResults"><datastore type="Datastore">datastore-1</datastore>
              <folderPath>[ds1] kops-etcd/c1.k8s.local/</folderPath>
              <file xsi:type="VmDiskFileInfo"><path>main-a.vmdk</path><capacityKb>20971520</capacityKb></file>
              <file xsi:type="VmDiskFileInfo"><path>events-a.vmdk</path></file>
            </val></R></soapenv:Body></soapenv:Envelope>"#;
        let root = crate::xml::parse(xml).unwrap();
        let found = search_results(root.find("val").unwrap());
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            [
                (
                    "[ds1] kops-etcd/c1.k8s.local/events-a.vmdk".to_string(),
                    None
                ),
                (
                    "[ds1] kops-etcd/c1.k8s.local/main-a.vmdk".to_string(),
                    Some(20971520)
                ),
            ]
        );
    }
}
