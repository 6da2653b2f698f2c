"""Shared fixtures: a real sandbox pool when sandbox/ is importable (tests needing it skip otherwise)."""
import pytest

from domains import sandboxing


@pytest.fixture(scope="session")
def pool():
    if not sandboxing.available():
        pytest.skip("sandbox package not importable yet")
    with sandboxing.make_pool(2) as p:
        yield p
