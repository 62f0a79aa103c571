package main

// A First Class Disk (FCD) is a virtual disk vCenter keeps apart from any
// VM, under an id of its own (VcenterVStorageObjectManager makes, lists and
// retrieves them). VirtualMachine.AttachDisk_Task attaches one to a VM at a
// controller and unit, and the VM's device then names it by that id
// (VirtualDisk.vDiskId); DetachDisk_Task removes the device and keeps the
// disk (vSphere API reference: VirtualMachine.AttachDisk_Task,
// DetachDisk_Task). govmomi 0.24's simulator keeps FCDs but has neither
// method. This file serves both as the reconfiguration vCenter makes, in
// front of the SOAP handler and behind the change-version check, so the
// VM's change version moves as with any reconfiguration.

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io/ioutil"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
)

// diskRequest is the part of an AttachDisk_Task or DetachDisk_Task call
// this needs.
type diskRequest struct {
	Body struct {
		Attach *struct {
			This          types.ManagedObjectReference `xml:"_this"`
			DiskID        string                       `xml:"diskId>id"`
			Datastore     types.ManagedObjectReference `xml:"datastore"`
			ControllerKey *int32                       `xml:"controllerKey"`
			UnitNumber    *int32                       `xml:"unitNumber"`
		} `xml:"AttachDisk_Task"`
		Detach *struct {
			This   types.ManagedObjectReference `xml:"_this"`
			DiskID string                       `xml:"diskId>id"`
		} `xml:"DetachDisk_Task"`
	} `xml:"Body"`
}

// firstClassDisks answers AttachDisk_Task and DetachDisk_Task; other calls
// go to next.
func firstClassDisks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := soapBody(w, r)
		if !ok {
			return
		}
		if body == nil || !bytes.Contains(body, []byte("Disk_Task")) {
			next.ServeHTTP(w, r)
			return
		}
		var req diskRequest
		if xml.Unmarshal(body, &req) != nil {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case req.Body.Attach != nil:
			a := req.Body.Attach
			vm, ok := simulator.Map.Get(a.This).(*simulator.VirtualMachine)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			disk, fault := retrieveDisk(a.Datastore, a.DiskID)
			if fault == nil && (a.ControllerKey == nil || a.UnitNumber == nil) {
				fault = &types.InvalidArgument{InvalidProperty: "controllerKey"}
			}
			if fault != nil {
				failTask(w, vm, "attachDisk", "AttachDisk_TaskResponse", fault)
				return
			}
			backing := disk.Config.Backing.(*types.BaseConfigInfoDiskFileBackingInfo)
			device := fmt.Sprintf(`<deviceChange><operation>add</operation>`+
				`<device xsi:type="VirtualDisk"><key>-1</key>`+
				`<backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>%s</fileName>`+
				`<diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>`+
				`<controllerKey>%d</controllerKey><unitNumber>%d</unitNumber>`+
				`<capacityInKB>%d</capacityInKB><vDiskId><id>%s</id></vDiskId></device></deviceChange>`,
				escaped(backing.FilePath), *a.ControllerKey, *a.UnitNumber,
				disk.Config.CapacityInMB*1024, escaped(a.DiskID))
			reconfigureAs(w, r, next, vm, device, "AttachDisk_TaskResponse")
		case req.Body.Detach != nil:
			d := req.Body.Detach
			vm, ok := simulator.Map.Get(d.This).(*simulator.VirtualMachine)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			key := int32(0)
			simulator.Map.WithLock(vm, func() {
				for _, device := range vm.Config.Hardware.Device {
					if disk, ok := device.(*types.VirtualDisk); ok && disk.VDiskId != nil && disk.VDiskId.Id == d.DiskID {
						key = disk.Key
					}
				}
			})
			if key == 0 {
				failTask(w, vm, "detachDisk", "DetachDisk_TaskResponse", &types.NotFound{})
				return
			}
			device := fmt.Sprintf(`<deviceChange><operation>remove</operation>`+
				`<device xsi:type="VirtualDisk"><key>%d</key></device></deviceChange>`, key)
			reconfigureAs(w, r, next, vm, device, "DetachDisk_TaskResponse")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// retrieveDisk is the FCD `id` of `datastore`, as RetrieveVStorageObject
// answers it.
func retrieveDisk(datastore types.ManagedObjectReference, id string) (*types.VStorageObject, types.BaseMethodFault) {
	content := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance).Content
	if content.VStorageObjectManager == nil {
		return nil, &types.NotSupported{}
	}
	manager, ok := simulator.Map.Get(*content.VStorageObjectManager).(*simulator.VcenterVStorageObjectManager)
	if !ok {
		return nil, &types.NotSupported{}
	}
	ctx := &simulator.Context{Context: context.Background(), Map: simulator.Map}
	answer := manager.RetrieveVStorageObject(ctx, &types.RetrieveVStorageObject{
		This:      manager.Self,
		Id:        types.ID{Id: id},
		Datastore: datastore,
	})
	body, ok := answer.(*methods.RetrieveVStorageObjectBody)
	if !ok || body.Res == nil {
		return nil, &types.NotFound{}
	}
	return &body.Res.Returnval, nil
}

// reconfigureAs runs a ReconfigVM_Task of vm with the device change
// through next, and answers with its task under the name `response`.
func reconfigureAs(w http.ResponseWriter, r *http.Request, next http.Handler, vm *simulator.VirtualMachine, change, response string) {
	call := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>`+
		`<ReconfigVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">%s</_this>`+
		`<spec>%s</spec></ReconfigVM_Task></soapenv:Body></soapenv:Envelope>`,
		vm.Self.Value, change)
	inner := r.Clone(r.Context())
	inner.Body = ioutil.NopCloser(strings.NewReader(call))
	inner.ContentLength = int64(len(call))
	recorder := httptest.NewRecorder()
	next.ServeHTTP(recorder, inner)
	for k, v := range recorder.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(recorder.Code)
	_, _ = w.Write([]byte(strings.Replace(recorder.Body.String(), "ReconfigVM_TaskResponse", response, -1)))
}

// failTask answers with a task of vm that failed with fault.
func failTask(w http.ResponseWriter, vm *simulator.VirtualMachine, name, response string, fault types.BaseMethodFault) {
	task := simulator.CreateTask(vm, name, func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, fault
	})
	recorder := httptest.NewRecorder()
	writeTaskResponse(recorder, task.Run())
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(strings.Replace(recorder.Body.String(), "ReconfigVM_TaskResponse", response, -1)))
}

func escaped(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
