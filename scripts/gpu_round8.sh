#!/bin/bash
# Issue 37, round 8, on a lent two-GPU machine: this checkout against main's code before it (unpacked from
# build/r8/main.tgz into /tmp/main-code, MAIN_CODE), alternating, one GPU and two GPUs, warm. Round 8's changes: the
# board pairs each GPU's two processes so that one traces while the other measures (measure/parallel.py), and (in
# these runs; taken out after, no gain) the report's first figure drawn while the GPU rows were measured.
# build/r8/main.tgz: `git archive fabd848 infer_compare pyproject.toml | gzip > build/r8/main.tgz`.
# Usage: OUT=DIR scripts/gpu_round8.sh STEP...
#   setup   round 7's setup (ONNX Runtime GPU from /tmp/parts, the small wheels) and main's code into /tmp/main-code
#   a       an empty --cache-dir first (fills the caches), then one GPU and two GPUs, main and this code alternating
#   b       the same pairs again in the other order, and two GPUs with turns off (this code)
#   c, d    a second lease: the same as a and b with the later changes (bytecode kept before the heavy imports, the
#           plot's leader lines, each turn's holds kept in the rows), two pairs each of one GPU and two GPUs
# Each step leaves a tarball of its reports (results.json and .md, terminal output, stamps, walls) in $OUT.
. "$(dirname "$0")/gpu_round_lib.sh"  # set -u, OUT required, unbuffered Python
export MAIN_CODE=/tmp/main-code
step() {  # one STEP of the usage above
    case $1 in
        setup)
            scripts/gpu_round7.sh setup
            mkdir -p "$MAIN_CODE" && tar xzf build/r8/main.tgz -C "$MAIN_CODE" || exit 5 ;;
        a)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s8a two-gpus-cold one-gpu-warm-main-1 one-gpu-warm-1 \
                two-gpus-warm-main-1 two-gpus-warm-1
            pack r8-a /tmp/s8a ;;
        b)
            scripts/startup_local.sh /tmp/s8b one-gpu-warm-2 one-gpu-warm-main-2 two-gpus-warm-2 \
                two-gpus-warm-main-2 two-gpus-warm-off-1 two-gpus-warm-3
            pack r8-b /tmp/s8b ;;
        c)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s8c two-gpus-cold one-gpu-warm-main-3 one-gpu-warm-3 \
                two-gpus-warm-4 two-gpus-warm-main-3
            pack r8-c /tmp/s8c ;;
        d)
            scripts/startup_local.sh /tmp/s8d one-gpu-warm-4 one-gpu-warm-main-4 two-gpus-warm-main-4 two-gpus-warm-5
            pack r8-d /tmp/s8d ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
