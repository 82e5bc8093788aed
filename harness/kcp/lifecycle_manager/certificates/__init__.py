"""KLM's certificates for the Runtime Watcher: the CA and gateway Secret, per-Kyma client
certificates, and the pure rules of when each is issued, trusted and served."""
