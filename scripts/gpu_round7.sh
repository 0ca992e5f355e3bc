#!/bin/bash
# Issue 37, round 7, on a lent GPU machine: two measuring processes per GPU taking turns (host/gpu_turn.py) against
# one (INFER_COMPARE_GPU_TURNS=0), the same code, alternating. The ONNX Runtime GPU wheel reassembled from the parts
# under /tmp/parts (../shared/tools/carry-split), the small wheels this code needs under build/r7/whl.
# Usage: OUT=DIR scripts/gpu_round7.sh STEP...
#   setup   install ONNX Runtime GPU (and, where the machine lacks them, the small wheels) into /tmp/site; the GPUs,
#           cores and versions into $OUT/gpus.txt
#   smoke   a small run with turns (PyTorch eager and torch.compile fp16, batch 1 and 32, one GPU): each row's turn
#   one     one GPU: an empty --cache-dir first (fills the caches), then warm runs, turns on and off alternating
#   one2    three more warm pairs, one GPU
#   two     both GPUs, warm, turns on and off alternating, with one-GPU runs between (the ratio)
# Each step leaves a tarball of its reports (results.json and .md, terminal output, stamps, walls) in $OUT.
. "$(dirname "$0")/gpu_round_lib.sh"  # set -u, OUT required, unbuffered Python
step() {  # one STEP of the usage above
    case $1 in
        setup)
            mkdir -p /tmp/site
            cat /tmp/parts/onnxruntime_gpu-*.part.* > /tmp/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
                /tmp/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl build/r7/whl/pydantic*.whl \
                build/r7/whl/annotated_types*.whl build/r7/whl/typing_inspection*.whl || exit 4
            for m in rich:rich,markdown_it_py,mdurl,pygments psutil:psutil filelock:filelock pynvml:nvidia_ml_py \
                     cpuinfo:py_cpuinfo typing_extensions:typing_extensions; do
                PYTHONPATH=/tmp/site python3 -c "import ${m%%:*}" 2>/dev/null && continue
                for w in ${m#*:}; do python3 -m pip install -q --no-index --no-deps --target /tmp/site build/r7/whl/$w-*.whl; done
            done
            machine_facts onnxruntime torch pydantic ;;
        smoke)
            CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$PWD:/tmp/site timeout 400 python3 -m infer_compare --model resnet50 \
                --backends pytorch,pytorch-compile --precisions fp16 -b 1,32 --device cuda:0 --cache-dir /tmp/c1 \
                -o /tmp/smoke > "$OUT/smoke.txt" 2>&1
            echo "smoke rc=$?"; tail -5 "$OUT/smoke.txt"
            python3 - <<'EOF' | tee -a "$OUT/smoke.txt"
import json
d = json.load(open("/tmp/smoke/results.json"))
for r in d["rows"]:
    x = r.get("extra", {})
    print(r["backend"], r["precision"], r["batch_size"], r["status"], r.get("load_s"), x.get("gpu_process"),
          x.get("gpu_turn"), (r.get("summary") or {}).get("p50_ms"))
print([n[:300] for n in d["notes"] if "turns" in n])
EOF
            ;;
        one)
            COLD_CACHE=/tmp/c1 scripts/startup_local.sh /tmp/s one-gpu-cold one-gpu-warm-1 one-gpu-warm-off-1 \
                one-gpu-warm-off-2 one-gpu-warm-2
            pack r7-one /tmp/s ;;
        one2)
            scripts/startup_local.sh /tmp/s2 one-gpu-warm-3 one-gpu-warm-off-3 one-gpu-warm-off-4 one-gpu-warm-4
            pack r7-one2 /tmp/s2 ;;
        two)
            scripts/startup_local.sh /tmp/s3 two-gpus-warm-1 two-gpus-warm-off-1 one-gpu-warm-5 one-gpu-warm-off-5 \
                two-gpus-warm-off-2 two-gpus-warm-2
            pack r7-two /tmp/s3 ;;
        *) echo "unknown step $1" ;;
    esac
}
run_steps "$@"
