#!/bin/bash
# On a two-GPU machine: `infer-compare --model resnet50` with one GPU visible and with two,
# cold (empty --cache-dir) and warm, each with its report, terminal output and wall time kept under OUT.
# Usage (ONNX Runtime GPU under /tmp/site): benchmarks/gpu/startup_local.sh OUT RUN...   (OUT: an absolute path)
# Each RUN is one of the names below, run in the order given; the cold ones first: they fill the cache (on a fresh
# machine COLD_CACHE=/tmp/c1 makes the cold two-GPU run fill the cache of the warm runs).
# The code run is this checkout's, or, for the runs named *-main, the one under $MAIN_CODE (another checkout,
# e.g. main's infer_compare/ unpacked there): each run starts in its code's directory, which is on PYTHONPATH.
# Each run's folder gets stamps.txt too: its output lines with the seconds since the command started (where the
# time outside the report's clock goes: before the first line, after the last); walls.txt gives each run's start
# (epoch seconds), which `benchmarks/gpu_busy.py --walls` places the GPUs' first and last holds against.
set -u
O=${1:?usage: startup_local.sh OUT RUN...}; shift; mkdir -p "$O"
HERE=$PWD
export PYTHONUNBUFFERED=1
stamped() {  # FILE STAMPS: the output as it came into FILE; into STAMPS, seconds since the start before each line
    python3 -u -c 'import sys, time
t0 = time.time()
with open(sys.argv[1], "w") as raw, open(sys.argv[2], "w") as st:
    for line in sys.stdin:
        raw.write(line)
        st.write(f"{time.time() - t0:8.2f} {line}")
    st.write(f"{time.time() - t0:8.2f} (end of output)\n")' "$1" "$2"
}
one() {  # NAME LIMIT_S CACHE [VAR=VALUE...] -- [flags]; CODE (default: this checkout) and PRE (a command prefix)
    local name=$1 limit=$2 cache=$3 code=${CODE:-$HERE}; shift 3
    local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local t0; t0=$(date +%s.%N)
    (cd "$code" && env "${envs[@]}" PYTHONPATH="$code:/tmp/site" timeout "$limit" ${PRE:-} python3 -m infer_compare \
        --model resnet50 --cache-dir "$cache" -o "$O/$name" "$@") 2>&1 | stamped "$O/$name.txt" "$O/$name.stamps"
    local rc=${PIPESTATUS[0]} t1; t1=$(date +%s.%N)
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))") start=$t0 code=$code ${PRE:-} ${envs[*]} $*" \
        | tee -a "$O/walls.txt"
    mkdir -p "$O/$name" && mv "$O/$name.txt" "$O/$name/terminal.txt" && mv "$O/$name.stamps" "$O/$name/stamps.txt"
}
[ -s "$O/gpus.txt" ] || {
    nvidia-smi -L > "$O/gpus.txt"; nproc >> "$O/gpus.txt"; lscpu | grep -i "model name" >> "$O/gpus.txt"
    PYTHONPATH=/tmp/site python3 -c "import onnxruntime as o, torch; print('onnxruntime', o.__version__, o.get_available_providers(), 'torch', torch.__version__)" >> "$O/gpus.txt" 2>&1
}
G1=CUDA_VISIBLE_DEVICES=0
for run in "$@"; do
    case $run in
        one-gpu-cold) one one-gpu-cold "${COLD_LIMIT:-300}" "${COLD_CACHE:-/tmp/c3}" $G1 -- ;;
        two-gpus-cold) one two-gpus-cold "${COLD_LIMIT:-300}" "${COLD_CACHE:-/tmp/c2}" X=1 -- ;;
        one-gpu-warm-after) one one-gpu-warm-after 200 /tmp/c1 $G1 -- --cpu-rows after ;;
        one-gpu-warm-main|one-gpu-warm-main-*) CODE=${MAIN_CODE:?} one "$run" 200 /tmp/c1 $G1 -- ;;
        two-gpus-warm-main|two-gpus-warm-main-*) CODE=${MAIN_CODE:?} one "$run" 150 /tmp/c1 X=1 -- ;;
        one-gpu-warm|one-gpu-warm-again|one-gpu-warm-[0-9]*) one "$run" 200 /tmp/c1 $G1 -- ;;
        two-gpus-warm|two-gpus-warm-again|two-gpus-warm-[0-9]*) one "$run" 150 /tmp/c1 X=1 -- ;;
        # one measuring process per GPU (host/gpu_turn.py's switch), this checkout's code
        one-gpu-warm-off-[0-9]*) one "$run" 200 /tmp/c1 $G1 INFER_COMPARE_GPU_TURNS=0 -- ;;
        two-gpus-warm-off-[0-9]*) one "$run" 150 /tmp/c1 X=1 INFER_COMPARE_GPU_TURNS=0 -- ;;
        each-row-alone) one each-row-alone 300 /tmp/c1 X=1 -- --gpus sequential ;;
        # the CPU rows alone on the cores and threads the one-GPU run's CPU lane had (cores 0-27, 28 threads)
        cpu-rows-alone-lane) PRE="taskset -c ${LANE_CORES:-0-27}" one cpu-rows-alone-lane 150 /tmp/c1 X=1 -- \
            --device cpu --threads "${LANE_THREADS:-28}" ;;
        *) echo "unknown run $run" | tee -a "$O/walls.txt" ;;
    esac
done
exit 0
