#!/usr/bin/env bash
# Wheels of what the lent GPU machines lack, for benchmarks/gpu_cot_suite.sh --wheels DIR.
#
# The GPU machines (Python 3.12, x86-64, no network) hold torch, torchvision, numpy, scipy,
# pandas, pyarrow, scikit-learn, transformers, torch-geometric, typer, rich, ... but not
# Prefect, DuckDB or POT, which the pipeline's stage modules import. This downloads those three
# (Prefect and DuckDB at the versions of this machine's virtual environment, POT as below), with
# every dependency pip resolves for
# CPython 3.12 on manylinux x86-64, then deletes the wheels of the packages the machine already
# has (PRESENT below: the package list of /work/.library/device/KINDS.md, read 2026-11-17), so one
# version of each package is installed there. Run it where PyPI is reachable:
#
#   benchmarks/gpu_wheelhouse.sh [DIR] [--server]   # default .whl/ (git-ignored); prints its size
#
# Without --server, the wheels that only Prefect's API server, CLI and integrations import
# (SERVER_ONLY below: none of them is imported by the stage modules, the storage layer or the
# estimators, measured in this virtual environment) are left out: 37 MiB instead of 59, which
# leaves room for the repository in a device call's 64 MiB. benchmarks/gpu_cot_suite.py calls the
# stage functions in its own process and starts no server; `alsa-bench run` needs --server.
#
# The folder then travels with the command (device tool: carry [".whl"]) and
#   benchmarks/gpu_cot_suite.sh --wheels .whl
# installs it with `pip install --no-index --no-deps --target` before anything is imported.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=".whl"
SERVER=0
for arg in "$@"; do
  case "$arg" in
    --server) SERVER=1 ;;
    *) DIR="$arg" ;;
  esac
done
SERVER_ONLY="aiosqlite alembic apprise asyncpg beartype burner-redis cffi cronsim cryptography
cyclopts dateparser docker docstring-parser fastapi graphviz greenlet griffe
jinja2-humanize-extension jsonpatch mako oauthlib py-key-value-aio pycparser pydocket
python-json-logger readchar redis requests-oauthlib rich-rst ruamel-yaml semver sqlalchemy
text-unidecode tzlocal uncalled-for uvicorn whenever"
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
# POT 0.9.7.post1's manylinux wheel is 33 MB, which with DuckDB's 25 MB and the rest passes the
# device tool's 64 MiB carry budget; 0.9.6.post1's is 1.5 MB (same network-simplex solver, and
# the project needs >= 0.9.4). SQLAlchemy stays below 2.1 as in pyproject.toml.
POT_VERSION="${POT_VERSION:-0.9.6.post1}"
PINS=("prefect==$(version prefect)" "duckdb==$(version duckdb)" "POT==$POT_VERSION"
      "sqlalchemy==$(version SQLAlchemy)")
PRESENT="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio
h11 h5py hf-xet httpcore httpx humanize huggingface-hub hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas
pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow
pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark
pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex
requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision
tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp"
mkdir -p "$DIR"
"$PY" -m pip download --quiet --dest "$DIR" --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  "${PINS[@]}"
norm() { echo "$1" | tr '[:upper:]_.' '[:lower:]--'; }
declare -A have=()
for p in $PRESENT; do have[$(norm "$p")]=1; done
if [ "$SERVER" = 0 ]; then for p in $SERVER_ONLY; do have[$(norm "$p")]=1; done; fi
for wheel in "$DIR"/*.whl; do
  name=$(norm "$(basename "$wheel" | cut -d- -f1)")
  if [ -n "${have[$name]:-}" ]; then rm -f "$wheel"; fi
done
size=$(du -sm "$DIR" | cut -f1)
[ "$size" -lt 58 ] || echo "warning: $DIR holds $size MiB; with the repository (about 6 MiB) a device call may pass its 64 MiB carry budget" >&2
echo "$(ls "$DIR"/*.whl | wc -l) wheels, $(du -sh "$DIR" | cut -f1) in $DIR (${PINS[*]} and what they need)"
