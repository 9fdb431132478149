"""Conformance suite: the modules area."""
