"""`--help` in the reader's language, Click's own words included.

Every command's and option's help is marked with `_` (cli/i18n.py) where it is declared; the
commands in its examples are typed as they are, so they stay out of the catalogue (`examples`).
Click writes its headings ("Usage:", "Options", "Commands") and the help option's line through
the standard library's default gettext domain, where no catalogue has them; `translate_help`
has every command write them from gpuctl's.
"""

from __future__ import annotations

import click

from cli.i18n import _

HEADINGS = {"Options": _("Options"), "Commands": _("Commands")}
"""Click's section headings, as it names them, in the reader's language."""


def block(heading: str, *lines: str) -> str:
    """A paragraph of a command's help that Click prints as written (its `\\b` mark stays out
    of the catalogue): `heading`, then `lines` indented under it."""
    return "\n\n\b\n" + heading + "\n" + "\n".join(f"  {line}" for line in lines)


def examples(*commands: str) -> str:
    """The end of a command's help: the heading in the reader's language, then `commands` as
    one types them."""
    return block(_("Examples:"), *commands)


class HelpFormatter(click.HelpFormatter):
    """Click's formatter with its headings in the reader's language."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, _("Usage:") + " " if prefix is None else prefix)

    def write_heading(self, heading: str) -> None:
        super().write_heading(HEADINGS.get(heading, heading))


class HelpContext(click.Context):
    formatter_class = HelpFormatter


def translate_help(command: click.Command) -> None:
    """Have `command` and every command under it write Click's own words in the reader's
    language: their headings, and the help option's line."""
    command.context_class = HelpContext
    click.help_option("-h", "--help", help=_("Show this message and exit."))(command)
    if isinstance(command, click.Group):
        for subcommand in command.commands.values():
            translate_help(subcommand)
