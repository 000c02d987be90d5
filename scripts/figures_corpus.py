# ruff: noqa: E501  (the hand-written replies are kept one to a line, as they read)
"""Write ``tests/fixtures/figures_corpus.jsonl``: grounded replies, and the same replies with
one figure altered, for the ``figures`` check's false-FAIL and catch rates.

    python scripts/figures_corpus.py

Each line: ``label`` (``grounded`` or ``altered``), ``altered`` (the altered figure as the
reply writes it, or null), ``group`` (``generated`` or ``written``) and ``record``: a turn as
JSON (the CLI's format: ``userMessage``, ``history``, ``evidence``, ``reply`` with its
``meta.toolCalls`` and their ``result``).

The generated part varies where each fact lives (a tool result as JSON or text, retrieved
context, the user's message, a tool message of the history) and how the reply writes it (a
different currency notation or date format than the source's, a shortened link, a relative
path, an ID in another case). The written part is replies written by hand around distractors
that are not figures (versions, times, counts, percentages, "24/7", "COVID-19", code). Each
altered reply changes one figure the way a model gets one wrong: a digit, a day, the currency,
a character of an ID or an address. Seeded: the same file every run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "figures_corpus.jsonl"
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


def _facts(rng: random.Random) -> list[dict[str, Any]]:
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


def _place(facts: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
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


def _write(facts: list[dict[str, Any]], rng: random.Random, key: str = "reply") -> str:
    parts = [rng.choice(SENTENCES[f["kind"]]).format(x=f[key]) for f in facts]
    parts.append(rng.choice(FILLERS))
    return " ".join(p for p in parts if p)


def _altered(fact: dict[str, Any], rng: random.Random) -> str:
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


def generated(count: int, seed: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for _ in range(count):
        facts = _facts(rng)
        place = _place(facts, rng)
        reply = _write(facts, random.Random(rng.random()))
        rows.append(_row("grounded", None, "generated", place, reply))
        victim = rng.choice(facts)
        wrong = _altered(victim, rng)
        bad = reply.replace(victim["reply"], wrong, 1)
        if bad != reply:
            rows.append(_row("altered", wrong, "generated", place, bad))
    return rows


def _row(
    label: str, altered: str | None, group: str, place: dict[str, Any], reply: str
) -> dict[str, Any]:
    record = {k: v for k, v in place.items() if k != "calls"}
    record["reply"] = {"text": reply, "meta": {"toolCalls": place["calls"]}}
    return {"label": label, "altered": altered, "group": group, "record": record}


# Written by hand: (user message, evidence passages, tool results, grounded reply, altered
# figure as the reply writes it, the altered one).
WRITTEN: list[tuple[str, list[str], list[Any], str, str, str]] = [
    (
        "Did my refund go through?",
        [],
        [{"status": "refunded", "amount": 1200, "currency": "USD", "order": "A-58812"}],
        "Yes: order A-58812 was refunded $1,200.00. It usually shows on your card within 5-10 business days.",
        "$1,200.00",
        "$1,250.00",
    ),
    (
        "When is my next invoice?",
        ["billing.db: next invoice 2026-04-01, plan Pro, 49.99 EUR / month"],
        [],
        "Your next invoice is on April 1, 2026, for 49,99 EUR on the Pro plan.",
        "April 1, 2026",
        "April 11, 2026",
    ),
    (
        "Where did you save the report?",
        [],
        [{"saved": "/home/ada/reports/q3.pdf", "pages": 12}],
        "PDF saved to reports/q3.pdf (12 pages). Open it with any PDF viewer.",
        "reports/q3.pdf",
        "reports/q4.pdf",
    ),
    (
        "Email the summary to Ada.",
        [],
        [{"sent": True, "to": "ada.lovelace@example.com", "id": "msg-77812"}],
        "Email sent to ada.lovelace@example.com (message msg-77812).",
        "ada.lovelace@example.com",
        "ada.lovelace@example.org",
    ),
    (
        "Post a note on ticket 4471.",
        [],
        ["note posted on TCK-4471 at 2026-02-03T09:12:00Z"],
        "Done. Note posted on TCK-4471 on Feb 3.",
        "TCK-4471",
        "TCK-4417",
    ),
    (
        "What's the status page link?",
        ["Status page: https://status.acme.io (updated every 60 seconds)"],
        [],
        "You can follow it on https://status.acme.io/ - it refreshes every 60 seconds.",
        "https://status.acme.io/",
        "https://status.acme.com/",
    ),
    (
        "How much do I owe?",
        [],
        ["balance: GBP 310.50 due 2026-05-15"],
        "You owe £310.50, due by 15 May 2026. Paying early is fine.",
        "£310.50",
        "£301.50",
    ),
    (
        "Which Python does the exporter need?",
        ["exporter README: requires Python 3.11+, writes to ./out/export.csv"],
        [],
        "The exporter needs Python 3.11 or newer and writes ./out/export.csv.",
        "./out/export.csv",
        "./out/exports.csv",
    ),
    (
        "What's the tracking number?",
        [],
        [{"carrier": "UPS", "tracking": "1Z999AA10123456784", "eta": "2026-03-09"}],
        "It ships with UPS, tracking 1Z999AA10123456784, expected on March 9.",
        "1Z999AA10123456784",
        "1Z999AA10123456785",
    ),
    (
        "Summarise the incident.",
        [
            "INC-2291: API latency above 2s from 14:05 to 14:40 UTC on 2026-01-20; root cause: a full disk on db-3"
        ],
        [],
        "INC-2291: on January 20, 2026 the API was slow (over 2s) for about 35 minutes because db-3's disk was full. It is resolved; 100% of requests succeed again.",
        "INC-2291",
        "INC-2219",
    ),
    (
        "Convert my order total.",
        [],
        [{"total": "1.200,00", "currency": "EUR"}],
        "Your order total is €1,200.00 (1.200,00 EUR). Exchange rates change daily, so check before paying.",
        "€1,200.00",
        "€1,300.00",
    ),
    (
        "Who do I contact about billing?",
        ["support.md: billing questions go to billing@acme.io"],
        [],
        "Please write to billing@acme.io; the team answers within 24 hours, 7 days a week.",
        "billing@acme.io",
        "billing@acme.com",
    ),
    (
        "Which commit broke the build?",
        [],
        ["bisect: first bad commit 9f86d08 (2026-02-11) by j.smith"],
        "The first bad commit is 9f86d08, from Feb 11, 2026. Reverting it should make CI green again; run `make test` to check.",
        "9f86d08",
        "9f86d80",
    ),
    (
        "Where are the logs?",
        [],
        [{"log": "/srv/app/logs/deploy.log", "lines": 420}],
        "The deploy log is at /srv/app/logs/deploy.log (420 lines). Use `tail -n 50` to see the end.",
        "/srv/app/logs/deploy.log",
        "/srv/app/logs/deploy-2.log",
    ),
    (
        "Book the room for Thursday.",
        [],
        [{"booked": "Room 4B", "date": "2026-03-12", "from": "10:00", "to": "11:00"}],
        "Room 4B is booked for Thursday, March 12, 10:00-11:00. I added it to your calendar.",
        "March 12",
        "March 13",
    ),
    (
        "How many seats are left?",
        ["course DB-201: 12 of 30 seats taken, starts 2026-09-01, fee 450 USD"],
        [],
        "18 seats are left in DB-201, which starts on 1 September 2026. The fee is $450.",
        "$450",
        "$540",
    ),
    (
        "What's my policy number?",
        ["policy POL-558120, renewal 2026-11-30"],
        [],
        "Your policy number is POL-558120 and it renews on 30 November 2026.",
        "POL-558120",
        "POL-558210",
    ),
    (
        "Share the return label.",
        [],
        [{"label_url": "https://shop.example.org/returns/label/88123?sig=ab12"}],
        "Here is your return label: https://shop.example.org/returns/label/88123 - print it and attach it to the box.",
        "https://shop.example.org/returns/label/88123",
        "https://shop.example.org/returns/label/88132",
    ),
    (
        "What did we spend on cloud in March?",
        [],
        ["March cloud spend: USD 12,500.75 (AWS 9,800.00, GCP 2,700.75)"],
        "Cloud spend in March was $12,500.75: AWS $9,800.00 and GCP $2,700.75. That is within the 15% buffer you set.",
        "$2,700.75",
        "$2,070.75",
    ),
    (
        "Any news on the COVID-19 leave policy?",
        ["HR memo 2026-01-08: COVID-19 leave stays at 5 days; contact hr@acme.io"],
        [],
        "The COVID-19 leave stays at 5 days (HR memo of January 8, 2026). For questions, write to hr@acme.io.",
        "hr@acme.io",
        "hr-team@acme.io",
    ),
    (
        "Export the orders.",
        [],
        [{"written": "/var/exports/orders-2026.csv", "rows": 1532}],
        "Exported 1,532 orders to orders-2026.csv. Open it in Excel or run `wc -l` on it.",
        "orders-2026.csv",
        "orders-2025.csv",
    ),
    (
        "What's the invoice number?",
        [],
        [
            {
                "invoice": "INV-2026-0042",
                "amount": "86.40",
                "currency": "GBP",
                "issued": "2026-02-28",
            }
        ],
        "Invoice INV-2026-0042 for £86.40 was issued on 28 February 2026.",
        "INV-2026-0042",
        "INV-2026-0024",
    ),
    (
        "Is the deploy done?",
        [],
        [{"deployed": "v2.4.1", "env": "production", "at": "2026-03-02T16:20:00Z"}],
        "Deployed v2.4.1 to production on March 2, 2026. Step 2 of 3 (smoke tests) is next.",
        "March 2, 2026",
        "March 3, 2026",
    ),
    (
        "Send me the setup guide.",
        ["Setup guide: https://docs.acme.io/guides/setup#install"],
        [],
        "The setup guide is at https://docs.acme.io/guides/setup - start with the install section.",
        "https://docs.acme.io/guides/setup",
        "https://docs.acme.io/guides/setup-v2",
    ),
    (
        "What's the PO number for the laptops?",
        [],
        ["PO-10442 approved: 3 laptops, total USD 7,440.00"],
        "PO-10442 is approved for the 3 laptops, $7,440 in total.",
        "$7,440",
        "$7,400",
    ),
]


# Written by hand after the check was built, and read by it once before any change (each
# with the figure an altered copy changes, and what it becomes). That first reading found two
# rows written wrong (a figure no source held; an altered "figure" that was two) and three
# false FAILs: "#4821" and "#512" against a bare 4821 and 512 (the check then learnt to find
# a "#" ID as its digits) and "£58", a sum of two £29 tickets (a derived figure: still a false
# FAIL, kept as one).
AFTER: list[tuple[str, list[str], list[Any], str, str, str]] = [
    (
        "When does my plan renew?",
        ["renewal: 2026-04-01; price: $19.00/month"],
        [],
        "Your subscription renews on April 1, 2026, at 19 USD a month.",
        "April 1, 2026",
        "April 2, 2026",
    ),
    (
        "Which invoices are open?",
        [],
        [
            [
                {"id": "INV-1001", "amount": 250, "currency": "USD", "date": "2026-01-12"},
                {"id": "INV-1002", "amount": 75.5, "currency": "USD", "date": "2026-02-02"},
                {"id": "INV-1003", "amount": 1000, "currency": "USD", "date": "2026-02-20"},
            ]
        ],
        "I found 3 open invoices: INV-1001 ($250), INV-1002 ($75.50) and INV-1003 ($1,000). The oldest is from Jan 12.",
        "$75.50",
        "$57.50",
    ),
    (
        "When is my flight?",
        [],
        ["LH454 FRA-SFO 2026-07-14 dep 13:05 arr 15:50"],
        "Your flight LH 454 leaves Frankfurt at 13:05 on 14 July and lands in San Francisco at 15:50 local time.",
        "14 July",
        "15 July",
    ),
    (
        "Where is the failing test?",
        [],
        ["repo: https://github.com/acme/widgets; failing: tests/test_api.py::test_login"],
        "The repository is at github.com/acme/widgets and the failing test is tests/test_api.py::test_login.",
        "tests/test_api.py",
        "tests/test_auth.py",
    ),
    (
        "How much is left in Q2?",
        ["Q2 budget remaining: EUR 2,500"],
        [],
        "You have €2.5k left in the Q2 budget.",
        "€2.5k",
        "€3.5k",
    ),
    (
        "How do I reach Sam?",
        ["contacts: Sam Okoro, +44 20 7946 0958, sam@acme.co.uk"],
        [],
        "Ping Sam at +44 20 7946 0958 or sam@acme.co.uk.",
        "sam@acme.co.uk",
        "sam@acme.com",
    ),
    (
        "What's the checksum?",
        [],
        [{"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}],
        "The SHA-256 of the file is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a09",
    ),
    (
        "Is ticket 4821 closed?",
        [],
        [{"ticket": 4821, "closed_at": "2026-11-27T16:00:00Z"}],
        "Ticket #4821 was closed yesterday (Nov 27).",
        "Nov 27",
        "Nov 26",
    ),
    (
        "What do I owe?",
        [],
        [{"due": "1234.56", "currency": "EUR", "by": "2026-03-31"}],
        "Total due: 1 234,56 € by 31.03.2026.",
        "31.03.2026",
        "30.03.2026",
    ),
    (
        "Where are the notes?",
        [],
        [{"saved": "/shared/notes/2026-03-05-standup.md"}],
        "The meeting notes are in /shared/notes/2026-03-05-standup.md.",
        "/shared/notes/2026-03-05-standup.md",
        "/shared/notes/2026-03-06-standup.md",
    ),
    (
        "What's my balance?",
        [],
        [{"balance": -45.2, "currency": "USD"}],
        "Balance: -$45.20 (overdrawn).",
        "$45.20",
        "$42.50",
    ),
    (
        "What did the tickets cost?",
        [],
        [{"price_each": 29, "currency": "GBP", "qty": 2}],
        "Your 2 tickets cost £58 in total (2 x £29).",
        "£29",
        "£39",
    ),
    (
        "Send me the report link.",
        [],
        ["https://files.acme.io/r/q3?token=abc&exp=86400"],
        "Download it from https://files.acme.io/r/q3?token=abc; the link expires in 24 hours.",
        "https://files.acme.io/r/q3?token=abc",
        "https://files.acme.io/r/q4?token=abc",
    ),
    (
        "Was the PR merged?",
        [],
        [{"number": 512, "merged_at": "2026-02-10T09:00:00Z"}],
        "The PR (#512) was merged into main on 2026-02-10.",
        "#512",
        "#521",
    ),
    (
        "Who got the email?",
        ["contact: ada.lovelace@example.com"],
        [],
        "Sent to Ada.Lovelace@Example.com.",
        "Ada.Lovelace@Example.com",
        "Ada.Byron@Example.com",
    ),
    (
        "How big is the report?",
        [],
        ["report_final_v2.pdf (2,457,600 bytes)"],
        "The file report_final_v2.pdf is 2.4 MB.",
        "report_final_v2.pdf",
        "report_final_v3.pdf",
    ),
    (
        "When was it delivered?",
        [],
        [{"delivered": "2026-04-03"}],
        "Delivered on 03/04/2026.",
        "03/04/2026",
        "05/04/2026",
    ),
    (
        "How did the API call go?",
        [],
        ["GET /v2/orders/58812 -> 200 (230ms)"],
        "The API responded in 230 ms with status 200 for GET /v2/orders/58812.",
        "/v2/orders/58812",
        "/v2/orders/58821",
    ),
    (
        "When is the renewal and how much?",
        [],
        [{"renews": "2027-01-15", "amount": "120.00", "currency": "CHF"}],
        "It renews on 15 January 2027 for CHF 120.",
        "CHF 120",
        "CHF 210",
    ),
    (
        "Which order was it?",
        [],
        [{"order_id": "ORD-2026-000731"}],
        "That was order ORD-2026-000731, placed online.",
        "ORD-2026-000731",
        "ORD-2026-000713",
    ),
]


def written() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for user, evidence, results, reply, figure, wrong in WRITTEN:
        place: dict[str, Any] = {"userMessage": user, "history": []}
        if evidence:
            place["evidence"] = evidence
        place["calls"] = [{"name": "lookup", "arguments": {}, "result": r} for r in results]
        rows.append(_row("grounded", None, "written", place, reply))
        rows.append(_row("altered", wrong, "written", place, reply.replace(figure, wrong, 1)))
    for user, evidence, results, reply, figure, wrong in AFTER:
        place = {"userMessage": user, "history": [], "calls": []}
        if evidence:
            place["evidence"] = evidence
        place["calls"] = [{"name": "lookup", "arguments": {}, "result": r} for r in results]
        rows.append(_row("grounded", None, "written-after", place, reply))
        rows.append(_row("altered", wrong, "written-after", place, reply.replace(figure, wrong, 1)))
    return rows


def main() -> None:
    rows = generated(260) + written()
    OUT.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    labels = [row["label"] for row in rows]
    print(f"wrote {OUT}: {labels.count('grounded')} grounded, {labels.count('altered')} altered")


if __name__ == "__main__":
    main()
