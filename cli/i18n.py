"""Message catalogue of gpuctl: the standard library's gettext, domain `gpuctl`.

The language comes from LANGUAGE, LC_ALL, LC_MESSAGES and LANG, as gettext reads them. The
catalogues live in cli/locale/<language>/LC_MESSAGES/gpuctl.mo; Simplified Chinese is kept as
`zh_Hans`, so the locale names operators set for it (zh_CN, zh_SG, zh, zh_Hans) all find it.
"""

from __future__ import annotations

import gettext
import os
from pathlib import Path

DOMAIN = "gpuctl"
LOCALE_DIR = Path(__file__).parent / "locale"
ALIASES = {"zh": "zh_Hans", "zh_CN": "zh_Hans", "zh_SG": "zh_Hans", "zh_Hans_CN": "zh_Hans"}


def languages(environ: dict[str, str] | None = None) -> list[str]:
    """The languages asked for, best first, as gettext picks them, with our aliases applied."""
    environ = dict(os.environ) if environ is None else environ
    for variable in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        if value := environ.get(variable):
            break
    else:
        return []
    chosen: list[str] = []
    for name in value.split(":"):
        bare = name.split(".")[0].split("@")[0].replace("-", "_")
        if bare in ("C", "POSIX"):
            break
        for candidate in (ALIASES.get(bare, bare), bare):
            if candidate and candidate not in chosen:
                chosen.append(candidate)
    return chosen


_catalogue = gettext.translation(
    DOMAIN, localedir=LOCALE_DIR, languages=languages() or None, fallback=True
)
_ = _catalogue.gettext
ngettext = _catalogue.ngettext
