"""The data behind the inventory example server: an outdoor-gear shop, generated from a seed.

Kept apart from the MCP wiring so the state rules (stock, orders, pricing) read on their own.
Errors a caller can fix raise `StoreError` with a message that says what to do instead.
"""

import json
import os
import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

# (category, name, base price in USD). The seed keeps ITEMS_KEPT of these and sets price, stock, rating.
CATALOG: list[tuple[str, str, float]] = [
    ("tents", "Ridgeline 2P Backpacking Tent", 289),
    ("tents", "Summit Dome 4P Tent", 349),
    ("tents", "Featherlite Solo Tent", 219),
    ("tents", "Basecamp 6P Cabin Tent", 429),
    ("tents", "Trekker Tarp Shelter", 89),
    ("tents", "Alpine 3P Four-Season Tent", 599),
    ("sleeping", "Cirrus 20F Down Sleeping Bag", 329),
    ("sleeping", "Nomad 40F Synthetic Sleeping Bag", 119),
    ("sleeping", "AirCore Insulated Sleeping Pad", 149),
    ("sleeping", "FoamLite Sleeping Pad", 45),
    ("sleeping", "Pillowcloud Camp Pillow", 29),
    ("sleeping", "Silk Sleeping Bag Liner", 69),
    ("cooking", "Flashpoint Canister Stove", 49),
    ("cooking", "TrailChef 2-Person Cookset", 64),
    ("cooking", "Titanium Spork", 12),
    ("cooking", "Camp Kettle 1L", 34),
    ("cooking", "Wildfire Wood Stove", 79),
    ("cooking", "Insulated Camp Mug", 22),
    ("lighting", "Beacon 400 Headlamp", 44),
    ("lighting", "Glowpod Lantern", 39),
    ("lighting", "Solar String Lights", 27),
    ("lighting", "Ember Mini Flashlight", 19),
    ("lighting", "Beacon 900 Rechargeable Headlamp", 89),
    ("lighting", "Firefly Tent Light", 15),
    ("backpacks", "Ascent 55L Backpack", 229),
    ("backpacks", "Daybreak 24L Daypack", 89),
    ("backpacks", "Ultralight 40L Pack", 199),
    ("backpacks", "Hydration Vest 10L", 119),
    ("backpacks", "Roll-Top Dry Bag 20L", 35),
    ("backpacks", "Kids Explorer 15L Pack", 49),
    ("footwear", "Ridgeback Hiking Boot", 189),
    ("footwear", "Trailrunner GTX Shoe", 149),
    ("footwear", "Riverwalk Sandal", 69),
    ("footwear", "Merino Hiking Socks 3-Pack", 39),
    ("footwear", "Gaiter Pro", 45),
    ("footwear", "Camp Slipper", 55),
]
ITEMS_KEPT = 30
COUPONS = {"CAMP10": 0.10, "TRAIL20": 0.20}
SHIPPING = {"standard": 4.99, "express": 14.99, "pickup": 0.0}
FREE_STANDARD_SHIPPING_FROM = 100.0


class StoreError(Exception):
    """A request the store refuses; the message says why and what to do instead."""


class Item(BaseModel):
    id: str = Field(description="Item id, e.g. ITM-001")
    name: str
    category: str
    price: float = Field(description="Unit price in USD")
    stock: int = Field(description="Units in stock")
    rating: float = Field(description="Average customer rating, 1.0 to 5.0")


class Customer(BaseModel):
    name: str = Field(description="Customer's full name")
    email: str | None = Field(default=None, description="Email for the receipt, if any")


class OrderLine(BaseModel):
    item_id: str = Field(description="Id of the item to buy, e.g. ITM-001")
    quantity: int = Field(default=1, ge=1, le=100, description="Units to buy")


class OrderRequest(BaseModel):
    customer: Customer
    lines: list[OrderLine] = Field(min_length=1, description="What to buy, one line per item")
    shipping: Literal["standard", "express", "pickup"] = Field(
        default="standard",
        description="standard (4.99, free from 100.00 after discount), express (14.99), pickup (free)",
    )
    coupon: str | None = Field(default=None, description="Coupon code, if the customer has one")


class ReceiptLine(BaseModel):
    item_id: str
    name: str
    quantity: int
    unit_price: float
    line_total: float


class Order(BaseModel):
    order_id: str
    customer: Customer
    lines: list[ReceiptLine]
    subtotal: float
    discount: float
    shipping: str
    shipping_cost: float
    total: float


class State(BaseModel):
    seed: int
    items: list[Item]
    orders: list[Order] = Field(default_factory=list)


def generate(seed: int) -> State:
    """The shop as it stands at start for this seed; the same seed always gives the same shop."""
    rng = random.Random(seed)
    kept = sorted(rng.sample(range(len(CATALOG)), ITEMS_KEPT))
    items = []
    for n, index in enumerate(kept, start=1):
        category, name, base = CATALOG[index]
        price = max(round(base * rng.uniform(0.85, 1.15)) - 0.01, 4.99)
        stock = 0 if rng.random() < 0.15 else rng.randint(1, 40)
        rating = round(rng.uniform(3.0, 5.0), 1)
        items.append(
            Item(id=f"ITM-{n:03d}", name=name, category=category, price=price, stock=stock, rating=rating)
        )
    return State(seed=seed, items=items)


class Store:
    """The shop's state, in memory, written to `state_file` after each change when one is given."""

    def __init__(self, seed: int = 0, state_file: Path | None = None):
        self.state_file = state_file
        if state_file is not None and state_file.exists():
            self.state = State.model_validate_json(state_file.read_text())
        else:
            self.state = generate(seed)
            self._save()

    def _save(self) -> None:
        if self.state_file is None:
            return
        # Write then rename, so a crash mid-write never leaves half a file behind.
        tmp = self.state_file.with_suffix(self.state_file.suffix + ".tmp")
        tmp.write_text(self.state.model_dump_json(indent=1))
        os.replace(tmp, self.state_file)

    @property
    def items(self) -> list[Item]:
        return self.state.items

    def categories(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[item.category] = counts.get(item.category, 0) + 1
        return counts

    def item(self, item_id: str) -> Item:
        wanted = item_id.strip().upper()
        for item in self.items:
            if item.id == wanted:
                return item
        raise StoreError(f"Unknown item id {item_id!r}. Ids look like ITM-001; use search_items to find one.")

    def order(self, order_id: str) -> Order:
        for order in self.state.orders:
            if order.order_id == order_id.strip().upper():
                return order
        raise StoreError(f"Unknown order id {order_id!r}. Order ids look like ORD-0001.")

    def place_order(self, request: OrderRequest) -> Order:
        # Merge repeated lines for one item so the stock check sees the whole quantity.
        wanted: dict[str, int] = {}
        for line in request.lines:
            item_id = self.item(line.item_id).id
            wanted[item_id] = wanted.get(item_id, 0) + line.quantity
        for item_id, quantity in wanted.items():
            item = self.item(item_id)
            if quantity > item.stock:
                raise StoreError(
                    f"Not enough stock for {item.id} ({item.name}): {quantity} requested, {item.stock} in stock."
                )
        rate = 0.0
        if request.coupon:
            code = request.coupon.strip().upper()
            if code not in COUPONS:
                raise StoreError(
                    f"Unknown coupon {request.coupon!r}. Leave coupon empty to order without one."
                )
            rate = COUPONS[code]
        lines = []
        for item_id, quantity in wanted.items():
            item = self.item(item_id)
            item.stock -= quantity
            lines.append(
                ReceiptLine(
                    item_id=item.id,
                    name=item.name,
                    quantity=quantity,
                    unit_price=item.price,
                    line_total=round(item.price * quantity, 2),
                )
            )
        subtotal = round(sum(line.line_total for line in lines), 2)
        discount = round(subtotal * rate, 2)
        shipping_cost = SHIPPING[request.shipping]
        if request.shipping == "standard" and subtotal - discount >= FREE_STANDARD_SHIPPING_FROM:
            shipping_cost = 0.0
        order = Order(
            order_id=f"ORD-{len(self.state.orders) + 1:04d}",
            customer=request.customer,
            lines=lines,
            subtotal=subtotal,
            discount=discount,
            shipping=request.shipping,
            shipping_cost=shipping_cost,
            total=round(subtotal - discount + shipping_cost, 2),
        )
        self.state.orders.append(order)
        self._save()
        return order

    def update_stock(self, item_id: str, delta: int) -> tuple[Item, int]:
        item = self.item(item_id)
        before = item.stock
        item.stock += delta
        self._save()
        return item, before

    def set_price(self, item_id: str, price: float) -> Item:
        item = self.item(item_id)
        item.price = round(price, 2)
        self._save()
        return item

    def delete(self, item_id: str) -> Item:
        item = self.item(item_id)
        self.state.items.remove(item)
        self._save()
        return item


def to_json(data: object) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False)
