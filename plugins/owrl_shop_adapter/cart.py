"""``add_to_cart(product, variant, qty)``: the demo shop's cart in one call.

The tool talks to the shop the way its own product form does, with the episode's browser
cookies (``env.context.request`` shares them): it finds the product (its page by id, else
the shop's search), reads the colours and sizes the product page offers, posts the form
to ``/cart/add`` and opens the cart page, so the next observation shows the cart.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any, Optional, Protocol
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import ActionError, Tool, ToolResult



class AddToCartArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    product: str = Field(min_length=1, description='the product\'s name as the shop shows it, e.g. "Felt Fedora" '
                                                   '(or its id from the address /product/felt-fedora)')
    variant: str = Field("", description='colour and size, e.g. "brown, M"; leave out what the product comes '
                                         "in only one of")
    qty: int = Field(1, ge=1, le=10, description="how many, 1 to 10")


class ProductPage(HTMLParser):
    """What a product page offers: its name, colours (radio values) and sizes (select options)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.colours: list[str] = []
        self.sizes: list[str] = []
        self.error = ""
        self._in: Optional[str] = None
        self._select = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        a = dict(attrs)
        if tag == "h1" and a.get("id") == "p-title":
            self._in = "name"
        elif tag == "p" and a.get("id") == "add-error":
            self._in = "error"
        elif tag == "input" and a.get("name") == "colour" and a.get("value"):
            self.colours.append(a["value"] or "")
        elif tag == "select" and a.get("name") == "size":
            self._select = True
        elif tag == "option" and self._select and a.get("value"):
            self.sizes.append(a["value"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "p"):
            self._in = None
        elif tag == "select":
            self._select = False

    def handle_data(self, data: str) -> None:
        if self._in == "name":
            self.name += data
        elif self._in == "error":
            self.error += data


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value.casefold())}(?!\w)", text) is not None


def pick_variant(name: str, variant: str, colours: list[str], sizes: list[str]) -> tuple[str, str]:
    """(colour, size) named in ``variant``; what a product has only one of may be left out."""
    text = variant.casefold()
    parts = [choices[0] for choices in (colours, sizes) if len(choices) > 1]
    example = f'variant="{", ".join(parts)}"'
    chosen = []
    for kind, choices in (("colour", colours), ("size", sizes)):
        named = [c for c in choices if _mentions(text, c)]
        if len(named) == 1:
            chosen.append(named[0])
        elif len(named) > 1:
            raise ActionError(f"variant '{variant}' names several {kind}s ({', '.join(named)}); give one, e.g. {example}")
        elif len(choices) == 1:
            chosen.append(choices[0])
        else:
            said = f"variant '{variant}' names no {kind} of {name}" if variant.strip() else f"say which {kind}"
            raise ActionError(f"{said}: it comes in {kind}s {', '.join(choices)}; e.g. {example}")
    return chosen[0], chosen[1]


class ShopAddress(Protocol):
    """What the tool needs of its adapter: the address of the shop an episode is on."""

    def base_url(self, env: Any) -> str: ...


class AddToCart(Tool):
    name = "add_to_cart"
    description = ("Demo Shop: put a product in the cart in one call, given its name, variant (colour and size) "
                   "and quantity; opens the cart page.")
    Args = AddToCartArgs
    needs_page = True

    def __init__(self, adapter: ShopAddress):
        self.adapter = adapter

    def available(self, env: Any) -> bool:
        return getattr(env, "context", None) is not None and hasattr(env, "page")

    async def run(self, env: Any, args: AddToCartArgs) -> ToolResult:
        base = self.adapter.base_url(env)
        request = env.context.request
        product_id, page = await self._find(request, base, args.product)
        colour, size = pick_variant(page.name, args.variant, page.colours, page.sizes)
        response = await request.post(base + "/cart/add", max_redirects=0, form={
            "product": product_id, "colour": colour, "size": size, "qty": str(args.qty)})
        if response.status == 400:
            refused = ProductPage()
            refused.feed(await response.text())
            raise ActionError(f"the shop refused: {refused.error.strip() or 'the product form was not accepted'}")
        if response.status not in (302, 303):
            raise ActionError(f"the shop answered HTTP {response.status} to adding {page.name}")
        await env.page.goto(base + "/cart", wait_until="load")
        label = f"{args.qty} × {page.name} ({size}, {colour.capitalize()})"
        return ToolResult(feedback=f"added {label} to the cart; the cart page is open",
                          data={"added": {"product": product_id, "colour": colour, "size": size, "qty": args.qty}})

    async def _find(self, request: Any, base: str, product: str) -> tuple[str, ProductPage]:
        slug = re.sub(r"[^a-z0-9]+", "-", product.casefold()).strip("-")
        if slug:
            found = await self._page(request, base, slug)
            if found is not None:
                return slug, found
        response = await request.get(base + "/api/search?" + urlencode({"q": product}))
        results = (await response.json()).get("results", []) if response.ok else []
        exact = [r for r in results if r["name"].casefold() == product.strip().casefold()]
        results = exact or results
        if not results:
            raise ActionError(f"the shop has no product called '{product}'; use the name the shop shows")
        if len(results) > 1:
            names = ", ".join(r["name"] for r in results[:8])
            raise ActionError(f"'{product}' matches several products ({names}); give the exact name")
        found = await self._page(request, base, results[0]["id"])
        if found is None:
            raise ActionError(f"the page of {results[0]['name']} did not open")
        return results[0]["id"], found

    @staticmethod
    async def _page(request: Any, base: str, product_id: str) -> Optional[ProductPage]:
        response = await request.get(f"{base}/product/{quote(product_id)}")
        if response.status != 200:
            return None
        page = ProductPage()
        page.feed(await response.text())
        page.name = " ".join(page.name.split())
        return page if page.name else None
