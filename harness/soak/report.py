"""``docs/soak.md`` from the soak's JSON document. Pure: a mapping in, Markdown out.

Rendering from the JSON (not from live objects) means the Markdown can always be
regenerated from ``docs/soak.json`` and the two never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MIB = 1024 * 1024


def _shown(value: Any, spec: str = "", scale: float = 1, unit: str = "") -> str:
    """``value * scale`` formatted with ``spec`` and ``unit``, or "-" when not measured."""
    return "-" if value is None else format(value * scale, spec) + unit


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def render_markdown(doc: Mapping[str, Any], *, plot_name: str = "soak-rss.png") -> str:
    """The whole page: verdict, run facts, criteria, processes, oracle, method."""
    cfg, oracle, windows = doc["config"], doc["oracle"], doc["windows_s"]
    machine, latency = doc["machine"], doc.get("latency_ms") or {}
    verdict = "PASSED" if doc["passed"] else "FAILED"
    failed = [c["name"] for c in doc["criteria"] if not c["ok"]]
    lines = [
        "# Soak: sustained churn, oracle-checked, memory and descriptors measured",
        "",
        f"**{verdict}**"
        + (f" — failed: {', '.join(failed)}." if failed else " — every criterion held."),
        "",
        f"- command: `{doc['command']}`",
        f"- date: {doc['date']}; machine: {machine.get('cores')} cores, 1-minute load "
        f"{machine.get('load_1min')} at the end, Python {machine.get('python')}, "
        f"{machine.get('platform')}",
        f"- churn: {cfg['duration_s']:g} s at {cfg['rate']:g} writes/s over {cfg['skrs']} SKRs "
        f"(achieved {doc['achieved_rate']:g} writes/s; churn took {doc['elapsed_s']:g} s); "
        f"Kymas and ConfigMaps, {cfg['objects_per_kind_and_skr']} objects per kind and SKR, "
        f"seed {cfg['seed']}; gateway → listeners over {doc.get('gateway_to_listener', '?')}",
        f"- sampling every {cfg['sample_interval_s']:g} s; warm-up {windows['warmup']:g} s; "
        f"growth = last window [{windows['last_start']:g}, {windows['end']:g}] s vs first "
        f"window after warm-up [{windows['warmup']:g}, {windows['first_end']:g}] s",
        "",
        "## Criteria",
        "",
        *_table(
            ("criterion", "expected", "measured", "ok"),
            [
                (c["name"], c["expected"], c["actual"], "yes" if c["ok"] else "**no**")
                for c in doc["criteria"]
            ],
        ),
        "",
        "## Processes",
        "",
        *_table(
            (
                "process",
                "judged",
                "RSS start (MiB)",
                "RSS end (MiB)",
                "RSS growth",
                "other fds floor start",
                "end",
                "fd growth",
                "connections peak start/end",
                "all fds peak start/end",
                "samples",
            ),
            [
                (
                    f"{p['name']} ({p['command'] or '?'})",
                    "yes" if p["role"] == "watcher" else "info",
                    _shown(p["rss_start"], ".1f", 1 / MIB),
                    _shown(p["rss_end"], ".1f", 1 / MIB),
                    "restarted" if p["restarted"] else _shown(p["rss_growth"], "+.1f", 100, " %"),
                    _shown(p["fd_floor_start"]),
                    _shown(p["fd_floor_end"]),
                    _shown(p["fd_growth"], "+d"),
                    f"{_shown(p.get('conn_peak_start'))}/{_shown(p.get('conn_peak_end'))}",
                    f"{_shown(p['fd_peak_start'])}/{_shown(p['fd_peak_end'])}",
                    str(p["samples"]),
                )
                for p in doc["processes"]
            ],
        ),
        "",
        f"![RSS and open file descriptors over time]({plot_name})",
        "",
        "## Events (ground-truth oracle)",
        "",
        *_table(
            ("what", "count"),
            [
                ("writes planned", str(oracle["writes_planned"])),
                ("writes sent / accepted / failed", _sent(oracle)),
                ("writes not sent (churn fell behind)", str(oracle["writes_skipped"])),
                (
                    "send decisions (write x webhook that must give an event)",
                    str(oracle["send_decisions"]),
                ),
                ("groups expected (manager, runtime, object)", str(oracle["groups"])),
                ("events received", str(oracle["events_received"])),
                (
                    "send decisions minus events received (see Method)",
                    str(max(0, oracle["send_decisions"] - oracle["events_received"])),
                ),
                ("groups matched", str(oracle["matched"])),
                ("missing", str(oracle["missing"])),
                ("spurious", str(oracle["spurious"])),
                ("duplicates (groups over the coalescing bound)", str(oracle["duplicates"])),
                ("wrong listener / wrong runtime", _wrong(oracle)),
            ],
        ),
        "",
        "Latency (SKR write sent → event accepted by the listener): "
        + (
            f"p50 {latency['p50']:g} ms, p99 {latency['p99']:g} ms, max {latency['max']:g} ms "
            f"(n={latency['count']})."
            if latency
            else "no samples."
        ),
        "",
    ]
    if doc.get("notes"):
        lines += ["## Notes", "", *(f"- {n}" for n in doc["notes"]), ""]
    if doc.get("findings"):
        lines += ["First findings:", "", *(f"- {f}" for f in doc["findings"]), ""]
    lines += METHOD
    return "\n".join(lines) + "\n"


def _sent(o: Mapping[str, Any]) -> str:
    return f"{o['writes_sent']} / {o['writes_ok']} / {o['writes_failed']}"


def _wrong(o: Mapping[str, Any]) -> str:
    return f"{o['wrong_listener']} / {o['wrong_runtime']}"


METHOD = [
    "## Method",
    "",
    "- **Environment**: KCP + SKRs as real kube-apiserver + etcd processes, the real Envoy "
    "gateway with mTLS and XFCC, one `watcher-webhook` process per SKR as the environment "
    "installs it (async delivery, durable spool on, no fsync), "
    "KLM's Watcher (Kymas → `lifecycle-manager`, listener inside the harness process with "
    "the KLM stand-in) and a second Watcher (ConfigMaps labelled "
    "`harness.kyma-project.io/soak=on` → `config-manager`) whose listener runs as its own "
    "`watcher-listener` process, so a listener's memory is measured alone.",
    "- **Churn**: a seeded plan (`harness.churn.plan`) of creates, spec updates, status "
    "updates, label flips (moving objects in and out of both Watchers' selectors) and "
    "deletes, weights 1:3:1:1:1, paced evenly over the SKRs.",
    "- **Oracle**: `harness.churn.truth` replays the accepted writes through the API "
    "server's routing and the product's own `decide`; `harness.expect.match` applies the "
    "coalescing rule of docs/ground-truth.md (per manager, runtime and object: between 1 "
    "and k events, one of them after the last causing write was sent; more than k are "
    "duplicates). Status updates of Kymas reach no Watcher, so any event for them would be "
    "spurious. The rule's limit: a group needs one event after its last write, so an "
    "event lost between two writes of one object looks like one the webhook coalesced; "
    "*send decisions minus events received* bounds both together. The pool of objects "
    "per kind and SKR keeps each group to a few dozen writes over the run.",
    "- **Sampling**: `VmRSS` from `/proc/<pid>/status` and the entries of `/proc/<pid>/fd`; "
    "a descriptor whose socket inode is an ESTABLISHED connection in `/proc/net/tcp` counts "
    "as a connection. RSS growth = mean of the last window / mean of the first window "
    "after warm-up - 1 (must stay < 10 %).",
    "- **Descriptors** are judged without the established connections, on each window's "
    "*floor* (minimum), with no tolerance: files, pipes, event fds, listening sockets and "
    "sockets in any other state (a connection closed by the peer but never by us sits in "
    "CLOSE_WAIT) must not grow; a leaked descriptor never closes and lifts the floor, while "
    "in-flight requests only lift peaks. Established connections are keep-alive pools "
    "(webhook → gateway, at most `WATCHER_POOL_SIZE` = 16 per webhook; API server → "
    "webhook; gateway → listeners): aiohttp reuses pooled connections first in, first out, "
    "so each connection a burst of concurrent deliveries opened stays warm while events "
    "keep coming, and the count follows the highest concurrency seen so far. They are "
    "shown (peak per window), not judged.",
    "- **Harness process** (info only, not judged): it hosts KLM's listener and stand-in, "
    "but also the churn runner and every record the oracle needs (each write and each "
    "event is kept until the end), so its growth is expected and says little about the "
    "listener; the `watcher-listener` row is the listener's own figure.",
    "",
]
