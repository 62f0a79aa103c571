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
//
// It also serves two VStorageObjectManager methods the simulator lacks:
// ExtendDisk_Task (a disk grows, never shrinks) and
// SetVStorageObjectControlFlags (keepAfterDeleteVm on a disk registered
// without it). Their effect is kept here and shown in what
// RetrieveVStorageObject answers, and in what a VM's deletion does to its
// disks (vm_destroy.go).

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io/ioutil"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
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
		Extend *struct {
			This         types.ManagedObjectReference `xml:"_this"`
			DiskID       string                       `xml:"id>id"`
			Datastore    types.ManagedObjectReference `xml:"datastore"`
			CapacityInMB int64                        `xml:"newCapacityInMB"`
		} `xml:"ExtendDisk_Task"`
		Flags *struct {
			This      types.ManagedObjectReference `xml:"_this"`
			DiskID    string                       `xml:"id>id"`
			Datastore types.ManagedObjectReference `xml:"datastore"`
			Flags     []string                     `xml:"controlFlags"`
		} `xml:"SetVStorageObjectControlFlags"`
		Retrieve *struct {
			DiskID string `xml:"id>id"`
		} `xml:"RetrieveVStorageObject"`
	} `xml:"Body"`
}

// diskChanges holds what ExtendDisk_Task and SetVStorageObjectControlFlags
// changed of a disk (by id), which the simulator's own records do not.
type diskChanges struct {
	mu       sync.Mutex
	capacity map[string]int64
	keep     map[string]bool
}

var changed = &diskChanges{capacity: map[string]int64{}, keep: map[string]bool{}}

// apply gives a disk as the simulator answers it its changes.
func (c *diskChanges) apply(disk *types.VStorageObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mb, ok := c.capacity[disk.Config.Id.Id]; ok {
		disk.Config.CapacityInMB = mb
	}
	if keep, ok := c.keep[disk.Config.Id.Id]; ok {
		disk.Config.KeepAfterDeleteVm = types.NewBool(keep)
	}
}

var (
	capacityElement = regexp.MustCompile(`<capacityInMB>\d+</capacityInMB>`)
	keepElement     = regexp.MustCompile(`<keepAfterDeleteVm>(true|false)</keepAfterDeleteVm>`)
)

// retrieved rewrites a RetrieveVStorageObject answer with the disk's changes.
func (c *diskChanges) retrieved(id, answer string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mb, ok := c.capacity[id]; ok {
		answer = capacityElement.ReplaceAllString(answer, "<capacityInMB>"+strconv.FormatInt(mb, 10)+"</capacityInMB>")
	}
	if keep, ok := c.keep[id]; ok {
		element := "<keepAfterDeleteVm>" + strconv.FormatBool(keep) + "</keepAfterDeleteVm>"
		if keepElement.MatchString(answer) {
			answer = keepElement.ReplaceAllString(answer, element)
		} else {
			answer = strings.Replace(answer, "<relocationDisabled>", element+"<relocationDisabled>", 1)
		}
	}
	return answer
}

// firstClassDisks answers AttachDisk_Task and DetachDisk_Task; other calls
// go to next.
func firstClassDisks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := callFor(w, r, next, "Disk_Task", "VStorageObject")
		if body == nil {
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
				`<datastore type="Datastore">%s</datastore>`+
				`<diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>`+
				`<controllerKey>%d</controllerKey><unitNumber>%d</unitNumber>`+
				`<capacityInKB>%d</capacityInKB><vDiskId><id>%s</id></vDiskId></device></deviceChange>`,
				escaped(backing.FilePath), escaped(backing.Datastore.Value), *a.ControllerKey, *a.UnitNumber,
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
		case req.Body.Extend != nil:
			e := req.Body.Extend
			manager := simulator.Map.Get(e.This)
			if manager == nil {
				next.ServeHTTP(w, r)
				return
			}
			answerTask(w, manager, "extendDisk", "ExtendDisk_TaskResponse", func() types.BaseMethodFault {
				disk, fault := retrieveDisk(e.Datastore, e.DiskID)
				if fault != nil {
					return fault
				}
				// The new capacity must be larger: a disk does not shrink.
				if e.CapacityInMB < disk.Config.CapacityInMB {
					return &types.InvalidArgument{InvalidProperty: "newCapacityInMB"}
				}
				changed.mu.Lock()
				changed.capacity[e.DiskID] = e.CapacityInMB
				changed.mu.Unlock()
				return nil
			})
		case req.Body.Flags != nil:
			f := req.Body.Flags
			if _, fault := retrieveDisk(f.Datastore, f.DiskID); fault != nil {
				writeFault(w, "NotFound", "The object or item referred to could not be found.")
				return
			}
			for _, flag := range f.Flags {
				if flag == string(types.VslmVStorageObjectControlFlagKeepAfterDeleteVm) {
					changed.mu.Lock()
					changed.keep[f.DiskID] = true
					changed.mu.Unlock()
				}
			}
			writeEmpty(w, "SetVStorageObjectControlFlagsResponse")
		case req.Body.Retrieve != nil:
			recorder := httptest.NewRecorder()
			next.ServeHTTP(recorder, r)
			for k, v := range recorder.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(recorder.Code)
			_, _ = w.Write([]byte(changed.retrieved(req.Body.Retrieve.DiskID, recorder.Body.String())))
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
	disk := body.Res.Returnval
	changed.apply(&disk)
	return &disk, nil
}

// reconfigureCall is a ReconfigVM_Task call of vm with the device change.
func reconfigureCall(vm types.ManagedObjectReference, change string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>`+
		`<ReconfigVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">%s</_this>`+
		`<spec>%s</spec></ReconfigVM_Task></soapenv:Body></soapenv:Envelope>`,
		vm.Value, change)
}

// reconfigureAs runs a ReconfigVM_Task of vm with the device change
// through next, and answers with its task under the name `response`.
func reconfigureAs(w http.ResponseWriter, r *http.Request, next http.Handler, vm *simulator.VirtualMachine, change, response string) {
	recorder := innerCall(r, next, reconfigureCall(vm.Self, change))
	for k, v := range recorder.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(recorder.Code)
	_, _ = w.Write([]byte(strings.Replace(recorder.Body.String(), "ReconfigVM_TaskResponse", response, -1)))
}

// failTask answers with a task of vm that failed with fault.
func failTask(w http.ResponseWriter, vm *simulator.VirtualMachine, name, response string, fault types.BaseMethodFault) {
	answerTask(w, vm, name, response, func() types.BaseMethodFault { return fault })
}

// answerTask runs work as a task of obj and answers with the task under
// the name `response`.
func answerTask(w http.ResponseWriter, obj mo.Reference, name, response string, work func() types.BaseMethodFault) {
	task := simulator.CreateTask(obj, name, func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
		return nil, work()
	})
	recorder := httptest.NewRecorder()
	writeTaskResponse(recorder, task.Run())
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(strings.Replace(recorder.Body.String(), "ReconfigVM_TaskResponse", response, -1)))
}

// writeEmpty answers a method that returns nothing.
func writeEmpty(w http.ResponseWriter, response string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">` +
		`<soapenv:Body><` + response + ` xmlns="urn:vim25"></` + response + `></soapenv:Body></soapenv:Envelope>`))
}

// writeFault answers with a SOAP fault of the vim25 type `kind`.
func writeFault(w http.ResponseWriter, kind, message string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ` +
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">` +
		`<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode>` +
		`<faultstring>` + escaped(message) + `</faultstring>` +
		`<detail><` + kind + `Fault xmlns="urn:vim25" xsi:type="` + kind + `"></` + kind + `Fault></detail>` +
		`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`))
}

func escaped(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// innerCall sends the SOAP envelope `call` to next in the session of r.
func innerCall(r *http.Request, next http.Handler, call string) *httptest.ResponseRecorder {
	inner := r.Clone(r.Context())
	inner.Body = ioutil.NopCloser(strings.NewReader(call))
	inner.ContentLength = int64(len(call))
	recorder := httptest.NewRecorder()
	next.ServeHTTP(recorder, inner)
	return recorder
}
