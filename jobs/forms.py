"""The submit form: fields for the common case, or a pasted YAML spec (the API's schema)."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.models import Job, State
from jobs.spec import DEFAULT_MEMORY, MASK, SpecError, load_yaml, masked_env

_DATE = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


class JobForm(forms.Form):
    team = forms.ChoiceField(label=_("Team"))
    # No max_length: the browser would cut a long value without a word; the spec's check
    # refuses it, naming the limit.
    name = forms.CharField(
        label=_("Name"),
        required=False,
        help_text=_("Lowercase letters, digits and '-', at most 40 characters"),
    )
    queue = forms.CharField(label=_("Queue"), required=False, help_text=_("Default: normal"))
    image = forms.CharField(label=_("Image"), required=False)
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
    clone = forms.IntegerField(widget=forms.HiddenInput, required=False)
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

    def spec_data(self) -> tuple[dict[str, Any] | None, dict[str, str]]:
        """The submitted spec as the API would receive it, and the problems found making it
        (a field the form itself refused counts as one: its message stands)."""
        data = self.cleaned_data
        problems = {key: str(errors[0]) for key, errors in self.errors.items()}
        if data.get("spec_yaml", "").strip():
            try:
                pasted = load_yaml(data["spec_yaml"])
            except SpecError as exc:
                return None, {**problems, **exc.errors}
            pasted.setdefault("team", data.get("team"))
            return pasted, problems
        spec: dict[str, Any] = {
            "team": data.get("team"),
            "name": data.get("name") or "",
            "image": data.get("image") or "",
            "command": _words(problems, "command", data.get("command") or ""),
            "args": _words(problems, "args", data.get("args") or ""),
            "env": _env_lines(data.get("env") or ""),
            "gpu_type": data.get("gpu_type") or "",
            # A blank number takes its default; a 0 stays 0, for the spec's check to refuse.
            "gpus_per_node": _given(data.get("gpus_per_node"), 1),
            "nodes": _given(data.get("nodes"), 1),
            "memory": data.get("memory") or DEFAULT_MEMORY,
        }
        for optional in ("queue", "cpu", "max_runtime"):
            if data.get(optional) not in (None, ""):
                spec[optional] = data[optional]
        return spec, problems

    def label_of(self, key: str) -> str:
        """The form's label of a spec field (its own name where the form has none)."""
        field = self.fields.get(key)
        return str(field.label) if field is not None and field.label else key

    def place_errors(self, problems: dict[str, str]) -> None:
        """Each problem beside its field; with a pasted spec, beside the spec, named by label."""
        pasted = bool(self.data.get("spec_yaml", "").strip())
        for key, message in problems.items():
            if key in self.errors:
                continue  # the form's own message for that field stands
            if pasted and key != "team":
                label = gettext("spec") if key == "spec" else self.label_of(key)
                named = gettext("%(field)s: %(message)s") % {"field": label, "message": message}
                self.add_error("spec_yaml", named)
            elif key in self.fields:
                self.add_error(key, message)
            else:
                self.add_error(
                    None, gettext("%(field)s: %(message)s") % {"field": key, "message": message}
                )


def clone_initial(job: Job) -> dict[str, Any]:
    """The form's fields filled from `job`, to edit and submit again; secret-looking values
    stay masked (the submission takes them from the job)."""
    return {
        "clone": job.pk,
        "team": job.team.slug,
        "name": job.name,
        "queue": job.queue.name,
        "image": job.image,
        "command": shlex.join(job.command),
        "args": shlex.join(job.args),
        "env": "\n".join(f"{name}={value}" for name, value in masked_env(job.env).items()),
        "gpu_type": job.gpu_type.name,
        "gpus_per_node": job.gpus_per_node,
        "nodes": job.nodes,
        "cpu": job.cpu,
        "memory": job.memory,
        "max_runtime": job.max_runtime,
    }


def unmask_env(env: dict[str, str], source: Job) -> dict[str, str]:
    """`env` with each value left masked replaced by the cloned job's own."""
    return {
        name: source.env.get(name, value) if value == MASK else value for name, value in env.items()
    }


def _given(value: Any, default: int) -> Any:
    return default if value is None else value


def _words(problems: dict[str, str], field: str, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        problems.setdefault(field, gettext("has unbalanced quotes"))
        return []


def _env_lines(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            name, _, value = line.strip().partition("=")
            env[name.strip()] = value
    return env


SORTS = {
    "submitted": "submitted_at",
    "name": "name",
    "team": "team__slug",
    "owner": "owner__username",
    "state": "state",
    "gpus": "gpus_per_node",
    "id": "id",
}
"""The job list's sortable columns: the `sort` value (a leading '-' reverses) and its field."""


class JobFilterForm(forms.Form):
    """The job list's search and filters, as query parameters."""

    q = forms.CharField(label=_("Name contains"), required=False, max_length=100)
    team = forms.ChoiceField(label=_("Team"), required=False)
    user = forms.CharField(label=_("User"), required=False, max_length=150)
    state = forms.ChoiceField(label=_("State"), required=False)
    gpu_type = forms.ChoiceField(label=_("GPU type"), required=False)
    queue = forms.CharField(label=_("Queue"), required=False, max_length=100)
    since = forms.DateField(label=_("Submitted from"), required=False, widget=_DATE)
    until = forms.DateField(label=_("Submitted until"), required=False, widget=_DATE)
    mine = forms.BooleanField(label=_("Only mine"), required=False)
    sort = forms.ChoiceField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, teams: list[str], gpu_types: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        choices: dict[str, tuple[str, list[tuple[str, Any]]]] = {
            "team": (gettext("any team"), [(t, t) for t in teams]),
            "gpu_type": (gettext("any GPU type"), [(g, g) for g in gpu_types]),
            "state": (gettext("any state"), State.choices),  # the code, named in words
        }
        for name, (anything, values) in choices.items():
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = [("", anything), *values]
        sort = self.fields["sort"]
        assert isinstance(sort, forms.ChoiceField)
        sort.choices = [("", "")] + [(f"{d}{key}", key) for key in SORTS for d in ("", "-")]

    def filter(self, jobs: QuerySet[Job], user: Any) -> QuerySet[Job]:
        """`jobs` narrowed by the valid filters (an invalid one is shown as such, not applied)."""
        data = self.cleaned_data
        lookups = {
            "q": "name__icontains",
            "team": "team__slug",
            "user": "owner__username",
            "state": "state",
            "gpu_type": "gpu_type__name",
            "queue": "queue__name",
            "since": "submitted_at__date__gte",
            "until": "submitted_at__date__lte",
        }
        for key, lookup in lookups.items():
            if data.get(key) not in (None, ""):
                jobs = jobs.filter(**{lookup: data[key]})
        if data.get("mine"):
            jobs = jobs.filter(owner=user)
        sort = data.get("sort") or "-submitted"
        field = SORTS[sort.lstrip("-")]
        direction = "-" if sort.startswith("-") else ""
        return jobs.order_by(f"{direction}{field}", f"{direction}id")
