"""Suite lint: no torch tensor goes to numpy without the move to the host.

On a GPU run the guard makes cuda torch's default device, so a suite's ``t.numpy()`` on a
torch tensor raises TypeError ("can't convert cuda:0 device type tensor to numpy") on the
first real device. TensorFlow's ``.numpy()`` copies from any device and is fine. The lint
reads each suite's ast: a ``.numpy()`` call needs a ``.cpu()`` (or ``.to("cpu")``) in its
receiver chain, or to sit in a ``with torch.device("cpu"):`` block, wherever the code
around it is torch code: the innermost enclosing function (or lambda) that names a
framework names torch. Where a function names both, a receiver visibly built by torch (a
``torch.`` call, or a name bound to one) must be moved; others are taken as TensorFlow's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SUITES = Path(__file__).resolve().parents[2] / "suites"
TORCH_NAMES = frozenset({"torch", "F", "nn"})
TF_NAMES = frozenset({"tf", "keras", "keras_tf", "tensorflow"})
Scope = "ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda"


def _names(node: ast.AST) -> set[str]:
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        found |= {a.arg for a in node.args.args + node.args.kwonlyargs}
    return found


def _moved(receiver: ast.AST) -> bool:
    """A .cpu() / .to("cpu") / .to(device="cpu") somewhere in the receiver chain."""
    node = receiver
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr == "cpu":
                return True
            if attr == "to" and any(isinstance(a, ast.Constant) and a.value == "cpu"
                                    for a in [*node.args, *(k.value for k in node.keywords)]):
                return True
            node = node.func.value
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return False


def _root(receiver: ast.AST) -> ast.AST:
    node = receiver
    while True:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and not _is_module_call(node):
                node = node.func.value
            else:
                return node
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return node


def _is_module_call(call: ast.Call) -> bool:
    """tf.x.y(...) / torch.x(...): the call's function is an attribute path from a module name."""
    node = call.func
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in TORCH_NAMES | TF_NAMES


def _is_numpy_conversion(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr in ("asarray", "array", "asanyarray")
            and isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy"))


def _framework_of(expr: ast.AST) -> set[str]:
    names = _names(expr)
    return ({"tf"} if names & TF_NAMES else set()) | ({"torch"} if names & TORCH_NAMES else set())


class Lint(ast.NodeVisitor):
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.scopes: list[ast.AST] = []
        self.cpu_blocks = 0
        self.found: list[str] = []

    def _scoped(self, node: ast.AST) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_With(self, node: ast.With) -> None:
        cpu = any(isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Attribute)
                  and i.context_expr.func.attr == "device" and _names(i.context_expr.func.value) & TORCH_NAMES
                  and any(isinstance(a, ast.Constant) and a.value == "cpu" for a in i.context_expr.args)
                  for i in node.items)
        self.cpu_blocks += cpu
        self.generic_visit(node)
        self.cpu_blocks -= cpu

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if _is_numpy_conversion(node) and node.args and not self.cpu_blocks and not _moved(node.args[0]):
            # np.asarray(t) on a cuda tensor raises like t.numpy(): flagged where t is visibly torch's
            if self._context() and self._origin(node.args[0]) == {"torch"}:
                self.found.append(f"{self.filename}:{node.lineno}: {ast.unparse(node)} of a torch tensor: "
                                  "move the tensor first (.detach().cpu()) or run it under torch.device('cpu')")
            return
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "numpy" and not node.args):
            return
        receiver = node.func.value
        if self.cpu_blocks or _moved(receiver):
            return
        context = self._context()
        if context == {"torch"} or (context == {"tf", "torch"} and self._origin(receiver) == {"torch"}):
            self.found.append(f"{self.filename}:{node.lineno}: {ast.unparse(node)} in torch code: "
                              "move the tensor first (.detach().cpu().numpy()) or run it under torch.device('cpu')")

    def _context(self) -> set[str]:
        for scope in reversed(self.scopes):
            used = _framework_of(scope)
            if used:
                return used
        return set()

    def _origin(self, receiver: ast.AST) -> set[str]:
        """The frameworks the receiver is visibly built with: a framework call at its root,
        or the value its root name was last bound to in an enclosing scope."""
        root = _root(receiver)
        if isinstance(root, ast.Call):
            return _framework_of(root)
        if isinstance(root, ast.Name):
            for scope in reversed(self.scopes):
                for target, value in _bindings(scope):
                    if root.id in _names(target):
                        return _framework_of(value)
        return set()


def _bindings(scope: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of the assignments, for loops and with-as in a scope."""
    out: list[tuple[ast.AST, ast.AST]] = []
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            out += [(t, n.value) for t in n.targets]
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            out.append((n.target, n.value))
        elif isinstance(n, (ast.For, ast.comprehension)):
            out.append((n.target, n.iter))
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            out.append((n.optional_vars, n.context_expr))
    return out


def offenders(source: str, filename: str = "<suite>") -> list[str]:
    lint = Lint(filename)
    lint.visit(ast.parse(source))
    return lint.found


def test_no_suite_converts_a_torch_tensor_without_moving_it_to_the_host():
    found = []
    for path in sorted(SUITES.rglob("*.py")):
        found += offenders(path.read_text(encoding="utf-8"), str(path.relative_to(SUITES.parent)))
    assert not found, "torch tensors converted to numpy without a device move:\n" + "\n".join(found)


WRONG = '''
def test_grad(torch):
    x = torch.tensor([1.0], requires_grad=True)
    (g,) = torch.autograd.grad((x * x).sum(), [x])
    return g.numpy()

def helper(torch, xs):
    f = lambda v: torch.sin(torch.tensor(v)).numpy()
    return [t.detach().numpy() for t in xs], f

def mixed(tf, torch, x):
    a = tf.constant(x)
    b = torch.tensor(x)
    return a.numpy(), b.numpy()

def as_array(torch, np, x):
    return np.asarray(torch.sin(torch.tensor(x)))
'''

RIGHT = '''
def test_grad(torch):
    x = torch.tensor([1.0], requires_grad=True)
    (g,) = torch.autograd.grad((x * x).sum(), [x])
    with torch.device("cpu"):
        y = torch.ones(2).numpy()
    return g.detach().cpu().numpy(), g.to("cpu").numpy(), y

def tf_only(tf, x):
    with tf.GradientTape() as tape:
        y = tf.sin(x)
    return tape.gradient(y, x).numpy()

def mixed(tf, torch, x):
    a = tf.constant(x)
    return a.numpy(), tf.sin(a).numpy(), torch.tensor(x).cpu().numpy(), np.asarray(torch.tensor(x).cpu())
'''


def test_the_lint_finds_every_unmoved_torch_conversion():
    found = offenders(WRONG, "wrong.py")
    assert [f.split(":")[1] for f in found] == ["5", "8", "9", "14", "17"], found
    assert "move the tensor first" in found[0]


def test_the_lint_accepts_moved_tensors_and_tensorflow():
    assert offenders(RIGHT, "right.py") == []


@pytest.mark.parametrize("snippet", ["t.cpu().numpy()", "t.detach().cpu().float().numpy()", "t.to('cpu').numpy()",
                                     "t.to(device='cpu').numpy()"])
def test_moves_anywhere_in_the_chain_count(snippet):
    assert offenders(f"def f(torch, t):\n    return {snippet}\n") == []
