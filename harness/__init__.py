"""Multi-cluster test harness around the Kyma Runtime Watcher (never imported by ``watcher``)."""
