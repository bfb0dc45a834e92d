"""`gpuctl login`, `logout` and `whoami`."""

from __future__ import annotations

import socket
import sys
from typing import Any

import click

from cli import config
from cli.api import Api, session
from cli.errors import USAGE, CliError
from cli.helptext import examples
from cli.i18n import _
from cli.output import emit, output_option, pairs

MAX_TOKEN_DAYS = 365


@click.command(
    help=_(
        "Sign in: trade your username and password for a personal API token, kept in your "
        "config file (mode 0600). URL defaults to the portal you last signed in to."
    )
    + examples(
        "gpuctl login https://portal.example",
        "gpuctl login https://portal.example -u alice --password-stdin < password.txt",
    ),
)
@click.argument("url", required=False)
@click.option("-u", "--username", help=_("Asked for when not given."))
@click.option(
    "--password-stdin", is_flag=True, help=_("Read the password from stdin (for scripts).")
)
@click.option(
    "--expires-in-days",
    type=click.IntRange(1, MAX_TOKEN_DAYS),
    help=_("Give the token a lifetime (default: until revoked)."),
)
def login(
    url: str | None, username: str | None, password_stdin: bool, expires_in_days: int | None
) -> None:
    url = url or config.current().url
    if not url:
        raise CliError(_("Name the portal: gpuctl login URL"), USAGE)
    if not url.startswith(("http://", "https://")):
        raise CliError(_("URL: must start with http:// or https://"), USAGE)
    username = username or click.prompt(_("Username"))
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt(_("Password"), hide_input=True)
    body: dict[str, Any] = {
        "username": username,
        "password": password,
        "name": f"gpuctl@{socket.gethostname()}"[:100],
    }
    if expires_in_days is not None:
        body["expires_in_days"] = expires_in_days
    answer = Api(url, None).post("auth/token/", body)
    path = config.store({"url": url.rstrip("/"), "username": username, "token": answer["token"]})
    click.echo(
        _("Signed in to %(url)s as %(user)s; token %(prefix)s… kept in %(path)s.")
        % {"url": url, "user": username, "prefix": answer["prefix"], "path": path}
    )


@click.command(
    help=_(
        "Revoke the token on the portal and forget it from your config file (the URL stays "
        "for the next login). Where the portal cannot be reached or cannot revoke it, the "
        "token is still forgotten here: revoke it on the portal's profile page."
    )
    + examples("gpuctl logout"),
)
def logout() -> None:
    kept = config.stored()
    token = kept.pop("token", None)
    if token is None:
        click.echo(_("Not signed in."))
        return
    revoked = _revoke(kept.get("url"), token)
    kept.pop("username", None)
    config.store(kept)
    click.echo(_("Signed out: the token is gone from %(path)s.") % {"path": config.config_path()})
    if not revoked:
        click.echo(
            _("The portal did not revoke the token: revoke it on your profile page."), err=True
        )


def _revoke(url: str | None, token: str) -> bool:
    """Ask the portal to revoke `token`; False where it could not (older portals answer 404 or
    405, a token already revoked 401)."""
    if not url:
        return False
    try:
        Api(url, token).delete("auth/token/")
    except CliError:
        return False
    return True


@click.command(
    help=_("Who the token belongs to, and their teams.")
    + examples("gpuctl whoami", "gpuctl whoami -o json"),
)
@output_option
def whoami(output: str) -> None:
    api = session()
    me = {"url": api.url, **api.get("me/")}
    emit(me, output, _me_table)


def _me_table(me: dict[str, Any]) -> str:
    teams = ", ".join(f"{t['slug']} ({t['role']})" for t in me["teams"]) or "-"
    return pairs(
        [
            (_("portal"), me["url"]),
            (_("user"), me["username"]),
            (_("admin"), me["is_admin"]),
            (_("teams"), teams),
        ]
    )


COMMANDS = (login, logout, whoami)
