"""Shared strategies and fixtures data for the renderer tests (unique module name: the
tests directories are not packages)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from watcher.render.watcher_cr import watcher_dict

dns_labels = st.from_regex(r"\A[a-z]([a-z0-9-]{0,10}[a-z0-9])?\Z")
label_keys = st.sampled_from(
    ["app", "operator.kyma-project.io/watched-by", "example.com/team", "tier"]
)
label_values = st.from_regex(r"\A([a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?)?\Z")
groups = st.sampled_from(["", "apps", "operator.kyma-project.io", "example.com", "*"])
versions = st.sampled_from(["v1", "v1beta2", "*"])


@st.composite
def watcher_dicts(draw: st.DrawFn, *, name: str | None = None) -> dict[str, Any]:
    """A valid Watcher CR dict; the manager comes from spec.manager or the managed-by label."""
    manager = draw(dns_labels)
    via_label = draw(st.booleans())
    return watcher_dict(
        name or draw(dns_labels),
        namespace=draw(dns_labels),
        manager="" if via_label else manager,
        labels={"operator.kyma-project.io/managed-by": manager} if via_label else None,
        resource=(draw(groups), draw(versions), draw(dns_labels)),
        field=draw(st.sampled_from(["spec", "status"])),
        service=(draw(dns_labels), draw(dns_labels), draw(st.integers(1, 65535))),
        labels_to_watch=draw(st.dictionaries(label_keys, label_values, max_size=3)),
        uid=draw(st.uuids()).hex,
    )


@st.composite
def unique_watcher_dicts(draw: st.DrawFn, max_size: int = 6) -> list[dict[str, Any]]:
    """Watchers with pairwise different namespace/name."""
    items = draw(st.lists(watcher_dicts(), max_size=max_size))
    seen: set[tuple[str, str]] = set()
    out = []
    for item in items:
        key = (item["metadata"]["namespace"], item["metadata"]["name"])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
