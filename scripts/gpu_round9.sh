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
#   c1, c2  a second lease, after the GPU seconds were kept per group (their median) and results.html was written
#           beside: an empty --cache-dir, two warm one-GPU runs (so that the first two-GPU plan does not lean on the
#           cold run's figures), then two GPUs; then main's pair and this code's pairs (one lease, two calls)
#   d       a third lease, after the plan counted each GPU's tracing (its processes' own seconds): the same order as
#           c1, then three pairs of this code
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
        c1)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s9c two-gpus-cold one-gpu-warm-5 one-gpu-warm-6 \
                two-gpus-warm-5 ;;
        c2)
            scripts/startup_local.sh /tmp/s9c one-gpu-warm-main-3 two-gpus-warm-main-3 two-gpus-warm-6 \
                one-gpu-warm-7 two-gpus-warm-7
            busy /tmp/s9c; pack r9-c /tmp/s9c ;;
        d)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s9d two-gpus-cold one-gpu-warm-8 one-gpu-warm-9 \
                two-gpus-warm-8 two-gpus-warm-9 one-gpu-warm-10 two-gpus-warm-10
            busy /tmp/s9d; pack r9-d /tmp/s9d ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
