"""The controller runtime of the KCP: keys with triggers (``workqueue``, pure), a
controller's workers, requeue-by-outcome and record (``reconciler``), shared informers and
setups (``runtime``)."""
