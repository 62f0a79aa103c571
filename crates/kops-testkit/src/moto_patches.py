# Fixes for moto_server bugs that make real AWS behaviour impossible to
# test, applied by kops-testkit before moto's own `main`. Each patch only
# corrects what moto answers or keeps wrongly; nothing here imitates AWS.
import os
import runpy
import sys

from moto.core.types import Base64EncodedString
from moto.ec2.models import launch_templates, subnets
from moto.ec2.utils import parse_user_data

# 1. CreateLaunchTemplateVersion keeps the user data as sent (base64 text)
#    where CreateLaunchTemplate decodes it; every launch from such a version
#    then fails inside moto, so an autoscaling group could never replace an
#    instance after a spec change.
_create_version = launch_templates.LaunchTemplate.create_version


def _create_version_decoded(self, data, description):
    user_data = data.get("UserData") if isinstance(data, dict) else None
    if user_data is not None and not isinstance(user_data, Base64EncodedString):
        data["UserData"] = parse_user_data(user_data)
    return _create_version(self, data, description)


launch_templates.LaunchTemplate.create_version = _create_version_decoded

# 2. A subnet's IPv6 block association reports its state as the text of a
#    Python dict (`{'State': 'associated'}`) instead of `associated`.
def _ipv6_associations(self):
    return [
        {
            "ipv6CidrBlock": a["ipv6CidrBlock"],
            "associationId": a["associationId"],
            "ipv6CidrBlockState": {"state": a["ipv6CidrBlockState"]["State"]},
        }
        for a in self.ipv6_cidr_block_associations.values()
        if a["ipv6CidrBlockState"]["State"] == "associated"
    ]


subnets.Subnet.ipv6_cidr_block_association_set = property(_ipv6_associations)

# 3. An IPv6-native subnet counts its free addresses from its /64
#    (2^64 - 5), which does not fit the API's 32-bit integer: no SDK can
#    read DescribeSubnets any more. AWS reports IPv4 addresses only (0).
_available = subnets.Subnet.available_ip_address_count


def _available_ipv4(self):
    if not self.cidr_block:
        return 0
    return _available.fget(self)


subnets.Subnet.available_ip_address_count = property(_available_ipv4)

# 4. An instance in an IPv6-native subnet gets an IPv6 private address, and
#    moto's DNS-name helper, which splits on dots, then fails every launch.
from moto.ec2 import utils as ec2_utils  # noqa: E402
from moto.ec2.models import elastic_network_interfaces  # noqa: E402

_dns_from_ip = ec2_utils.generate_dns_from_ip


def _dns_from_any_ip(ip, dns_type="internal"):
    if ":" in str(ip):
        return "ip6-" + str(ip).split("/")[0].replace(":", "-") + ".ec2." + dns_type
    return _dns_from_ip(ip, dns_type)


ec2_utils.generate_dns_from_ip = _dns_from_any_ip
elastic_network_interfaces.generate_dns_from_ip = _dns_from_any_ip

# 5. ModifySubnetAttribute ignores EnableDns64 and DescribeSubnets never
#    reports it, so an IPv6-native subnet (DNS64 on, as AWS keeps it) reads
#    back as DNS64 off on every run.
from moto.ec2.responses import subnets as subnet_responses  # noqa: E402

_modify_subnet = subnet_responses.Subnets.modify_subnet_attribute


def _modify_subnet_dns64(self):
    value = self._get_param("EnableDns64.Value")
    if value is not None:
        subnet = self.ec2_backend.get_subnet(self._get_param("SubnetId"))
        subnet.enable_dns64 = str(value).lower() == "true"
    return _modify_subnet(self)


subnet_responses.Subnets.modify_subnet_attribute = _modify_subnet_dns64
if not hasattr(subnets.Subnet, "enable_dns64"):
    subnets.Subnet.enable_dns64 = False

# 6. AssociateDhcpOptions moves a VPC to another option set but leaves the
#    set it used marked as in use, so DeleteDhcpOptions on the old set
#    fails with DependencyViolation for ever; AWS lets a set no VPC uses go.
from moto.ec2.models import dhcp_options as dhcp_models  # noqa: E402

_associate_dhcp = dhcp_models.DHCPOptionsSetBackend.associate_dhcp_options


def _associate_dhcp_releasing_old(self, dhcp_options, vpc):
    previous = getattr(vpc, "dhcp_options", None)
    if previous is not None and previous is not dhcp_options and previous.vpc is vpc:
        previous.vpc = None
    return _associate_dhcp(self, dhcp_options, vpc)


dhcp_models.DHCPOptionsSetBackend.associate_dhcp_options = _associate_dhcp_releasing_old

# N. An autoscaling group being deleted can launch an instance that outlives
#    it: DeleteAutoScalingGroup scales the group to 0 and then drops it,
#    while a TerminateInstances answered on another thread in between makes
#    the still-listed group replace the terminated instance, and the new
#    instance is in no group any more. On AWS a group being deleted
#    launches nothing. One lock keeps the two from interleaving.
import threading  # noqa: E402

from moto.autoscaling import models as asg_models  # noqa: E402

_asg_lock = threading.RLock()


def _under_asg_lock(method):
    def locked(self, *args, **kwargs):
        with _asg_lock:
            return method(self, *args, **kwargs)

    return locked


for _name in ("delete_auto_scaling_group", "notify_terminate_instances"):
    setattr(
        asg_models.AutoScalingBackend,
        _name,
        _under_asg_lock(getattr(asg_models.AutoScalingBackend, _name)),
    )

# The shared tree's patched moto (more fixes, e.g. DescribeLaunchTemplates
# paged with NextToken where plain moto stops at 15) runs as moto's entry
# point when kops-testkit found it; the fixes above stay applied under it.
_shared_moto = os.environ.get("KOPS_TESTKIT_MOTO_PATCHED")
if _shared_moto:
    sys.argv[0] = _shared_moto
    runpy.run_path(_shared_moto, run_name="__main__")
    sys.exit(0)

from moto.server import main  # noqa: E402

sys.exit(main())
