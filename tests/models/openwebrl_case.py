"""A fixed three-step trajectory in the openwebrl profile, shared by the conformance tests."""

from __future__ import annotations

from builtin_tools import TOOLS
from owrl_openwebrl.profiles import to_builtin
from owrl_sdk.contract.memory import Context
from owrl_sdk.types import CallRecord, Observation, Step, Tab, Task, ToolCall, ToolResult

URL = "http://127.0.0.1:1/"
SCREEN = (1280, 1000)
#: Past answers as the model wrote them; the first lacks its opening <think>, as when the
#: chat template opened the block.
RAW = [
    'The search box is at the top.\n</think>\n<tool_call>\n{"name": "click", "arguments": {"point_2d": [500, 120]}}\n</tool_call>\n'
    '<tool_call>\n{"name": "write", "arguments": {"message": "red hat"}}\n</tool_call>',
    '<think>\nResults are below the fold.\n</think>\n<tool_call>\n{"name": "scroll", "arguments": {"direction": "down", "amount": 0.5}}\n</tool_call>',
    '<think>\nThe hat costs 12 dollars; open it.\n</think>\n<tool_call>\n{"name": "click", "arguments": {"point_2d": [300, 700]}}\n</tool_call>',
]


def _obs(path: str, title: str, tabs: int = 1) -> Observation:
    url = URL + path
    listed = [Tab(index=0, url=url, title=title, active=tabs == 1)]
    if tabs == 2:
        listed.append(Tab(index=1, url=URL + "help", title="Help centre and frequently asked questions about shopping", active=True))
    return Observation(url=url, title=title, tabs=listed)


def _record(raw: ToolCall, page: dict, **data) -> CallRecord:
    return CallRecord(call=to_builtin(raw, SCREEN), result=ToolResult(data=data, page=page))


def steps() -> list[Step]:
    from owrl_openwebrl.parser import parse_turn

    turns = [parse_turn(r) for r in RAW]
    s0 = Step(index=0, observation=_obs("", "Shop"), turn=turns[0], calls=[
        _record(turns[0].calls[0], point=[640.0, 120.0],
                element={"tag": "input", "type": "search", "role": "", "checked": None, "label": "Search", "text": ""},
                page={"url": URL, "active_tab": 0, "tabs_opened": []}),
        _record(turns[0].calls[1], element={"tag": "input", "type": "search", "role": "", "checked": None,
                                            "label": "Search", "text": ""}, value="red ha",
                page={"url": URL + "search?q=red+hat", "active_tab": 0, "tabs_opened": [], "navigated_to": URL + "search?q=red+hat"}),
    ])
    s1 = Step(index=1, observation=_obs("search?q=red+hat", "Results"), turn=turns[1], calls=[
        _record(turns[1].calls[0], scroll={"moved": 500, "page": True}, page={"url": URL + "search?q=red+hat", "active_tab": 0, "tabs_opened": []}),
    ])
    s2 = Step(index=2, observation=_obs("search?q=red+hat", "Results"), turn=turns[2], calls=[
        _record(turns[2].calls[0], point=[384.0, 700.0],
                element={"tag": "a", "type": "", "role": "", "checked": None, "label": "", "text": "Red Wool Hat"},
                page={"url": URL + "help", "active_tab": 1, "tabs_opened": [1]}),
    ])
    for s in (s0, s1, s2):
        s.turn.calls = [r.call for r in s.calls]  # the policy stores the converted calls
    return [s0, s1, s2]


def context(screens=(b"shot-3",)) -> Context:
    task = Task(intent="Find a red hat under 20 dollars and open it.", start_url=URL)
    return Context(task=task, observation=_obs("help", "Help", tabs=2), tools=[cls() for cls in TOOLS],
                   history=steps(), screenshots=list(screens))
