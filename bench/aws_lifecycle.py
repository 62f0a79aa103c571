#!/usr/bin/env python3
"""AWS API calls and wall time of `update cluster --yes` (first apply), a
no-op `update cluster`, and `delete cluster --yes`, against a local
moto_server, for kops' minimal-aws case and for a cluster of 20 instance
groups over 3 zones; then the first apply again with 100 ms added to every
AWS call (a small proxy in front of moto), against the longest dependency
chain x 100 ms, the floor for any amount of parallelism.
Prints numbers; asserts nothing.

usage: bench/aws_lifecycle.py [KOPS_BINARY]
"""
import http.client
import http.server
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b bench@kops-rs\n"
# kops' default Ubuntu image is not among moto's AMIs.
IMAGE = "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721"
LATENCY = 0.100


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_moto():
    moto = os.environ.get("MOTO_SERVER") or os.path.join(ROOT, ".venv/bin/moto_server")
    port = free_port()
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=open(os.environ.get("MOTO_LOG", os.devnull), "w"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return proc, port
        except Exception:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("moto_server did not start")


def start_latency_proxy(target_port):
    """A threaded HTTP proxy that waits LATENCY before forwarding each request."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(LATENCY)
            conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def create_zone(port, name):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/2013-04-01/hostedzone", method="POST",
        data=(f'<CreateHostedZoneRequest xmlns="https://route53.amazonaws.com/doc/2013-04-01/">'
              f"<Name>{name}.</Name><CallerReference>bench-{name}</CallerReference>"
              f"</CreateHostedZoneRequest>").encode(),
        headers={"Content-Type": "application/xml",
                 "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/route53/aws4_request, "
                                  "SignedHeaders=host, Signature=0"})
    urllib.request.urlopen(req, timeout=120).read()


def run(kops, args, env):
    t = time.perf_counter()
    p = subprocess.run([kops, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if p.returncode not in (0, 2):
        last = [l for l in p.stderr.splitlines() if l.strip()][-1:] or ["?"]
        print(f"  kops {' '.join(args[:3])} failed: {last[0][:300]}")
        return elapsed, -1, -1
    calls = re.search(r"(\d+) AWS calls", p.stderr)
    chain = re.search(r"longest dependency chain (\d+)", p.stderr)
    return elapsed, int(calls.group(1)) if calls else -1, int(chain.group(1)) if chain else -1


def minimal_aws_manifest():
    path = os.path.join(SHARED, "conformance/kops/update_cluster/minimal-aws/in-v1alpha2.yaml")
    if not os.path.exists(path):
        return None
    out = []
    for line in open(path).read().replace("us-test-1", "us-east-1").splitlines():
        if line.strip().startswith("maxInstanceLifetime:"):
            continue  # moto never reports it back
        if line.strip().startswith("image:"):
            line = line.split("image:")[0] + f'image: "{IMAGE}"'
        out.append(line)
    return "\n".join(out) + "\n"


def twenty_groups_manifest(name):
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    members = ", ".join(f"{{name: {z[-1]}, instanceGroup: control-plane-{z}}}" for z in zones)
    subnets = "\n".join(
        f"  - {{name: {z}, zone: {z}, cidr: 172.20.{32 * (i + 1)}.0/19, type: Private}}\n"
        f"  - {{name: utility-{z}, zone: {z}, cidr: 172.20.{i * 4}.0/22, type: Utility}}"
        for i, z in enumerate(zones))
    docs = [f"""apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.32.0
  api: {{loadBalancer: {{type: Public, class: Network}}}}
  kubernetesApiAccess: [0.0.0.0/0]
  sshAccess: [0.0.0.0/0]
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  topology: {{dns: {{type: Public}}}}
  etcdClusters:
  - {{name: main, etcdMembers: [{members}]}}
  - {{name: events, etcdMembers: [{members}]}}
  subnets:
{subnets}
"""]
    for z in zones:
        docs.append(f"""apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-{z}, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Master, image: "{IMAGE}", machineType: m6i.large, minSize: 1, maxSize: 1, subnets: [{z}]}}
""")
    for i in range(17):
        z = zones[i % 3]
        docs.append(f"""apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes-{i:02d}, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Node, image: "{IMAGE}", machineType: t3.large, minSize: 1, maxSize: 3, subnets: [{z}]}}
""")
    return "---\n".join(docs)


def main():
    kops = sys.argv[1] if len(sys.argv) > 1 else None
    if kops is None:
        release = os.path.join(ROOT, "target/release/kops")
        kops = release if os.path.exists(release) else os.path.join(ROOT, "target/debug/kops")
    proc, moto_port = start_moto()
    proxy, proxy_port = start_latency_proxy(moto_port)
    try:
        create_zone(moto_port, "example.com")
        base_env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                        AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
        direct = dict(base_env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{moto_port}")
        slow = dict(base_env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy_port}")
        print(f"binary: {kops}\nmoto:   127.0.0.1:{moto_port} (latency proxy on :{proxy_port}, +{LATENCY * 1000:.0f} ms/call)\n")
        cases = []
        minimal = minimal_aws_manifest()
        if minimal is None:
            print("skipping minimal-aws: ../shared not found")
        else:
            cases.append(("minimal-aws.example.com", minimal))
        cases.append(("twenty.example.com", twenty_groups_manifest("twenty.example.com")))
        print(f"{'cluster':31s} {'step':30s} {'calls':>6s} {'seconds':>8s}  note")
        for base_cluster, base_manifest in cases:
            for label, env in [("", direct), (" (+100 ms/call)", slow)]:
                # A fresh name per pass: nothing of the previous pass can be
                # found and reused.
                cluster = ("slow-" if label else "") + base_cluster
                manifest = base_manifest.replace(base_cluster, cluster)
                with tempfile.TemporaryDirectory() as tmp:
                    state = f"file://{tmp}/state"
                    spec = os.path.join(tmp, "cluster.yaml")
                    key = os.path.join(tmp, "id.pub")
                    open(spec, "w").write(manifest)
                    open(key, "w").write(KEY)
                    subprocess.run([kops, "create", "-f", spec, "--state", state], env=env, check=True,
                                   capture_output=True)
                    subprocess.run([kops, "create", "sshpublickey", cluster, "-i", key, "--state", state],
                                   env=env, check=True, capture_output=True)
                    steps = [("first apply", ["update", "cluster", cluster, "--yes"]),
                             ("no-op update", ["update", "cluster", cluster]),
                             ("delete", ["delete", "cluster", cluster, "--yes", "--interval", "200ms"])]
                    for step, args in steps:
                        seconds, calls, chain = run(kops, [*args, "--state", state], env)
                        note = ""
                        if label and step == "first apply":
                            floor = chain * LATENCY
                            note = (f"longest chain {chain} x 100 ms = {floor:.1f} s; "
                                    f"serial would be {calls * LATENCY:.1f} s")
                        print(f"{cluster:31s} {step + label:30s} {calls:6d} {seconds:8.2f}  {note}")
    finally:
        proxy.shutdown()
        proc.kill()


if __name__ == "__main__":
    main()
