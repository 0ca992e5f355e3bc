#!/bin/bash
# Issue 37, round 6, profiling on a lent one-GPU machine (no ONNX Runtime GPU needed): run from the branch's code
# unpacked at /tmp/br, reports of the repository at $REPO, pydantic's wheels (infer_compare's reports need them) in
# $WHL when set. Usage: OUT=DIR REPO=DIR scripts/probe_round6.sh [STEP...]  (steps: imports tail compile profile;
# none: the first three)
# import times of the PyTorch fork server's modules, an interpreter's exit after importing torch, the comparison's
# tail (report writing, table) from a saved results.json with and without the writers prefetched, and the
# first torch.compile of a process against a later one (scripts/first_compile_probe.py), with its new modules
# imported ahead or not.
set -u
: "${OUT:?}" "${REPO:?}"
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
STEPS=${*:-imports tail compile}
if [ -n "${WHL:-}" ] && [ ! -d /tmp/site/pydantic ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHL"/*.whl || exit 4
fi
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; python3 --version
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } > "$OUT/machine.txt" 2>&1
if has imports; then
MODS="import torch, torchvision, torch._inductor.compile_fx, infer_compare.backends.pytorch.run"
for i in 1 2 3; do
    s=$(date +%s.%N); python3 -X importtime -c "$MODS" 2> "$OUT/importtime-$i.txt"; e=$(date +%s.%N)
    echo "imports $i: $(python3 -c "print(round($e - $s, 2))") s wall" >> "$OUT/summary.txt"
done
for i in 1 2; do  # seconds from the end of the imports to the interpreter's exit
    python3 -c "import time; import torch, torchvision; print(time.time())" > /tmp/t_end
    e=$(date +%s.%N); echo "exit after import torch, torchvision $i: $(python3 -c "print(round($e - $(cat /tmp/t_end), 3))") s" >> "$OUT/summary.txt"
done
fi
if has tail; then
R=$REPO/reports/gpu-h200x2j-r5-one-gpu-warm-3/results.json
for i in 1 2; do
    for p in "" --prefetch; do python3 scripts/tail_probe.py "$R" "/tmp/tail$i$p" $p >> "$OUT/summary.txt" 2>&1; done
done
fi
export TORCHINDUCTOR_CACHE_DIR=/tmp/pc/torchinductor TRITON_CACHE_DIR=/tmp/pc/triton
if has compile; then
python3 scripts/first_compile_probe.py > "$OUT/fc-fill.txt" 2>&1
for i in 1 2; do
    python3 scripts/first_compile_probe.py > "$OUT/fc-warm$i.txt" 2>&1
    python3 scripts/first_compile_probe.py --preimport "$OUT/fc-warm1.txt" > "$OUT/fc-pre$i.txt" 2>&1
done
fi
if has profile; then  # the second compile of a process under cProfile (a warm cache: the first run fills it)
    [ -d /tmp/pc/torchinductor ] || python3 scripts/first_compile_probe.py > "$OUT/fc-fill.txt" 2>&1
    python3 scripts/first_compile_probe.py > "$OUT/fc-warm-unprofiled.txt" 2>&1
    python3 scripts/first_compile_probe.py --profile 70 > "$OUT/fc-prof.txt" 2>&1
fi
for f in "$OUT"/fc-*.txt; do python3 - "$f" >> "$OUT/summary.txt" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
if "PROBE " not in t:
    print(sys.argv[1], "no result:", t[-800:]); sys.exit()
d = json.loads(t.split("PROBE ", 1)[1])
print(sys.argv[1].rsplit("/", 1)[1], {k: d.get(k) for k in ("import_s", "preimport_s", "preimport_n", "eager_s",
      "first_compile_s", "again_compile_s", "first_compile_new_modules_n", "threads_before_after",
      "children_after_first", "total_s")})
PY
done
cat "$OUT/summary.txt"
