#!/usr/bin/env python3
"""Wall time of `kops version` and `kops get clusters` on a file:// store
holding 50 clusters. Prints numbers; asserts nothing.

usage: bench/cli_latency.py [KOPS_BINARY] [RUNS]
(default binary: target/release/kops if built, else target/debug/kops)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLUSTER = """apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: c{i}.example.com
spec:
  cloudProvider: aws
  etcdClusters:
  - etcdMembers: [{{instanceGroup: control-plane-us-east-1a, name: a}}]
    name: main
  - etcdMembers: [{{instanceGroup: control-plane-us-east-1a, name: a}}]
    name: events
  kubernetesVersion: v1.34.1
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  subnets:
  - {{cidr: 172.20.32.0/19, name: us-east-1a, type: Public, zone: us-east-1a}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {{kops.k8s.io/cluster: c{i}.example.com}}
  name: control-plane-us-east-1a
spec: {{machineType: t3.medium, maxSize: 1, minSize: 1, role: Master, subnets: [us-east-1a]}}
"""


def timed(cmd, runs):
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append((time.perf_counter() - t) * 1000)
    return samples


def report(name, samples):
    samples.sort()
    print(f"{name:34s} median {statistics.median(samples):6.2f} ms   "
          f"min {samples[0]:6.2f} ms   p90 {samples[int(len(samples) * 0.9) - 1]:6.2f} ms   (n={len(samples)})")


def main():
    kops = sys.argv[1] if len(sys.argv) > 1 else None
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if kops is None:
        release = os.path.join(ROOT, "target/release/kops")
        kops = release if os.path.exists(release) else os.path.join(ROOT, "target/debug/kops")
    print(f"binary: {kops}")
    with tempfile.TemporaryDirectory() as tmp:
        state = f"file://{tmp}/state"
        for i in range(50):
            path = os.path.join(tmp, f"c{i}.yaml")
            with open(path, "w") as f:
                f.write(CLUSTER.format(i=i))
            subprocess.run([kops, "create", "-f", path, "--state", state], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run([kops, "get", "clusters", "--state", state], check=True,
                             capture_output=True, text=True).stdout
        print(f"clusters in store: {len(out.strip().splitlines()) - 1}")
        report("kops version", timed([kops, "version"], runs))
        report("kops get clusters (50 clusters)", timed([kops, "get", "clusters", "--state", state], runs))
        report("kops get clusters -o yaml", timed([kops, "get", "clusters", "-o", "yaml", "--state", state], runs))


if __name__ == "__main__":
    main()
