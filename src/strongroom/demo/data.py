"""Sample "customer events": JSON with PII (name, email, address) and non-PII (order totals).

Deterministic for a given seed, so the demo and tests see the same customers every run.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "John", "Margaret", "Ken",
         "Radia", "Tim", "Shafi", "Leslie", "Sophie", "Niklaus", "Hedy", "Dennis", "Lynn", "Whitfield"]  # fmt: skip
LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy", "Hamilton",
        "Thompson", "Perlman", "Berners-Lee", "Goldwasser", "Lamport", "Wilson", "Wirth", "Lamarr",
        "Ritchie", "Conway", "Diffie"]  # fmt: skip
CITIES = [("Lisbon", "PT"), ("Berlin", "DE"), ("Dublin", "IE"), ("Lyon", "FR"), ("Turin", "IT"),
          ("Porto", "PT"), ("Ghent", "BE"), ("Krakow", "PL"), ("Malmo", "SE"), ("Utrecht", "NL")]  # fmt: skip
STREETS = ["Rua Augusta", "Hauptstrasse", "Grafton Street", "Rue de la Republique", "Via Roma"]

#: JSON paths of the PII fields in a customer event (what field-level encryption protects).
PII_PATHS = ["$.name", "$.email", "$.address"]


@dataclass(frozen=True)
class Customer:
    customer_id: str
    name: str
    email: str
    address: dict[str, str]


def customers(n: int, seed: int = 7) -> list[Customer]:
    rng = random.Random(seed)
    result = []
    for i in range(n):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        city, country = rng.choice(CITIES)
        result.append(
            Customer(
                customer_id=f"cust-{i:05d}",
                name=f"{first} {last}",
                email=f"{first.lower()}.{last.lower()}{i}@example.com",
                address={
                    "street": f"{rng.randint(1, 200)} {rng.choice(STREETS)}",
                    "city": city,
                    "postcode": f"{rng.randint(1000, 99999)}",
                    "country": country,
                },
            )
        )
    return result


def customer_events(n_events: int, n_customers: int = 10, seed: int = 7) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` pairs: key = customer id, value = one JSON order event."""
    rng = random.Random(seed + 1)
    people = customers(n_customers, seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for i in range(n_events):
        c = people[i % n_customers] if i < n_customers else rng.choice(people)
        event = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "type": "order_placed",
            "customer_id": c.customer_id,
            "name": c.name,
            "email": c.email,
            "address": c.address,
            "order": {
                "order_id": f"ord-{i:07d}",
                "total": round(rng.uniform(5, 400), 2),
                "currency": "EUR",
                "items": rng.randint(1, 6),
            },
            "ts": (start + timedelta(minutes=7 * i)).isoformat(),
        }
        yield c.customer_id.encode(), json.dumps(event, separators=(",", ":")).encode()
