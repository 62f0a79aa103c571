# Reads a VM's guestinfo the way cloud-init's VMware data source does on
# first boot (its VMX_GUESTINFO environment transport: the same values and
# encodings as the guestinfo.* keys), then renders the network config with
# cloud-init's netplan and systemd-networkd renderers. Prints JSON.
import json
import sys
import tempfile
import types

# netifaces (a C extension) serves only the data source's host-info
# report, which this does not call.
sys.modules.setdefault("netifaces", types.ModuleType("netifaces"))

from cloudinit import distros, helpers  # noqa: E402
from cloudinit.net import netplan, network_state, networkd  # noqa: E402
from cloudinit.sources import DataSourceVMware  # noqa: E402

tmp = tempfile.mkdtemp()
paths = helpers.Paths({"cloud_dir": tmp, "run_dir": tmp})
distro = distros.fetch("ubuntu")("ubuntu", {}, paths)
source = DataSourceVMware.DataSourceVMware(sys_cfg={}, distro=distro, paths=paths)
if not source._get_data():
    sys.exit("cloud-init found no VMware guestinfo")
out = {
    "instance_id": source.metadata.get("instance-id"),
    "hostname": source.metadata.get("local-hostname"),
    "user_data": source.userdata_raw.decode() if isinstance(source.userdata_raw, bytes) else source.userdata_raw,
    "network": None,
}
if "network" in source.metadata:
    state = network_state.parse_net_config_data(source.network_config)
    out["network"] = {
        "netplan": netplan.Renderer({"postcmds": False})._render_content(state),
        "networkd": networkd.Renderer()._render_content(state),
    }
print(json.dumps(out))
