#!/bin/bash
# On a two-GPU machine: `infer-compare --model resnet50` with two GPUs at once
# (--gpus spread, the default) and with one GPU visible, cold (empty --cache-dir) and warm, each report
# and wall time kept. Usage (repository root, ONNX Runtime GPU under /tmp/site): benchmarks/gpu/multi_gpu_local.sh OUT
set -u
O=${1:?usage: multi_gpu_local.sh OUT}; mkdir -p "$O"
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
nvidia-smi -L > "$O/gpus.txt"; nproc >> "$O/gpus.txt"
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" >> "$O/gpus.txt" 2>&1
one two-gpus-cold "${COLD_LIMIT:-240}" /tmp/c2 X=1 --
one two-gpus-warm 150 /tmp/c2 X=1 --
one one-gpu-warm 200 /tmp/c2 CUDA_VISIBLE_DEVICES=0 --
[ -n "${WITH_COLD1:-}" ] && one one-gpu-cold 240 /tmp/c1 CUDA_VISIBLE_DEVICES=0 --
exit 0
