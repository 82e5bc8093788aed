"""The Kyma controller's parts: the cache of KCP Kymas (``cache``) and one reconcile
(``reconcile``, with ``skr_access``, ``modules`` and ``status``)."""
