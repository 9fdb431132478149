from __future__ import annotations

import pytest

# pytester is enabled for the whole project in pyproject.toml (addopts = -p pytester).


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester dir whose inner runs get no ini file of ours and no framework noise."""
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester
