"""The demo shop's fixed catalogue, its accounts and its discount codes.

Fixed on purpose: tasks and their expected answers are written against these figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

CATEGORIES: tuple[tuple[str, str], ...] = (
    ("shirts", "Shirts"),
    ("shoes", "Shoes"),
    ("bags", "Bags"),
    ("hats", "Hats"),
)

CLOTHING = ("S", "M", "L", "XL")
SHOE_SIZES = tuple(str(n) for n in range(38, 46))
ONE_SIZE = ("One size",)
HAT_SIZES = ("S", "M", "L")


@dataclass(frozen=True)
class Product:
    id: str
    name: str
    category: str
    price: float
    rating: float
    reviews: int
    colours: tuple[str, ...]
    sizes: tuple[str, ...]
    description: str

    @property
    def category_label(self) -> str:
        return dict(CATEGORIES)[self.category]


def _p(id: str, name: str, category: str, price: float, rating: float, reviews: int, colours: Sequence[str],
       sizes: Sequence[str], description: str) -> Product:
    return Product(id, name, category, float(price), rating, reviews, tuple(colours), tuple(sizes), description)


PRODUCTS: tuple[Product, ...] = (
    # shirts
    _p("oxford-shirt", "Classic Oxford Shirt", "shirts", 39, 4.5, 128, ["white", "blue"], CLOTHING,
       "A crisp button-down in soft woven cotton that works with jeans or a suit."),
    _p("linen-shirt", "Linen Summer Shirt", "shirts", 45, 4.2, 64, ["white", "beige", "green"], CLOTHING,
       "Light, breathable linen for hot days, with a relaxed fit."),
    _p("flannel-shirt", "Flannel Check Shirt", "shirts", 35, 4.7, 203, ["red", "green"], CLOTHING,
       "Brushed cotton flannel in a classic check, warm without bulk."),
    _p("crew-tee", "Cotton Crew T-Shirt", "shirts", 15, 4.1, 340, ["white", "black", "grey", "blue"], CLOTHING,
       "An everyday tee in heavyweight organic cotton."),
    _p("breton-top", "Striped Breton Top", "shirts", 29, 3.9, 45, ["blue", "red"], CLOTHING,
       "The sailor stripe, in a sturdy cotton jersey."),
    _p("denim-shirt", "Denim Work Shirt", "shirts", 49, 4.4, 87, ["blue"], CLOTHING,
       "Rugged denim with two chest pockets and a straight hem."),
    _p("graphic-tee", "Graphic Print Tee", "shirts", 18, 3.6, 52, ["black", "white"], CLOTHING,
       "A soft tee with a screen-printed mountain graphic."),
    _p("polo-shirt", "Polo Pique Shirt", "shirts", 32, 4.3, 96, ["navy", "green", "white"], CLOTHING,
       "A knitted pique polo with a two-button placket."),
    # shoes
    _p("trail-runners", "Trail Running Shoes", "shoes", 89, 4.6, 175, ["black", "blue"], SHOE_SIZES,
       "Grippy, cushioned runners for muddy paths and rocky trails."),
    _p("canvas-sneakers", "Canvas Sneakers", "shoes", 49.5, 4.0, 260, ["white", "red", "black"], SHOE_SIZES,
       "Low-top canvas sneakers with a vulcanised rubber sole."),
    _p("chelsea-boots", "Leather Chelsea Boots", "shoes", 129, 4.8, 212, ["brown", "black"], SHOE_SIZES,
       "Full-grain leather boots with elastic sides and a stacked heel."),
    _p("suede-loafers", "Suede Loafers", "shoes", 95, 4.1, 38, ["brown", "navy"], SHOE_SIZES,
       "Unlined suede loafers, soft from the first wear."),
    _p("tennis-shoes", "Court Tennis Shoes", "shoes", 69, 4.3, 119, ["white"], SHOE_SIZES,
       "Clean leather court shoes with a cupsole."),
    _p("hiking-boots", "Hiking Boots", "shoes", 139, 4.5, 88, ["brown"], SHOE_SIZES,
       "Waterproof mid-height boots for long days on the hill."),
    _p("espadrilles", "Slip-on Espadrilles", "shoes", 27, 3.7, 41, ["beige", "navy"], SHOE_SIZES,
       "Cotton canvas uppers on a braided jute sole."),
    _p("rain-boots", "Rubber Rain Boots", "shoes", 39.9, 3.8, 77, ["yellow", "black", "green"], SHOE_SIZES,
       "Natural rubber wellingtons that keep puddles out."),
    # bags
    _p("leather-backpack", "Leather Backpack", "bags", 149, 4.7, 66, ["brown", "black"], ONE_SIZE,
       "A roomy backpack in vegetable-tanned leather with a padded laptop sleeve."),
    _p("tote-bag", "Canvas Tote Bag", "bags", 25, 4.2, 150, ["beige", "black"], ONE_SIZE,
       "A heavy canvas tote with an inside pocket."),
    _p("duffel-bag", "Weekend Duffel Bag", "bags", 89.5, 4.4, 58, ["green", "navy"], ONE_SIZE,
       "Waxed canvas holdall with leather handles, sized for two nights away."),
    _p("crossbody-bag", "Crossbody Bag", "bags", 59, 4.0, 73, ["black", "red"], ONE_SIZE,
       "A compact bag with an adjustable strap and three compartments."),
    _p("messenger-bag", "Laptop Messenger Bag", "bags", 79, 4.1, 49, ["grey", "black"], ONE_SIZE,
       "Fits a 15-inch laptop, with a quick-release buckle."),
    _p("mini-clutch", "Mini Clutch", "bags", 35, 3.5, 22, ["gold", "black"], ONE_SIZE,
       "A small evening clutch with a detachable chain."),
    _p("rolltop-bag", "Rolltop Cycling Bag", "bags", 99, 4.6, 81, ["yellow", "black"], ONE_SIZE,
       "Waterproof rolltop pack with reflective details."),
    # hats
    _p("wool-beanie", "Wool Beanie", "hats", 19, 4.5, 190, ["grey", "red", "navy"], ONE_SIZE,
       "A ribbed merino beanie with a turn-up."),
    _p("baseball-cap", "Baseball Cap", "hats", 22, 4.0, 134, ["black", "blue", "white"], ONE_SIZE,
       "A six-panel cotton cap with an adjustable strap."),
    _p("panama-hat", "Panama Straw Hat", "hats", 55, 4.3, 29, ["beige"], HAT_SIZES,
       "Hand-woven toquilla straw with a black band."),
    _p("bucket-hat", "Bucket Hat", "hats", 24, 3.8, 47, ["green", "beige"], ONE_SIZE,
       "A washed cotton bucket hat that packs flat."),
    _p("felt-fedora", "Felt Fedora", "hats", 65, 4.6, 36, ["black", "brown"], HAT_SIZES,
       "Wool felt fedora with a grosgrain band."),
    _p("sun-visor", "Sun Visor", "hats", 14, 3.4, 18, ["white"], ONE_SIZE,
       "A light visor with a terry sweatband."),
    _p("trapper-hat", "Trapper Hat", "hats", 45, 4.2, 31, ["brown", "grey"], HAT_SIZES,
       "Quilted trapper with fleece-lined ear flaps."),
)

BY_ID: dict[str, Product] = {p.id: p for p in PRODUCTS}


def product(product_id: str) -> Optional[Product]:
    return BY_ID.get(product_id)


# Accounts: the test credentials appear in task metadata and `owrl demo-site` output, never on a page.
@dataclass(frozen=True)
class Account:
    email: str
    password: str
    name: str
    address: str
    city: str
    postcode: str
    past_orders: tuple[dict[str, Any], ...]


DEMO_EMAIL = "demo@shop.test"
DEMO_PASSWORD = "demo1234"

ACCOUNTS: dict[str, Account] = {
    DEMO_EMAIL: Account(
        email=DEMO_EMAIL,
        password=DEMO_PASSWORD,
        name="Dana Demo",
        address="1 Demo Way",
        city="Testville",
        postcode="10001",
        # Placed before any session: shown in the account's order history, newest first.
        past_orders=(
            {"number": "DS-204817", "date": "2025-05-03", "status": "Delivered",
             "items": [{"product": "trail-runners", "variant": {"size": "43", "colour": "blue"}, "qty": 1}]},
            {"number": "DS-198342", "date": "2025-03-14", "status": "Delivered",
             "items": [{"product": "wool-beanie", "variant": {"size": "One size", "colour": "grey"}, "qty": 2},
                       {"product": "tote-bag", "variant": {"size": "One size", "colour": "black"}, "qty": 1}]},
        ),
    ),
}

# code -> fraction off the subtotal
COUPONS: dict[str, float] = {"WELCOME10": 0.10}

FREE_SHIPPING_FROM = 50.0
SHIPPING = {"standard": 4.95, "express": 12.00}
SHIPPING_TIMES = {"standard": "3-5 days", "express": "next day"}
