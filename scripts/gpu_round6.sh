#!/bin/bash
# Issue 37, round 6, on a lent two-GPU machine: this branch's code unpacked at /tmp/br (run from there), main's
# (d01ef97) at /tmp/main, ONNX Runtime GPU + Ray (+ their needs) carried as xz parts in /tmp/parts (all.part.*:
# one archive split in 16 MB parts) and pydantic's wheels in /tmp/whl. Usage: OUT=DIR scripts/gpu_round6.sh STEP...
#   setup   unpack the parts and wheels into /tmp/site; the machine's GPUs, cores and versions into $OUT/gpus.txt
#   first   `infer-compare --model resnet50` on an empty --cache-dir (both GPUs: it fills the caches of the warm
#           runs), then one GPU visible and both, warm, alternating with main's code (scripts/startup_local.sh)
#   second  the rest of the alternation
# Each step leaves a tarball of its reports (results.json and .md, terminal output, stamps, walls) in $OUT.
. "$(dirname "$0")/gpu_round_lib.sh"  # set -u, OUT required, unbuffered Python
export MAIN_CODE=/tmp/main
step() {  # one STEP of the usage above
    case $1 in
        setup)
            unpack_parts
            machine_facts onnxruntime torch pydantic ;;
        first)
            mkdir -p /tmp/s && cp "$OUT/gpus.txt" /tmp/s/
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s two-gpus-cold one-gpu-warm-main-1 one-gpu-warm-1 \
                two-gpus-warm-1 one-gpu-warm-2 two-gpus-warm-2
            pack r6-first /tmp/s ;;
        second)
            scripts/startup_local.sh /tmp/s2 one-gpu-warm-main-2 one-gpu-warm-3 two-gpus-warm-3 two-gpus-warm-main-1
            pack r6-second /tmp/s2 ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
