"""Limits on what one client's connections hold: a count per address and a time for each head.

uvicorn serves a connection for as long as its client keeps it open, and a request whose head
never ends keeps it open for ever: about a thousand half-sent requests from one client held
every file descriptor of a server under a 1,024 limit, and ``/health`` stopped answering. So
``owrl serve`` runs uvicorn's own HTTP/1.1 protocol (h11) with two limits on top, set per
server (``owrl serve --max-connections-per-client``, ``--head-seconds``):

- a client address holds at most ``max_per_client`` connections at once: one more is closed
  as soon as it is accepted, before anything is read from it;
- a request's head (request line and headers) must arrive whole within ``head_seconds`` of the
  connection's start or of the previous response's end, else the connection is closed. A body
  is not timed by this rule (an upload may be slow), only the head.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Defaults: connections one client address may hold at once, and seconds for a request's head.
MAX_PER_CLIENT = 64
HEAD_SECONDS = 10.0


def limited_protocol(max_per_client: int = MAX_PER_CLIENT, head_seconds: float = HEAD_SECONDS) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with these limits (one count of open connections per class:
    one per server)."""
    open_by_client: dict[str, int] = {}

    class LimitedH11(H11Protocol):
        _client_key: Optional[str] = None
        _head_timer: Optional[asyncio.TimerHandle] = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            key = self.client[0] if self.client else "?"
            if open_by_client.get(key, 0) >= max_per_client:
                transport.close()  # over its share: nothing is read from it
                return
            open_by_client[key] = open_by_client.get(key, 0) + 1
            self._client_key = key
            self._time_head()

        def _time_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(head_seconds, self._head_late)

        def _head_late(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()  # the head did not arrive whole in time

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self._head_timer is not None:
                self._head_timer.cancel()  # the head is in: a body is not timed here
                self._head_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._time_head()  # the next request on this connection: its head is timed too

        def connection_lost(self, exc: Optional[Exception]) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if self._client_key is not None:
                left = open_by_client.get(self._client_key, 1) - 1
                if left > 0:
                    open_by_client[self._client_key] = left
                else:
                    open_by_client.pop(self._client_key, None)
                self._client_key = None
            super().connection_lost(exc)

    return LimitedH11
