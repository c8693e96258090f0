"""How an operation of the engine is declared, and the methods every caller gets from it.

An operation is one handler function, ``handler(engine, **request) -> result``, decorated with
:func:`operation`. From that one declaration come:

* its **request**: the handler's parameters (their names, types and defaults), which the
  owner socket decodes a call's parameters by. Read from the handler's signature when first
  needed: a dataclass made per operation at import (45 of them) cost every command, a thin
  client of the owner included, ~0.05 s of CPU (issue 37, the first answers);
* its **result record**: the handler's return annotation, which a client rebuilds the
  owner's answer with;
* a **method** of that name on the Engine (run here) and on the SharedEngine (run here when
  this process owns the index, else on the owner), installed by :func:`expose`;
* the names it has on each **surface** (MCP tools, HTTP routes, CLI commands, and methods of
  the Python API's classes, ``Memory.merge``), which ``tests/test_operations.py`` checks
  against the tools, routes, commands and methods that exist.

A handler's ``progress`` parameter is not part of the request: it is the
:class:`contextd.indexer.progress.Progress` sink of the caller, relayed over the socket.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import typing
from typing import Any, Callable

from contextd.records import to_dict

# The handler parameter that is the caller's progress sink rather than a request field.
PROGRESS = "progress"


@dataclasses.dataclass(frozen=True)
class Operation:
    """One operation of the engine: its handler, its request's fields and result record, and
    where it is exposed. ``prepare`` rewrites a call's parameters where a call may leave this process
    (:meth:`contextd.runtime.owner.SharedEngine.call`): paths made absolute, since the owner
    runs in another working directory."""

    name: str
    handler: Callable[..., Any]
    takes_progress: bool
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    mcp: tuple[str, ...] = ()
    http: tuple[str, ...] = ()
    cli: tuple[str, ...] = ()
    api: tuple[str, ...] = ()

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The parameters a caller passes: the handler's, without the engine and progress."""
        params = list(inspect.signature(self.handler).parameters.values())[1:]
        return inspect.Signature([p for p in params if p.name != PROGRESS])

    @functools.cached_property
    def field_types(self) -> dict[str, Any]:
        """Each request field's type (a parameter without an annotation: ``Any``), resolved
        in the handler's module."""
        hints = typing.get_type_hints(self.handler)
        return {name: hints.get(name, Any) for name in self.signature.parameters}

    @functools.cached_property
    def result(self) -> Any:
        """The result record's type (``Any`` for a plain JSON value)."""
        return typing.get_type_hints(self.handler).get("return", Any)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """A call's arguments as the request's fields, defaults filled in (TypeError for an
        argument the operation does not take)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def prepared(self, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters as they leave this process (see ``prepare``)."""
        return self.prepare(params) if self.prepare is not None else params

    def run(self, engine: Any, params: dict[str, Any], progress: Any = None) -> Any:
        """Run the handler on this process's Engine."""
        if self.takes_progress:
            return self.handler(engine, **params, progress=progress)
        return self.handler(engine, **params)

    def encode(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request as JSON for the owner socket."""
        return {name: to_dict(value) for name, value in params.items()}

    def decode(self, wire: dict[str, Any]) -> dict[str, Any]:
        """A request read from the socket, records rebuilt (TypeError for an unknown or
        missing field)."""
        from contextd.runtime.rpc import from_dict

        self.signature.bind(**wire)
        types = self.field_types
        return {name: from_dict(types.get(name, Any), value) for name, value in wire.items()}

    def decode_result(self, wire: Any) -> Any:
        """The owner's answer rebuilt as the result record."""
        from contextd.runtime.rpc import from_dict

        return from_dict(self.result, wire)

    def method(self, name: str, via: str | None) -> Callable[..., Any]:
        """The method callers use: binds its arguments to the request and hands them to
        ``call(name, params, progress)`` of the instance (or of its attribute ``via``)."""
        def method(instance: Any, *args: Any, progress: Any = None, **kwargs: Any) -> Any:
            runner = getattr(instance, via) if via else instance
            return runner.call(self.name, self.bind(args, kwargs), progress)

        method.__name__ = method.__qualname__ = name
        method.__doc__ = self.handler.__doc__
        first = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        extra = ([inspect.Parameter(PROGRESS, inspect.Parameter.KEYWORD_ONLY, default=None)]
                 if self.takes_progress else [])
        method.__signature__ = self.signature.replace(  # type: ignore[attr-defined]
            parameters=[first, *self.signature.parameters.values(), *extra])
        return method


# Every declared operation by name, filled by the @operation decorators of this package.
OPERATIONS: dict[str, Operation] = {}


def operation(*, mcp: tuple[str, ...] = (), http: tuple[str, ...] = (),
              cli: tuple[str, ...] = (), api: tuple[str, ...] = (),
              prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
              ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated handler as an operation of the engine (see the module's
    docstring); ``mcp``, ``http`` and ``cli`` name the tools, routes and commands that
    expose it, ``api`` the ``Class.method`` names it has in the Python API."""
    def declare(handler: Callable[..., Any]) -> Callable[..., Any]:
        name = handler.__name__
        if name in OPERATIONS:
            raise ValueError(f"operation {name!r} is declared twice")
        params = list(inspect.signature(handler).parameters.values())[1:]
        OPERATIONS[name] = Operation(name, handler, any(p.name == PROGRESS for p in params),
                                     prepare, mcp, http, cli, api)
        return handler

    return declare


def expose(cls: type, via: str | None = None) -> type:
    """Give ``cls`` its methods of the declared operations; each runs ``call(name, params,
    progress)``, the one place that decides where an operation runs.

    Without ``via`` (the Engine, the SharedEngine): a method per operation, under the
    operation's name, unless the class defines one itself. With ``via`` (a class of the
    Python API): the methods the operations' ``api`` names give this class, each calling
    ``call`` on the instance's attribute ``via``, or on the instance itself when ``via`` is
    ``""`` (a class that decides where its calls go, as ServiceModule does)."""
    for op in OPERATIONS.values():
        if via is None:
            names = () if op.name in cls.__dict__ else (op.name,)
        else:
            names = tuple(qualified.partition(".")[2] for qualified in op.api
                          if qualified.partition(".")[0] == cls.__name__)
        for name in names:
            setattr(cls, name, op.method(name, via))
    return cls


@functools.cache
def wire_shape() -> str:
    """A digest of every operation as the owner socket carries it: its name, its request's
    fields and its result, records followed into their fields. The owner's hello compares it
    (:mod:`contextd.runtime.owner_server`), so a client and an owner built from different
    declarations refuse each other, and no version number has to follow the records by hand."""
    shapes = []
    for op in sorted(OPERATIONS.values(), key=lambda op: op.name):
        fields = ", ".join(f"{name}: {_shape(tp)}" for name, tp in op.field_types.items())
        shapes.append(f"{op.name}({fields}) -> {_shape(op.result)}")
    return hashlib.sha256("\n".join(shapes).encode()).hexdigest()[:16]


def _shape(tp: Any, seen: frozenset[type] = frozenset()) -> str:
    """A type as its wire form depends on it: a record with its fields (each once per path,
    so a record that holds itself ends), a generic with its arguments, else its name."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp in seen:
            return tp.__name__
        fields = typing.get_type_hints(tp)
        inner = ", ".join(f"{f.name}: {_shape(fields[f.name], seen | {tp})}"
                          for f in dataclasses.fields(tp))
        return f"{tp.__name__}{{{inner}}}"
    args = typing.get_args(tp)
    if args:
        origin = typing.get_origin(tp)
        return (f"{getattr(origin, '__name__', repr(origin))}"
                f"[{', '.join(_shape(arg, seen) for arg in args)}]")
    return getattr(tp, "__name__", repr(tp))
