"""``owrl demo-site``: serve the demo shop in the foreground until Ctrl-C."""

from __future__ import annotations

import threading

import click

from owrl_sdk.api import UsageError

from .catalogue import DEMO_EMAIL, DEMO_PASSWORD
from .shop import DemoShop


@click.command("demo-site")
@click.option("--port", type=click.IntRange(0, 65535), default=8780, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one; the default differs from owrl serve's 8765, so both can run).")
@click.option("--add-label", default="", envvar="OWRL_DEMO_SHOP_ADD_LABEL", show_envvar=True,
              help="The text of the product page's add button (blank: Add to cart), to try a redesign.")
def demo_site_command(port: int, add_label: str) -> None:
    """Serve the demo shop on 127.0.0.1 until Ctrl-C."""
    shop = DemoShop(add_label=add_label)
    try:
        url = shop.start(port)
    except OSError as err:
        raise UsageError(f"cannot serve the demo shop on port {port} ({err.strerror}): "
                         "choose another with --port") from None
    stopped = threading.Event()
    try:  # from the first line printed: a Ctrl-C at any moment after it stops the shop cleanly
        click.echo(f"Demo shop: {url}/")
        click.echo(f"Test account: {DEMO_EMAIL} / {DEMO_PASSWORD}")
        click.echo("Press Ctrl-C to stop.", err=True)
        while not stopped.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        shop.stop()
    click.echo("Demo shop stopped.", err=True)
