"""Results computed once per run and shared by xdist workers (harness/shared.py): a part is
computed by the worker that claims it, a waiting worker first computes unclaimed parts of the
family, reads the other's result, takes over a part whose claimant died, and sees its error."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_dlconform.frameworks import HarnessError
from pytest_dlconform.harness.shared import SharedResults, run_directory


def _other_worker(root: Path) -> SharedResults:
    return SharedResults(root)


def test_without_a_directory_each_part_is_computed_once_in_process() -> None:
    shared, calls = SharedResults(None), []
    shared.register("fam", ["0", "1"], lambda part: calls.append(part) or f"value {part}")
    assert shared.get("fam", "0") == "value 0"
    assert shared.get("fam", "0") == "value 0"
    assert calls == ["0"]


def test_a_part_claimed_by_another_worker_is_read_and_the_free_ones_are_computed_meanwhile(tmp_path: Path) -> None:
    other, me = _other_worker(tmp_path), SharedResults(tmp_path)
    assert other._claim("fam", "0")  # the other worker is computing part 0

    def finish() -> None:
        time.sleep(0.5)
        other._compute("fam", "0", lambda part: "theirs")

    thread = threading.Thread(target=finish)
    thread.start()
    mine: list[str] = []
    me.register("fam", ["0", "1", "2"], lambda part: mine.append(part) or f"mine {part}")
    me.register("other", ["a"], lambda part: mine.append(part) or f"mine {part}")
    got = me.get("fam", "0")
    thread.join()
    assert got == "theirs"
    assert mine == ["1", "2", "a"]  # computed while waiting: what nobody had claimed, this family first
    other.register("fam", ["0", "1", "2"], lambda part: "never")
    assert other.get("fam", "1") == "mine 1"  # and shared back


def test_a_part_whose_claimant_died_is_computed_by_the_waiter(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    me = SharedResults(tmp_path)
    me._path("fam", "0", ".claim").write_text(dead.stdout.strip())
    me.register("fam", ["0"], lambda part: "recomputed")
    assert me.get("fam", "0") == "recomputed"


def test_the_claimant_s_error_reaches_the_waiter(tmp_path: Path) -> None:
    other, me = _other_worker(tmp_path), SharedResults(tmp_path)
    assert other._claim("fam", "0")
    with pytest.raises(ZeroDivisionError):
        other._compute("fam", "0", lambda part: 1 / 0)
    me.register("fam", ["0"], lambda part: "never")
    with pytest.raises(HarnessError, match=r"fam / 0 failed in another worker: ZeroDivisionError"):
        me.get("fam", "0")


def test_the_run_directory_exists_only_under_xdist(tmp_path: Path) -> None:
    class Config:
        pass

    assert run_directory(Config(), tmp_path / "popen-gw0", "x") is None
    worker = Config()
    worker.workerinput = {}  # type: ignore[attr-defined]
    root = run_directory(worker, tmp_path / "popen-gw0", "x")
    assert root == tmp_path / "x" and root.is_dir()


class _Config:
    def __init__(self, basetemp: str | None, worker: bool) -> None:
        self.option = type("Option", (), {"basetemp": basetemp})()
        if worker:
            self.workerinput = {"workerid": "gw0"}


def test_compiler_caches_are_one_per_run_for_its_workers(tmp_path, monkeypatch):
    from pytest_dlconform.harness.shared import compiler_caches

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    run = tmp_path / "pytest-7"
    first = compiler_caches(_Config(str(run / "popen-gw0"), worker=True))
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(run / "dlconform-compiler-cache" / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == str(run / "dlconform-compiler-cache" / "triton")
    second = compiler_caches(_Config(str(run / "popen-gw1"), worker=True))
    assert first == second == run / "dlconform-compiler-cache" and first.is_dir()
    other = compiler_caches(_Config(str(tmp_path / "pytest-8" / "popen-gw0"), worker=True))
    assert other != first  # another run starts with its own, empty cache


def test_compiler_cache_outside_xdist_is_the_process_own(monkeypatch):
    from pytest_dlconform.harness.shared import compiler_caches

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    one = compiler_caches(_Config(None, worker=False))
    two = compiler_caches(_Config("/somewhere/popen-gw0", worker=False))
    assert one != two and one.name.startswith("dlconform-compile-") and two.name.startswith("dlconform-compile-")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(two / "inductor")
