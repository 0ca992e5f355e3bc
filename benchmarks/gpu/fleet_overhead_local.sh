#!/bin/bash
# The fleet driver's fixed overhead, one code against another, alternating, on a one-node loopback Ray
# cluster of this host. Runs itself inside network + PID namespaces of its own (only loopback exists there; Ray is
# never started on a real interface). Each run: `fleet join --head` with that code, `fleet run BUNDLE` timed (each
# output line stamped with the seconds since the command started: before the first progress line, between, after
# the last), `ray stop`; then `infer-compare run BUNDLE` (the local route) with the same code and flags.
# Usage: benchmarks/gpu/fleet_overhead_local.sh OUT BUNDLE ROUNDS NAME=CODE_DIR...   (OUT: absolute; PYTHON: the interpreter)
# Into OUT/walls.txt one line per run: name, code, route, rc, wall s, first/last progress line s.
set -u
O=${1:?usage}; B=${2:?usage}; N=${3:?usage}; shift 3
mkdir -p "$O"
PY=${PYTHON:-python3}
if [ "${IN_NS:-}" != 1 ]; then
    exec unshare -n -p -f --mount-proc env IN_NS=1 bash "$0" "$O" "$B" "$N" "$@"
fi
ip link set lo up 2>/dev/null || "$PY" "$(dirname "$0")/../../shared/tools/lo-up" >/dev/null || exit 97
[ "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')" = "lo" ] || { echo "not a loopback-only namespace" >&2; exit 98; }
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$O/token RAY_TMPDIR=/tmp/rfo PYTHONUNBUFFERED=1
FLAGS=${FLAGS:---backends onnxruntime --device cpu --threads 1 -b 1 --warmup 1 --min-iters 5 --min-time 0.05 --target-ci 0}
stamped() {  # FILE: stdin into FILE, each line prefixed by the seconds since this started
    "$PY" -u -c 'import sys, time
t0 = time.time()
with open(sys.argv[1], "w") as f:
    for line in sys.stdin:
        f.write(f"{time.time() - t0:8.2f} {line}")
    f.write(f"{time.time() - t0:8.2f} (end of output)\n")' "$1"
}
one() {  # NAME CODE ROUTE
    local name=$1 code=$2 route=$3 t0 t1 rc
    t0=$(date +%s.%N)
    if [ "$route" = fleet ]; then
        (cd "$code" && PYTHONPATH=$code "$PY" -m infer_compare fleet run "$B" --address 127.0.0.1:6379 \
            -o "$O/$name" $FLAGS) 2>&1 | stamped "$O/$name.txt"
    else
        (cd "$code" && PYTHONPATH=$code "$PY" -m infer_compare run "$B" -o "$O/$name" $FLAGS) 2>&1 \
            | stamped "$O/$name.txt"
    fi
    rc=${PIPESTATUS[0]}; t1=$(date +%s.%N)
    local first last
    first=$(grep -m1 -E '\] .*: submitted' "$O/$name.txt" | awk '{print $1}')
    last=$(grep -E '\] .*: (done|node )' "$O/$name.txt" | tail -1 | awk '{print $1}')
    echo "$name code=$code route=$route rc=$rc wall_s=$("$PY" -c "print(round($t1 - $t0, 2))") first_s=${first:--} last_s=${last:--}" \
        | tee -a "$O/walls.txt"
}
for r in $(seq "$N"); do
    for spec in "$@"; do
        name=${spec%%=*}; code=${spec#*=}
        (cd "$code" && PYTHONPATH=$code "$PY" -m infer_compare fleet join --head --name n1 --ip 127.0.0.1 \
            > "$O/$name-$r-join.txt" 2>&1) || { echo "join failed: $name $r" | tee -a "$O/walls.txt"; continue; }
        one "$name-$r-fleet" "$code" fleet
        "$PY" -m ray.scripts.scripts stop --force > /dev/null 2>&1
        one "$name-$r-local" "$code" local
    done
done
