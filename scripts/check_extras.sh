#!/usr/bin/env bash
# Install owrl's wheel with each optional extra on its own, each in a fresh virtual environment,
# and check there that the feature the extra exists for works; the bare wheel (no extra) too,
# together with the message each extra's feature gives when its extra is missing.
#
#   nice -n 19 scripts/check_extras.sh                 # every extra, plus the bare wheel
#   nice -n 19 scripts/check_extras.sh bare serve      # only these
#   scripts/check_extras.sh --strict                   # a missing-extra message that does not
#                                                      # name its extra (or is a traceback) fails too
#
# One line per extra: name, PASS/FAIL, seconds (install + smoke); a failure shows the end of its
# log. Exit status 1 when any failed. Settings (environment):
#   PYTHON          builds the wheel and makes the venvs (default: .venv/bin/python; needs setuptools>=77)
#   TORCH_SPEC      installed first for models and train (default: torch==2.13.0, the CPU build
#                   scripts/setup.sh installs: installed later, pip would pull a multi-GB CUDA build)
#   PIP_CACHE_DIR   pip's cache, shared by the runs (default: ~/.cache/pip): reruns download nothing
#   KEEP=1          keep the venvs and the work folder (default: only the logs are kept)
#   TAIL            lines of a failed log shown (default 15)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/pip}
KEEP=${KEEP:-0}
TAIL=${TAIL:-15}
ALL=(bare scaffold openai excel miniwob serve scale bench models train)

STRICT=0
WANTED=()
for arg in "$@"; do
  case $arg in
    --strict) STRICT=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) [[ " ${ALL[*]} " == *" $arg "* ]] || { echo "unknown extra '$arg' (known: ${ALL[*]})" >&2; exit 2; }
       WANTED+=("$arg") ;;
  esac
done
[ ${#WANTED[@]} -gt 0 ] || WANTED=("${ALL[@]}")
[ -x "$PY" ] || { echo "no Python at $PY: run scripts/setup.sh or set PYTHON" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/owrl-extras.XXXXXX")
LOGS=$WORK/logs
SMOKE=$WORK/smoke
mkdir -p "$LOGS" "$SMOKE"
cleanup() {
  if [ "$KEEP" != 1 ]; then
    rm -rf "$WORK/src" "$WORK/wheel" "$WORK/venvs" "$WORK/runs" "$SMOKE"
  fi
}
trap cleanup EXIT

# ---------------------------------------------------------------------------- the wheel
# Built from a copy of the working tree (tracked and untracked files that git does not ignore), so
# a stale build/ folder of the checkout cannot add files the tree no longer has.
echo "work folder: $WORK"
started=$SECONDS
mkdir -p "$WORK/src"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$ROOT/$f" ] && printf '%s\0' "$f"; done |
    tar -C "$ROOT" --null -T - -cf - | tar -C "$WORK/src" -xf -
else
  tar -C "$ROOT" --exclude=.venv --exclude=build --exclude='*.egg-info' --exclude=.git -cf - . | tar -C "$WORK/src" -xf -
fi
# no build isolation: PYTHON already has the build backend pyproject.toml asks for
if ! "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/wheel" "$WORK/src" >"$LOGS/wheel.log" 2>&1; then
  echo "wheel     FAIL $((SECONDS - started))s"; tail -n "$TAIL" "$LOGS/wheel.log" | sed 's/^/    /'; exit 1
fi
WHEEL=$(ls "$WORK"/wheel/*.whl)
echo "wheel     $(basename "$WHEEL") ($((SECONDS - started))s)"
# the bench scripts and the example flows are not in the wheel: the smoke tests use the copies
BENCH_PLOT=$WORK/src/bench/plot_rl_diagnostics.py
FLOW=$WORK/src/examples/flows/add-oxford-shirts.json

# ---------------------------------------------------------------------------- smoke scripts
# named check_*.py: a script named like a package (openai.py) would shadow that package
cat >"$SMOKE/check_origin.py" <<'EOF'
# owrl and its plugins are imported from this venv's wheel install (not a checkout, not another venv)
import importlib, pathlib, sys
for name in ["owrl_sdk", "builtin_tools", "builtin_judges", "owrl_memory", "owrl_miniwob", "owrl_baselines",
             "owrl_openwebrl", "owrl_train", "owrl_demo", "owrl_shop_adapter", "owrl_templates"]:
    mod = importlib.import_module(name)
    where = pathlib.Path(mod.__file__).resolve()
    assert where.is_relative_to(pathlib.Path(sys.prefix).resolve()), f"{name} comes from {where}, not {sys.prefix}"
print("owrl_sdk", importlib.import_module("owrl_sdk.version").__version__, "from", sys.prefix)
EOF

cat >"$SMOKE/check_imports.py" <<'EOF'
# every module named on the command line imports
import importlib, sys
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    print(name, getattr(mod, "__version__", ""))
EOF

# the tests' JSON stand-in server, beside the checks (a script's folder is on its import path)
cp "$ROOT/tests/json_server.py" "$SMOKE/json_server.py"

cat >"$SMOKE/check_openai.py" <<'EOF'
# the openai backend (policy `openai`, judge backend "openai") against a chat-completions stand-in on 127.0.0.1
import openai  # noqa: F401
from json_server import JsonServer
from owrl_openwebrl.backend import Sampling
from owrl_openwebrl.openai_backend import OpenAIBackend
from owrl_openwebrl.prompt import Prompt

reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
server = JsonServer(lambda path, headers, body: (200, reply))
backend = OpenAIBackend(base_url=server.url, model="m", retries=0)
prompt = Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
gen = backend.generate([prompt], Sampling.from_options({}))[0]
server.close()
assert gen.text == "fine" and gen.completion_tokens == 1, gen
seen = server.requests
assert seen and seen[0][0] == "/v1/chat/completions" and seen[0][2]["model"] == "m", seen
print("openai backend round trip:", gen.text)
EOF

cat >"$SMOKE/check_excel.py" <<'EOF'
# a batch's rows read from an .xlsx workbook (owrl run --inputs rows.xlsx)
import openpyxl
from owrl_sdk.batch import read_rows

book = openpyxl.Workbook()
sheet = book.active
for row in (["query", "size"], ["blue shirt", "M"], [None, None], ["tote bag", 3]):
    sheet.append(row)
book.save("rows.xlsx")
rows = read_rows("rows.xlsx")
assert len(rows) == 2 and "blue shirt" in repr(rows[0]), rows
print(len(rows), "rows:", rows)
EOF

cat >"$SMOKE/check_count.py" <<'EOF'
# stdin: a JSON list (owrl tasks SUITE --json); at least argv[1] entries
import json, sys
items = json.load(sys.stdin)
assert len(items) >= int(sys.argv[1]), items
print(len(items), "entries, first:", items[0].get("id"))
EOF

cat >"$SMOKE/check_serve.py" <<'EOF'
# owrl serve answers on a free port: /health, the OpenAPI document, GET /v1/jobs; then it is stopped
import json, socket, subprocess, sys, time, urllib.request

from owrl_sdk.server.app import create_app  # noqa: F401 - the app factory imports

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
port = sock.getsockname()[1]
sock.close()
base = f"http://127.0.0.1:{port}"
proc = subprocess.Popen(["owrl", "serve", "--no-auth", "--port", str(port), "--data-dir", "serve-data"])
try:
    deadline = time.monotonic() + 120
    while True:
        try:
            health = urllib.request.urlopen(base + "/health", timeout=5)
            break
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"owrl serve exited with {proc.returncode} before answering")
            if time.monotonic() > deadline:
                sys.exit("owrl serve did not answer /health within 120 s")
            time.sleep(0.5)
    print("/health", health.status, health.read()[:200].decode())
    spec = json.load(urllib.request.urlopen(base + "/openapi.json", timeout=10))
    assert any(p.startswith("/v1/jobs") for p in spec["paths"]), sorted(spec["paths"])
    jobs = urllib.request.urlopen(base + "/v1/jobs", timeout=10)
    print("/v1/jobs", jobs.status, jobs.read()[:200].decode())
    assert jobs.status == 200
finally:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
EOF

cat >"$SMOKE/check_scale.py" <<'EOF'
# Ray starts a local cluster of its own (as owrl's Ray backend does: never one already running
# here; its files in a short folder of its own, argv[1]) and runs a task; owrl's Ray backend finds ray
import sys

import ray
from owrl_sdk.raybackend import EpisodeWorker, RayOptions, import_ray  # noqa: F401

assert import_ray() is ray
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
         _node_ip_address="127.0.0.1", _temp_dir=sys.argv[1])
try:
    @ray.remote
    def square(x):
        return x * x

    assert ray.get(square.remote(7)) == 49
    print("ray", ray.__version__, "ran a task on", ray.cluster_resources())
finally:
    ray.shutdown()
EOF

cat >"$SMOKE/metrics.jsonl" <<'EOF'
{"step": 0, "rl/success_rate": 0.25, "rl/probe_success": 0.0, "rl/parse_error_rate": 0.5, "rl/kl": 0.0, "rl/entropy": 2.1, "rl/adapter_drift": 0.0}
{"step": 1, "rl/success_rate": 0.5, "rl/probe_success": 0.5, "rl/parse_error_rate": 0.25, "rl/kl": 0.01, "rl/entropy": 1.9, "rl/adapter_drift": 0.1}
EOF

cat >"$SMOKE/sft.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "Task: say done."}, {"role": "assistant", "content": "<tool_call>{\"name\": \"done\", \"arguments\": {\"response\": \"x\"}}</tool_call>"}]}
EOF

cat >"$SMOKE/check_models.py" <<'EOF'
# a model policy's backend: a tiny Qwen2-VL checkpoint (argv[1]) answers an image prompt, then a
# LoRA adapter made on it loads through peft and answers too
import io, sys, warnings
warnings.simplefilter("ignore")
from PIL import Image
from owrl_openwebrl.backend import Sampling, VLBackend
from owrl_openwebrl.prompt import Prompt
from owrl_sdk.plugins import Plugins
from owrl_train.model import TrainableVL

buf = io.BytesIO()
Image.new("RGB", (112, 112), "white").save(buf, "JPEG")
prompt = Prompt(messages=[{"role": "user", "content": [{"type": "image", "image": buf.getvalue()},
                                                      {"type": "text", "text": "Click the button."}]}])
gen = VLBackend(sys.argv[1], quantize="none").generate([prompt], Sampling(max_new_tokens=8, seed=1))[0]
assert gen.completion_tokens > 0 and gen.image_tokens > 0, gen
print("generated", gen.completion_tokens, "tokens for", gen.image_tokens, "image tokens")
TrainableVL(sys.argv[1], catalogue=Plugins().catalogue, lora_r=4, seed=0).save_adapter(__import__("pathlib").Path("adapter"))
gen = VLBackend("adapter", quantize="none").generate([prompt], Sampling(max_new_tokens=8, seed=1))[0]
assert gen.completion_tokens > 0, gen
print("with the LoRA adapter: generated", gen.completion_tokens, "tokens")
EOF

# ---------------------------------------------------------------------------- helpers
# step CMD...: run CMD and show it in the log; a failure names the command and stops the extra
step() {
  printf '\n+ %s\n' "$*"
  local rc=0
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then printf 'FAILED (exit %d): %s\n' "$rc" "$*"; return "$rc"; fi
}

# has TEXT CMD...: run CMD; its output must contain TEXT
has() {
  local want=$1; shift
  local out
  out=$("$@" 2>&1) || { printf '%s\n' "$out"; return 1; }
  printf '%s\n' "$out" | tail -n 20
  [[ $out == *"$want"* ]] || { echo "output lacks '$want'"; return 1; }
}

# missing EXTRA CMD...: the feature of EXTRA, run without it; its message goes to $LOGS/missing.txt
# as  EXTRA|named|message  (named: says openwebrl-sdk[EXTRA]), unnamed (a message without it) or
# traceback (an uncaught exception), or as EXTRA|ran|... when the command did not fail at all
missing() {
  local extra=$1; shift
  local out rc=0 kind message
  out=$(timeout 180 "$@" 2>&1) || rc=$?
  if [[ $out == *"Traceback (most recent call last)"* ]]; then
    kind=traceback; message=$(printf '%s\n' "$out" | grep -E '^[A-Za-z_.]*(Error|Exception)' | tail -n 1 || true)
  elif [[ $out == *"openwebrl-sdk[$extra]"* ]]; then
    kind=named; message=$(printf '%s\n' "$out" | grep -F -e "openwebrl-sdk[$extra]" | head -n 1 || true)
  elif [ "$rc" != 0 ]; then
    kind=unnamed; message=$(printf '%s\n' "$out" | grep -E 'Error' | tail -n 1 || true)
  else
    kind=ran; message=$(printf '%s\n' "$out" | tail -n 1)
  fi
  [ -n "$message" ] || message=$(printf '%s\n' "$out" | tail -n 1)
  message=$(printf '%s' "$message" | tr -s ' \n' ' ' | sed 's/ *$//')
  printf '\n+ (without %s) %s\n%s\n' "$extra" "$*" "$out"
  printf '%s|%s|%s|%s\n' "$extra" "$kind" "$*" "$message" >>"$LOGS/missing.txt"
}

# ---------------------------------------------------------------------------- per extra
smoke_bare() {
  step has "Commands:" owrl --help
  step owrl --version
  step owrl plugins
  step sh -c 'owrl tasks demo-shop --json | python "$0/check_count.py" 1' "$SMOKE"
  local first
  first=$(owrl tasks demo-shop --json | python -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
  : >"$LOGS/missing.txt"
  missing scaffold owrl new tool read-prices --out gen
  missing openai env OWRL_OPENAI_BASE_URL=http://127.0.0.1:9/v1 owrl run --policy openai --task "say hi" --url about:blank --max-steps 1 --out runs
  printf 'not a workbook' >rows.xlsx
  missing excel owrl run --flow "$FLOW" --inputs rows.xlsx --out batch
  missing miniwob owrl tasks miniwob
  missing serve owrl serve --no-auth --port 9 --data-dir serve-data
  missing scale owrl eval --suite demo-shop --tasks "$first" --policy oracle --backend ray --out eval-ray
  missing bench python "$BENCH_PLOT" "$SMOKE/metrics.jsonl" --out curves.png
  missing models owrl model tiny tiny --family llama
  missing models env COLUMNS=200 owrl doctor
  missing train owrl train sft --data "$SMOKE/sft.jsonl" --model tiny --out sft
}

smoke_scaffold() {
  step python "$SMOKE/check_imports.py" cookiecutter
  step owrl new tool read-prices --out gen
  step owrl new judge strict-total --out gen
  step owrl new site-adapter my-shop --domain shop.example --out gen
  local f
  for f in gen/owrl_read_prices/pyproject.toml gen/owrl_read_prices/owrl_read_prices/__init__.py \
           gen/owrl_read_prices/tests/test_tool.py gen/owrl_strict_total/owrl_strict_total/__init__.py \
           gen/owrl_my_shop/owrl_my_shop/__init__.py; do
    step test -s "$f"
  done
  step grep -q shop.example gen/owrl_my_shop/owrl_my_shop/__init__.py gen/owrl_my_shop/pyproject.toml gen/owrl_my_shop/README.md
  # the generated package installs and owrl loads it as a plugin
  step python -m pip install -q --no-deps ./gen/owrl_read_prices
  step has read-prices owrl plugins
}

smoke_openai() {
  step python "$SMOKE/check_openai.py"
}

smoke_excel() {
  step python "$SMOKE/check_excel.py"
}

smoke_miniwob() {
  step python "$SMOKE/check_imports.py" miniwob
  step sh -c 'owrl tasks miniwob --json | python "$0/check_count.py" 10' "$SMOKE"
}

smoke_serve() {
  step python "$SMOKE/check_imports.py" fastapi starlette uvicorn python_multipart owrl_sdk.server.app
  step timeout 300 python "$SMOKE/check_serve.py"
}

smoke_scale() {
  local raydir
  raydir=$(mktemp -d /tmp/owrl-ray.XXXXXX)  # short: Ray's socket paths must stay under 107 characters
  step env RAY_USAGE_STATS_ENABLED=0 timeout 300 python "$SMOKE/check_scale.py" "$raydir"
  [ "$KEEP" = 1 ] || rm -rf "$raydir"
}

smoke_bench() {
  step python "$SMOKE/check_imports.py" matplotlib
  step python "$BENCH_PLOT" "$SMOKE/metrics.jsonl" --labels smoke --out curves.png
  step test -s curves.png
}

model_modules() {
  local mods=(torch transformers peft accelerate huggingface_hub tokenizers safetensors owrl_train.model "$@")
  [ "$(uname -s)" = Darwin ] || mods+=(bitsandbytes)
  step python "$SMOKE/check_imports.py" "${mods[@]}"
}

smoke_models() {
  model_modules gguf
  step has "sft" owrl train --help
  step owrl model tiny tiny --family qwen2-vl
  step timeout 900 python "$SMOKE/check_models.py" tiny
}

smoke_train() {
  model_modules tensorboard
  step has "sft" owrl train --help
  step owrl model tiny tiny --family llama
  step timeout 900 owrl train sft --data "$SMOKE/sft.jsonl" --model tiny --out sft --epochs 1 --lora-r 4
  step test -s sft/adapter/adapter_model.safetensors
  step sh -c 'ls sft/tensorboard/events.out.tfevents.* >/dev/null'
}

# run_extra EXTRA: a fresh venv with the wheel (and the extra), then its smoke test in an empty folder
run_extra() {
  local extra=$1 venv=$WORK/venvs/$1 run=$WORK/runs/$1
  mkdir -p "$run" "$WORK/home/$extra"
  step "$PY" -m venv "$venv"
  step "$venv/bin/python" -m pip install -q --upgrade pip
  case $extra in models|train) step "$venv/bin/python" -m pip install -q "$TORCH_SPEC" ;; esac
  if [ "$extra" = bare ]; then
    step "$venv/bin/python" -m pip install -q "$WHEEL"
  else
    step "$venv/bin/python" -m pip install -q "$WHEEL[$extra]"
  fi
  step "$venv/bin/python" -m pip check
  echo "install: $((SECONDS - t0))s" >"$LOGS/$extra.install"
  # only this venv: its bin first, no checkout on the path, owrl's settings and caches in a folder of its own
  local v
  for v in $(compgen -e); do
    case $v in OWRL_*|OPENAI_*|PYTHONPATH|PYTHONHOME|PYTHONSTARTUP|VIRTUAL_ENV|RAY_ADDRESS|HF_*) unset "$v" ;; esac
  done
  export VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
  export no_proxy=$NO_PROXY XDG_CONFIG_HOME=$WORK/home/$extra/config XDG_CACHE_HOME=$WORK/home/$extra/cache
  export XDG_DATA_HOME=$WORK/home/$extra/data XDG_STATE_HOME=$WORK/home/$extra/state HF_HOME=$WORK/home/$extra/hf
  cd "$run"
  step test "$(command -v owrl)" = "$venv/bin/owrl"
  step python "$SMOKE/check_origin.py"
  "smoke_$extra"
}

# ---------------------------------------------------------------------------- run
failed=0
results=()
for extra in "${WANTED[@]}"; do
  t0=$SECONDS
  set +e
  (set -euo pipefail; run_extra "$extra") >"$LOGS/$extra.log" 2>&1
  rc=$?
  set -e
  secs=$((SECONDS - t0))
  install=$(sed -n 's/^install: //p' "$LOGS/$extra.install" 2>/dev/null || true)
  if [ "$rc" = 0 ]; then
    line=$(printf '%-9s PASS %5ds   (install %s)' "$extra" "$secs" "${install:-?}")
    echo "$line"
  else
    failed=1
    line=$(printf '%-9s FAIL %5ds   (log: %s)' "$extra" "$secs" "$LOGS/$extra.log")
    echo "$line"
    tail -n "$TAIL" "$LOGS/$extra.log" | sed 's/^/    /'
  fi
  results+=("$line")
  [ "$KEEP" = 1 ] || rm -rf "$WORK/venvs/$extra"
done

if [ -s "$LOGS/missing.txt" ]; then
  echo
  echo "without its extra (bare wheel): the message each feature gives"
  while IFS='|' read -r extra kind cmd message; do
    case $kind in
      named) mark=ok ;;
      *) mark=WARN; [ "$STRICT" = 1 ] && { mark=FAIL; failed=1; } ;;
    esac
    printf '  %-4s %-8s %-9s %s\n' "$mark" "$extra" "$kind" "${cmd//$WORK/\$WORK}"
    printf '       %s\n' "$message"
  done <"$LOGS/missing.txt"
fi

echo
echo "logs: $LOGS"
exit "$failed"
