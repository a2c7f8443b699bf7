#!/usr/bin/env bash
# `gymverse train` throughput on a lent GPU machine (torch + transformers installed there, no package index).
# The GymVerse wheels and their pure-Python dependencies travel in a folder (default .whl/), built beforehand with
#   for p in gymverse-core gymverse-envs gymverse-train; do uv build --wheel --package $p -o .whl; done
#   uvx --from pip pip download --no-deps -d .whl rich markdown-it-py mdurl pygments array-api-compat
# and are installed without dependencies into a scratch folder (the machine's torch stays as it is). Writes
# train_gpu-<name>.json (and its log) into $OUT (default benchmarks/results).
set -euo pipefail
WHEELS=${WHEELS:-.whl}
OUT=${OUT:-benchmarks/results}
SITE=$(mktemp -d)
python -m pip install -q --no-deps --no-index --ignore-requires-python --target "$SITE" "$WHEELS"/*.whl
export PYTHONPATH="$SITE:benchmarks${PYTHONPATH:+:$PYTHONPATH}"
python -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'
nvidia-smi --query-gpu=name,memory.total,utilization.gpu --format=csv,noheader || true
run() {  # name, then train_gpu.py's flags
  local name=$1; shift
  echo "== $name: $*"
  python benchmarks/train_gpu.py --device cuda --out "$OUT/train_gpu-$name.json" "$@" 2>&1 | tee "$OUT/train_gpu-$name.log"
}
run default --steps 4                                    # 1024 wide, 12 layers (~200M parameters), 64 episodes/step
run qwen05-shape --steps 4 --hidden 896 --layers 24       # Qwen2-0.5B's depth and width, 64 episodes/step
run qwen05-shape-128 --steps 3 --hidden 896 --layers 24 --prompts 16   # the same at 128 episodes/step
