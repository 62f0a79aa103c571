#!/usr/bin/env bash
# kops-rs and the real kops, side by side on the same moto behind the
# call-logging proxy (../shared/tools/side-by-side.sh): calls and seconds
# for apply, the no-op update and delete, in the configurations of issue 17:
#   1 zone, no latency; 3 zones at 100 ms per call; 100 instance groups.
# Needs the reference kops (../shared/tools/gokops/build.sh, ~10 minutes on
# 2 cores; KOPS_GO overrides its path). Without it, says how to build it
# and exits 0. A benchmark prints numbers; it asserts nothing.
#   bench/side_by_side.sh [--harness-fixed] [KOPS_RS_BIN]   (default: a release build)
# --harness-fixed runs a copy of the shared tools with two corrections to
# the measuring harness, not to either binary, each of which charges a
# client for sending calls side by side:
#   - awsproxy.py listens with a backlog of 5 (http.server's default): a
#     burst of new connections overflows it, the kernel drops the SYNs and
#     each such call waits the 1 s SYN retransmission (TcpExtListenOverflows
#     counts them); the copy listens with a backlog of 128, as moto does.
#   - a fresh moto answers its first calls ~4x slower when they arrive
#     together (17 first listings: 1.2 s one after another, 4.1 s at once);
#     the copy makes one call per service directly to moto before each
#     binary runs, so both start on a warm moto (these calls are not logged).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shared=${SHARED_DIR:-../shared}
tool=$shared/tools/side-by-side.sh
go_kops=${KOPS_GO:-$HOME/.cache/kops-go/kops-go}
if [[ ! -x $tool ]]; then
  echo "side_by_side: $tool is not there; nothing to compare" >&2
  exit 0
fi
if [[ ! -x $go_kops ]]; then
  echo "side_by_side: no reference kops at $go_kops" >&2
  echo "  build it: KOPS_MIRROR=<git dir of kubernetes/kops> $shared/tools/gokops/build.sh" >&2
  exit 0
fi
fixed=0
if [[ ${1:-} == --harness-fixed ]]; then
  fixed=1
  shift
fi
bin=${1:-}
if [[ -z $bin ]]; then
  cargo build --release -p kops -p kops-nodeup >&2
  bin=$PWD/target/release/kops
fi
if [[ $fixed == 1 ]]; then
  copy=$(mktemp -d)
  trap 'rm -rf "$copy"' EXIT
  cp -r "$shared/tools/." "$copy/"
  chmod -R u+w "$copy"
  python3 - "$copy" <<'PY'
import sys
d = sys.argv[1]
p = f"{d}/awsproxy.py"
s = open(p).read()
anchor = "srv = http.server.ThreadingHTTPServer("
assert anchor in s, "awsproxy.py changed: no ThreadingHTTPServer"
open(p, "w").write(s.replace(anchor, "http.server.ThreadingHTTPServer.request_queue_size = 128\n" + anchor, 1))
p = f"{d}/side-by-side.sh"
s = open(p).read()
anchor = "  moto_up; local T; T=$(mktemp -d); local log=$T/calls.jsonl\n"
assert anchor in s, "side-by-side.sh changed: no moto_up line"
warm = """  "$PY" - "$MOTO_URL" <<'WARM'
import sys, boto3
kw = dict(endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
for service, call in [("sts", "get_caller_identity"), ("ec2", "describe_vpcs"), ("elbv2", "describe_load_balancers"),
                      ("autoscaling", "describe_auto_scaling_groups"), ("iam", "list_roles"), ("events", "list_rules"),
                      ("sqs", "list_queues")]:
    getattr(boto3.client(service, **kw), call)()
WARM
"""
open(p, "w").write(s.replace(anchor, anchor + warm, 1))
PY
  tool=$copy/side-by-side.sh
  echo "harness fixed: proxy backlog 128, moto warmed before each binary" >&2
fi
for args in "1 0 0" "3 0 100" "1 100 0"; do
  # shellcheck disable=SC2086
  KOPS_GO=$go_kops "$tool" "$bin" $args
done
