#!/usr/bin/env bash
# The GPU check: the CUDA tests and `ros-lnn bench train` on a machine with a GPU, from a source checkout
# (no install: PYTHONPATH). Needs python3 with torch (CUDA), numpy, scipy, onnx, onnxruntime, pyyaml.
#   scripts/cuda_check.sh [REFERENCE_CHECKOUT [DELAN_CHARACTER_DATA]]
# Writes its logs and the bench's JSON to $OUT (default ./cuda_check).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-cuda_check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the reference imports jax: it must not take the GPU
REF=${1:-}
DATA=${2:-}
EPOCHS=${EPOCHS:-30}  # the CPU side-by-side's epochs (it runs on one CPU thread whatever the machine)
(nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  torch.cuda.is_available() and torch.cuda.get_device_name(0))') 2>&1 | tee "$OUT/device.txt"
python3 -m pytest -q -p no:cacheprovider test/training/test_cuda.py test/bench/test_bench_train.py 2>&1 | tee "$OUT/cuda_tests.txt"
args=(bench train --epochs "$EPOCHS" --json "$OUT/bench_train.json")
[ -n "${QUICK:-}" ] && args+=(--quick --scale-samples 20000)  # a smoke run of this script
[ -n "$REF" ] && args+=(--reference "$REF")
[ -n "$DATA" ] && args+=(--data "$DATA")
python3 -c 'import sys; from ros_lnn.cli import main; sys.exit(main(sys.argv[1:]))' "${args[@]}" 2>&1 \
  | tee "$OUT/bench_train.txt"
