"""Command-line flags made from option fields (``lerobot_shards.core.option_fields``): a pack option's flag,
help, default, choices, range and parser are the field's, so they are written once
(``lerobot_shards/packer/options.py``) and every command that takes one gets the same flag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from lerobot_shards.core.option_fields import OptionField, option_fields
from lerobot_shards.packer.errors import OptionsError
from lerobot_shards.packer.options import PackOptions, PackRunOptions


def click_option(f: OptionField, **changes: Any) -> Callable:
    """The click option of an option field (``changes`` override click keywords, e.g. a
    command's own help). A text parser's ``OptionsError`` becomes click's usage error naming
    the flag. Returns the decorator."""
    spec, kind, flag = f.spec, f.base_type, f.flag
    if flag is None:
        raise ValueError(f"option {f.name} has no command-line flag")
    kwargs: dict[str, Any] = {"help": spec.help}
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    if kind is bool:
        return click.option(flag, f.name, is_flag=True, **{**kwargs, **changes})
    if spec.parse is not None:
        parse_text = spec.parse

        def parse(ctx, param, value, f=f):
            if value is None or value == () or value == "":  # an empty value is "not given" (scripts pass "$VAR")
                return f.default
            try:
                return parse_text(value)
            except OptionsError as err:
                message = str(err)
                raise click.BadParameter(message, param_hint=None if message.startswith(flag) else flag) from None

        return click.option(flag, f.name, multiple=spec.multiple, callback=parse, **{**kwargs, **changes})
    if f.choices is not None:
        kind = click.Choice(list(f.choices))
    elif kind in (int, float) and (spec.minimum is not None or spec.maximum is not None):
        bounds: dict[str, Any] = {"min": spec.minimum, "max": spec.maximum, "min_open": spec.exclusive_minimum}
        kind = click.IntRange(**bounds) if kind is int else click.FloatRange(**bounds)
    kwargs.update(type=kind, default=f.default, show_default=f.default is not None)
    return click.option(flag, f.name, **{**kwargs, **changes})


PACK_FIELDS = {f.name: f for cls in (PackOptions, PackRunOptions) for f in option_fields(cls) if f.flag is not None}
"""Every pack option that has a flag, by name (``pack`` takes them all; ``mixture task`` after ``--``)."""


def with_pack_flags(*names: str) -> Callable:
    """Decorate a click command with the flags of these pack options (all when none named),
    in field order. Returns the decorator."""
    chosen = [f for name, f in PACK_FIELDS.items() if not names or name in names]

    def decorate(command):
        for f in reversed(chosen):
            command = click_option(f)(command)
        return command

    return decorate


def check_together(params: dict) -> None:
    """Refuse pack options that do not go together (``pack`` and ``check`` alike).

    Raises:
        click.UsageError: ``--crf``/``--preset`` without a re-encode.
    """
    if params.get("video", "copy") == "copy" and (params.get("crf") is not None or params.get("preset") is not None):
        raise click.UsageError("--crf and --preset apply to re-encodes: add --video hevc or --video h264")


storage_option = click_option(
    PACK_FIELDS["storage_options"],
    help=('fsspec options for the pack\'s bucket as JSON, e.g. \'{"endpoint_url": "http://..."}\'.'),
)
"""``--storage-options`` for commands over a pack (parsed: a dict or None)."""


def count_option(*decls: str, default: int, minimum: int, help: str) -> Any:
    """A whole-number flag of a command's own (not a pack option: those come from their
    fields), at least ``minimum``, its default shown in ``--help``."""
    return click.option(*decls, type=click.IntRange(min=minimum), default=default, show_default=True, help=help)


__all__ = ["count_option", "PACK_FIELDS", "check_together", "click_option", "storage_option", "with_pack_flags"]
