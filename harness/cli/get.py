"""``watcher-harness get``: print any object (or list) of any cluster as JSON.

For scenario ``script`` steps (``${{ harness.get }}`` is ``<harness python> -m
harness.cli.get``) and for people exploring an ``up`` environment, without ``kubectl``;
what it reads and from which cluster: :data:`EPILOG`, the options' help and
docs/scenarios.md. Exit 0 with the JSON on stdout; 1 with one line on stderr when the
object is not found or the cluster cannot be read; 2 with the usage for wrong arguments.
Never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import jmespath.exceptions
import yaml

from harness.kube import (
    CONFIG_MAPS,
    KYMAS,
    MANIFESTS,
    MODULE_RELEASE_METAS,
    MODULE_TEMPLATES,
    NAMESPACES,
    SECRETS,
    WATCHERS,
    KubeError,
    NotFound,
    Resource,
    discover,
    list_objects,
    request,
)
from harness.matching.functions import CompiledExpression, compile_expression
from harness.matching.syntax import expression_problem
from harness.scenario.names import kubeconfig_variable
from harness.scenario.values import KINDS

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
REQUEST_TIMEOUT = 30.0
"""Seconds for the whole read (discovery included); then: the cluster did not answer."""

# The scenario shorthands with their kinds and scopes (the test checks they are KINDS).
SHORTHANDS: dict[str, Resource] = {
    r.plural: r
    for r in (
        KYMAS,
        WATCHERS,
        MANIFESTS,
        MODULE_TEMPLATES,
        MODULE_RELEASE_METAS,
        CONFIG_MAPS,
        SECRETS,
        NAMESPACES,
    )
}


DESCRIPTION = "Print an object (or a list) of any cluster as JSON."
EPILOG = """examples:
  get --cluster skr-a kymas default -n kyma-system --query spec.channel
  get --cluster kcp manifests -n kcp-system --query 'items[].metadata.name'
  get --cluster skr-a --api-version admissionregistration.k8s.io/v1 \\
      --kind ValidatingWebhookConfiguration skr-webhook
  get --env demo --cluster kcp /apis/operator.kyma-project.io/v1beta2/kymas
exit: 0 printed; 1 not found or the cluster cannot be read; 2 wrong arguments"""


class UsageError(ValueError):
    """Wrong arguments: exit 2 with the usage."""


class ReadError(Exception):
    """Not found, or the cluster could not be read: exit 1 with this one line."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description, p.epilog = DESCRIPTION, EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.set_defaults(parser=p)
    p.add_argument(
        "resource",
        nargs="?",
        metavar="RESOURCE|PATH",
        help=f"one of {', '.join(KINDS)}; or an API path starting with / "
        "(omit with --api-version/--kind)",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the object (default: list them)")
    where = p.add_argument_group("cluster (one of)")
    where.add_argument(
        "--cluster",
        metavar="NAME",
        help="kcp, skr-a, ...: the kubeconfig in $KUBECONFIG_<NAME> (a script step has one "
        "per cluster), or with --env the one of that environment",
    )
    where.add_argument("--kubeconfig", metavar="FILE", help="this kubeconfig's current context")
    p.add_argument(
        "--env",
        metavar="ENV",
        help="with --cluster: the clusters of `watcher-harness up --detach --name ENV`",
    )
    p.add_argument(
        "-n",
        "--namespace",
        metavar="NAMESPACE",
        help="needed for a namespaced object by NAME; a list without it spans all namespaces",
    )
    p.add_argument("-l", "--selector", metavar="K=V[,...]", help="label selector (lists only)")
    p.add_argument(
        "--api-version", metavar="V", help="with --kind: any kind, found by API discovery (apps/v1)"
    )
    p.add_argument("--kind", metavar="K", help="with --api-version, e.g. Deployment")
    p.add_argument(
        "--query",
        metavar="JMESPATH",
        help="print this JMESPath expression of the answer instead (e.g. spec.channel, "
        "items[].metadata.name)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("get", help="print an object or list of any cluster as JSON")
    add_arguments(p)
    p.set_defaults(func=run)


# What to read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What one ``get`` reads: a raw ``path`` (with ``query``), or ``resource`` (a
    shorthand) / ``api_version`` + ``kind`` (discovered) with ``name`` and ``namespace``."""

    path: str | None = None
    query: tuple[tuple[str, str], ...] = ()
    resource: Resource | None = None
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    selector: str | None = None

    def describe(self) -> str:
        """``kymas kyma-system/default``, ``Kind foo``, ``/api/v1/...``: for messages."""
        if self.path is not None:
            return self.path
        what = self.resource.plural if self.resource else f"{self.kind} ({self.api_version})"
        if self.name:
            key = f"{self.namespace}/{self.name}" if self.namespace else self.name
            return f"{what} {key}"
        return f"{what} in {self.namespace or 'all namespaces'}"


def target(args: argparse.Namespace) -> Target:
    """The arguments checked and combined; :class:`UsageError` says what is wrong."""
    typed = args.api_version is not None or args.kind is not None
    named = args.name if not typed else args.resource
    if args.selector and named is not None and not named.startswith("/"):
        raise UsageError("-l selects a list: give no NAME")
    if typed:
        return _typed_target(args)
    if args.resource is None:
        raise UsageError("give RESOURCE, an API path, or --api-version and --kind")
    if args.resource.startswith("/"):
        return _path_target(args)
    resource = SHORTHANDS.get(args.resource)
    if resource is None:
        raise UsageError(
            f"unknown resource {args.resource!r}; use one of {', '.join(KINDS)}, an API path "
            "(/api/v1/...) or --api-version and --kind"
        )
    if resource.namespaced and args.name is not None and args.namespace is None:
        raise UsageError(f"{resource.plural} are namespaced: give -n NAMESPACE with NAME")
    return Target(
        resource=resource, name=args.name, namespace=args.namespace, selector=args.selector
    )


def _typed_target(args: argparse.Namespace) -> Target:
    """``--api-version`` and ``--kind`` (the positional RESOURCE is then the NAME)."""
    if args.api_version is None or args.kind is None:
        raise UsageError("--api-version and --kind go together")
    if args.name is not None:
        raise UsageError(f"unexpected argument {args.name!r} (with --kind: at most NAME)")
    name = args.resource
    if name is not None and name.startswith("/"):
        raise UsageError("give an API path or --api-version/--kind, not both")
    return Target(
        api_version=args.api_version,
        kind=args.kind,
        name=name,
        namespace=args.namespace,
        selector=args.selector,
    )


def _path_target(args: argparse.Namespace) -> Target:
    """An API path as RESOURCE (``-l`` joins its query as ``labelSelector``)."""
    if args.name is not None or args.namespace is not None:
        raise UsageError("an API path says the namespace and name itself")
    parts = urlsplit(args.resource)
    query = tuple(parse_qsl(parts.query))
    if args.selector:
        query += (("labelSelector", args.selector),)
    return Target(path=parts.path, query=query)


def kubeconfig(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    """The kubeconfig file the arguments name; :class:`UsageError` if none or not a file."""
    if args.kubeconfig is not None:
        if args.cluster is not None or args.env is not None:
            raise UsageError("--kubeconfig names the cluster itself: no --cluster or --env")
        path = Path(args.kubeconfig)
    elif args.cluster is None:
        raise UsageError("which cluster? give --cluster NAME or --kubeconfig FILE")
    elif args.env is not None:
        path = _env_kubeconfig(args.env, args.cluster)
    else:
        variable = kubeconfig_variable(args.cluster)
        value = environ.get(variable)
        if not value:
            present = sorted(k for k in environ if k.startswith("KUBECONFIG_"))
            known = f" (set here: {', '.join(present)})" if present else ""
            raise UsageError(
                f"--cluster {args.cluster}: ${variable} is not set{known}; a scenario script "
                "has one per cluster, else use --env ENV or --kubeconfig FILE"
            )
        path = Path(value)
    if not path.is_file():
        raise UsageError(f"kubeconfig {path}: no such file")
    return path


def _env_kubeconfig(env: str, cluster: str) -> Path:
    from harness.cli.up_state import running

    state = running(env)
    if state is None:
        raise UsageError(f"--env {env}: no such environment is up (`watcher-harness up --detach`)")
    kubeconfigs: dict[str, str] = state.get("kubeconfigs") or {}
    if cluster not in kubeconfigs:
        raise UsageError(f"--cluster {cluster}: environment {env!r} has {', '.join(kubeconfigs)}")
    return Path(kubeconfigs[cluster])


def compile_query(expression: str | None) -> CompiledExpression | None:
    """The ``--query`` expression with the scenarios' functions (``x509()``, ...:
    :mod:`harness.matching.functions`); :class:`UsageError` if it is invalid."""
    if expression is None:
        return None
    problem = expression_problem(f"({expression})")
    if problem is not None:
        raise UsageError(f"--query: {problem}")
    return compile_expression(expression)


# Reading -----------------------------------------------------------------------------------


async def read(config: Path, what: Target) -> Any:
    """The answer: the object, ``{"items": [...]}``, or the raw path's JSON."""
    from kubernetes_asyncio.config import new_client_from_config
    from kubernetes_asyncio.config.config_exception import ConfigException

    try:
        client = await new_client_from_config(config_file=str(config), persist_config=False)
    except (ConfigException, OSError, yaml.YAMLError, ValueError, KeyError, TypeError) as exc:
        # A malformed kubeconfig surfaces as any of these from the client's loader.
        problem = _one_line(str(exc)) or type(exc).__name__
        raise ReadError(f"kubeconfig {config} is not usable: {problem}") from None
    async with client as api:
        if what.path is not None:
            try:
                return await request(api, "GET", what.path, query=what.query)
            except NotFound:
                raise ReadError(f"{what.path}: not found") from None
        resource = what.resource
        if resource is None:
            assert what.api_version is not None and what.kind is not None
            try:
                resource = await discover(api, what.api_version, what.kind)
            except NotFound as exc:
                raise ReadError(_discovery_problem(what.api_version, exc)) from None
        namespace = what.namespace if resource.namespaced else None
        if what.name is None:
            items, _ = await list_objects(api, resource, namespace, label_selector=what.selector)
            return {"items": items}
        if resource.namespaced and namespace is None:
            raise UsageError(f"{resource.plural} are namespaced: give -n NAMESPACE with NAME")
        try:
            return await request(api, "GET", resource.path(namespace, what.name))
        except NotFound:
            raise ReadError(f"{what.describe()}: not found") from None


def _discovery_problem(api_version: str, exc: NotFound) -> str:
    if str(exc).startswith(f"{api_version} has no kind"):
        return str(exc)
    return f"the cluster serves no API {api_version}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def get(config: Path, what: Target) -> Any:
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):
            return await read(config, what)
    except TimeoutError:
        raise ReadError(f"no answer within {REQUEST_TIMEOUT:g} s") from None
    except KubeError as exc:
        if not exc.reached and exc.__cause__ is not None:  # refused, unresolvable, TLS
            raise ReadError(f"cannot reach the cluster: {_one_line(str(exc.__cause__))}") from None
        raise ReadError(_one_line(str(exc))) from None
    except aiohttp.ClientError as exc:
        raise ReadError(f"cannot reach the cluster: {_one_line(str(exc))}") from None


# The command -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    try:
        what = target(args)
        expression = compile_query(args.query)
        config = kubeconfig(args, os.environ)
        answer = asyncio.run(get(config, what))
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ReadError as exc:
        where = f"{args.cluster}: " if args.cluster else ""
        print(f"{parser.prog}: {where}{exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if expression is not None:
        try:
            answer = expression.search(answer)
        except jmespath.exceptions.JMESPathError as exc:
            print(f"{parser.prog}: --query {args.query!r}: {_one_line(str(exc))}", file=sys.stderr)
            return EXIT_NOT_FOUND
    indent = 2 if sys.stdout.isatty() else None
    print(json.dumps(answer, indent=indent))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.cli.get ...`` (what ``${{ harness.get }}`` runs)."""
    parser = argparse.ArgumentParser(prog="watcher-harness get")
    add_arguments(parser)
    # Intermixed: ``kymas -n kcp-system kyma-a`` reads like kubectl (plain parse_args
    # would take the positionals in one go and refuse the name after the option).
    return run(parser.parse_intermixed_args(argv))


if __name__ == "__main__":
    sys.exit(main())
