# syntax=docker/dockerfile:1
# The Kyma runtime watcher webhook (and the listener demo) as a container image.
#
#   docker build -t kyma-watcher:0.1.0 .
#   docker run kyma-watcher:0.1.0                                   # watcher-webhook
#   docker run --entrypoint watcher-listener kyma-watcher:0.1.0 --component lifecycle-manager ...
#
# Stage 1 builds the project's own wheel from pyproject.toml and installs it into a
# virtualenv with the dependencies pyproject.toml declares for the product (not the
# harness extra), at the versions deploy/constraints.txt locks; stage 2 copies only that
# virtualenv into
# a slim Python 3.11. The image follows upstream's pod security: it runs as 10001:30001
# (non-root, numeric, so runAsNonRoot can verify it), needs no capability and writes
# nothing to its root filesystem (bytecode is compiled at build time), so it runs under
# readOnlyRootFilesystem with seccomp RuntimeDefault. Health is checked by the
# Deployment's probes (GET /healthz and /readyz on the metrics port 2112), not by a
# Docker HEALTHCHECK: the same image also runs the listener, which has other ports.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/watcher
COPY deploy/constraints.txt deploy/constraints.txt
COPY pyproject.toml README.md ./
COPY watcher/ watcher/
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/watcher/bin/pip install --constraint deploy/constraints.txt /wheels/*.whl \
    && /opt/watcher/bin/python -I -c "import importlib, importlib.util, pkgutil, watcher; \
[importlib.import_module(m.name) for m in pkgutil.walk_packages(watcher.__path__, 'watcher.')]; \
assert not [n for n in ('rich', 'kubernetes_asyncio', 'matplotlib') if importlib.util.find_spec(n)]" \
    && /opt/watcher/bin/python -m compileall -q /opt/watcher \
    && /opt/watcher/bin/watcher-webhook --help

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kyma-watcher" \
      org.opencontainers.image.description="Kyma runtime watcher: SKR admission webhook and KCP listener (Python)" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/watcher/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/watcher /opt/watcher
USER 10001:30001
EXPOSE 8443 2112
ENTRYPOINT ["watcher-webhook"]
