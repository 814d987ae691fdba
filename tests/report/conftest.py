"""One synthetic run folder (and its report) per test session, shared by the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_run import build_run

from coplay.report import write_report
from coplay.runs import RunDir


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory) -> RunDir:
    return build_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def synthetic_report(synthetic_run) -> Path:
    return write_report(synthetic_run.root)
