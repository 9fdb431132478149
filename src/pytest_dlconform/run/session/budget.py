"""The hypothesis budget of claim tests: the --dl-profile's settings (or the user's own
--hypothesis-profile), laid over each selected claim test where it is collected."""

from __future__ import annotations

from typing import Any

import pytest

from .. import profiles
from .. import settings as opts
from .collection import ITEM_KEY


class Budget:
    def __init__(self, config: pytest.Config, settings: opts.Settings) -> None:
        self.config = config
        self.settings = settings
        self._settings: Any = None

    def current(self) -> Any:
        """The hypothesis settings of claim tests (computed once)."""
        if self._settings is None:
            from hypothesis import settings

            if self.config.getoption("hypothesis_profile", None):
                chosen = settings.default  # hypothesis's plugin loaded the profile the user named
            else:
                profiles.register()
                chosen = settings.get_profile(profiles.PREFIX + self.settings.profile)
            if self.settings.examples_db:
                from hypothesis.database import DirectoryBasedExampleDatabase

                chosen = settings(chosen, database=DirectoryBasedExampleDatabase(self.settings.examples_db))
            self._settings = chosen
        return self._settings

    def apply(self, items: list[pytest.Item]) -> None:
        """Lay the budget over each selected claim test's own hypothesis settings."""
        from ...core import budgets

        budget = self.current()
        budgets.set_active(budget)
        label = f"{self.settings.profile}:{id(budget)}"
        modules = {}
        for item in items:
            if item.stash.get(ITEM_KEY, None) is not None:
                budgets.apply_to(getattr(item, "function", None), budget, label)
                module = getattr(item, "module", None)
                if module is not None:
                    modules[module.__name__] = module
        # A property defined at module level and called by a claim test (a `_helper` with
        # @given) was decorated at import, so as_default cannot reach it: give it the budget too.
        for module in modules.values():
            for obj in list(vars(module).values()):
                if getattr(obj, "is_hypothesis_test", False):
                    budgets.apply_to(obj, budget, label)
