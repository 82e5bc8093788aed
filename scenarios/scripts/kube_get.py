"""``kube_get.py KUBECONFIG PATH [JMESPATH]``: GET one API path with a kubeconfig and print
the JSON answer (or a JMESPath expression of it), for ``script`` steps. Run it with
``${{ harness.python }}``, the harness's own interpreter."""

from __future__ import annotations

import asyncio
import json
import sys

import jmespath
from kubernetes_asyncio.config import new_client_from_config

from harness.kube import request


async def main(kubeconfig: str, path: str, expression: str | None) -> None:
    async with await new_client_from_config(config_file=kubeconfig, persist_config=False) as api:
        answer = await request(api, "GET", path)
    print(json.dumps(jmespath.search(expression, answer) if expression else answer))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
