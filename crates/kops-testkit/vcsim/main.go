// Command vcsim-kops serves govmomi's vCenter simulator for kops-rs' tests:
// the VPX model (datacenter DC0, cluster DC0_C0 with three hosts, datastore
// LocalDS_0, the standard network "VM Network", the distributed switch DVS0
// with the port groups DC0_DVPG0 (the model VMs' and the template's NIC)
// and DC0_DVPG1, and its uplink port group DVS0-DVUplinks-<n>) plus a
// template VM, "kops-template", with one snapshot (so clones can be linked
// clones).
//
// With -vsan, LocalDS_0 is a vSAN datastore: its top-level directories are
// namespaces made by DatastoreNamespaceManager, as on vSAN (vsan.go).
//
// First Class Disks attach to VMs and detach by their id
// (AttachDisk_Task, DetachDisk_Task), grow (ExtendDisk_Task) and take
// keepAfterDeleteVm later (SetVStorageObjectControlFlags), as on vCenter
// (first_class_disks.go). A destroyed VM's disks go with it, wherever
// their files are, except First Class Disks kept after a VM's deletion
// (vm_destroy.go).
//
// VMs carry config.changeVersion, and a reconfiguration naming a stale one
// fails with ConcurrentAccess, as on vCenter (change_version.go).
//
// The uplink port group is marked as vCenter marks one (the switch's
// config.uplinkPortgroup, the port group's config.uplink and its
// SYSTEM/DVS.UPLINKPG tag); govmomi 0.24's simulator makes it without them.
//
// It listens on 127.0.0.1 (the port from -port, or a free one), over plain
// HTTP, or over HTTPS with the certificate and key given by -tls-cert and
// -tls-key (PEM files; a vCenter's certificate the client does not trust),
// accepts only the user and password given by -user/-password, prints
// "URL <url>" on stdout once ready and serves until killed.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: a free one)")
	user := flag.String("user", "kops", "the only user name accepted")
	password := flag.String("password", "kops-test", "its password")
	certFile := flag.String("tls-cert", "", "serve HTTPS with this certificate (PEM; with -tls-key)")
	keyFile := flag.String("tls-key", "", "the certificate's private key (PEM)")
	vsan := flag.Bool("vsan", false, "make the datastore a vSAN datastore, with vSAN's namespaces (vsan.go)")
	flag.Parse()

	model := simulator.VPX()
	model.Portgroup = 2
	if err := model.Create(); err != nil {
		log.Fatalf("creating the model: %v", err)
	}
	markUplinks()
	if *vsan {
		makeVsan()
	}
	versions := &changeVersions{}
	versions.stampAll()
	model.Service.Listen = &url.URL{
		Host: fmt.Sprintf("127.0.0.1:%d", *port),
		User: url.UserPassword(*user, *password),
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			log.Fatalf("loading the TLS certificate: %v", err)
		}
		model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	server := model.Service.NewServer()
	// Before the first request: reconfigurations go through the change
	// version check (change_version.go).
	server.Config.Handler = versions.wrap(server.Config.Handler)
	if *vsan {
		server.Config.Handler = refuseTopLevel(server.Config.Handler)
	}
	// First Class Disks attach and detach as reconfigurations, through the
	// change version check (first_class_disks.go).
	server.Config.Handler = firstClassDisks(server.Config.Handler)
	// A destroyed VM's disks go with it unless kept, as in vCenter
	// (vm_destroy.go).
	server.Config.Handler = destroyWithDisks(server.Config.Handler)

	if err := addTemplate(server.URL); err != nil {
		log.Fatalf("adding the template: %v", err)
	}

	public := *server.URL
	public.User = nil
	fmt.Printf("URL %s\n", public.String())
	os.Stdout.Sync()
	select {}
}

// addTemplate clones DC0_H0_VM0 into kops-template, snapshots it and marks
// it as a template.
func addTemplate(u *url.URL) error {
	ctx := context.Background()
	client, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return err
	}
	defer client.Logout(ctx)
	finder := find.NewFinder(client.Client, true)
	dc, err := finder.Datacenter(ctx, "DC0")
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)
	source, err := finder.VirtualMachine(ctx, "DC0_H0_VM0")
	if err != nil {
		return err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	pool, err := finder.ResourcePool(ctx, "/DC0/host/DC0_C0/Resources")
	if err != nil {
		return err
	}
	poolRef := pool.Reference()
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
		PowerOn:  false,
	}
	task, err := source.Clone(ctx, folders.VmFolder, "kops-template", spec)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		return err
	}
	template := object.NewVirtualMachine(client.Client, info.Result.(types.ManagedObjectReference))
	snapshot, err := template.CreateSnapshot(ctx, "base", "for linked clones", false, false)
	if err != nil {
		return err
	}
	if _, err := snapshot.WaitForResult(ctx, nil); err != nil {
		return err
	}
	return template.MarkAsTemplate(ctx)
}

// markUplinks marks each distributed switch's uplink port group (the one
// the simulator names <switch>-DVUplinks-<n>) the way vCenter reports it.
func markUplinks() {
	for _, entity := range simulator.Map.All("DistributedVirtualSwitch") {
		dvs := entity.(*simulator.DistributedVirtualSwitch)
		var uplinks []types.ManagedObjectReference
		for _, ref := range dvs.Portgroup {
			pg, ok := simulator.Map.Get(ref).(*simulator.DistributedVirtualPortgroup)
			if !ok || !strings.HasPrefix(pg.Name, dvs.Name+"-DVUplinks") {
				continue
			}
			pg.Config.Uplink = types.NewBool(true)
			pg.Tag = append(pg.Tag, types.Tag{Key: "SYSTEM/DVS.UPLINKPG"})
			uplinks = append(uplinks, ref)
		}
		dvs.Config.GetDVSConfigInfo().UplinkPortgroup = uplinks
	}
}
