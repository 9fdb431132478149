"""The one fresh-interpreter protocol (pytest_dlconform.frameworks.fresh): result, child failure, deadline.

checks.roundtrip (FreshBatch) and checks.crossframework (keras_backend_call) run their
children through fresh.call, so these are the guarantees both rely on: the child's result
comes back, its traceback's last lines name a failure, and at the deadline the whole process
group (grandchildren too) is killed.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from pytest_dlconform.frameworks import HarnessError, fresh


def test_run_python_returns_what_the_child_emits():
    assert fresh.run_python("emit({'answer': 6 * 7, 'argv': __import__('sys').argv[0]})", timeout=60) == {
        "answer": 42, "argv": "-c"}


def test_a_failing_child_reports_its_traceback():
    with pytest.raises(HarnessError, match=r"checking child exited with code 1: .*ZeroDivisionError: division by zero"):
        fresh.run_python("print('before the crash')\n1 / 0", timeout=60, what="checking child")


def test_a_child_without_a_result_is_an_error_not_none():
    with pytest.raises(HarnessError, match=r"exited without reporting a result: printed, but emitted nothing"):
        fresh.run_python("print('printed, but emitted nothing')", timeout=60)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            return "\nState:\tZ" in f.read()  # killed, not yet reaped by init
    except FileNotFoundError:
        return True


def test_the_deadline_kills_the_whole_process_group():
    # The child starts a grandchild that would sleep for an hour, says its pid, then hangs.
    # The grandchild holds no pipe of ours, so a wrong kill shows as a survivor, not a hang.
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL)\n"
            "print('grandchild', p.pid, flush=True)\ntime.sleep(3600)")
    started = time.monotonic()
    with pytest.raises(HarnessError, match=r"hanging child did not finish within 3 s and was killed; "
                                           r"last output: grandchild \d+") as err:
        fresh.run_python(code, timeout=3, what="hanging child")
    assert time.monotonic() - started < 60
    pid = int(re.search(r"grandchild (\d+)", str(err.value)).group(1))
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    survived = not _gone(pid)
    if survived:  # leave nothing behind, even when the protocol is broken
        os.kill(pid, signal.SIGKILL)
    assert not survived, f"grandchild {pid} outlived the deadline"


def test_call_runs_a_module_function_with_json_arguments():
    assert fresh.call("os.path:join", "a", "b", timeout=60) == os.path.join("a", "b")
    assert fresh.call("json:loads", '{"x": [1, 2]}', timeout=60) == {"x": [1, 2]}


def test_call_reports_the_child_function_failing():
    with pytest.raises(HarnessError, match=r"loader exited with code 1: .*JSONDecodeError"):
        fresh.call("json:loads", "not json", timeout=60, what="loader")


def test_call_refuses_a_bad_target_or_argument_before_starting_a_child():
    with pytest.raises(ValueError, match=r"target 'os.path.join' is not 'package.module:function'"):
        fresh.call("os.path.join", "a", timeout=60)
    with pytest.raises(ValueError, match=r"is not 'package.module:function'"):
        fresh.call("os:system; import x", timeout=60)
    with pytest.raises(TypeError, match=r"not JSON serializable"):
        fresh.call("os.path:join", object(), timeout=60)


def test_the_child_gets_the_callers_environment_and_its_own():
    code = f"import os\nemit([os.environ.get('DLCONFORM_PROBE'), os.environ.get({fresh.GROWTH_VAR!r})])"
    env = fresh.run_python(code, timeout=60, env={"DLCONFORM_PROBE": "set"})
    assert env == ["set", os.environ.get(fresh.GROWTH_VAR, "true")]
