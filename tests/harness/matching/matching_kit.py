"""What the matching tests share: a realistic object to match against, and the one
mismatch a match is expected to have."""

from __future__ import annotations

from harness.matching.mismatches import Mismatch, ObjectMatch

WEBHOOK_CONFIG = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {
        "name": "skr-webhook",
        "labels": {"app.kubernetes.io/name": "skr-webhook", "tier": "watcher"},
    },
    "webhooks": [
        {
            "name": "kyma.operator.kyma-project.io",
            "rules": [{"resources": ["kymas"], "operations": ["CREATE", "UPDATE"]}],
        },
        {
            "name": "manifest.operator.kyma-project.io",
            "rules": [{"resources": ["secrets"], "operations": ["DELETE"]}],
        },
    ],
    "status": {
        "conditions": [
            {"type": "Installed", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "Pending"},
        ]
    },
}


def only(match: ObjectMatch) -> Mismatch:
    assert len(match.mismatches) == 1, match.mismatches
    return match.mismatches[0]
