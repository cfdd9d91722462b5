#!/usr/bin/env bash
# The GPU check (README, "GPU check"): run once on a lent GPU machine, from the repository root.
# Needs torch, transformers, peft, accelerate and pyyaml there, no network; carry the caches
#   data/books data/tokenizers data/tokens (and data/longbench data/babilong when fetched)
# with the tree. bitsandbytes is optional: without it the NF4 check says it was skipped.
# Runs the plan and pre-flight of gpu-small, the bf16 / LoRA / NF4 checks, then one job of each
# gpu-small kind (3 steps, the fewest evaluation samples; peak memory beside the plan's
# estimate). Meant to finish in under 10 minutes on one H100/H200; writes $OUT/gpu_check.json,
# $OUT/plan.md and $OUT/gpu_check.log (default gpu_check_out), the models and runs to
# $GPU_CHECK_WORK (default /tmp/lsa_gpu_check), and exits 1 when a part failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="${OUT:-gpu_check_out}"
work="${GPU_CHECK_WORK:-/tmp/lsa_gpu_check}"
mkdir -p "$out" "$work"
# `python` where there is one (a venv), else python3 (a GPU image often has only that)
py="$(command -v python || command -v python3)"
"$py" - <<'PY'
import torch, transformers, peft, accelerate
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("transformers", transformers.__version__, "peft", peft.__version__, "accelerate", accelerate.__version__)
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0), "bf16", torch.cuda.is_bf16_supported())
PY
# the plan and the pre-flight (exit 1 when something is missing: reported, not fatal here)
"$py" -m lsa plan --profile gpu-small --no-hub > "$out/plan.md" 2>&1 || true
tail -n 12 "$out/plan.md"
status=0
timeout 480 "$py" scripts/gpu_check.py --out "$work" --jobs "$@" 2>&1 | tee "$out/gpu_check.log" \
  || status=$?
cp "$work/gpu_check.json" "$out/" 2>/dev/null || true
exit "$status"
