"""The architecture ported to torch the way a person porting a model must: transposed
kernels, NCHW inside, Keras's ``H, W, C`` flatten order, ``momentum_torch = 1 - momentum_keras``;
and its run: forward, loss, gradients (autograd) and the running statistics."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .architectures import Architecture, Case, Layer, Result, shapes
from .architectures import to_float64 as _np


def torch_model(torch: Any, case: Case, weights: Mapping[str, np.ndarray], dtype: str, device: str = "cpu") -> Any:
    """``case.arch`` as a torch.nn.Module with ``weights`` transferred from Keras's layout.

    The module takes Keras-layout inputs (N, H, W, C) and runs NCHW inside."""
    nn = torch.nn
    modules = nn.ModuleList(_torch_layer(nn, layer, s) for layer, s in zip(case.arch.layers, shapes(case.arch)))
    modules.to(dtype=getattr(torch, dtype))  # first: copying float64 data into float32 modules would round it
    for i, layer in enumerate(case.arch.layers):
        _transfer(torch, modules[i], layer, i, weights)
    return _module_class(torch)(case.arch, modules).to(device=device)


def _torch_layer(nn: Any, layer: Layer, s: tuple[int, ...]) -> Any:
    if layer.kind == "dense":
        return nn.Linear(s[-1], layer.units, bias=layer.use_bias)
    if layer.kind == "conv":
        return nn.Conv2d(s[-1], layer.units, layer.kernel, stride=layer.stride, dilation=layer.dilation,
                         padding="same" if layer.padding == "same" else 0, bias=layer.use_bias)
    if layer.kind == "layernorm":
        return nn.LayerNorm(s[-1], eps=layer.epsilon)
    if layer.kind == "batchnorm":
        cls = nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d
        return cls(s[-1], eps=layer.epsilon, momentum=1.0 - layer.momentum)
    return nn.Identity()


def _transfer(torch: Any, module: Any, layer: Layer, i: int, weights: Mapping[str, np.ndarray]) -> None:
    def put(param: Any, value: np.ndarray) -> None:
        with torch.no_grad():
            param.copy_(torch.from_numpy(np.ascontiguousarray(value, dtype=np.float64)))

    if layer.kind == "dense":
        put(module.weight, weights[f"{i}.kernel"].T)
    elif layer.kind == "conv":
        put(module.weight, weights[f"{i}.kernel"].transpose(3, 2, 0, 1))  # HWIO -> OIHW
    if layer.kind in ("dense", "conv") and layer.use_bias:
        put(module.bias, weights[f"{i}.bias"])
    if layer.kind in ("layernorm", "batchnorm"):
        put(module.weight, weights[f"{i}.gamma"])
        put(module.bias, weights[f"{i}.beta"])
    if layer.kind == "batchnorm":
        put(module.running_mean, weights[f"{i}.moving_mean"])
        put(module.running_var, weights[f"{i}.moving_variance"])


_MODULE_CLASS: dict[int, Any] = {}


def _module_class(torch: Any) -> Any:
    if id(torch) in _MODULE_CLASS:
        return _MODULE_CLASS[id(torch)]
    F = torch.nn.functional
    acts = {"linear": lambda h: h, "relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "gelu": F.gelu}

    class PortedModel(torch.nn.Module):
        def __init__(self, arch: Architecture, modules: Any) -> None:
            super().__init__()
            self.arch = arch
            self.blocks = modules

        def forward(self, x: Any) -> Any:
            h = x.permute(0, 3, 1, 2) if x.dim() == 4 else x
            for layer, module in zip(self.arch.layers, self.blocks):
                if layer.kind == "flatten":
                    h = h.permute(0, 2, 3, 1).flatten(1)  # Keras flattens channels-last: H, W, C
                elif layer.kind == "layernorm" and h.dim() == 4:
                    h = module(h.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # normalise over channels
                else:
                    h = module(h)
                if layer.kind in ("dense", "conv"):
                    h = acts[layer.activation](h)
            return h

    _MODULE_CLASS[id(torch)] = PortedModel
    return PortedModel


def torch_loss(torch: Any, case: Case, logits: Any, labels: Any) -> Any:
    spec = case.arch.loss
    ignore = -100 if spec.ignore_class is None else spec.ignore_class  # -100: torch's default, no class
    return torch.nn.functional.cross_entropy(logits, labels, ignore_index=ignore, label_smoothing=spec.label_smoothing)


def torch_run(torch: Any, case: Case, dtype: str, device: str = "cpu",
              weights: Mapping[str, np.ndarray] | None = None) -> Result:
    """The ported model on torch: forward, loss and gradients (autograd).
    ``weights`` replaces the case's own (Keras layout)."""
    model = torch_model(torch, case, case.weights() if weights is None else weights, dtype, device)
    model.train(case.training)
    x, labels = case.inputs()
    xt = torch.tensor(x, dtype=getattr(torch, dtype), device=device, requires_grad=True)
    with warnings.catch_warnings():
        # torch notes that padding='same' with an even kernel pads a copy: true, and harmless here.
        warnings.filterwarnings("ignore", message="Using padding='same' with even kernel")
        logits = model(xt)
    loss = torch_loss(torch, case, logits, torch.tensor(labels, device=device))
    names, params = torch_trainables(model, case)
    grads = torch.autograd.grad(loss, [xt, *params])
    out = {"logits": _np(logits), "loss": _np(loss), "grad/x": _np(grads[0])}
    for name, g in zip(names, grads[1:]):
        g = _np(g)
        if name.endswith(".kernel"):
            g = g.T if g.ndim == 2 else g.transpose(2, 3, 1, 0)  # back to Keras layout
        out[f"grad/{name}"] = g
    for i, layer in enumerate(case.arch.layers):
        if layer.kind == "batchnorm":
            out[f"state/{i}.moving_mean"] = _np(model.blocks[i].running_mean)
            out[f"state/{i}.moving_variance"] = _np(model.blocks[i].running_var)
    return out


def torch_trainables(model: Any, case: Case) -> tuple[list[str], list[Any]]:
    names, params = [], []
    for i, layer in enumerate(case.arch.layers):
        m = model.blocks[i]
        if layer.kind in ("dense", "conv"):
            names.append(f"{i}.kernel")
            params.append(m.weight)
            if layer.use_bias:
                names.append(f"{i}.bias")
                params.append(m.bias)
        elif layer.kind in ("layernorm", "batchnorm"):
            names += [f"{i}.gamma", f"{i}.beta"]
            params += [m.weight, m.bias]
    return names, params
