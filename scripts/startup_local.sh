#!/bin/bash
# Issue 37 (d), on the lent two-GPU machine: `infer-compare --model resnet50` with one GPU visible and with two,
# cold (empty --cache-dir) and warm, with the resident measuring processes (default) and with one process per
# configuration (INFER_COMPARE_RESIDENT=0: the baseline), the CPU rows after the GPU ones (default) or beside
# them (--cpu-rows beside). Each report, its terminal output and wall time kept under OUT.
# Usage (repository root, ONNX Runtime GPU under /tmp/site): scripts/startup_local.sh OUT RUN...
# where each RUN is one of the names below (run in the order given; the cold ones first: they fill the cache; on a fresh
# machine COLD_CACHE=/tmp/c1 makes a cold run with the CPU rows beside fill the cache of the warm runs).
set -u
O=${1:?usage: startup_local.sh OUT RUN...}; shift; mkdir -p "$O"
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
one() {  # NAME LIMIT_S CACHE [VAR=VALUE...] -- [flags]
    local name=$1 limit=$2 cache=$3; shift 3
    local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local t0; t0=$(date +%s.%N)
    env "${envs[@]}" timeout "$limit" python3 -m infer_compare --model resnet50 --cache-dir "$cache" -o "$O/$name" "$@" \
        > "$O/$name.txt" 2>&1
    local rc=$? t1; t1=$(date +%s.%N)
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($t1 - $t0, 1))") ${envs[*]} $*" | tee -a "$O/walls.txt"
    mkdir -p "$O/$name" && mv "$O/$name.txt" "$O/$name/terminal.txt"
}
[ -s "$O/gpus.txt" ] || {
    nvidia-smi -L > "$O/gpus.txt"; nproc >> "$O/gpus.txt"
    python3 -c "import onnxruntime as o, torch; print('onnxruntime', o.__version__, o.get_available_providers(), 'torch', torch.__version__)" >> "$O/gpus.txt" 2>&1
}
G1=CUDA_VISIBLE_DEVICES=0
for run in "$@"; do
    case $run in
        one-gpu-cold) one one-gpu-cold "${COLD_LIMIT:-300}" /tmp/c1 $G1 -- ;;
        one-gpu-warm) one one-gpu-warm 200 /tmp/c1 $G1 -- ;;
        one-gpu-warm-per-configuration) one one-gpu-warm-per-configuration 200 /tmp/c1 $G1 INFER_COMPARE_RESIDENT=0 -- ;;
        one-gpu-warm-beside) one one-gpu-warm-beside 200 /tmp/c1 $G1 -- --cpu-rows beside ;;
        two-gpus-warm) one two-gpus-warm 150 /tmp/c1 X=1 -- ;;
        two-gpus-warm-beside) one two-gpus-warm-beside 150 /tmp/c1 X=1 -- --cpu-rows beside ;;
        two-gpus-cold-beside) one two-gpus-cold-beside "${COLD_LIMIT:-300}" "${COLD_CACHE:-/tmp/c2}" X=1 -- --cpu-rows beside ;;
        one-gpu-cold-beside) one one-gpu-cold-beside "${COLD_LIMIT:-300}" "${COLD_CACHE:-/tmp/c3}" $G1 -- --cpu-rows beside ;;
        *) echo "unknown run $run" | tee -a "$O/walls.txt" ;;
    esac
done
exit 0
