"""Which tests a run has: parametrization by framework, strategy, device and user model,
selection by claim and framework, and what each selected test carries (its claim,
parameters, and why it cannot run where that is known before it starts). It runs where
tests are collected: in each xdist worker, or in the one process without xdist."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from ...core import claims as registry
from .. import settings as opts
from .plan import DevicePlan

ITEM_KEY = pytest.StashKey["ItemInfo"]()
DESELECTED = "__dlconform_deselected__"
SHORT = {"tensorflow": "tf", "torch": "torch"}
FIXTURE_FRAMEWORK = {"tf": "tensorflow", "torch": "torch"}


@dataclass
class ItemInfo:
    claim: str
    params: dict[str, str]
    problem: str | None = None  # set for a test that cannot run correctly: reported as error
    not_applicable: str | None = None



class Collection:
    """Parametrizes and selects the claim tests of one process."""

    def __init__(self, settings: opts.Settings, plan: DevicePlan, installed: tuple[str, ...]) -> None:
        self.settings = settings
        self.plan = plan
        self.installed = installed

    def _frameworks_for(self, claim_id: str | None) -> list[str]:
        claim = registry.get(claim_id) if claim_id else None
        candidates = claim.frameworks if claim else opts.FRAMEWORK_CHOICES
        installed = self.installed
        # Installed but not asked for: leave out. Not installed: keep, reported "not applicable".
        return [fw for fw in candidates if fw in self.settings.frameworks or fw not in installed]

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        names = metafunc.fixturenames
        marker = metafunc.definition.get_closest_marker("claim")
        claim_id = marker.args[0] if marker and marker.args else None
        frameworks = self._frameworks_for(claim_id)
        if "dl_model" in names:  # the model.* suites: registered models (with their strategies)
            self._parametrize_models(metafunc)
        elif "dl_strategy" in names:
            fixed = [FIXTURE_FRAMEWORK[n] for n in ("tf", "torch") if n in names]
            fws = fixed or frameworks
            pairs = [(fw, s) for fw in fws for s in self.settings.strategies_for(fw)]
            values: list[Any] = [*pairs] or [DESELECTED]
            ids = [f"{SHORT[fw]}-{s}" for fw, s in pairs] or ["deselected"]
            if "dl_framework" in names:
                argvalues: list[Any] = [(p[0], p) for p in pairs] or [(DESELECTED, DESELECTED)]
                metafunc.parametrize(["dl_framework", "dl_strategy"], argvalues, ids=ids, indirect=True, scope="session")
            else:
                metafunc.parametrize("dl_strategy", values, ids=ids, indirect=True, scope="session")
        elif "dl_framework" in names:
            metafunc.parametrize(
                "dl_framework", frameworks or [DESELECTED], ids=[SHORT[f] for f in frameworks] or ["deselected"],
                indirect=True, scope="session",
            )
        if "dl_device" in names:
            metafunc.parametrize("dl_device", list(self.plan.kinds), indirect=True, scope="session")

    def _parametrize_models(self, metafunc: pytest.Metafunc) -> None:
        """dl_model (and dl_strategy, where a test takes both): one test per registered model (x strategy).

        No model registered: the tests are deselected, so a default run stays quiet and fast;
        when --dl-claims was given, each is "not applicable" with usermodels.NO_MODEL instead,
        since the user then asked for the claims by name."""
        from .. import usermodels

        names = metafunc.fixturenames
        settings = self.settings
        models = [(fw, ref) for ref, fw in usermodels.known_frameworks(settings).items()]
        if not models:
            explicit = "claims" in settings.sources
            value: Any = ("", usermodels.NO_MODEL_ID) if explicit else DESELECTED
            ids = [usermodels.NO_MODEL_ID if explicit else "deselected"]
            if "dl_strategy" in names:
                metafunc.parametrize(["dl_model", "dl_strategy"], [(value, DESELECTED if not explicit else ("", ""))],
                                     ids=ids, indirect=True, scope="session")
            else:
                metafunc.parametrize("dl_model", [value], ids=ids, indirect=True, scope="session")
            return
        fws = [(fw, ref) for fw, ref in models if fw in settings.frameworks or fw not in self.installed]
        if "dl_strategy" in names:
            pairs = [((fw, ref), (fw, s)) for fw, ref in fws for s in settings.strategies_for(fw)
                     if s in usermodels.MODEL_STRATEGIES[fw]]
            ids = [f"{ref}-{SHORT[fw]}-{s[1]}" for (fw, ref), s in pairs]
            argvalues: list[Any] = [*pairs] or [(DESELECTED, DESELECTED)]
            metafunc.parametrize(["dl_model", "dl_strategy"], argvalues,
                                 ids=ids or ["deselected"], indirect=True, scope="session")
            return
        values: list[Any] = [*fws] or [DESELECTED]
        metafunc.parametrize("dl_model", values, ids=[ref for _, ref in fws] or ["deselected"],
                             indirect=True, scope="session")

    def select(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        explicit_claims = opts.CLAIMS in self.settings.sources
        for item in items:
            marker = item.get_closest_marker("claim")
            claim_id = str(marker.args[0]) if marker and marker.args else None
            params = self.params(item)
            if DESELECTED in params.values() or self._unselected_framework(item):
                dropped.append(item)
                continue
            if claim_id is None:
                (dropped if explicit_claims else keep).append(item)
                continue
            if not self.settings.claim_selected(claim_id):
                dropped.append(item)
                continue
            item.stash[ITEM_KEY] = self._item_info(item, claim_id, params)
            keep.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        if self.settings.shard is not None:  # --dl-shard=I/N: of what the run selected, part I (issue 30)
            from .. import shards

            shards.keep_shard(config, items, self.settings.shard)

    def params(self, item: pytest.Item) -> dict[str, str]:
        """The test's parameters as the report names them (framework, device, strategy, model, backend)."""
        callspec = getattr(item, "callspec", None)
        raw = dict(callspec.params) if callspec else {}
        params: dict[str, str] = {}
        fw = raw.get("dl_framework") or next((FIXTURE_FRAMEWORK[n] for n in ("tf", "torch") if n in _fixturenames(item)), None)
        strategy = raw.get("dl_strategy")
        if strategy == DESELECTED or fw == DESELECTED:
            return {"framework": DESELECTED}
        if isinstance(strategy, tuple):
            fw, strategy = strategy
        model = raw.get("dl_model")
        if model == DESELECTED:
            return {"framework": DESELECTED}
        if isinstance(model, tuple):  # (framework, 'module:factory'): Collection._parametrize_models
            fw = fw or model[0] or None
        if "tf" in _fixturenames(item) and "torch" in _fixturenames(item):
            fw = "tf+torch"
        if fw:
            params["framework"] = SHORT.get(fw, fw)
        if "dl_device" in raw:
            params["device"] = str(raw["dl_device"])
        if strategy:
            params["strategy"] = str(strategy)
        if isinstance(model, tuple):
            params["model"] = str(model[1])
        if "keras_backend" in raw:  # interop.keras-backends: one verdict per Keras backend
            params["backend"] = str(raw["keras_backend"])
        return params

    def _unselected_framework(self, item: pytest.Item) -> bool:
        installed = self.installed
        for name, fw in FIXTURE_FRAMEWORK.items():
            if name in _fixturenames(item) and fw in installed and fw not in self.settings.frameworks:
                return True
        return False

    def _item_info(self, item: pytest.Item, claim_id: str, params: dict[str, str]) -> ItemInfo:
        info = ItemInfo(claim_id, params)
        if registry.get(claim_id) is None:
            info.problem = (
                f"unknown claim id {claim_id!r}: register it in pytest_dlconform/core/claims/"
                f"{claim_id.split('.')[0]}.toml or fix the @pytest.mark.claim(...) id"
            )
        need = item.get_closest_marker("min_devices")
        if need and params.get("device"):
            have = self.plan.device_count(params["device"], self.settings.replicas)
            if have < int(need.args[0]):
                info.not_applicable = (
                    f"needs {need.args[0]} {params['device']} devices, this run has {have} "
                    f"({self.plan.inventory_text}; --dl-replicas={self.settings.replicas})"
                )
        return info


def _fixturenames(item: pytest.Item) -> list[str]:
    """The fixtures a test function uses (pytest.Function has them; other items none)."""
    return list(getattr(item, "fixturenames", ()))
