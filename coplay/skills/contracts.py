"""Contract learning: which literals a skill brings about, and the deterministic protocol written from them.

A skill keeps the literals seen in >= `eff_freq` of its instances (literals that hold in nearly every segment
of the game, like a score that always rises, say nothing about a skill and are left out); an instance passes
when >= `pass_threshold` of the contract's literals hold. The deterministic protocol (summary, plan,
preconditions, success, abort) stands unless the `contract` adapter writes a valid one.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from coplay.skills.expressions import conjunction, disjunction, format_value, parse_expression
from coplay.skills.literals import parse_literal, split_add_del
from coplay.skills.schema import Contract, Instance

PRECONDITION_AGREEMENT = 0.9
MAX_CONDITIONS = 3


def literal_frequencies(effects: Sequence[Iterable[str]]) -> dict[str, float]:
    """Share of instances each literal held in."""
    if not effects:
        return {}
    counts = Counter(lit for e in effects for lit in set(e))
    return {lit: counts[lit] / len(effects) for lit in sorted(counts)}


MIN_SEGMENTS_FOR_BASE_RATES = 4
BASE_RATE_DECAY = 0.8


def trivial_literals(all_effects: Sequence[Iterable[str]], rate: float) -> frozenset[str]:
    """Literals holding in >= `rate` of all segments of a shard: they hold whatever is done."""
    if len(all_effects) < MIN_SEGMENTS_FOR_BASE_RATES:
        return frozenset()
    return frozenset(lit for lit, f in literal_frequencies(all_effects).items() if f >= rate)


def update_base_rates(counts: dict[str, float], seen: float, all_effects: Sequence[Iterable[str]],
                      rate: float) -> tuple[dict[str, float], float, frozenset[str]]:
    """Fold a shard's segments into decayed literal counts (older shards weigh `BASE_RATE_DECAY` less per
    update) and return (counts, segments seen, trivial literals). A small shard cannot make every literal
    look trivial: the history keeps the base rates steady."""
    new = {lit: c * BASE_RATE_DECAY for lit, c in counts.items()}
    for effects in all_effects:
        for lit in set(effects):
            new[lit] = new.get(lit, 0.0) + 1.0
    total = seen * BASE_RATE_DECAY + len(all_effects)
    new = {lit: round(c, 6) for lit, c in sorted(new.items()) if c >= 1e-3}
    if total < MIN_SEGMENTS_FOR_BASE_RATES:
        return new, total, frozenset()
    return new, total, frozenset(lit for lit, c in new.items() if c / total >= rate)


def learn_contract(effects: Sequence[Iterable[str]], eff_freq: float,
                   trivial: Iterable[str] = ()) -> Contract:
    """Literals seen in >= `eff_freq` of the instances (trivial ones left out), with their support."""
    skip = set(trivial)
    freqs = literal_frequencies(effects)
    kept = {lit: round(f, 6) for lit, f in freqs.items() if f >= eff_freq and lit not in skip}
    # f↑ with f↓ (or b=true with b=false) at equal support: the data does not say which
    for lit in list(kept):
        opposite = _opposite(lit)
        if opposite in kept and kept[opposite] >= kept[lit]:
            del kept[lit]
            if kept[opposite] == freqs[lit]:
                del kept[opposite]
    add, dele = split_add_del(kept)
    return Contract(add=add, dele=dele, support=kept, n=len(effects))


def _opposite(literal: str) -> str:
    parsed = parse_literal(literal)
    kind = {"up": "down", "down": "up", "true": "false", "false": "true"}[parsed.kind]
    return str(type(parsed)(parsed.feature, kind))


def instance_passes(contract_literals: Sequence[str], effects: Iterable[str], pass_threshold: float) -> bool:
    """An instance passes when >= `pass_threshold` of the literals hold (an empty contract never passes)."""
    if not contract_literals:
        return False
    held = set(effects)
    return (sum(1 for lit in contract_literals if lit in held)
            >= pass_threshold * len(contract_literals) - 1e-9)


def pass_rate(contract_literals: Sequence[str], effects: Sequence[Iterable[str]],
              pass_threshold: float) -> float:
    """Share of instances passing (0 when there are none)."""
    if not effects:
        return 0.0
    return sum(instance_passes(contract_literals, e, pass_threshold) for e in effects) / len(effects)


def dominant_tag(tags: dict[str, int]) -> str:
    """Most frequent intention tag (ties: alphabetical), or "" for none."""
    return min(tags, key=lambda t: (-tags[t], t)) if tags else ""


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * (len(ordered) - 1) + 0.5)))]


def _describe(literal: str) -> str:
    parsed = parse_literal(literal)
    return {"up": f"raise {parsed.feature}", "down": f"lower {parsed.feature}",
            "true": f"make {parsed.feature} true", "false": f"make {parsed.feature} false"}[parsed.kind]


def skill_name(tag: str, contract: Contract, taken: Iterable[str] = ()) -> str:
    """`merge_max_tile_up`: the tag and the best-supported literal; when another skill has that name, the
    next literals are added (`merge_max_tile_up_holes_down`), then a number."""
    used = set(taken)
    lits = sorted(contract.literals, key=lambda lit: (-contract.support.get(lit, 0.0), lit))
    name = (tag or "skill").lower()
    for lit in lits[:3]:
        parsed = parse_literal(lit)
        name = f"{name}_{parsed.feature}_{parsed.kind}"
        if name not in used:
            return name
    base, k = name, 2
    while name in used:
        name, k = f"{base}_{k}", k + 1
    return name


def deterministic_protocol(tag: str, contract: Contract, instances: Sequence[Instance]) -> dict[str, object]:
    """Summary, plan (2-7 steps) and validator expressions derived from the instances alone."""
    lits = contract.literals
    pre: list[str] = []
    success: list[str] = []
    # Success: boolean targets; a numeric literal when its end values separate from its start values.
    for lit in sorted(lits, key=lambda x: (-contract.support.get(x, 0.0), x)):
        if len(success) >= MAX_CONDITIONS:
            break
        parsed = parse_literal(lit)
        if parsed.kind in ("true", "false"):
            success.append(f"{parsed.feature} == {parsed.kind}")
            continue
        starts = [float(i.start_view[parsed.feature]) for i in instances if parsed.feature in i.start_view]
        ends = [float(i.end_view[parsed.feature]) for i in instances if parsed.feature in i.end_view]
        if len(starts) < 2 or len(ends) < 2:
            continue
        if parsed.kind == "up" and _quantile(ends, 0.25) > _quantile(starts, 0.75):
            success.append(f"{parsed.feature} >= {format_value(_quantile(ends, 0.25))}")
        elif parsed.kind == "down" and _quantile(ends, 0.75) < _quantile(starts, 0.25):
            success.append(f"{parsed.feature} <= {format_value(_quantile(ends, 0.75))}")
    # Preconditions: booleans with the same start value in nearly every instance (contract features first).
    flag_names = sorted({n for i in instances for n, v in i.start_view.items() if isinstance(v, bool)})
    contract_features = {parse_literal(lit).feature for lit in lits}
    flag_names.sort(key=lambda n: (n not in contract_features, n))
    constant: list[tuple[str, bool]] = []
    for name in flag_names:
        values = [i.start_view[name] for i in instances if name in i.start_view]
        trues = sum(1 for v in values if v)
        if len(values) >= 2 and max(trues, len(values) - trues) >= PRECONDITION_AGREEMENT * len(values):
            value = trues * 2 > len(values)
            if all(i.end_view.get(name) == value for i in instances):
                constant.append((name, value))
            if len(pre) < MAX_CONDITIONS:
                pre.append(f"{name} == {format_value(value)}")
    pre_names = {p.split()[0] for p in pre}
    abort = [f"{name} == {format_value(not value)}" for name, value in constant if name not in pre_names][:2]
    duration = round(sum(i.duration for i in instances) / len(instances)) if instances else 1
    effect_text = "; ".join(_describe(lit) for lit in lits[:4]) or "no stable effect yet"
    plan = [f"Start when {conjunction(pre)}" if pre else "Start from the current position"]
    plan += [f"{_describe(lit).capitalize()}" for lit in lits[:4]]
    plan.append(f"Stop when {conjunction(success)}" if success
                else f"Stop after about {max(1, 2 * duration)} steps")
    protocol = {
        "summary": f"{tag or 'SKILL'}: {effect_text} (about {max(1, duration)} steps)",
        "plan": plan[:7],
        "preconditions": conjunction(pre),
        "success": conjunction(success) if success else "false",
        "abort": disjunction(abort),
    }
    for key in ("preconditions", "success", "abort"):
        parse_expression(str(protocol[key]))
    return protocol
