from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester dir whose inner runs get no ini file of ours and no framework noise."""
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester
