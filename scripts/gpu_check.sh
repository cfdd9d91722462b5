#!/usr/bin/env bash
# The GPU check (README, "GPU check"): run once on a lent GPU machine, from the repository root.
# Needs torch, transformers, peft, accelerate and pyyaml there, no network; carry the caches
#   data/books data/tokenizers data/tokens (and data/longbench data/babilong when fetched)
# with the tree. bitsandbytes is optional: without it the NF4 check says it was skipped.
# Runs the plan and pre-flight of gpu-small, LongBench-E's batch-safety test on the GPU
# (tests/unit/evaluate/test_longbench_batches.py, when pytest is there), the bf16 / LoRA / NF4 checks, the
# regularizer's cost at gpu-small's step and the 7B-like loss shape (both ratios, CUDA events,
# profiler traces in $OUT/traces), then one job of each gpu-small kind (3 steps, the fewest
# evaluation samples; peak memory beside the plan's estimate). Meant to finish in under 10
# minutes on one H100/H200; writes $OUT/gpu_check.json (with its date, device and commit),
# $OUT/plan.md, $OUT/batch_safety.log and $OUT/gpu_check.log (default gpu_check_out, paths in
# the JSON relative to the repository), the models and runs to $GPU_CHECK_WORK (default
# /tmp/lsa_gpu_check), and exits 1 when a part failed. Publish: copy $OUT/gpu_check.json to
# docs/results/gpu_check/<device>-<date>.json.
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
# LongBench-E: the same answers in batches of 1, 3 and 8 and in two orders, every method's model
if "$py" -c "import pytest" 2>/dev/null; then
  timeout 120 "$py" -m pytest tests/unit/evaluate/test_longbench_batches.py -q -p no:cacheprovider \
    > "$out/batch_safety.log" 2>&1 || status=$?
  tail -n 3 "$out/batch_safety.log"
else
  echo "pytest is not installed here: batch-safety test not run on the GPU" | tee "$out/batch_safety.log"
fi
timeout 420 "$py" scripts/gpu_check.py --out "$work" --jobs --traces "$out/traces" "$@" 2>&1 \
  | tee "$out/gpu_check.log" || status=$?
cp "$work/gpu_check.json" "$out/" 2>/dev/null || true
exit "$status"
