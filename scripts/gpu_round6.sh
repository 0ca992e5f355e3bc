#!/bin/bash
# Issue 37, round 6, on a lent two-GPU machine: this branch's code unpacked at /tmp/br (run from there), main's
# (d01ef97) at /tmp/main, ONNX Runtime GPU + Ray (+ their needs) carried as xz parts in /tmp/parts (all.part.*:
# one archive split in 16 MB parts) and pydantic's wheels in /tmp/whl. Usage: OUT=DIR scripts/gpu_round6.sh STEP...
#   setup   unpack the parts and wheels into /tmp/site; the machine's GPUs, cores and versions into $OUT/gpus.txt
#   first   `infer-compare --model resnet50` on an empty --cache-dir (both GPUs: it fills the caches of the warm
#           runs), then one GPU visible and both, warm, alternating with main's code (scripts/startup_local.sh)
#   second  the rest of the alternation
# Each step leaves a tarball of its reports (results.json and .md, terminal output, stamps, walls) in $OUT.
set -u
: "${OUT:?OUT=DIR}"
export PYTHONUNBUFFERED=1 MAIN_CODE=/tmp/main
pack() {  # NAME DIR: the reports without the HTML and CSV copies
    tar czf "$OUT/$1.tgz" -C "$2" --exclude='*.html' --exclude='*.csv' . && ls -la "$OUT/$1.tgz"
}
for step in "$@"; do
    t0=$(date +%s)
    case $step in
        setup)
            mkdir -p /tmp/site
            cat /tmp/parts/all.part.* | xz -dc | tar x -i -C /tmp/site || exit 3
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
                /tmp/whl/*.whl || exit 4
            { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv; nproc
              lscpu | grep -i "model name"; python3 --version
              PYTHONPATH=/tmp/site python3 -c "import onnxruntime as o, torch, pydantic
print('onnxruntime', o.__version__, o.get_available_providers(), 'torch', torch.__version__, 'cuda', torch.version.cuda,
      'cudnn', torch.backends.cudnn.version(), 'pydantic', pydantic.__version__)"
            } > "$OUT/gpus.txt" 2>&1
            cat "$OUT/gpus.txt" ;;
        first)
            mkdir -p /tmp/s && cp "$OUT/gpus.txt" /tmp/s/
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s two-gpus-cold one-gpu-warm-main-1 one-gpu-warm-1 \
                two-gpus-warm-1 one-gpu-warm-2 two-gpus-warm-2
            pack r6-first /tmp/s ;;
        second)
            scripts/startup_local.sh /tmp/s2 one-gpu-warm-main-2 one-gpu-warm-3 two-gpus-warm-3 two-gpus-warm-main-1
            pack r6-second /tmp/s2 ;;
        *) echo "unknown step $step" ;;
    esac
    echo "step $step: $(( $(date +%s) - t0 )) s"
done
