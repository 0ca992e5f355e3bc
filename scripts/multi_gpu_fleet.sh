#!/bin/bash
# Issue 37, on the lent two-GPU machine, after scripts/multi_gpu_local.sh (its warm cache /tmp/c2): the bundle of
# `export --model resnet50` run locally (both GPUs at once) and through `fleet run` on a one-node Ray cluster of
# this host inside a network namespace of its own (loopback only, token authentication on); then, if
# SEQ_LIMIT is set, the comparison with --gpus sequential (every row measured alone, on each GPU in turn).
# EXPORT_FLAGS and RUN_FLAGS narrow the export and both runs (e.g. --formats pytorch,onnx / --backends ...).
# Usage (repository root, ONNX Runtime GPU and Ray 2.60 under /tmp/site): scripts/multi_gpu_fleet.sh OUT
set -u
O=${1:?usage: multi_gpu_fleet.sh OUT}; mkdir -p "$O"
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timed() {  # NAME LIMIT_S command...
    local name=$1 limit=$2; shift 2
    local t0; t0=$(date +%s.%N)
    timeout "$limit" "$@" > "$O/$name.txt" 2>&1
    local rc=$? t1; t1=$(date +%s.%N)
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))") $*" | tee -a "$O/walls.txt"
}
IC="python3 -m infer_compare"
timed export 200 $IC export --model resnet50 -o /tmp/bundle --cache-dir /tmp/c2 ${EXPORT_FLAGS:-}
# a fresh machine: one run first fills the cache (torch.compile's) that the timed runs below find warm
[ -n "${PREWARM:-}" ] && timed bundle-prewarm 240 $IC run /tmp/bundle -o "$O/bundle-prewarm" --cache-dir /tmp/c2
timed bundle-local 150 $IC run /tmp/bundle -o "$O/bundle-local" --cache-dir /tmp/c2 ${RUN_FLAGS:-}
cat > /tmp/fleet-ns.sh <<NSEOF
set -u
python3 - <<'PY' || exit 97
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0))[:18])[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
names = [ln.split(":")[0].strip() for ln in open("/proc/net/dev").readlines()[2:]]
assert names == ["lo"], names  # never start Ray on a real interface
PY
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/tmp/fleet-token RAY_TMPDIR=/tmp/rayx INFER_COMPARE_CACHE=/tmp/c2
t0=\$(date +%s.%N)
$IC fleet join --head --name gpu2 --ip 127.0.0.1 > "$O/fleet-join.txt" 2>&1; echo "join rc=\$?" >> "$O/walls.txt"
t1=\$(date +%s.%N)
python3 -c "
import socket, struct
for ln in open('/proc/net/tcp').readlines()[1:]:
    f = ln.split()
    if f[3] == '0A':
        a, p = f[1].split(':')
        print(socket.inet_ntoa(struct.pack('<I', int(a, 16))), int(p, 16))
" | sort -u > "$O/listening.txt"
timeout 200 $IC fleet run /tmp/bundle --address 127.0.0.1:6379 -o "$O/fleet" ${RUN_FLAGS:-} > "$O/fleet-run.txt" 2>&1
rc=\$?; t2=\$(date +%s.%N)
echo "fleet-run rc=\$rc wall_s=\$(python3 -c "print(round(\$t2 - \$t1, 1))") join_s=\$(python3 -c "print(round(\$t1 - \$t0, 1))")" >> "$O/walls.txt"
python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1
NSEOF
unshare -n bash /tmp/fleet-ns.sh
[ -n "${AFTER:-}" ] && timed bundle-local-after 150 $IC run /tmp/bundle -o "$O/bundle-local-after" --cache-dir /tmp/c2
tail -3 "$O/walls.txt"
if [ -n "${SEQ_LIMIT:-}" ]; then
    timed two-gpus-sequential "$SEQ_LIMIT" $IC --model resnet50 --cache-dir /tmp/c2 --gpus sequential \
        -o "$O/two-gpus-sequential"
fi
exit 0
