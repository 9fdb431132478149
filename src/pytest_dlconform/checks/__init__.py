"""Oracles: independent checks that suites compare frameworks against."""
