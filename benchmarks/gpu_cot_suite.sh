#!/usr/bin/env bash
# The COT backbones on a fresh GPU machine (issue 32, item 7), from the repository root:
#
#   benchmarks/gpu_cot_suite.sh [--wheels DIR] [--tiny] [gpu_cot_suite.py options]
#
# 1. --wheels DIR: installs the wheels of DIR (benchmarks/gpu_wheelhouse.sh makes them: Prefect,
#    DuckDB, POT and what they need) into a private folder on PYTHONPATH, with no network;
# 2. checks in one line that every package the stages import is there;
# 3. runs benchmarks/gpu_cot_suite.py: generated releases (cifar10, tinyimagenet) at a quick
#    scale, then cifar10.resnet50, cifar10.vgg11 and tinyimagenet.resnet18-ft through the
#    download, train (2 epochs), extract and estimate stages, with nvidia-smi sampling;
# 4. writes gpu_cot_suite.json, gpu_cot_suite.md, nvidia_smi.csv and log.txt into $OUT
#    (default ./gpu-cot-out).
#
# --tiny is the CPU check of the same path at the smallest size (see gpu_cot_suite.py). On the
# lent machine, with the device tool, for example:
#   run(command="benchmarks/gpu_cot_suite.sh --wheels .whl", carry=[".whl"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-$PWD/gpu-cot-out}"
WHEELS=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS="${2:?--wheels needs a folder}"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
mkdir -p "$OUT"
if [ -n "$WHEELS" ]; then
  SITE="${TMPDIR:-/tmp}/alsa-bench-site"
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" - <<'EOF'
import importlib.util
import sys

needed = ("torch", "torchvision", "numpy", "scipy", "pandas", "pyarrow", "PIL", "sklearn",
          "prefect", "duckdb", "ot", "typer", "transformers", "torch_geometric")
missing = [m for m in needed if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu_cot_suite: missing Python packages {', '.join(missing)}; give --wheels DIR "
             f"(benchmarks/gpu_wheelhouse.sh makes it where PyPI is reachable).")
EOF
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi: no utilisation figures"
export PYTHONUNBUFFERED=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
"$PY" benchmarks/gpu_cot_suite.py --out "$OUT" ${ARGS[@]+"${ARGS[@]}"} 2>&1 | tee "$OUT/log.txt"
