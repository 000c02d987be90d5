"""The generated part of ``tests/fixtures/figures_corpus.jsonl`` (``figures_corpus.py``): facts
(amounts, dates, IDs, links, addresses, paths), where each lives (a tool result as JSON or
text, retrieved context, the user's message, a tool message of the history), how the reply
writes it (another currency notation or date format than the source's, a shortened link, a
relative path, an ID in another case), and one figure altered the way a model gets one wrong.
"""

from __future__ import annotations

import random
from typing import Any

MONTHS = "January February March April May June July August September October November December"
MONTH_NAMES = MONTHS.split()
SYMBOL = {"USD": "$", "EUR": "€", "GBP": "£"}


def _amount(rng: random.Random) -> tuple[str, float]:
    value = rng.choice([1200.0, 49.99, 15000.0, 310.5, 7.25, 2480.0, 999.0, 86.4, 12500.75])
    return rng.choice(["USD", "EUR", "GBP"]), value


def _money_source(currency: str, value: float, rng: random.Random) -> str:
    forms = [f"{value:.2f} {currency}", f"{currency} {value:,.2f}"]
    if currency == "EUR":
        forms.append(f"{value:,.2f} EUR".replace(",", "X").replace(".", ",").replace("X", "."))
    else:
        forms.append(f"{SYMBOL[currency]}{value:,.2f}")
    return rng.choice(forms)


def _money_reply(currency: str, value: float, rng: random.Random) -> str:
    whole = value == int(value)
    forms = [f"{SYMBOL[currency]}{value:,.2f}", f"{value:,.2f} {currency}"]
    if whole:
        forms += [f"{SYMBOL[currency]}{int(value):,}", f"{int(value)} {currency}"]
    if currency == "EUR":
        forms.append(f"{value:,.2f} €".replace(",", "X").replace(".", ",").replace("X", "."))
    return rng.choice(forms)


def _date(rng: random.Random) -> tuple[int, int, int]:
    return rng.choice([2025, 2026, 2027]), rng.randint(1, 12), rng.randint(1, 28)


def _date_source(y: int, m: int, d: int, rng: random.Random) -> str:
    return rng.choice(
        [f"{y}-{m:02d}-{d:02d}", f"{y}-{m:02d}-{d:02d}T14:00:00Z", f"{MONTH_NAMES[m - 1]} {d}, {y}"]
    )


def _date_reply(y: int, m: int, d: int, rng: random.Random) -> str:
    name = MONTH_NAMES[m - 1]
    return rng.choice(
        [
            f"{name} {d}, {y}",
            f"{d} {name} {y}",
            f"{name[:3]} {d}",
            f"{y}-{m:02d}-{d:02d}",
            f"{name} {d}",
            f"{d} {name}",
        ]
    )


IDS = [
    "A-58812",
    "INV-2026-0042",
    "#48213",
    "1Z999AA10123456784",
    "9f86d08",
    "TCK-7731",
    "PO-10442",
]
URLS = [
    "https://example.com/orders/A-58812",
    "https://docs.acme.io/guides/setup",
    "https://status.acme.io/incidents/4471",
    "https://shop.example.org/returns/label/88123",
]
EMAILS = ["ada.lovelace@example.com", "billing@acme.io", "j.smith@shop.example.org"]
PATHS = [
    ("/home/ada/reports/q3.pdf", "reports/q3.pdf"),
    ("/var/exports/orders-2026.csv", "orders-2026.csv"),
    ("/srv/app/logs/deploy.log", "/srv/app/logs/deploy.log"),
    ("C:\\Users\\ada\\Documents\\invoice.docx", "invoice.docx"),
]
FILLERS = [
    "Let me know if you need anything else.",
    "It usually takes 3 to 5 business days.",
    "That covers 2 of the 3 items you asked about.",
    "Support is available 24/7.",
    "This was about 15% lower than last quarter.",
    "I used version 3.11 of the exporter.",
    "The call is at 10:30.",
    "",
]


def facts(rng: random.Random) -> list[dict[str, Any]]:
    """Two to four facts, each with its source text and the reply's writing of it."""
    facts: list[dict[str, Any]] = []
    kinds = rng.sample(["amount", "date", "id", "url", "email", "path"], rng.randint(2, 4))
    for kind in kinds:
        if kind == "amount":
            currency, value = _amount(rng)
            facts.append(
                {
                    "kind": kind,
                    "source": _money_source(currency, value, rng),
                    "reply": _money_reply(currency, value, rng),
                    "json": {"amount": f"{value:.2f}", "currency": currency},
                    "value": (currency, value),
                }
            )
        elif kind == "date":
            y, m, d = _date(rng)
            facts.append(
                {
                    "kind": kind,
                    "source": _date_source(y, m, d, rng),
                    "reply": _date_reply(y, m, d, rng),
                    "json": {"date": f"{y}-{m:02d}-{d:02d}"},
                    "value": (y, m, d),
                }
            )
        elif kind == "id":
            ident = rng.choice(IDS)
            shown = ident.lower() if rng.random() < 0.2 and ident[0].isalpha() else ident
            facts.append({"kind": kind, "source": ident, "reply": shown, "json": {"id": ident}})
        elif kind == "url":
            url = rng.choice(URLS)
            shown = rng.choice([url, url + "/", url.removeprefix("https://")])
            facts.append({"kind": kind, "source": url, "reply": shown, "json": {"url": url}})
        elif kind == "email":
            email = rng.choice(EMAILS)
            shown = email if rng.random() < 0.8 else email.title()
            facts.append({"kind": kind, "source": email, "reply": shown, "json": {"to": email}})
        else:
            full, shown = rng.choice(PATHS)
            facts.append({"kind": kind, "source": full, "reply": shown, "json": {"path": full}})
    return facts


SENTENCES = {
    "amount": ["The refund of {x} was issued.", "Your balance is {x}.", "The total comes to {x}."],
    "date": [
        "It is due on {x}.",
        "The delivery is scheduled for {x}.",
        "Your renewal date is {x}.",
    ],
    "id": ["The reference is {x}.", "Use order {x} when you write to us.", "Ticket {x} is open."],
    "url": ["Details are at {x}.", "You can track it here: {x}", "See {x} for the steps."],
    "email": ["I sent the confirmation to {x}.", "Questions can go to {x}."],
    "path": ["The file is saved as {x}.", "I wrote the export to {x}."],
}


def place(facts: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """Where the facts live: a tool result (JSON or text), retrieved context, the user's
    message, or a tool message of the history."""
    where = rng.choice(["tool_json", "tool_text", "evidence", "history", "mixed"])
    record: dict[str, Any] = {"userMessage": "Can you check that for me?", "history": []}
    calls: list[dict[str, Any]] = []
    evidence: list[str] = []
    for index, fact in enumerate(facts):
        place = (
            rng.choice(["tool_json", "evidence", "history", "user"]) if where == "mixed" else where
        )
        if place == "tool_json":
            calls.append(
                {"name": f"lookup_{fact['kind']}", "arguments": {}, "result": fact["json"]}
            )
        elif place == "tool_text":
            calls.append(
                {
                    "name": "search",
                    "arguments": {"q": fact["kind"]},
                    "result": f"found: {fact['source']}",
                }
            )
        elif place == "evidence":
            evidence.append(f"record {index}: {fact['source']}")
        elif place == "history":
            record["history"] += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{index}",
                            "type": "function",
                            "function": {"name": "fetch", "arguments": "{}"},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": f"c{index}",
                    "content": f"result: {fact['source']}",
                },
            ]
        else:
            record["userMessage"] += f" It's about {fact['source']}."
    if evidence:
        record["evidence"] = evidence
    record["calls"] = calls
    return record


def write(facts: list[dict[str, Any]], rng: random.Random, key: str = "reply") -> str:
    parts = [rng.choice(SENTENCES[f["kind"]]).format(x=f[key]) for f in facts]
    parts.append(rng.choice(FILLERS))
    return " ".join(p for p in parts if p)


def altered(fact: dict[str, Any], rng: random.Random) -> str:
    """The fact's reply text changed the way a model gets one wrong."""
    kind, shown = fact["kind"], fact["reply"]
    if kind == "amount":
        currency, value = fact["value"]
        choice = rng.choice(["digit", "currency", "scale"])
        if choice == "currency":
            other = rng.choice([c for c in SYMBOL if c != currency])
            return _money_reply(other, value, rng)
        changed = value + rng.choice([100.0, 10.0, 1.0]) if choice == "digit" else value * 10
        return _money_reply(currency, changed, rng)
    if kind == "date":
        y, m, d = fact["value"]
        name = MONTH_NAMES[m - 1]
        return rng.choice(
            [f"{name} {d + 1}, {y}", f"{d} {MONTH_NAMES[m % 12]} {y}", f"{y}-{m:02d}-{d + 2:02d}"]
        )
    if kind == "id":
        digits = [i for i, ch in enumerate(shown) if ch.isdigit()]
        at = rng.choice(digits)
        return shown[:at] + str((int(shown[at]) + 3) % 10) + shown[at + 1 :]
    if kind == "url":
        return shown.rstrip("/") + rng.choice(["-2", "/v2", "1"])
    if kind == "email":
        user, _, host = shown.partition("@")
        return rng.choice([f"{user}s@{host}", f"{user}@{host.replace('.', '-', 1)}.com"])
    stem, dot, ext = shown.rpartition(".")
    return f"{stem}-final{dot}{ext}"
