"""The submit form: fields for the common case, or a pasted YAML spec (the API's schema)."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.spec import DEFAULT_MEMORY, SpecError, load_yaml


class JobForm(forms.Form):
    team = forms.ChoiceField(label=_("Team"))
    name = forms.CharField(label=_("Name"), max_length=40, required=False)
    queue = forms.CharField(
        label=_("Queue"), max_length=32, required=False, help_text=_("Default: normal")
    )
    image = forms.CharField(label=_("Image"), max_length=255, required=False)
    command = forms.CharField(
        label=_("Command"), required=False, help_text=_("As in a shell: python train.py")
    )
    args = forms.CharField(label=_("Arguments"), required=False)
    env = forms.CharField(
        label=_("Environment"),
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text=_("One NAME=value per line"),
    )
    gpu_type = forms.ChoiceField(label=_("GPU type"))
    gpus_per_node = forms.IntegerField(label=_("GPUs per node"), initial=1, required=False)
    nodes = forms.IntegerField(label=_("Nodes"), initial=1, required=False)
    cpu = forms.DecimalField(label=_("CPU cores"), initial=4, required=False)
    memory = forms.CharField(label=_("Memory"), initial=DEFAULT_MEMORY, required=False)
    max_runtime = forms.IntegerField(
        label=_("Runtime limit"), required=False, help_text=_("Seconds; default: the queue's")
    )
    spec_yaml = forms.CharField(
        label=_("…or paste a spec (YAML)"),
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        required=False,
    )

    def __init__(self, *args: Any, teams: list[str], gpu_types: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        team_field, gpu_field = self.fields["team"], self.fields["gpu_type"]
        assert isinstance(team_field, forms.ChoiceField)
        assert isinstance(gpu_field, forms.ChoiceField)
        team_field.choices = [(t, t) for t in teams]
        gpu_field.choices = [(g, g) for g in gpu_types]
        gpu_field.required = False

    def spec_data(self) -> dict[str, Any]:
        """The submitted spec as the API would receive it."""
        data = self.cleaned_data
        if data.get("spec_yaml", "").strip():
            pasted = load_yaml(data["spec_yaml"])
            pasted.setdefault("team", data["team"])
            return pasted
        spec: dict[str, Any] = {
            "team": data["team"],
            "name": data.get("name") or "",
            "image": data.get("image") or "",
            "command": _words("command", data.get("command") or ""),
            "args": _words("args", data.get("args") or ""),
            "env": _env_lines(data.get("env") or ""),
            "gpu_type": data.get("gpu_type") or "",
            "gpus_per_node": data.get("gpus_per_node") or 1,
            "nodes": data.get("nodes") or 1,
            "memory": data.get("memory") or DEFAULT_MEMORY,
        }
        for optional in ("queue", "cpu", "max_runtime"):
            if data.get(optional) not in (None, ""):
                spec[optional] = data[optional]
        return spec


def _words(field: str, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        raise SpecError({field: gettext("has unbalanced quotes")}) from None


def _env_lines(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            name, _, value = line.strip().partition("=")
            env[name.strip()] = value
    return env
