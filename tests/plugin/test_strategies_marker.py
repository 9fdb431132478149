"""@pytest.mark.dl_strategies(...): a test exists only for the distribution strategies it covers.

The plugin parametrizes ``dl_strategy`` over the run's strategies of the test's framework;
the marker (pytest_dlconform.run.strategies) deselects the others at collection, the way the
distributed suites rely on. The unmarked twin keeps every strategy, so the check can fail.
"""

from __future__ import annotations

import pytest

SUITE = '''
import pytest

@pytest.mark.claim("distributed.mirrored.reduce")
@pytest.mark.dl_strategies("mirrored")
def test_marked(dl_strategy):
    pass

@pytest.mark.claim("distributed.mirrored.reduce")
def test_unmarked(dl_strategy):
    pass
'''


def test_the_marker_deselects_the_strategies_a_test_does_not_cover(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_strategies=SUITE)
    result = suite.runpytest_subprocess("--collect-only", "-q", "--dl-framework=tensorflow",
                                        "--dl-strategy=mirrored,default", "--dl-device=cpu")
    ids = [line for line in result.outlines if "::" in line]
    marked = sorted(i.split("::")[1] for i in ids if "test_marked" in i)
    unmarked = sorted(i.split("::")[1] for i in ids if "test_unmarked" in i)
    assert marked and all("mirrored" in i for i in marked), result.outlines
    assert any("default" in i for i in unmarked) and any("mirrored" in i for i in unmarked), result.outlines
    assert any("1 deselected" in line for line in result.outlines), result.outlines
