package main

// vCenter stamps every VM configuration with config.changeVersion and
// changes it with each reconfiguration. A ReconfigVM_Task whose spec
// carries a changeVersion is applied only when that is still the VM's
// current one; otherwise its task ends in a ConcurrentAccess fault
// (vSphere API reference, VirtualMachineConfigSpec.changeVersion). This is
// how two clients make a compare-and-swap of a VM's configuration.
// govmomi 0.24's simulator neither stamps nor checks it; this file adds
// both, around the simulator's own SOAP handler.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"io/ioutil"
	"net/http"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// changeVersions stamps VMs and serializes reconfigurations, so that a
// check and the change it guards are one step.
type changeVersions struct {
	// Held through a checked reconfiguration.
	mu sync.Mutex
	// Held while a version is made (a new VM is stamped without mu).
	stampMu sync.Mutex
	last    int64
}

// stamp is a new change version: vCenter's are timestamps
// (2006-01-02T15:04:05.000000Z); each one differs from the last.
func (c *changeVersions) stamp() string {
	c.stampMu.Lock()
	defer c.stampMu.Unlock()
	now := time.Now().UTC().UnixNano() / 1000
	if now <= c.last {
		now = c.last + 1
	}
	c.last = now
	return time.Unix(0, now*1000).UTC().Format("2006-01-02T15:04:05.000000Z")
}

func (c *changeVersions) setVersion(vm *simulator.VirtualMachine) {
	version := c.stamp()
	simulator.Map.WithLock(vm, func() {
		if vm.Config != nil {
			vm.Config.ChangeVersion = version
		}
	})
}

// stampAll gives the model's VMs their version.
func (c *changeVersions) stampAll() {
	for _, entity := range simulator.Map.All("VirtualMachine") {
		c.setVersion(entity.(*simulator.VirtualMachine))
	}
}

// reconfigRequest is the part of a ReconfigVM_Task call this needs.
type reconfigRequest struct {
	Body struct {
		Reconfig *struct {
			This types.ManagedObjectReference `xml:"_this"`
			Spec struct {
				ChangeVersion string `xml:"changeVersion"`
			} `xml:"spec"`
		} `xml:"ReconfigVM_Task"`
	} `xml:"Body"`
}

// wrap checks and moves change versions around the SOAP handler next.
func (c *changeVersions) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := callFor(w, r, next, "_Task")
		if body == nil {
			return
		}
		var req reconfigRequest
		if bytes.Contains(body, []byte("ReconfigVM_Task")) &&
			xml.Unmarshal(body, &req) == nil && req.Body.Reconfig != nil {
			if vm, ok := simulator.Map.Get(req.Body.Reconfig.This).(*simulator.VirtualMachine); ok {
				c.reconfigure(w, r, next, vm, req.Body.Reconfig.Spec.ChangeVersion)
				return
			}
		}
		// A task that makes a VM (clone, create, register): the new VM
		// gets its first version (the simulator fills its configuration
		// in after registering it, so it cannot be stamped earlier).
		recorder := &bodyRecorder{ResponseWriter: w}
		next.ServeHTTP(recorder, r)
		task := succeeded(recorder)
		if task == nil {
			return
		}
		if ref, ok := task.Info.Result.(types.ManagedObjectReference); ok && ref.Type == "VirtualMachine" {
			if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok {
				c.setVersion(vm)
			}
		}
	})
}

// reconfigure runs a ReconfigVM_Task of vm when want (the spec's
// changeVersion) is empty or current, and moves the version on success.
func (c *changeVersions) reconfigure(w http.ResponseWriter, r *http.Request, next http.Handler, vm *simulator.VirtualMachine, want string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var current string
	simulator.Map.WithLock(vm, func() {
		if vm.Config != nil {
			current = vm.Config.ChangeVersion
		}
	})
	if want != "" && want != current {
		task := simulator.CreateTask(vm, "reconfigVm", func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
			return nil, &types.ConcurrentAccess{}
		})
		writeTaskResponse(w, task.Run())
		return
	}
	recorder := &bodyRecorder{ResponseWriter: w}
	next.ServeHTTP(recorder, r)
	if succeeded(recorder) != nil {
		c.setVersion(vm)
	}
}

// succeeded is the task a *_Task call answered with, when it succeeded
// (the simulator runs a task before it answers).
func succeeded(recorder *bodyRecorder) *simulator.Task {
	var answer struct {
		Body struct {
			Response struct {
				Task string `xml:"returnval"`
			} `xml:",any"`
		} `xml:"Body"`
	}
	if xml.Unmarshal(recorder.body.Bytes(), &answer) != nil || answer.Body.Response.Task == "" {
		return nil
	}
	ref := types.ManagedObjectReference{Type: "Task", Value: answer.Body.Response.Task}
	task, ok := simulator.Map.Get(ref).(*simulator.Task)
	if !ok || task.Info.State != types.TaskInfoStateSuccess {
		return nil
	}
	return task
}

// callFor is the body of a SOAP POST naming one of `markers` (put back for
// the next handler), for a middleware to look at. Any other request goes
// to next, and one whose body cannot be read is answered; both give nil.
func callFor(w http.ResponseWriter, r *http.Request, next http.Handler, markers ...string) []byte {
	if r.Method != http.MethodPost {
		next.ServeHTTP(w, r)
		return nil
	}
	body, err := ioutil.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	r.Body = ioutil.NopCloser(bytes.NewReader(body))
	for _, marker := range markers {
		if bytes.Contains(body, []byte(marker)) {
			return body
		}
	}
	next.ServeHTTP(w, r)
	return nil
}

// bodyRecorder keeps a copy of what it writes.
type bodyRecorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (b *bodyRecorder) Write(p []byte) (int, error) {
	b.body.Write(p)
	return b.ResponseWriter.Write(p)
}

// writeTaskResponse answers a ReconfigVM_Task call with its task.
func writeTaskResponse(w http.ResponseWriter, task types.ManagedObjectReference) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = io.WriteString(w, fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" `+
		`xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
		`xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
		`<soapenv:Body><ReconfigVM_TaskResponse xmlns="urn:vim25">`+
		`<returnval type="Task">%s</returnval>`+
		`</ReconfigVM_TaskResponse></soapenv:Body></soapenv:Envelope>`, task.Value))
}
