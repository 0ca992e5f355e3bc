#!/bin/bash
# A loopback-only Ray cluster of two nodes, for tests/test_fleet_cluster.py. Runs as PID 1 of its
# own PID and network namespaces (unshare -n -p -f --mount-proc): only loopback exists (127.0.0.2, a
# second loopback address, stands in for a lab interface: the head and node-b use it), and every
# process started here dies with this script. node-b runs tests/fleet_crafted/sitecustomize.py (a stand-in
# for a compromised node: what its tasks answer is what $O/crafted says). Usage: fleet_cluster.sh BUNDLE OUT
set -u -m
B=$1; O=$2
CRAFTED=$(cd "$(dirname "$0")" && pwd)/fleet_crafted
ip link set lo up || exit 97
# only loopback may exist here: never start Ray on a real interface
[ "$(ip -o link show | awk -F': ' '{print $2}')" = "lo" ] || { echo "not a loopback-only namespace" >&2; exit 98; }
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$O/token RAY_TMPDIR=$O/r RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor
IC="$PYTHON -m infer_compare"
stop() { $PYTHON -m ray.scripts.scripts stop --force >/dev/null 2>&1; }
trap stop EXIT
LOOP="--backends onnxruntime --device cpu --threads 1 --warmup 1 --min-iters 5 --min-time 0.05 --target-ci 0"
H=127.0.0.2:6379
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
$IC fleet join --head --name node-a --port 6379 --ip 127.0.0.2 > $O/join-a.log 2>&1; echo $? > $O/join-a.rc
find $O/r -printf '%m %y %u %P\n' > $O/modes-a.txt
IC_CRAFTED=$O/crafted PYTHONPATH=$CRAFTED:$PYTHONPATH \
  $IC fleet join --address $H --name node-b --ip 127.0.0.2 --block > $O/join-b.log 2>&1 &
NODE_B=$!
# wait (30 s at most) until node-b has joined
$PYTHON - <<'PYEOF' > $O/wait.log 2>&1
import time, ray
ray.init(address="127.0.0.2:6379", logging_level="ERROR", log_to_driver=False)
t = time.time()
while time.time() - t < 30 and not any("ic-node:node-b" in (n.get("Resources") or {}) for n in ray.nodes() if n["Alive"]):
    time.sleep(0.5)
PYEOF
# every listening socket and its process, with both nodes up (tests list what binds where)
ss -ltnupH > $O/ports-ab.txt; ps -eo pid=,ppid=,args= > $O/ps-ab.txt
# 2b (in the background): a driver with another token is refused at once
echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef > $O/bad-token; chmod 600 $O/bad-token
(S=$(date +%s%N); RAY_AUTH_TOKEN_PATH=$O/bad-token timeout 60 $IC fleet run $B --address $H --out $O/badtok $LOOP > $O/badtok.log 2>&1; echo $? > $O/badtok.rc; ms $S > $O/badtok.ms) &
BADTOK=$!
# 1: both nodes measure the bundle; one merged report; again with every answer read as data (--untrusted)
S=$(date +%s%N); $IC fleet run $B --address $H --out $O/both -b 1,4 $LOOP > $O/both.log 2>&1; echo $? > $O/both.rc
ms $S > $O/both.ms
S=$(date +%s%N); $IC fleet run $B --address $H --out $O/both-u --untrusted -b 1,4 $LOOP > $O/both-u.log 2>&1
echo $? > $O/both-u.rc; ms $S > $O/both-u.ms
# 6: node-b answers a pickle that writes a marker where it is loaded (read by the driver as Ray returns it,
# then refused by --untrusted), JSON over the channel's 64 MiB, JSON that breaks the results schema
crafted() { echo "$2" > $O/crafted; $IC fleet run $B --address $H --out $O/$1 "${@:3}" $LOOP > $O/$1.log 2>&1; echo $? > $O/$1.rc; }
crafted cr-trusted "pickle $O/marker-trusted"
crafted cr-pickle "pickle $O/marker-untrusted" --untrusted
crafted cr-big "big 67108865" --untrusted
crafted cr-schema schema --untrusted
: > $O/crafted
# 2: no node matches --targets
$IC fleet run $B --address $H --out $O/none --targets node-z $LOOP > $O/none.log 2>&1; echo $? > $O/none.rc
wait $BADTOK
# 3: node-b killed mid-run (its raylet, then every process, -9); node-a's rows are kept
# (a fast machine's LeNet-5 reaches the loop's 100,000 calls in 2 s: the warm-up's 6 s keep the job running by time)
LONG="--backends onnxruntime --device cpu --threads 1 -b 1 --warmup-time 6 --min-time 8 --max-time 10 --target-ci 0"
$IC fleet run $B --address $H --out $O/kill $LONG > $O/kill.log 2>&1 &
RUN=$!
for i in $(seq 180); do [ "$(grep -c submitted $O/kill.log)" -ge 2 ] && break; sleep 0.5; done
# node-b's raylet dies first (its agents then publish Ray's raylet dump to the driver), then all of node-b
sleep 4; kill -9 $(pgrep -g $NODE_B -f raylet/raylet); sleep 3; kill -9 -- -$NODE_B
wait $RUN; echo $? > $O/kill.rc
# 4: Ctrl-C (SIGINT) to the driver while node-a measures
$IC fleet run $B --address $H --out $O/int --targets node-a $LONG > $O/int.log 2>&1 &
RUN=$!
for i in $(seq 180); do grep -q submitted $O/int.log && break; sleep 0.5; done
sleep 3; kill -INT $RUN
wait $RUN; echo $? > $O/int.rc
# 7: a token file that others may read is refused at join
cp $O/token $O/token644; chmod 644 $O/token644
RAY_AUTH_TOKEN_PATH=$O/token644 timeout 60 $IC fleet join --address $H --name node-x --ip 127.0.0.2 > $O/tok644.log 2>&1
echo $? > $O/tok644.rc
# 5: node-c joins on 127.0.0.1 (no --ip) and leaves with `fleet leave`: node-a stays
$IC fleet join --address $H --name node-c > $O/join-c.log 2>&1; echo $? > $O/join-c.rc
ss -ltnupH > $O/ports-c.txt; ps -eo pid=,ppid=,args= > $O/ps-c.txt
$IC fleet leave --name node-c > $O/leave.log 2>&1; echo $? > $O/leave.rc
$IC fleet leave --name node-c > $O/leave-again.log 2>&1; echo $? > $O/leave-again.rc
ps -eo pid=,ppid=,args= > $O/ps-left.txt
find $O/r -printf '%m %y %u %P\n' > $O/modes-end.txt
