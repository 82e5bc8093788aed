"""SKR side of the harness: install the watcher into SKR clusters and rewire it.

``SkrInstallation`` (one SKR: certificate, Secret, ``watcher-webhook`` process, VWC),
``SkrFleet`` (all SKRs, rewired concurrently when Watchers change), ``CertificateOverride``
(broken certificates for fault scenarios), ``parse_metrics`` (webhook metrics).
"""

from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from harness.skr.errors import SkrInstallError, WebhookProcessError
from harness.skr.fleet import SkrFleet
from harness.skr.install import SkrInstallation
from harness.skr.metrics import parse_metrics
from harness.skr.objects import render_skr_configuration
from harness.skr.webhook import WebhookConfig, WebhookProcess, webhook_env

__all__ = [
    "CertificateOverride",
    "SkrFleet",
    "SkrInstallError",
    "SkrInstallation",
    "WebhookConfig",
    "WebhookProcess",
    "WebhookProcessError",
    "issue_webhook_certificate",
    "parse_metrics",
    "render_skr_configuration",
    "webhook_env",
]
