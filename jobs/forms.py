"""The submit form: fields for the common case, or a pasted YAML spec (the API's schema)."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms

from jobs.spec import DEFAULT_MEMORY, SpecError, load_yaml


class JobForm(forms.Form):
    team = forms.ChoiceField()
    name = forms.CharField(max_length=40, required=False)
    queue = forms.CharField(max_length=32, required=False, help_text="Default: normal")
    image = forms.CharField(max_length=255, required=False)
    command = forms.CharField(required=False, help_text="As in a shell: python train.py")
    args = forms.CharField(required=False)
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="One NAME=value per line",
    )
    gpu_type = forms.ChoiceField()
    gpus_per_node = forms.IntegerField(initial=1, required=False)
    nodes = forms.IntegerField(initial=1, required=False)
    cpu = forms.DecimalField(initial=4, required=False)
    memory = forms.CharField(initial=DEFAULT_MEMORY, required=False)
    max_runtime = forms.IntegerField(required=False, help_text="Seconds; default: the queue's")
    spec_yaml = forms.CharField(
        label="…or paste a spec (YAML)",
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
        raise SpecError({field: "has unbalanced quotes"}) from None


def _env_lines(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            name, _, value = line.strip().partition("=")
            env[name.strip()] = value
    return env
