"""The conformance suites shipped with pytest-dlconform (one package per claim area)."""
