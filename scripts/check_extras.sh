#!/usr/bin/env bash
# Install owrl's wheel with each optional extra on its own, each in a fresh virtual environment,
# and check there that the feature the extra exists for works; the bare wheel (no extra) too,
# together with the message each extra's feature gives when its extra is missing. With --minimums
# every declared direct dependency of the set is held at its declared minimum instead of the newest.
#
#   nice -n 19 scripts/check_extras.sh                 # every extra, plus the bare wheel
#   nice -n 19 scripts/check_extras.sh bare serve      # only these
#   scripts/check_extras.sh --strict                   # a missing-extra message that does not
#                                                      # name its extra (or is a traceback) fails too
#   nice -n 10 scripts/check_extras.sh --minimums      # bare and the extras up to bench, at their minimums
#   scripts/check_extras.sh --minimums --with-core openai   # an extra's minimums together with the core's
#   scripts/check_extras.sh --pins serve               # print each set's constraints and stop (no install)
#
# Sets: bare (also called core: project.dependencies alone) and the extras scaffold openai excel
# miniwob serve scale bench models train. Both modes run the same check per set.
# --minimums: a constraints file of name==minimum per set: each requirement of the set (of the
# core too with --with-core; bare is the core) whose marker holds for PYTHON, at its lower bound
# (>=, ~=, ==); one without a lower bound is left free. Where no release of the declared minimum
# exists for PYTHON, the lowest release the specifier admits is pinned and the log says so. For
# models and train, torch stays at TORCH_SPEC (installed first): its own declared minimum is the one
# not checked.
# One line per set: name, PASS/FAIL, seconds (install + smoke); a failure shows the end of its log;
# logs keep no index host names. Exit status 1 when any failed. Settings (environment):
#   PYTHON          builds the wheel and makes the venvs (default: .venv/bin/python; needs setuptools>=77)
#   TORCH_SPEC      installed first for models and train (default: torch==2.13.0, the CPU build
#                   scripts/setup.sh installs: installed later, pip would pull a multi-GB CUDA build)
#   PIP_CACHE_DIR   pip's cache, shared by the runs (default: ~/.cache/pip): reruns download nothing
#   KEEP=1          keep the venvs and the work folder (default: only the logs are kept)
#   TAIL            lines of a failed log shown (default 15; 30 with --minimums)
#   OVERRIDE        with --minimums: pins put in place of the computed ones, "name==version ..."
#                   (to try another minimum of a package without editing pyproject.toml)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$HOME/.cache/pip}
KEEP=${KEEP:-0}
ALL=(bare scaffold openai excel miniwob serve scale bench models train)

STRICT=0
MINIMUMS=0
WITH_CORE=0
PINS_ONLY=0
WANTED=()
for arg in "$@"; do
  case $arg in
    --strict) STRICT=1 ;;
    --minimums) MINIMUMS=1 ;;
    --with-core) WITH_CORE=1 ;;
    --pins) PINS_ONLY=1; MINIMUMS=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    core) WANTED+=(bare) ;;
    *) [[ " ${ALL[*]} " == *" $arg "* ]] || { echo "unknown set '$arg' (known: ${ALL[*]}; core is bare)" >&2; exit 2; }
       WANTED+=("$arg") ;;
  esac
done
if [ "$MINIMUMS" = 1 ]; then
  MIN_ALL=("${ALL[@]}")
  [ ${#WANTED[@]} -gt 0 ] || WANTED=("${MIN_ALL[@]}")
else
  [ "$WITH_CORE" = 0 ] || { echo "--with-core goes with --minimums" >&2; exit 2; }
  [ -z "${OVERRIDE:-}" ] || { echo "OVERRIDE goes with --minimums" >&2; exit 2; }
  [ ${#WANTED[@]} -gt 0 ] || WANTED=("${ALL[@]}")
fi
if [ "$MINIMUMS" = 1 ]; then TAIL=${TAIL:-30}; else TAIL=${TAIL:-15}; fi
[ -x "$PY" ] || { echo "no Python at $PY: run scripts/setup.sh or set PYTHON" >&2; exit 2; }

if [ "$MINIMUMS" = 1 ]; then WORK=$(mktemp -d "${TMPDIR:-/tmp}/owrl-minimums.XXXXXX")
else WORK=$(mktemp -d "${TMPDIR:-/tmp}/owrl-extras.XXXXXX"); fi
LOGS=$WORK/logs
SMOKE=$WORK/smoke
mkdir -p "$LOGS" "$SMOKE"
cleanup() {
  if [ "$KEEP" != 1 ]; then
    rm -rf "$WORK/src" "$WORK/wheel" "$WORK/venvs" "$WORK/runs" "$WORK/home" "$SMOKE"
  fi
}
trap cleanup EXIT

# Logs keep no index addresses: any URL's host but the loopback's (marked ~ meanwhile), and
# anything shaped like a host name, is masked. pip's notes about a missing local index folder are dropped.
mask() {
  { grep -v "^WARNING: Location 'file:.*' is ignored: it is neither a file nor a directory" || true; } |
  sed -E -e 's#://(127\.0\.0\.1|localhost)([]:/[:space:]"'"'"']|$)#://~\1\2#g' \
         -e 's#([a-zA-Z][a-zA-Z0-9+.-]*://)[^~/[:space:]"'"'"'][^/[:space:]"'"'"']*#\1<host>#g' -e 's#://~#://#g' \
         -e "s#host='[^']*'#host='<host>'#g" \
         -e 's#\b[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.(org|com|net)\b#<host>#g'
}

# ---------------------------------------------------------------------------- the pins (--minimums)
cat >"$WORK/pins.py" <<'EOF'
"""Constraints for one set: every declared direct requirement of it (markers evaluated for this
interpreter) held at its lower bound. argv: pyproject.toml, the set (bare: the core's requirements
alone, else an extra), 0/1 (the core's requirements too), then any overrides (name==version: that
pin instead). Writes name==version lines on stdout and a note per requirement on stderr."""
import re
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

pyproject, wanted, with_core = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
overrides = {canonicalize_name(o.split("==")[0]): o.split("==")[1] for o in sys.argv[4:]}
project = tomllib.load(open(pyproject, "rb"))["project"]
extra = "" if wanted == "bare" else wanted
texts = list(project.get("dependencies", [])) if not extra or with_core else []
if extra:
    texts += project["optional-dependencies"][extra]


def released(name):
    """The versions of NAME pip would install for this interpreter, or None if it cannot say."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name],
                         capture_output=True, text=True)
    found = re.search(r"^Available versions: (.*)$", out.stdout, re.M)
    if out.returncode or not found:
        return None
    versions = []
    for text in found.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            pass
    return versions


pins = {}
for text in texts:
    req = Requirement(text)
    name = canonicalize_name(req.name)
    if req.marker is not None and not req.marker.evaluate({"extra": extra}):
        print(f"  {req.name:18} {text!r}: marker false here, not installed", file=sys.stderr)
        continue
    lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "~=", "==", "===")]
    if not lows:
        print(f"  {req.name:18} {text!r}: no minimum, left free", file=sys.stderr)
        continue
    minimum = max(lows)
    versions = released(req.name)
    if versions is None:
        pin = str(minimum)
        note = f"pinned =={pin} (release list unavailable)"
    else:
        exact = [v for v in versions if v == minimum]
        allowed = sorted(v for v in versions if req.specifier.contains(v) and v >= minimum)
        if exact:
            pin, note = str(exact[0]), f"pinned =={exact[0]}"
        elif allowed:
            pin = str(allowed[0])
            note = f"pinned =={pin}: NO RELEASE {minimum} for this Python; {pin} is the lowest the specifier admits"
        else:
            pin, note = str(minimum), f"pinned =={minimum}: no release admitted at all"
    if name in pins and Version(pins[name]) >= Version(pin):  # the same name in core and extra: the higher
        continue
    if name in overrides:
        pin, note = overrides[name], f"pinned =={overrides[name]} (OVERRIDE)"
    pins[name] = pin
    print(f"  {req.name:18} {text!r}: {note}", file=sys.stderr)
for name, pin in overrides.items():
    if name not in pins:
        pins[name] = pin
        print(f"  {name:18} not a requirement of this set: pinned =={pin} (OVERRIDE)", file=sys.stderr)
for name, pin in pins.items():
    print(f"{name}=={pin}")
EOF

if [ "$PINS_ONLY" = 1 ]; then
  for set in "${WANTED[@]}"; do
    echo "$set:"
    # shellcheck disable=SC2086  # OVERRIDE: words
    "$PY" "$WORK/pins.py" "$ROOT/pyproject.toml" "$set" "$WITH_CORE" ${OVERRIDE:-} 2>&1 >/dev/null | mask
  done
  rm -rf "$WORK"
  exit 0
fi

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
if ! "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/wheel" "$WORK/src" 2>&1 | mask >"$LOGS/wheel.log" \
   || ! ls "$WORK"/wheel/*.whl >/dev/null 2>&1; then
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
# owrl and its plugins are imported from this venv's wheel install (not a checkout, not another
# venv); argv[1], if given: a constraints file (--minimums) whose pins must be what is installed
import importlib, importlib.metadata as md, pathlib, sys
from pip._vendor.packaging.version import Version

prefix = pathlib.Path(sys.prefix).resolve()
for name in ["owrl_sdk", "builtin_tools", "builtin_judges", "owrl_memory", "owrl_miniwob", "owrl_baselines",
             "owrl_openwebrl", "owrl_train", "owrl_demo", "owrl_shop_adapter", "owrl_templates"]:
    where = pathlib.Path(importlib.import_module(name).__file__).resolve()
    assert where.is_relative_to(prefix), f"{name} comes from {where}, not {sys.prefix}"
print("owrl_sdk", importlib.import_module("owrl_sdk.version").__version__, "from", sys.prefix)
for line in open(sys.argv[1]) if sys.argv[1:] else []:
    dist, want = line.strip().split("==")
    try:
        have = md.version(dist)
    except md.PackageNotFoundError:  # an OVERRIDE of a package this set does not install
        print(f"{dist}: not installed (a constraint only)")
        continue
    # a local build label (torch 2.13.0+cpu) is the pinned release all the same
    assert Version(have).public == Version(want).public, f"{dist}: {have} installed, {want} pinned"
    print(f"{dist}=={have}")
EOF

cat >"$SMOKE/check_imports.py" <<'EOF'
# every module named on the command line imports
import importlib, sys
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    print(name, getattr(mod, "__version__", ""))
EOF

cat >"$SMOKE/check_json.py" <<'EOF'
# stdin: JSON (what precedes its first { or [ is skipped); argv[1]: a Python expression over it, `d`, that must be true
import json, sys
text = sys.stdin.read()
d = json.loads(text[text.index("{") if text.lstrip()[:1] != "[" else text.index("["):])
assert eval(sys.argv[1], {"d": d}), f"not true: {sys.argv[1]}\n{json.dumps(d, indent=1)[:3000]}"
print("ok:", sys.argv[1])
EOF

# the tests' JSON stand-in server, beside the checks (a script's folder is on its import path)
cp "$ROOT/tests/json_server.py" "$SMOKE/json_server.py"

cat >"$SMOKE/check_core.py" <<'EOF'
# the core's libraries through owrl's own code: a YAML flow (pyyaml, pydantic), output schemas
# (jsonschema with a referencing registry that fetches nothing), the user folders (platformdirs)
# and the lock files (filelock); argv[1]: an example flow (JSON)
import json, os, pathlib, sys
import yaml
from owrl_sdk import dirs
from owrl_sdk.formats.documents import load_flow
from owrl_sdk.support.files import try_lock
from owrl_sdk.rules.outputschema import check_output, check_schema

data = json.load(open(sys.argv[1]))
pathlib.Path("flow.yaml").write_text(yaml.safe_dump(data))
flow = load_flow("flow.yaml")
assert flow.model_dump(mode="json", exclude_none=True)["turns"] == load_flow(sys.argv[1]).model_dump(mode="json", exclude_none=True)["turns"]
print("flow from YAML:", len(data["turns"]), "turns, as from its JSON")

schema = check_schema({"type": "object", "$defs": {"price": {"type": "number", "minimum": 0}},
                       "properties": {"total": {"$ref": "#/$defs/price"}}, "required": ["total"]})
assert check_output(schema, {"total": 3.5}) is None
bad = check_output(schema, {"total": "x"})
assert bad and "total" in bad, bad
try:
    check_schema({"$ref": "other.json"})
    raise AssertionError("an outside reference was accepted")
except ValueError as err:
    print("refused:", err)
outside = check_output({"$ref": "https://schemas.invalid/x.json"}, {"total": 1})
assert outside and "outside" in outside, outside
print("output schemas:", bad)

home = os.environ["XDG_CONFIG_HOME"]
assert str(dirs.config_dir()).startswith(home), (dirs.config_dir(), home)
print("folders:", dirs.config_dir(), dirs.cache_dir(), dirs.state_dir())
first = try_lock("locks/a.lock")
assert first is not None and try_lock("locks/a.lock") is None
first.release()
again = try_lock("locks/a.lock")
assert again is not None
again.release()
print("locks: held, refused, released")
EOF

cat >"$SMOKE/check_openai.py" <<'EOF'
# owrl's openai backend (policy `openai`, judge backend "openai") against a chat-completions stand-in
# on 127.0.0.1: the first answer refuses max_tokens, so the backend switches to
# max_completion_tokens and retries
import openai
from json_server import JsonServer
from owrl_openwebrl.backend import Sampling
from owrl_openwebrl.openai_backend import OpenAIBackend
from owrl_openwebrl.prompt import Prompt


def answer(path, headers, body):
    if "max_tokens" in body:
        return 400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                          "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                               "param": "max_tokens", "code": "unsupported_parameter"}}
    return 200, {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "all right"}}],
                 "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}}


server = JsonServer(answer)
try:
    backend = OpenAIBackend(base_url=server.url, model="m1", retries=0)
    prompt = Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
    gen = backend.generate([prompt], Sampling.from_options({}))[0]
finally:
    server.close()
assert gen.text == "all right" and gen.completion_tokens == 2, gen
seen = server.requests
assert all(path == "/v1/chat/completions" and body["model"] == "m1" for path, _, body in seen), seen
bodies = [body for _, _, body in seen]
assert [("max_tokens" in b, "max_completion_tokens" in b) for b in bodies] == [(True, False), (False, True)], bodies
print("openai", openai.__version__, "round trip after the token-name switch:", gen.text)
EOF

cat >"$SMOKE/check_excel.py" <<'EOF'
# batch rows read from an .xlsx workbook (owrl run --inputs rows.xlsx)
import openpyxl
from owrl_sdk.flows.batch import read_rows

book = openpyxl.Workbook()
for row in (["query", "qty"], ["red scarf", 2], [None, None], ["tote bag", "L"]):
    book.active.append(row)
book.save("rows.xlsx")
rows = read_rows("rows.xlsx")
assert len(rows) == 2 and "red scarf" in repr(rows[0]) and "tote bag" in repr(rows[1]), rows
print("openpyxl", openpyxl.__version__, "rows:", rows)
EOF

cat >"$SMOKE/check_miniwob.py" <<'EOF'
# the miniwob episode started: MiniWoB's page gave its instruction (argv[1]: the eval folder)
import glob, json, sys
traj = json.load(open(glob.glob(f"{sys.argv[1]}/runs/*/trajectory.json")[0]))
said = traj["task"]["metadata"].get("utterance")
assert said, traj["task"]
print("MiniWoB said:", said)
EOF

cat >"$SMOKE/check_serve.py" <<'EOF'
# owrl serve on a free port: /health, /openapi.json, GET /v1/jobs, and a multipart CSV upload
# whose header fits the flow not at all (read by python-multipart, refused as a 422 on the rows);
# then it is stopped. argv[1]: a flow (JSON)
import json, socket, subprocess, sys, time, urllib.error, urllib.request, uuid

from owrl_sdk.server.app import create_app  # noqa: F401 - the app factory imports

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
base = f"http://127.0.0.1:{port}"
proc = subprocess.Popen(["owrl", "serve", "--no-auth", "--port", str(port), "--data-dir", "serve-data"])


def get(path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return r.status, r.read()


try:
    deadline = time.monotonic() + 120
    while True:
        try:
            status, body = get("/health")
            break
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"owrl serve ended ({proc.returncode}) before it answered")
            if time.monotonic() > deadline:
                sys.exit("owrl serve gave no /health in 120 s")
            time.sleep(0.5)
    print("/health", status, body[:120])
    paths = json.loads(get("/openapi.json")[1])["paths"]
    assert "/v1/jobs/batch/csv" in paths, sorted(paths)
    status, body = get("/v1/jobs")
    assert status == 200 and "jobs" in json.loads(body), body
    print("/v1/jobs", status, body[:120])

    bound = uuid.uuid4().hex
    parts = [("flow", None, open(sys.argv[1], "rb").read()), ("rows", "rows.csv", b"no_such_input\nx\n")]
    form = b""
    for field, filename, content in parts:
        disp = f'form-data; name="{field}"' + (f'; filename="{filename}"' if filename else "")
        form += f"--{bound}\r\nContent-Disposition: {disp}\r\n\r\n".encode() + content + b"\r\n"
    form += f"--{bound}--\r\n".encode()
    req = urllib.request.Request(base + "/v1/jobs/batch/csv", data=form, method="POST",
                                 headers={"Content-Type": f"multipart/form-data; boundary={bound}",
                                          "X-Owrl-Client": "check_extras"})  # --no-auth asks for it
    try:
        urllib.request.urlopen(req, timeout=30)
        sys.exit("a CSV whose header the flow does not take was queued")
    except urllib.error.HTTPError as err:
        answer = json.loads(err.read())
        print("CSV upload:", err.code, json.dumps(answer)[:300])
        assert err.code == 422, err.code
        locs = [d["loc"] for d in answer["detail"]]
        assert ["body", "rows"] in locs, locs
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
# here; its files in a short folder of its own, argv[1]) and runs tasks; owrl's Ray backend finds ray
import sys

import ray
from owrl_sdk.scheduling.raybackend import EpisodeWorker, RayOptions, import_ray  # noqa: F401

assert import_ray() is ray
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
         _node_ip_address="127.0.0.1", _temp_dir=sys.argv[1])
try:
    @ray.remote
    def double(x):
        return 2 * x

    assert ray.get([double.remote(i) for i in range(4)]) == [0, 2, 4, 6]
    print("ray", ray.__version__, "ran 4 tasks on", ray.cluster_resources())
finally:
    ray.shutdown()
EOF

cat >"$SMOKE/metrics.jsonl" <<'EOF'
{"step": 0, "rl/success_rate": 0.2, "rl/probe_success": 0.0, "rl/parse_error_rate": 0.4, "rl/kl": 0.0, "rl/entropy": 2.0, "rl/adapter_drift": 0.0}
{"step": 1, "rl/success_rate": 0.4, "rl/probe_success": 0.5, "rl/parse_error_rate": 0.2, "rl/kl": 0.02, "rl/entropy": 1.8, "rl/adapter_drift": 0.1}
{"step": 2, "rl/success_rate": 0.6, "rl/probe_success": 0.5, "rl/parse_error_rate": 0.1, "rl/kl": 0.03, "rl/entropy": 1.7, "rl/adapter_drift": 0.2}
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
from owrl_sdk.contract.plugins import Plugins
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
# step CMD...: run CMD and show it in the log; a failure names the command and stops the set
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

# json EXPR CMD...: CMD succeeds and its stdout is JSON for which EXPR (over d) holds
json() {
  local expr=$1; shift
  "$@" >out.json || return $?
  python "$SMOKE/check_json.py" "$expr" <out.json
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

# ---------------------------------------------------------------------------- per set
# bare (core): the CLI, the plugins, the demo-shop tasks, the core's libraries through owrl's code
# and an oracle eval of two demo-shop tasks; then each extra's feature without its extra
smoke_bare() {
  step sh -c 'owrl --help | grep "^Commands:"'
  step owrl --version
  step env COLUMNS=160 owrl plugins
  step json 'not d["errors"] and {"baselines", "demo", "demo-shop-adapter", "memory", "openwebrl"} <= {p["name"] for p in d["plugins"]}' \
    owrl plugins --json
  step json '{"shop-002", "shop-003"} <= {t["id"] for t in d}' owrl tasks demo-shop --json
  step python "$SMOKE/check_core.py" "$FLOW"
  step json 'd["success_rate"] == 1.0 and d["episodes"] == 2 and d["infra_errors"] == 0' \
    timeout 300 owrl eval --suite demo-shop --policy oracle --tasks shop-002,shop-003 --out eval --json
  step test -s eval/report.html
  : >"$LOGS/missing.txt"
  missing scaffold owrl new tool read-prices --out gen
  missing openai env OWRL_OPENAI_BASE_URL=http://127.0.0.1:9/v1 owrl run --policy openai --task "say hi" --url about:blank --max-steps 1 --out runs
  printf 'not a workbook' >rows.xlsx
  missing excel owrl run --flow "$FLOW" --inputs rows.xlsx --out batch
  missing miniwob owrl tasks miniwob
  missing serve owrl serve --no-auth --port 9 --data-dir serve-data
  missing scale owrl eval --suite demo-shop --tasks shop-002 --policy oracle --backend ray --out eval-ray
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
  step has read-prices env COLUMNS=200 owrl plugins
}

smoke_openai() {
  step python "$SMOKE/check_openai.py"
}

smoke_excel() {
  step python "$SMOKE/check_excel.py"
}

# the task list, then one real episode (a random policy on click-test) that MiniWoB's page started
smoke_miniwob() {
  step python "$SMOKE/check_imports.py" miniwob
  step json 'len(d) >= 10' owrl tasks miniwob --json
  step json 'd["episodes"] == 1 and d["infra_errors"] == 0' \
    timeout 300 owrl eval --suite miniwob --policy random --tasks click-test --out eval-mw --json
  step python "$SMOKE/check_miniwob.py" eval-mw
}

smoke_serve() {
  step python "$SMOKE/check_imports.py" fastapi starlette uvicorn python_multipart owrl_sdk.server.app
  step timeout 300 python "$SMOKE/check_serve.py" "$FLOW"
}

# Ray's own tasks, then an oracle eval through owrl's Ray backend
smoke_scale() {
  local raydir rc=0
  raydir=$(mktemp -d /tmp/owrl-ray.XXXXXX)  # short: Ray's socket paths must stay under 107 characters
  step env RAY_USAGE_STATS_ENABLED=0 timeout 300 python "$SMOKE/check_scale.py" "$raydir" || rc=$?
  [ "$KEEP" = 1 ] || rm -rf "$raydir"
  [ "$rc" = 0 ] || return "$rc"
  step json 'd["success_rate"] == 1.0 and d["infra_errors"] == 0 and d["backend"] == "ray"' \
    env RAY_USAGE_STATS_ENABLED=0 timeout 400 owrl eval --suite demo-shop --policy oracle --tasks shop-002 \
      --backend ray --workers 1 --out eval-ray --json
}

smoke_bench() {
  step python "$SMOKE/check_imports.py" matplotlib numpy
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

# run_set SET: a fresh venv with the wheel (and the extra; with --minimums under the set's
# constraints), then its smoke test in an empty folder
run_set() {
  local set=$1 venv=$WORK/venvs/$1 run=$WORK/runs/$1 home=$WORK/home/$1 spec
  local opts=(-q)
  mkdir -p "$run" "$home"
  if [ "$MINIMUMS" = 1 ]; then
    printf '+ pins of %s (with core: %s)\n' "$set" "$WITH_CORE"
    # shellcheck disable=SC2086  # OVERRIDE: words
    local held=()
    # models and train: torch stays the build installed first (TORCH_SPEC); its declared minimum
    # would pull a CUDA build of several GB, so that one minimum is not checked here
    case $set in models|train) held=("torch==${TORCH_SPEC#torch==}") ;; esac
    "$PY" "$WORK/pins.py" "$ROOT/pyproject.toml" "$set" "$WITH_CORE" ${OVERRIDE:-} "${held[@]}" >"$run/constraints.txt"
    cat "$run/constraints.txt"
    opts=(--progress-bar off -c "$run/constraints.txt")  # not -q: on a conflict pip says which requirements caused it
  fi
  step "$PY" -m venv "$venv"
  step "$venv/bin/python" -m pip install -q --upgrade pip
  case $set in models|train) step "$venv/bin/python" -m pip install -q "$TORCH_SPEC" ;; esac
  if [ "$set" = bare ]; then spec=$WHEEL; else spec="$WHEEL[$set]"; fi
  step "$venv/bin/python" -m pip install "${opts[@]}" "$spec"
  step "$venv/bin/python" -m pip check
  printf '\n+ pip freeze\n'
  "$venv/bin/python" -m pip freeze --exclude-editable | grep -v '^openwebrl-sdk' | tr '\n' ' '
  echo
  echo "install: $((SECONDS - t0))s" >"$LOGS/$set.install"
  # only this venv: its bin first, no checkout on the path, owrl's settings and caches in a folder of its own
  local v
  for v in $(compgen -e); do
    case $v in OWRL_*|OPENAI_*|PYTHONPATH|PYTHONHOME|PYTHONSTARTUP|VIRTUAL_ENV|RAY_ADDRESS|HF_*|PLAYWRIGHT_*) unset "$v" ;; esac
  done
  export VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
  export no_proxy=$NO_PROXY XDG_CONFIG_HOME=$home/config XDG_CACHE_HOME=$home/cache
  export XDG_DATA_HOME=$home/data XDG_STATE_HOME=$home/state HF_HOME=$home/hf
  cd "$run"
  step test "$(command -v owrl)" = "$venv/bin/owrl"
  if [ "$MINIMUMS" = 1 ]; then step python "$SMOKE/check_origin.py" "$run/constraints.txt"
  else step python "$SMOKE/check_origin.py"; fi
  "smoke_$set"
}

# ---------------------------------------------------------------------------- run
[ "$MINIMUMS" = 0 ] || echo "declared minimums pinned (with the core's: $WITH_CORE${OVERRIDE:+; OVERRIDE: $OVERRIDE})"
failed=0
for set in "${WANTED[@]}"; do
  t0=$SECONDS
  set +e
  (set -euo pipefail; run_set "$set") 2>&1 | mask >"$LOGS/$set.log"
  rc=${PIPESTATUS[0]}
  set -e
  secs=$((SECONDS - t0))
  install=$(sed -n 's/^install: //p' "$LOGS/$set.install" 2>/dev/null || true)
  if [ "$rc" = 0 ]; then
    printf '%-9s PASS %5ds   (install %s)\n' "$set" "$secs" "${install:-?}"
  else
    failed=1
    printf '%-9s FAIL %5ds   (log: %s)\n' "$set" "$secs" "$LOGS/$set.log"
    tail -n "$TAIL" "$LOGS/$set.log" | sed 's/^/    /'
  fi
  [ "$KEEP" = 1 ] || rm -rf "$WORK/venvs/$set"
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
  done < <(mask <"$LOGS/missing.txt")
fi

echo
echo "total: $((SECONDS - started))s   logs: $LOGS"
exit "$failed"
