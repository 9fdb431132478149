"""Conformance suite: the interop area."""
