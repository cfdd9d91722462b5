#!/usr/bin/env bash
# The GPU check (README, "GPU check"): run once on a lent GPU machine, from the repository root.
# Needs torch, transformers, peft, accelerate and pyyaml there, no network; carry the caches
#   data/books data/tokenizers data/tokens
# with the tree. bitsandbytes is optional: without it the NF4 check says it was skipped.
# Finishes in a few minutes on one H100/H200; writes $OUT/gpu_check.json (default gpu_check_out).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-gpu_check_out}"
mkdir -p "$out"
python - <<'PY'
import torch, transformers, peft, accelerate
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("transformers", transformers.__version__, "peft", peft.__version__, "accelerate", accelerate.__version__)
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0), "bf16", torch.cuda.is_bf16_supported())
PY
timeout 420 python scripts/gpu_check.py --out "$out" "$@" 2>&1 | tee "$out/gpu_check.log"
