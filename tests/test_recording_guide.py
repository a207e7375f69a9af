"""docs/recording-to-batch.md, run as written: every command of the guide, in order, in one
temporary folder, with the installed ``owrl`` in a real Chromium on the embedded demo shop.

The commands are the guide's ``bash`` blocks and the ``$ `` lines of its ``console`` blocks.
Two of them cannot run as a person runs them, and the test says how it runs them instead:

- ``owrl record``: the person is a script. The command runs with ``--headless --debug-port
  PORT`` added, Playwright acts in the recorder's browser over that port (cookie banner,
  pop-up, size, quantity, Add to cart), then the recording ends with SIGINT, as Ctrl-C does.
- ``--heal-with openwebrl``: OpenWebRL-4B's weights cannot be had on this machine, so the
  same command runs with ``--heal-with openai`` against a stand-in for an OpenAI-compatible
  server on 127.0.0.1. The stand-in is a fake model: it answers with fixed turns (click the
  renamed button, extract the confirmation, done) written in the model's reply format. What
  is real is everything around it: the flow breaking on the renamed button, the hand-over,
  the prompt the healer is sent (the failed click's error and a screenshot of the page), the
  ``openai`` policy's request and parsing, the calls running in Chromium, and the repaired
  flow that is saved and then plays through without any model.

The crontab line and the systemd service are not installed, but the command in each is the
batch command the test runs (twice: the second time it resumes with nothing to do).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from json_server import JsonServer
from owrl_cli import KEEP
from owrl_sdk.browser.chromium import find_chromium
from owrl_sdk.recorder import partial_path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "recording-to-batch.md"
BIN = Path(sys.executable).parent

needs_chromium = pytest.mark.skipif(find_chromium(check_managed=False) is None, reason="no Chromium on this machine")
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="the guide's JSON steps use jq, which is not installed")


def guide_text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def blocks(text: str) -> Iterator[tuple[str, str]]:
    for m in re.finditer(r"^```([\w-]*)[^\n]*\n(.*?)^```", text, re.S | re.M):
        yield m.group(1), m.group(2)


def steps(text: str) -> list[tuple[str, list[str]]]:
    """The guide's commands in order, each with the output the guide shows under it: the lines
    of bash blocks (no output shown), the `$ ` lines of console blocks (the lines up to the next)."""
    found: list[tuple[str, list[str]]] = []
    for lang, body in blocks(text):
        for line in body.splitlines():
            if lang == "bash" and line.strip():
                found.append((line, []))
            elif lang == "console" and line.startswith("$ "):
                found.append((line[2:], []))
            elif lang == "console" and found:
                found[-1][1].append(line)
    return found


def commands(text: str) -> list[str]:
    return [cmd for cmd, _ in steps(text)]


def shell_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # `owrl` is the installed one
    env["COLUMNS"] = "200"
    env.pop("DISPLAY", None)
    env.update(extra or {})
    return env


def sh(command: str, cwd: Path, extra: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=shell_env(extra), capture_output=True, text=True,
                          timeout=timeout)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def person(port: int) -> None:
    """What the guide asks the person to do, in the recorder's browser."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        page = browser.contexts[0].pages[0]
        no_thanks = page.get_by_role("button", name="No thanks")
        await no_thanks.wait_for(state="visible", timeout=10_000)  # the pop-up opens about 1.5 s in
        await asyncio.sleep(0.3)
        await page.get_by_role("button", name="Accept cookies").click()
        await asyncio.sleep(0.5)
        await no_thanks.click()
        await asyncio.sleep(0.8)
        await page.get_by_role("combobox", name="Size").focus()  # as a person picks: trusted events
        await page.keyboard.type("m")
        await asyncio.sleep(0.3)
        await page.get_by_role("spinbutton", name="Quantity").fill("2")
        await asyncio.sleep(0.3)
        await page.get_by_role("button", name="Add to cart").click()
        await page.get_by_text("Added to your cart").first.wait_for()
        await asyncio.sleep(1.5)  # what the click changed is recorded once the page settles


def record(command: str, cwd: Path) -> None:
    port = free_port()
    full = f"{command} --headless --debug-port {port}"
    proc = subprocess.Popen(["bash", "-c", f"exec {full}"], cwd=cwd, env=shell_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = cwd / re.search(r"--out (\S+)", command).group(1)  # type: ignore[union-attr]
    try:
        deadline = time.monotonic() + 60
        while not partial_path(out).exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert partial_path(out).exists(), proc.communicate(timeout=5)
        asyncio.run(person(port))
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert out.is_file()
    assert re.search(rf"^wrote {out.name}: \d+ turns, 6 calls; replay with: owrl run --flow {out.name}$", stdout, re.M), stdout


def reply(text: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


#: The stand-in's turns, in the reply format of the owrl profile (see the module's docstring).
HEALER_TURNS = [
    '<think>The button is now called "Add to bag".</think><tool_call>{"name": "click", "arguments": '
    '{"selector": "role=button[name=\\"Add to bag\\"]"}, "expect": {"text_visible": "Added to your cart"}}</tool_call>',
    '<think>Read the confirmation and finish.</think><tool_call>{"name": "extract", "arguments": '
    '{"selector": "role=status", "name": "confirmation"}}</tool_call><tool_call>{"name": "done", "arguments": '
    '{"response": "Added the shirts to the cart."}}</tool_call>',
]


BOX = ("╭", "│", "╰")
SPACES = re.compile(r"\s+")


def check_shown(command: str, lines: list[str], output: str) -> None:
    """Each line the guide shows is in the real output. `…` marks what the guide trimmed: the
    parts between are checked; a line that starts with it, and the panels' frames (whose width
    follows the terminal), are the guide's elisions; a progress bar's elapsed time varies."""
    flat = SPACES.sub(" ", output)
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("…") or stripped.startswith(BOX):
            continue
        stripped = re.sub(r" \d+:\d\d:\d\d$", "", stripped)  # the bar's elapsed time
        for part in stripped.split("…"):
            part = SPACES.sub(" ", part.strip())
            assert part in flat, f"`{command}` does not print what the guide shows:\n{part}\n--- it printed:\n{output[-3000:]}"


def test_the_guide_is_linked_and_its_owrl_commands_exist():
    from test_guides import check_invocation, owrl_invocations

    assert "docs/recording-to-batch.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(recording-to-batch.md)" in (ROOT / "docs" / "flows-and-rpa.md").read_text(encoding="utf-8")
    text = guide_text()
    seen = [check_invocation(args) for cmd in commands(text) for args in owrl_invocations(cmd)]
    assert {"owrl record", "owrl run"} <= set(seen)
    assert any("--heal-with openwebrl" in cmd for cmd in commands(text))


def test_the_shop_renames_its_add_button_only_when_asked(monkeypatch, tmp_path):
    """The guide's switch: OWRL_DEMO_SHOP_ADD_LABEL (the ``demo-shop`` table's ``add_label``)
    renames the product page's button of the shop a run resolves ``demo:shop`` to, is escaped as
    text (a label is never markup), and a blank value leaves "Add to cart"."""
    import urllib.request

    from owrl_demo import DemoShop
    from owrl_sdk.contract.plugins import Plugins

    def button(url: str) -> str:
        page = urllib.request.urlopen(url, timeout=10).read().decode()
        return re.findall(r'<button type="submit" class="primary">(.*?)</button>', page)[0]

    def resolved(environ: dict[str, str]) -> str:  # as a command loads its settings from the environment
        plugins = Plugins()
        return plugins.bind(plugins.load_settings(environ=environ, cwd=tmp_path)).resolve_url("demo:shop/product/oxford-shirt")

    assert button(resolved({})) == "Add to cart"
    assert button(resolved({"OWRL_DEMO_SHOP_ADD_LABEL": "Add to bag"})) == "Add to bag"
    assert button(resolved({"OWRL_DEMO_SHOP_ADD_LABEL": "  "})) == "Add to cart"
    with DemoShop(add_label='<img src=x onerror="alert(1)">') as shop:
        assert button(shop.base_url + "/product/oxford-shirt") == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"


def rows(batch_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads((batch_dir / "batch.json").read_text())["results"])


@pytest.mark.slow
@needs_chromium
@needs_jq
def test_the_guide_runs_as_written(tmp_path):
    text = guide_text()
    shown_steps = steps(text)
    results: list[tuple[str, subprocess.CompletedProcess]] = []
    healer = JsonServer(lambda path, headers, body: (200, reply(HEALER_TURNS[min(len(healer.requests), 2) - 1])))
    try:
        for cmd, shown in shown_steps:
            if cmd.startswith("owrl record "):
                record(cmd, tmp_path)
                continue
            extra = {}
            run = cmd
            if "--heal-with openwebrl" in cmd:
                run = cmd.replace("--heal-with openwebrl", "--heal-with openai")
                extra = {"OWRL_OPENAI_BASE_URL": healer.url, "OWRL_OPENAI_MODEL": "stand-in"}
            done = sh(run, tmp_path, extra)
            results.append((cmd, done))
            check_shown(cmd, shown, done.stdout + done.stderr)
            print(f"$ {cmd}\n[{done.returncode}]\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    finally:
        healer.close()

    def result(command: str, nth: int = 0) -> subprocess.CompletedProcess:
        """The nth run of a command of the guide (given whole)."""
        return [r for c, r in results if c == command][nth]

    batch_cmd = "owrl run --flow add-shirt.json --inputs rows.csv --workers 2 --out nightly"
    broken_env = 'OWRL_DEMO_SHOP_ADD_LABEL="Add to bag" '

    # 1. The recording: role selectors, the input, the expectations; no refs.
    repaired = json.loads((tmp_path / "add-shirt.v2.json").read_text())  # written by the healed run, below
    flow = json.loads((tmp_path / "add-shirt.json").read_text())
    calls = [c for t in flow["turns"] for c in t["calls"]]
    assert [c["name"] for c in calls] == ["click", "click", "select_option", "write", "click", "extract", "done"]
    assert flow["inputs"]["qty"]["default"] == "2"  # what the person typed
    assert all(c["arguments"].get("selector", "role=").startswith("role=") for c in calls)
    assert not any("ref" in c["arguments"] for c in calls)

    # 2. The output.
    replay = "owrl run --flow add-shirt.json --input qty=3 --json --out runs"
    assert json.loads(result(replay, 0).stdout)["outcome"]["status"] == "success"
    out = json.loads(result(replay, 1).stdout)
    assert out["outcome"]["status"] == "success" and out["inputs"] == {"qty": "3"}
    assert out["outputs"]["confirmation"].startswith("Added to your cart: 3 × Classic Oxford Shirt (M")

    # 3. The batch: four successes with their outputs, one clear failure; exit 1.
    batch = result(batch_cmd, 0)
    assert batch.returncode == 1 and "(5 run now)" in batch.stderr
    got = rows(tmp_path / "nightly")
    assert [r["status"] for r in got] == ["success", "success", "success", "fail", "success"]
    for r in got:
        if r["status"] == "success":
            assert r["outputs"]["confirmation"].startswith(f"Added to your cart: {r['inputs']['qty']} ×")
    assert got[3]["inputs"] == {"qty": "99"} and "Added to your cart" in got[3]["detail"]
    summary = json.loads((tmp_path / "nightly" / "batch.json").read_text())
    assert (summary["succeeded"], summary["failed"], summary["ran"]) == (4, 1, 0)  # the resumed run ran nothing

    # 4. The crontab line runs the batch command the guide ran (the resume).
    (cron,) = re.findall(r"^0 2 \* \* \* cd /srv/rpa && /opt/owrl/\.venv/bin/(owrl run .*?) >> nightly\.log 2>&1$", text, re.M)
    assert cron == batch_cmd, f"the crontab runs `{cron}`, which the guide does not run"
    (service,) = re.findall(r"^ExecStart=/opt/owrl/\.venv/bin/(owrl run .*)$", text, re.M)
    assert service == batch_cmd, f"the systemd service runs `{service}`, which the guide does not run"
    resumed = result(batch_cmd, 1)
    assert resumed.returncode == 1 and "(0 run now)" in resumed.stderr

    # 5. The renamed button breaks the flow; the healed run succeeds and saves a new version.
    broken = result(broken_env + "owrl run --flow add-shirt.json --input qty=1 --out runs")
    assert broken.returncode == 1 and "no element matches" in broken.stdout
    healed = result(broken_env + "owrl run --flow add-shirt.json --input qty=1 --out runs --heal-with openwebrl")
    assert healed.returncode == 0, healed.stdout[-3000:] + healed.stderr[-3000:]
    assert "flow repaired: add-shirt.v2.json" in healed.stdout
    healed_dir = Path(re.search(r"run folder: (\S+)", healed.stdout).group(1))  # type: ignore[union-attr]
    on_disk = json.loads((tmp_path / healed_dir / "trajectory.json").read_text())
    assert on_disk["metadata"]["repaired_flow"] == "add-shirt.v2.json"  # the run folder says where it went
    assert len(healer.requests) == 2  # the flow broke once: the healer decided the last two turns
    asked = json.dumps(healer.requests[0][2])  # what the healer was shown: the failure and the page
    assert 'no element matches it' in asked and '"image_url": {"url": "data:image/jpeg;base64,' in asked
    healed_calls = [c for t in repaired["turns"] for c in t["calls"]]
    assert 'role=button[name="Add to cart"]' not in json.dumps(healed_calls)
    assert result(broken_env + "owrl run --flow add-shirt.v2.json --out runs").returncode == 0  # without a model
    fixed = (tmp_path / "add-shirt.json").read_text()
    assert 'Add to bag' in fixed and "{{input:qty}}" in fixed
    assert result(broken_env + batch_cmd).returncode == 2  # the old folder belongs to the old flow
    assert result(broken_env + batch_cmd + "-2").returncode == 1
    assert [r["status"] for r in rows(tmp_path / "nightly-2")] == ["success", "success", "success", "fail", "success"]
