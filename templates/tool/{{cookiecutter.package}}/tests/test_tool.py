"""Uses owrl's pytest fixtures (owrl_sdk.testing), installed with owrl.

The episodes run in a real Chromium on pages served on 127.0.0.1.
"""

import pytest

import {{ cookiecutter.package }} as plugin
from owrl_sdk.api import ToolArgumentError

TOOL = "{{ cookiecutter.tool_name }}"

PAGE = """<title>Hats</title><h1>Hats</h1>
<ul><li>Red hat <b>$12</b></li><li>Blue   hat <b>$15</b></li><li>Green hat <b>$9</b></li></ul>"""


@pytest.fixture
def plugins(owrl_plugins, owrl_register_plugin):
    """owrl's plugins with this one among them: installed (pip install -e .) or, if not, registered here."""
    if TOOL not in owrl_plugins.catalogue.names("tools"):
        owrl_register_plugin(plugin, name="{{ cookiecutter.name }}")
    return owrl_plugins


def test_installed_plugin_registers_the_tool(owrl_plugins):
    # after `pip install -e .` the `owrl` entry point registers it in every owrl process
    assert TOOL in owrl_plugins.catalogue.names("tools"), "not installed: run pip install -e . first"


def test_bad_arguments_are_explained_to_the_model():
    tool = plugin.ReadText()
    assert tool.schema()["function"]["parameters"]["required"] == ["selector"]
    with pytest.raises(ToolArgumentError, match="'limit'"):
        tool.parse_args({"selector": "li", "limit": 0})


def test_reads_the_page_in_a_real_browser(plugins, owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": PAGE})
    traj = owrl_run_flow([
        {"calls": [{"name": TOOL, "arguments": {"selector": "css=li", "limit": 2}}]},
        {"calls": [{"name": "done", "arguments": {"response": "ok"}}]},
    ], url)
    assert traj.outcome.status == "success"
    result = traj.steps[0].calls[0].result
    assert result.ok and result.data == {"texts": ["Red hat $12", "Blue hat $15"], "count": 3}
    assert "3 element(s) match 'css=li' (showing the first 2)" in result.feedback
    assert "2. Blue hat $15" in result.feedback
    assert "Green" not in result.feedback
    # the step's feedback, which the model reads before its next turn, carries it
    assert "2. Blue hat $15" in traj.steps[0].feedback


def test_a_selector_that_matches_nothing_is_feedback_not_a_crash(plugins, owrl_page_server, owrl_run_flow):
    url = owrl_page_server({"/": PAGE})
    traj = owrl_run_flow([{"calls": [{"name": TOOL, "arguments": {"selector": "css=table td"}}]}], url)
    result = traj.steps[0].calls[0].result
    assert not result.ok and "nothing on the page matches 'css=table td'" in result.error
    assert traj.outcome.status == "fail"  # the scripted flow stops at a failed call
