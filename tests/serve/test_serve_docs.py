"""docs/serve.md's session of inputs, outputs and batches stays true: its flow, CSV files and
requests, sent to a real ``owrl serve`` on the demo shop, get the answers the page shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from serve_support import TOKEN
from test_serve_inputs import upload

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Inputs, outputs and batches, as run"):text.index("## Restarts")]


def shown_after(text: str, command: str) -> list[str]:
    """What the page shows after the one-line console command ``command``, up to the next
    command or the end of its block."""
    out = []
    for line in text[text.index("$ " + command + "\n"):].split("\n")[1:]:
        if line.startswith("$ ") or line.startswith("```"):
            break
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def test_the_documented_session_of_inputs_outputs_and_batches_is_what_the_server_answers(serve, tmp_path):
    doc = section()
    server = serve()
    flow = json.loads("\n".join(shown_after(doc, "cat category.json")))
    (tmp_path / "category.json").write_text(json.dumps(flow))
    csv = "\n".join(shown_after(doc, "cat categories.csv")) + "\n"
    bad_csv = "\n".join(shown_after(doc, "cat bad.csv")) + "\n"

    # the flow job: queued with its inputs typed and filled in, finished with its outputs
    queued_shown, finished_shown = (json.loads(line) for line in re.findall(r'^\{"id":"\w+","kind":"flow".*$', doc, re.M))
    reply = server.request("POST", "/v1/jobs/flow", {"flow": flow, "inputs": {"category": "shoes"}})
    assert reply.status == 201, reply.body
    for key in ("task", "start_url", "inputs", "outputs", "status"):
        assert reply.json()[key] == queued_shown[key], key
    job = server.wait(reply.json()["id"], timeout=60)
    for key in ("status", "task", "start_url", "inputs", "outputs", "steps", "outcome"):
        assert job[key] == finished_shown[key], key

    # the two 422s, word for word
    shown_422 = [line for line in doc.splitlines() if line.startswith('{"detail"')]
    bad = server.request("POST", "/v1/jobs/flow", {"flow": flow, "inputs": {"page": "last", "colour": "red"}})
    secret = server.request("POST", "/v1/jobs/flow", {"flow": flow, "inputs": {"category": "{{secret:SHOP_PASSWORD}}"}})
    assert f"{bad.body.decode()} {bad.status}" == shown_422[0]
    assert f"{secret.body.decode()} {secret.status}" == shown_422[1]

    # the CSV batch, printed by the page's own python -c
    reply = upload(server, "/v1/jobs/batch/csv", {}, {"flow": ("category.json", json.dumps(flow).encode(), "application/json"),
                                                      "rows": ("categories.csv", csv.encode(), "text/csv")})
    assert reply.status == 201, reply.body
    assert reply.json()["batch"]["results"][0]["inputs"] == {"category": "shirts", "page": "1"}  # as shown queued
    job = server.wait(reply.json()["id"], timeout=90)
    script = re.search(r"python -c '\n(.*?)'\n", doc, re.S).group(1)
    printed = subprocess.run([sys.executable, "-c", script], input=json.dumps(job), capture_output=True, text=True,
                             check=True).stdout
    shown = doc[doc.index(script) + len(script):].split("\n")[1:5]
    assert printed.splitlines() == shown and shown[0] == "finished: 2 succeeded, 1 failed, 0 pending"

    reply = upload(server, "/v1/jobs/batch/csv", {"flow": json.dumps(flow)}, {"rows": ("bad.csv", bad_csv.encode(), "text/csv")})
    assert f"{reply.body.decode()} {reply.status}" == shown_422[2]
    assert TOKEN not in doc
