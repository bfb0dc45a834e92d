"""The body each webhook kind expects, as its service documents it, and how it is signed.

- generic: the message as JSON.
- Slack incoming webhook: `{"text": ...}` (mrkdwn), with a section block.
- Feishu / Lark custom bot: `{"msg_type": "text", "content": {"text": ...}}`; with a secret,
  `timestamp` (seconds) and `sign` = base64(HMAC-SHA256(key="{timestamp}\\n{secret}", msg="")).
- DingTalk custom robot: `{"msgtype": "markdown", "markdown": {"title", "text"}}`; with a secret,
  `timestamp` (milliseconds) and `sign` = base64(HMAC-SHA256(key=secret,
  msg="{timestamp}\\n{secret}")) go in the URL's query.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from notifications.models import ChannelKind


@dataclass(frozen=True)
class Message:
    level: str
    title: str
    body: str
    link: str


@dataclass(frozen=True)
class Request:
    url: str
    json: dict[str, Any]


def _text(message: Message) -> str:
    lines = [f"[{message.level.upper()}] {message.title}"]
    if message.body:
        lines.append(message.body)
    if message.link:
        lines.append(message.link)
    return "\n".join(lines)


def _sign(key: bytes, msg: bytes) -> str:
    return base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()


def generic(message: Message) -> dict[str, Any]:
    return {
        "level": message.level,
        "title": message.title,
        "body": message.body,
        "link": message.link,
    }


def slack(message: Message) -> dict[str, Any]:
    title = f"*[{message.level.upper()}] {message.title}*"
    if message.link:
        title = f"*[{message.level.upper()}] <{message.link}|{message.title}>*"
    text = "\n".join(part for part in (title, message.body) if part)
    return {
        "text": _text(message),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


def feishu(message: Message) -> dict[str, Any]:
    return {"msg_type": "text", "content": {"text": _text(message)}}


def dingtalk(message: Message) -> dict[str, Any]:
    text = f"### [{message.level.upper()}] {message.title}\n\n{message.body}"
    if message.link:
        text += f"\n\n[{message.link}]({message.link})"
    return {"msgtype": "markdown", "markdown": {"title": message.title, "text": text.strip()}}


def request(kind: str, url: str, secret: str, message: Message, now: float) -> Request:
    """The HTTP request (URL and JSON body) that sends `message` to a webhook of `kind`."""
    if kind == ChannelKind.SLACK:
        return Request(url, slack(message))
    if kind == ChannelKind.FEISHU:
        body = feishu(message)
        if secret:
            timestamp = str(int(now))
            body |= {"timestamp": timestamp, "sign": _sign(f"{timestamp}\n{secret}".encode(), b"")}
        return Request(url, body)
    if kind == ChannelKind.DINGTALK:
        if secret:
            timestamp = str(int(now * 1000))
            sign = quote_plus(_sign(secret.encode(), f"{timestamp}\n{secret}".encode()))
            url += f"{'&' if '?' in url else '?'}timestamp={timestamp}&sign={sign}"
        return Request(url, dingtalk(message))
    return Request(url, generic(message))


def refused(kind: str, answer: Any) -> str:
    """What a service that answers 200 says when it refused the message ("" when it took it):
    Feishu answers {"code": n}, DingTalk {"errcode": n}, 0 meaning success."""
    if not isinstance(answer, dict):
        return ""
    if kind == ChannelKind.FEISHU and answer.get("code", 0) != 0:
        return f"code {answer.get('code')}: {answer.get('msg', '')}"
    if kind == ChannelKind.DINGTALK and answer.get("errcode", 0) != 0:
        return f"errcode {answer.get('errcode')}: {answer.get('errmsg', '')}"
    return ""
