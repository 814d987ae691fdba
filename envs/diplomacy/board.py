"""Static facts of the standard Diplomacy map (public rules knowledge, never game state): supply centres,
adjacency and move distances, for features and bots.

Reads the map through `diplomacy.engine.map.Map` (cached by the package); never imports `coplay`.
"""

from __future__ import annotations

import functools
from collections import deque

from diplomacy.engine.map import Map


@functools.lru_cache(maxsize=1)
def standard_map() -> Map:
    return Map("standard")


@functools.lru_cache(maxsize=1)
def supply_centers() -> tuple[str, ...]:
    """The 34 supply centres, sorted."""
    return tuple(sorted(standard_map().scs))


def unit_type_and_loc(unit: str) -> tuple[str, str]:
    """``"F STP/SC"`` -> ``("F", "STP/SC")``."""
    unit_type, _, loc = unit.partition(" ")
    return unit_type, loc


@functools.lru_cache(maxsize=512)
def neighbours(unit_type: str, loc: str) -> frozenset[str]:
    """Provinces a unit of `unit_type` at `loc` (coast included) can move into in one move (no convoy)."""
    game_map = standard_map()
    return frozenset(neighbour.upper()[:3] for neighbour in game_map.abut_list(loc, incl_no_coast=True)
                     if any(game_map.abuts(unit_type, loc, "-", dest)
                            for dest in game_map.find_coasts(neighbour.upper()[:3])))


@functools.lru_cache(maxsize=512)
def distances_from(unit_type: str, loc: str) -> dict[str, int]:
    """Fewest moves (no convoys) from `loc` to every province a unit of `unit_type` can reach."""
    game_map = standard_map()
    seen: dict[str, int] = {loc: 0, loc[:3]: 0}
    queue = deque([loc])
    while queue:
        here = queue.popleft()
        for neighbour in game_map.abut_list(here, incl_no_coast=True):
            for dest in game_map.find_coasts(neighbour.upper()):
                if dest not in seen and game_map.abuts(unit_type, here, "-", dest):
                    seen[dest] = seen[here] + 1
                    seen.setdefault(dest[:3], seen[dest])
                    queue.append(dest)
    return {place: dist for place, dist in seen.items() if "/" not in place}
