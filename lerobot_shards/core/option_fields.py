"""Options as values: one dataclass field says an option's name, type, default and help.

The public option sets (``ReadOptions``, the packer's ``PackOptions``/``PackRunOptions``) are
frozen dataclasses whose fields are made with ``option(...)``. Everything that spells an
option elsewhere is derived from those fields instead of repeating them:

- a call that takes the options as keywords (``PackedDataset(root, seed=3)``) collects them
  with ``**options`` and merges them into the value with ``merge_options`` (unknown names are
  refused with the closest known one); ``keyword_signature`` shows them in ``help()`` and
  ``inspect.signature`` as if they were spelled out;
- command-line flags (the ``lerobot-shards pack`` flags, ``lerobot-train``'s ``--shards.*``)
  read their flag name, help, choices and text parser from ``OptionSpec``;
- ``describe_options`` writes the "Attributes" section of the class docstring.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import numbers
import textwrap
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any, TypeVar

from lerobot_shards.core.errors import ArgumentError

T = TypeVar("T")
_F = TypeVar("_F", bound=Callable[..., Any])  # a decorated function keeps its own type


@dataclass(frozen=True)
class OptionSpec:
    """What a field says of itself beyond its name, type and default.

    Attributes:
        help: one or two sentences for docstrings and ``--help``.
        flag: the command-line flag (``"--shard-size-mb"``; ``""``: ``--<name-with-dashes>``);
            ``None`` when the option has no flag (a Python object such as a callable or a
            retry policy).
        parse: text -> value for flags (default: from the field's type; JSON for dicts).
        metavar: the flag's value placeholder in ``--help``.
        choices: the allowed values (default: a ``Literal`` type's), or a function returning
            them (for choices read from a table that is costly to import, such as the decoders).
        minimum, maximum: the allowed range of a number (checked by the command line before
            the value's own validation runs); ``exclusive_minimum``: above ``minimum``, not at it.
        multiple: the flag may be repeated (``parse`` then gets the tuple of texts).
        destination: the option is about where and how a run writes (workers, a part, the
            destination's credentials), not what is read or made: a check of the source,
            which writes nothing, takes every option but these.
    """

    help: str
    flag: str | None = None
    parse: Callable[[Any], Any] | None = None
    metavar: str | None = None
    choices: tuple | Callable[[], tuple] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    multiple: bool = False
    destination: bool = False


def option(
    default: Any = MISSING,
    *,
    help: str,
    flag: str | bool = True,
    default_factory: Any = MISSING,
    parse: Callable[[Any], Any] | None = None,
    metavar: str | None = None,
    choices: tuple | Callable[[], tuple] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    multiple: bool = False,
    destination: bool = False,
) -> Any:
    """A dataclass field carrying its ``OptionSpec`` (``flag=True``: ``--<name-with-dashes>``;
    ``False``: no flag). Returns what ``dataclasses.field`` returns."""
    spec = OptionSpec(
        help=help,
        flag=flag if isinstance(flag, str) else ("" if flag else None),
        parse=parse,
        metavar=metavar,
        choices=choices,
        minimum=minimum,
        maximum=maximum,
        exclusive_minimum=exclusive_minimum,
        multiple=multiple,
        destination=destination,
    )
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": spec})


@dataclass(frozen=True)
class OptionField:
    """One option of an option class: its name, resolved type, default and spec."""

    name: str
    type: Any
    default: Any
    spec: OptionSpec

    @property
    def flag(self) -> str | None:
        """The command-line flag, or None."""
        if self.spec.flag is None:
            return None
        return self.spec.flag or "--" + self.name.replace("_", "-")

    @property
    def choices(self) -> tuple | None:
        """The allowed values: the spec's, else a ``Literal`` type's."""
        if self.spec.choices is not None:
            return self.spec.choices() if callable(self.spec.choices) else self.spec.choices
        literal = next((a for a in (self.type, *typing.get_args(self.type)) if typing.get_origin(a) is typing.Literal), None)
        return typing.get_args(literal) if literal is not None else None

    @property
    def base_type(self) -> type:
        """The type without ``None`` (``int | None`` -> ``int``)."""
        args = [a for a in typing.get_args(self.type) if a is not type(None)]
        if typing.get_origin(self.type) in (typing.Union, _UnionType) and len(args) == 1:
            return args[0]
        return self.type

    def parse_text(self, text: Any, *, spelled: str | None = None) -> Any:
        """A value from its command-line text (empty, ``none`` or ``null`` is None for optional
        fields); ``spelled`` is how the caller's command line names the option (default: ``flag``).

        Raises:
            ArgumentError: the text is not a value of the field's type (names the option).
        """
        try:
            if isinstance(text, str) and text.strip().lower() in ("", "none", "null"):
                if self.default is None:
                    return None  # an optional option given as none, null or empty (a script's "$VAR"): not set
                raise ValueError("needs a value")
            if self.spec.parse is not None:
                return self.spec.parse(text)
            kind = self.base_type
            if kind is bool:
                if text.lower() in ("true", "1", "yes"):
                    return True
                if text.lower() in ("false", "0", "no"):
                    return False
                raise ValueError("expected true or false")
            if kind is dict or typing.get_origin(kind) is dict:
                value = json.loads(text)
                if not isinstance(value, dict):
                    raise ValueError("not a JSON object")
                return value
            if kind in (int, float):
                return kind(text)
            return text
        except (ValueError, TypeError) as err:
            raise ArgumentError(f"{spelled or self.flag or self.name}={text!r}: not a valid value ({err})") from None


_UnionType = type(int | None)


def _default_of(f: dataclasses.Field) -> Any:
    """A field's default value (its factory's product), or ``MISSING``."""
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def option_fields(cls: type) -> list[OptionField]:
    """The options of an option class, in field order (types resolved)."""
    hints = typing.get_type_hints(cls, include_extras=False)
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("option")
        if spec is None:
            continue
        out.append(OptionField(f.name, hints[f.name], _default_of(f), spec))
    return out


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def check_values(value: Any, error: Callable[[str, str], Exception] = lambda message, name: ArgumentError(message)) -> None:
    """Check every option field of ``value`` (an option class's instance) against what the field
    declares: its choices (a ``Literal`` type's or the spec's), its range (``minimum``,
    ``maximum``, ``exclusive_minimum``) and, for a dataclass type such as ``RetryPolicy``, its
    type. ``None`` passes (an optional option not set). The one place these rules are applied,
    so a field's declaration is its check.

    Raises:
        the exception ``error(message, field name)`` makes (default ``ArgumentError``), for the
        first field outside what it declares; the message names the field, the rule and the value.
    """
    for f in option_fields(type(value)):
        v = getattr(value, f.name)
        if v is None:
            continue
        choices = f.choices
        if choices is not None and v not in choices:
            raise error(f"{f.name} must be one of {', '.join(repr(c) for c in choices)}, got {v!r}", f.name)
        low, high = f.spec.minimum, f.spec.maximum
        if low is not None or high is not None:
            unset = "None or " if type(None) in typing.get_args(f.type) else ""  # an optional option may be None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise error(f"{f.name} must be {unset}a number, got {v!r}", f.name)
            if low is not None and (v < low or (f.spec.exclusive_minimum and v == low)):
                raise error(
                    f"{f.name} must be {unset}{'>' if f.spec.exclusive_minimum else '>='} {_number(low)}, got {v}", f.name
                )
            if high is not None and v > high:
                raise error(f"{f.name} must be {unset}<= {_number(high)}, got {v}", f.name)
        kind = f.base_type
        if isinstance(kind, type) and dataclasses.is_dataclass(kind) and not isinstance(v, kind):
            raise error(f"{f.name} must be a {kind.__name__}, got {type(v).__name__}", f.name)
        expected = type_mismatch(v, kind)
        if expected is not None:
            raise error(f"{f.name} must be {expected}, got {str(v)[:80]!r} ({type(v).__name__})", f.name)


def type_mismatch(value: Any, kind: Any) -> str | None:
    """What ``value`` should have been for the option type ``kind`` (``int``, ``float``, ``str``,
    ``bool``, ``dict``, ``tuple[int, ...]``, ``tuple[int, int]``, a ``Literal``, a union of
    these), or None when it is one. Numbers are never bools; a float takes an int. Types this
    cannot read (a callable, a class) pass: their own checks apply."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, _UnionType):
        found = [type_mismatch(value, a) for a in args if a is not type(None)]
        return None if value is None or any(m is None for m in found) else " or ".join(m for m in found if m)
    if origin is typing.Literal:
        return None  # the choices check says what is allowed
    if kind is bool:
        return None if isinstance(value, bool) else "true or false"
    if kind is int:
        return None if isinstance(value, numbers.Integral) and not isinstance(value, bool) else "an integer"
    if kind is float:
        return None if isinstance(value, numbers.Real) and not isinstance(value, bool) else "a number"
    if kind is str:
        return None if isinstance(value, str) else "a string"
    if kind is dict or origin is dict:
        return None if isinstance(value, dict) else "an object (a dict)"
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return f"a tuple of {_element_names(args)}"
        elements = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(elements) != len(value) or any(type_mismatch(v, a) is not None for v, a in zip(value, elements)):
            return f"a tuple of {_element_names(args)}"
    return None


def _element_names(args: tuple) -> str:
    if len(args) == 2 and args[1] is Ellipsis:
        return f"{getattr(args[0], '__name__', args[0])}s"
    return f"{len(args)} {'/'.join(sorted({getattr(a, '__name__', str(a)) for a in args}))}s"


def merge_options(cls: type[T], base: T | None, overrides: dict[str, Any], *, caller: str) -> T:
    """``base`` (default: ``cls()``) with the options given as keywords replaced.

    Returns:
        A new ``cls`` value (validated by its constructor).

    Raises:
        ArgumentError: a keyword that is no option of ``cls`` (names the closest one), or
            ``base`` not a ``cls``.
    """
    if base is not None and not isinstance(base, cls):
        raise ArgumentError(f"{caller}: options must be a {cls.__name__}, got {type(base).__name__}")
    (overrides,) = split_options((cls,), overrides, caller=caller)
    if base is None:
        return cls(**overrides)
    return dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[type-var]  # cls is a dataclass


def split_options(classes: tuple[type, ...], overrides: dict[str, Any], *, caller: str) -> list[dict[str, Any]]:
    """Keywords split by the option class that has each name (first class first).

    Raises:
        ArgumentError: a keyword no class has (names the closest option).
    """
    parts: list[dict[str, Any]] = [{} for _ in classes]
    names = [[f.name for f in dataclasses.fields(c)] for c in classes]
    for key, value in overrides.items():
        owner = next((i for i, n in enumerate(names) if key in n), None)
        if owner is None:
            known = [n for group in names for n in group]
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the options are {', '.join(known)}"
            raise ArgumentError(f"{caller} got an unexpected option {key!r}{hint}")
        parts[owner][key] = value
    return parts


def keyword_signature(*classes: type) -> Callable[[_F], _F]:
    """Decorate a function whose ``**kwargs`` take the options of ``classes``: its
    ``__signature__`` lists them as keyword-only parameters with their types and defaults,
    so ``help()``, IDE call tips that read signatures and ``inspect.signature`` show them.
    Returns the decorator (the function itself is unchanged)."""

    def decorate(func: _F) -> _F:
        signature = inspect.signature(func)
        params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in params}
        for cls in classes:
            hints = typing.get_type_hints(cls)
            for f in dataclasses.fields(cls):
                if f.name in taken:
                    continue
                default = _default_of(f)
                default = inspect.Parameter.empty if default is MISSING else default
                params.append(
                    inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[f.name])
                )
                taken.add(f.name)
        func.__signature__ = signature.replace(parameters=params)
        return func

    return decorate


def describe_options(cls: type[T]) -> type[T]:
    """Class decorator (over ``@dataclass``): append an "Attributes" section made from the
    fields' help to the docstring (so the help is written once, on the field), and make the
    constructor name the closest option for a misspelt keyword (``ArgumentError``, where the
    dataclass's would say only "unexpected keyword argument"). Returns the class."""
    init, names = cls.__init__, {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # a dataclass

    @functools.wraps(init)
    def checked_init(self, *args: Any, **kwargs: Any) -> None:
        unknown = {k: v for k, v in kwargs.items() if k not in names}
        if unknown:
            split_options((cls,), unknown, caller=cls.__name__)  # raises, naming the closest option
        init(self, *args, **kwargs)

    cls.__init__ = checked_init
    lines = ["", "    Attributes:"]
    for f in option_fields(cls):
        default = "required" if f.default is MISSING else repr(f.default)
        lines += textwrap.wrap(
            f"{f.name} (default {default}): {f.spec.help}", width=96, initial_indent=" " * 8, subsequent_indent=" " * 12
        )
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n" + "\n".join(lines) + "\n"
    return cls


__all__ = [
    "OptionField",
    "OptionSpec",
    "describe_options",
    "keyword_signature",
    "merge_options",
    "option",
    "option_fields",
    "split_options",
]
