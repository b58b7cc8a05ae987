"""An MCP server for an outdoor-gear shop: lookups, filters, orders, stock updates, one destructive tool.

Deterministic from --seed; state lives in memory (a restart resets it) unless --state-file is given.

    python -m examples.servers.inventory [--transport stdio|http] [--host 127.0.0.1] [--port 8765]
                                         [--seed 0] [--state-file F]

Failures come back the two ways real servers report them: an unknown id raises, which the SDK turns
into an `is_error` result; a few bad inputs get a normal text result starting with "Error: ".
"""

import argparse
from pathlib import Path
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from examples.servers._common import add_transport_args, serve
from examples.servers.inventory_store import (
    COUPONS,
    FREE_STANDARD_SHIPPING_FROM,
    SHIPPING,
    Item,
    Order,
    OrderRequest,
    Store,
    StoreError,
    to_json,
)

READ_ONLY = dict(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = (
    "Trailhead Outfitters, a small outdoor-gear shop. About 30 items in six categories "
    "(tents, sleeping, cooking, lighting, backpacks, footwear); each item has an id like ITM-001, "
    "a name, a price in USD, units in stock and a customer rating. Find items with search_items or "
    "filter_items, read one with get_item, buy with place_order (stock goes down), and adjust the shop "
    "with update_stock and set_price. delete_item removes an item for good. Coupons: "
    + ", ".join(f"{code} ({int(rate * 100)}% off)" for code, rate in COUPONS.items())
    + f". Standard shipping {SHIPPING['standard']:.2f}, free from {FREE_STANDARD_SHIPPING_FROM:.2f} after "
    f"discount; express {SHIPPING['express']:.2f}; pickup free."
)


class CategoryCount(BaseModel):
    category: str
    item_count: int


class FilterResult(BaseModel):
    count: int = Field(description="How many items matched")
    items: list[Item]


def _writes(title: str, destructive: bool, idempotent: bool) -> ToolAnnotations:
    # Every hint set explicitly: clients that assume the spec's defaults would treat
    # a write without destructiveHint as destructive.
    return ToolAnnotations(
        title=title,
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def _fail(exc: StoreError) -> ToolError:
    # ToolError keeps the message for the client; any other exception would be hidden as a crash.
    return ToolError(str(exc))


def build_server(store: Store, log_level: str = "WARNING") -> MCPServer:
    """The MCP server over `store`; separate from main() so tests can also run it in-process."""
    server = MCPServer(
        "inventory-example",
        title="Trailhead Outfitters inventory",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        log_level=log_level,  # type: ignore[arg-type]
    )

    @server.tool(annotations=ToolAnnotations(title="List categories", **READ_ONLY))
    def list_categories() -> list[CategoryCount]:
        """List the shop's categories with how many items each holds."""
        return [CategoryCount(category=c, item_count=n) for c, n in sorted(store.categories().items())]

    @server.tool(annotations=ToolAnnotations(title="Get item", **READ_ONLY))
    def get_item(item_id: Annotated[str, Field(description="Item id, e.g. ITM-001")]) -> Item:
        """Get one item by id: name, category, price, stock and rating."""
        try:
            return store.item(item_id)
        except StoreError as exc:
            raise _fail(exc) from None

    # Text only, no output schema: the way many servers answer (and say "Error: ..." in it).
    @server.tool(annotations=ToolAnnotations(title="Search items", **READ_ONLY), structured_output=False)
    def search_items(
        query: Annotated[str, Field(description="Words to find in the item name or category")],
        category: Annotated[str | None, Field(description="Only this category")] = None,
        max_results: Annotated[int, Field(ge=1, le=20, description="At most this many results")] = 5,
    ) -> str:
        """Search items by words in their name (case-insensitive); every word must match. Returns JSON text."""
        words = query.lower().split()
        if not words:
            return "Error: query is empty. Give one or more words, e.g. 'headlamp'."
        if category is not None and category not in store.categories():
            known = ", ".join(sorted(store.categories()))
            return f"Error: unknown category {category!r}. Categories: {known}."
        hits = [
            item
            for item in store.items
            if (category is None or item.category == category)
            and all(w in f"{item.name} {item.category}".lower() for w in words)
        ]
        shown = [item.model_dump() for item in hits[:max_results]]
        return to_json({"query": query, "total_matches": len(hits), "results": shown})

    @server.tool(annotations=ToolAnnotations(title="Filter items", **READ_ONLY))
    def filter_items(
        min_price: Annotated[float, Field(ge=0, description="Lowest price, USD")] = 0.0,
        max_price: Annotated[
            float | None, Field(ge=0, description="Highest price, USD; none for no limit")
        ] = None,
        in_stock_only: Annotated[bool, Field(description="Leave out items with zero stock")] = False,
        category: Annotated[str | None, Field(description="Only this category")] = None,
        sort_by: Annotated[
            Literal["price", "name", "stock", "rating"], Field(description="Sort key")
        ] = "price",
        descending: bool = False,
        limit: Annotated[int, Field(ge=1, le=50, description="At most this many items")] = 10,
    ) -> FilterResult:
        """Filter items by price range, stock and category, sorted by a field."""
        if max_price is not None and max_price < min_price:
            raise ToolError(f"max_price ({max_price}) is below min_price ({min_price}); swap them.")
        if category is not None and category not in store.categories():
            raise ToolError(
                f"Unknown category {category!r}. Categories: {', '.join(sorted(store.categories()))}."
            )
        hits = [
            item
            for item in store.items
            if item.price >= min_price
            and (max_price is None or item.price <= max_price)
            and (not in_stock_only or item.stock > 0)
            and (category is None or item.category == category)
        ]
        # Ties broken by id so the order never depends on anything but the data.
        hits.sort(key=lambda item: item.id)
        hits.sort(key=lambda item: getattr(item, sort_by), reverse=descending)
        return FilterResult(count=len(hits), items=hits[:limit])

    @server.tool(annotations=_writes("Place order", destructive=False, idempotent=False))
    def place_order(order: OrderRequest) -> Order:
        """Place an order for a customer. Takes the units out of stock and returns the receipt with the total."""
        try:
            return store.place_order(order)
        except StoreError as exc:
            raise _fail(exc) from None

    @server.tool(annotations=ToolAnnotations(title="Get order", **READ_ONLY))
    def get_order(order_id: Annotated[str, Field(description="Order id, e.g. ORD-0001")]) -> Order:
        """Get an order placed earlier in this session, by id."""
        try:
            return store.order(order_id)
        except StoreError as exc:
            raise _fail(exc) from None

    @server.tool(
        annotations=_writes("Update stock", destructive=False, idempotent=False), structured_output=False
    )
    def update_stock(
        item_id: Annotated[str, Field(description="Item id, e.g. ITM-001")],
        delta: Annotated[int, Field(description="Units to add (positive) or remove (negative)")],
    ) -> str:
        """Add units to an item's stock, or remove them with a negative delta."""
        try:
            item = store.item(item_id)
        except StoreError as exc:
            raise _fail(exc) from None
        if delta == 0:
            return "Error: delta is 0, nothing to change. Use a positive number to add units, negative to remove."
        if item.stock + delta < 0:
            return (
                f"Error: cannot remove {-delta} units of {item.id} ({item.name}): only {item.stock} in stock."
            )
        item, before = store.update_stock(item.id, delta)
        return f"Stock of {item.id} ({item.name}) changed from {before} to {item.stock}."

    @server.tool(annotations=_writes("Set price", destructive=False, idempotent=True))
    def set_price(
        item_id: Annotated[str, Field(description="Item id, e.g. ITM-001")],
        price: Annotated[float, Field(gt=0, le=10000, description="New unit price, USD")],
    ) -> Item:
        """Set an item's unit price."""
        try:
            return store.set_price(item_id, price)
        except StoreError as exc:
            raise _fail(exc) from None

    @server.tool(annotations=_writes("Delete item", destructive=True, idempotent=True))
    def delete_item(item_id: Annotated[str, Field(description="Item id, e.g. ITM-001")]) -> str:
        """Remove an item from the shop for good. Its stock and history are lost."""
        try:
            item = store.delete(item_id)
        except StoreError as exc:
            raise _fail(exc) from None
        return f"Deleted {item.id} ({item.name})."

    @server.resource(
        "inventory://categories", mime_type="application/json", description="Categories and counts"
    )
    def categories_resource() -> str:
        return to_json(store.categories())

    @server.resource("inventory://policies", mime_type="text/plain", description="Shipping and coupon rules")
    def policies_resource() -> str:
        return INSTRUCTIONS

    @server.resource(
        "inventory://items/{item_id}", mime_type="application/json", description="One item by id"
    )
    def item_resource(item_id: str) -> str:
        return store.item(item_id).model_dump_json()

    @server.prompt(description="Ask for a restocking plan for items running low")
    def restock_plan(threshold: int = 5) -> str:
        return (
            f"Find every item with fewer than {threshold} units in stock (filter_items, sorted by stock), "
            "then propose how many units of each to order so every item has at least "
            f"{threshold * 3} units. Answer with a table: id, name, stock now, units to order."
        )

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m examples.servers.inventory", description=__doc__.split("\n")[0]
    )
    add_transport_args(parser, default_port=8765)
    parser.add_argument("--seed", type=int, default=0, help="Which shop to generate (default 0)")
    parser.add_argument("--state-file", type=Path, help="Keep state in this JSON file across restarts")
    args = parser.parse_args(argv)
    try:
        store = Store(seed=args.seed, state_file=args.state_file)
    except (OSError, ValueError) as exc:
        # A state file we cannot read or write: say so in one line, no traceback.
        parser.error(f"cannot use --state-file {args.state_file}: {exc}")
    server = build_server(store, log_level=args.log_level)
    serve(server, args)


if __name__ == "__main__":
    main()
