"""Write ``ledger.jsonl``: a support bot's ledger, through the real verifier (scripted judge).

Run from the repository: ``python examples/review/make_ledger.py``. The turns go through
``Verifier.run`` with ``ledgerPath`` set, so every line is what replyguard itself writes:

1. eight turns with ``logContent`` off (the ledger's first week: no text kept);
2. twenty-four turns in shadow mode with ``logContent`` on, judged by ``judge-a``: passes,
   flagged FAILs, a judge timeout (failed open), and a billing run kind in enforce mode with an
   exhausted turn;
3. the judge model changes to ``judge-b``: the FAQ answers come back byte for byte, and two of
   the verdicts flip.

Deterministic but for the timestamps, latencies and turn ids a rerun changes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge

HERE = Path(__file__).resolve().parent
LEDGER = HERE / "ledger.jsonl"

FAQ = {
    "How long do refunds take?": (
        "Refunds reach your card 5 to 10 business days after we receive the return. "
        "You get an email the day we process it."
    ),
    "Can I change my delivery address?": (
        "Yes, until the parcel ships: open Orders, pick the order and choose Change address."
    ),
    "Do you ship to Norway?": "Yes. Shipping to Norway takes 4 to 6 days and costs 9 EUR.",
    "Where is my order 4417?": "I can't see order 4417 from here. Let me check.",
}
"""Questions whose answers are templated: the same bytes every time they are asked."""

SHADOW = [
    # (question, reply, judge answer)
    *[(q, a, "The reply answers the question directly.\nPASS") for q, a in FAQ.items()][:3],
    (
        "Where is my order 4417?",
        FAQ["Where is my order 4417?"],
        "The agent says it will check but the turn ends there: nothing was looked up.\n"
        "FAIL [incomplete]: Look the order up and give its status, or say what you need.",
    ),
    (
        "Cancel my subscription please.",
        "Done! Your subscription is cancelled.",
        "The tool ledger holds no cancellation call.\n"
        "FAIL [goal_missed]: Nothing was cancelled: call cancel_subscription first.",
    ),
    (
        "What's your phone number?",
        "You can reach us on +44 20 7946 0000, Monday to Friday 9:00-17:00.",
        "PASS",
    ),
    (
        "Is the blue jacket waterproof?",
        "Yes, fully waterproof to 10,000 mm.",
        "The product sheet in the rules says water-resistant, not waterproof.\n"
        "FAIL [rule_violation]: Say water-resistant (5,000 mm), as the product sheet does.",
    ),
    ("Thanks, that's all!", "You're welcome, have a good day!", "PASS"),
    (
        "Why was I charged twice?",
        "Sorry about that. The second charge is a pending authorisation that drops off in 3 "
        "days; if it is still there on Friday, reply here and I will refund it.",
        "PASS",
    ),
    (
        "Write me a poem about your refund policy.",
        "I can't help with that.",
        "A short poem is harmless and within scope.\n"
        "FAIL [refusal]: Write the short poem; keep the policy facts right.",
    ),
    ("Do you have a store in Leeds?", "Yes: 14 Briggate, open 10:00-18:00.", "PASS"),
    ("hi", "Hi! How can I help with your order today?", "PASS"),
    (
        "Can I return opened earbuds?",
        "Opened earbuds can be returned within 30 days if they are unused and in the box.",
        "PASS",
    ),
    ("When do you restock size 42?", "Size 42 is back on 3 December.", "PASS"),
    ("Can you help me with my order?", "Sure, which order is it?", "PASS [awaiting_user]"),
    (
        "My parcel arrived damaged.",
        "Sorry to hear that! Send a photo of the box and the item and we'll replace it.",
        "PASS",
    ),
    ("What's your returns address?", "Returns, Unit 4, Leeds LS1 4AP.", "PASS"),
    ("Is there a student discount?", "Yes: 10 % with a UNiDAYS code at checkout.", "PASS"),
]
BILLING = [
    (
        "Refund order 5120 to my card.",
        ["I've refunded it.", "The refund is on its way."],
        [
            "No refund call was made.\nFAIL [goal_missed]: Call refund_order for order 5120.",
            "Still no refund call.\nFAIL [goal_missed]: Call refund_order for order 5120.",
        ],
    ),
    ("What is my balance?", ["Your balance is 0.00 EUR."], ["PASS"]),
]


def config(**changes: object) -> VerifierConfig:
    base: dict[str, object] = {
        "enabled": True,
        "verifyAll": True,
        "mode": "shadow",
        "ledgerPath": str(LEDGER),
        "logContent": True,
        "model": "judge-a",
        "agentModel": "openai/gpt-4o",
        "runKinds": {"billing": {"mode": "enforce", "maxAttempts": 2}},
    }
    return VerifierConfig.from_dict({**base, **changes})


async def judged(verifier: Verifier, question: str, replies: list[str], **turn: object) -> None:
    await verifier.run(ScriptedAgent(replies), Turn(user_message=question, **turn))  # type: ignore[arg-type]


async def main() -> None:
    LEDGER.unlink(missing_ok=True)
    # 1. The first week: no content logged.
    week_one = [(q, a, "PASS") for q, a in list(FAQ.items())[:3]]
    week_one += [(q, r, j) for q, r, j in SHADOW[4:9]]
    verifier = Verifier(
        config(logContent=False), judge=ScriptedJudge([j for *_, j in week_one], model="judge-a")
    )
    for number, (question, reply, _) in enumerate(week_one):
        await judged(verifier, question, [reply], id=f"w1-{number}", agent_id="support-bot")
    await verifier.aclose()
    # 2. Shadow mode with content, judge-a; one judge call times out.
    answers: list[object] = [j for *_, j in SHADOW]
    answers.insert(10, TimeoutError("the judge did not answer in time"))
    verifier = Verifier(config(), judge=ScriptedJudge(answers, model="judge-a"))
    shadow = [*SHADOW[:10], ("Any discount codes?", "Not right now, sorry.", ""), *SHADOW[10:]]
    for number, (question, reply, _) in enumerate(shadow):
        await judged(verifier, question, [reply], id=f"w2-{number}", agent_id="support-bot")
    billing = ScriptedJudge([j for *_, js in BILLING for j in js], model="judge-a")
    verifier = Verifier(config(), judge=billing)
    for number, (question, replies, _) in enumerate(BILLING):
        await judged(
            verifier,
            question,
            replies,
            id=f"b-{number}",
            agent_id="billing-bot",
            run_kind="billing",
        )
    # 3. The judge model changes; the templated FAQ answers come back byte for byte.
    after = [
        "PASS",  # refunds: same as before
        "The address can only change before shipping; the reply says so.\nPASS",
        "Shipping figures are not in the rules given.\n"
        "FAIL [rule_violation]: Quote shipping costs from the price list only.",  # flipped
        "PASS",  # order 4417: flipped from FAIL
    ]
    verifier = Verifier(config(model="judge-b"), judge=ScriptedJudge(after, model="judge-b"))
    for number, (question, reply) in enumerate(FAQ.items()):
        await judged(verifier, question, [reply], id=f"w3-{number}", agent_id="support-bot")
    await verifier.aclose()


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asyncio.run(main())
    print(f"wrote {LEDGER}")
