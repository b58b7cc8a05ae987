"""An MCP server shaped like most third-party ones: no annotations, arrays and objects as parameters.

Statistics over lists of numbers, unit conversions, a small table of cities and a notebook that
writes. No tool carries a read-only or destructive hint and few names start with get_ or list_, so
whatever decides what may be explored or trained on must judge by name, description and schema.
Results come back as JSON for some tools and as plain text for others, as real servers mix them.

    python -m examples.servers.stats_lab [--transport stdio|http] [--host 127.0.0.1] [--port 8767]
"""

import argparse
import json
import statistics
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from examples.servers._common import add_transport_args, serve

CITIES = {
    "Lisbon": {"country": "Portugal", "population": 545923, "area_km2": 100.05, "founded": -1200},
    "Porto": {"country": "Portugal", "population": 231800, "area_km2": 41.42, "founded": -300},
    "Madrid": {"country": "Spain", "population": 3332035, "area_km2": 604.3, "founded": 865},
    "Valencia": {"country": "Spain", "population": 807693, "area_km2": 134.6, "founded": -138},
    "Lyon": {"country": "France", "population": 522250, "area_km2": 47.87, "founded": -43},
    "Nantes": {"country": "France", "population": 323204, "area_km2": 65.19, "founded": -70},
    "Graz": {"country": "Austria", "population": 298479, "area_km2": 127.57, "founded": 1128},
    "Utrecht": {"country": "Netherlands", "population": 367984, "area_km2": 99.21, "founded": 47},
}
_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "mi": 1609.344}

Numbers = Annotated[list[float], Field(min_length=1, max_length=200, description="The numbers")]
Field_ = Literal["population", "area_km2", "founded"]


class Sample(BaseModel):
    label: str = Field(description="A name for the measurement, e.g. 'monday'")
    value: float


class Summary(BaseModel):
    count: int
    mean: float
    minimum: float
    maximum: float
    stdev: float | None


def build() -> MCPServer:
    server = MCPServer(
        "stats-lab",
        instructions="Statistics on lists of numbers, length and temperature conversions, facts about "
        "eight European cities, and a notebook of titled notes.",
    )
    notes: dict[str, str] = {"groceries": "eggs, flour, 2 lemons", "trip": "Porto in May, 4 nights"}

    @server.tool(description="Add up a list of numbers.")
    def sum_numbers(numbers: Numbers) -> str:
        return f"{sum(numbers):g}"

    @server.tool(description="Mean, minimum, maximum and standard deviation of a list of numbers.")
    def describe(numbers: Numbers) -> Summary:
        sd = statistics.stdev(numbers) if len(numbers) > 1 else None
        return Summary(
            count=len(numbers), mean=round(statistics.fmean(numbers), 4), minimum=min(numbers),
            maximum=max(numbers), stdev=None if sd is None else round(sd, 4),
        )  # fmt: skip

    @server.tool(description="The p-th percentile (0-100) of a list of numbers, by linear interpolation.")
    def percentile(numbers: Numbers, p: Annotated[float, Field(ge=0, le=100)]) -> str:
        xs = sorted(numbers)
        k = (len(xs) - 1) * p / 100
        lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
        return f"{xs[lo] + (xs[hi] - xs[lo]) * (k - lo):g}"

    @server.tool(description="The labelled sample with the highest value, from a list of {label, value}.")
    def top_sample(samples: Annotated[list[Sample], Field(min_length=1)]) -> str:
        best = max(samples, key=lambda s: s.value)
        return json.dumps({"label": best.label, "value": best.value})

    @server.tool(description="Convert a length between units (mm, cm, m, km, in, ft, mi).")
    def convert_length(
        value: float,
        from_unit: Literal["mm", "cm", "m", "km", "in", "ft", "mi"],
        to_unit: Literal["mm", "cm", "m", "km", "in", "ft", "mi"],
    ) -> str:
        return f"{round(value * _METRES[from_unit] / _METRES[to_unit], 4):g} {to_unit}"

    @server.tool(description="Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K).")
    def convert_temperature(
        value: float, scale_from: Literal["C", "F", "K"], scale_to: Literal["C", "F", "K"]
    ) -> str:
        c = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[scale_from]
        out = {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[scale_to]
        return f"{round(out, 2):g} {scale_to}"

    @server.tool(description="Facts about one city: country, population, area in km2, year founded.")
    def city(name: str) -> dict:
        hit = next((c for c in CITIES if c.lower() == name.strip().lower()), None)
        if hit is None:
            raise ToolError(f"unknown city {name!r}; known: {', '.join(CITIES)}")
        return {"name": hit, **CITIES[hit]}

    @server.tool(description="The cities known, optionally only those of one country. One per line.")
    def cities(country: str | None = None) -> str:
        rows = [c for c, v in CITIES.items() if country is None or v["country"].lower() == country.lower()]
        return "\n".join(rows) if rows else f"no cities in {country}"

    @server.tool(description="Rank the named cities by one field, largest first.")
    def rank_cities(
        names: Annotated[list[str], Field(min_length=2)], by: Field_ = "population"
    ) -> list[dict]:
        unknown = [n for n in names if n not in CITIES]
        if unknown:
            raise ToolError(f"unknown cities: {', '.join(unknown)}")
        return [{"name": n, by: CITIES[n][by]} for n in sorted(names, key=lambda n: -CITIES[n][by])]

    @server.tool(description="Titles of the saved notes, one per line.")
    def note_titles() -> str:
        return "\n".join(sorted(notes)) or "(no notes)"

    @server.tool(description="The text of one saved note.")
    def open_note(title: str) -> str:
        if title not in notes:
            raise ToolError(f"no note titled {title!r}")
        return notes[title]

    @server.tool(description="Save a note under a title, replacing any note of that title.")
    def save_note(title: str, text: str) -> str:
        notes[title] = text
        return f"saved {title!r} ({len(text)} characters)"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_transport_args(parser, default_port=8767)
    serve(build(), parser.parse_args())


if __name__ == "__main__":
    main()
