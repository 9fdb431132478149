"""Conformance suite: the precision area."""
