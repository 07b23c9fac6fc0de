"""The ``onceflow`` command: the user's API, changed deliberately.

User commands (``run``, ``render``, ``audit``, ``transactions``, ``version``,
``completion``) are listed
in help; the commands Onceflow's own pods and build run (``operator``, ``task``,
``spark-job``, ``crds``) work the same but are named only in the epilog, as kubectl
keeps its plumbing out of the first screen.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from onceflow.api import InvalidResourceError
from onceflow.api.manifests import is_core_object
from onceflow.cli_completion import SHELLS
from onceflow.cli_offsets import add_offsets_command
from onceflow.cli_transactions import add_transactions_command, kafka_config_problem
from onceflow.manifest_files import ManifestFileError, ManifestSources
from onceflow.model.objects import DEFAULT_TASK_IMAGE, WorkloadImage
from onceflow.processes.lifeline import SUPERVISOR_PID_HELP
from onceflow.processes.stop_signals import stop_on_signals, unblock_inherited_stop_signals

EXIT_CODES_HELP = "exit codes: 0 stopped or superseded, 75 fenced while current, 1 error"


def _follow_supervisor(args: argparse.Namespace) -> None:
    if args.supervisor_pid is not None:
        from onceflow.processes.lifeline import die_with_supervisor

        die_with_supervisor(args.supervisor_pid)


def _cmd_task(args: argparse.Namespace) -> int:
    from onceflow.runtime.process import run_task_process

    _follow_supervisor(args)
    return run_task_process(args.config)


def _cmd_run(args: argparse.Namespace) -> int:
    from onceflow.standalone.supervisor import StateDirLockedError, Supervisor

    # The supervisor fences and reads offsets with blocking client calls on this thread.
    stop = stop_on_signals()
    supervisor = Supervisor(
        ManifestSources.of(_manifests(args), sys.stdin),
        bootstrap=args.bootstrap,
        state_dir=Path(args.state_dir),
        progress=not args.quiet,
        say=lambda line: print(line, flush=True),
    )
    try:
        supervisor.run(stop)
    except (InvalidResourceError, StateDirLockedError, ManifestFileError) as error:
        print(_refusal(error), file=sys.stderr)
        return 1
    return 0


def _refusal(error: Exception) -> str:
    """``run`` and ``render`` refuse manifests in the same words: one problem a line
    when there are several (a manifest set can have many, each naming its resource)."""
    if isinstance(error, InvalidResourceError) and len(error.problems) > 1:
        return "\n  ".join([f"error: {error.resource} is invalid:", *map(str, error.problems)])
    return f"error: {error}"


def _cmd_audit(args: argparse.Namespace) -> int:
    if args.expect is not None and args.keys is None and not args.expect_key:
        # Without the key set, an empty topic or a stream that never arrived would pass.
        print(
            "onceflow audit: --expect needs the keys it applies to: add --keys N (how many"
            " keys must exist) or --expect-key K for each key",
            file=sys.stderr,
        )
        return 2
    if problem := kafka_config_problem("audit", args.kafka_config):
        print(problem, file=sys.stderr)
        return 2
    from onceflow.eos.audit_reader import read_sequences
    from onceflow.eos.clients import mounted_secret
    from onceflow.logic.audit import audit_sequences
    from onceflow.report import audit_json, audit_table

    pairs, unparsable = read_sequences(
        args.bootstrap,
        args.topic,
        key_field=args.key,
        seq_field=args.seq,
        extra=mounted_secret(args.kafka_config),
        isolation=args.isolation,
        timeout_s=args.timeout,
    )
    report = audit_sequences(
        pairs,
        expect=args.expect,
        expected_keys=args.expect_key or (),
        key_count=args.keys,
        unparsable=unparsable,
    )
    print(
        json.dumps(audit_json(report), indent=2)
        if args.json
        else audit_table(report, args.topic, args.isolation)
    )
    return 0 if report.ok else 1


def _cmd_operator(args: argparse.Namespace) -> int:
    import logging
    import os
    import random

    # Before kopf or kubernetes are imported: the client reads KUBECONFIG at import.
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    for option in ("port", "addr", "host", "cert", "key", "ca", "cert_secret", "configuration"):
        value = getattr(args, f"webhook_{option}")
        if value:
            os.environ[f"ONCEFLOW_WEBHOOK_{option.upper()}"] = str(value)
    if args.namespace:
        os.environ["ONCEFLOW_NAMESPACES"] = ",".join(args.namespace)
    from onceflow.control.heap import return_large_blocks_to_os

    return_large_blocks_to_os()
    import kopf

    import onceflow.handlers  # noqa: F401 - registers the handlers with kopf

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    if not args.verbose:
        # kopf logs every successful timer tick at INFO: once a second per object.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if not args.standalone:
        from onceflow.control.kube import KubeClient, load_config

        KubeClient(load_config(args.kubeconfig)).ensure_peering(
            args.peering, args.namespace or [], args.peering_owner
        )
    if args.metrics_port:
        from onceflow.control.operator_metrics import serve

        serve(args.metrics_port)
    # Peers of equal priority would all pause; a random one makes exactly one active.
    priority = args.priority if args.priority is not None else random.randint(1, 10**6)
    kopf.run(
        standalone=args.standalone,
        namespaces=args.namespace or [],
        clusterwide=not args.namespace,
        priority=priority,
        # Naming a peering makes kopf insist on it; a standalone operator has none.
        peering_name=None if args.standalone else args.peering,
        liveness_endpoint=args.liveness,
    )
    return 0


def _manifest_arguments(command: argparse.ArgumentParser) -> None:
    files = "files or directories of Onceflow resources (and Secrets, ConfigMaps); - for stdin"
    command.add_argument("manifests", nargs="*", help=files)
    command.add_argument(
        "-f", "--filename", action="append", help="as the positional ones (repeatable)"
    )


def _cmd_render(args: argparse.Namespace) -> int:
    import yaml

    from onceflow.api import parse_resources
    from onceflow.logic.tenant_policy import policy_from
    from onceflow.render import render_resources

    try:
        # Secrets, ConfigMaps and claims beside the resources are the user's to apply:
        # nothing the operator creates, so nothing to preview.
        documents = [
            d
            for d in ManifestSources.of(_manifests(args), sys.stdin).documents()
            if d and not is_core_object(d)
        ]
        # The operator's tenant policy, from the same variables the chart sets on it.
        policy = policy_from(os.environ)
        # The chart's pull secrets too, from the variable the chart sets on the operator.
        image = WorkloadImage.from_environment(os.environ)
        if args.image:
            image = replace(image, default=args.image)
        objects = render_resources(parse_resources(documents), args.generation, image, policy)
    except (InvalidResourceError, ManifestFileError) as error:
        print(_refusal(error), file=sys.stderr)
        return 1
    if args.output == "json":
        listed = {"apiVersion": "v1", "kind": "List", "items": objects}
        print(json.dumps(listed, indent=2))
    else:
        print(yaml.dump_all(objects, Dumper=block_text_dumper(yaml), sort_keys=False), end="")
    return 0


def _manifests(args: argparse.Namespace) -> list[str]:
    """Positional files and ``-f`` ones, in the order given (kubectl's -f)."""
    return [*(args.filename or []), *args.manifests]


def _cmd_spark_job(args: argparse.Namespace) -> int:
    from onceflow.spark.driver_main import run_driver

    return run_driver(args.config, args.supervisor_pid)


def _cmd_crds(args: argparse.Namespace) -> int:
    import yaml

    from onceflow.api.crd import crd_documents

    out = Path(args.directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, document in crd_documents().items():
        (out / name).write_text(render_yaml(document, yaml))
        print(f"wrote {out / name}")
    if args.reference:
        from onceflow.api.field_reference import (
            example_documents,
            examples_by_kind,
            field_reference,
        )

        documents = example_documents(Path(args.examples))
        reference = Path(args.reference)
        reference.parent.mkdir(parents=True, exist_ok=True)
        reference.write_text(field_reference(examples_by_kind(documents)))
        print(f"wrote {reference}")
    return 0


def block_text_dumper(yaml: Any) -> Any:
    """A safe dumper writing multi-line strings (task configs) as readable blocks."""

    class BlockTextDumper(yaml.SafeDumper):  # type: ignore[misc]
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    BlockTextDumper.add_representer(str, text)
    return BlockTextDumper


def render_yaml(document: object, yaml: Any) -> str:
    header = "# Generated from onceflow.api by `make crds`; do not edit.\n"
    return header + str(yaml.safe_dump(document, sort_keys=False, width=100))


def _add_child_command(
    commands: Any, name: str, help_text: str, settings: str, handler: Any, epilog: str = ""
) -> None:
    """A command that runs one workload process from a settings file (pods and
    ``onceflow run`` start these)."""
    command = commands.add_parser(name, description=help_text, epilog=epilog or None)
    command.add_argument("--config", required=True, help=f"{settings} JSON file")
    command.add_argument("--supervisor-pid", type=int, help=SUPERVISOR_PID_HELP)
    command.set_defaults(handler=handler)


def _version() -> str:
    from importlib.metadata import version

    return version("onceflow")


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"onceflow {_version()}")
    return 0


def _add_crds_command(commands: Any) -> None:
    crds = commands.add_parser("crds", description="write the CRDs generated from the models")
    crds.add_argument("directory", help="output directory (crds/ in the repository)")
    crds.add_argument("--reference", help="also write the field reference page to this file")
    crds.add_argument(
        "--examples", default="examples", help="directory of example manifests for the reference"
    )
    crds.set_defaults(handler=_cmd_crds)


INTERNAL_COMMANDS_HELP = """\
Commands Onceflow itself runs (each has --help): operator (the chart's Deployment),
task and spark-job (a source task's and a Spark driver's pod), crds (`make crds`)."""


def _cmd_completion(args: argparse.Namespace) -> int:
    from onceflow.cli_completion import completion_script

    print(completion_script(build_parser(), args.shell), end="")
    return 0


def _add_user_commands(commands: Any) -> None:
    commands.add_parser("version", help="print the version").set_defaults(handler=_cmd_version)

    run = commands.add_parser(
        "run", help="run the pipelines of manifests on this machine (sources and Spark jobs)"
    )
    _manifest_arguments(run)
    run.add_argument("--bootstrap", help="override spec.kafka.bootstrapServers")
    run.add_argument("--state-dir", default=".onceflow/standalone", help="durable state")
    run.add_argument("--quiet", action="store_true", help="no periodic progress lines")
    run.set_defaults(handler=_cmd_run)

    render = commands.add_parser("render", help="print the objects the operator would create")
    _manifest_arguments(render)
    render.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="output format"
    )
    render.add_argument("--generation", type=int, default=1, help="generation to render")
    render.add_argument(
        "--image", help=f"image of workloads that name none (default: {DEFAULT_TASK_IMAGE})"
    )
    render.set_defaults(handler=_cmd_render)

    audit = commands.add_parser(
        "audit",
        help="check a topic for duplicates, gaps and order violations per key",
        epilog="exit code 1 when any violation is found",
    )
    audit.add_argument("--bootstrap", required=True)
    audit.add_argument("--topic", required=True)
    audit.add_argument(
        "--kafka-config",
        metavar="DIR",
        help="librdkafka settings, one file each (a Pipeline's auth Secret, mounted)",
    )
    audit.add_argument("--key", default="stream", help="JSON field naming the key")
    audit.add_argument("--seq", default="seq", help="JSON field with the 1-based sequence")
    audit.add_argument("--expect", type=int, help="every key must reach exactly this number")
    audit.add_argument("--expect-key", action="append", help="a key that must be present")
    audit.add_argument("--keys", type=int, help="how many distinct keys must be present")
    audit.add_argument(
        "--isolation", default="read_committed", choices=["read_committed", "read_uncommitted"]
    )
    audit.add_argument("--timeout", type=float, default=120.0, help="seconds to reach the end")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(handler=_cmd_audit)
    add_transactions_command(commands)
    add_offsets_command(commands)

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        epilog="bash: source <(onceflow completion bash); zsh: source <(onceflow completion zsh)",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(handler=_cmd_completion)


def _add_internal_commands(commands: Any) -> None:
    """Added without ``help``: argparse then leaves them out of the command list (3.11
    prints ``==SUPPRESS==`` for a suppressed one)."""
    _add_child_command(
        commands, "task", "run one source task", "TaskSettings", _cmd_task, EXIT_CODES_HELP
    )

    _add_child_command(
        commands,
        "spark-job",
        "run a SparkJob's streaming query",
        "SparkJobSettings",
        _cmd_spark_job,
    )

    _add_crds_command(commands)

    operator = commands.add_parser("operator", description="run the Kubernetes operator (kopf)")
    operator.add_argument("--namespace", action="append", help="watch only these namespaces")
    operator.add_argument("--kubeconfig", help="default: in-cluster, then ~/.kube/config")
    operator.add_argument("--peering", default="onceflow", help="KopfPeering object name")
    operator.add_argument(
        "--peering-owner",
        help="the Role (namespaced) or ClusterRole whose deletion removes the peering",
    )
    operator.add_argument("--priority", type=int, help="peering priority (default: random)")
    operator.add_argument(
        "--standalone", action="store_true", help="no peering: only for a single replica"
    )
    operator.add_argument("--liveness", help="e.g. http://0.0.0.0:8080/healthz")
    operator.add_argument(
        "--metrics-port", type=int, default=0, help="serve Prometheus /metrics here (0: off)"
    )
    operator.add_argument("--webhook-port", type=int, help="serve the validating webhook")
    operator.add_argument("--webhook-addr", help="listen address (default 0.0.0.0)")
    operator.add_argument("--webhook-host", help="host name the API server calls")
    operator.add_argument("--webhook-cert", help="TLS certificate file")
    operator.add_argument("--webhook-key", help="TLS private key file")
    operator.add_argument("--webhook-ca", help="CA bundle the API server trusts")
    operator.add_argument(
        "--webhook-cert-secret",
        help="NAMESPACE/NAME of the Secret holding the webhook's own CA and certificate "
        "(created and renewed by the operator; instead of --webhook-cert/--webhook-key)",
    )
    operator.add_argument(
        "--webhook-configuration",
        help="ValidatingWebhookConfiguration whose caBundle the operator fills in",
    )
    operator.add_argument("--verbose", action="store_true")
    operator.set_defaults(handler=_cmd_operator)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onceflow",
        description="Exactly-once Kafka sources and PySpark jobs: run pipelines on this\n"
        "machine, render what the operator would create, audit a topic.",
        epilog=INTERNAL_COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"onceflow {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_user_commands(commands)
    _add_internal_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A child of `onceflow run` starts with its parent's stop signals blocked.
    unblock_inherited_stop_signals()
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code
