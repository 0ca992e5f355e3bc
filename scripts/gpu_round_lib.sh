#!/bin/bash
# What the GPU round drivers (scripts/gpu_round5.sh, gpu_round6.sh, gpu_round7.sh) share; each sources it first and
# defines `step NAME`, then calls `run_steps "$@"`. OUT (where each step's results go) must be set.
set -u
: "${OUT:?OUT=DIR}"
export PYTHONUNBUFFERED=1

pack() {  # NAME DIR: DIR's reports into $OUT/NAME.tgz, without the HTML and CSV copies and process listings
    tar czf "$OUT/$1.tgz" -C "$2" --exclude='*.html' --exclude='*.csv' --exclude='*-ps.txt' . && ls -la "$OUT/$1.tgz"
}

unpack_parts() {  # the xz parts under /tmp/parts (all.part.*) and the wheels under /tmp/whl into /tmp/site
    mkdir -p /tmp/site
    cat /tmp/parts/all.part.* | xz -dc | tar x -i -C /tmp/site || exit 3
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        /tmp/whl/*.whl || exit 4
}

machine_facts() {  # MODULE...: the GPUs, cores, Python and these modules' versions into $OUT/gpus.txt, then shown
    { date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv; nproc
      lscpu | grep -i "model name"; python3 --version
      PYTHONPATH=/tmp/site python3 - "$@" <<'EOF'
import importlib
import sys

out = []
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    out.append(f"{name} {getattr(mod, '__version__', '?')}")
    if name == "onnxruntime":
        out.append(str(mod.get_available_providers()))
    if name == "torch":
        out.append(f"cuda {mod.version.cuda} cudnn {mod.backends.cudnn.version()}")
print(" ".join(out))
EOF
    } > "$OUT/gpus.txt" 2>&1
    cat "$OUT/gpus.txt"
}

run_steps() {  # STEP...: each through the driver's own `step` function, in order, with its seconds
    local s t0
    for s in "$@"; do
        t0=$(date +%s)
        step "$s"
        echo "step $s: $(( $(date +%s) - t0 )) s"
    done
}
