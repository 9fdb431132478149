"""distributed.tpu.requires-tpu: TPUStrategy needs a TPU and says so at once without one."""

from __future__ import annotations

import time

import pytest

from pytest_dlconform.api import distribution as dist
from pytest_dlconform.api import evidence


@pytest.mark.claim("distributed.tpu.requires-tpu")
@pytest.mark.dl_strategies("tpu")
def test_tpu_strategy_without_a_tpu_fails_with_a_clear_error(tf, dl_strategy):
    start = time.monotonic()
    try:
        resolver = dist.tpu_resolver()
    except ValueError as exc:
        evidence.note(error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - start)
        assert "TPU" in str(exc), f"TPUClusterResolver() without a TPU raised {exc!r}, which does not say a TPU is missing"
        evidence.covers("TPUClusterResolver-without-TPU")
        with pytest.raises(ValueError, match="Please provide a TPU Name to connect to"):
            tf.distribute.TPUStrategy()  # no resolver: it builds the same default one
        evidence.covers("TPUStrategy-without-TPU")
        return
    # A TPU is there: the strategy must come up from the resolver.
    strategy = dl_strategy.tf_strategy()
    evidence.note(tpu=str(resolver.master()), replicas=strategy.num_replicas_in_sync)
    assert strategy.num_replicas_in_sync >= 1
