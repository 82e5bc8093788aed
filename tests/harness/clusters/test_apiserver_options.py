"""What an API server is told to serve, and how its Go runtime is tuned."""

from __future__ import annotations

from harness.clusters.apiserver import ApiServerOptions


def test_served_apis_become_one_runtime_config_and_unneeded_plugins_go() -> None:
    options = ApiServerOptions(served_apis=("v1", "apps/v1", "node.k8s.io/v1"))
    assert options.runtime_config() == [
        "--runtime-config=api/all=false,v1=true,apps/v1=true,node.k8s.io/v1=true"
    ]
    plugins = options.disabled_admission_plugins()
    assert plugins.startswith("--disable-admission-plugins=ServiceAccount,")
    assert "DefaultStorageClass" in plugins and "RuntimeClass" not in plugins


def test_kube_apiservers_own_defaults_on_request() -> None:
    options = ApiServerOptions(served_apis=None, gc_percent=None)
    assert options.runtime_config() == []
    assert options.disabled_admission_plugins() == "--disable-admission-plugins=ServiceAccount"
    assert options.environ() is None


def test_the_collector_setting_rides_on_this_processs_environment() -> None:
    env = ApiServerOptions(gc_percent=400).environ()
    assert env is not None and env["GOGC"] == "400" and "PATH" in env
