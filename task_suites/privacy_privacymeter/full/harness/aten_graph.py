"""Load and run the audited model from what the experiment exported, without running any of its code.

The experiment leaves OUT/model_graph.json (the model's forward pass, exported with torch.export and
decomposed to ATen operators, one node per operator call) and OUT/model_tensors.pt (its parameters,
buffers and constants: a dict of tensors). Both are untrusted: torch.export.load would unpickle
arbitrary objects and evaluate symbolic expressions, so this module reads the graph as plain JSON and
runs it itself, node by node, calling only ATen operators that pass `_allowed` (no mutation, no
uninitialised memory, no file or string handling: only tensor, number and flag arguments, with strings
only for an operator's mode), loading the tensors with torch.load(weights_only=True).

The format (written by train.py): {"format": 1, "input": {"name", "shape", "dtype"}, "tensors": {node:
key in model_tensors.pt}, "nodes": [{"name", "op": "aten.<op>.<overload>" | "getitem", "args", "kwargs"}],
"output": value}; a value is a number, a bool, null, a string, a list of values, or one of {"node":
name}, {"dtype": name}, {"device": name}, {"layout": name}, {"memory_format": name}.
"""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

from pytest_fmlbench.evalkit import read_json, read_untrusted

MAX_GRAPH_BYTES, MAX_TENSOR_BYTES, MAX_NODES = 32 << 20, 1 << 30, 50_000
_OP = re.compile(r"aten\.([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")
# argument types (torch._C type kinds) an allowed operator may take, inside optionals and lists
_LEAF_KINDS = {"TensorType", "IntType", "SymIntType", "FloatType", "BoolType", "NumberType", "DeviceObjType",
               "GeneratorType", "ScalarTypeType", "LayoutType", "MemoryFormatType"}
# strings an operator may take: the name of a mode (gelu's approximate, div's rounding_mode, einsum's equation...)
_STRING_ARGUMENTS = {"approximate", "rounding_mode", "equation", "mode", "reduce", "side", "padding",
                     "interpolation", "indexing", "ord", "driver", "UPLO"}
_DTYPES = {name: getattr(torch, name) for name in ("float16", "bfloat16", "float32", "float64", "int8", "uint8",
                                                  "int16", "int32", "int64", "bool")}
_FORMATS = {name: getattr(torch, name) for name in ("contiguous_format", "channels_last", "preserve_format")}


class GraphError(ValueError):
    """The exported model cannot be loaded: a one-line reason."""


def _allowed(name: str) -> torch._ops.OpOverload:
    match = _OP.fullmatch(name)
    if match is None:
        raise GraphError(f"{name!r} is not an ATen operator")
    op_name, overload = match.groups()
    if "empty" in op_name:  # uninitialised memory: whatever the process held before
        raise GraphError(f"{name} is not allowed (it reads uninitialised memory)")
    try:
        op = None if op_name.startswith("__") else getattr(getattr(torch.ops.aten, op_name), overload)
    except (AttributeError, RuntimeError):
        op = None
    if not isinstance(op, torch._ops.OpOverload):
        raise GraphError(f"{name} is not an ATen operator of this torch")
    schema = op._schema
    if schema.is_mutable:
        raise GraphError(f"{name} is not allowed (it writes to its arguments)")
    for argument in schema.arguments:
        leaf = _leaf_kind(argument.type)
        if leaf not in _LEAF_KINDS and not (leaf == "StringType" and argument.name in _STRING_ARGUMENTS):
            raise GraphError(f"{name} is not allowed (its argument {argument.name} is a {argument.type})")
    for returned in schema.returns:
        if _leaf_kind(returned.type) != "TensorType":
            raise GraphError(f"{name} is not allowed (it returns a {returned.type})")
    return op


def _leaf_kind(kind: Any) -> str:
    while kind.kind() in ("OptionalType", "ListType"):
        kind = kind.getElementType()
    return kind.kind()


def _decoder(env: dict[str, Any], device: torch.device) -> Callable[[Any], Any]:
    def decode(value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [decode(item) for item in value]
        if isinstance(value, dict) and len(value) == 1:
            (kind, name), = value.items()
            if kind == "node" and name in env:
                return env[name]
            if kind == "dtype" and name in _DTYPES:
                return _DTYPES[name]
            if kind == "device":
                return device  # the auditor decides where the model runs
            if kind == "layout" and name == "strided":
                return torch.strided
            if kind == "memory_format" and name in _FORMATS:
                return _FORMATS[name]
        raise GraphError(f"unreadable value in the graph: {str(value)[:80]}")
    return decode


class AuditedModel:
    """The exported forward pass: call it on a batch of exactly ``batch_size`` images."""

    def __init__(self, folder: Path, device: torch.device):
        try:
            graph = read_json(folder / "model_graph.json", MAX_GRAPH_BYTES)
            payload = read_untrusted(folder / "model_tensors.pt", MAX_TENSOR_BYTES)
        except FileNotFoundError as exc:
            raise GraphError(f"{Path(exc.filename).name} is missing: train.py writes it after training") from None
        except (OSError, ValueError) as exc:
            raise GraphError(str(exc).splitlines()[0]) from None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tensors = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
        except Exception:  # weights_only refuses anything but tensors and plain containers
            raise GraphError("model_tensors.pt is not a dict of tensors (torch.load(weights_only=True))") from None
        if not isinstance(graph, dict) or graph.get("format") != 1:
            raise GraphError("model_graph.json is not a graph of format 1")
        if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
            raise GraphError("model_tensors.pt is not a dict of tensors")
        try:
            self.input_name = str(graph["input"]["name"])
            self.input_shape = tuple(int(v) for v in graph["input"]["shape"])
            bound = {str(node): tensors[key] for node, key in graph["tensors"].items()}
            self.nodes = [(str(n["name"]), n["op"], n["args"], n["kwargs"]) for n in graph["nodes"]]
            self.output = graph["output"]
        except (KeyError, TypeError, ValueError) as exc:
            raise GraphError(f"model_graph.json lacks a field or has a wrong one ({exc})") from None
        if len(self.nodes) > MAX_NODES:
            raise GraphError(f"the graph has {len(self.nodes)} nodes, more than {MAX_NODES}")
        if self.input_shape[1:] != (3, 32, 32) or not 1 <= self.input_shape[0] <= 4096:
            raise GraphError(f"the model's input has shape {self.input_shape}, not (batch, 3, 32, 32)")
        self.ops = [None if op == "getitem" else _allowed(op) for _, op, _, _ in self.nodes]
        self.device = device
        self.bound = {name: tensor.to(device) for name, tensor in bound.items()}

    @property
    def batch_size(self) -> int:
        return self.input_shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        env: dict[str, Any] = {**self.bound, self.input_name: x}
        decode = _decoder(env, self.device)
        for (name, op_name, args, kwargs), op in zip(self.nodes, self.ops):
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise GraphError(f"node {name}: its arguments are not a list and a dict")
            args, kwargs = decode(args), {str(k): decode(v) for k, v in kwargs.items()}
            if op is None:
                if len(args) != 2 or not isinstance(args[0], (list, tuple)) or not isinstance(args[1], int):
                    raise GraphError(f"node {name}: getitem takes an operator's results and an index")
                env[name] = args[0][args[1]]
            else:
                try:
                    env[name] = op(*args, **kwargs)
                except (RuntimeError, TypeError, IndexError, ValueError) as exc:
                    raise GraphError(f"node {name} ({op_name}) failed: {str(exc).splitlines()[0]}") from None
        out = decode(self.output)
        if isinstance(out, (list, tuple)) and len(out) == 1:
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.shape != (len(x), 10) or not out.is_floating_point():
            raise GraphError(f"the model must return (batch, 10) logits, not {getattr(out, 'shape', type(out))}")
        return out
