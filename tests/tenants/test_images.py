"""The image allow-list matches registry hosts and whole path segments, not string prefixes."""

from __future__ import annotations

import pytest

from tenants.images import image_allowed
from tenants.models import Team

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("entry", "image"),
    [
        ("registry.corp.example", "registry.corp.example/x:1"),
        ("registry.corp.example", f"registry.corp.example/team/x@{DIGEST}"),
        ("registry.corp.example/", "registry.corp.example/x:1"),
        ("registry.corp.example:5000", "registry.corp.example:5000/x:1"),
        ("nvcr.io/nvidia", "nvcr.io/nvidia/pytorch:24.01"),
        ("nvcr.io/nvidia/", "nvcr.io/nvidia/pytorch:24.01"),
        ("nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/pytorch"),
        ("nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/pytorch:24.01"),
        ("nvcr.io/nvidia/pytorch", f"nvcr.io/nvidia/pytorch@{DIGEST}"),
        ("  registry.example/vision/  ", "registry.example/vision/train:1.0"),
    ],
)
def test_it_admits_images_under_an_entry(entry: str, image: str) -> None:
    assert image_allowed(image, [entry])


@pytest.mark.parametrize(
    ("entry", "image"),
    [
        ("registry.corp.example", "registry.corp.example.evil.io/x"),
        ("registry.corp.example", "registry.corp.examplex/y"),
        ("registry.corp.example", "registry.corp.example:5000/x"),
        ("registry.corp.example", "registry.corp.example"),
        ("nvcr.io/nvidia", "nvcr.io/nvidia-evil/x"),
        ("nvcr.io/nvidia/", "nvcr.io/nvidia:latest"),
        ("nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/pytorch-evil:1"),
        ("", "anything/at:all"),
        ("/", "/x"),
    ],
)
def test_it_refuses_images_that_only_share_a_prefix(entry: str, image: str) -> None:
    assert not image_allowed(image, [entry])


def test_a_team_without_an_allow_list_admits_any_image() -> None:
    assert Team(slug="t", image_allowlist="").image_allowed("docker.io/library/python:3.11")


def test_a_team_admits_images_its_list_names_and_no_others() -> None:
    team = Team(slug="t", image_allowlist="registry.corp.example\nnvcr.io/nvidia/\n")
    assert team.image_allowed("nvcr.io/nvidia/pytorch:24.01")
    assert team.image_allowed("registry.corp.example/x:1")
    assert not team.image_allowed("registry.corp.example.evil.io/x")
