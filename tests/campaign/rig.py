"""The system the campaign strikes: real pipelines under two ``onceflow run``s on the
three-broker cluster, a source of every connector kind and a Spark job through every
sink.

- Run ``source`` (in a network namespace of its own when root, so the network faults
  can cut it off) runs ``counter``, a transactional sequence source of 2-3 tasks, and
  the ``files`` and ``kafka`` (mirror) sources of kit_sources.py.
- Run ``host`` runs ``changes``, a PostgreSQL CDC source of a table a loader keeps
  changing, the ``postgres`` incrementing source, and three SparkJobs reading
  ``counter``'s topic: ``copier`` through the exactly-once Kafka sink, ``rows``
  through the Postgres sink (the database is on the host's loopback, which a namespace
  cannot reach), ``archive`` through Spark's file sink.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import yaml

from tests.campaign.kit_sources import kit_sources, load_size
from tests.support.cdc import Loader, create_table, drop_slot, slot_released
from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import Namespace
from tests.support.onceflow_run import start_run, stop_run
from tests.support.proc import descendants, ended, signal_process
from tests.support.testbed import spark_jars
from tests.support.waiting import holds_within, wait_for

API = "onceflow.io/v1alpha1"
TRANSACTION_TIMEOUT_MS = 10_000
"""The source's: a zombie or a cut-off task is aborted by its coordinator after it."""
PARSED = (
    "SELECT get_json_object(CAST(value AS STRING), '$.stream') AS stream, "
    "CAST(get_json_object(CAST(value AS STRING), '$.seq') AS INT) AS seq FROM input"
)


@dataclass(frozen=True)
class CampaignSize:
    streams: int = 4
    per_stream: int = 450_000
    """Records per stream of the sequence source: the run's records are streams x this
    (and as many again through each sink). The source must outlast the faults (broker
    and task faults aim at its open transactions): 1,000 faults take about 75 minutes,
    and at the default pace it makes about 1.3M records in them, then the rest unpaced."""
    batch: int = 20
    poll_ms: int = 100
    """With ``batch``, the source's pace while faults strike: each task makes ``batch``
    records per poll at most (2-3 tasks: about 15 records a second per unit of batch on 2
    cores, measured at batch 40)."""
    cdc_rows: int = 2000
    cdc_pace_s: float = 2.5
    """The loader rests this long per 500 changes (about 200 changes a second): it
    changes the table until the faults are over."""
    spark: bool = True
    kit_records: int = 60_000
    """The scale of each kit source's load (kit_sources.py): lines times 2.5 (over five
    files), rows times 2, upstream records times 3; 60,000 keeps each of them busy
    through an hour of faults (about 40 lines, 35 rows and 50 records a second)."""

    @property
    def records(self) -> int:
        return self.streams * self.per_stream


class SourceTask(NamedTuple):
    """A live task of one of the rig's sources."""

    workload: str
    number: int
    """Its index among the source's tasks."""
    pid: int


class Run:
    """One ``onceflow run`` of the rig: its manifest, state and log, started again on
    the same state after a kill (as a restarted supervisor would be)."""

    def __init__(self, name: str, workdir: Path, launcher: tuple[str, ...] = ()) -> None:
        self.name, self.launcher = name, launcher
        self.manifest = workdir / f"{name}.yaml"
        self.state = workdir / f"{name}-state"
        self.log = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def write(self, documents: list[dict[str, Any]]) -> None:
        """The manifests, replaced whole: a run re-plans on the next look."""
        temporary = self.manifest.with_suffix(".tmp")
        temporary.write_text(yaml.safe_dump_all(documents))
        temporary.replace(self.manifest)

    def start(self) -> None:
        jars = str(Path(spark_jars()[0]).parent)
        self.process = start_run(
            self.manifest, self.state, self.log, launcher=self.launcher, ONCEFLOW_SPARK_JARS=jars
        )

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_run(self.process)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def assert_alive(self) -> None:
        """A run that ended by itself refused its manifests or failed: said at once."""
        if not self.alive():
            raise RuntimeError(f"onceflow run {self.name} ended:\n{self.log.read_text()[-3000:]}")

    def pids(self, workload: str) -> dict[str, int]:
        """What the run recorded of a workload's processes: tasks by index, a driver."""
        path = self.state / f"default.{workload}.pids.json"
        try:
            return {label: int(pid) for label, pid in json.loads(path.read_text()).items()}
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def record(self, source: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.state / f"default.{source}.json").read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def checkpoint(self, job: str) -> Path:
        return self.state / f"default.{job}.checkpoint"


class Rig:
    """The pipelines, their runs and their truth."""

    def __init__(
        self,
        cluster: KafkaCluster,
        dsn: str,
        workdir: Path,
        size: CampaignSize,
        namespace: Namespace | None = None,
        namespace_bootstrap: str | None = None,
    ) -> None:
        self.cluster, self.dsn, self.size, self.namespace = cluster, dsn, size, namespace
        self.bootstrap = cluster.bootstrap
        self.source_bootstrap = namespace_bootstrap or cluster.bootstrap
        self.name = f"cmp-{uuid.uuid4().hex[:6]}"
        self.counts = f"{self.name}.counts"
        self.copied = f"{self.name}.copied"
        self.changes = f"{self.name}.changes"
        self.rows_table = f"{self.name.replace('-', '_')}_rows"
        self.cdc_table = f"{self.name.replace('-', '_')}_cdc"
        self.slot = f"{self.name.replace('-', '_')}_slot"
        self.archive = workdir / "archive"
        self.tasks = 2
        self.trigger_s = 1
        self.sprinting = False
        self.source = Run("source", workdir, tuple(namespace.command()) if namespace else ())
        self.host = Run("host", workdir)
        self.workdir = workdir
        self.loader: Loader | None = None
        self.kits = kit_sources(self.name, self.bootstrap, dsn)

    # -- manifests -------------------------------------------------------------------

    def _pipeline(self, name: str, bootstrap: str) -> dict[str, Any]:
        spec = {"kafka": {"bootstrapServers": bootstrap}, "exactlyOnce": "enabled"}
        return {"apiVersion": API, "kind": "Pipeline", "metadata": {"name": name}, "spec": spec}

    def _kit_sources(self, run: str) -> list[dict[str, Any]]:
        """The kit sources of one run, under the same timeout as ``counter`` (a zombie
        or a cut-off task of theirs is aborted as soon)."""
        pipeline = f"{self.name}-src" if run == "source" else f"{self.name}-host"
        documents = []
        for kit in (k for k in self.kits if k.run == run):
            subject = kit.subject
            spec = {
                "pipeline": pipeline,
                "topic": kit.topic,
                "tasksMax": subject.tasks_max,
                "transactionBoundary": subject.boundary,
                "transactionTimeoutMs": TRANSACTION_TIMEOUT_MS,
                "connector": {"type": subject.connector, "config": kit.config},
            }
            if subject.interval_ms is not None:
                spec["transactionBoundaryIntervalMs"] = subject.interval_ms
            documents.append(
                {"apiVersion": API, "kind": "KafkaSource", "metadata": {"name": kit.workload},
                 "spec": spec}
            )  # fmt: skip
        return documents

    def source_documents(self) -> list[dict[str, Any]]:
        size = self.size
        config = {
            "streams": size.streams,
            "limit": size.per_stream,
            "batchSize": 1000 if self.sprinting else size.batch,
            "pollIntervalMs": 0 if self.sprinting else size.poll_ms,
        }
        source = {
            "pipeline": f"{self.name}-src",
            "topic": self.counts,
            "tasksMax": self.tasks,
            "exactlyOnceSupport": "required",
            "transactionBoundary": "interval",
            "transactionBoundaryIntervalMs": 1000,
            "transactionTimeoutMs": TRANSACTION_TIMEOUT_MS,
            "connector": {"type": "sequence", "config": config},
        }
        return [
            self._pipeline(f"{self.name}-src", self.source_bootstrap),
            {"apiVersion": API, "kind": "KafkaSource", "metadata": {"name": "counter"},
             "spec": source},
            *self._kit_sources("source"),
        ]  # fmt: skip

    def _spark_job(self, name: str, sql: str, sink: dict[str, Any]) -> dict[str, Any]:
        spec = {
            "pipeline": f"{self.name}-host",
            "input": {"topics": [self.counts], "maxOffsetsPerTrigger": 20_000},
            "transform": {"sql": sql},
            "sink": sink,
            "checkpoint": {"pvc": f"{name}-checkpoint"},  # a name only, under run
            "trigger": {"processingTime": f"{self.trigger_s}s"},
        }
        return {"apiVersion": API, "kind": "SparkJob", "metadata": {"name": name}, "spec": spec}

    def _postgres_sink(self) -> dict[str, Any]:
        return {"table": self.rows_table, "secretRef": {"name": "pg"}, "parallelism": 2}

    def host_documents(self) -> list[dict[str, Any]]:
        cdc = {
            "url": self.dsn,
            "mode": "cdc",
            "tables": [self.cdc_table],
            "slot": self.slot,
            "transactionsPerCommit": 25,
            "maxRecordsPerTransaction": 300,
        }
        documents = [
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg"},
             "stringData": {"dsn": self.dsn}},
            self._pipeline(f"{self.name}-host", self.bootstrap),
            {"apiVersion": API, "kind": "KafkaSource", "metadata": {"name": "changes"},
             "spec": {"pipeline": f"{self.name}-host", "topic": self.changes, "tasksMax": 1,
                      "transactionBoundary": "connector",
                      "connector": {"type": "postgres", "config": cdc}}},
            *self._kit_sources("host"),
        ]  # fmt: skip
        if self.size.spark:
            documents += [
                self._spark_job(
                    "copier",
                    "SELECT key, value FROM input",
                    {"kafka": {"topic": self.copied, "partitions": 2}},
                ),
                self._spark_job("rows", PARSED, {"postgres": self._postgres_sink()}),
                self._spark_job(
                    "archive",
                    "SELECT CAST(value AS STRING) AS value FROM input",
                    {"files": {"path": str(self.archive), "format": "json"}},
                ),
            ]
        return documents

    # -- life ------------------------------------------------------------------------

    def start(self, faults: int) -> None:
        """``faults``: how many the schedule holds, which the kit loads last through."""
        self.source.manifest.parent.mkdir(parents=True, exist_ok=True)
        kit_size = load_size(faults, self.size.kit_records)
        for kit in self.kits:
            kit.prepare(self.workdir, kit_size, self.bootstrap, self.source_bootstrap)
        create_table(self.dsn, self.cdc_table, self.size.cdc_rows)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {self.rows_table} (stream text, seq int)")
        self.source.write(self.source_documents())
        self.host.write(self.host_documents())
        self.source.start()
        self.host.start()
        size = self.size
        self.loader = Loader(self.dsn, self.cdc_table, size.cdc_rows, 10**9, size.cdc_pace_s)
        self.loader.start()
        for kit in self.kits:
            assert kit.load is not None
            kit.load.start()
        wait_for(self.running, 180, "the sources' tasks")

    def running(self) -> bool:
        """Both runs alive (or an error saying why not) and every source task running."""
        self.source.assert_alive()
        self.host.assert_alive()
        wanted = {"counter": self.tasks, **{k.workload: k.subject.tasks_max for k in self.kits}}
        found = {workload: 0 for workload in wanted}
        for task in self.source_tasks():
            found[task.workload] += 1
        return found == wanted

    def end_load(self) -> None:
        """No more changes to the CDC table: its final state is the truth from now. The
        kit loads make their last changes and end."""
        assert self.loader is not None
        self.loader.end_early()
        self.loader.join(120)
        if self.loader.error is not None:
            raise RuntimeError("the CDC table's loader failed") from self.loader.error
        for kit in self.kits:
            kit.release()

    def drop_tables(self) -> None:
        """Once judged: a million-row table per campaign would pile up in the test
        bed's database."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in (self.cdc_table, self.rows_table):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def stop(self) -> None:
        if self.loader is not None:
            self.loader.end_early()
        self.source.stop()
        self.host.stop()
        # The slot stays active until its walsender notices the task has gone.
        holds_within(lambda: slot_released(self.dsn, self.slot), 60)
        drop_slot(self.dsn, self.slot)
        for kit in self.kits:
            if kit.load is not None:
                kit.load.released.set()
            kit.subject.close()

    # -- what faults aim at ----------------------------------------------------------

    def run_of(self, workload: str) -> Run:
        kit = next((k for k in self.kits if k.workload == workload), None)
        return self.host if kit is not None and kit.run == "host" else self.source

    def source_tasks(self, run: Run | None = None) -> list[SourceTask]:
        """The live tasks of every source (``run``: of that run's only)."""
        found = []
        for workload in ["counter", *(k.workload for k in self.kits)]:
            owner = self.run_of(workload)
            if run is None or owner is run:
                found += [
                    SourceTask(workload, int(label), pid)
                    for label, pid in owner.pids(workload).items()
                    if not ended(pid)
                ]
        return found

    def task_pids(self) -> dict[int, int]:
        """``counter``'s live task processes by task index."""
        return {t.number: t.pid for t in self.source_tasks() if t.workload == "counter"}

    def transactional_id(self, task: SourceTask) -> str:
        record = self.run_of(task.workload).record(task.workload) or {}
        return str(record["transactionalIds"][task.number])

    def driver_pid(self, job: str) -> int | None:
        pid = self.host.pids(job).get("driver")
        return pid if pid is not None and not ended(pid) else None

    def python_workers(self, job: str) -> list[int]:
        """The driver JVM's Python workers (``pyspark.daemon`` and its forks): where the
        sink's code runs, what an executor's loss takes."""
        driver = self.driver_pid(job)
        if driver is None:
            return []
        found = []
        for pid in descendants(driver):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:  # gone, or going (ESRCH while it exits)
                continue
            if b"pyspark.daemon" in command or b"pyspark.worker" in command:
                found.append(pid)
        return found

    def set_tasks(self, tasks: int) -> None:
        self.tasks = tasks
        self.source.write(self.source_documents())

    def mend(self) -> None:
        """Undoes whatever a strike that failed midway may have left: brokers down or
        paused, the namespace cut off or degraded, tasks stopped, the run killed."""
        self.cluster.restore()
        if self.namespace is not None:
            self.namespace.heal()
            with suppress(subprocess.CalledProcessError):  # no shaping left to undo
                self.namespace.restore_link()
        for task in self.source_tasks():
            signal_process(task.pid, signal.SIGCONT)
        if not self.source.alive():
            self.source.start()

    def sprint(self) -> None:
        """The source unpaced, once the faults are over: the rest of its records as
        fast as it can, so that a run sized to outlast its faults ends soon after."""
        self.sprinting = True
        self.source.write(self.source_documents())

    def set_trigger(self, seconds: int) -> None:
        self.trigger_s = seconds
        self.host.write(self.host_documents())
