"""The flow player: the ``scripted`` policy that plays an ``owrl.flow/1`` document.

Flows are a core document, so their player is part of the core and is registered as a
default plugin (it does not depend on any package under ``plugins/``).
"""

from __future__ import annotations

#: The registered name of the policy that plays flows and replays.
FLOW_POLICY = "scripted"
