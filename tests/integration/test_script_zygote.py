"""The zygote that runs the findings scripts (script_zygote.py) gives what ``python SCRIPT``
gives: the exit code (0, 1, a string's 1, an uncaught exception's 1), stdout and stderr, argv
and ``__name__``, a fresh child per script (nothing one script sets reaches the next), and a
killed child past the deadline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import script_zygote  # this folder's helper

SCRIPTS = {
    "ok.py": "import sys\nprint('out', sys.argv[0].endswith('ok.py'), __name__)\nprint('err', file=sys.stderr)\n",
    "bug.py": "import sys, os\nos.environ['LEAK'] = '1'\nprint('BUG PRESENT: x')\nsys.exit(1)\n",
    "text.py": "import os, sys\nsys.exit(f\"no: LEAK={os.environ.get('LEAK')}\")\n",
    "raises.py": "raise ValueError('planted')\n",
    "sleeps.py": "import time\ntime.sleep(60)\n",
}


def test_the_zygote_gives_what_python_script_gives(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH")}
    zygote = script_zygote.Zygote(("json",), env)
    try:
        for name, text in SCRIPTS.items():
            (tmp_path / name).write_text(text)
        for name in ("ok.py", "bug.py", "text.py", "raises.py"):
            path = str(tmp_path / name)
            want = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=60)
            got = zygote.run(path, 60)
            assert (got.returncode, got.stdout) == (want.returncode, want.stdout), name
            assert got.stderr.splitlines()[-1:] == want.stderr.splitlines()[-1:], name
        assert zygote.run(str(tmp_path / "ok.py"), 60).stdout == "out True __main__\n"
        assert zygote.run(str(tmp_path / "text.py"), 60).stderr == "no: LEAK=None\n"  # bug.py's child set it
        with pytest.raises(subprocess.TimeoutExpired):
            zygote.run(str(tmp_path / "sleeps.py"), 1)
        assert zygote.run(str(tmp_path / "bug.py"), 60).returncode == 1  # the zygote serves on
    finally:
        zygote.close()


def test_keras_is_preloaded_only_on_its_default_backend() -> None:
    assert script_zygote.preload_of("import tensorflow as tf\nimport torch\n") == ("tensorflow", "torch")
    assert script_zygote.preload_of("import keras\n") == ("tensorflow", "keras")
    assert script_zygote.preload_of('import os\nos.environ["KERAS_BACKEND"] = "jax"\nimport keras\n') == ()
    assert script_zygote.preload_of("def main():\n    from torch.nn import functional\n") == ("torch",)
