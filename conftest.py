"""Repository-level pytest configuration.

The plugin itself is loaded through its ``pytest11`` entry point (installed package), so a
checkout needs nothing here to run ``pytest suites``. This file only keeps collection to
the project's test trees.
"""

collect_ignore = ["benchmarks", "build", "docs"]
