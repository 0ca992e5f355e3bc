#!/bin/bash
# Issue 37, round 9, on a lent two-GPU machine: this checkout against main's code before it (acedcd3, unpacked from
# build/r9/main.tgz into /tmp/main-code, MAIN_CODE), one GPU and two GPUs, warm, alternating. Round 9's changes: the
# board plans each GPU pool's configurations by the GPU seconds each took in the runs before (measure/balance.py,
# kept in the cache), and the measuring processes' exits are waited for beside the report's writing.
# build/r9/main.tgz: `git archive acedcd3 infer_compare pyproject.toml | gzip > build/r9/main.tgz`.
# Usage: OUT=DIR scripts/gpu_round9.sh STEP...
#   setup   round 7's setup (ONNX Runtime GPU from /tmp/parts, the small wheels) and main's code into /tmp/main-code
#   a       an empty --cache-dir first (two GPUs: fills the caches and the GPU seconds), then one GPU and two GPUs,
#           this code and main's
#   b       more pairs, this code and main's, in another order
# Each step leaves a tarball of its reports (results.json and .md, terminal output, stamps, walls) in $OUT, and
# busy.txt: benchmarks/gpu_busy.py on each report, with the holds against each command's start and end.
. "$(dirname "$0")/gpu_round_lib.sh"  # set -u, OUT required, unbuffered Python
export MAIN_CODE=/tmp/main-code
busy() {  # DIR: each report's GPU holds and the fixed parts into DIR/busy.txt
    python3 benchmarks/gpu_busy.py "$1"/*/results.json --gaps 2 --walls "$1/walls.txt" > "$1/busy.txt" 2>&1
    cp /tmp/c1/gpu-seconds/*.json "$1/" 2>/dev/null
}
step() {  # one STEP of the usage above
    case $1 in
        setup)
            scripts/gpu_round7.sh setup
            mkdir -p "$MAIN_CODE" && tar xzf build/r9/main.tgz -C "$MAIN_CODE" || exit 5 ;;
        a)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s9a two-gpus-cold one-gpu-warm-1 two-gpus-warm-1 \
                one-gpu-warm-main-1 two-gpus-warm-main-1 two-gpus-warm-2 one-gpu-warm-2
            busy /tmp/s9a; pack r9-a /tmp/s9a ;;
        b)
            scripts/startup_local.sh /tmp/s9b two-gpus-warm-3 one-gpu-warm-3 two-gpus-warm-main-2 \
                one-gpu-warm-main-2 two-gpus-warm-4 one-gpu-warm-4
            busy /tmp/s9b; pack r9-b /tmp/s9b ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
