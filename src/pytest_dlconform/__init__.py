"""pytest-dlconform: conformance suites for the documented behaviour of TensorFlow and PyTorch.

Importing this package imports no framework.
"""

from __future__ import annotations

from typing import NoReturn

__version__ = "0.1.0"

NOT_APPLICABLE_PREFIX = "not applicable: "


def not_applicable(reason: str) -> NoReturn:
    """Report the running claim test as "not applicable here", with the exact reason.

    Use it only for hardware or packages this machine lacks (no GPU, no TPU, a package
    that cannot be installed beside this framework version), never to hide a failure.
    """
    import pytest

    pytest.skip(NOT_APPLICABLE_PREFIX + reason)
