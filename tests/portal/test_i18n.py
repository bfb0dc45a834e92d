"""Simplified Chinese: every template string marked, every message translated, the pages switch.

The catalogs under locale/ are committed, compiled too, so no test here needs gettext's tools:
`make messages` regenerates them for maintainers. The checks below say which strings are unmarked,
untranslated, fuzzy or missing from the catalog, so a new string's author knows what to do.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polib
import pytest
from django.apps import apps
from django.conf import settings
from django.template import engines
from django.template.base import Lexer, TokenType
from django.templatetags.i18n import BlockTranslateNode, TranslateNode
from django.test import Client
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog

from tests.conftest import World

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
MESSAGES = LOCALE / "zh_Hans" / "LC_MESSAGES"

# Text that reads the same in every language: brand and product names, units, device names,
# an example of a Kubernetes node label. Anything else a person reads must be marked.
NOT_TRANSLATED = {"GPU", "NVLink", "°C", "/gpu", "NVIDIA-H100-80GB-HBM3", "Swagger"}
# Where a template's text is code, not prose.
CODE_ELEMENTS = {"script", "style"}
# Attributes a person reads (or hears from a screen reader).
READ_ATTRIBUTES = {"placeholder", "title", "aria-label", "alt", "label"}
# What a template tag or variable becomes while the HTML around it is read: no letters.
SLOT = "\x00"
LETTER = re.compile(r"[^\W\d_]")
LITERAL_DEFAULT = re.compile(r"\|(?:default|default_if_none):([\"'])(.*?)\1")


def _template_dirs() -> list[Path]:
    """templates/ and the template folders of this project's own apps (not the libraries')."""
    dirs = [Path(d) for d in engines["django"].engine.dirs]  # type: ignore[attr-defined]
    for config in apps.get_app_configs():
        folder = Path(config.path) / "templates"
        if folder.is_dir() and ROOT in folder.parents and ".venv" not in folder.parts:
            dirs.append(folder)
    return dirs


def _templates() -> Iterator[tuple[str, Path]]:
    """Every template of the project, as (name for the loader, file)."""
    for folder in _template_dirs():
        for file in sorted(folder.rglob("*.html")):
            yield file.relative_to(folder).as_posix(), file


class _VisibleText(HTMLParser):
    """Collects the text and the read attributes of HTML whose template parts became SLOT."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in CODE_ELEMENTS:
            self.in_code += 1
        self.texts += [value for name, value in attrs if name in READ_ATTRIBUTES and value]

    def handle_endtag(self, tag: str) -> None:
        if tag in CODE_ELEMENTS:
            self.in_code = max(0, self.in_code - 1)

    def handle_data(self, data: str) -> None:
        if not self.in_code:
            self.texts.append(data)


def _unmarked(source: str) -> list[str]:
    """The pieces of text with letters in a template that no translation tag covers."""
    html: list[str] = []
    found: list[str] = []
    skipping: str | None = None  # the end tag of a blocktranslate or comment being skipped
    for token in Lexer(source).tokenize():
        words = token.split_contents() if token.token_type is TokenType.BLOCK else []
        if skipping:
            skipping = None if words[:1] == [skipping] else skipping
        elif words[:1] and words[0] in {"blocktranslate", "blocktrans", "comment"}:
            skipping = {"comment": "endcomment"}.get(words[0], "end" + words[0])
        elif token.token_type is TokenType.TEXT:
            html.append(token.contents)
            continue
        elif token.token_type is TokenType.VAR:
            found += [text for _, text in LITERAL_DEFAULT.findall(token.contents)]
        html.append(SLOT)
    parser = _VisibleText()
    parser.feed("".join(html))
    parser.close()
    pieces = (piece.strip() for text in parser.texts for piece in text.split(SLOT))
    return [p for p in [*found, *pieces] if LETTER.search(p) and p not in NOT_TRANSLATED]


def test_every_template_string_a_person_reads_is_marked_for_translation() -> None:
    unmarked = {
        name: texts for name, file in _templates() if (texts := _unmarked(file.read_text()))
    }
    assert unmarked == {}, (
        'Mark these with {% translate %} / {% blocktranslate %} (or _("…") in a filter\'s '
        f"argument), or add a brand name or unit to NOT_TRANSLATED: {unmarked}"
    )


def test_the_unmarked_text_check_finds_text_attributes_and_literal_defaults() -> None:
    source = (
        '{% load i18n %}<h1>{% translate "Jobs" %}</h1><p title="Hover text">Plain words</p>'
        "{% blocktranslate %}Marked {{ x }}{% endblocktranslate %}<script>let a = 1;</script>"
        '{{ v|default:"never" }}{{ w|default:_("never") }}<td>{{ n }}°C</td>'
    )
    assert _unmarked(source) == ["never", "Hover text", "Plain words"]


# ---- the catalogs ----------------------------------------------------------------------------


def _catalogs() -> list[Path]:
    return sorted(LOCALE.glob("*/LC_MESSAGES/*.po"))


def _where(entry: polib.POEntry) -> str:
    return ", ".join(f"{file}:{line}" for file, line in entry.occurrences[:3])


def test_the_catalogs_exist_for_both_domains() -> None:
    assert {p.relative_to(LOCALE).as_posix() for p in _catalogs()} >= {
        "zh_Hans/LC_MESSAGES/django.po",
        "zh_Hans/LC_MESSAGES/djangojs.po",
    }


@pytest.mark.parametrize("po_path", _catalogs(), ids=lambda p: p.relative_to(LOCALE).as_posix())
def test_every_message_is_translated_and_none_is_fuzzy(po_path: Path) -> None:
    po = polib.pofile(str(po_path))
    lacking = [
        f"{entry.msgid!r} ({_where(entry)})"
        for entry in po
        if not entry.obsolete and not entry.translated()
    ]
    assert not po.metadata_is_fuzzy, f"{po_path}: its header is marked fuzzy"
    assert lacking == [], f"{po_path}: untranslated or fuzzy: " + "; ".join(lacking)


def _catalog(mo_path: Path) -> dict[tuple[str, str, str], object]:
    """What a compiled catalog answers, message by message (the header aside)."""
    return {
        (e.msgctxt or "", e.msgid, e.msgid_plural or ""): (
            e.msgstr,
            sorted(e.msgstr_plural.items()),
        )
        for e in polib.mofile(str(mo_path))
        if e.msgid
    }


@pytest.mark.parametrize("po_path", _catalogs(), ids=lambda p: p.relative_to(LOCALE).as_posix())
def test_the_committed_mo_matches_its_po(po_path: Path, tmp_path: Path) -> None:
    committed = po_path.with_suffix(".mo")
    assert committed.exists(), f"{committed} is missing: run `make messages` and commit it"
    fresh = tmp_path / committed.name
    polib.pofile(str(po_path)).save_as_mofile(str(fresh))
    assert _catalog(committed) == _catalog(fresh), (
        f"{committed} is older than {po_path.name}: run `make messages` and commit both"
    )


# ---- every marked string is in the catalog ---------------------------------------------------

GETTEXT_FUNCTIONS = {"_", "gettext", "gettext_lazy", "gettext_noop", "ngettext", "ngettext_lazy"}
# Packages that use Django's catalog; gpuctl (cli/) has its own, agent and kubesim have no text.
NOT_DJANGO = {".venv", "var", "tests", "bench", "docs", "deploy", "cli", "agent", "kubesim"}
TEMPLATE_UNDERSCORE = re.compile(r"_\(\"([^\"]*)\"\)|_\('([^']*)'\)")
JS_GETTEXT = re.compile(r"\b(?:gettext|ngettext)\(\s*\"((?:[^\"\\]|\\.)*)\"")


def _python_msgids() -> Iterator[tuple[str, str]]:
    packages = [d for d in ROOT.iterdir() if d.is_dir() and d.name not in NOT_DJANGO]
    for file in sorted(f for package in packages for f in package.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in GETTEXT_FUNCTIONS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.args[0].value, f"{file.relative_to(ROOT)}:{node.lineno}"


def _template_msgids() -> Iterator[tuple[str, str]]:
    django_engine = engines["django"]
    for name, file in _templates():
        nodelist = django_engine.get_template(name).template.nodelist  # type: ignore[attr-defined]
        for node in nodelist.get_nodes_by_type(TranslateNode):
            literal = node.filter_expression.var.literal
            if literal is not None:
                yield str(literal), name
        for node in nodelist.get_nodes_by_type(BlockTranslateNode):
            yield node.render_token_list(node.singular)[0], name
        for match in TEMPLATE_UNDERSCORE.finditer(file.read_text()):
            yield match.group(1) or match.group(2), name


def _javascript_msgids() -> Iterator[tuple[str, str]]:
    for file in sorted((ROOT / "static" / "js").rglob("*.js")):
        for match in JS_GETTEXT.finditer(file.read_text()):
            yield json.loads(f'"{match.group(1)}"'), str(file.relative_to(ROOT))


def _missing(found: Iterator[tuple[str, str]], domain: str) -> list[str]:
    po = polib.pofile(str(MESSAGES / f"{domain}.po"))
    translated = {e.msgid for e in po if e.translated()}
    return sorted({f"{msgid!r} ({where})" for msgid, where in found if msgid not in translated})


def test_every_marked_string_has_a_translation_in_the_catalog() -> None:
    missing = _missing(_python_msgids(), "django") + _missing(_template_msgids(), "django")
    missing_js = _missing(_javascript_msgids(), "djangojs")
    hint = "run `make messages`, translate them in locale/zh_Hans/LC_MESSAGES/, commit .po and .mo"
    assert missing == [], f"not in django.po ({hint}): " + "; ".join(missing)
    assert missing_js == [], f"not in djangojs.po ({hint}): " + "; ".join(missing_js)


# ---- the pages in Chinese --------------------------------------------------------------------


def _as(user: object, language: str | None = None) -> Client:
    client = Client(headers={"Accept-Language": language} if language else {})
    client.force_login(user)  # type: ignore[arg-type]
    return client


def test_pages_are_english_by_default(world: World) -> None:
    page = _as(world.bob).get("/").content.decode()
    assert '<html lang="en">' in page and "Dashboard" in page and "概览" not in page


def test_the_browser_language_chooses_chinese(world: World) -> None:
    bob = _as(world.bob, "zh-Hans,zh;q=0.9,en;q=0.5")
    dashboard = bob.get("/").content.decode()
    assert '<html lang="zh-hans">' in dashboard
    assert all(word in dashboard for word in ("概览", "作业", "提交作业", "配额", "退出登录"))
    assert "Dashboard" not in dashboard
    form = bob.get("/jobs/new/").content.decode()
    assert "<h1>提交作业</h1>" in form and ">提交</button>" in form


def test_a_team_lead_sees_the_team_page_in_chinese(world: World) -> None:
    page = _as(world.alice, "zh-CN").get("/teams/vision/").content.decode()
    assert all(word in page for word in ("队列", "可抢占", "成员", "保障配额", "添加队列"))


def test_the_language_switch_is_remembered_over_the_browser_language(world: World) -> None:
    bob = _as(world.bob, "en-US,en;q=0.9")
    response = bob.post("/i18n/setlang/", {"language": "zh-hans", "next": "/jobs/"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    jobs = bob.get("/jobs/").content.decode()
    assert "<h1>作业</h1>" in jobs and "全部状态" in jobs
    bob.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert "<h1>Jobs</h1>" in bob.get("/jobs/").content.decode()


def test_the_header_offers_each_language_in_its_own_words(world: World) -> None:
    page = _as(world.bob, "zh-Hans").get("/").content.decode()
    assert 'action="/language/"' in page
    assert 'value="en" lang="en">English</button>' in page
    assert 'value="zh-hans" lang="zh-hans" aria-current="true" disabled>简体中文</button>' in page


def test_the_login_page_follows_the_browser_language(db: None) -> None:
    page = Client(headers={"Accept-Language": "zh-Hans"}).get("/accounts/login/")
    assert "<h1>登录</h1>" in page.content.decode()


def test_dates_follow_the_language(world: World) -> None:
    bob = _as(world.bob, "zh-Hans")
    bob.post("/profile/", {"name": "laptop"})
    page = bob.get("/profile/").content.decode()
    assert re.search(r"<td>\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2}</td>", page)


# The JavaScript catalog: the header loads it where the URL conf names `javascript-catalog`.
urlpatterns = [
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("", include("portal.urls")),
]


def test_the_scripts_get_their_strings_in_the_page_language(world: World, settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    bob = _as(world.bob, "zh-Hans")
    assert '<script src="/jsi18n/"></script>' in bob.get("/").content.decode()
    catalog = bob.get("/jsi18n/").content.decode()
    assert "\\u8fde\\u63a5\\u4e2d" in catalog  # 连接中, the live badge's "connecting"
