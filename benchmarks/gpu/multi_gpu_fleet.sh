#!/bin/bash
# On a two-GPU machine: the bundle of `export --model resnet50` run locally (both GPUs at once)
# and through `fleet run` on a one-node Ray cluster of this host inside a network namespace of its own (loopback
# only, token authentication on), each step's wall time in OUT/walls.txt.
# Usage (repository root, ONNX Runtime GPU and Ray 2.60 under /tmp/site; the lent machines' python3 has no pydantic:
# carry its wheels, pydantic + pydantic-core (cp312) + annotated-types + typing-inspection, into /tmp/site too):
#   benchmarks/gpu/multi_gpu_fleet.sh OUT STEP...       (OUT: an absolute path)
# Steps, run in the order given:
#   export        export --model resnet50 to $BUNDLE (default /tmp/bundle; cache /tmp/c2)
#   local-cold    infer-compare run BUNDLE once to fill the caches (torch.compile's) that later steps find warm
#   local NAME    infer-compare run BUNDLE -o OUT/NAME
#   fleet NAME    fleet join --head, fleet run BUNDLE -o OUT/NAME, ray stop; every 2 s the niceness, core and
#                 CPU use of this host's Python processes into OUT/NAME-ps.txt
#   seq NAME      infer-compare --model resnet50 --gpus sequential (every row alone, each GPU in turn)
# SAMPLE_PS=0: no `ps` sampling during the fleet steps (it runs beside them only, not beside the local steps).
# CODE=DIR runs another checkout's infer_compare (e.g. main's, for the fleet before a change); default this one.
# EXPORT_FLAGS and RUN_FLAGS narrow the export and the runs (e.g. --formats pytorch,onnx / --backends ...).
set -u
O=${1:?usage: multi_gpu_fleet.sh OUT STEP...}; shift; mkdir -p "$O"
export PYTHONUNBUFFERED=1
IC="python3 -m infer_compare"
B=${BUNDLE:-/tmp/bundle}  # the bundle the steps export to and run
timed() {  # NAME LIMIT_S command...
    local name=$1 limit=$2; shift 2
    local t0; t0=$(date +%s.%N)
    (cd "${CODE:-$PWD}" && PYTHONPATH="${CODE:-$PWD}:/tmp/site" timeout "$limit" "$@") > "$O/$name.txt" 2>&1
    local rc=$? t1; t1=$(date +%s.%N)
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))") code=${CODE:-$PWD} $*" | tee -a "$O/walls.txt"
}
# each output line of a fleet step prefixed by the seconds since the command started (the driver's time before its
# first progress line and after its last)
STAMP='import sys, time
t0 = time.time()
with open(sys.argv[1], "w") as f:
    for line in sys.stdin:
        f.write(f"{time.time() - t0:8.2f} {line}")
    f.write(f"{time.time() - t0:8.2f} (end of output)\n")'
export STAMP
sample_ps() {  # OUTFILE: until killed
    while :; do
        echo "--- $(date +%s.%N)"
        ps -eLo pid,tid,ppid,ni,psr,pcpu,comm,args --sort=-pcpu | grep -E "python|ray|raylet|gcs_server" \
            | grep -v grep | head -40 | cut -c1-200
        sleep 2
    done > "$1" 2>&1
}
fleet() {  # NAME
    local name=$1 code=${CODE:-$PWD}
    cat > /tmp/fleet-ns.sh <<NSEOF
set -u
cd "$code"; export PYTHONPATH="$code:/tmp/site" PYTHONUNBUFFERED=1
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
$IC fleet join --head --name gpu2 --ip 127.0.0.1 > "$O/$name-join.txt" 2>&1; echo "$name-join rc=\$?" >> "$O/walls.txt"
t1=\$(date +%s.%N)
python3 -c "
import socket, struct
for ln in open('/proc/net/tcp').readlines()[1:]:
    f = ln.split()
    if f[3] == '0A':
        a, p = f[1].split(':')
        print(socket.inet_ntoa(struct.pack('<I', int(a, 16))), int(p, 16))
" | sort -u > "$O/$name-listening.txt"
timeout 240 $IC fleet run $B --address 127.0.0.1:6379 -o "$O/$name" ${RUN_FLAGS:-} 2>&1 \\
    | python3 -u -c "\$STAMP" "$O/$name.txt"
rc=\${PIPESTATUS[0]}; t2=\$(date +%s.%N)
echo "$name rc=\$rc wall_s=\$(python3 -c "print(round(\$t2 - \$t1, 1))") join_s=\$(python3 -c "print(round(\$t1 - \$t0, 1))") code=$code" >> "$O/walls.txt"
python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1
NSEOF
    local sp=""; [ "${SAMPLE_PS:-1}" = 1 ] && { sample_ps "$O/$name-ps.txt" & sp=$!; }
    unshare -n bash /tmp/fleet-ns.sh
    [ -n "$sp" ] && { kill "$sp"; wait "$sp" 2>/dev/null; }
    tail -1 "$O/walls.txt"
}
[ -s "$O/gpus.txt" ] || {
    nvidia-smi -L > "$O/gpus.txt"; nproc >> "$O/gpus.txt"; lscpu | grep -i "model name" >> "$O/gpus.txt"
    PYTHONPATH=/tmp/site python3 -c "import onnxruntime as o, torch, ray; print('onnxruntime', o.__version__, o.get_available_providers(), 'torch', torch.__version__, 'ray', ray.__version__)" >> "$O/gpus.txt" 2>&1
}
while [ $# -gt 0 ]; do
    step=$1; shift
    case $step in
        export) timed export 240 $IC export --model resnet50 -o $B --cache-dir /tmp/c2 ${EXPORT_FLAGS:-} ;;
        local-cold) timed local-cold 300 $IC run $B -o "$O/local-cold" --cache-dir /tmp/c2 ${RUN_FLAGS:-} ;;
        local) timed "$1" 200 $IC run $B -o "$O/$1" --cache-dir /tmp/c2 ${RUN_FLAGS:-}; shift ;;
        fleet) fleet "$1"; shift ;;
        seq) timed "$1" "${SEQ_LIMIT:-300}" $IC --model resnet50 --cache-dir /tmp/c2 --gpus sequential -o "$O/$1"; shift ;;
        *) echo "unknown step $step" | tee -a "$O/walls.txt" ;;
    esac
done
exit 0
