"""KLM's work queue: keys with triggers (``workqueue``, pure), worker tasks over it
(``runner``), and the Kyma reconciler's requeue-by-outcome and record (``reconciler``)."""
