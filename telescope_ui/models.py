"""Dashboards users build in the Custom view: one layout per project (series ids are the same
across a project's runs, so a layout fits every run of it)."""

from __future__ import annotations

from django.db import models

from ingest.models import Project


class Layout(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="layouts")
    name = models.CharField(max_length=200, default="default")
    # [{"id": series id, "wide": bool, "settings": {chart setting: value}}], in page order
    charts = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"],
                                               name="layout_project_name")]
