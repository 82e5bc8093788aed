"""The SKR webhook: admission → decision → delivery of events to the KCP.

Modules follow the event: ``settings`` (environment) → ``tlsreload`` (certificates that
rotate) → ``app`` (HTTP admission handler) → ``coalesce`` (pure pending queue) →
``delivery`` (workers, retries) → ``kcpclient`` (pooled mTLS POSTs) → ``metrics`` →
``server`` (composition, ``watcher-webhook``).
"""

from watcher.webhook.delivery import Delivery, DrainReport
from watcher.webhook.metrics import WebhookMetrics
from watcher.webhook.server import Webhook, main
from watcher.webhook.settings import DeliverySettings, TLSFiles, WebhookSettings, load_settings

__all__ = [
    "Delivery",
    "DeliverySettings",
    "DrainReport",
    "TLSFiles",
    "Webhook",
    "WebhookMetrics",
    "WebhookSettings",
    "load_settings",
    "main",
]
