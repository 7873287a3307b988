from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from ingest.write import views as ingest_views
from telescope_ui import api, layouts, overview, pages, samples

# An unknown URL, or a run that is not there: a page in the site's style, JSON under /api/.
handler404 = "telescope_ui.pages.not_found"

urlpatterns = [
    path("", pages.runs_page, name="runs"),
    path("runs/<int:run_id>", overview.overview_page, name="overview"),
    path("runs/<int:run_id>/metrics", pages.metrics_page, name="metrics"),
    path("runs/<int:run_id>/samples", samples.samples_page, name="samples"),
    path("runs/<int:run_id>/timeline", pages.timeline_page, name="timeline"),
    path("runs/<int:run_id>/performance", pages.performance_page, name="performance"),
    path("api/ingest", ingest_views.ingest, name="ingest"),
    path("healthz", api.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/runs", api.runs, name="api-runs"),
    path("api/runs/<int:run_id>", api.run_detail, name="api-run"),
    path("api/runs/<int:run_id>/catalog", api.catalog, name="api-catalog"),
    path("api/runs/<int:run_id>/series", api.series, name="api-series"),
    path("api/runs/<int:run_id>/distribution", api.distribution, name="api-distribution"),
    path("api/runs/<int:run_id>/export.csv", api.export_csv, name="api-export"),
    path("api/runs/<int:run_id>/events", api.events, name="api-events"),
    path("api/runs/<int:run_id>/events.trace.json", api.events_trace, name="api-events-trace"),
    path("api/runs/<int:run_id>/performance", api.performance, name="api-performance"),
    path("api/runs/<int:run_id>/gauges", api.gauges, name="api-gauges"),
    path("api/runs/<int:run_id>/samples", samples.samples_api, name="api-samples"),
    path("api/runs/<int:run_id>/layout", layouts.layout, name="api-layout"),
    path("api/runs/<int:run_id>/templates", layouts.templates, name="api-templates"),
]
