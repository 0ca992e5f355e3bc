#!/bin/bash
# Issue 37, round 5, on a lent two-GPU machine: this branch's code unpacked at /tmp/br (run from there), ONNX Runtime
# GPU + Ray 2.60 (+ jsonschema, referencing, rpds) carried as xz parts in /tmp/parts (all.part.*: concatenated tar
# archives) and pydantic's wheels in /tmp/whl. Usage: OUT=DIR scripts/gpu_round5.sh STEP...
#   setup     unpack the parts and wheels into /tmp/site; the machine's GPUs, cores and versions into $OUT/gpus.txt
#   fleet     export the resnet50 bundle, one local run to fill the caches, then alternating the local parallel run
#             and `fleet run` on a one-node loopback cluster, twice each (scripts/multi_gpu_fleet.sh)
#   fleet-main  one more `fleet run` with the code at $MAIN_CODE (main's checkout)
#   startup1  `infer-compare --model resnet50`: one run on an empty --cache-dir (both GPUs), then one GPU visible
#             and both, alternating, twice each (scripts/startup_local.sh)
#   startup2  one more pair (one GPU, both)
# Each step leaves a tarball of its reports (results.json and .md, terminal output, walls) in $OUT.
. "$(dirname "$0")/gpu_round_lib.sh"  # set -u, OUT required, unbuffered Python
step() {  # one STEP of the usage above
    case $1 in
        setup)
            unpack_parts
            machine_facts onnxruntime torch ray pydantic ;;
        fleet)
            SAMPLE_PS=0 scripts/multi_gpu_fleet.sh /tmp/o export local-cold local local-a fleet fleet-a \
                local local-b fleet fleet-b
            cp "$OUT/gpus.txt" /tmp/o/ 2>/dev/null; pack r5-fleet /tmp/o ;;
        fleet-main)  # one more `fleet run`, with the code of the checkout at $MAIN_CODE (main's, before this round)
            CODE=${MAIN_CODE:?} SAMPLE_PS=0 scripts/multi_gpu_fleet.sh /tmp/o fleet fleet-main
            pack r5-fleet /tmp/o ;;
        startup1)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s two-gpus-cold one-gpu-warm-1 two-gpus-warm-1 \
                one-gpu-warm-2 two-gpus-warm-2
            pack r5-startup1 /tmp/s ;;
        startup2)
            scripts/startup_local.sh /tmp/s2 one-gpu-warm-3 two-gpus-warm-3
            pack r5-startup2 /tmp/s2 ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
