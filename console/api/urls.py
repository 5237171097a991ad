"""One router, explicit basenames."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from console.api import viewsets

router = DefaultRouter()
router.include_root_view = False  # /api/ is ``viewsets.api_root``: every endpoint, not 6
router.register("load-reports", viewsets.LoadReportViewSet, basename="loadreport")
router.register("bundles", viewsets.BundleViewSet, basename="bundle")
router.register("brokers", viewsets.BrokerViewSet, basename="broker")
router.register("decisions", viewsets.DecisionViewSet, basename="decision")
router.register("audit", viewsets.AuditEventViewSet, basename="auditevent")
router.register("reports", viewsets.ReportRunViewSet, basename="reportrun")

urlpatterns = [
    path("", viewsets.api_root, name="api-root"),
    path("lookup/", viewsets.lookup, name="lookup"),
    path("ownership/", viewsets.ownership, name="ownership"),
    path("rankings/", viewsets.rankings, name="rankings"),
    path("balance/", viewsets.balance, name="balance"),
    path("strategies/", viewsets.strategies, name="strategies"),
    path("bundle-map/", viewsets.bundle_map, name="api-bundle-map"),
    path("config/", viewsets.config, name="api-config"),
    path(
        "config/versions/<int:pk>/rollback/",
        viewsets.config_rollback_view,
        name="api-config-rollback",
    ),
    path("loop/", viewsets.loop, name="api-loop"),
    path("loop/pause/", viewsets.loop_pause, name="api-loop-pause"),
    path("loop/resume/", viewsets.loop_resume, name="api-loop-resume"),
    path("decision-feed/", viewsets.decision_feed, name="api-decision-feed"),
    path("domains/", viewsets.domains, name="api-domains"),
    path("pulsar/", viewsets.pulsar, name="api-pulsar"),
    path("pulsar/evidence/", viewsets.pulsar_evidence, name="api-pulsar-evidence"),
    path("pulsar/<int:pk>/control/", viewsets.pulsar_control, name="api-pulsar-control"),
    path("pulsar/<int:pk>/executor/", viewsets.pulsar_executor, name="api-pulsar-executor"),
    path("", include(router.urls)),
]
