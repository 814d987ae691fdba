"""A deterministic corpus of game-like text for training the tiny model's tokenizer.

It covers what prompts hold: board glyphs, numbers, action words of every game, the `act` format and
plain English, so that the tokenizer does not explode prompts into single bytes. No randomness beyond a
seeded `random.Random`; no downloads.
"""

from __future__ import annotations

import random

_WORDS = (
    "the a an of to and in is it you that for on with as are this be at by from or have not your can will "
    "move moves board score tile tiles merge merged empty corner row column left right up down swap place "
    "rot col piece pieces line lines hole holes height next preview candy candies colour match cascade "
    "mario jump run coins time lives enemy goomba koopa pipe gap flag ground brick block x y "
    "quest team propose approve reject success fail vote votes leader merlin servant minion assassin "
    "assassinate say good evil seat player round mission discussion history "
    "army fleet hold support convoy build disband retreat supply centre centres centers power phase "
    "spring fall winter movement orders order unit units province austria england france germany italy "
    "russia turkey to all message"
).split()
_SECTIONS = (
    "INTENTION:", "ACTION:", "ORDERS:", "SKILL:", "KEEP", "SWITCH", "NONE", "SETUP", "CLEAR", "MERGE",
    "ATTACK", "DEFEND", "NAVIGATE", "POSITION", "COLLECT", "BUILD", "SURVIVE", "OPTIMIZE", "EXPLORE",
    "EXECUTE", "Observation:", "Legal actions:", "Rules:", "Skill:", "Plan:", "Preconditions:", "Success:",
    "Abort:", "Contract:", "Summary:", "JSON", '{"summary":', '"plan":', '"preconditions":', '"success":',
    '"abort":', "approve", "reject", "<|im_start|>", "<|im_end|>", "system", "user", "assistant",
)
_PROVINCES = ("PAR MAR BRE BUR PIC GAS LON LVP EDI BER MUN KIE VIE BUD TRI ROM NAP VEN MOS STP WAR SEV "
              "CON ANK SMY").split()
_GLYPHS = ". # @ * | - + = [ ] ( ) < > ? ! G K P C M O I T S Z J L".split()


def _board_2048(rng: random.Random) -> str:
    rows = []
    for _ in range(4):
        rows.append(" ".join(f"{rng.choice([0, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]):>5}"
                             for _ in range(4)))
    return "\n".join(rows)


def _grid(rng: random.Random, width: int, height: int, alphabet: str) -> str:
    return "\n".join("".join(rng.choice(alphabet) for _ in range(width)) for _ in range(height))


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."


def _act_completion(rng: random.Random) -> str:
    action = rng.choice([
        rng.choice(["up", "down", "left", "right"]),
        f"swap ({rng.randint(0, 7)},{rng.randint(0, 7)}) ({rng.randint(0, 7)},{rng.randint(0, 7)})",
        f"place {rng.choice('IOTSZJL')} rot {rng.randint(0, 3)} col {rng.randint(0, 9)}",
        rng.choice(["noop", "right", "right+A", "right+B", "right+A+B", "A", "left"]),
        f"propose {rng.randint(0, 4)},{rng.randint(0, 4)}",
        f"A {rng.choice(_PROVINCES)} - {rng.choice(_PROVINCES)}",
        f"F {rng.choice(_PROVINCES)} S A {rng.choice(_PROVINCES)} - {rng.choice(_PROVINCES)}",
    ])
    tag = rng.choice(_SECTIONS[5:18])
    return f"INTENTION: {tag} {_sentence(rng)}\nACTION: {action}"


def tiny_corpus(seed: int = 0, lines: int = 3000) -> list[str]:
    """`lines` documents of mixed game text; identical for the same seed."""
    rng = random.Random(seed)
    makers = (
        lambda: _board_2048(rng),
        lambda: _grid(rng, 8, 8, "RGBY"),
        lambda: _grid(rng, 10, 20, ".#"),
        lambda: _grid(rng, 16, 13, ".#?BPGK M"),
        lambda: _sentence(rng),
        lambda: _act_completion(rng),
        lambda: " ".join(rng.choice(_SECTIONS) for _ in range(8)),
        lambda: " ".join(rng.choice(_GLYPHS) for _ in range(20)),
        lambda: " ".join(str(rng.randint(0, 20000)) for _ in range(10)),
    )
    return [rng.choice(makers)() for _ in range(lines)]
