"""``onceflow offsets list|alter|reset``: a stopped source's offsets, and a change of
them (Kafka Connect's KIP-875), on a cluster or for ``onceflow run``.

On a cluster ``list`` prints what the stopped source's status holds, and ``alter`` and
``reset`` write ``spec.offsetsChange`` with the given id, then wait for the operator's
outcome: the operator applies it, transactionally, once the source's generation is
fenced (``kubectl`` or Git can write the same field). With manifests (``-f``), ``list``
reads the offsets topic itself, and ``alter``/``reset`` print the field to add to the
source's manifest, which ``onceflow run`` then applies the same way.

``list`` prints YAML in the shape ``spec.offsetsChange.offsets`` takes: edit a copy and
hand it to ``alter --offsets FILE``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

WAIT_S = 60.0


def add_offsets_command(commands: Any) -> None:
    offsets = commands.add_parser(
        "offsets", help="list a stopped source's offsets, and change them (alter, reset)"
    )
    actions = offsets.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the offsets of a stopped source, as YAML")
    listing.set_defaults(handler=_cmd_list)
    alter = actions.add_parser("alter", help="set offsets of a stopped source")
    alter.add_argument(
        "--offsets", required=True, metavar="FILE", help="YAML list as `offsets list` prints it"
    )
    alter.set_defaults(handler=_cmd_change, reset=False)
    reset = actions.add_parser("reset", help="forget every offset of a stopped source")
    reset.add_argument("--offsets", metavar="FILE", help="offsets to set after forgetting")
    reset.set_defaults(handler=_cmd_change, reset=True)
    for action in (alter, reset):
        action.add_argument(
            "--id", required=True, help="names the change; applied once per id (required)"
        )
        action.add_argument(
            "--wait", type=float, default=WAIT_S, help="seconds to wait for the outcome"
        )
    for action in (listing, alter, reset):
        action.add_argument("--source", required=True, help="the KafkaSource's name")
        action.add_argument("-n", "--namespace", default="default")
        action.add_argument(
            "-f",
            "--filename",
            action="append",
            help="manifests of `onceflow run` (instead of a cluster); repeatable",
        )
        action.add_argument("--kubeconfig", help="cluster access (default: as kubectl finds it)")
    listing.add_argument("--bootstrap", help="with -f: another broker than the Pipeline's")
    listing.add_argument(
        "--state-dir", default=".onceflow/standalone", help="with -f: run's state directory"
    )


def _cmd_list(args: argparse.Namespace) -> int:
    try:
        entries = _from_manifests(args) if args.filename else _from_cluster(args)
    except LookupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(yaml.safe_dump(entries, sort_keys=False) if entries else "[]", end="")
    return 0


def _from_cluster(args: argparse.Namespace) -> list[dict[str, Any]]:
    from onceflow.control.kube import load_config
    from onceflow.control.offsets_requests import OffsetsRequestError, listed_offsets

    try:
        return listed_offsets(load_config(args.kubeconfig), args.namespace, args.source)
    except OffsetsRequestError as error:
        raise LookupError(str(error)) from None


def _from_manifests(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Read from the offsets topic: under ``onceflow run`` the caller reaches its broker,
    and a source it has stopped writes nothing meanwhile."""
    from onceflow.api import parse_resources
    from onceflow.api.manifests import is_core_object
    from onceflow.api.pipeline import WorkloadState
    from onceflow.eos.offset_changes import listed
    from onceflow.eos.offsets import read_offsets
    from onceflow.logic.resource_set import ResourceSet
    from onceflow.manifest_files import ManifestSources
    from onceflow.model.names import offsets_topic
    from onceflow.standalone.state import load_record, state_path

    documents = ManifestSources.of(args.filename, sys.stdin).documents()
    found = ResourceSet.of(parse_resources(d for d in documents if d and not is_core_object(d)))
    source = found.sources.get((args.namespace, args.source))
    pipeline = found.pipeline_of(source) if source is not None else None
    if source is None or pipeline is None:
        raise LookupError(f"no KafkaSource {args.namespace}/{args.source} with its Pipeline")
    topic = offsets_topic(pipeline, source)
    path = state_path(Path(args.state_dir), args.namespace, args.source)
    record = load_record(path, lambda count: (), topic) if path.exists() else None
    if record is not None and not record.stopped:
        fencing = ", being fenced" if record.state is WorkloadState.STOPPED else ""
        raise LookupError(
            f"KafkaSource {args.namespace}/{args.source} is not stopped (state "
            f"{record.state.value}{fencing}): its offsets move; set spec.state: stopped, "
            "apply, and wait for `run` to say it stopped"
        )
    stored = read_offsets(
        args.bootstrap or pipeline.spec.kafka.bootstrap_servers,
        record.offsets_topic if record else topic,
        f"{args.namespace}/{args.source}",
        legacy_owner=args.source,
    )
    return listed(stored.by_partition)


def _cmd_change(args: argparse.Namespace) -> int:
    from onceflow.api.source import OffsetsChange

    try:
        offsets = yaml.safe_load(Path(args.offsets).read_text()) if args.offsets else []
        change = OffsetsChange.model_validate(
            {"id": args.id, "reset": args.reset, "offsets": offsets or []}
        )
    except (OSError, yaml.YAMLError, ValidationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.filename:
        fragment = yaml.safe_dump({"spec": {"offsetsChange": change.to_wire()}}, sort_keys=False)
        print(f"# add to KafkaSource {args.source} (with spec.state: stopped):\n{fragment}", end="")
        return 0
    return _request(args, change)


def _request(args: argparse.Namespace, change: Any) -> int:
    from onceflow.api.source import OffsetsChangeResult
    from onceflow.control.kube import load_config
    from onceflow.control.offsets_requests import OffsetsRequestError, request_change

    try:
        outcome = request_change(
            load_config(args.kubeconfig), args.namespace, args.source, change, args.wait
        )
    except OffsetsRequestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if outcome is None:
        print(f"{change.id}: asked; no outcome within {args.wait:.0f} s (see status)")
        return 1
    print(f"{outcome.id}: {outcome.result.value}: {outcome.message}")
    return 0 if outcome.result is OffsetsChangeResult.APPLIED else 1
