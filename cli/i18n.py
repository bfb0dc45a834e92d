"""Message catalogue of gpuctl: the standard library's gettext, domain `gpuctl`."""

import gettext
from pathlib import Path

_catalogue = gettext.translation(
    "gpuctl", localedir=Path(__file__).parent / "locale", fallback=True
)
_ = _catalogue.gettext
