"""Per Kyma, its certificate Secret as last parsed — shared by both certificate clients.

Loading an RSA private key checks it: tens of ms for RSA 2048, ~250 ms of CPU for the
RSA 4096 keys upstream's Certificate asks for. A reconcile reads the Secret every time,
so the parse is done only when the Secret's content changed (the KLM scale run found
it: without this, 94 % of ``watcher-klm``'s reconcile time was this one call).
"""

from __future__ import annotations

from watcher import pki


class ParsedCertificates:
    """``parsed.load(kyma, cert_pem, key_pem, what)`` → :class:`watcher.pki.Issued`."""

    def __init__(self) -> None:
        self._by_kyma: dict[str, tuple[bytes, bytes, pki.Issued]] = {}

    def load(self, kyma: str, cert_pem: bytes, key_pem: bytes, what: str) -> pki.Issued:
        """The parsed pair; ``CertificateError`` when it does not parse or match."""
        cached = self._by_kyma.get(kyma)
        if cached is not None and cached[:2] == (cert_pem, key_pem):
            return cached[2]
        issued = pki.load_issued(cert_pem, key_pem, what)
        self._by_kyma[kyma] = (cert_pem, key_pem, issued)
        return issued

    def remember(self, kyma: str, issued: pki.Issued) -> None:
        """What was just written needs no parse when it is read back."""
        self._by_kyma[kyma] = (issued.cert_pem, issued.key_pem, issued)

    def forget(self, kyma: str) -> None:
        self._by_kyma.pop(kyma, None)
