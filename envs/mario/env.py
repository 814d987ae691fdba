"""Super Mario Bros. as a text environment: the real NES game (`gymnasium-mariobros`, cynes emulator),
seen through a text grid decoded from RAM (`ram.py`, `text.py`).

Rules (constants below):
- One stage (world 1-1 by default; `world`/`stage` kwargs pick any). Actions by name: `noop, right,
  right+A, right+B, right+A+B, A, left`; each is held for `frames_per_action` frames (default 8: the
  expert reaches the 1-1 flag in about 165 actions of the 200; at 6 frames even a flawless full-speed
  run would need about 210).
- Reset restores the stage start and then runs a seeded number of no-op frames (0..`max_noop_frames`,
  default 30), so seeds differ (the clock, the enemies' positions).
- Reward per action = Δx (Mario's level x change, clipped to ±4 px per frame so area changes pay
  nothing) + `COIN_REWARD` per coin + on reaching the flag `FLAG_TIME_BONUS` × time left − on losing a life
  `DEATH_PENALTY`. Score = the furthest x reached.
- Losing a life ends the episode (terminated), like the package's single-stage env; so does the flag.
  Truncated after `max_actions` (200) actions.
- An unknown or unparseable action (names are case- and space-insensitive) plays `noop` and sets
  `info["invalid_action"]`. Stepping after the end returns the final observation with reward 0.

`info["state"]`: {"emulator": base64 zlib of the cynes snapshot, plus our counters}; `reset(options=
{"state": S})` restores it exactly (the env uses no randomness after reset).

Imports the emulator package; never imports `coplay`.
"""

from __future__ import annotations

import base64
import functools
import zlib
from typing import Any

import gymnasium
import numpy as np

from coplay_envs.core import normalize_action, text_space
from coplay_envs.mario.features import compute_features
from coplay_envs.mario.ram import decode_view
from coplay_envs.mario.text import render

#: action name -> NES controller bitmap (right 0x01, left 0x02, B 0x40, A 0x80), as `SIMPLE_MOVEMENT`.
ACTIONS: dict[str, int] = {
    "noop": 0x00, "right": 0x01, "right+A": 0x81, "right+B": 0x41, "right+A+B": 0xC1, "A": 0x80, "left": 0x02,
}
LEGAL_ACTIONS: list[str] = list(ACTIONS)
FALLBACK_ACTION: str = "noop"
FRAMES_PER_ACTION: int = 8
MAX_ACTIONS: int = 200
MAX_NOOP_FRAMES: int = 30
COIN_REWARD: float = 10.0
FLAG_TIME_BONUS: float = 1.0
DEATH_PENALTY: float = 100.0
MAX_DX_PER_FRAME: int = 4
OBSERVATION_MAX_CHARS: int = 4096
STATE_VERSION: int = 1

RULES: str = (
    "Super Mario Bros. (NES), one stage (world 1-1 unless configured). Run right and reach the flagpole.\n"
    "Actions: noop, right, right+A, right+B, right+A+B, A, left; each holds its buttons for 8 frames "
    "by default\n"
    "(A jumps: holding it across actions jumps higher; to jump again release A first. B runs faster).\n"
    "Stomp enemies from above; touching them from the side, or falling into a pit, loses the life and\n"
    "ends the episode. Bricks (B) and ?-blocks (?) are hit from below; pipes (P), ground (#) and hard\n"
    "blocks (X) are solid.\n"
    "Reward: +1 per pixel moved right (-1 left), +10 per coin, + time left on reaching the flag,\n"
    "-100 for losing the life. Score: the furthest x reached. At most 200 actions."
)

_ALIASES: dict[str, str] = {name.lower().replace(" ", ""): name for name in ACTIONS}
_ALIASES.update({"nop": "noop", "none": "noop", "right+b+a": "right+A+B", "a": "A"})


def parse_action(action: Any) -> str | None:
    """The canonical action name for whatever the caller passed, or None if it names no action."""
    text = normalize_action(action).strip().lower().replace(" ", "")
    return _ALIASES.get(text)


#: cynes 0.1.2 leaves the PPU's `_frame_ready` flag uninitialised at power-on (heap garbage: the stage
#: start then drifts by a frame between emulator instances of one process). It is byte 24 of a snapshot
#: (CPU 20 bytes, PPU x 2, y 2, then the flag); a clean power-on has it false.
POWER_ON_FRAME_READY_BYTE: int = 24


@functools.cache
def _stage_start_snapshot(rom_path: str, world: int, stage: int) -> bytes:
    """The emulator at the start of `world`-`stage`, reached from a clean power-on by the package's own
    start-screen skip: the same bytes in every process and every instance."""
    from cynes import NES
    from gymnasium_mariobros import SuperMarioBrosEnv

    power_on = NES(rom_path).save().copy()
    power_on[POWER_ON_FRAME_READY_BYTE] = 0
    game = SuperMarioBrosEnv(target=(world, stage))
    game._nes.load(power_on)
    game.ram.sync_from_emulator()
    game._backup_data = None
    game.reset()
    game._skip_start_screen()
    snapshot = game._nes.save().tobytes()
    game.close()
    return snapshot


def encode_snapshot(snapshot: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(snapshot.tobytes(), 1)).decode("ascii")


def decode_snapshot(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8).copy()


class MarioEnv(gymnasium.Env):
    """Gymnasium env `coplay/SuperMarioBros-v0`: text observations, action names (see the module doc)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 60 // FRAMES_PER_ACTION}

    def __init__(self, world: int = 1, stage: int = 1, frames_per_action: int = FRAMES_PER_ACTION,
                 max_actions: int = MAX_ACTIONS, max_noop_frames: int = MAX_NOOP_FRAMES,
                 render_mode: str | None = None) -> None:
        from gymnasium_mariobros import SuperMarioBrosEnv

        if frames_per_action < 1 or max_actions < 1 or max_noop_frames < 0:
            raise ValueError(f"MarioEnv: frames_per_action={frames_per_action} and max_actions={max_actions}"
                             f" must be >= 1, max_noop_frames={max_noop_frames} >= 0")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"MarioEnv: render_mode {render_mode!r}; expected None or 'ansi'")
        self.world, self.stage = world, stage
        self.frames_per_action = frames_per_action
        self.max_actions = max_actions
        self.max_noop_frames = max_noop_frames
        self.render_mode = render_mode
        self.observation_space = text_space(OBSERVATION_MAX_CHARS)
        self.action_space = text_space(32)
        self._game = SuperMarioBrosEnv(target=(world, stage))
        start = _stage_start_snapshot(self._game._rom_path, world, stage)
        # what the package's reset loads
        self._game._backup_data = np.frombuffer(start, dtype=np.uint8).copy()
        self._steps = 0
        self._furthest_x = 0
        self._last_x = 0
        self._last_coins = 0
        self._last_action = "none"
        self._terminated = False
        self._truncated = False
        self._flag = False
        self._life_lost = False
        self._observation = ""
        self._view: dict = {}

    # -- gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        if options and options.get("state") is not None:
            self._restore(options["state"])
        else:
            self._game.reset()
            for _ in range(int(self.np_random.integers(0, self.max_noop_frames + 1))):
                self._game.step(0)
            ram = self._read_ram()
            self._steps = 0
            self._last_x = ram[0x006D] * 256 + ram[0x0086]
            self._furthest_x = self._last_x
            self._last_coins = ram[0x07ED] * 10 + ram[0x07EE]
            self._last_action = "none"
            self._terminated = self._truncated = self._flag = self._life_lost = False
        self._refresh()
        return self._observation, self._info(invalid=False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        name = parse_action(action)
        invalid = name is None
        if name is None:
            name = FALLBACK_ACTION
        if self._terminated or self._truncated:
            return self._observation, 0.0, self._terminated, self._truncated, self._info(invalid)
        buttons = ACTIONS[name]
        done = False
        package_info: dict = {}
        for _ in range(self.frames_per_action):
            _, _, done, _, package_info = self._game.step(buttons)
            if done:
                break
        self._steps += 1
        self._last_action = name
        ram = self._read_ram()
        x = ram[0x006D] * 256 + ram[0x0086]
        limit = MAX_DX_PER_FRAME * self.frames_per_action
        reward = float(max(-limit, min(limit, x - self._last_x)))
        coins = ram[0x07ED] * 10 + ram[0x07EE]
        reward += COIN_REWARD * ((coins - self._last_coins) % 100)
        self._last_x, self._last_coins = x, coins
        if done:
            self._terminated = True
            self._flag = bool(package_info.get("flag_get", False))
            self._life_lost = not self._flag
            if self._flag:
                reward += FLAG_TIME_BONUS * package_info["time"]
            else:
                reward -= DEATH_PENALTY
        self._furthest_x = max(self._furthest_x, x)
        self._truncated = not self._terminated and self._steps >= self.max_actions
        self._refresh(ram)
        return self._observation, reward, self._terminated, self._truncated, self._info(invalid)

    def render(self) -> str | None:
        return self._observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        if getattr(self, "_game", None) is not None and self._game._nes is not None:
            self._game.close()

    # -- internals -------------------------------------------------------------------------------------
    def _read_ram(self) -> bytes:
        return bytes(self._game.ram[0:0x800])

    def _refresh(self, ram: bytes | None = None) -> None:
        view = decode_view(self._read_ram() if ram is None else ram)
        view.update(steps=self._steps, max_actions=self.max_actions, furthest_x=self._furthest_x,
                    last_action=self._last_action, flag_get=self._flag, life_lost=self._life_lost)
        self._view = view
        self._observation = render(view, LEGAL_ACTIONS, self.frames_per_action)

    def _info(self, invalid: bool) -> dict[str, Any]:
        return {
            "legal_actions": list(LEGAL_ACTIONS),
            "state": self._state(),
            "view": self._view,
            "features": compute_features(self._view),
            "score": self._furthest_x,
            "invalid_action": invalid,
            "flag_get": self._flag,
            "life_lost": self._life_lost,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "world": self.world,
            "stage": self.stage,
            "emulator": encode_snapshot(self._game._nes.save()),
            "steps": self._steps,
            "furthest_x": self._furthest_x,
            "last_x": self._last_x,
            "last_coins": self._last_coins,
            "last_action": self._last_action,
            "terminated": self._terminated,
            "truncated": self._truncated,
            "flag_get": self._flag,
            "life_lost": self._life_lost,
        }

    def _restore(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or "emulator" not in state:
            raise ValueError(f"MarioEnv.reset: options['state'] must be an info['state'] dict of version "
                             f"{STATE_VERSION}; got {type(state).__name__} "
                             f"version={state.get('version') if isinstance(state, dict) else None}")
        self._game._nes.load(decode_snapshot(state["emulator"]))
        self._game.ram.sync_from_emulator()
        self._game.done = bool(state["terminated"])
        self._steps = int(state["steps"])
        self._furthest_x = int(state["furthest_x"])
        self._last_x = int(state["last_x"])
        self._last_coins = int(state["last_coins"])
        self._last_action = str(state["last_action"])
        self._terminated = bool(state["terminated"])
        self._truncated = bool(state["truncated"])
        self._flag = bool(state["flag_get"])
        self._life_lost = bool(state["life_lost"])
