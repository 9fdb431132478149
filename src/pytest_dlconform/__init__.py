"""pytest-dlconform: conformance suites for the documented behaviour of TensorFlow and PyTorch.

Importing this package imports no framework.
"""

from __future__ import annotations

__version__ = "0.1.0"
