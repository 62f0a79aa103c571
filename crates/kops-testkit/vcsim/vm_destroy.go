package main

// Destroying a VM in vCenter deletes its virtual disks with it, wherever
// their files are. Only a First Class Disk whose keepAfterDeleteVm is set
// stays, detached (vSphere API reference:
// VStorageObjectConfigInfo.keepAfterDeleteVm); another goes, from the
// disk inventory too. govmomi 0.24's simulator deletes every attached
// disk's file, kept First Class Disks included, and leaves the inventory
// naming the files it deleted. This file detaches the kept First Class
// Disks before the simulator destroys the VM, and removes the others from
// the inventory after it. The simulator also deletes the VM's whole
// directory, where vCenter deletes the VM's own files: a First Class Disk
// whose file is there (Storage vMotion names a VM's disks after it, and a
// detached one can be registered where it is) is set aside during the
// destroy and put back.

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// attachedDisk is one virtual disk of a VM as its destroy needs it.
type attachedDisk struct {
	key       int32
	id        string
	datastore types.ManagedObjectReference
}

// destroyWithDisks keeps and deletes a destroyed VM's First Class Disks
// as vCenter does; other calls go to next.
func destroyWithDisks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := callFor(w, r, next, "Destroy_Task")
		if body == nil {
			return
		}
		var req struct {
			Body struct {
				Destroy *struct {
					This types.ManagedObjectReference `xml:"_this"`
				} `xml:"Destroy_Task"`
			} `xml:"Body"`
		}
		if xml.Unmarshal(body, &req) != nil || req.Body.Destroy == nil ||
			req.Body.Destroy.This.Type != "VirtualMachine" {
			next.ServeHTTP(w, r)
			return
		}
		vm, ok := simulator.Map.Get(req.Body.Destroy.This).(*simulator.VirtualMachine)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		var disks []attachedDisk
		simulator.Map.WithLock(vm, func() {
			for _, device := range vm.Config.Hardware.Device {
				disk, ok := device.(*types.VirtualDisk)
				if !ok {
					continue
				}
				backing, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo)
				if !ok {
					continue
				}
				info := backing.GetVirtualDeviceFileBackingInfo()
				found := attachedDisk{key: disk.Key}
				if info.Datastore != nil {
					found.datastore = *info.Datastore
				}
				if disk.VDiskId != nil {
					found.id = disk.VDiskId.Id
				}
				disks = append(disks, found)
			}
		})
		var poweredOff bool
		simulator.Map.WithLock(vm, func() {
			poweredOff = vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff
		})
		var gone []attachedDisk
		for _, disk := range disks {
			if disk.id == "" {
				continue
			}
			found, fault := retrieveDisk(disk.datastore, disk.id)
			if fault != nil {
				continue
			}
			if keep := found.Config.KeepAfterDeleteVm; keep == nil || !*keep {
				gone = append(gone, disk)
				continue
			}
			// Detached before the destroy (which needs the VM powered
			// off), so the simulator leaves its file.
			if poweredOff {
				change := fmt.Sprintf(`<deviceChange><operation>remove</operation>`+
					`<device xsi:type="VirtualDisk"><key>%d</key></device></deviceChange>`, disk.key)
				innerCall(r, next, reconfigureCall(vm.Self, change))
			}
		}
		var directory string
		simulator.Map.WithLock(vm, func() { directory = vm.Config.Files.LogDirectory })
		restore := setAside(directory)
		next.ServeHTTP(w, r)
		restore()
		if simulator.Map.Get(vm.Self) != nil {
			return // not destroyed
		}
		for _, disk := range gone {
			deleteFirstClassDisk(r, next, disk)
		}
	})
}

// setAside moves the files of First Class Disks in the datastore directory
// `directory` (`[ds] dir`) out of it; the function returned puts them back.
func setAside(directory string) func() {
	var dir object.DatastorePath
	if !dir.FromString(directory) || strings.Trim(dir.Path, "/") == "" {
		return func() {}
	}
	content := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content
	if content.VStorageObjectManager == nil {
		return func() {}
	}
	manager, ok := simulator.Map.Get(*content.VStorageObjectManager).(*simulator.VcenterVStorageObjectManager)
	if !ok {
		return func() {}
	}
	type moved struct{ from, to string }
	var set []moved
	for _, entity := range simulator.Map.All("Datastore") {
		ds := entity.(*simulator.Datastore)
		if ds.Name != dir.Datastore {
			continue
		}
		root := ds.Info.GetDatastoreInfo().Url
		listed, ok := manager.ListVStorageObject(&types.ListVStorageObject{
			This: manager.Self, Datastore: ds.Self,
		}).(*methods.ListVStorageObjectBody)
		if !ok || listed.Res == nil {
			continue
		}
		for _, id := range listed.Res.Returnval {
			disk, fault := retrieveDisk(ds.Self, id.Id)
			if fault != nil {
				continue
			}
			backing, ok := disk.Config.Backing.(*types.BaseConfigInfoDiskFileBackingInfo)
			if !ok {
				continue
			}
			var file object.DatastorePath
			if !file.FromString(backing.FilePath) ||
				!strings.HasPrefix(file.Path, strings.Trim(dir.Path, "/")+"/") {
				continue
			}
			// A disk is its descriptor and its extent (`-flat`).
			descriptor := filepath.Join(root, file.Path)
			extent := strings.TrimSuffix(descriptor, ".vmdk") + "-flat.vmdk"
			for i, from := range []string{descriptor, extent} {
				to := filepath.Join(root, fmt.Sprintf(".set-aside-%s-%d", id.Id, i))
				if os.Rename(from, to) == nil {
					set = append(set, moved{from, to})
				}
			}
		}
	}
	return func() {
		for _, m := range set {
			_ = os.MkdirAll(filepath.Dir(m.from), 0750)
			_ = os.Rename(m.to, m.from)
		}
	}
}

// deleteFirstClassDisk deletes a First Class Disk through the simulator's
// VStorageObjectManager, in the session of r.
func deleteFirstClassDisk(r *http.Request, next http.Handler, disk attachedDisk) {
	content := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content
	if content.VStorageObjectManager == nil {
		return
	}
	call := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">`+
		`<soapenv:Body><DeleteVStorageObject_Task xmlns="urn:vim25">`+
		`<_this type="%s">%s</_this><id><id>%s</id></id><datastore type="Datastore">%s</datastore>`+
		`</DeleteVStorageObject_Task></soapenv:Body></soapenv:Envelope>`,
		content.VStorageObjectManager.Type, content.VStorageObjectManager.Value,
		escaped(disk.id), escaped(disk.datastore.Value))
	if recorder := innerCall(r, next, call); recorder.Code != http.StatusOK {
		fmt.Fprintf(os.Stderr, "deleting disk %s: %s\n", disk.id, strings.TrimSpace(recorder.Body.String()))
	}
}
