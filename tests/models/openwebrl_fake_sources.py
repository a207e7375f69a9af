"""Stand-ins for the three official source files the status lines are extracted from: the
same code shapes (handler names, the locals their lines use, ``feedback +=`` notes,
``return flag, message``), placeholder words only. A test that extracts these and renders
a step can then be checked character for character without any official text."""

FAKE_WEB_ENV = '''
class WebEnv:
    async def execute_single_action(self, action):
        action_type = action["name"]
        handler = None
        if handler:
            return await handler(action)
        else:
            return False, f"FAKE-NO-TOOL <{action_type}>"

    async def _execute_click(self, parameters):
        try:
            point_2d = parameters.get("point_2d")
            if not point_2d:
                return False, "FAKE-CLICK-NEEDS-POINT"
            x, y = point_2d[0], point_2d[1]
            elem_desc = await self._describe(x, y)
            target = f" over {elem_desc}" if elem_desc else ""
            feedback = f"FAKE-OK click{target} @{x:.0f},{y:.0f}."
            if post_url != pre_url:
                feedback += f" went:{post_url}."
            if post_tab_count > pre_tab_count:
                feedback += f" tab#{post_tab_count - 1}."
            if post_url == pre_url and post_tab_count == pre_tab_count:
                feedback += " FAKE-NOTHING-HAPPENED."
            return True, feedback
        except Exception as e:
            return False, f"FAKE-ERR click: {e}"

    async def _execute_write(self, parameters):
        try:
            message = parameters.get("message", "")
            if not message:
                return False, "FAKE-WRITE-NEEDS-TEXT"
            target = f" in {elem_desc}" if elem_desc else ""
            feedback = f"FAKE-OK write [{message}]{target}."
            if post_url != pre_url:
                feedback += f" went:{post_url}."
            if actual_value and actual_value != message:
                displayed_value = truncate_feedback_text(actual_value, 10)
                feedback += (
                    f" holds [{displayed_value}]"
                    " instead."
                )
            return True, feedback
        except Exception as e:
            return False, f"FAKE-ERR write: {e}"

    async def _execute_scroll(self, parameters):
        try:
            target = f" @({point_2d[0]}, {point_2d[1]})" if point_2d else ""
            feedback = f"FAKE-OK scroll {direction} {amount:.0%}{target}."
            if abs(dx_actual) < 1 and abs(dy_actual) < 1 and not point_2d:
                feedback += " FAKE-STUCK."
            return True, feedback
        except Exception as e:
            return False, f"FAKE-ERR scroll: {e}"

    async def _execute_press_keys(self, parameters):
        try:
            if not legal_keys:
                return False, f"FAKE-NO-KEYS {keys}"
            feedback = f"FAKE-OK keys {legal_keys}."
            if post_url != pre_url:
                feedback += f" went:{post_url}."
            return True, feedback
        except Exception as e:
            return False, f"FAKE-ERR keys: {e}"

    async def _execute_wait(self, parameters):
        try:
            seconds = parameters.get("seconds", 3)
            return True, f"FAKE-OK slept {seconds}."
        except Exception as e:
            return False, f"FAKE-ERR wait: {e}"

    async def _execute_done(self, parameters):
        response = parameters.get("response", "")
        return True, f"FAKE-OK finished => {response}"

    async def _execute_go_back(self, parameters):
        try:
            return True, "FAKE-OK back."
        except Exception as e:
            return False, f"FAKE-ERR back: {e}"

    async def _execute_hover(self, parameters):
        try:
            target = f" over {elem_desc}" if elem_desc else ""
            return True, f"FAKE-OK hover{target} @{x:.0f},{y:.0f}."
        except Exception as e:
            return False, f"FAKE-ERR hover: {e}"

    async def _execute_drag(self, parameters):
        try:
            return True, "FAKE-OK drag."
        except Exception as e:
            return False, f"FAKE-ERR drag: {e}"

    async def _execute_goto_url(self, parameters):
        try:
            url = parameters.get("url")
            return True, f"FAKE-OK goto {url}."
        except Exception as e:
            return False, f"FAKE-ERR goto: {e}"

    async def _execute_new_tab(self, parameters):
        try:
            return True, f"FAKE-OK new tab #{tab_index}."
        except Exception as e:
            return False, f"FAKE-ERR new tab: {e}"

    async def _execute_switch_tab(self, parameters):
        try:
            pages = self.context.pages
            if tab_index < 0 or tab_index >= len(pages):
                return False, f"FAKE-RANGE {tab_index} (0-{len(pages) - 1})."
            return True, f"FAKE-OK tab #{tab_index} ({self.page.url})."
        except Exception as e:
            return False, f"FAKE-ERR switch: {e}"

    async def _execute_close_tab(self, parameters):
        try:
            return True, f"FAKE-OK closed #{current_index} now #{new_index}."
        except Exception as e:
            return False, f"FAKE-ERR close: {e}"
'''

FAKE_LOOP = '''
def rollout(adapter, observation, parsed):
    if parsed.success:
        msgs = [{"tool_response": r["tool_response"]} for r in results]
    else:
        msgs = adapter.convert([{"tool_response": "FAKE-COULD-NOT-READ-YOUR-CALLS."}], observation=observation)
    return msgs
'''

FAKE_FEEDBACK = '''
DEFAULT_BROWSER_ACTUAL_VALUE_MAX_CHARS = 10
DEFAULT_BROWSER_TOOL_RESPONSE_MAX_CHARS = 60


def truncate_feedback_text(text, max_chars, *, head_ratio=0.5):
    normalized = " ".join(str(text).split())
    if len(normalized) <= max_chars:
        return normalized
    marker = f" <<cut {len(normalized) - max_chars}>> "
    return normalized[:max_chars] + marker
'''

#: The keyboard module's shape: an alias table, a mapping of lower-case names, the legal names.
FAKE_KEYBOARD = '''
KEY_ALIASES = {"ctl": "Control"}
key_mapping = {"num5": "Numpad5", "ret": "Enter"}
LEGAL_KEYS = ["Enter", "Tab", "PageDown"]
_LOWER = {k.lower(): k for k in LEGAL_KEYS}


def validate_and_correct_key(key):
    return key
'''
