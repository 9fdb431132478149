"""A warning's kind in the evidence: its first line without object addresses, so that two runs
of the same stack compare equal (`dlconform compare` found drift in every retracing warning)."""

from __future__ import annotations

from pytest_dlconform.report.verdicts import warning_kind


def test_addresses_are_dropped_and_the_rest_kept() -> None:
    a = ("5 out of the last 9 calls to <function graph_grad at 0x7fa43cd8a340> triggered tf.function retracing.\n"
         "Tracing is expensive")
    b = a.replace("0x7fa43cd8a340", "0x7fbe71adc220")
    assert warning_kind(a) == warning_kind(b) == (
        "5 out of the last 9 calls to <function graph_grad at 0x...> triggered tf.function retracing.")
    assert warning_kind(a.replace("9 calls", "11 calls")) != warning_kind(a)  # other text, other kind
    assert warning_kind("value 0x10 is small") == "value 0x10 is small"  # not an address
    assert warning_kind("") == "" and len(warning_kind("x" * 500)) == 160
