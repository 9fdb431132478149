"""Conformance suite: the execution area."""
