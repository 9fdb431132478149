#!/usr/bin/env bash
# scripts/gpu-check.sh: the whole conformance suites on one NVIDIA GPU, as is (docs/gpu.md).
#
#   bash scripts/gpu-check.sh                      # install the CUDA builds, run, write reports
#   bash scripts/gpu-check.sh --dl-device=cpu --skip-install   # the CPU dry run: same steps
#
# Steps (the same for --dl-device=cpu, with CPU builds):
#   1. device facts: nvidia-smi, what dlconform discovers, compute capability, TF32 switches;
#   2. two virtual environments, because tensorflow[and-cuda] and a CUDA torch each pin their
#      own NVIDIA libraries: venv-torch = CUDA torch + tensorflow-cpu, venv-tf =
#      tensorflow[and-cuda] + CPU torch (no NVIDIA pins beside TensorFlow's);
#   3. the GPU-path unit tests (discovery, assignment, TF32 policy, lint, async stall on gloo);
#   4. the shipped suites per framework with --dl-device=DEVICE (on one GPU the multi-replica
#      claims run on logical devices: TensorFlow logical GPUs, torch ranks sharing the GPU
#      over gloo), each writing a JSON report and an HTML page;
#   5. a summary of the reports' counts; the exit status is the worst step's.
# Budget: the suites aim at 8 minutes in all on a current data-centre GPU (--time-limit per
# framework run); installs come on top and depend on the network and pip's cache.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE=gpu
SKIP_INSTALL=0
OUT=gpu-check
CLAIMS=""
REPLICAS=2
TIME_LIMIT=240
FRAMEWORKS="torch tensorflow"
WORKERS=""
TORCH_VERSION=2.13.0
TF_VERSION=2.21.0
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

usage() {
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --dl-device=gpu|cpu   device kind of the runs (default gpu; cpu: the dry run)
  --skip-install        use the current Python environment for both frameworks
  --out=DIR             reports, logs and venvs go here (default $OUT)
  --claims=GLOBS        --dl-claims for the suite runs (default: every claim)
  --frameworks=LIST     comma-separated, from torch,tensorflow (default both)
  --replicas=N          --dl-replicas (default $REPLICAS: logical devices / ranks per strategy)
  -n N                  xdist workers per run (default: cores/2, at most 8)
  --time-limit=S        seconds per framework run (default $TIME_LIMIT)
EOF
}

for arg in "$@"; do
  case "$arg" in
    --dl-device=gpu|--dl-device=cpu) DEVICE="${arg#*=}" ;;
    --dl-device=*) echo "gpu-check: --dl-device=${arg#*=} is not gpu or cpu; use --dl-device=gpu (or cpu for the dry run)" >&2; exit 2 ;;
    --skip-install) SKIP_INSTALL=1 ;;
    --out=*) OUT="${arg#*=}" ;;
    --claims=*) CLAIMS="${arg#*=}" ;;
    --frameworks=*) FRAMEWORKS="$(echo "${arg#*=}" | tr ',' ' ')" ;;
    --replicas=*) REPLICAS="${arg#*=}" ;;
    --time-limit=*) TIME_LIMIT="${arg#*=}" ;;
    -n=*) WORKERS="${arg#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) if [ "${prev:-}" = "-n" ]; then WORKERS="$arg"; elif [ "$arg" != "-n" ]; then
         echo "gpu-check: unknown argument '$arg'; see --help" >&2; exit 2; fi ;;
  esac
  prev="$arg"
done
for fw in $FRAMEWORKS; do
  case "$fw" in torch|tensorflow) ;; *) echo "gpu-check: --frameworks has '$fw'; use torch and/or tensorflow" >&2; exit 2 ;; esac
done
if [ -z "$WORKERS" ]; then
  cores=$(nproc)
  WORKERS=$(( cores / 2 < 1 ? 1 : (cores / 2 > 8 ? 8 : cores / 2) ))
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
status=0
step() { echo; echo "=== gpu-check: $*"; }
worst() { if [ "$1" -gt "$status" ]; then status=$1; fi; }

# --- 1. device facts ------------------------------------------------------------------
step "device facts (--dl-device=$DEVICE)"
if [ "$DEVICE" = gpu ]; then
  if ! nvidia-smi -L; then
    echo "gpu-check: --dl-device=gpu needs an NVIDIA GPU, but nvidia-smi failed; run with --dl-device=cpu for the dry run" >&2
    exit 2
  fi
  nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total,driver_version --format=csv
fi

# --- 2. environments ----------------------------------------------------------------------
grep -v -E '^(torch|tensorflow-cpu)==' constraints/ci.txt > "$OUT/constraints-gpu.txt"
EXTRAS=".[torch,onnx,serve,transformers,xdist]"
python_for() {  # the interpreter that runs framework $1
  if [ "$SKIP_INSTALL" = 1 ]; then command -v python; else echo "$OUT/venv-$1/bin/python"; fi
}
install_env() {  # install_env FRAMEWORK: one venv, its frameworks in the build this device needs
  local fw=$1 venv="$OUT/venv-$1" py
  [ -x "$venv/bin/python" ] || python -m venv "$venv" || return 1
  py="$venv/bin/python"
  "$py" -m pip install -q --upgrade pip || return 1
  if [ "$fw" = torch ]; then
    if [ "$DEVICE" = gpu ]; then  # PyPI's Linux torch wheel is the CUDA build, with its NVIDIA pins
      "$py" -m pip install -q "torch==$TORCH_VERSION" || return 1
    else
      "$py" -m pip install -q "torch==$TORCH_VERSION" --index-url "$TORCH_CPU_INDEX" || return 1
    fi
    "$py" -m pip install -q -c "$OUT/constraints-gpu.txt" "tensorflow-cpu==$TF_VERSION" -e "$EXTRAS" || return 1
  else
    # The CPU torch first (no NVIDIA pins), then TensorFlow with the NVIDIA libraries it pins.
    "$py" -m pip install -q "torch==$TORCH_VERSION" --index-url "$TORCH_CPU_INDEX" || return 1
    local tf="tensorflow-cpu==$TF_VERSION"
    [ "$DEVICE" = gpu ] && tf="tensorflow[and-cuda]==$TF_VERSION"
    "$py" -m pip install -q -c "$OUT/constraints-gpu.txt" "$tf" -e "$EXTRAS" || return 1
  fi
  "$py" -m pip freeze > "$OUT/pip-freeze-$fw.txt"
}
for fw in $FRAMEWORKS; do
  if [ "$SKIP_INSTALL" = 1 ]; then
    step "environment for $fw: the current one ($(python_for "$fw"))"
  else
    step "installing the $DEVICE builds for $fw into $OUT/venv-$fw"
    install_env "$fw" > "$OUT/install-$fw.log" 2>&1 || { echo "install failed: see $OUT/install-$fw.log" >&2; tail -5 "$OUT/install-$fw.log" >&2; exit 1; }
  fi
done

for fw in $FRAMEWORKS; do
  step "what $fw sees"
  TF_CPP_MIN_LOG_LEVEL=2 "$(python_for "$fw")" - "$fw" "$DEVICE" 2>"$OUT/device-facts-$fw.err" <<'EOF' | tee "$OUT/device-facts-$fw.txt"
import sys
from pytest_dlconform.core import devices
from pytest_dlconform.checks import tf32
fw, device = sys.argv[1], sys.argv[2]
print("dlconform discovers:", devices.discover().describe())
if fw == "torch":
    import torch
    print("torch", torch.__version__, "CUDA", torch.version.cuda, "devices", torch.cuda.device_count())
    for i in range(torch.cuda.device_count()):
        cap = ".".join(map(str, torch.cuda.get_device_capability(i)))
        print(f"  cuda:{i} {torch.cuda.get_device_name(i)} capability {cap} bf16: {devices.bf16_support(cap) or 'yes'}")
    print("  TF32: matmul", tf32.torch_precision(torch, "matmul"), "conv", tf32.torch_precision(torch, "conv"))
    if device == "gpu" and not torch.cuda.is_available():
        sys.exit("torch sees no CUDA device: this environment's torch is not a CUDA build or the driver is too old")
else:
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    print("tensorflow", tf.__version__, "built with CUDA", tf.test.is_built_with_cuda(), "GPUs", len(gpus))
    for g in gpus:
        print("  ", g.name, tf.config.experimental.get_device_details(g))
    print("  TF32:", tf.config.experimental.tensor_float_32_execution_enabled())
    if device == "gpu" and not gpus:
        sys.exit("TensorFlow sees no GPU: install tensorflow[and-cuda] (this script does without --skip-install)")
EOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu-check: the $fw facts step failed:" >&2; tail -3 "$OUT/device-facts-$fw.err" >&2; worst 1; }
done

# --- 3. the GPU-path unit tests ---------------------------------------------------------
first=$(echo "$FRAMEWORKS" | cut -d' ' -f1)
step "GPU-path unit tests"
"$(python_for "$first")" -m pytest -q -p no:cacheprovider tests/unit/test_devices_gpu.py tests/unit/test_session_devices.py \
  tests/unit/test_tf32_policy.py tests/unit/test_suite_lint.py tests/unit/test_gpu_oracles.py \
  tests/integration/test_gpu_paths_on_cpu.py 2>&1 | tail -3
worst "${PIPESTATUS[0]}"

# --- 4. the suites ------------------------------------------------------------------------
for fw in $FRAMEWORKS; do
  py="$(python_for "$fw")"
  args=(-n "$WORKERS" -p no:cacheprovider -W ignore::DeprecationWarning --dl-device="$DEVICE" --dl-framework="$fw"
        --dl-profile=ci --dl-seed=0 --dl-replicas="$REPLICAS"
        --dl-report="$OUT/report-$fw-$DEVICE.json" --dl-html="$OUT/report-$fw-$DEVICE.html"
        --junitxml="$OUT/report-$fw-$DEVICE.xml")
  [ -n "$CLAIMS" ] && args+=(--dl-claims="$CLAIMS")
  step "suites for $fw on $DEVICE: dlconform run ${args[*]}"
  start=$(date +%s)
  timeout --kill-after=20 "$TIME_LIMIT" "$py" -c 'import sys; from pytest_dlconform.cli import main; sys.exit(main())' \
    run "${args[@]}" > "$OUT/run-$fw-$DEVICE.log" 2>&1
  rc=$?
  echo "exit status $rc after $(( $(date +%s) - start )) s (log: $OUT/run-$fw-$DEVICE.log)"
  [ "$rc" -eq 124 ] && echo "the run passed its --time-limit of $TIME_LIMIT s: the report, if any, is partial" >&2
  grep -E "^(tests|claims):" "$OUT/run-$fw-$DEVICE.log" || tail -5 "$OUT/run-$fw-$DEVICE.log"
  worst "$rc"
done

# --- 5. summary -----------------------------------------------------------------------------
step "summary"
python - "$OUT" "$DEVICE" $FRAMEWORKS <<'EOF' || worst 1
import json, sys, pathlib
out, device, fws = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
for fw in fws:
    path = out / f"report-{fw}-{device}.json"
    if not path.is_file():
        print(f"{fw}: no report ({path} missing)")
        continue
    doc = json.loads(path.read_text())
    counts = doc["counts"]
    print(f"{fw} on {device}: tests {counts['tests']}; claims {counts['claims']}; exit status {doc.get('exit_status')}; "
          f"devices: {doc.get('environment', {}).get('devices', '?')}")
    print(f"  HTML: {path.with_suffix('.html')}")
EOF
echo "gpu-check: exit status $status"
exit "$status"
