"""Runtime id = Subject CN (exactly one, non-empty); SANs as strings."""

from __future__ import annotations

import pytest
from cryptography.x509.oid import NameOID
from listener_testing import make_cert

from watcher.listener.certs import SubjectAltNames, runtime_id, subject_alt_names
from watcher.listener.errors import CommonNameError


def test_runtime_id_is_the_common_name() -> None:
    cert = make_cert("4f2c-runtime", extra_names=[(NameOID.ORGANIZATION_NAME, "kyma")])
    assert runtime_id(cert) == "4f2c-runtime"


def test_missing_common_name_is_refused() -> None:
    cert = make_cert(None, extra_names=[(NameOID.ORGANIZATION_NAME, "kyma")])
    with pytest.raises(CommonNameError, match=r"no Subject CN \(subject: O=kyma\)"):
        runtime_id(cert)


def test_certificate_without_subject_is_refused() -> None:
    with pytest.raises(CommonNameError, match="subject: empty"):
        runtime_id(make_cert(None))


def test_several_common_names_are_ambiguous() -> None:
    cert = make_cert("b", extra_names=[(NameOID.COMMON_NAME, "a")])
    with pytest.raises(CommonNameError, match="2 Subject CNs"):
        runtime_id(cert)


def test_subject_alt_names_by_type_in_order() -> None:
    cert = make_cert(
        "r",
        dns=["b.example", "a.example"],
        uris=["spiffe://kcp/x"],
        ips=["10.0.0.1", "::1"],
    )
    sans = subject_alt_names(cert)
    assert sans == SubjectAltNames(
        dns=("b.example", "a.example"), uris=("spiffe://kcp/x",), ips=("10.0.0.1", "::1")
    )
    assert len(sans) == 5


def test_no_san_extension_means_no_sans() -> None:
    assert subject_alt_names(make_cert("r")) == SubjectAltNames()
