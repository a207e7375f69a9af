"""``owrl model fetch openwebrl`` / ``openwebrl-judge``: interface files from a source tree
served on 127.0.0.1 (fake files written here), the judge prompts read with ast, the
manifest, and one-line errors. Nothing reaches beyond the loopback interface."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest

from openwebrl_fake_sources import FAKE_FEEDBACK, FAKE_KEYBOARD, FAKE_LOOP, FAKE_WEB_ENV
from owrl_cli import owrl
from owrl_openwebrl.fetch import (INTERFACE_FILES, JUDGE_KEYS, extract_judge_prompts, fetched_weights,
                                  prompt_files, read_manifest)

FAKE_SYSTEM = "FAKE SYSTEM PROMPT for the fetch test.\nIt is not the official text.\n"
FAKE_TOOLS = [{"type": "function", "function": {"name": "click", "description": "FAKE click",
                                                "parameters": {"type": "object", "properties": {}}}},
              {"type": "function", "function": {"name": "done", "description": "FAKE done",
                                                "parameters": {"type": "object", "properties": {}}}}]

# The same code shapes as the official reward_browser.py, with placeholder words only.
FAKE_REWARD = '''
"""FAKE reward module for owrl's tests."""
import base64

JUDGE_SYSTEM_PROMPT = "FAKE-SYSTEM-RESULT-ONLY"

JUDGE_SYSTEM_PROMPT_ACTION_HISTORY = (
    "FAKE-SYSTEM-"
    "ACTION-HISTORY"
)

JUDGE_USER_PROMPT = """FAKE-USER task={task}
answer={answer} shots={num}"""

JUDGE_USER_PROMPT_ACTION_HISTORY = "FAKE-USER-AH task={task} history={action_history} answer={answer} shots={num}"

OTHER_CONSTANT = "FAKE-UNRELATED"


def build_content(task, answer, images, steps):
    content = [{"type": "text", "text": JUDGE_USER_PROMPT.format(task=task, answer=answer, num=len(images))}]
    content.append({"type": "text", "text": "FAKE-EARLY-TEXT"})
    for i, (image, step) in enumerate(zip(images, steps)):
        label = f"FAKE image #{i + 1} {{shown}} (inferred step {step}):"
        content.append({"type": "text", "text": label})
        content.append({"type": "image_url", "image_url": {"url": base64.b64encode(image).decode()}})
    content.append({"type": "text", "text": "FAKE-VERDICT-CUE: answer FAKE-YES or FAKE-NO."})
    return content


def later_helper(name):
    label = f"FAKE unrelated label {name}"
    return [{"type": "text", "text": "FAKE-TEMPLATE {name}".format(name=name)},
            {"type": "text", "text": "FAKE {placeholder} template"}]
'''

EXPECTED_JUDGE = {
    "system_result_only": "FAKE-SYSTEM-RESULT-ONLY",
    "system_action_history": "FAKE-SYSTEM-ACTION-HISTORY",
    "user_result_only": "FAKE-USER task={task}\nanswer={answer} shots={num}",
    "user_action_history": "FAKE-USER-AH task={task} history={action_history} answer={answer} shots={num}",
    "verdict_cue": "FAKE-VERDICT-CUE: answer FAKE-YES or FAKE-NO.",
    "screenshot_label": "FAKE image #{index} {{shown}} (inferred step {step}):",
}

SYSTEM_PATH = "openwebrl/env/prompts/system_prompt_browser_env.md"
TOOLS_PATH = "openwebrl/env/prompts/tool_list.json"
REWARD_PATH = "openwebrl/reward_browser.py"
ENV_PATH, LOOP_PATH, FEEDBACK_PATH = "openwebrl/env/web_env.py", "openwebrl/generate_browser.py", \
    "openwebrl/feedback_utils.py"
KEYBOARD_PATH = "openwebrl/env/utils/keyboard.py"


@pytest.fixture
def serve(owrl_page_server):
    """serve(folder) -> the base URL of a loopback HTTP server over the files in ``folder``."""

    def start(folder: Path) -> str:
        files = {"/" + f.relative_to(folder).as_posix(): f.read_text(encoding="utf-8")
                 for f in folder.rglob("*") if f.is_file()}
        return owrl_page_server(files).rstrip("/")

    return start


def source_tree(root: Path, reward: str = FAKE_REWARD) -> Path:
    files = {SYSTEM_PATH: FAKE_SYSTEM, TOOLS_PATH: json.dumps(FAKE_TOOLS), REWARD_PATH: reward,
             ENV_PATH: FAKE_WEB_ENV, LOOP_PATH: FAKE_LOOP, FEEDBACK_PATH: FAKE_FEEDBACK, KEYBOARD_PATH: FAKE_KEYBOARD}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(*args: str, source: str, tmp_path: Path, env: dict | None = None):
    """The real CLI, its network limited to loopback: the source is the test's server, the
    model hub is offline and points at a closed local port."""
    full = {"OWRL_OPENWEBRL_SOURCE": source, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
            "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost", **(env or {})}
    return owrl("model", "fetch", *args, cwd=tmp_path, env=full, timeout=120)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_extracts_the_judge_prompts_with_ast():
    found, missing = extract_judge_prompts(FAKE_REWARD)
    assert found == EXPECTED_JUDGE and missing == []
    assert list(found) == list(JUDGE_KEYS)
    label = found["screenshot_label"].format(index=2, step=5)
    assert label == "FAKE image #2 {shown} (inferred step 5):"
    assert found["user_action_history"].format(task="t", action_history="h", answer="a", num=3) == \
        "FAKE-USER-AH task=t history=h answer=a shots=3"


def test_extraction_leaves_out_what_it_cannot_find():
    source = FAKE_REWARD.replace("JUDGE_USER_PROMPT_ACTION_HISTORY =", "SOMETHING_ELSE =")
    source = source.replace('label = f"FAKE image', 'caption = f"FAKE image')
    found, missing = extract_judge_prompts(source)
    assert missing == ["user_action_history", "screenshot_label"]
    assert found == {k: v for k, v in EXPECTED_JUDGE.items() if k not in missing}
    assert extract_judge_prompts("this is not python (")[0] == {}


def test_fetch_openwebrl_interface_through_the_cli(tmp_path, serve):
    base = serve(source_tree(tmp_path / "src"))
    cache = tmp_path / "cache"
    out = fetch("openwebrl", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    folder = cache / "models" / "openwebrl"
    assert out.stdout.strip() == str(folder)
    assert "skipped the openwebrl weights (--no-weights)" in out.stderr

    interface = folder / "interface"
    assert (interface / "system_prompt.md").read_text() == FAKE_SYSTEM
    assert json.loads((interface / "tool_list.json").read_text()) == FAKE_TOOLS
    assert prompt_files("openwebrl", cache) == {"system_prompt": interface / "system_prompt.md",
                                                "tool_list": interface / "tool_list.json",
                                                "status_templates": interface / "status_templates.json"}
    assert set(INTERFACE_FILES["openwebrl"].values()) | {"manifest.json"} == {p.name for p in interface.iterdir()}

    manifest = json.loads((interface / "manifest.json").read_text())
    assert manifest == read_manifest("openwebrl", cache)
    assert manifest["model"] == "openwebrl" and manifest["source"] == base and "weights" not in manifest
    for name, path in (("system_prompt.md", SYSTEM_PATH), ("tool_list.json", TOOLS_PATH)):
        record = manifest["files"][name]
        assert record["url"] == f"{base}/{path}"
        assert record["sha256"] == sha(interface / name)
        assert record["bytes"] == (interface / name).stat().st_size
        assert record["fetched_at"].endswith("+00:00")
    # the status lines: extracted from four source files, none of which is kept
    templates = json.loads((interface / "status_templates.json").read_text())
    assert templates["parse_failure"] == "FAKE-COULD-NOT-READ-YOUR-CALLS."
    assert templates["tools"]["done"]["ok"] == [{"text": "FAKE-OK finished => "}, {"expr": "response"}]
    record = manifest["files"]["status_templates.json"]
    assert [r["url"] for r in record["extracted_from"]] == [f"{base}/{p}" for p in (ENV_PATH, LOOP_PATH, FEEDBACK_PATH,
                                                                                     KEYBOARD_PATH)]
    assert record["extracted_from"][0]["sha256"] == hashlib.sha256(FAKE_WEB_ENV.encode()).hexdigest()
    assert record["sha256"] == sha(interface / "status_templates.json") and record["missing"] == []
    assert not any(p.suffix == ".py" for p in interface.iterdir())
    assert fetched_weights("openwebrl", cache) is None
    assert not (folder / "weights").exists()

    # cached: nothing is downloaded again (the source may even be gone)
    again = fetch("openwebrl", "--no-weights", "--cache", str(cache), source=f"http://127.0.0.1:{closed_port()}",
                  tmp_path=tmp_path)
    assert again.returncode == 0 and "already in the cache" in again.stderr


def test_a_source_without_the_keyboard_module_fetches_and_says_so(tmp_path, serve):
    """The key names are optional: without them the fetch still ends well, names them missing,
    and owrl's own key names stand in."""
    root = source_tree(tmp_path / "src")
    (root / KEYBOARD_PATH).unlink()
    cache = tmp_path / "cache"
    out = fetch("openwebrl", "--no-weights", "--cache", str(cache), source=serve(root), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    record = json.loads((cache / "models" / "openwebrl" / "interface" / "manifest.json").read_text())
    assert record["files"]["status_templates.json"]["missing"] == ["keys"] and "keys" in out.stderr


def test_fetch_judge_prompts_through_the_cli(tmp_path, serve):
    base = serve(source_tree(tmp_path / "src"))
    cache = tmp_path / "cache"
    out = fetch("openwebrl-judge", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    interface = cache / "models" / "openwebrl-judge" / "interface"
    assert sorted(p.name for p in interface.iterdir()) == ["judge_prompts.json", "manifest.json"]  # no .py kept
    assert json.loads((interface / "judge_prompts.json").read_text()) == EXPECTED_JUDGE
    assert prompt_files("openwebrl-judge", cache) == {"judge_prompts": interface / "judge_prompts.json"}
    record = json.loads((interface / "manifest.json").read_text())["files"]["judge_prompts.json"]
    assert record["url"] == f"{base}/{REWARD_PATH}" and record["sha256"] == sha(interface / "judge_prompts.json")
    assert record["extracted_from"]["sha256"] == hashlib.sha256(FAKE_REWARD.encode()).hexdigest()
    assert record["missing"] == [] and "not found" not in out.stderr
    again = fetch("openwebrl-judge", "--no-weights", "--cache", str(cache), "--json", source=base, tmp_path=tmp_path)
    done = json.loads(again.stdout)  # --json: the folder and its manifest, for a script
    assert done["name"] == "openwebrl-judge" and done["manifest"]["files"]["judge_prompts.json"]["sha256"] == record["sha256"]
    assert Path(done["path"]) == Path(out.stdout.strip())


def test_a_missing_judge_prompt_is_reported_and_left_out(tmp_path, serve):
    reward = FAKE_REWARD.replace("JUDGE_SYSTEM_PROMPT_ACTION_HISTORY =", "UNRELATED_NAME =")
    base = serve(source_tree(tmp_path / "src", reward))
    cache = tmp_path / "cache"
    out = fetch("openwebrl-judge", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "not found in reward_browser.py: system_action_history" in out.stderr
    data = json.loads((cache / "models" / "openwebrl-judge" / "interface" / "judge_prompts.json").read_text())
    assert data == {k: v for k, v in EXPECTED_JUDGE.items() if k != "system_action_history"}


def one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], out.stderr
    return errors[0]


def test_unreachable_source_is_one_line_and_leaves_nothing(tmp_path):
    cache = tmp_path / "cache"
    base = f"http://127.0.0.1:{closed_port()}"
    out = fetch("openwebrl", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path)
    line = one_error_line(out)
    assert line.startswith(f"Error: cannot fetch the openwebrl interface files from {base}: ")
    assert "refused" in line.lower()
    assert len(out.stderr.strip().splitlines()) == 2  # the progress line, then the error
    assert out.stdout == ""
    assert not (cache / "models" / "openwebrl").exists()


def test_a_missing_file_is_one_line_and_leaves_nothing(tmp_path, serve):
    root = source_tree(tmp_path / "src")
    (root / TOOLS_PATH).unlink()  # the system prompt is there, the tool list is not
    base = serve(root)
    cache = tmp_path / "cache"
    out = fetch("openwebrl", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path)
    line = one_error_line(out)
    assert line == (f"Error: cannot fetch the openwebrl interface files from {base}: "
                    f"HTTP 404 Not Found for {base}/{TOOLS_PATH}")
    assert not (cache / "models" / "openwebrl").exists()


def test_weights_when_the_hub_is_offline(tmp_path, serve):
    base = serve(source_tree(tmp_path / "src"))
    cache = tmp_path / "cache"
    out = fetch("openwebrl-judge", "--cache", str(cache), source=base, tmp_path=tmp_path)
    line = one_error_line(out)
    assert line.startswith("Error: cannot download the openwebrl-judge weights (OpenWebRL/OpenWebRL-Judge-8B) "
                           "from the model hub: HF_HUB_OFFLINE is set")
    assert fetched_weights("openwebrl-judge", cache) is None
    assert "weights" not in read_manifest("openwebrl-judge", cache)
    # the interface files came first and are complete
    assert set(prompt_files("openwebrl-judge", cache)) == {"judge_prompts"}


def test_fetched_weights_reads_the_manifest(tmp_path):
    assert fetched_weights("openwebrl", tmp_path) is None
    interface = tmp_path / "models" / "openwebrl" / "interface"
    interface.mkdir(parents=True)
    (tmp_path / "models" / "openwebrl" / "weights").mkdir()
    record = {"repo_id": "OpenWebRL/OpenWebRL-4B", "path": "x", "revision": None, "complete": False}
    (interface / "manifest.json").write_text(json.dumps({"model": "openwebrl", "weights": record}))
    assert fetched_weights("openwebrl", tmp_path) is None
    (interface / "manifest.json").write_text(json.dumps({"model": "openwebrl", "weights": {**record, "complete": True}}))
    assert fetched_weights("openwebrl", tmp_path) == tmp_path / "models" / "openwebrl" / "weights"


def test_unknown_name_and_no_weights_for_smollm2(tmp_path):
    out = owrl("model", "fetch", "gpt-5", "--cache", str(tmp_path), cwd=tmp_path)
    assert one_error_line(out) == ("Error: unknown model 'gpt-5': known models are smollm2, openwebrl, "
                                   "openwebrl-judge")
    out = owrl("model", "fetch", "smollm2", "--no-weights", "--cache", str(tmp_path), cwd=tmp_path)
    assert "--no-weights applies to openwebrl and openwebrl-judge only" in one_error_line(out)


def test_weights_download_is_recorded_only_when_complete(tmp_path, monkeypatch):
    """fetch_weights with the hub's client replaced by a local fake (no network at all)."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    from owrl_openwebrl.fetch import fetch_weights
    from owrl_sdk.errors import UsageError

    monkeypatch.setattr(huggingface_hub, "is_offline_mode", lambda: False)
    asked = []

    def fake_download(repo_id, local_dir, revision):
        asked.append((repo_id, local_dir, revision))
        folder = Path(local_dir)
        (folder / ".cache" / "huggingface" / "download").mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / ".cache" / "huggingface" / "download" / "config.json.metadata").write_text("abc123\netag\n1.0\n")
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    manifest = fetch_weights("openwebrl", tmp_path)
    folder = tmp_path / "models" / "openwebrl" / "weights"
    assert asked == [("OpenWebRL/OpenWebRL-4B", str(folder), "main")]  # the model's pin
    record = manifest["weights"]
    assert record["repo_id"] == "OpenWebRL/OpenWebRL-4B" and record["revision"] == "abc123"
    assert record["requested_revision"] == "main"
    assert record["path"] == str(folder.resolve()) and record["complete"] is True
    assert fetched_weights("openwebrl", tmp_path) == folder
    from owrl_openwebrl.fetch import fetch_released, weights_revision

    assert weights_revision(folder) == "abc123"  # what a trajectory reports: the commit, not "weights"
    # a revision asked for reaches the download, and a cached copy of another revision is fetched again
    import shutil

    shutil.rmtree(folder / ".cache")
    monkeypatch.setattr("owrl_openwebrl.fetch.fetch_interface", lambda *a, **k: None)
    fetch_released("openwebrl", tmp_path, revision="v1.2")
    assert asked[-1] == ("OpenWebRL/OpenWebRL-4B", str(folder), "v1.2")
    fetch_released("openwebrl", tmp_path, revision="v1.2")
    assert len(asked) == 2  # the same revision is already in the cache

    def broken(repo_id, local_dir, revision=None):
        raise OSError("disk full\nsecond line of detail")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", broken)
    with pytest.raises(UsageError) as err:
        fetch_weights("openwebrl", tmp_path)
    assert str(err.value) == ("cannot download the openwebrl weights (OpenWebRL/OpenWebRL-4B) from the model hub: "
                              "OSError: disk full")
    assert fetched_weights("openwebrl", tmp_path) is None  # an interrupted refetch is not complete


def test_a_fetched_copy_gives_the_transcript_in_its_own_words(tmp_path, serve, monkeypatch):
    """Fetched from a loopback server through the CLI, then used by the policy as a person's run
    would find it in the cache: the system text and tools of the fetched files, each past step
    answered in the fetched status lines (notes, truncation and all), character for character."""
    from openwebrl_case import context
    from owrl_openwebrl.policy import OpenWebRLPolicy
    from owrl_sdk.config import Settings

    from owrl_openwebrl.profiles import OPENWEBRL_TOOLS

    root = source_tree(tmp_path / "src")
    (root / TOOLS_PATH).write_text(json.dumps(OPENWEBRL_TOOLS))  # declares the tools the transcript calls
    base = serve(root)
    cache = tmp_path / "cache"
    assert fetch("openwebrl", "--no-weights", "--cache", str(cache), source=base, tmp_path=tmp_path).returncode == 0
    monkeypatch.setenv("OWRL_CACHE_DIR", str(cache))
    policy = OpenWebRLPolicy(Settings(), backend=type("B", (), {"model_id": "OpenWebRL/OpenWebRL-4B"})())
    assert policy.warnings == []
    msgs = policy.prompt(context()).text_only()
    assert msgs[0]["content"][0]["text"].startswith(FAKE_SYSTEM)
    responses = [m["content"][0]["text"].split("\n\n<observation>")[0] for m in msgs[3::2]]
    # the fake limit is 60 characters: the first two lines are cut to 24 + marker + 24
    assert responses == [
        "<tool_response>\nFAKE-OK click over <inpu <<cut 20>> . FAKE-NOTHING-HAPPENED.\n"
        "FAKE-OK write [red hat]  <<cut 62>>  holds [red ha] instead.",
        "<tool_response>\nFAKE-OK scroll down 50%.",
        # the click opened a tab, which the official environment follows: it says it went there first
        '<tool_response>\nFAKE-OK click over <a> " <<cut 24>> 127.0.0.1:1/help. tab#1.',
    ]
