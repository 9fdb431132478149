"""Conformance suite: the data area."""
