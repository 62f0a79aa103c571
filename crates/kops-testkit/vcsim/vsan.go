package main

// vSAN keeps each top-level directory of its datastore as an object of its
// own, a namespace. FileManager.MakeDirectory cannot make one: the call
// fails with CannotCreateFile ("Cannot complete file creation operation").
// DatastoreNamespaceManager.CreateDirectory makes it, under its object's
// UUID, with the display name given as the name clients use; inside a
// namespace, directories and files are made as on any datastore (vSphere
// API reference: DatastoreNamespaceManager; govc's `datastore.mkdir
// -namespace`). govmomi 0.24's simulator has neither vSAN nor a
// DatastoreNamespaceManager; with -vsan, the model's datastore is of type
// vsan and both behave so.

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// makeVsan turns every datastore of the model into a vSAN datastore and
// adds the namespace manager to the service content (MakeDirectory's
// refusal is refuseTopLevel, in front of the SOAP handler).
func makeVsan() {
	for _, entity := range simulator.Map.All("Datastore") {
		ds := entity.(*simulator.Datastore)
		simulator.Map.WithLock(ds, func() {
			ds.Summary.Type = string(types.HostFileSystemVolumeFileSystemTypeVsan)
		})
	}
	manager := &namespaceManager{}
	manager.Self = types.ManagedObjectReference{Type: "DatastoreNamespaceManager", Value: "DatastoreNamespaceManager"}
	simulator.Map.Put(manager)
	si := simulator.Map.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	ref := manager.Self
	si.Content.DatastoreNamespaceManager = &ref
}

// vsanDatastore is the vSAN datastore a datastore path (`[name] a/b`)
// names, with the path inside it; nil when the datastore is not vSAN.
func vsanDatastore(path string) (*simulator.Datastore, string) {
	var p objectPath
	if !p.parse(path) {
		return nil, ""
	}
	for _, entity := range simulator.Map.All("Datastore") {
		ds := entity.(*simulator.Datastore)
		if ds.Name == p.datastore && ds.Summary.Type == string(types.HostFileSystemVolumeFileSystemTypeVsan) {
			return ds, p.path
		}
	}
	return nil, ""
}

// objectPath is a datastore path split.
type objectPath struct {
	datastore string
	path      string
}

func (p *objectPath) parse(s string) bool {
	if !strings.HasPrefix(s, "[") {
		return false
	}
	end := strings.Index(s, "]")
	if end < 0 {
		return false
	}
	p.datastore = s[1:end]
	p.path = strings.TrimLeft(strings.TrimSpace(s[end+1:]), "/")
	return true
}

// refuseTopLevel answers FileManager.MakeDirectory as vSAN does: a
// directory is made only inside an existing namespace. (The simulator
// finds its FileManager by the service content's reference and type, so
// this sits in front of its SOAP handler rather than replacing it.)
func refuseTopLevel(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := callFor(w, r, next, "MakeDirectory")
		if body == nil {
			return
		}
		var req struct {
			Body struct {
				MakeDirectory *struct {
					Name string `xml:"name"`
				} `xml:"MakeDirectory"`
			} `xml:"Body"`
		}
		if xml.Unmarshal(body, &req) != nil || req.Body.MakeDirectory == nil {
			next.ServeHTTP(w, r)
			return
		}
		name := req.Body.MakeDirectory.Name
		ds, inside := vsanDatastore(name)
		if ds == nil {
			next.ServeHTTP(w, r)
			return
		}
		top := strings.SplitN(inside, "/", 2)[0]
		root := ds.Info.GetDatastoreInfo().Url
		if _, err := os.Stat(filepath.Join(root, top)); top != "" && err == nil {
			next.ServeHTTP(w, r)
			return
		}
		var file bytes.Buffer
		_ = xml.EscapeText(&file, []byte(name))
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+
			`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" `+
			`xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
			`xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`+
			`<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode>`+
			`<faultstring>Cannot complete file creation operation.</faultstring>`+
			`<detail><CannotCreateFileFault xmlns="urn:vim25" xsi:type="CannotCreateFile">`+
			`<file>`+file.String()+`</file></CannotCreateFileFault></detail>`+
			`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`)
	})
}

// namespaceManager is vCenter's DatastoreNamespaceManager.
type namespaceManager struct {
	mo.DatastoreNamespaceManager
}

// CreateDirectory makes a namespace of a vSAN datastore: a directory named
// by a new UUID, reached by its display name too, and answers its path.
func (m *namespaceManager) CreateDirectory(req *types.CreateDirectory) soap.HasFault {
	body := &methods.CreateDirectoryBody{}
	ds, ok := simulator.Map.Get(req.Datastore).(*simulator.Datastore)
	if !ok {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.Datastore})
		return body
	}
	if ds.Summary.Type != string(types.HostFileSystemVolumeFileSystemTypeVsan) {
		body.Fault_ = simulator.Fault("", &types.InvalidDatastore{Datastore: &req.Datastore, Name: ds.Name})
		return body
	}
	name := req.DisplayName
	if name == "" || strings.Contains(name, "/") {
		body.Fault_ = simulator.Fault("", &types.InvalidArgument{InvalidProperty: "displayName"})
		return body
	}
	root := ds.Info.GetDatastoreInfo().Url
	if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
		body.Fault_ = simulator.Fault("", &types.FileAlreadyExists{FileFault: types.FileFault{File: name}})
		return body
	}
	id := uuid.New().String()
	if err := os.Mkdir(filepath.Join(root, id), 0700); err != nil {
		body.Fault_ = simulator.Fault(err.Error(), &types.CannotCreateFile{FileFault: types.FileFault{File: name}})
		return body
	}
	if err := os.Symlink(id, filepath.Join(root, name)); err != nil {
		body.Fault_ = simulator.Fault(err.Error(), &types.CannotCreateFile{FileFault: types.FileFault{File: name}})
		return body
	}
	body.Res = &types.CreateDirectoryResponse{
		Returnval: "/vmfs/volumes/" + filepath.Base(root) + "/" + id,
	}
	return body
}
