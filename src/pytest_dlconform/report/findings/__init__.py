"""Standalone reproductions of the framework divergences the suites found.

Each ``*.py`` file here is a self-contained script that imports only the framework (and
numpy): a maintainer can run it without dlconform, hypothesis or pytest. It exits 1 while
the divergence is there, 0 once the documented behaviour holds, 2 if the framework cannot
be imported, and prints one line saying which. The known-divergences entry that pins the
divergence names its script (``script = "..."`` in known_divergences.toml);
``dlconform repro NODEID`` prints it. docs/findings.md lists them with their upstream status.

Every script has the same shape, so tests can feed it an implementation: ``observed()``
calls the framework, ``expected()`` is the documented value computed without it,
``judge(got, want)`` returns (holds, one line) and ``main(observe=observed)`` runs them.
Nothing in this package is imported by the plugin.
"""
