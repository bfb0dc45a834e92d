"""gpuctl's Simplified Chinese catalogue: complete, compiled, and chosen from the environment."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polib

from cli.i18n import languages

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "cli" / "locale" / "zh_Hans" / "LC_MESSAGES"
PO = MESSAGES / "gpuctl.po"
MO = MESSAGES / "gpuctl.mo"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w*\}")
GETTEXT_FUNCTIONS = {"_", "gettext", "ngettext"}


def test_every_message_is_translated_and_none_is_fuzzy() -> None:
    po = polib.pofile(str(PO))
    assert not po.metadata_is_fuzzy
    lacking = [e.msgid for e in po if not e.obsolete and not e.translated()]
    assert lacking == []
    assert len(po) > 0


def test_translations_keep_every_placeholder() -> None:
    changed = [
        e.msgid
        for e in polib.pofile(str(PO))
        if sorted(PLACEHOLDER.findall(e.msgid)) != sorted(PLACEHOLDER.findall(e.msgstr))
    ]
    assert changed == []


def _catalog(mo_path: Path) -> dict[tuple[str, str, str], object]:
    return {
        (e.msgctxt or "", e.msgid, e.msgid_plural or ""): (
            e.msgstr,
            sorted(e.msgstr_plural.items()),
        )
        for e in polib.mofile(str(mo_path))
        if e.msgid
    }


def test_the_committed_mo_matches_its_po(tmp_path: Path) -> None:
    assert MO.exists(), f"{MO} is missing: compile it with msgfmt and commit it"
    fresh = tmp_path / "gpuctl.mo"
    polib.pofile(str(PO)).save_as_mofile(str(fresh))
    assert _catalog(MO) == _catalog(fresh), f"{MO.name} is older than {PO.name}: recompile it"


def _marked() -> Iterator[tuple[str, str]]:
    for file in sorted((ROOT / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in GETTEXT_FUNCTIONS
            ):
                for arg in node.args[: 2 if node.func.id == "ngettext" else 1]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        yield arg.value, f"{file.relative_to(ROOT)}:{node.lineno}"


def test_every_marked_string_is_in_the_catalogue() -> None:
    po = polib.pofile(str(PO))
    known = {e.msgid for e in po if e.translated()} | {e.msgid_plural for e in po}
    found = list(_marked())
    missing = sorted({f"{msgid!r} ({where})" for msgid, where in found if msgid not in known})
    assert len(found) > 50
    assert missing == [], (
        "not in gpuctl.po (extract with xgettext, translate, msgfmt): " + "; ".join(missing)
    )


def test_the_locale_names_operators_set_find_the_chinese_catalogue() -> None:
    for value in ("zh_CN.UTF-8", "zh_CN", "zh", "zh_Hans", "zh-Hans"):
        assert languages({"LANG": value})[0] == "zh_Hans", value
    assert languages({"LANGUAGE": "en_US:zh_CN", "LANG": "zh_CN.UTF-8"})[0] == "en_US"
    assert languages({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}) == []
    assert languages({}) == []


def _help(language: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    env["LANGUAGE"] = language
    result = subprocess.run(
        [sys.executable, "-m", "cli", *args, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_help_is_in_chinese_when_the_language_asks_for_it() -> None:
    chinese = _help("zh_CN", "ls")
    assert "只看我的作业。" in chinese and "Only my jobs." not in chinese
    assert "--mine" in chinese and "queued,running" in chinese
    english = _help("en_US", "ls")
    assert "Only my jobs." in english and not CHINESE.search(english)


# ---- every help text of the command tree, as people read it ---------------------------------

WALK = """
import json, click
from cli.main import gpuctl

def walk(command, path):
    yield path, command.help or ""
    for param in command.params:
        if isinstance(param, click.Option):
            yield f"{path} {param.opts[-1]}", param.help or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, f"{path} {name}")

print(json.dumps(dict(walk(gpuctl, "gpuctl"))))
"""


def _gpuctl(environ: dict[str, str], *args: str) -> str:
    """`python -m cli ARGS` (or, with no ARGS, the walk above) in the language `environ` asks."""
    env = {k: v for k, v in os.environ.items() if k not in ("LANGUAGE", "LC_ALL", "LC_MESSAGES")}
    env.update(environ)
    command = ["-m", "cli", *args] if args else ["-c", WALK]
    done = subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _help_texts(environ: dict[str, str]) -> dict[str, str]:
    texts: dict[str, str] = json.loads(_gpuctl(environ))
    return texts


def _words(help_text: str) -> Iterator[str]:
    """The parts of a help text that are prose: each paragraph, and the heading of each block
    Click prints as written (`\\b`), whose lines are commands or a spec."""
    for paragraph in help_text.split("\n\n"):
        yield paragraph.split("\n")[1] if paragraph.startswith("\b") else paragraph


def test_every_command_and_option_has_help_in_chinese() -> None:
    english = _help_texts({"LANG": "en_US.UTF-8"})
    assert len(english) > 60 and "gpuctl top --count" in english
    assert [where for where, text in english.items() if not text.strip()] == []
    chinese = _help_texts({"LANG": "zh_CN.UTF-8"})
    assert chinese.keys() == english.keys()
    untranslated = [
        f"{where}: {words!r}"
        for where, text in chinese.items()
        for words in _words(text)
        if not CHINESE.search(words)
    ]
    assert untranslated == [], "unmarked or not in gpuctl.po: " + "; ".join(untranslated)


def test_gpuctl_help_is_in_chinese_under_a_chinese_locale() -> None:
    shown = _gpuctl({"LANG": "zh_CN.UTF-8"}, "--help")
    assert shown.startswith("用法: gpuctl [OPTIONS] COMMAND [ARGS]...")
    assert "在集群门户上提交并跟踪 GPU 作业。" in shown
    assert "\n选项:\n" in shown and "\n命令:\n" in shown
    assert "显示此帮助信息并退出。" in shown and "显示版本并退出。" in shown
    assert "列出您可见的作业，最新的在前。" in shown  # each command's line
    assert "    gpuctl ls --mine --state queued,running" in shown  # commands as typed
    assert "Submit and follow" not in shown and "Options:" not in shown
    english = _gpuctl({"LANG": "en_US.UTF-8"}, "--help")
    assert english.startswith("Usage: gpuctl") and "Submit and follow GPU jobs" in english
    assert not CHINESE.search(english)
