from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only ../shared folder; tests that need it skip when it is absent."""
    if not (SHARED / "fixtures").is_dir():
        pytest.skip(f"{SHARED}/fixtures is absent: real-data fixtures are not available in this checkout")
    return SHARED


@pytest.fixture(scope="session")
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures"
