"""URL routes: pages, the API, the OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from console import views
from console.api.viewsets import SchemaView

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("bundles/", views.bundle_map, name="bundle-map"),
    path("domains/", views.domains, name="domains"),
    path("config/", views.config, name="config"),
    path("brokers/<str:name>/", views.broker, name="broker"),
    path("namespaces/", views.namespaces, name="namespaces"),
    path("namespaces/<path:name>/bundles/", views.namespace_bundles, name="namespace-bundles"),
    path("audit/", views.audit, name="audit"),
    path("audit/export.csv", views.audit_csv, name="audit-csv"),
    path("decisions/<int:pk>/", views.decision, name="decision"),
    path("reports/", views.reports, name="reports"),
    path("pulsar/", views.pulsar, name="pulsar"),
    path("users/", views.users, name="users"),
    # Named by its content's digest: a new build is a new URL, never a day-old cached copy.
    path(f"vendor/plotly-{views.plotly_digest()}.min.js", views.plotly_js, name="plotly-js"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("metrics", views.prometheus_metrics, name="metrics"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("console.api.urls")),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    *staticfiles_urlpatterns(),
]

handler404 = "console.api.errors.json_404"
handler500 = "console.api.errors.json_500"
