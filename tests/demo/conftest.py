from __future__ import annotations

import http.cookiejar
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

import pytest

try:
    import owrl_demo  # noqa: F401
except ImportError:  # a checkout whose install predates the owrl_demo package: use the source root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from owrl_demo import DemoShop  # noqa: E402


class ShopClient:
    """A plain HTTP client with its own cookie jar: one shop session, as one browser would hold."""

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(self, path: str, form: Optional[dict[str, Any]] = None, json_body: Any = None) -> tuple[int, str, str]:
        """(status, final URL, body) after redirects; error statuses are returned, not raised."""
        data, headers = None, {}
        if form is not None:
            data = urlencode(form).encode()
        if json_body is not None:
            data, headers = json.dumps(json_body).encode(), {"Content-Type": "application/json"}
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers)
        try:
            with self.opener.open(req, timeout=10) as resp:
                return resp.status, resp.url, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.url, err.read().decode()

    def get(self, path: str) -> str:
        status, _, body = self.request(path)
        assert status == 200, f"GET {path} gave {status}"
        return body

    def post(self, path: str, **form: Any) -> tuple[int, str, str]:
        return self.request(path, form=form)

    def state(self) -> dict[str, Any]:
        return json.loads(self.get("/api/state"))


@pytest.fixture
def shop():
    with DemoShop() as running:
        yield running


@pytest.fixture
def client(shop):
    return ShopClient(shop.base_url)


@pytest.fixture
def new_client(shop):
    return lambda: ShopClient(shop.base_url)
