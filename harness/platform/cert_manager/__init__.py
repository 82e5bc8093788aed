"""cert-manager for a Kyma Lifecycle Manager on a cluster that runs none: its Issuers
(selfSigned, ca) and Certificates, answered with the Secrets and status cert-manager would
give them. ``spec`` reads, ``signing`` makes keys and certificates, ``decisions`` decides
(all three pure); ``controller`` is the only part that talks to the API server."""

from harness.kube import CERTIFICATES, ISSUERS
from harness.platform.cert_manager.controller import CertManager, CertManagerError

__all__ = ["CERTIFICATES", "ISSUERS", "CertManager", "CertManagerError"]
