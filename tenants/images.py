"""Whether an image reference is on a team's allow-list: matched by registry host and whole path
segments, never as a bare string prefix (`registry.corp.example` must not admit
`registry.corp.example.evil.io/x`)."""

from __future__ import annotations

from collections.abc import Iterable


def image_allowed(image: str, entries: Iterable[str]) -> bool:
    """Whether any entry admits the image. An entry is a registry host
    (`registry.corp.example`), or a host and path (`nvcr.io/nvidia`); it admits the images
    under it. Written without a trailing slash, a host and path also names a repository and
    admits it, its tags and its digests (`nvcr.io/nvidia/pytorch` admits `...pytorch:24.01`)."""
    return any(_admits(entry.strip(), image) for entry in entries)


def _admits(entry: str, image: str) -> bool:
    path = entry.rstrip("/")
    if not path or not image.startswith(path):
        return False
    rest = image[len(path) :]
    if rest.startswith("/"):
        return True
    # After a bare host, ":" would start a port: another registry.
    return "/" in path and path == entry and rest[:1] in ("", ":", "@")
