"""What the fault-injection suite shares: the faulty site, one episode per fault, the table.

Every fault runs a whole episode (:class:`owrl_sdk.episode.loop.Episode`) in a Chromium of its own
(a :class:`BrowserHost` per fault), so that what each fault leaves behind is counted alone:
the browser's process tree is sampled all through the episode, and afterwards none of it
(and no Chromium of ours started meanwhile) may still run.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from owrl_sdk.flows.flowplayer import ScriptedPolicy
from owrl_sdk.browser import BrowserHost, processes
from owrl_sdk.config import Settings
from owrl_sdk.formats.documents import Flow, FlowTurn, load_trajectory
from owrl_sdk.episode.loop import Episode, EpisodeLimits
from owrl_sdk.contract.plugins import Plugins, build_plugin_manager
from owrl_sdk.episode.runstore import RunDir
from owrl_sdk.types import Expectation, Task, ToolCall, Trajectory, Turn

#: Navigation time-out of every fault's browser; the slow faults wait longer than this.
NAV_TIMEOUT = 4.0
#: Chromium resolves every *.invalid name to "not found" (no DNS server is asked).
RESOLVER_RULES = "--host-resolver-rules=MAP *.invalid ~NOTFOUND"
#: A renderer whose JavaScript heap is this small crashes at once when a page hogs memory.
SMALL_HEAP = "--js-flags=--max-old-space-size=48"


def fault_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = dict(action_timeout=2.0, expect_timeout=2.0, navigation_timeout=NAV_TIMEOUT)
    values.update(overrides)
    return Settings(**values)


# ============================================================================ the table


@dataclass
class FaultRow:
    fault: str
    expected: str
    got: str
    classified_right: bool
    trajectory_intact: bool
    processes_left: int
    steps: int = 0
    seconds: float = 0.0
    #: Why it went wrong (the failure's detail, or what is broken in the trajectory).
    note: str = ""
    #: What a test wants said about a fault that went right (timings, counts).
    remark: str = ""


#: One row per fault run in this session, in order; conftest prints them at the end.
ROWS: list[FaultRow] = []


def table(rows: list[FaultRow]) -> list[str]:
    head = ("fault", "expected kind", "got", "classified right", "trajectory intact", "processes left")
    body = [(r.fault, r.expected, r.got, "yes" if r.classified_right else "NO",
             f"yes ({r.steps} steps)" if r.trajectory_intact else "NO", str(r.processes_left)) for r in rows]
    widths = [max(len(str(line[i])) for line in [head, *body]) for i in range(len(head))]

    def line(cells: tuple[str, ...]) -> str:
        return " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(head), "-+-".join("-" * w for w in widths), *(line(b) for b in body)]


# ============================================================================ processes


def our_chromium_pids() -> set[int]:
    """Running Chromium processes in this Python process's tree."""
    tree = processes.children_map()
    return {
        pid for pid in processes.descendants(os.getpid(), tree)
        if processes.alive(pid) and ("chrom" in processes.command_name(pid) or "headless" in processes.command_name(pid))
    }


def still_running(pids: set[int], seconds: float = 10.0) -> set[int]:
    deadline = time.monotonic() + seconds
    left = {p for p in pids if processes.alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if processes.alive(p)}
    return left


# ============================================================================ the faulty site

STEPS_PAGE = """<!doctype html><html><head><title>Steps</title></head><body>
<h1>Steps</h1>
<button id="one" onclick="document.getElementById('out').textContent='One done'">One</button>
<button id="two" onclick="document.getElementById('out').textContent='Two done'">Two</button>
<button id="noop">Nothing happens</button>
<button id="hog" onclick="setTimeout(() => { const heap = []; for (;;) heap.push(new Array(100000).fill(Math.random())); }, 0)">Build the report</button>
<p id="out">Ready</p>
</body></html>"""

ERROR_PAGE = """<!doctype html><html><head><title>500 Internal Server Error</title></head>
<body><h1>Internal Server Error</h1><p>The server could not complete your request.</p></body></html>"""

BLANK_PAGE = "<!doctype html><html><head><title></title></head><body><script>/* renders nothing */</script></body></html>"

CAPTCHA_PAGE = """<!doctype html><html><head><title>Just a moment...</title></head><body>
<p>Please verify you are a human to continue.</p><div class="g-recaptcha" data-sitekey="x"></div>
</body></html>"""

LOGIN_PAGE = """<!doctype html><html><head><title>Sign in</title></head><body>
<h1>Sign in to continue</h1>
<form><label>User <input name="user"></label> <label>Password <input type="password" name="pw"></label>
<button>Sign in</button></form></body></html>"""

POPUP_PAGE = "<!doctype html><html><head><title>Offer</title></head><body><h1>A special offer</h1></body></html>"

#: Interruptions at random moments (a seeded generator, so a seed replays the same choices;
#: when they land relative to the flow is up to the clock): alerts, confirms, pop-up
#: windows and new tabs, some on a timer after load, some a moment after a click.
INTERRUPT_PAGE = """<!doctype html><html><head><title>Checklist</title></head><body>
<h1>Checklist</h1>
<button id="s1" onclick="mark(1)">Step 1</button> <button id="s2" onclick="mark(2)">Step 2</button>
<button id="s3" onclick="mark(3)">Step 3</button> <button id="s4" onclick="mark(4)">Step 4</button>
<ul id="done"></ul><p id="status">0 of 4 done</p>
<script>
let x = Number(new URLSearchParams(location.search).get('seed') || 1);
const rand = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
const marked = new Set();
window.interruptions = 0;
function mark(n) {
  if (!marked.has(n)) {
    marked.add(n);
    const li = document.createElement('li'); li.textContent = 'Step ' + n + ' done';
    document.getElementById('done').appendChild(li);
    document.getElementById('status').textContent = marked.size + ' of 4 done';
  }
  if (rand() < 0.6) setTimeout(interrupt, rand() * 300);
}
function interrupt(kind) {
  window.interruptions++;
  kind = kind || ['alert', 'confirm', 'popup', 'tab'][Math.floor(rand() * 4)];
  const n = Math.floor(rand() * 1000);
  if (kind === 'alert') alert('Special offer! Code ' + n);
  else if (kind === 'confirm') confirm('Subscribe to our newsletter? (' + n + ')');
  else if (kind === 'popup') window.open('/popup?n=' + n, '_blank', 'width=400,height=300');
  else window.open('/popup?n=' + n, '_blank');
}
// one of each kind at a random moment of the first three seconds, more after random clicks
for (const kind of ['alert', 'confirm', 'popup', 'tab']) setTimeout(() => interrupt(kind), 300 + rand() * 2700);
</script></body></html>"""


def big_page(n_items: int = 25_000) -> str:
    """A button at the top, then 25,000 list items of a span each: 50,000 elements (75,000 nodes)."""
    items = "".join(f"<li><span>Item {i}</span></li>" for i in range(n_items))
    return (
        "<!doctype html><html><head><title>Big</title></head><body>"
        "<button id=\"finish\" onclick=\"document.getElementById('out').textContent='Finished'\">Finish</button>"
        f"<p id=\"out\">Not yet</p><ul>{items}</ul></body></html>"
    )


class FaultServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    delay_s = NAV_TIMEOUT + 3

    def handle_error(self, request: Any, client_address: Any) -> None:  # broken pipes are the point here
        pass


class FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, body: str, headers: Optional[dict[str, str]] = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _cut(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = urlsplit(self.path).path
        pages = {"/steps": STEPS_PAGE, "/blank": BLANK_PAGE, "/captcha": CAPTCHA_PAGE, "/login": LOGIN_PAGE,
                 "/popup": POPUP_PAGE, "/interrupt": INTERRUPT_PAGE}
        if path in pages:
            self._send(200, pages[path])
        elif path == "/big":
            self._send(200, big_page())
        elif path == "/status/500":
            self._send(500, ERROR_PAGE)
        elif path == "/account":
            self._send(302, "", {"Location": "/login?next=/account"})
        elif path in ("/loop", "/loop2"):
            self._send(302, "", {"Location": "/loop2" if path == "/loop" else "/loop"})
        elif path == "/slow":
            time.sleep(self.server.delay_s)  # longer than the browser waits
            self._send(200, STEPS_PAGE)
        elif path == "/reset":
            # SO_LINGER 0: closing sends a TCP RST instead of a FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif path == "/truncated":
            head = b"<!doctype html><html><head><title>Catalogue</title></head><body><h1>Catalogue</h1><p>Page 1 of the cata"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", "50000")  # promised, never sent
            self.end_headers()
            self.wfile.write(head)
            self.wfile.flush()
            self._cut()
        else:
            self._send(404, "<h1>Not found</h1>")


def start_server() -> tuple[FaultServer, str]:
    server = FaultServer(("127.0.0.1", 0), FaultHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ============================================================================ flows and policies


def flow(*turns: list[tuple[str, dict[str, Any], Optional[dict[str, Any]]]]) -> Flow:
    """A flow from turns of (tool, arguments, expectation or None)."""
    return Flow(turns=[
        FlowTurn(calls=[ToolCall(name=name, arguments=args, expect=Expectation(**expect) if expect else None)
                        for name, args, expect in turn])
        for turn in turns
    ])


def click(selector: str, text: Optional[str] = None) -> list[tuple[str, dict[str, Any], Optional[dict[str, Any]]]]:
    return [("click", {"selector": selector}, {"text_visible": text} if text else None)]


def done(answer: str) -> list[tuple[str, dict[str, Any], Optional[dict[str, Any]]]]:
    return [("done", {"response": answer}, None)]


class InterruptionTolerantPolicy(ScriptedPolicy):
    """A scripted flow played the way a careful model would under interruptions.

    Before each flow turn it answers what interrupted the page: a dialog is dismissed, a tab
    it did not open is closed, the first tab is made active again. A flow turn that failed
    meanwhile (a click refused while a dialog was open, an expectation read on a pop-up) is
    played again: the flow's steps are idempotent. Up to ``max_replays`` replays in all.
    """

    name = "scripted-tolerant"
    max_replays = 10

    def __init__(self, settings: Settings, flow: Flow, **options: Any):
        super().__init__(settings, flow=flow, **options)
        self.replays = 0
        self.handled: list[str] = []
        self._last_was_flow = False

    async def act(self, context: Any) -> Turn:
        if not context.history:
            self.position, self.replays, self.handled, self._last_was_flow = 0, 0, [], False
        obs = context.observation
        if obs.extras.get("dialog"):
            self._last_was_flow = False
            self.handled.append(f"dialog: {obs.extras['dialog']['type']}")
            return Turn(thought="a dialog interrupts: dismiss it",
                        calls=[ToolCall(name="handle_dialog", arguments={"accept": False})])
        if len(obs.tabs) > 1:
            self._last_was_flow = False
            extra = max(t.index for t in obs.tabs if t.index != 0)
            self.handled.append(f"tab: {obs.tabs[extra].url}")
            return Turn(thought="a window opened by itself: close it",
                        calls=[ToolCall(name="close_tab", arguments={"tab_index": extra})])
        if obs.tabs and not obs.tabs[0].active:
            self._last_was_flow = False
            return Turn(thought="back to the first tab", calls=[ToolCall(name="switch_tab", arguments={"tab_index": 0})])
        last = context.last_step
        if last is not None and self._last_was_flow and _went_wrong(last):
            if self.replays >= self.max_replays:
                return Turn(end=f"flow stopped after {self.replays} replays")
            self.replays += 1
            self.position -= 1  # play the interrupted turn again
        if self.position >= len(self.flow.turns):
            return Turn(end="flow ran out of turns without done")
        planned = self.flow.turns[self.position]
        self.position += 1
        self._last_was_flow = True
        return Turn(thought=planned.thought, calls=[c.model_copy(deep=True) for c in planned.calls])


def _went_wrong(step: Any) -> bool:
    return any(
        (r.verdict is not None and not r.verdict.ok) or (r.result is not None and not r.result.ok) or r.skipped
        for r in step.calls
    )


# ============================================================================ hosts and episodes


class _RoutingBrowser:
    """A Playwright browser whose new contexts get the given routes before any page opens."""

    def __init__(self, browser: Any, routes: list[tuple[str, Callable[..., Any]]]):
        self._browser = browser
        self._routes = routes

    async def new_context(self, **options: Any) -> Any:
        context = await self._browser.new_context(**options)
        for pattern, handler in self._routes:
            await context.route(pattern, handler)
        return context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


class RoutedHost(BrowserHost):
    """A BrowserHost whose episode contexts are routed (``context.route``) from their first request on."""

    def __init__(self, settings: Settings, routes: list[tuple[str, Callable[..., Any]]], **kw: Any):
        super().__init__(settings, **kw)
        self.routes = routes

    async def browser_for_episode(self) -> tuple[Any, Optional[str]]:
        browser, note = await super().browser_for_episode()
        return _RoutingBrowser(browser, self.routes), note


class Tracker:
    """Takes part in the episode like a site adapter: samples the browser's process tree at
    every hook, counts steps, and runs the fault's own actions (``on_start``, ``on_step``)."""

    def __init__(self, host: BrowserHost):
        self.host = host
        self.seen: set[int] = set()
        self.ended_steps: list[int] = []
        self.on_start: Optional[Callable[[Any], Any]] = None
        self.on_step: Optional[Callable[[Any], Any]] = None
        self.sample()

    def sample(self) -> None:
        try:
            self.seen |= set(self.host.pids())
        except Exception:  # noqa: BLE001 - a host whose browser just died has no tree
            pass

    async def episode_start(self, env: Any) -> None:
        self.sample()
        if self.on_start is not None:
            result = self.on_start(env)
            if asyncio.iscoroutine(result):
                await result

    def step_end(self, step: Any) -> None:
        self.ended_steps.append(step.index)
        self.sample()
        if self.on_step is not None:
            self.on_step(step)

    def after_tool_call(self, call: Any, result: Any) -> None:
        self.sample()


@dataclass
class FaultRun:
    row: FaultRow
    trajectory: Trajectory
    loaded: Trajectory
    tracker: Tracker
    env: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def kind_of(traj: Trajectory) -> str:
    outcome = traj.outcome
    if outcome is None:
        return "no outcome"
    return outcome.failure.kind if outcome.failure is not None else outcome.status


def failed_call_kinds(traj: Trajectory) -> list[str]:
    """The kinds the failure classifier put on failed calls (``result.data['failure']``)."""
    kinds = []
    for step in traj.steps:
        for record in step.calls:
            label = record.result.data.get("failure") if record.result is not None else None
            if label:
                kinds.append(f"{label['category']}.{label['code']}")
    return kinds


def check_intact(traj: Trajectory, run: RunDir, tracker: Tracker) -> tuple[bool, Optional[Trajectory], str]:
    """Saved, loadable, the same as in memory, every step present (and its screenshot)."""
    try:
        loaded = load_trajectory(run.trajectory_file)
    except Exception as err:  # noqa: BLE001 - reported in the table
        return False, None, f"does not load: {err}"
    problems = []
    if loaded.model_dump(mode="json") != traj.model_dump(mode="json"):
        problems.append("saved trajectory differs from the one in memory")
    indices = [s.index for s in loaded.steps]
    if indices != list(range(len(indices))):
        problems.append(f"step indices {indices}")
    if indices != tracker.ended_steps:
        problems.append(f"steps saved {indices}, steps ended {tracker.ended_steps}")
    if loaded.outcome is None or loaded.ended_at is None:
        problems.append("no outcome saved")
    for step in loaded.steps:
        shot = step.observation.screenshot_file
        if shot is not None and not (run.path / shot).is_file():
            problems.append(f"missing {shot}")
    if not (run.path / "result.json").is_file():
        problems.append("no result.json")
    return not problems, loaded, "; ".join(problems)


async def run_fault(
    name: str,
    expected: str,
    start_url: str,
    the_flow: Flow,
    tmp_path: Path,
    *,
    settings: Optional[Settings] = None,
    launch_args: tuple[str, ...] = (),
    routes: Optional[list[tuple[str, Callable[..., Any]]]] = None,
    policy_class: type = ScriptedPolicy,
    limits: Optional[EpisodeLimits] = None,
    got: Optional[Callable[[Trajectory], str]] = None,
    setup: Optional[Callable[[Tracker], None]] = None,
    before_close: Optional[Callable[[Any], Any]] = None,
) -> FaultRun:
    """One full episode of ``the_flow`` from ``start_url`` in a browser of its own; its row is added to :data:`ROWS`."""
    settings = settings or fault_settings()
    plugins = Plugins(build_plugin_manager(environ={}))
    baseline = our_chromium_pids()
    args = (RESOLVER_RULES, *launch_args)

    def launch_hook(options: dict[str, Any]) -> dict[str, Any]:
        merged = plugins.browser_launch_options(options)
        merged["args"] = [*merged.get("args", []), *args]
        return merged

    host_class: Any = RoutedHost if routes is not None else BrowserHost
    host_kw: dict[str, Any] = {"routes": routes} if routes is not None else {}
    host = host_class(settings, launch_hook=launch_hook, **host_kw)
    started = time.perf_counter()
    run = RunDir(tmp_path / "run")
    task = Task(intent=f"fault: {name}", start_url=start_url)
    extra: dict[str, Any] = {}
    try:
        await host.start()
        tracker = Tracker(host)
        if setup is not None:
            setup(tracker)
        env = await host.new_env(run_dir=run.path)
        policy = policy_class(settings, flow=the_flow)
        episode = Episode(
            task=task, env=env, policy=policy,
            memory=plugins.catalogue.get("memories", "default")(settings),
            tools=list(plugins.catalogue.items["tools"].values()),
            hooks=plugins.for_task(task, extra=[run, tracker]),  # the tracker first, then the run folder
            limits=limits or EpisodeLimits(max_steps=30, step_timeout=90, episode_timeout=240),
        )
        traj = await episode.run()
        tracker.sample()
        extra["policy"] = policy
        if before_close is not None:
            result = before_close(env)
            if asyncio.iscoroutine(result):
                extra["before_close"] = await result
        await env.close()
    finally:
        await host.close()
    seconds = time.perf_counter() - started
    left = still_running(tracker.seen | (our_chromium_pids() - baseline))
    intact, loaded, problems = check_intact(traj, run, tracker)
    got_kind = got(traj) if got is not None else kind_of(traj)
    row = FaultRow(
        fault=name, expected=expected, got=got_kind, classified_right=got_kind == expected,
        trajectory_intact=intact, processes_left=len(left), steps=len(traj.steps), seconds=seconds,
        note=problems or (traj.outcome.failure.detail[:160] if traj.outcome and traj.outcome.failure else ""),
    )
    ROWS.append(row)
    return FaultRun(row=row, trajectory=traj, loaded=loaded or traj, tracker=tracker, env=None, extra=extra)


def print_table(terminalreporter: Any) -> None:
    if not ROWS:
        return
    terminalreporter.section("fault injection")
    for line in table(ROWS):
        terminalreporter.write_line(line)
    wrong = sum(1 for r in ROWS if not r.classified_right)
    broken = sum(1 for r in ROWS if not r.trajectory_intact)
    left = sum(r.processes_left for r in ROWS)
    terminalreporter.write_line(
        f"{len(ROWS)} faults: {len(ROWS) - wrong} classified right, {len(ROWS) - broken} trajectories intact, "
        f"{left} browser processes left"
    )
    for r in ROWS:
        if not (r.classified_right and r.trajectory_intact) or r.processes_left:
            terminalreporter.write_line(f"  {r.fault}: {r.note}")
        elif r.remark:
            terminalreporter.write_line(f"  {r.fault}: {r.remark} ({r.seconds:.1f} s)")
