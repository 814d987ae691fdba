"""Loading the config tree: YAML files (a file may extend another), then dotted overrides, then validation.

A YAML file and a dotted override merge the same way: a mapping given for a mapping merges key by key
(`sampling.max_tokens={act: 10}` keeps the other adapters' budgets), anything else replaces. A file may
start from another with `extends: other.yaml` (a path relative to the file; the chain is followed, cycles
are errors), so a config that differs from the demo in a few keys holds only those keys. Every problem is a
`ConfigError` naming the source, the key, the value and what is allowed. Imports only pydantic and yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from coplay.config.tree import CoplayConfig

EXTENDS_KEY = "extends"

#: Keys that moved to another place in the tree, as patterns ("*": any one key) -> where they live now
#: ("{1}": the key that matched the first "*"). A config naming the old key is refused with the new place
#: named: no key is read in two places, so a run's `config.yaml` says exactly what it ran with.
MOVED_KEYS: dict[tuple[str, ...], str] = {
    ("game", "*", "reward_scale"): "rewards.game_scale.{1}",
    ("cluster", "store_window"): "cluster.store_window_mb (MiB, not versions)",
}


def moved_to(path: tuple[str, ...] | list[str]) -> str | None:
    """Where a moved key lives now (`MOVED_KEYS`), or None when `path` did not move."""
    for pattern, new in MOVED_KEYS.items():
        if len(pattern) == len(path) and all(p in ("*", str(k)) for p, k in zip(pattern, path, strict=True)):
            return new.format(*[str(k) for k in path])
    return None


class ConfigError(ValueError):
    """A config that cannot be used: the message names the source, the key, the value and what is allowed."""


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The config section class at a validation error's location (None where the path leaves the tree)."""
    model: Any = CoplayConfig
    for part in loc:
        field = (model.model_fields.get(str(part))
                 if isinstance(model, type) and issubclass(model, BaseModel) else None)
        if field is None:
            return None
        annotation = field.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        if model is None:
            return None
    return model


def _format_errors(err: ValidationError, source: str) -> str:
    lines = [f"invalid config ({source}):"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "<root>"
        if e["type"] == "extra_forbidden":
            parent = _model_at(tuple(e["loc"][:-1]))
            allowed = f"allowed here: {', '.join(parent.model_fields)}" if parent is not None else \
                "check the spelling against `coplay config show`"
            new = moved_to(tuple(str(p) for p in e["loc"]))
            if new is not None:
                allowed = f"it moved to {new}"
            lines.append(f"  {key}: unknown key {str(e['loc'][-1])!r} (value {e['input']!r}); {allowed}")
        else:
            lines.append(f"  {key}: {e['msg']} (got {e['input']!r})")
    return "\n".join(lines)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`learner.lr=2e-5` -> (['learner', 'lr'], 2e-05). Values are parsed as YAML scalars/lists/mappings."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: expected KEY=VALUE with a dotted key, e.g. learner.lr=2e-5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value {raw!r} is not valid YAML: {exc}") from None
    return key.strip().split("."), value


def apply_override(data: dict[str, Any], path: list[str], value: Any, known: dict[str, Any]) -> None:
    """Set `path` in the raw dict `data` as a YAML file would (mappings merge); `known` is the default tree,
    used to reject unknown keys early with the allowed ones named."""
    node, ref = data, known
    for i, part in enumerate(path):
        if isinstance(ref, dict) and part not in ref and not _is_open_mapping(path[:i]):
            new = moved_to(path[: i + 1])
            where = f"it moved to {new}" if new else f"allowed here: {', '.join(sorted(ref))}"
            raise ConfigError(f"override {'.'.join(path)}: unknown key {part!r}; {where}")
        ref = ref.get(part, {}) if isinstance(ref, dict) else {}
        if i == len(path) - 1:
            current = node.get(part)
            node[part] = (_deep_merge(current, value)
                          if isinstance(current, dict) and isinstance(value, dict) else value)
        else:
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ConfigError(f"override {'.'.join(path)}: {'.'.join(path[: i + 1])} is not a mapping")


def _is_open_mapping(prefix: list[str]) -> bool:
    """Mappings whose keys are data, not schema (validated by their own validators)."""
    return prefix in (["game"], ["skill_bank", "segmentation", "duration_prior"],
                      ["cluster", "learner_rank_resources"], ["cluster", "rollout_worker_resources"]) or (
        len(prefix) == 3 and prefix[0] == "game" and prefix[2] == "env_kwargs")


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, recursively for mappings (so a file may set one nested key)."""
    out = dict(base)
    for key, value in top.items():
        key = str(key)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """One config file as a raw mapping, with its `extends:` chain merged underneath it."""
    path = Path(path)
    if path.resolve() in seen:
        raise ConfigError(f"config file {path}: `{EXTENDS_KEY}` cycle through {[str(p) for p in seen]}")
    try:
        loaded = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: top level must be a mapping, got {type(loaded).__name__}")
    data = dict(loaded or {})
    base = data.pop(EXTENDS_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"config file {path}: `{EXTENDS_KEY}` must be a file name, got {base!r}")
    return _deep_merge(read_yaml(path.parent / base, (*seen, path.resolve())), data)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> CoplayConfig:
    """Load YAML (optional), apply dotted overrides, validate. Raises `ConfigError` with every problem."""
    known = CoplayConfig().model_dump(mode="json")
    data = _deep_merge(known, read_yaml(path)) if path is not None else dict(known)
    for text in overrides or []:
        key_path, value = parse_override(text)
        apply_override(data, key_path, value, known)
    source = str(path) if path is not None else "defaults"
    if overrides:
        source = f"{source} + overrides {overrides}"
    try:
        return CoplayConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err, source)) from None
