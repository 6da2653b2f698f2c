"""Shared fixtures: a real sandbox pool when sandbox/ is importable (tests needing it skip otherwise)."""
import pytest

from domains import sandboxing


@pytest.fixture(scope="session")
def pool():
    if not sandboxing.available():
        pytest.skip("sandbox package not importable yet")
    with sandboxing.make_pool(1) as p:  # one slot: the machine has 2 shared cores
        yield p
