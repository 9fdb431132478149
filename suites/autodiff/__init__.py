"""Conformance suite: the autodiff area."""
