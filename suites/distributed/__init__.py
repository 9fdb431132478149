"""Conformance suite: the distributed area."""
