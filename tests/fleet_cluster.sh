#!/bin/bash
# A loopback-only Ray cluster of two nodes, for tests/test_fleet_cluster.py. Runs as PID 1 of its
# own PID and network namespaces (unshare -n -p -f --mount-proc): only loopback exists, every address
# is 127.0.0.1, and every process started here dies with this script. Usage: fleet_cluster.sh BUNDLE OUT
set -u -m
B=$1; O=$2
ip link set lo up || exit 97
# only loopback may exist here: never start Ray on a real interface
[ "$(ip -o link show | awk -F': ' '{print $2}')" = "lo" ] || { echo "not a loopback-only namespace" >&2; exit 98; }
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$O/token RAY_TMPDIR=$O/r RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor
IC="$PYTHON -m infer_compare"
stop() { $PYTHON -m ray.scripts.scripts stop --force >/dev/null 2>&1; }
trap stop EXIT
LOOP="--backends onnxruntime --device cpu --threads 1 --warmup 1 --min-iters 5 --min-time 0.05 --target-ci 0"
$IC fleet join --head --name node-a --port 6379 > $O/join-a.log 2>&1; echo $? > $O/join-a.rc
$IC fleet join --address 127.0.0.1:6379 --name node-b --block > $O/join-b.log 2>&1 &
NODE_B=$!
# wait (30 s at most) until node-b has joined
$PYTHON - <<'PYEOF' > $O/wait.log 2>&1
import time, ray
ray.init(address="127.0.0.1:6379", logging_level="ERROR", log_to_driver=False)
t = time.time()
while time.time() - t < 30 and not any("ic-node:node-b" in (n.get("Resources") or {}) for n in ray.nodes() if n["Alive"]):
    time.sleep(0.5)
PYEOF
# 2b (in the background, it spends ~20 s in Ray's retries): a driver with another token is refused
echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef > $O/bad-token
(RAY_AUTH_TOKEN_PATH=$O/bad-token timeout 60 $IC fleet run $B --address 127.0.0.1:6379 --out $O/badtok $LOOP > $O/badtok.log 2>&1; echo $? > $O/badtok.rc) &
BADTOK=$!
# 1: both nodes measure the bundle; one merged report
$IC fleet run $B --address 127.0.0.1:6379 --out $O/both -b 1,4 $LOOP > $O/both.log 2>&1; echo $? > $O/both.rc
# 2: no node matches --targets
$IC fleet run $B --address 127.0.0.1:6379 --out $O/none --targets node-z $LOOP > $O/none.log 2>&1; echo $? > $O/none.rc
wait $BADTOK
# 3: node-b killed mid-run (its raylet and workers, -9); node-a's rows are kept
LONG="--backends onnxruntime --device cpu --threads 1 -b 1 --min-time 8 --max-time 10 --target-ci 0"
$IC fleet run $B --address 127.0.0.1:6379 --out $O/kill $LONG > $O/kill.log 2>&1 &
RUN=$!
for i in $(seq 60); do [ "$(grep -c submitted $O/kill.log)" -ge 2 ] && break; sleep 0.5; done
sleep 4; kill -9 -- -$NODE_B
wait $RUN; echo $? > $O/kill.rc
# 4: Ctrl-C (SIGINT) to the driver while node-a measures
$IC fleet run $B --address 127.0.0.1:6379 --out $O/int --targets node-a $LONG > $O/int.log 2>&1 &
RUN=$!
for i in $(seq 60); do grep -q submitted $O/int.log && break; sleep 0.5; done
sleep 3; kill -INT $RUN
wait $RUN; echo $? > $O/int.rc
