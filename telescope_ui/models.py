"""Dashboards users build in the Custom view, and templates to start new ones from, per project
(series ids are the same across a project's runs, so a layout fits every run of it)."""

from __future__ import annotations

from django.db import models

from ingest.models import Project


class Layout(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="layouts")
    name = models.CharField(max_length=200, default="default")
    # The layout document, {"version": 2, "sections": [...]} (telescope_ui/layouts.py). A list
    # is a layout saved before version 2 (its charts in page order), migrated when read.
    charts = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"],
                                               name="layout_project_name")]


class Template(models.Model):
    """A dashboard saved to start new ones from (the built-in ones live in layouts.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="templates")
    name = models.CharField(max_length=200)
    layout = models.JSONField(default=dict)  # {"version": 2, "sections": [...]}
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"],
                                               name="template_project_name")]
