"""The ``request`` operation: one HTTPS request to the KCP gateway or a listener, with an
SKR's certificate or a deliberately broken one, and what it must get back."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.scenario.values import DnsLabel, Model

REQUEST_PATH_PATTERN = r"^/[^\s]*$"


class RequestExpect(Model):
    """What the request must get: ``status``, one of ``statusIn``, or ``refused: true`` (the
    TLS handshake or connection was refused or reset, as a client with a certificate the
    KCP does not trust sees it with TLS 1.3)."""

    status: int | None = Field(default=None, ge=100, le=599)
    status_in: tuple[Annotated[int, Field(ge=100, le=599)], ...] | None = Field(
        default=None, min_length=1
    )
    refused: bool = False

    @model_validator(mode="after")
    def _one(self) -> RequestExpect:
        given = [self.status is not None, self.status_in is not None, self.refused]
        if sum(given) != 1:
            raise ValueError("request expect needs exactly one of status, statusIn, refused: true")
        return self

    def holds(self, status: int | None, refused: bool) -> bool:
        """Whether a response with ``status`` (``None``: none came) or a refusal matches."""
        if self.refused:
            return refused
        if status is None:
            return False
        if self.status is not None:
            return status == self.status
        return self.status_in is not None and status in self.status_in

    def describe(self) -> str:
        if self.refused:
            return "refused (TLS handshake or connection refused or reset)"
        if self.status is not None:
            return f"status {self.status}"
        assert self.status_in is not None
        return "status in " + ", ".join(str(s) for s in self.status_in)


RequestCertificate = Literal["foreign", "expired", "not-yet-valid", "empty-cn"]


REQUEST_TARGET_PATTERN = r"^(gateway|listener/[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"


class Request(Model):
    """One HTTPS request to the KCP gateway, presenting the client certificate and key of
    SKR ``cluster`` or a fresh broken one (``certificate``): ``foreign`` (a CA the KCP does
    not trust), ``expired``, ``not-yet-valid`` or ``empty-cn`` (no Subject CN; the last
    three signed by the KCP CA). ``body``: an object (sent as JSON) or a string (as it is).
    ``to: listener/<component>`` bypasses the gateway and sends the same request straight
    to that listener's port (as an attacker inside the KCP network could), to show that
    only the gateway may hand a listener an ``X-Forwarded-Client-Cert``."""

    cluster: DnsLabel | None = None
    certificate: RequestCertificate | None = None
    path: str = Field(pattern=REQUEST_PATH_PATTERN)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | str | None = None
    to: str = Field(default="gateway", pattern=REQUEST_TARGET_PATTERN)
    expect: RequestExpect

    @model_validator(mode="after")
    def _one_identity(self) -> Request:
        if (self.cluster is None) == (self.certificate is None):
            raise ValueError(
                "request needs exactly one of cluster (an SKR's certificate) or "
                "certificate: foreign|expired|not-yet-valid|empty-cn"
            )
        return self

    @property
    def identity(self) -> str:
        """Who the request claims to be: the SKR's name or the certificate kind."""
        return self.cluster or self.certificate or "foreign"


# Object checks and commands ----------------------------------------------------------------
