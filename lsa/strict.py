"""Strict configuration dataclasses: the machinery behind ``lsa.config``.

A settings class is a dataclass that mixes in ``StrictConfig`` and declares each field with
``setting(default, help=..., <bounds>)``. Loading a plain mapping (YAML, papermill parameters)
with ``from_dict`` then

- rejects unknown keys, naming the allowed ones;
- converts every value to its field's type (``int`` refuses 1.5 and True, ``float`` accepts 1,
  ``Literal`` values must be one of the listed ones, nested settings classes recurse, a partial
  mapping for a nested field overrides its default key by key);
- checks the bounds declared next to each field (``ge``, ``gt``, ``le``, ``unique`` lists,
  ``each_*`` bounds of list entries), then the class's own cross-field rules (``validate``).

Every error is a ``ConfigError`` that names the key, the value and what is allowed. Importing
this module stays cheap: no torch, no numpy.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, get_args, get_origin


class ConfigError(ValueError):
    """Invalid configuration: unknown key, wrong type or value out of range."""


def setting(default: Any = dataclasses.MISSING, *, help: str,
            factory: typing.Callable[[], Any] | None = None,
            ge: float | None = None, gt: float | None = None, le: float | None = None,
            unique: bool = False, each_ge: float | None = None, each_gt: float | None = None,
            each_le: float | None = None) -> Any:
    """A documented field: its default (or ``factory``), what it means (``help``) and its
    bounds, checked on construction: ``ge``/``gt``/``le`` for a number (None is always
    allowed), ``unique`` for a list that must be non-empty without repeats, ``each_ge``/
    ``each_gt``/``each_le`` for every entry of a list."""
    metadata = {"help": help, "ge": ge, "gt": gt, "le": le, "unique": unique,
                "each_ge": each_ge, "each_gt": each_gt, "each_le": each_le}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def bounds_text(ge: float | None = None, gt: float | None = None,
                le: float | None = None) -> str:
    """``must be >= 1``, ``must be in (0, 1]``, ...; empty when there is no bound."""
    low = f"[{_num(ge)}" if ge is not None else f"({_num(gt)}" if gt is not None else None
    if low and le is not None:
        return f"must be in {low}, {_num(le)}]"
    if ge is not None:
        return f"must be >= {_num(ge)}"
    if gt is not None:
        return f"must be > {_num(gt)}"
    if le is not None:
        return f"must be <= {_num(le)}"
    return ""


def _within(value: float, ge: float | None, gt: float | None, le: float | None) -> bool:
    return ((ge is None or value >= ge) and (gt is None or value > gt)
            and (le is None or value <= le))


# ---------------------------------------------------------------------------------------------
# strict conversion of plain YAML values into typed dataclass fields


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple):
        args = get_args(tp)
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Return ``value`` as type ``tp`` or raise ConfigError naming ``key``."""
    origin = get_origin(tp)
    bad = ConfigError(f"{key} = {value!r}: must be {_type_name(tp)}")
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in get_args(tp):
            try:
                return coerce(key, value, arg)
            except ConfigError:
                continue
        raise bad
    if tp is type(None):
        if value is None:
            return None
        raise bad
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise bad
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise bad
        (arg,) = get_args(tp)[:1] or (Any,)
        items = [coerce(f"{key}[{i}]", v, arg) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise bad
        args = get_args(tp)
        if not args:
            return dict(value)
        return {coerce(f"{key} (a key)", k, args[0]): coerce(f"{key}.{k}", v, args[1])
                for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise bad
        return tp.from_dict(value, prefix=key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    raise TypeError(f"unsupported config type {tp!r} for {key}")


def merge(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``, mappings merged key by key (YAML layers)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def plain(value: Any) -> Any:
    """Settings objects as plain mappings and lists (YAML, JSON, digests)."""
    if isinstance(value, StrictConfig):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class StrictConfig:
    """Mixin for dataclasses: strict ``from_dict`` and ``to_dict``; bounds from ``setting``,
    cross-field rules in ``validate``."""

    _section: typing.ClassVar[str] = ""

    @classmethod
    def _fields(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)  # type: ignore[arg-type]  # cls is a dataclass

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in cls._fields()]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None = None, prefix: str | None = None):
        data = dict(data or {})
        prefix = prefix if prefix is not None else cls._section
        where = f"{prefix}." if prefix else ""
        hints = typing.get_type_hints(cls)
        names = cls.field_names()
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown key {where}{unknown[0]} (value {data[unknown[0]]!r}); "
                f"allowed keys: {', '.join(names)}"
            )
        kwargs = {}
        for f in cls._fields():
            if f.name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ConfigError(f"missing key {where}{f.name}")
                continue
            value = data[f.name]
            if isinstance(value, dict) and dataclasses.is_dataclass(hints[f.name]) and \
                    f.default_factory is not dataclasses.MISSING:
                # a partial mapping overrides the field's own default, key by key
                value = merge(f.default_factory().to_dict(), value)
            kwargs[f.name] = coerce(f"{where}{f.name}", value, hints[f.name])
        try:
            return cls(**kwargs)
        except ConfigError as err:
            if prefix and prefix != cls._section:
                raise ConfigError(f"{prefix}: {err}") from None
            raise

    def __post_init__(self) -> None:
        self._check_bounds()
        self.validate()

    def _check_bounds(self) -> None:
        for f in self._fields():
            meta, value = f.metadata, getattr(self, f.name)
            if not meta or value is None:
                continue
            if meta["unique"]:
                if len(value) == 0:
                    self._fail(f.name, "must not be empty")
                if len(set(value)) != len(value):
                    self._fail(f.name, "must not repeat an entry")
            if isinstance(value, (int, float)) and not _within(value, meta["ge"], meta["gt"],
                                                               meta["le"]):
                self._fail(f.name, bounds_text(meta["ge"], meta["gt"], meta["le"]))
            each = (meta["each_ge"], meta["each_gt"], meta["each_le"])
            if any(b is not None for b in each) and not all(_within(v, *each) for v in value):
                self._fail(f.name, "every entry " + bounds_text(*each))

    def validate(self) -> None:
        """Rules across fields (overridden where a section has them)."""

    def _fail(self, name: str, message: str) -> typing.NoReturn:
        key = f"{self._section}.{name}" if self._section else name
        raise ConfigError(f"{key} = {getattr(self, name)!r}: {message}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in self._fields()}

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """One row per field: name, type, default (or required), bounds, help (``python -m lsa
        config --fields``)."""
        hints = typing.get_type_hints(cls)
        rows = []
        for f in cls._fields():
            meta = f.metadata or {}
            required = (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
            if f.default_factory is not dataclasses.MISSING:
                default = plain(f.default_factory())
            else:
                default = None if required else f.default
            rule = bounds_text(meta.get("ge"), meta.get("gt"), meta.get("le"))
            if meta.get("unique"):
                rule = "; ".join(filter(None, [rule, "non-empty, no repeats"]))
            each = bounds_text(meta.get("each_ge"), meta.get("each_gt"), meta.get("each_le"))
            if each:
                rule = "; ".join(filter(None, [rule, f"every entry {each}"]))
            rows.append({"name": f.name, "type": _type_name(hints[f.name]), "default": default,
                         "required": required, "bounds": rule, "help": meta.get("help", "")})
        return rows
