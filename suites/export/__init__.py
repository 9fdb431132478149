"""Conformance suite: the export area."""
