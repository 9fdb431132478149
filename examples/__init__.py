"""Worked examples for `--dl-model`: factories that hand pytest-dlconform a model (docs/own-model.md)."""
