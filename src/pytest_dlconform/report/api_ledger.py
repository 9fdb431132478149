"""The measured API ledger (``--dl-api-ledger PATH``): which public callables of the installed
frameworks the claim tests really called.

Two halves, over the table of namespaces in :mod:`pytest_dlconform.report.api_coverage`:

- the *catalog*: for each namespace in :data:`~pytest_dlconform.report.api_coverage.NAMESPACES` (``tf.nn``, ``torch.optim``,
  ``keras.layers``, ...) the public callables, read from the installed package itself
  (``__all__`` where the module defines it, else its public attributes; functions, builtins
  and classes; for a methods namespace such as ``tf.data.Dataset`` the class's public
  methods), sorted, with the framework's version from its distribution metadata;
- the *recorder*: ``sys.setprofile`` around each claim test's setup and call. Framework
  attributes are never wrapped or replaced (that would change what ``tf.function`` and
  ``torch.compile`` trace); the profile function only looks calls up: the code object of a
  pure-Python public function or public class method (``__init__``, ``forward``, ``call``
  and the other public methods), and the identity of a builtin (``c_call`` events). A call
  counts when the conformance code made it, directly or through a framework's own
  dispatch layer (decorator wrappers, ``Module.__call__``, autograph's ``converted_call``):
  what a framework calls internally on its own behalf does not.

What it cannot see, said in the report: calls made in other processes (the rank programs
of distributed claims, fresh-interpreter round trips), in threads other than the test's, and
construction of classes implemented in C. :mod:`pytest_dlconform.report.api_coverage` turns the
catalog and the per-test records into the ledger document, its HTML table and the diff.

Nothing here is imported when the plugin loads, and frameworks are imported only by
:func:`enumerate_namespaces` (at a claim test, for frameworks the run already imported, and
at the end of the session for the rest of the selected ones).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..core.versions import first_installed
from .api_coverage import CLASS, FUNCTION, METHOD, NAMESPACES, Namespace, namespace_of  # noqa: F401 - the table

#: workeroutput key: an xdist worker's catalog and per-test records, as one JSON string.
WORKER_KEY = "dlconform_api_ledger"
PLUGIN_NAME = "dlconform-api-ledger"



#: Which run framework (--dl-framework) brings each catalog framework in.
RUN_FRAMEWORK = {"tensorflow": "tensorflow", "keras": "tensorflow", "torch": "torch"}
DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel"),
                 "keras": ("keras",), "torch": ("torch",)}
ROOT_MODULE = {"tensorflow": "tensorflow", "keras": "keras", "torch": "torch"}

# Dispatch layers a call from the conformance code passes through before it reaches the
# public callable's own code: frames of these are skipped when asking who made a call.
DISPATCHERS = (
    "torch.nn.modules.module:Module._call_impl",
    "torch.nn.modules.module:Module._wrapped_call_impl",
    "keras.src.layers.layer:Layer.__call__",
    "keras.src.ops.operation:Operation.__call__",
    "tensorflow.python.autograph.impl.api:converted_call",
    "tensorflow.python.autograph.impl.api:_call_unconverted",
)
#: Packages whose frames are the frameworks' own (their calls are not the test's).
FRAMEWORK_PACKAGES = ("torch", "tensorflow", "keras", "tf_keras", "jax", "jaxlib", "functorch", "onnx", "onnxscript",
                      "onnxruntime", "tensorboard", "tensorflow_estimator")
# Our harness around a test (seeding, state snapshots, the ledger itself): not the test either.
# Under the package's folder; of frameworks/ the adapters only (fresh.py and inputs.py beside them are not).
HARNESS_PARTS = ("run/session", "frameworks/__init__.py", "frameworks/base.py", "frameworks/keras.py",
                 "frameworks/tensorflow.py", "frameworks/torch.py", "plugin.py", "run/activation.py", "report/verdicts.py",
                 "run/strategies.py", "report/api_ledger.py", "core/evidence.py")


def distribution_version(framework: str) -> str | None:
    return first_installed(DISTRIBUTIONS[framework])


def _resolve(path: str) -> Any:
    module, _, attrs = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attrs.split(".")):
        obj = getattr(obj, part)
    return obj


def _kind(obj: Any) -> str | None:
    if isinstance(obj, types.ModuleType):
        return None
    if inspect.isclass(obj):
        return CLASS
    if inspect.isfunction(obj) or isinstance(obj, types.BuiltinFunctionType):
        return FUNCTION
    return None  # constants, type aliases, callable instances (no code of their own to see)


def _public_names(ns: Namespace, obj: Any) -> list[str]:
    listed = getattr(obj, "__all__", None)
    if ns.names_from:
        listed = [n for n in getattr(importlib.import_module(ns.names_from), "__all__", ()) if hasattr(obj, n)]
    names = listed if listed is not None else dir(obj)
    return sorted({str(n) for n in names if not str(n).startswith("_") and str(n) not in ns.helpers})


def _members(ns: Namespace, obj: Any) -> Iterator[tuple[str, str, Any]]:
    """(name, kind, object) of the namespace's public callables, sorted by name."""
    if ns.methods:
        for name in sorted(n for n in dir(obj) if not n.startswith("_")):
            raw = inspect.getattr_static(obj, name)
            func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            if inspect.isfunction(func):
                yield name, METHOD, func
        return
    import warnings

    for name in _public_names(ns, obj):
        with warnings.catch_warnings():  # deprecated aliases warn on access (torch.distributed.reduce_op)
            warnings.simplefilter("ignore")
            value = getattr(obj, name, None)
            kind = _kind(value)
        if kind is None or kind not in ns.kinds:
            continue
        if ns.own_module and inspect.isfunction(value) and value.__module__ != obj.__name__:
            continue  # imported for the module's own use (torch.nn.functional's boolean_dispatch)
        yield name, kind, value


@dataclass
class Catalog:
    """The enumerated namespaces and the lookup tables the profile function uses."""

    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> framework, area, version, entries
    frameworks: set[str] = field(default_factory=set)  # catalog frameworks enumerated
    codes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(code) -> names credited
    self_typed: set[int] = field(default_factory=set)  # codes of methods: credit type(self) where it is public
    builtins: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(builtin) -> names
    classes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(class) -> its class entries' names
    transparent: set[int] = field(default_factory=set)  # ids of dispatch-layer codes
    # A generic decorator's wrapper code, shared by many public functions: which one runs is
    # told by its closure (id of a closure value -> names), read from the frame's free variables.
    wrappers: dict[int, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # what the ids above belong to, kept alive so ids stay unique

    def as_json(self) -> dict[str, Any]:
        return {name: self.namespaces[name] for name in sorted(self.namespaces)}


def _add(table: dict[int, tuple[str, ...]], key: int, name: str) -> None:
    names = table.get(key, ())
    if name not in names:
        table[key] = (*names, name)


def _inner_functions(func: Any) -> tuple[list[Any], list[Any]]:
    """What a decorated public function delegates to: (the layers of its ``__wrapped__``
    chain, innermost last; the functions in its closure, alternatives it dispatches to,
    where it has no ``__wrapped__``: torch's ``boolean_dispatch``)."""
    chain, seen = [], {id(func)}
    current = func
    while inspect.isfunction(getattr(current, "__wrapped__", None)) and id(current.__wrapped__) not in seen:
        current = current.__wrapped__
        seen.add(id(current))
        chain.append(current)
    if chain:
        return chain, []
    found = []
    for cell in getattr(func, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if inspect.isfunction(value):
            found.append(value)
    return [], found


def _index_functions(catalog: Catalog, functions: list[tuple[str, Any]]) -> None:
    """Map code objects to names: a function's own code where no other public function
    shares it, else (a generic decorator's wrapper) the code it delegates to."""
    owners: dict[int, set[int]] = {}
    for _, func in functions:
        owners.setdefault(id(func.__code__), set()).add(id(func))
    inner_codes: dict[int, tuple[str, ...]] = {}
    for name, func in functions:
        shared = len(owners[id(func.__code__)]) > 1
        if not shared:
            _add(catalog.codes, id(func.__code__), name)
        else:
            _index_closure(catalog, name, func)
        chain, alternatives = _inner_functions(func)
        if chain or shared:
            catalog.transparent.add(id(func.__code__))
        for layer in chain[:-1]:
            catalog.transparent.add(id(layer.__code__))
        targets = chain[-1:] + (alternatives if shared else [])
        for layer in targets:
            _add(inner_codes, id(layer.__code__), name)
        catalog.keep.append(func)
        catalog.keep.extend(chain + alternatives)
    for table in catalog.wrappers.values():  # a closure value two wrappers share tells nothing
        for key in [k for k, names in table.items() if len(names) > 1 and len({n.rsplit(".", 1)[1] for n in names}) > 1]:
            del table[key]
    for key, names in inner_codes.items():
        if key not in catalog.codes:  # a function's own code wins over the same code reached as an inner one
            catalog.codes[key] = names
            catalog.transparent.discard(key)


def _index_closure(catalog: Catalog, name: str, func: Any) -> None:
    table = catalog.wrappers.setdefault(id(func.__code__), {})
    for cell in func.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if callable(value) and not isinstance(value, type):
            _add(table, id(value), name)
            catalog.keep.append(value)


def _index_class(catalog: Catalog, name: str, cls: type) -> None:
    _add(catalog.classes, id(cls), name)
    catalog.keep.append(cls)
    for attr, raw in vars(cls).items():
        # __add__: documented operators of public classes (Dataset + Dataset is a ConcatDataset)
        if attr.startswith("_") and attr not in ("__init__", "__new__", "__call__", "__enter__", "__exit__",
                                                 "__iter__", "__next__", "__getitem__", "__len__", "__add__"):
            continue
        is_static = isinstance(raw, staticmethod) and attr != "__new__"  # __new__'s first argument is the class
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        if not inspect.isfunction(func) or str(func.__module__).split(".")[0] not in FRAMEWORK_PACKAGES:
            continue  # not the framework's code: Enum.__new__ in every enum class's own dict runs for every enum
        for layer in [func, *_inner_functions(func)[0]][-1:]:
            _add(catalog.codes, id(layer.__code__), name)
            if not is_static:
                catalog.self_typed.add(id(layer.__code__))
            if layer is not func:
                catalog.transparent.add(id(func.__code__))
            catalog.keep.extend((func, layer))


def enumerate_namespaces(catalog: Catalog, frameworks: Iterable[str]) -> None:
    """Add the namespaces of ``frameworks`` (catalog frameworks: tensorflow, keras, torch)
    to the catalog; imports them. Deterministic: names sorted, versions from metadata."""
    functions: list[tuple[str, Any]] = []
    for fw in sorted(set(frameworks) - catalog.frameworks):
        version = distribution_version(fw)
        catalog.frameworks.add(fw)
        if version is None:
            continue
        for ns in (n for n in NAMESPACES if n.framework == fw):
            try:
                obj = _resolve(ns.path)
            except (ImportError, AttributeError) as exc:  # a namespace this version lacks: said in the ledger
                catalog.namespaces[ns.name] = {"framework": fw, "area": ns.area, "version": version, "entries": {},
                                               "missing": f"{type(exc).__name__}: {exc}"}
                continue
            entries: dict[str, str] = {}
            for member, kind, value in _members(ns, obj):
                full = f"{ns.name}.{member}"
                entries[member] = kind
                if kind == CLASS:
                    _index_class(catalog, full, value)
                elif isinstance(value, types.BuiltinFunctionType):
                    _add(catalog.builtins, id(value), full)
                    catalog.keep.append(value)
                else:
                    functions.append((full, value))
            catalog.namespaces[ns.name] = {"framework": fw, "area": ns.area, "version": version, "entries": entries}
    _index_functions(catalog, functions)
    for path in DISPATCHERS:
        try:
            func = _resolve(path)
        except (ImportError, AttributeError):
            continue
        if inspect.isfunction(func):
            catalog.transparent.add(id(func.__code__))
            catalog.keep.append(func)


# ---------------------------------------------------------------- the recorder


FRAMEWORK_FRAME, OWN_FRAME, PASS_FRAME = 0, 1, 2


def _framework_prefixes() -> tuple[str, ...]:
    prefixes = []
    for package in FRAMEWORK_PACKAGES:
        module = sys.modules.get(package)
        paths = getattr(module, "__path__", None) if module is not None else None
        for path in paths or ():
            prefixes.append(os.path.join(os.path.realpath(path), ""))
            prefixes.append(os.path.join(path, ""))
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # report/api_ledger.py -> the package
    prefixes += [os.path.join(package, *part.split("/")) for part in HARNESS_PARTS]
    return tuple(dict.fromkeys(prefixes))


def _stdlib_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = {sysconfig.get_paths()["stdlib"], os.path.dirname(os.__file__)}
    return tuple(dict.fromkeys(os.path.join(p, "") for path in paths for p in (path, os.path.realpath(path))))


def _site_prefixes() -> tuple[str, ...]:
    import sysconfig

    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    return tuple(dict.fromkeys(os.path.join(p, "") for path in paths for p in (path, os.path.realpath(path))))


class Recorder:
    """``sys.setprofile`` around one test phase at a time; the names it saw, per test."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.hits: set[str] = set()
        self._frames: dict[str, int] = {}  # co_filename -> FRAMEWORK_FRAME, OWN_FRAME or PASS_FRAME
        self._prefixes = _framework_prefixes()
        self._stdlib, self._site = _stdlib_prefixes(), _site_prefixes()
        self._previous: Any = None
        self.displaced = False  # another profiler was active: nothing recorded for that phase

    def refresh(self) -> None:
        """Frameworks imported since: their frames are theirs."""
        self._prefixes = _framework_prefixes()
        self._frames.clear()

    def _classify(self, filename: str) -> int:
        if filename.startswith(self._prefixes):
            return FRAMEWORK_FRAME
        # The standard library (contextlib's __enter__, enum's __call__, functools) and generated
        # code (dataclasses' "<string>", torch.fx's "<eval_with_key>") pass calls on: whose they
        # are is decided by who called them.
        if filename.startswith("<") or (filename.startswith(self._stdlib) and not filename.startswith(self._site)):
            return PASS_FRAME
        return OWN_FRAME

    def _is_own(self, frame: Any) -> bool:
        transparent = self.catalog.transparent
        for _ in range(16):
            if frame is None:
                return False
            code = frame.f_code
            if id(code) in transparent:
                frame = frame.f_back
                continue
            kind = self._frames.get(code.co_filename)
            if kind is None:
                kind = self._frames[code.co_filename] = self._classify(code.co_filename)
            if kind == PASS_FRAME:
                frame = frame.f_back
                continue
            return kind == OWN_FRAME
        return False

    def _credit(self, names: tuple[str, ...], frame: Any) -> None:
        code = frame.f_code
        if id(code) in self.catalog.self_typed and code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            cls = first if isinstance(first, type) else type(first)
            typed = self.catalog.classes.get(id(cls))
            if typed:  # an inherited method of a public class: credit that class (Dense, not Layer)
                self.hits.update(typed)
                return
        self.hits.update(names)

    def _wrapped(self, table: dict[int, tuple[str, ...]], frame: Any) -> None:
        values = frame.f_locals
        for var in frame.f_code.co_freevars:
            names = table.get(id(values.get(var)))
            if names is not None:
                self.hits.update(names)
                return

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            key = id(frame.f_code)
            names = self.catalog.codes.get(key)
            if names is not None and self._is_own(frame.f_back):
                self._credit(names, frame)
            table = self.catalog.wrappers.get(key)
            if table and self._is_own(frame.f_back):
                self._wrapped(table, frame)
        elif event == "c_call":
            names = self.catalog.builtins.get(id(arg))
            if names is not None and self._is_own(frame):
                self.hits.update(names)

    def __enter__(self) -> Recorder:
        self._previous = sys.getprofile()
        if self._previous is not None:  # a profiler or debugger of the user's: leave it alone
            self.displaced = True
            return self
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is None:
            sys.setprofile(None)


# ---------------------------------------------------------------- the pytest plugin


class LedgerPlugin:
    """Registered when ``--dl-api-ledger`` is given; records on each process that runs tests
    and, on the controller, merges and writes the ledger (JSON, and HTML beside it)."""

    def __init__(self, config: pytest.Config, path: str, frameworks: tuple[str, ...]) -> None:
        self.config = config
        self.path = path
        self.frameworks = tuple(fw for fw in ("tensorflow", "keras", "torch") if RUN_FRAMEWORK[fw] in frameworks)
        self.catalog = Catalog()
        self.tests: dict[str, dict[str, Any]] = {}
        self.parts: list[dict[str, Any]] = []  # from xdist workers
        self.problem: str | None = None
        self.recorder: Recorder | None = None

    def _loaded(self) -> list[str]:
        return [fw for fw in self.frameworks if ROOT_MODULE[fw] in sys.modules and fw not in self.catalog.frameworks]

    def _phase(self, item: pytest.Item) -> Any:
        import contextlib

        marker = item.get_closest_marker("claim")
        if marker is None or not marker.args:
            return contextlib.nullcontext()
        new = self._loaded()
        if new:
            enumerate_namespaces(self.catalog, new)
            if self.recorder is not None:
                self.recorder.refresh()
        if self.recorder is None:
            self.recorder = Recorder(self.catalog)
        record = self.tests.setdefault(item.nodeid, {"claim": str(marker.args[0]), "apis": set()})
        self.recorder.hits = record["apis"]
        return self.recorder

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        with self._phase(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        with self._phase(item):
            return (yield)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        raw = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if raw:
            self.parts.append(json.loads(raw))

    def _part(self) -> dict[str, Any]:
        if self.tests:  # the catalog of every selected framework, so that worker parts agree
            enumerate_namespaces(self.catalog, self.frameworks)
        tests = {node: {"claim": rec["claim"], "apis": sorted(rec["apis"])} for node, rec in self.tests.items()}
        return {"catalog": self.catalog.as_json(), "tests": tests}

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_KEY] = json.dumps(self._part())
            return
        from . import api_coverage, results

        parts = [self._part(), *self.parts]
        try:
            doc = api_coverage.build(parts, api_coverage.load_out_of_scope())
        except api_coverage.LedgerError as exc:
            self.problem = str(exc)
            session.exitstatus = int(pytest.ExitCode.USAGE_ERROR)
            return
        results.write_atomic(self.path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        results.write_atomic(api_coverage.html_path(self.path), api_coverage.render_html(doc))
        self.summary = api_coverage.summary_line(doc, self.path)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workeroutput", None) is not None:
            return
        if self.problem:
            terminalreporter.write_line(f"dlconform: --dl-api-ledger: {self.problem}", red=True, bold=True)
        elif getattr(self, "summary", None):
            terminalreporter.write_line(f"dlconform: {self.summary}", bold=True)


def register(config: pytest.Config, path: str, frameworks: tuple[str, ...]) -> None:
    """Called by the plugin at configure time when the run has --dl-api-ledger."""
    if config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    if getattr(config, "workerinput", None) is None:
        from . import api_coverage

        try:
            api_coverage.load_out_of_scope()  # the data file's syntax, before any test runs
        except api_coverage.LedgerError as exc:
            raise pytest.UsageError(f"--dl-api-ledger: {exc}") from None
    config.pluginmanager.register(LedgerPlugin(config, path, frameworks), PLUGIN_NAME)
